"""The shared evaluator as the solvers use it: batched over schedules, and the cheap bound in float64.

Nothing here has its own cost formula: :data:`evaluate_batch` is :func:`respect_jax.costs.evaluate` vmapped
over schedules, and :func:`objective_lower_bound_np` is :func:`respect_jax.costs.lower_bound_from_totals` on
a NumPy graph.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.costs import evaluate, lower_bound_from_totals, objective_value
from respect_jax.graphs.graph import Graph


def objective_lower_bound_np(graph: Graph, hw, objective: str, lam: float = 1.0) -> float:
    """``costs.objective_lower_bound`` in float64 on a :class:`Graph` (same formula, one definition).

    Used to choose a numerical scale for the models and as a fallback proven bound.
    """
    counts = {"paper": graph.params, "latency": graph.macs}.get(objective)
    if counts is None:
        raise ValueError(f"unknown objective {objective!r}; choose one of paper, latency")
    counts = counts.astype(np.float64)
    return float(lower_bound_from_totals(float(counts.sum()), float(counts.max(initial=0.0)), hw, objective))


evaluate_batch = jax.jit(jax.vmap(evaluate, in_axes=(None, 0, None)))
"""The shared evaluator vmapped over schedules: ``(PaddedGraph, i32[B, N_pad], hw) -> Metrics[B]``."""

EVAL_ROWS = 16
"""Batch size the heuristics pad their :data:`evaluate_batch` calls to (one compilation per graph
bucket and K serves the greedy and the profiling partitioner)."""


def evaluate_positions(padded, stages: np.ndarray, hw, objective: str, lam: float = 1.0) -> np.ndarray:
    """f64[B] the objective of each schedule ``stages`` (i32[B, N_pad], by position) of one padded graph.

    One call of :data:`evaluate_batch` (compiles once per bucket, B and K).
    """
    metrics = evaluate_batch(padded, jnp.asarray(stages, dtype=jnp.int32), hw)
    return np.asarray(objective_value(metrics, objective, lam), dtype=np.float64)
