"""Decode padded batches with a policy and score them (used by the training loop and respect-eval).

"% optimal" here is the one definition of the project (:func:`respect_jax.solvers.base.matches_reference`):
the share of graphs whose decoded objective is within ``OPTIMAL_RTOL`` (relative) of the reference objective.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.costs import Hardware, objective_lower_bound
from respect_jax.policy.decoding import Decoding, make_decoder
from respect_jax.policy.model import SchedulingPolicy
from respect_jax.solvers.base import matches_reference
from respect_jax.train.data import LabelledBatch


@dataclass
class DecodedSet:
    """Per-graph results of decoding one :class:`LabelledBatch` (NumPy, leading axis D).

    stage: i32[D, N] by position; objective, bound, reference: f32[D]; valid: bool[D];
    time_s: wall-clock seconds of the whole batch after compilation; compile_s: first-call overhead.
    """

    stage: np.ndarray
    objective: np.ndarray
    valid: np.ndarray
    bound: np.ndarray
    reference: np.ndarray
    time_s: float
    compile_s: float

    @property
    def gap(self) -> np.ndarray:
        return self.objective / self.reference - 1.0

    @property
    def optimal(self) -> np.ndarray:
        return matches_reference(self.objective, self.reference)


def _take(tree, idx):
    return jax.tree.map(lambda x: x[idx], tree)


def decode_set(
    model: SchedulingPolicy,
    data: LabelledBatch,
    hw: Hardware,
    objective: str,
    lam: float,
    decoding: Decoding,
    batch_size: int,
    key: jax.Array,
    decoder=None,
) -> DecodedSet:
    """Decode every graph of ``data`` in chunks of ``batch_size`` (the last chunk padded by repeats).

    ``decoder`` may pass a ``(run, params)`` pair from :func:`make_decoder` to reuse a compilation.
    """
    run, params = decoder if decoder is not None else make_decoder(model, hw, objective, lam, decoding)
    d = data.size
    bs = min(batch_size, d)
    bound = np.asarray(jax.vmap(objective_lower_bound, in_axes=(0, None, None))(data.graphs, hw, objective))
    stages, objs, valids = [], [], []
    compile_s, time_s = 0.0, 0.0
    for chunk, start in enumerate(range(0, d, bs)):
        idx = np.minimum(np.arange(start, start + bs), d - 1)
        graphs = _take(data.graphs, jnp.asarray(idx))
        k = jax.random.fold_in(key, chunk)
        if chunk == 0:  # compile (and warm up) outside the timed region
            t0 = time.perf_counter()
            jax.block_until_ready(run(params, graphs, k))
            compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = jax.block_until_ready(run(params, graphs, k))
        time_s += time.perf_counter() - t0
        real = min(bs, d - start)
        stages.append(np.asarray(out.stage)[:real])
        objs.append(np.asarray(out.objective)[:real])
        valids.append(np.asarray(out.valid)[:real])
    return DecodedSet(
        stage=np.concatenate(stages),
        objective=np.concatenate(objs),
        valid=np.concatenate(valids),
        bound=bound,
        reference=np.asarray(data.reference),
        time_s=time_s,
        compile_s=compile_s,
    )


def summarise(decoded: list[DecodedSet]) -> dict:
    """Aggregate metrics over several decoded buckets: ratio to the bound, gap, % optimal, validity."""
    obj = np.concatenate([d.objective for d in decoded])
    ref = np.concatenate([d.reference for d in decoded])
    bound = np.concatenate([d.bound for d in decoded])
    valid = np.concatenate([d.valid for d in decoded])
    out = {
        "graphs": int(obj.size),
        "valid_pct": float(100.0 * valid.mean()),
        "ratio_to_bound": float(np.mean(obj / bound)),
        "time_s": float(sum(d.time_s for d in decoded)),
    }
    has_ref = np.isfinite(ref)
    if has_ref.any():
        gap = obj[has_ref] / ref[has_ref] - 1.0
        out.update(
            gap_mean_pct=float(100.0 * gap.mean()),
            gap_max_pct=float(100.0 * gap.max()),
            optimal_pct=float(100.0 * np.mean(matches_reference(obj[has_ref], ref[has_ref]))),
        )
    return out
