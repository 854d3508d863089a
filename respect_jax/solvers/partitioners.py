"""Compiler-style partitioners: contiguous ranges of the SPEC topological order.

``compiler``: libcoral's ParameterCountBasedPartitioner / ``edgetpu_compiler --num_segments``
(NOTES.md): target ``total_params / K`` per segment; each of the first K-1 segments is cut just
before the node that would make it exceed the target. The last segment takes the rest.

``profiling``: libcoral's profiling partitioner with the shared cost model as the profiler (see
:func:`solve_profiling`).

``contiguous``: the best of all contiguous splits for the requested objective, exactly (dynamic
programming, :func:`best_contiguous_cuts`): the floor of every partitioner that cuts the order into
segments, whatever its search.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.costs import Hardware, objective_value
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import pad_graph
from respect_jax.solvers.base import SolveResult, register_solver
from respect_jax.solvers.common import EVAL_ROWS, evaluate_batch, objective_lower_bound_np


def contiguous_assignment(graph: Graph, cut_positions: list[int]) -> np.ndarray:
    """Assignment (by id) of the contiguous split of the SPEC order at ``cut_positions``.

    ``cut_positions`` are increasing positions where a new stage starts; stage i holds positions
    ``[cut[i-1], cut[i])``. Any such split is valid because the order is topological.
    """
    order = graph.topological_order()
    cuts = np.asarray(cut_positions, dtype=np.int64)
    stage_of_position = np.searchsorted(cuts, np.arange(graph.num_nodes), side="right")
    assignment = np.empty(graph.num_nodes, dtype=np.int64)
    assignment[order] = stage_of_position
    return assignment


def parameter_count_cuts(params_in_order: np.ndarray, num_stages: int) -> list[int]:
    """Cut positions of libcoral's parameter-count partitioner (see module docstring)."""
    target = params_in_order.sum() / num_stages
    cuts: list[int] = []
    acc = 0
    for pos, p in enumerate(params_in_order.tolist()):
        if len(cuts) < num_stages - 1 and acc > 0 and acc + p > target:
            cuts.append(pos)
            acc = 0
        acc += p
    return cuts


@register_solver("compiler")
def solve_compiler(graph: Graph, hw: Hardware, objective: str = "paper", lam: float = 1.0) -> SolveResult:
    """The Edge TPU compiler's parameter-count split (ignores the objective, as the compiler does)."""
    params = graph.params[graph.topological_order()]
    cuts = parameter_count_cuts(params, hw.stages)
    return SolveResult(contiguous_assignment(graph, cuts), info={"cuts": cuts})


@register_solver("single_stage")
def solve_single_stage(graph: Graph, hw: Hardware, objective: str = "paper", lam: float = 1.0) -> SolveResult:
    """Everything on stage 0 (the unpipelined model): a reference point, always valid."""
    return SolveResult(np.zeros(graph.num_nodes, dtype=np.int64))


# ----------------------------------------------------------------------------- profiling

class _SegmentProfiler:
    """Stage times of contiguous segments measured with the shared evaluator (the "profiler").

    For a contiguous split of the SPEC order, the time ``T_k`` of segment ``k = [start, end)`` does
    not depend on where the later cuts go: its memory and MACs are those of its nodes, and a
    tensor enters stage k iff it is produced before ``start`` and consumed at a position
    ``>= start`` (or is a graph output). So ``T_k(start, end)`` is read off the evaluator's
    ``time_k[k]`` for the schedule "positions < start on stage k-1, [start, end) on k, the rest on
    k+1" (earlier stages only need to be < k). ``T_k`` is non-decreasing in ``end``, so the
    longest segment under a target is found by a ``BATCH``-ary search: each vmapped evaluator call
    measures ``BATCH`` ends spread over the remaining interval.
    """

    BATCH = EVAL_ROWS

    def __init__(self, graph: Graph, hw: Hardware):
        padded = pad_graph(graph)
        self.graph, self.hw, self.n = graph, hw, graph.num_nodes
        self.n_pad = padded.max_nodes
        self.padded = jax.tree.map(jnp.asarray, padded)
        self.order = graph.topological_order()
        self.calls = 0

    def segment_times(self, k: int, start: int, ends: np.ndarray) -> np.ndarray:
        """f64[len(ends)] ``T_k`` of the segments ``[start, end)`` (at most BATCH ends)."""
        rows = np.full(self.BATCH, ends[-1], dtype=np.int64)
        rows[: len(ends)] = ends
        pos = np.arange(self.n_pad)[None, :]
        after = min(k + 1, self.hw.stages - 1)
        stage = np.where(pos < start, max(k - 1, 0), np.where(pos < rows[:, None], k, after))
        metrics = evaluate_batch(self.padded, jnp.asarray(stage, jnp.int32), self.hw)
        self.calls += 1
        return np.asarray(metrics.time_k[: len(ends), k], dtype=np.float64)

    def longest_segment(self, k: int, start: int, target: float) -> int | None:
        """Largest ``end`` in ``[start, n]`` with ``T_k(start, end) <= target`` (None if none)."""
        lo, hi = start, self.n  # invariant after the first call: T(lo) <= target, answer in [lo, hi]
        first = True
        while True:
            ends = np.unique(np.linspace(lo, hi, min(self.BATCH, hi - lo + 1)).round().astype(np.int64))
            ok = self.segment_times(k, start, ends) <= target
            if first and not ok[0]:
                return None
            first = False
            bad = np.flatnonzero(~ok)
            if len(bad) == 0:
                return int(ends[-1])
            if bad[0] == 0:  # lo passed before; only float noise could fail it now
                return lo
            lo, hi = int(ends[bad[0] - 1]), int(ends[bad[0]]) - 1

    def partition(self, target: float) -> tuple[list[int], bool]:
        """libcoral's greedy step: each of the first K-1 segments as long as possible with
        ``T_k <= target``; feasible iff the last segment also meets the target."""
        cuts: list[int] = []
        start = 0
        k_last = self.hw.stages - 1
        for k in range(k_last):
            end = self.longest_segment(k, start, target)
            if end is None:  # even an empty segment is too slow (tensors passing through)
                return cuts + [start] * (k_last - k), False
            start = end
            cuts.append(start)
        last = self.segment_times(k_last, start, np.array([self.n]))[0]
        return cuts, bool(last <= target)

    def score(self, assignments: list[np.ndarray], objective: str, lam: float) -> np.ndarray:
        """f64[B] the objective of each assignment (by node id), by the shared evaluator."""
        rows = -(-len(assignments) // self.BATCH) * self.BATCH  # a multiple of BATCH: few compilations
        position = np.zeros((rows, self.n_pad), dtype=np.int32)
        for i, a in enumerate(assignments):
            position[i, : self.n] = np.asarray(a)[self.order]
        metrics = evaluate_batch(self.padded, jnp.asarray(position), self.hw)
        return np.asarray(objective_value(metrics, objective, lam), dtype=np.float64)[: len(assignments)]


@register_solver("profiling")
def solve_profiling(
    graph: Graph,
    hw: Hardware,
    objective: str = "paper",
    lam: float = 1.0,
    rel_tol: float = 1e-3,
    max_iters: int = 60,
) -> SolveResult:
    """libcoral's profiling partitioner, with the SPEC cost model as the profiler.

    Start from the compiler's parameter-count split and take its bottleneck stage time as the
    upper bound ``hi`` of a bisection on a target stage latency; the lower bound ``lo`` is the
    cheap bound ``tau + max(total MACs / K, largest node MACs) / R``. For each target ``t``, cut
    the first K-1 contiguous segments of the SPEC order greedily, each as long as possible with
    its stage time <= ``t`` (:meth:`_SegmentProfiler.partition`); if the last segment also fits,
    ``hi = t`` (and the split is kept as a candidate), else ``lo = t``. Stop when
    ``hi - lo <= rel_tol * hi`` (libcoral stops at 1 ms; our stage times are often below that) or
    after ``max_iters`` targets.

    Returns the candidate (the compiler split or a feasible bisection split) with the best value
    of the requested ``objective`` by the shared evaluator; for ``latency`` that is the split with
    the smallest bottleneck, as libcoral returns. Segments are contiguous, so every split is valid.
    """
    k = hw.stages
    compiler = solve_compiler(graph, hw, objective, lam)
    if k == 1:
        return SolveResult(compiler.assignment, info={"iterations": 0, "profiler_calls": 0})
    prof = _SegmentProfiler(graph, hw)
    hi = float(prof.score([compiler.assignment], "latency", lam)[0])
    lo = min(objective_lower_bound_np(graph, hw, "latency"), hi)
    candidates = [compiler.assignment]
    cut_list = [compiler.info["cuts"]]
    iters = 0
    while hi - lo > rel_tol * hi and iters < max_iters:
        iters += 1
        target = 0.5 * (lo + hi)
        cuts, feasible = prof.partition(target)
        if feasible:
            hi = target
            candidates.append(contiguous_assignment(graph, cuts))
            cut_list.append(cuts)
        else:
            lo = target
    scores = prof.score(candidates, objective, lam)
    best = int(np.argmin(scores))
    info = {
        "cuts": cut_list[best],
        "iterations": iters,
        "profiler_calls": prof.calls,
        "target_bounds_s": [lo, hi],
        "from_compiler_split": best == 0,
    }
    return SolveResult(candidates[best], info=info)


# ----------------------------------------------------------------------------- best contiguous split

def _segment_terms(graph: Graph, hw: Hardware) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prefix parameter bytes f64[n+1], prefix MACs f64[n+1] and ``cut_b`` f64[n+1] along the SPEC order.

    ``cut_b[i]``: the bytes crossing a stage boundary just before position i in a contiguous split: the
    tensors produced before i and consumed at a position >= i, and the graph outputs produced before i
    (they leave from the last stage). With boundaries at positions ``c_1 <= ... <= c_{K-1}`` (equal ones
    make empty stages), SPEC's ``comm_bytes = sum_k cut_b[c_k]`` and ``in_k = cut_b[c_k]``: a tensor
    crosses boundary k iff ``s(u) < k <= last(u)``.
    """
    order = graph.topological_order()
    n = graph.num_nodes
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    par = hw.param_bytes * graph.params[order].astype(np.float64)
    macs = graph.macs[order].astype(np.float64)
    last_use = np.full(n, n, dtype=np.int64)  # a graph output crosses every later boundary
    if len(graph.edges):
        prod, cons = position[graph.edges[:, 0]], position[graph.edges[:, 1]]
        consumed = np.full(n, -1, dtype=np.int64)
        np.maximum.at(consumed, prod, cons)
        last_use = np.where(consumed >= 0, consumed, n)
    out = hw.act_bytes * graph.output_size[order].astype(np.float64)
    delta = np.zeros(n + 2)
    np.add.at(delta, np.arange(n) + 1, out)  # crosses boundaries p+1 .. last_use
    np.add.at(delta, last_use + 1, -out)
    cut_b = np.cumsum(delta)[: n + 1]
    return np.concatenate([[0.0], np.cumsum(par)]), np.concatenate([[0.0], np.cumsum(macs)]), cut_b


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


def best_contiguous_cuts(graph: Graph, hw: Hardware, objective: str, lam: float = 1.0) -> tuple[list[int], float]:
    """The boundaries of the best contiguous split of the SPEC order and its objective (exact).

    Stage k holds positions ``[c_k, c_{k+1})`` (``c_0 = 0``, ``c_K = n``; stages may be empty).

    * ``latency``: ``T_k`` of a segment depends only on its two ends (its memory, MACs and
      ``in_k = cut_b[c_k]``), so ``D_k[j] = min_i max(D_{k-1}[i], T(i, j))``: O(K n^2).
    * ``paper``: ``max_k mem_k + lam * sum_k cut_b[c_k]``. For a memory cap M, ``G(M)[k][j] = min_i
      G(M)[k-1][i] + lam * cut_b[i]`` over segments ``[i, j)`` with memory <= M gives the least
      communication ``G(M)`` of the splits under the cap (O(K n^2)). ``G`` is a non-increasing step
      function of M, and the split found at cap M, whose largest segment holds M' <= M, is also
      the least-communication split for every cap in ``[M', M]``. So the caps walk down its steps
      from M = inf: each next cap is the largest segment memory below the last M', each split found
      is a candidate, and the walk stops once ``G(M)`` plus the smallest feasible cap (the min-max
      split of the memory) cannot beat the best candidate. The optimal split, with largest segment
      m* and communication g*, lies in one of the visited ``[M', M]``, whose split costs at most
      ``m* + g*``.
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
        """The least ``lam * comm`` of the splits whose segments all hold at most ``cap``, and the argmins."""
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


@register_solver("contiguous")
def solve_contiguous(graph: Graph, hw: Hardware, objective: str = "paper", lam: float = 1.0) -> SolveResult:
    """The best contiguous split of the SPEC order for ``objective`` (exact over contiguous splits only;
    most optimal schedules of branching graphs are not contiguous): :func:`best_contiguous_cuts`.

    The programme's own segment costs only steer the search, as the MILP's constraints do; ``run_solver``
    scores the split with the shared evaluator (the tests check that the two agree)."""
    cuts, value = best_contiguous_cuts(graph, hw, objective, lam)
    return SolveResult(contiguous_assignment(graph, cuts), info={"cuts": cuts, "dp_objective": value})
