"""Compiler-style partitioners: contiguous ranges of the graph's order.

The order is :meth:`~respect_jax.graphs.graph.Graph.topological_order` (nodes by depth from the sources, ties
by id; "the order" below).

``compiler``: libcoral's ParameterCountBasedPartitioner / ``edgetpu_compiler --num_segments``
(libcoral's documentation): target ``total_params / K`` per segment; each of the first K-1 segments is cut just
before the node that would make it exceed the target. The last segment takes the rest.

``profiling``: libcoral's profiling partitioner with the shared cost model as the profiler (see
:func:`solve_profiling`).

``contiguous``: the best of all contiguous splits for the requested objective, exactly
(:func:`best_contiguous_cuts`: O(K n log n) programmes per target or memory cap, no n x n table;
seconds at 10,000 nodes): the floor of every partitioner that cuts the order into segments, whatever
its search.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.costs import Hardware, objective_value
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import pad_graph
from respect_jax.solvers.base import SolveResult, register_solver
from respect_jax.solvers.scoring import EVAL_ROWS, evaluate_batch, objective_lower_bound_np


def contiguous_assignment(graph: Graph, cut_positions: list[int], order: np.ndarray | None = None) -> np.ndarray:
    """Assignment (by id) of the contiguous split of the order at ``cut_positions``.

    ``cut_positions`` are increasing positions where a new stage starts; stage i holds positions
    ``[cut[i-1], cut[i])``. Any such split is valid because the order is topological. ``order``: the
    graph's order (``graph.topological_order()``, computed when None).
    """
    order = graph.topological_order() if order is None else order
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

    For a contiguous split of the order, the time ``T_k`` of segment ``k = [start, end)`` does
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
    """libcoral's profiling partitioner, with the shared cost model (:mod:`respect_jax.costs`) as the profiler.

    Start from the compiler's parameter-count split and take its bottleneck stage time as the
    upper bound ``hi`` of a bisection on a target stage latency; the lower bound ``lo`` is the
    cheap bound ``tau + max(total MACs / K, largest node MACs) / R``. For each target ``t``, cut
    the first K-1 contiguous segments of the order greedily, each as long as possible with
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

def _segment_terms(
    graph: Graph, hw: Hardware, order: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prefix parameter bytes f64[n+1], prefix MACs f64[n+1] and ``cut_b`` f64[n+1] along the order.

    ``cut_b[i]``: the bytes crossing a stage boundary just before position i in a contiguous split: the
    tensors produced before i and consumed at a position >= i, and the graph outputs produced before i
    (they leave from the last stage). With boundaries at positions ``c_1 <= ... <= c_{K-1}`` (equal ones
    make empty stages), the cost model's ``comm_bytes = sum_k cut_b[c_k]`` and ``in_k = cut_b[c_k]``: a tensor
    crosses boundary k iff ``s(u) < k <= last(u)``. ``order``: the order (computed when None).
    """
    order = graph.topological_order() if order is None else order
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


def _last_fitting(fits, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """i64[m] the largest ``j`` in ``[lo, hi]`` with ``fits(rows, j)`` true, or ``lo - 1`` where none is.

    ``fits(rows, j)`` (rows, j: i64[r]) -> bool[r] must be true then false along ``j`` for each of the m rows
    (a monotone predicate); it is called with ``rows`` indexing ``lo``/``hi``. Vectorised binary search:
    O(m log(hi - lo)) work in ``ceil(log2(max(hi - lo) + 2))`` NumPy passes.
    """
    a, b = lo - 1, hi + 1  # fits(a) is true or a < lo; fits(b) is false or b > hi
    rows = np.arange(len(lo))
    while True:
        active = np.flatnonzero(b - a > 1)
        if len(active) == 0:
            return a
        mid = (a[active] + b[active]) // 2
        ok = fits(rows[active], mid)
        a[active[ok]] = mid[ok]
        b[active[~ok]] = mid[~ok]


def _min_max_split(first, cost, n: int, k_stages: int, seed: int = 0) -> tuple[list[int], float]:
    """The split of positions ``[0, n)`` into ``k_stages`` contiguous segments (empty ones allowed) with the
    least largest segment cost, and that cost (exact).

    ``first(j)`` (j: i64[m]) -> f64[m] is the cost of stage 0 = ``[0, j)``; ``cost(i, j)`` (i64[m] each) ->
    f64[m] the cost of a later stage ``[i, j)``. Both must be non-negative and non-decreasing in ``j``.

    "Can every segment cost at most t" is decided in O(n log n + K n): with ``e(i)`` the last end ``j``
    with ``cost(i, j) <= t`` (a vectorised binary search), the ends reachable after stage k are the union
    of ``[i, e(i)]`` over the starts reachable after stage k - 1 (a running maximum). The least feasible t
    is one of the segment costs: the search keeps an infeasible ``lo`` and a feasible ``hi`` and the
    candidate segments with a cost in ``(lo, hi]`` (for each i, the ends ``e_lo(i) < j <= e_hi(i)``); it
    tests the median of a few sampled candidates (halving their number, so ~log2(n^2) tests) until few
    are left, then sorts those and bisects among them. The brackets ``[e_lo, e_hi]`` also shrink the
    binary searches. The value is exactly the smallest largest segment cost of any split, the float a
    dense ``min_i max(D[i], cost(i, j))`` programme computes.
    """
    idx = np.arange(n + 1)
    rng = np.random.default_rng(seed)
    enumerate_below = 4 * (n + 1) + 1024

    def ends(t: float, lo: tuple, hi: tuple) -> tuple[np.ndarray, np.ndarray]:
        """(e0 i64[1], e i64[n+1]) under target t, knowing ``lo``'s ends <= them <= ``hi``'s ends."""
        e0 = _last_fitting(lambda _, j: first(j) <= t, lo[0] + 1, hi[0])
        e = _last_fitting(lambda rows, j: cost(rows, j) <= t, lo[1] + 1, hi[1])
        return e0, e

    def reachable(e0: np.ndarray, e: np.ndarray) -> list[np.ndarray]:
        """bool[n+1] per stage 0..K-1: the positions where that stage can end."""
        reach = [idx <= e0[0]]
        for _ in range(1, k_stages):
            furthest = np.maximum.accumulate(np.where(reach[-1], e, -1))
            reach.append(furthest >= idx)
        return reach

    def candidates(lo: tuple, hi: tuple, picks: np.ndarray | None = None) -> np.ndarray:
        """f64 costs of the candidate segments (all of them, or those at ``picks`` in their enumeration)."""
        (e0_lo, e_lo), (e0_hi, e_hi) = lo, hi
        w0, widths = int(e0_hi[0] - e0_lo[0]), e_hi - e_lo
        if picks is None:
            picks = np.arange(w0 + int(widths.sum()))
        head, rest = picks[picks < w0], picks[picks >= w0] - w0
        cum = np.cumsum(widths)
        i = np.searchsorted(cum, rest, side="right")
        j = e_lo[i] + 1 + rest - (cum[i] - widths[i])
        return np.concatenate([first(e0_lo[0] + 1 + head), cost(i, j)])

    def test(t: float, lo: tuple, hi: tuple) -> tuple[bool, tuple]:
        e0, e = ends(t, lo, hi)
        return bool(reachable(e0, e)[-1][n]), (e0, e)

    none = (np.full(1, -1), idx - 1)  # the ends of an infeasible target below every cost
    top = np.array([n])
    upper = float(first(top)[0]) if k_stages == 1 else max(float(first(top)[0]), float(cost(top, top)[0]))
    lo_t, lo, hi_t = -np.inf, none, upper  # upper is feasible: everything on stage 0
    hi = ends(upper, none, (np.full(1, n), np.full(n + 1, n)))
    adjacent = False
    while not adjacent:
        count = int(hi[0][0] - lo[0][0]) + int((hi[1] - lo[1]).sum())
        if count <= enumerate_below:
            break
        t = float(np.median(candidates(lo, hi, rng.integers(0, count, size=31))))
        if not lo_t < t < hi_t:  # many equal costs: fall back to halving the float bit patterns
            lo_bits = -1 if lo_t < 0 else int(np.float64(lo_t).view(np.int64))
            t = float(np.int64((lo_bits + int(np.float64(hi_t).view(np.int64))) // 2).view(np.float64))
            adjacent = not lo_t < t < hi_t  # then the optimum, in (lo_t, hi_t], is hi_t
            if adjacent:
                break
        ok, found = test(t, lo, hi)
        if ok:
            hi_t, hi = t, found
        else:
            lo_t, lo = t, found
    values = np.array([hi_t]) if adjacent else np.unique(candidates(lo, hi))  # the optimum is the least feasible
    a, b = -1, len(values) - 1
    while b - a > 1:
        mid = (a + b) // 2
        ok, found = test(float(values[mid]), lo, hi)
        if ok:
            b, hi = mid, found
        else:
            a, lo = mid, found
    value = float(values[b])
    e0, e = ends(value, lo, hi)
    reach = reachable(e0, e)
    cuts, end = [], n
    for k in range(k_stages - 1, 0, -1):  # stage k = [c_k, end): a start reachable before it that reaches end
        end = int(np.flatnonzero(reach[k - 1] & (idx <= end) & (e >= end))[0])
        cuts.append(end)
    return cuts[::-1], value


class _WindowMin:
    """``out[j] = min(h[lo[j] .. j])`` for every j, for many arrays h with the same windows (``lo[j] <= j``).

    A sparse table (``table[p, x] = min(h[x .. x + 2^p - 1])``, levels up to the longest window) answers
    every window with two overlapping power-of-two blocks: O(m log w) per h, for windows up to w long.
    """

    def __init__(self, lo: np.ndarray):
        m = len(lo)
        j = np.arange(m)
        level = np.frexp((j - lo + 1).astype(np.float64))[1] - 1  # floor(log2(window length))
        self.levels = int(level.max()) + 1 if m else 1
        self.left = level * m + lo  # flat indices into the table
        self.right = level * m + j - 2**level + 1
        self.table = np.empty((self.levels, m))

    def __call__(self, h: np.ndarray) -> np.ndarray:
        """f64[m] the window minima of h (f64[m])."""
        table = self.table
        table[0] = h
        for p in range(1, self.levels):
            step = 2 ** (p - 1)  # entries past m - 2^p are never read
            np.minimum(table[p - 1, :-step], table[p - 1, step:], out=table[p, :-step])
        flat = table.reshape(-1)
        return np.minimum(flat[self.left], flat[self.right])


def _fitting_starts(par: np.ndarray, cap: float) -> np.ndarray:
    """i64[n+1] ``lo(j)``: the first ``i <= j`` with ``par[j] - par[i] <= cap`` in float64 (``cap >= 0``).

    ``par`` is non-decreasing, so a binary search of ``par[j] - cap`` finds it; where float rounding makes
    that guess wrong (checked exactly), an exact vectorised binary search on the difference decides.
    """
    n = len(par) - 1
    idx = np.arange(n + 1)
    lo = np.minimum(np.searchsorted(par, par - cap, side="left"), idx)
    ok = (par - par[lo] <= cap) & ((lo == 0) | (par - par[np.maximum(lo - 1, 0)] > cap))
    bad = np.flatnonzero(~ok)
    if len(bad):  # the last i < j that does not fit, plus one
        lo[bad] = _last_fitting(lambda rows, i: par[bad[rows]] - par[i] > cap, np.zeros(len(bad), np.int64),
                                bad - 1) + 1
    return lo


def _least_comm(par: np.ndarray, weight: np.ndarray, cap: float, k_stages: int) -> tuple[float, list[int]]:
    """The least ``sum_k weight[c_k]`` over the splits into ``k_stages`` contiguous segments whose memory
    ``par[j] - par[i]`` is at most ``cap`` each, and its boundaries (``inf`` and [] if none fits).

    ``G_0[j] = 0`` if ``[0, j)`` fits, ``G_k[j] = min(G_{k-1}[i] + weight[i])`` over the starts ``i`` of a
    fitting segment ``[i, j)``: they form a window ``[lo(j), j]`` (the memory grows as i falls), so each
    stage is a sliding-window minimum: O(K n log n). The sums are accumulated stage by stage, as a dense
    programme does, so the value is the same float.
    """
    n = len(par) - 1
    g = np.where(par <= cap, 0.0, np.inf)  # par[0] = 0, so par[j] - par[0] == par[j]
    if k_stages == 1:
        return float(g[n]), []
    if cap < 0:  # not even an empty segment fits
        return np.inf, []
    lo = _fitting_starts(par, cap)
    window_min = _WindowMin(lo)
    stages = [g]
    for _ in range(1, k_stages):
        stages.append(window_min(stages[-1] + weight))
    comm = float(stages[-1][n])
    if not np.isfinite(comm):
        return comm, []
    cuts, end = [], n
    for k in range(k_stages - 1, 0, -1):
        window = np.arange(lo[end], end + 1)
        end = int(window[np.flatnonzero(stages[k - 1][window] + weight[window] == stages[k][end])[0]])
        cuts.append(end)
    return comm, cuts[::-1]


#: graphs of at most this many nodes take the dense O(K n^2) twins of the two programmes (vectorised, no Python loop
#: per position: several times faster than the O(K n log n) ones below a few hundred nodes; same values)
DENSE_SPLIT_MAX_NODES = 384


def _min_max_split_dense(first, cost, n: int, k_stages: int) -> tuple[list[int], float]:
    """:func:`_min_max_split` by the dense programme ``D_k[j] = min_{i <= j} max(D_{k-1}[i], cost(i, j))``
    (``D_0[j] = first(j)``): the same value (min and max are exact); boundaries: the last feasible start per
    stage. O(K n^2) time and O(n^2) memory."""
    idx = np.arange(n + 1)
    seg = np.where(idx[:, None] <= idx[None, :], cost(idx[:, None], idx[None, :]), np.inf)  # [i, j]
    stages = [np.asarray(first(idx), dtype=np.float64)]
    for _ in range(1, k_stages):
        stages.append(np.min(np.maximum(stages[-1][:, None], seg), axis=0))
    value = float(stages[-1][n])
    cuts, end = [], n
    for k in range(k_stages - 1, 0, -1):
        ok = np.flatnonzero((np.maximum(stages[k - 1], seg[:, end]) <= value) & (idx <= end))
        end = int(ok[-1])
        cuts.append(end)
    return cuts[::-1], value


def _least_comm_dense(par: np.ndarray, weight: np.ndarray, cap: float, k_stages: int) -> tuple[float, list[int]]:
    """:func:`_least_comm` by a dense O(K n^2) programme: the same sums in the same order, so the same float and
    the same boundaries (the first start of the window reaching each stage's value)."""
    n = len(par) - 1
    g = np.where(par <= cap, 0.0, np.inf)
    if k_stages == 1:
        return float(g[n]), []
    if cap < 0:
        return np.inf, []
    idx = np.arange(n + 1)
    fit = (idx[:, None] <= idx[None, :]) & (par[None, :] - par[:, None] <= cap)  # [i, j]
    stages = [g]
    for _ in range(1, k_stages):
        stages.append(np.min(np.where(fit, (stages[-1] + weight)[:, None], np.inf), axis=0))
    comm = float(stages[-1][n])
    if not np.isfinite(comm):
        return comm, []
    cuts, end = [], n
    for k in range(k_stages - 1, 0, -1):
        end = int(np.flatnonzero(fit[:, end] & (stages[k - 1] + weight == stages[k][end]))[0])
        cuts.append(end)
    return comm, cuts[::-1]


ZOOM_ROUNDS, ZOOM_POINTS = 3, 8  # the paper walk's warm start (speed only: the result is exact either way)
DENSE_ZOOM_ROUNDS, DENSE_ZOOM_POINTS = 1, 4  # the same with the dense programmes (measured: 2.6x faster there)


def best_contiguous_cuts(graph: Graph, hw: Hardware, objective: str, lam: float = 1.0) -> tuple[list[int], float]:
    """The boundaries of the best contiguous split of the order and its objective (exact).

    Stage k holds positions ``[c_k, c_{k+1})`` (``c_0 = 0``, ``c_K = n``; stages may be empty). Memory is
    O(K n log n) and time O(K n log n) per tested target or cap (no n x n table): 10,000 nodes take seconds.
    The value is the same float as the dense O(K n^2) programme's (tests/contiguous_reference.py).

    * ``latency``: ``T_k`` of a segment depends only on its two ends (its memory, MACs and
      ``in_k = cut_b[c_k]``) and does not fall as the segment grows, so the least bottleneck is a
      min-max split: :func:`_min_max_split` (bisection on the bottleneck, each target checked in
      O(n log n + K n)).
    * ``paper``: ``max_k mem_k + lam * sum_k cut_b[c_k]``. For a memory cap M, :func:`_least_comm` gives
      the least communication ``G(M)`` of the splits under the cap. ``G`` is a non-increasing step
      function of M, and the split found at cap M, whose largest segment holds M' <= M, is also
      the least-communication split for every cap in ``[M', M]``: every split with its largest
      segment in ``[M', M]`` costs at least ``M' + G(M)``, a candidate. A split whose largest segment
      m is below M' has communication >= ``G(M)`` too, so it can only beat the best candidate b if
      ``m < b - G(M)``. So the caps walk down from M = inf, each next cap being the smaller of "just
      below M'" and "just above ``b - G(M)``" (:func:`_cap_bound`), and stop below the smallest
      feasible cap (the min-max split of the memory, :func:`_min_max_split`). Every split is covered
      by a visited ``[M', M]`` or pruned, so the best candidate is optimal. The jumps are long when
      the best candidate is good early, so the walk starts from the best of a grid of caps between
      that smallest cap and the total memory, zoomed in ``ZOOM_ROUNDS`` times around its best point.
      On 10,000-node layered graphs, K = 8, this visits ~30-70 caps where the plain walk down every
      step visits ~1,500 (lam = 0.1, where memory and communication weigh the same). The number of
      caps visited is returned by :func:`contiguous_search` as ``caps``.
    """
    cuts, value, _ = contiguous_search(graph, hw, objective, lam)
    return cuts, value


def contiguous_search(
    graph: Graph, hw: Hardware, objective: str, lam: float = 1.0, order: np.ndarray | None = None
) -> tuple[list[int], float, int]:
    """:func:`best_contiguous_cuts` plus the number of memory caps the ``paper`` walk visited (0 for latency).
    ``order``: the graph's order (computed when None)."""
    if objective not in ("paper", "latency"):
        raise ValueError(f"unknown objective {objective!r}")
    k_stages, n = hw.stages, graph.num_nodes
    par, macs, cut_b = _segment_terms(graph, hw, order)
    dense = n <= DENSE_SPLIT_MAX_NODES
    min_max = _min_max_split_dense if dense else _min_max_split
    least_comm = _least_comm_dense if dense else _least_comm
    if objective == "latency":
        tau, rate, sram = float(hw.stage_overhead_s), float(hw.macs_per_s), float(hw.sram_bytes)
        host, link = float(hw.host_bw), float(hw.link_bw)

        def time(i: np.ndarray, j: np.ndarray) -> np.ndarray:  # T of stage k >= 1 = [i, j)
            return tau + (macs[j] - macs[i]) / rate + np.maximum((par[j] - par[i]) - sram, 0.0) / host + cut_b[i] / link

        def first(j: np.ndarray) -> np.ndarray:  # stage 0: in_0 = 0
            return time(np.zeros_like(j), j) - cut_b[0] / link

        cuts, value = min_max(first, time, n, k_stages)
        return cuts, value, 0

    floor_cap = min_max(lambda j: par[j] - par[0], lambda i, j: par[j] - par[i], n, k_stages)[1]
    weight = lam * cut_b
    best_value, best_cuts, caps = np.inf, None, 0

    def visit(cap: float) -> tuple[float, float]:
        """Least communication under ``cap`` and the largest segment of its split (a candidate)."""
        nonlocal best_value, best_cuts, caps
        comm, cuts = least_comm(par, weight, cap, k_stages)
        caps += 1
        if not np.isfinite(comm):
            return comm, -np.inf
        bounds = np.array([0, *cuts, n])
        largest = float(np.max(par[bounds[1:]] - par[bounds[:-1]]))
        if largest + comm < best_value:
            best_value, best_cuts = float(largest + comm), cuts
        return comm, largest

    # A near-optimal first candidate makes the walk's jumps long (any visiting order is exact): the best of a
    # grid of caps between the smallest feasible one and the total memory, zooming in on the best point.
    low, high = floor_cap, float(par[n])
    rounds, points = (DENSE_ZOOM_ROUNDS, DENSE_ZOOM_POINTS) if dense else (ZOOM_ROUNDS, ZOOM_POINTS)
    for _ in range(rounds):
        grid = np.linspace(low, high, points)
        values = [comm + largest if np.isfinite(comm) else np.inf for comm, largest in map(visit, grid.tolist())]
        best = int(np.argmin(values))
        low, high = float(grid[max(best - 1, 0)]), float(grid[min(best + 1, points - 1)])
    cap = np.inf
    while cap >= floor_cap:
        comm, largest = visit(cap)
        if not np.isfinite(comm):
            break
        cap = min(float(np.nextafter(largest, -np.inf)), _cap_bound(best_value, comm))
    return best_cuts, best_value, caps


def _cap_bound(best: float, comm: float) -> float:
    """A float64 cap above every largest segment ``m`` with ``m + comm < best`` (in float64): splits whose
    largest segment is above it and whose communication is at least ``comm`` cannot beat ``best``.

    ``fl(m + comm) < best`` implies ``m < best - comm`` in real numbers (rounding is monotone and keeps
    ``best``), and the float just above the rounded difference is at least that real difference.
    """
    return float(np.nextafter(best - comm, np.inf))


@register_solver("contiguous")
def solve_contiguous(graph: Graph, hw: Hardware, objective: str = "paper", lam: float = 1.0) -> SolveResult:
    """The best contiguous split of the order for ``objective`` (exact over contiguous splits only;
    most optimal schedules of branching graphs are not contiguous): :func:`best_contiguous_cuts`.

    The programme's own segment costs only steer the search, as the MILP's constraints do; ``run_solver``
    scores the split with the shared evaluator (the tests check that the two agree)."""
    order = graph.topological_order()
    cuts, value, caps = contiguous_search(graph, hw, objective, lam, order)
    info = {"cuts": cuts, "dp_objective": value, "memory_caps": caps}
    return SolveResult(contiguous_assignment(graph, cuts, order), info=info)
