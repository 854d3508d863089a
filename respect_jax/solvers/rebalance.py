"""Latency rebalancing after the stage-boundary re-cuts (host NumPy; ``solver=policy``'s default decoding and, under
``latency``, ``solver=auto``'s contiguous member: :mod:`respect_jax.solvers.auto`).

Under ``latency`` the objective is the largest stage time ``max_k T_k``, and the re-cuts of
:func:`respect_jax.local_search.refine_boundaries` take a re-split of two adjacent stages only when it lowers that
maximum. On NAS-cell graphs the schedule they leave is often stuck: the bottleneck stage could hand work to a neighbour
only if that neighbour first handed some of its own work on (a cascade over several boundaries), and that first step
does not lower the maximum, so it is never taken. Two steps move such schedules (each never worse):

* :func:`refine_leximax`: the same band re-cuts (:func:`respect_jax.local_search.boundary_candidates`), accepted when
  the vector of stage times sorted in decreasing order gets lexicographically smaller (the maximum never rises; a
  second-largest stage may drop while the maximum stays), so a cascade is taken one boundary at a time;
* :func:`resplit`: the exact best contiguous split (:func:`respect_jax.solvers.partitioners.contiguous_search`) of
  stage-major topological orders of the schedule (stage first, then SPEC position; stage first, then the longest path
  to a sink, longest first): the schedule is one of those splits, and the programme moves every boundary at once.

:func:`rebalance_many` runs cycles of both (:func:`rebalance_step`) with the polish in between; the order policy's
decoding (:func:`respect_jax.policy.order_solver._decode`, ``ls_rebalance`` cycles, chosen on validation graphs only:
``experiments/results/latency_rebalance_val.md``) and ``solver=auto`` (``rebalance`` cycles) call it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from respect_jax.costs import Hardware
from respect_jax.graphs.graph import Graph, has_unique_order
from respect_jax.local_search import (
    BAND_CENTRES,
    BAND_PRICES,
    BAND_WIDTHS,
    _loads_np,
    boundary_candidates,
    objectives_np,
    polish_many,
    refine_boundaries,
)
from respect_jax.solvers.partitioners import contiguous_assignment, contiguous_search

#: relative tolerance (of the largest stage time) under which two stage times count as equal in the leximax order
LEXIMAX_TOLERANCE = 1e-9
#: orders :func:`resplit` splits: ties within a stage by SPEC position and / or by the longest path to a sink
RESPLIT_ORDERS = ("spec", "height")


def stage_times_np(graph: Graph, stages: np.ndarray, hw: Hardware) -> np.ndarray:
    """f64[C, K]: the ``latency`` stage times ``T_k`` of each valid schedule of ``stages`` (int[C, N] by node id),
    the cost model's formula in float64 (their maximum is :func:`respect_jax.local_search.objectives_np`'s value)."""
    mem, macs, in_k, _ = _loads_np(graph, np.asarray(stages, np.int64), hw)
    spill = np.maximum(0.0, mem - hw.sram_bytes)
    return hw.stage_overhead_s + macs / hw.macs_per_s + spill / hw.host_bw + in_k / hw.link_bw


def leximax_less(a: np.ndarray, b: np.ndarray, tolerance: float = LEXIMAX_TOLERANCE) -> bool:
    """Whether the stage times ``a`` are lexicographically smaller than ``b`` once both are sorted in decreasing order
    (entries within ``tolerance`` x max(b) count as equal), and ``max a <= max b``."""
    a, b = np.sort(np.asarray(a, np.float64))[::-1], np.sort(np.asarray(b, np.float64))[::-1]
    eps = tolerance * max(float(b[0]), 1e-300)
    diff = np.nonzero(np.abs(a - b) > eps)[0]
    return bool(len(diff)) and bool(a[diff[0]] < b[diff[0]]) and bool(a[0] <= b[0])


def refine_leximax(graph: Graph, hw: Hardware, assignment: np.ndarray, rounds: int,
                   centres: tuple[float, ...] = BAND_CENTRES, widths: tuple[float, ...] = BAND_WIDTHS,
                   prices: tuple[float, ...] = BAND_PRICES, memo: dict | None = None) -> np.ndarray:
    """int64[N]: ``assignment`` after ``rounds`` rounds of band re-cuts of every boundary k | k + 1 (the candidates of
    :func:`respect_jax.local_search.boundary_candidates`, ``latency`` loads), each taken when its stage times are
    :func:`leximax_less` than the current ones (the least of them in that order); fewer rounds when one takes nothing.
    Never worse under ``latency``; a graph with a single topological order is returned as given. ``memo``: the
    candidates' (:func:`respect_jax.local_search.boundary_candidates`)."""
    s = np.asarray(assignment, np.int64).copy()
    if int(hw.stages) < 2 or rounds <= 0 or graph.num_nodes < 2 or has_unique_order(graph):
        return s
    current = stage_times_np(graph, s[None], hw)[0]
    for _ in range(int(rounds)):
        improved = False
        for k in range(int(hw.stages) - 1):
            cands = boundary_candidates(graph, s, k, hw, "latency", centres, widths, prices, memo)
            if not len(cands):
                continue
            times = stage_times_np(graph, cands, hw)
            best = None
            for i in np.argsort(times.max(axis=1), kind="stable"):
                if leximax_less(times[i], current if best is None else times[best]):
                    best = i
            if best is not None:
                s, current, improved = cands[best], times[best], True
        if not improved:
            break
    return s


def stage_major_orders(graph: Graph, assignment: np.ndarray, kinds: tuple[str, ...] = RESPLIT_ORDERS) -> list:
    """int64[n] topological orders of node ids listing stage 0's nodes first, then stage 1's, ... (``assignment`` a
    valid schedule by node id): within a stage by SPEC position (``spec``) or by the longest path to a sink, longest
    first, ties by SPEC position (``height``). Both are topological (every edge goes to a later or the same stage, and
    within a stage to a later SPEC position and a shorter longest path)."""
    s = np.asarray(assignment, np.int64)
    spec = graph.topological_order()
    pos = np.empty(graph.num_nodes, np.int64)
    pos[spec] = np.arange(graph.num_nodes)
    orders = []
    for kind in kinds:
        if kind == "spec":
            orders.append(np.lexsort((pos, s)))
        elif kind == "height":
            height = np.zeros(graph.num_nodes, np.int64)
            if graph.num_edges:
                adj: list[list[int]] = [[] for _ in range(graph.num_nodes)]
                for u, v in graph.edges.tolist():
                    adj[u].append(v)
                for u in spec[::-1].tolist():  # a node's successors come later in SPEC order
                    if adj[u]:
                        height[u] = 1 + max(height[v] for v in adj[u])
            orders.append(np.lexsort((pos, -height, s)))
        else:
            raise ValueError(f"unknown stage-major order {kind!r}; choose from {', '.join(RESPLIT_ORDERS)}")
    return orders


def resplit(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray,
            kinds: tuple[str, ...] = RESPLIT_ORDERS) -> np.ndarray:
    """int64[N]: the best (float64 objective) of ``assignment`` and the exact best contiguous splits of its
    :func:`stage_major_orders` (``kinds``); taken only when better by a relative 1e-9. Never worse: ``assignment`` is a
    contiguous split of each of those orders. A graph with a single topological order is returned as given (the
    decoding has split that order exactly already)."""
    s = np.asarray(assignment, np.int64)
    if int(hw.stages) < 2 or graph.num_nodes < 2 or has_unique_order(graph):
        return s
    best, value = s, float(objectives_np(graph, s[None], hw, objective, lam)[0])
    for order in stage_major_orders(graph, s, kinds):
        cuts, _, _ = contiguous_search(graph, hw, objective, lam, order)
        cand = np.asarray(contiguous_assignment(graph, cuts, order), np.int64)
        v = float(objectives_np(graph, cand[None], hw, objective, lam)[0])
        if v < value * (1.0 - 1e-9):
            best, value = cand, v
    return best


def rebalance_step(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray,
                   boundaries: int, memo: dict | None = None) -> np.ndarray:
    """One rebalancing step (no polish): ``boundaries`` rounds of re-cuts accepted by their sorted stage times
    (``latency``: :func:`refine_leximax`; ``paper``: by the objective,
    :func:`respect_jax.local_search.refine_boundaries`), then :func:`resplit`. Never worse."""
    a = (refine_leximax(graph, hw, assignment, boundaries, memo=memo) if objective == "latency"
         else refine_boundaries(graph, hw, objective, lam, assignment, boundaries, memo=memo))
    return resplit(graph, hw, objective, lam, a)


def rebalance_many(graphs: Sequence[Graph], hw: Hardware, objective: str, lam: float, assignments: list,
                   local_search: int, polish_options: dict, boundaries: int, cycles: int,
                   stop: Callable[[], bool] | None = None, memos: list | None = None) -> tuple[list, list[int]]:
    """(assignments, improving cycles per graph): up to ``cycles`` cycles per graph of ``boundaries`` rounds of
    re-cuts accepted by their sorted stage times (``latency``: :func:`refine_leximax`; ``paper``:
    :func:`respect_jax.local_search.refine_boundaries`), the exact split of stage-major orders
    (:func:`resplit`) and the polish of what changed (all graphs' polishes together). A cycle is
    kept when it lowers the objective, or under ``latency`` the sorted stage times (:func:`leximax_less`); a graph
    stops at its first cycle that does neither. Never worse. ``stop()``: looked at before each cycle. ``memos``
    (optional): one candidate memo per graph (:func:`respect_jax.local_search.boundary_candidates`)."""

    def key(g: Graph, a: np.ndarray):
        return (stage_times_np(g, a[None], hw)[0] if objective == "latency"
                else float(objectives_np(g, a[None], hw, objective, lam)[0]))

    def better(g: Graph, new, old) -> bool:
        if objective == "latency":
            return leximax_less(new, old)
        return new < old * (1.0 - 1e-9)

    out = list(assignments)
    keys = [key(g, a) for g, a in zip(graphs, out, strict=True)]
    improved = [0] * len(graphs)
    active = list(range(len(graphs)))
    for _ in range(int(cycles)):
        if not active or (stop is not None and stop()):
            break
        moved, kept = {}, []
        for i in active:
            g = graphs[i]
            a = rebalance_step(g, hw, objective, lam, out[i], boundaries, None if memos is None else memos[i])
            if not np.array_equal(a, out[i]):
                moved[i] = a
        if moved:
            idx = list(moved)
            again = polish_many([graphs[i] for i in idx], hw, objective, lam, [moved[i] for i in idx], local_search,
                                **polish_options)
            for i, a in zip(idx, again, strict=True):
                new = key(graphs[i], a)
                unpolished = key(graphs[i], moved[i])
                if better(graphs[i], new, keys[i]) or better(graphs[i], unpolished, keys[i]):
                    if not better(graphs[i], new, keys[i]):
                        a, new = moved[i], unpolished
                    out[i], keys[i], improved[i] = a, new, improved[i] + 1
                    kept.append(i)
        active = kept
    return out, improved
