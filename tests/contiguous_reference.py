"""The dense O(K n^2) contiguous-split programme, kept only as a reference for the tests.

This is the programme ``solver=contiguous`` ran before it was made to scale (the scalable one is
:func:`respect_jax.solvers.partitioners.best_contiguous_cuts`): it builds (n+1) x (n+1) tables of
every segment's cost, so it needs O(n^2) memory and is usable on graphs of a few hundred nodes.
Both must return the same optimum value (tests/test_baselines.py).
"""

from __future__ import annotations

import numpy as np

from respect_jax.costs import Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.solvers.partitioners import _segment_terms


def _min_max_programme(first: np.ndarray, seg: np.ndarray, upper: np.ndarray, k_stages: int):
    """``D_0 = first``, ``D_k[j] = min_i max(D_{k-1}[i], seg[i, j])`` over segments ``[i, j)`` (``upper``):
    the least largest segment cost of a split of positions ``[0, j)`` into k + 1 stages. Returns ``D_{K-1}``
    f64[n+1] and the argmin tables of stages 1..K-1."""
    best, choice = first, []
    for _ in range(1, k_stages):
        cost = np.where(upper, np.maximum(best[:, None], seg), np.inf)
        best = cost.min(axis=0)
        choice.append(cost.argmin(axis=0))
    return best, choice


def _cuts_from(choice: list[np.ndarray], n: int) -> list[int]:
    """Boundaries ``c_1..c_{K-1}`` from the argmin tables of stages 1..K-1 (each i32[n+1], by segment end)."""
    cuts, end = [], n
    for table in reversed(choice):
        end = int(table[end])
        cuts.append(end)
    return cuts[::-1]


def dense_contiguous_cuts(graph: Graph, hw: Hardware, objective: str, lam: float = 1.0) -> tuple[list[int], float]:
    """The boundaries of the best contiguous split of the SPEC order and its objective (exact, dense tables).

    * ``latency``: ``D_k[j] = min_i max(D_{k-1}[i], T(i, j))``: O(K n^2).
    * ``paper``: for a memory cap M, ``G(M)[k][j] = min_i G(M)[k-1][i] + lam * cut_b[i]`` over segments
      ``[i, j)`` with memory <= M is the least communication under the cap; the caps walk down the steps of
      ``G`` from M = inf (see :func:`respect_jax.solvers.partitioners.best_contiguous_cuts`).
    """
    if objective not in ("paper", "latency"):
        raise ValueError(f"unknown objective {objective!r}")
    k_stages, n = hw.stages, graph.num_nodes
    par, macs, cut_b = _segment_terms(graph, hw)
    idx = np.arange(n + 1)
    upper = idx[:, None] <= idx[None, :]  # [i, j]: segment [i, j) exists
    mem = par[None, :] - par[:, None]  # [i, j]
    if objective == "latency":
        seg_macs = macs[None, :] - macs[:, None]
        time = (hw.stage_overhead_s + seg_macs / hw.macs_per_s + np.maximum(mem - hw.sram_bytes, 0.0) / hw.host_bw
                + cut_b[:, None] / hw.link_bw)  # [i, j], stage k >= 1
        first = np.where(upper[0], time[0] - cut_b[0] / hw.link_bw, np.inf)  # in_0 = 0
        best, choice = _min_max_programme(first, time, upper, k_stages)
        return _cuts_from(choice, n), float(best[n])

    def least_comm(cap: float) -> tuple[float, list[np.ndarray]]:
        fits = upper & (mem <= cap)
        g = np.where(fits[0], 0.0, np.inf)  # stage 0 = [0, j)
        choice = []
        for _ in range(1, k_stages):
            cost = np.where(fits, (g + lam * cut_b)[:, None], np.inf)
            g = cost.min(axis=0)
            choice.append(cost.argmin(axis=0))
        return float(g[n]), choice

    floor_cap = _min_max_programme(np.where(upper[0], mem[0], np.inf), mem, upper, k_stages)[0][n]
    caps = np.unique(mem[upper])  # every segment memory, ascending
    best_value, best_cuts, cap = np.inf, None, np.inf
    while True:
        comm, choice = least_comm(cap)
        if not np.isfinite(comm) or comm + floor_cap >= best_value:
            break
        cuts = _cuts_from(choice, n)
        bounds = [0, *cuts, n]
        largest = max(mem[i, j] for i, j in zip(bounds[:-1], bounds[1:], strict=True))
        if largest + comm < best_value:
            best_value, best_cuts = float(largest + comm), cuts
        below = int(np.searchsorted(caps, largest, side="left")) - 1
        if below < 0:
            break
        cap = caps[below]
    return best_cuts, best_value
