"""A greedy list scheduler guided by a lower bound on the final objective.

Nodes are visited once in the SPEC order (the MDP's order). Node ``v`` may take any stage
``k >= max(s(u) for u in pred(v))`` (so every schedule it builds is valid); it takes the stage
that minimises a *lower bound on the objective of any completion* of the partial schedule, ties
going to the lowest stage. The bound, for a candidate stage, uses:

* ``pos(w)``: the stage of a placed node, or for an unplaced node the largest stage of its placed
  ancestors (the earliest stage it can still take);
* ``last_lb(u) = max(pos(w) : w in succ(u))`` (K-1 for a graph output), a lower bound on
  ``last(u)``; for placed producers this gives lower bounds on every ``in_k`` and on ``comm``;
* per-stage memory, MACs and (lower-bound) input bytes of the placed nodes;
* for each ``j``, everything with ``pos >= j`` must end on stages ``j..K-1``, so the average of
  those K-j stages bounds the maximum.

``paper``:  ``max(max_k mem_k, max_j F_j / (K-j)) + lam * comm_lb`` with ``F_j`` the parameter
bytes of nodes with ``pos >= j``.
``latency``: ``max(max_k T_k^placed, max_j [tau + (M_j/R + I_j/L) / (K-j) + max(0, F_j/(K-j) - C)/H])``
where ``T_k^placed`` is the SPEC stage time of the placed nodes with ``in_k`` at its lower bound,
``M_j`` the MACs of nodes with ``pos >= j`` and ``I_j`` the lower-bound input bytes of stages
``>= j`` (the spill term uses convexity of ``max(0, . - C)``).

Cost: ``O(N K (N + E))`` NumPy work (about a second for 700 nodes and K = 4). The returned
assignment is scored by the shared evaluator like every other solver's.
"""

from __future__ import annotations

import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.solvers.base import SolveResult, register_solver
from respect_jax.solvers.common import structure


def descendants(graph: Graph) -> np.ndarray:
    """bool[N, N] ``desc[v, w]`` True iff w is reachable from v by a non-empty path."""
    n = graph.num_nodes
    succs = graph.successors()
    desc = np.zeros((n, n), dtype=bool)
    for v in graph.topological_order()[::-1].tolist():
        for w in succs[v]:
            desc[v, w] = True
            desc[v] |= desc[w]
    return desc


def _suffix(x: np.ndarray) -> np.ndarray:
    return np.cumsum(x[::-1])[::-1]


@register_solver("greedy")
def solve_greedy(graph: Graph, hw: Hardware, objective: str = "paper", lam: float = 1.0) -> SolveResult:
    """Lower-bound-guided list scheduling over the SPEC order (see the module docstring)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    k_stages, n = hw.stages, graph.num_nodes
    st = structure(graph)
    desc = descendants(graph)
    src, dst = st.edges[:, 0], st.edges[:, 1]
    mem_w = hw.param_bytes * graph.params.astype(np.float64)
    macs_w = graph.macs.astype(np.float64)
    out_w = hw.act_bytes * graph.output_size.astype(np.float64)
    remaining = (k_stages - np.arange(k_stages)).astype(np.float64)  # K - j
    stages_row = np.arange(k_stages)

    s = np.zeros(n, dtype=np.int64)
    placed = np.zeros(n, dtype=bool)
    lb = np.zeros(n, dtype=np.int64)  # for unplaced nodes: largest stage of a placed ancestor

    def estimate(v: int, k: int) -> float:
        s2 = s.copy()
        s2[v] = k
        placed2 = placed.copy()
        placed2[v] = True
        pos = np.where(placed2, s2, np.where(desc[v], np.maximum(lb, k), lb))
        last = np.full(n, -1, dtype=np.int64)
        if len(src):
            np.maximum.at(last, src, pos[dst])
        last[st.sink] = k_stages - 1
        cross = placed2[:, None] & (s2[:, None] < stages_row[None, :]) & (stages_row[None, :] <= last[:, None])
        in_lb = out_w @ cross  # [K]
        mem_k = np.bincount(s2[placed2], weights=mem_w[placed2], minlength=k_stages)
        f_j = _suffix(np.bincount(pos, weights=mem_w, minlength=k_stages))
        if objective == "paper":
            comm_lb = float(np.sum(np.where(placed2, out_w * (last - s2), 0.0)))
            return float(max(mem_k.max(), np.max(f_j / remaining))) + lam * comm_lb
        macs_k = np.bincount(s2[placed2], weights=macs_w[placed2], minlength=k_stages)
        t_placed = macs_k / hw.macs_per_s + np.maximum(mem_k - hw.sram_bytes, 0.0) / hw.host_bw + in_lb / hw.link_bw
        m_j = _suffix(np.bincount(pos, weights=macs_w, minlength=k_stages))
        i_j = _suffix(in_lb)
        avg = (m_j / hw.macs_per_s + i_j / hw.link_bw) / remaining + np.maximum(
            f_j / remaining - hw.sram_bytes, 0.0
        ) / hw.host_bw
        return hw.stage_overhead_s + float(max(t_placed.max(), avg.max()))

    for v in st.order.tolist():
        low = max((int(s[u]) for u in st.preds[v]), default=0)
        best_k, best = low, np.inf
        for k in range(low, k_stages):
            est = estimate(v, k)
            if est < best * (1.0 - 1e-12):
                best_k, best = k, est
        s[v] = best_k
        placed[v] = True
        lb = np.where(desc[v], np.maximum(lb, best_k), lb)
    return SolveResult(s, info={"final_estimate": best if n else None})
