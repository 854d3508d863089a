"""Cheap analytic lower bounds on the SPEC objectives (NumPy, O(N + E)), valid for every valid schedule.

They make a certified gap ``(objective - bound) / objective`` finite even when no exact solver proved
anything in time (``solver=auto`` reports the best of these and the exact solver's bound). Notation of
:mod:`respect_jax.costs`: K stages, ``mem_k``, ``spill_k = max(0, mem_k - C)``, ``T_k = tau + macs_k / R
+ spill_k / H + in_k / L``.

``latency`` (the bottleneck ``max_k T_k``), the largest of:

* the node bound: the stage holding node v has ``T >= tau + macs_v / R + max(0, b_p params_v - C) / H``
  (its memory is at least v's own);
* the average bound: ``max_k T_k >= mean_k T_k >= tau + (sum macs / R + max(0, b_p sum params - K C) / H) / K``,
  because ``sum_k max(0, mem_k - C) >= max(0, sum_k mem_k - K C)`` (convexity) and ``in_k >= 0``.

``paper`` (``max_k mem_k + lam * comm``), the larger of:

* the memory bound ``m = b_p * max(sum params / K, max params)`` (``comm >= 0``);
* the split bound ``min(b_p * sum params, m + lam * b_a * min_u output_size_u)``: either one stage holds every
  parameter, or the first stage a that holds some has more parameters after it; then the nodes on stages
  ``<= a`` form a non-empty downset D, and a node of D with no successor in D (D has one: it is finite) is a
  graph output or has a consumer on a later stage, so its tensor crosses boundary a + 1.

Both are weak on communication-heavy graphs; the exact solvers' LP relaxations improve on them.
"""

from __future__ import annotations

import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph


def latency_lower_bound(graph: Graph, hw: Hardware) -> float:
    """f64 lower bound on the bottleneck stage time (s) of any valid schedule (module docstring)."""
    macs = graph.macs.astype(np.float64)
    mem = hw.param_bytes * graph.params.astype(np.float64)
    node = (macs / hw.macs_per_s + np.maximum(mem - hw.sram_bytes, 0.0) / hw.host_bw).max(initial=0.0)
    total = macs.sum() / hw.macs_per_s + max(mem.sum() - hw.stages * hw.sram_bytes, 0.0) / hw.host_bw
    return float(hw.stage_overhead_s + max(node, total / hw.stages))


def paper_lower_bound(graph: Graph, hw: Hardware, lam: float = 1.0) -> float:
    """f64 lower bound on ``max_k mem_k + lam * comm`` (bytes) of any valid schedule (module docstring)."""
    params = graph.params.astype(np.float64)
    memory = hw.param_bytes * max(params.sum() / hw.stages, params.max(initial=0.0))
    if hw.stages == 1:
        return float(hw.param_bytes * params.sum())
    crossing = hw.act_bytes * float(graph.output_size.min(initial=0))
    split = min(hw.param_bytes * params.sum(), memory + lam * crossing)
    return float(max(memory, split))


def analytic_lower_bound(graph: Graph, hw: Hardware, objective: str, lam: float = 1.0) -> float:
    """The analytic bound of ``objective`` (``paper`` | ``latency``); never above the optimum."""
    if objective == "latency":
        return latency_lower_bound(graph, hw)
    if objective == "paper":
        return paper_lower_bound(graph, hw, lam)
    raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
