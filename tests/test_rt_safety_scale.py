"""Issue 31: the certified-safety property on 10,000 random certified scenarios (slow), and the plain-Python
counterexample search on a few (fast). The adversary-redrawn fuzz regression of the held-accelerator bug is
``test_rt_safety.py::test_an_adversary_redrawn_every_step_never_breaks_the_reference_invariant``."""

from __future__ import annotations

import pytest
from conftest import RT_TEST_PLATFORM

from respect_jax.realtime.evaluate import fuzz_redrawn_adversary, safety_at_scale
from respect_jax.realtime.experiment import scenario_preset as preset
from respect_jax.realtime.generator import generate, grid_configs
from respect_jax.realtime.platform import platform_from_dict

PLATFORM = platform_from_dict(RT_TEST_PLATFORM)
GRID = grid_configs(preset("u50_balanced"), [0.3, 0.5, 0.7, 0.85, 0.95], [0.25, 0.5, 0.75], max_tries=5000)


def test_counterexample_search_finds_nothing_on_tight_deadlines():
    tight = [c.__class__(**{**c.__dict__, "deadline_factor": (0.4, 0.7)}) for c in GRID[3:6]]  # U = 0.5
    scs = [s for j, c in enumerate(tight) for s in generate(c, PLATFORM, 3, seed=(5, j))[0]]
    res = fuzz_redrawn_adversary(scs, seed=1)
    assert res["episodes"] == 9 and res["decisions"] > 100
    assert res["hrt_missed"] == 0 and res["violations"] == []


@pytest.mark.slow
def test_no_hrt_miss_on_10000_certified_scenarios_for_every_policy():
    policies = ["adversarial", "oracle_adversary", "random", "edf", "cpls", "edf_aff", "cpls_cert"]
    res = safety_at_scale(GRID, PLATFORM, 10_000, policies, seed=7, chunk=1000)
    assert res["scenarios"] == 10_000 and res["invalid"] == []
    for name, t in res["policies"].items():
        assert t["hrt_jobs"] > 30_000, name
        assert t["hrt_missed"] == 0 and t["violations"] == 0 and t["unfinished"] == 0, name
    assert res["policies"]["oracle_adversary"]["overrides"] > res["policies"]["edf"]["overrides"]
