"""One definition of "% optimal": a schedule is optimal when it matches its reference within OPTIMAL_RTOL,
counted the same way by respect-eval's aggregates and the training evaluation's summary."""

from __future__ import annotations

import numpy as np

from respect_jax.policy_evaluation import _stats
from respect_jax.solvers.base import OPTIMAL_RTOL, matches_reference
from respect_jax.train.evaluation import DecodedSet, summarise


def test_matches_reference_is_relative_and_never_matches_nan():
    assert OPTIMAL_RTOL == 1e-6
    assert matches_reference(100.0, 100.0) and matches_reference(100.00009, 100.0)
    assert not matches_reference(100.0002, 100.0) and not matches_reference(1.0, float("nan"))
    assert matches_reference(90.0, 100.0)  # better than the reference (a lower bound's slack, a weak label)
    np.testing.assert_array_equal(matches_reference(np.array([1.0, 1.5]), np.array([1.0, 1.0])), [True, False])


def test_respect_eval_and_training_summary_count_optimal_alike():
    ref = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    obj = ref * np.array([1.0, 1 + 4e-7, 1 + 5e-6, 0.99, 1.2], np.float32)
    decoded = DecodedSet(stage=np.zeros((5, 3), np.int32), objective=obj, valid=np.ones(5, bool),
                         bound=ref / 2, reference=ref, time_s=0.0, compile_s=0.0)  # fmt: skip
    np.testing.assert_array_equal(decoded.optimal, [True, True, False, True, False])
    training = summarise([decoded])["optimal_pct"]
    evaluation = _stats(obj / ref - 1.0, matches_reference(obj, ref), np.ones(5, bool), np.zeros(5))["optimal_pct"]
    assert training == evaluation == 60.0
