"""The exact best contiguous split of many orders at once, vectorised over (graph, order) rows.

:func:`split_rows` gives, for every row, the cuts and value that
:func:`respect_jax.solvers.partitioners.contiguous_search` gives for that graph and order, float for float and cut
for cut (tested), but runs the ``paper`` objective's search for all rows in lockstep with NumPy arrays ``[rows, n+1]``
instead of one Python walk per order: the order policy splits 1 (greedy) to 33 orders per graph, and one
``contiguous_search`` of a 200-node order at K = 4 costs ~10 ms on the 2-core CPU, which bounded how many graphs
per second the policy schedules.

The ``paper`` search (the same steps as ``contiguous_search``): the least largest segment ``floor_cap`` (a min-max
programme), a grid of memory caps between it and the total memory (``zoom`` rounds), then the walk down from an
unbounded cap, each cap's least communication given by ``G_k[j] = min_{lo(j) <= i <= j} G_{k-1}[i] + w[i]``, where
``[lo(j), j]`` are the starts of the segments ending at j that fit the cap. Here ``lo`` is found by a vectorised
binary search (exact: the predicate is the float comparison itself) and the window minimum by a sparse table
(min is exact), so every float is the one the one-order programmes compute. The min-max programme
``D_k[j] = min_i max(D_{k-1}[i], par[j] - par[i])`` is solved at the crossing of its non-decreasing and
non-increasing terms.

The ``latency`` search (:func:`latency_search`): the least bottleneck ``min max_k T_k`` over the splits of each row,
``T`` of a segment ``[i, j)`` being ``contiguous_search``'s float expression. Whether a bottleneck t is reachable is the
same O(K n) reachability test as the one-order programme's (the last end ``e(i)`` of a segment from i within t, by a
binary search bracketed by earlier tests), and the least reachable t is found by bisecting the float64 bit patterns
(all costs are >= 0, so their order is that of the floats): it is a segment's cost, the float both one-order
programmes return. The boundaries follow the programme ``contiguous_search`` runs at that size (the last feasible start
of each stage where the dense programme runs, the first one above :data:`DENSE_SPLIT_MAX_NODES`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from respect_jax.costs import Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.solvers.partitioners import (
    DENSE_SPLIT_MAX_NODES,
    DENSE_ZOOM_POINTS,
    DENSE_ZOOM_ROUNDS,
    ZOOM_POINTS,
    ZOOM_ROUNDS,
    contiguous_search,
)

#: rows per vectorised pass (bounds the [rows, levels, n+1] sparse tables)
CHUNK_ROWS = 1024


def segment_rows(graph: Graph, hw: Hardware, orders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(prefix parameter bytes f64[R, n+1], ``cut_b`` f64[R, n+1]) of each order of ``orders`` (int[R, n]), the
    same floats as ``partitioners._segment_terms`` per order (the same sums in the same sequence)."""
    r, n = orders.shape
    par = hw.param_bytes * graph.params[orders].astype(np.float64)
    par = np.concatenate([np.zeros((r, 1)), np.cumsum(par, axis=1)], axis=1)
    position = np.empty((r, n), dtype=np.int64)
    np.put_along_axis(position, orders, np.broadcast_to(np.arange(n), (r, n)), axis=1)
    last_use = np.full((r, n), n, dtype=np.int64)
    if len(graph.edges):
        prod, cons = position[:, graph.edges[:, 0]], position[:, graph.edges[:, 1]]
        consumed = np.full((r, n), -1, dtype=np.int64)
        rows = np.broadcast_to(np.arange(r)[:, None], prod.shape)
        np.maximum.at(consumed, (rows, prod), cons)
        last_use = np.where(consumed >= 0, consumed, n)
    out = hw.act_bytes * graph.output_size[orders].astype(np.float64)
    delta = np.zeros((r, n + 2))
    rows = np.broadcast_to(np.arange(r)[:, None], (r, n))
    np.add.at(delta, (rows, np.arange(n) + 1), out)
    np.add.at(delta, (rows, last_use + 1), -out)
    return par, np.cumsum(delta, axis=1)[:, : n + 1]


def _first_true(pred, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """i64[...] the least ``i`` in ``[lo, hi]`` with ``pred(i)`` true, elementwise (``pred`` false then true along i,
    true at ``hi``): a binary search over arrays of any shape."""
    lo, hi = lo.copy(), hi.copy()
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi) // 2
        ok = pred(mid) | ~open_
        hi = np.where(open_ & ok, mid, hi)
        lo = np.where(open_ & ~ok, mid + 1, lo)


def _take(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``a[r, idx[r, j]]`` (a f64[R, m], idx i64[R, m]) by one flat gather."""
    r, m = a.shape
    return a.reshape(-1)[idx + (np.arange(r) * m)[:, None]]


def fitting_starts(par: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """i64[R, n+1] ``lo(j)``: the first ``i <= j`` with ``par[j] - par[i] <= cap`` (float64; ``cap`` f64[R] >= 0).

    One binary search of ``par[j] - cap`` over all rows (each row scaled into [row, row + 1), so that the rows
    concatenated are sorted) guesses it; the guess is checked with the exact float comparison and, where rounding made
    it wrong, an exact binary search on the difference decides."""
    r, m = par.shape
    j = np.broadcast_to(np.arange(m), (r, m))
    offset = np.arange(r, dtype=np.float64)[:, None]
    scale = 0.5 / np.maximum(par[:, -1:], 1e-300)
    keys = (par * scale + offset).reshape(-1)
    queries = np.clip((par - cap[:, None]) * scale, 0.0, 0.5) + offset
    lo = np.searchsorted(keys, queries.reshape(-1), side="left").reshape(r, m) - (np.arange(r) * m)[:, None]
    lo = np.clip(lo, 0, j)
    c = cap[:, None]
    ok = (par - _take(par, lo) <= c) & ((lo == 0) | (par - _take(par, np.maximum(lo - 1, 0)) > c))
    if not ok.all():  # the exact search, on the wrong guesses only
        rows, cols = np.nonzero(~ok)
        start = np.zeros(len(rows), np.int64)
        lo[rows, cols] = _first_true(lambda i: par[rows, cols] - par[rows, i] <= cap[rows], start, cols.copy())
    return lo


class WindowMin:
    """``min(v[r, lo[r, j] .. j])`` for many ``v`` f64[R, m] and one ``lo`` i64[R, m] (``lo <= j``), by a sparse
    table (exact: a min of the same values); the query positions are computed once per ``lo``."""

    def __init__(self, lo: np.ndarray):
        r, m = lo.shape
        j = np.arange(m)[None, :]
        length = j - lo + 1
        level = np.floor(np.log2(length)).astype(np.int64)
        level = np.where((1 << (level + 1)) <= length, level + 1, level)  # guard the float log
        level = np.where((1 << level) > length, level - 1, level)
        self.levels = int(level.max(initial=0)) + 1  # the table up to the longest window only
        base = level * (r * m) + (np.arange(r) * m)[:, None]
        self.left, self.right = base + lo, base + j - (1 << level) + 1
        self.shape = (r, m)

    def __call__(self, v: np.ndarray) -> np.ndarray:
        r, m = self.shape
        table = np.empty((self.levels, r, m))
        table[0] = v
        width = 1
        for t in range(1, self.levels):  # width = 2**(t-1) < m: the longest window is at most m
            np.minimum(table[t - 1][:, : m - width], table[t - 1][:, width:], out=table[t][:, : m - width])
            table[t][:, m - width :] = table[t - 1][:, m - width :]
            width *= 2
        flat = table.reshape(-1)
        return np.minimum(flat[self.left], flat[self.right])


def least_comm(par: np.ndarray, weight: np.ndarray, cap: np.ndarray, k_stages: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the least ``sum_k weight[c_k]`` over splits into ``k_stages`` segments of memory at most ``cap`` and its
    boundaries (f64[R] with inf where none fits, i64[R, K-1]; the first start reaching each stage's value, as the
    one-order programmes choose it)."""
    r, m = par.shape
    n = m - 1
    g = np.where(par <= cap[:, None], 0.0, np.inf)
    cuts = np.zeros((r, k_stages - 1), np.int64)
    if k_stages == 1:
        return g[:, n].copy(), cuts
    if np.all(cap >= par[:, n]):  # every segment fits: the windows are prefixes (the same minima, far cheaper)
        lo = np.zeros((r, m), np.int64)
        window_min = functools.partial(np.minimum.accumulate, axis=1)
    else:
        lo = fitting_starts(par, np.maximum(cap, 0.0))
        window_min = WindowMin(lo)
    stages = [g]
    for _ in range(1, k_stages):
        stages.append(window_min(stages[-1] + weight))
    comm = np.where(cap < 0, np.inf, stages[-1][:, n])
    end = np.full(r, n, np.int64)
    idx = np.arange(m)[None, :]
    rows = np.arange(r)
    for k in range(k_stages - 1, 0, -1):
        target = stages[k][rows, end]
        hit = (idx >= lo[rows, end][:, None]) & (idx <= end[:, None]) & (stages[k - 1] + weight == target[:, None])
        end = np.where(np.isfinite(comm), np.argmax(hit, axis=1), 0)
        cuts[:, k - 1] = end
    return comm, cuts


def crossing(prev: np.ndarray, par: np.ndarray) -> np.ndarray:
    """i64[R, m] the first ``i <= j`` with ``prev[r, i] >= par[r, j] - par[r, i]`` (float64, the comparison
    :func:`min_max_memory` crosses at; ``prev`` and ``par`` non-decreasing along each row, ``prev >= 0``, so the test
    is false then true and true at ``i = j``).

    One binary search of ``par[j]`` among the sums ``prev[i] + par[i]`` of all rows (each row scaled into
    ``[row, row + 0.5]``, so that the rows concatenated are sorted) guesses it; the guess is checked with the exact
    comparison and, where rounding made it wrong, an exact binary search decides (:func:`fitting_starts`' scheme)."""
    r, m = par.shape
    j = np.broadcast_to(np.arange(m), (r, m))
    offset = np.arange(r, dtype=np.float64)[:, None]
    key = prev + par
    scale = 0.5 / np.maximum(key[:, -1:], 1e-300)
    keys = (key * scale + offset).reshape(-1)
    queries = np.clip(par * scale, 0.0, 0.5) + offset
    star = np.searchsorted(keys, queries.reshape(-1), side="left").reshape(r, m) - (np.arange(r) * m)[:, None]
    star = np.clip(star, 0, j)
    before = np.maximum(star - 1, 0)
    ok = _take(prev, star) >= par - _take(par, star)
    ok &= (star == 0) | (_take(prev, before) < par - _take(par, before))
    if not ok.all():  # the exact search, on the wrong guesses only
        rows, cols = np.nonzero(~ok)
        star[rows, cols] = _first_true(lambda i: prev[rows, i] >= par[rows, cols] - par[rows, i],
                                       np.zeros(len(rows), np.int64), cols.copy())
    return star


def min_max_memory(par: np.ndarray, k_stages: int) -> np.ndarray:
    """f64[R] the least largest segment memory over splits into ``k_stages`` contiguous segments (``D_{K-1}[n]`` of
    ``D_0[j] = par[j] - par[0]``, ``D_k[j] = min_{i <= j} max(D_{k-1}[i], par[j] - par[i])``, solved at the crossing
    ``i*`` of the non-decreasing and non-increasing terms: :func:`crossing`)."""
    m = par.shape[1]
    d = par - par[:, :1]
    for _ in range(1, k_stages):
        prev = d
        star = crossing(prev, par)
        before = np.maximum(star - 1, 0)
        right = _take(prev, star)  # i >= i*: max is D_{k-1}[i], least at i*
        left = np.where(star >= 1, par - _take(par, before), np.inf)  # i < i*: max is par[j] - par[i], least at i*-1
        d = np.minimum(right, left)
    return d[:, m - 1].copy()


def _linspace(low: np.ndarray, high: np.ndarray, points: int) -> np.ndarray:
    """f64[points, R]: ``np.linspace(low[r], high[r], points)`` for each row, float for float (NumPy's scalar path:
    ``i * step + low``, or ``i / div * delta + low`` where the step underflows to 0; the last point is ``high``)."""
    if points < 2:
        raise ValueError(f"zoom points must be >= 2, got {points}")
    div = points - 1
    delta = high - low
    step = delta / div
    ar = np.arange(points, dtype=np.float64)[:, None]
    y = np.where(step == 0, (ar / div) * delta, ar * step) + low
    y[-1] = high
    return y


def paper_search(par: np.ndarray, cut_b: np.ndarray, k_stages: int, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """(i64[R, K-1] cuts, f64[R] values) of ``contiguous_search``'s ``paper`` walk, for every row at once."""
    r, m = par.shape
    n = m - 1
    weight = lam * cut_b
    floor_cap = min_max_memory(par, k_stages)
    best_value = np.full(r, np.inf)
    best_cuts = np.zeros((r, k_stages - 1), np.int64)
    rows_all = np.arange(r)

    def visit(rows: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        comm, cuts = least_comm(par[rows], weight[rows], cap, k_stages)
        bounds = np.concatenate([np.zeros((len(rows), 1), np.int64), cuts, np.full((len(rows), 1), n)], axis=1)
        p = par[rows]
        largest = np.max(_take(p, bounds[:, 1:]) - _take(p, bounds[:, :-1]), axis=1)
        finite = np.isfinite(comm)
        total = largest + comm
        better = finite & (total < best_value[rows])
        best_value[rows[better]] = total[better]
        best_cuts[rows[better]] = cuts[better]
        return comm, np.where(finite, largest, -np.inf)

    dense = n <= DENSE_SPLIT_MAX_NODES
    rounds, points = (DENSE_ZOOM_ROUNDS, DENSE_ZOOM_POINTS) if dense else (ZOOM_ROUNDS, ZOOM_POINTS)
    low, high = floor_cap.copy(), par[:, n].copy()
    for _ in range(rounds):
        grid = _linspace(low, high, points)  # [points, R]
        values = np.empty((points, r))
        for p in range(points):
            comm, largest = visit(rows_all, grid[p])
            values[p] = np.where(np.isfinite(comm), comm + largest, np.inf)
        best = np.argmin(values, axis=0)
        low = grid[np.maximum(best - 1, 0), rows_all]
        high = grid[np.minimum(best + 1, points - 1), rows_all]
    cap = np.full(r, np.inf)
    active = rows_all[cap >= floor_cap]
    while len(active):
        comm, largest = visit(active, cap[active])
        going = np.isfinite(comm)
        active, comm, largest = active[going], comm[going], largest[going]
        cap[active] = np.minimum(np.nextafter(largest, -np.inf), np.nextafter(best_value[active] - comm, np.inf))
        active = active[cap[active] >= floor_cap[active]]
    return best_cuts, best_value


def macs_rows(graph: Graph, orders: np.ndarray) -> np.ndarray:
    """f64[R, n+1] prefix MACs of each order of ``orders`` (int[R, n]): ``partitioners._segment_terms``' floats (a
    sequential cumulative sum either way)."""
    macs = graph.macs[orders].astype(np.float64)
    return np.concatenate([np.zeros((len(orders), 1)), np.cumsum(macs, axis=1)], axis=1)


def _last_within(pred, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """i64[...] the largest ``x`` in ``(a, b)`` with ``pred(x)`` true, else ``a`` (elementwise; ``pred`` true then false
    along x, evaluated on flat index arrays of the open entries only)."""
    shape_a = a.shape
    a, b = a.reshape(-1).copy(), np.broadcast_to(b, shape_a).reshape(-1).copy()
    open_ = np.flatnonzero(b - a > 1)
    while len(open_):
        mid = (a[open_] + b[open_]) // 2
        ok = pred(open_, mid)
        a[open_[ok]] = mid[ok]
        b[open_[~ok]] = mid[~ok]
        open_ = open_[b[open_] - a[open_] > 1]
    return a.reshape(shape_a)


class _LatencyRows:
    """The pieces of the ``latency`` programme over rows of prefix terms (par, macs, cut_b: f64[R, n+1]) shared by
    :func:`latency_search` and :func:`latency_best`: a segment's cost (``contiguous_search``'s float expression), the
    last ends of the segments within a bottleneck t, the reachable stage ends and the backtracked cuts."""

    def __init__(self, par: np.ndarray, macs: np.ndarray, cut_b: np.ndarray, hw: Hardware):
        self.r, self.m = par.shape
        self.n, self.k = self.m - 1, int(hw.stages)
        self.tau, self.rate, self.sram = float(hw.stage_overhead_s), float(hw.macs_per_s), float(hw.sram_bytes)
        self.host, self.link = float(hw.host_bw), float(hw.link_bw)
        self.par_f, self.macs_f, self.cut_f = par.reshape(-1), macs.reshape(-1), cut_b.reshape(-1)
        self.base = np.arange(self.r, dtype=np.int64)[:, None] * self.m
        self.idx = np.arange(self.m, dtype=np.int64)

    def cost(self, fi: np.ndarray, fj: np.ndarray) -> np.ndarray:  # T of [i, j) from flat indices
        return (self.tau + (self.macs_f[fj] - self.macs_f[fi]) / self.rate
                + np.maximum((self.par_f[fj] - self.par_f[fi]) - self.sram, 0.0) / self.host
                + self.cut_f[fi] / self.link)

    def first(self, row: np.ndarray, j: np.ndarray) -> np.ndarray:  # stage 0 = [0, j): in_0 = 0
        return self.cost(row * self.m, row * self.m + j) - self.cut_f[row * self.m] / self.link

    def upper(self) -> np.ndarray:
        """f64[R]: every node on stage 0 (a feasible bottleneck of each row)."""
        rows, n = np.arange(self.r, dtype=np.int64), self.n
        return np.maximum(self.first(rows, np.full(self.r, n)), self.cost(self.base[:, 0] + n, self.base[:, 0] + n))

    def ends(self, active: np.ndarray, t: np.ndarray, lo: tuple, hi: tuple) -> tuple[np.ndarray, np.ndarray]:
        """(e0 i64[A], e i64[A, m]) under t f64[A] for the rows ``active``, bracketed by ends under a lower and a
        higher t: the last end of stage 0 within t (-1: none) and of a later stage starting at i (i - 1: none)."""
        m = self.m
        e0 = _last_within(lambda o, x: self.first(active[o], x) <= t[o], lo[0], hi[0] + 1)
        flat_start = (self.base[active] + self.idx).reshape(-1)
        t_entry = np.repeat(t, m)
        row_base = np.repeat(self.base[active, 0], m)
        e = _last_within(lambda o, x: self.cost(flat_start[o], row_base[o] + x) <= t_entry[o], lo[1], hi[1] + 1)
        return e0, e

    def reachable(self, e0: np.ndarray, e: np.ndarray) -> list[np.ndarray]:
        """bool[A, m] per stage 0..K-1: the positions where that stage can end."""
        idx = self.idx
        reach = [idx[None, :] <= e0[:, None]]
        for _ in range(1, self.k):
            furthest = np.maximum.accumulate(np.where(reach[-1], e, -1), axis=1)
            reach.append(furthest >= idx[None, :])
        return reach

    def cuts(self, e0: np.ndarray, e: np.ndarray, last_start: bool) -> np.ndarray:
        """i64[A, K-1]: the cuts backtracked from the ends at the rows' least bottleneck."""
        reach, idx, m = self.reachable(e0, e), self.idx, self.m
        cuts = np.zeros((len(e0), self.k - 1), np.int64)
        end = np.full(len(e0), self.n, np.int64)
        for k in range(self.k - 1, 0, -1):  # stage k = [c_k, end): a reachable start whose segment reaches end
            ok = reach[k - 1] & (idx[None, :] <= end[:, None]) & (e >= end[:, None])
            end = (m - 1 - np.argmax(ok[:, ::-1], axis=1)) if last_start else np.argmax(ok, axis=1)
            cuts[:, k - 1] = end
        return cuts

    def brackets(self) -> tuple[tuple, tuple]:
        """(ends under a t below every cost, ends under a t above every cost) of all rows: the widest brackets (new,
        writable arrays: the searches narrow them in place)."""
        r, m, n = self.r, self.m, self.n
        return ((np.full(r, -1, np.int64), np.broadcast_to(self.idx, (r, m)) - 1),
                (np.full(r, n, np.int64), np.full((r, m), n, np.int64)))


def latency_search(par: np.ndarray, macs: np.ndarray, cut_b: np.ndarray, hw: Hardware,
                   last_start: bool) -> tuple[np.ndarray, np.ndarray]:
    """(i64[R, K-1] cuts, f64[R] values) of ``contiguous_search``'s ``latency`` programme for every row at once (module
    docstring). par, macs, cut_b: f64[R, n+1] prefix terms of each order; ``last_start``: backtrack to the last
    feasible start of each stage (the dense programme's choice) instead of the first (the sparse one's)."""
    pr = _LatencyRows(par, macs, cut_b, hw)
    r = pr.r
    rows = np.arange(r, dtype=np.int64)
    if pr.k == 1:
        return np.zeros((r, 0), np.int64), pr.first(rows, np.full(r, pr.n))
    lo_bits, hi_bits = np.full(r, -1, np.int64), pr.upper().view(np.int64).copy()
    lo_ends, hi_ends = pr.brackets()
    active = np.flatnonzero(hi_bits - lo_bits > 1)
    while len(active):
        mid = (lo_bits[active] + hi_bits[active]) // 2
        lo_a, hi_a = (lo_ends[0][active], lo_ends[1][active]), (hi_ends[0][active], hi_ends[1][active])
        e0, e = pr.ends(active, mid.view(np.float64), lo_a, hi_a)
        ok = pr.reachable(e0, e)[-1][:, pr.n]
        good, bad = active[ok], active[~ok]
        hi_bits[good], lo_bits[bad] = mid[ok], mid[~ok]
        hi_ends[0][good], hi_ends[1][good] = e0[ok], e[ok]
        lo_ends[0][bad], lo_ends[1][bad] = e0[~ok], e[~ok]
        active = active[hi_bits[active] - lo_bits[active] > 1]
    values = hi_bits.view(np.float64)
    e0, e = pr.ends(rows, values, lo_ends, hi_ends)
    return pr.cuts(e0, e, last_start), values


#: :func:`latency_best` stops bisecting bit patterns once the segments whose cost lies in the bracket number at most
#: this many per active row and position, and bisects the sorted list of those costs instead
BEST_PAIRS_PER_ENTRY = 2


def latency_best(par: np.ndarray, macs: np.ndarray, cut_b: np.ndarray, hw: Hardware,
                 last_start: bool) -> tuple[int, np.ndarray, float]:
    """(row, i64[K-1] cuts, value) of the first row whose :func:`latency_search` value is the least of all rows, with
    that row's cuts: the same row, cuts and value as ``latency_search`` followed by the first strict minimum.

    Row 0's value v0 first; then one test of the other rows at the float just below v0: the rows that cannot reach it
    have a value >= v0 and cannot be the first strict minimum. The rows left, if any, share one bisection: a row that
    cannot reach the bottleneck t being tried has a value above t, at least the least value, so it leaves; at the end
    the rows left are those whose value is the least. Each bisection halves the bit patterns until the bracket
    (lo, hi] holds few segment costs; then, since a row's value is the cost of a segment (the one setting its
    bottleneck) and a segment [i, j) costs at most t exactly when j <= e_t(i) (costs grow with j), every candidate is
    the cost of a segment [i, j) with e_lo(i) < j <= e_hi(i) (stage 0: [0, j) with e0_lo < j <= e0_hi) of a row
    left, and the sorted list of those in (lo, hi] is bisected with the same test."""
    pr = _LatencyRows(par, macs, cut_b, hw)
    r, n, m = pr.r, pr.n, pr.m
    rows = np.arange(r, dtype=np.int64)
    if pr.k == 1:
        values = pr.first(rows, np.full(r, n))
        best = int(np.argmin(values))
        return best, np.zeros(0, np.int64), float(values[best])
    lo_ends, hi_ends = pr.brackets()
    # a bottleneck no row reaches in exact arithmetic (the mean stage of the MACs, the largest node's MACs, with the
    # overhead), less a margin for rounding: tried first, it cuts the bracket to a small factor of the value
    node_macs = np.diff(macs, axis=1)
    floor = (pr.tau + max(float(macs[:, -1].max()) / pr.k, float(node_macs.max(initial=0.0))) / pr.rate) * (1 - 1e-9)

    def reach(active: np.ndarray, t: float) -> np.ndarray:  # bool[A]: the rows reaching t; their brackets updated
        lo_a, hi_a = (lo_ends[0][active], lo_ends[1][active]), (hi_ends[0][active], hi_ends[1][active])
        e0, e = pr.ends(active, np.full(len(active), t), lo_a, hi_a)
        ok = pr.reachable(e0, e)[-1][:, n]
        hi_ends[0][active[ok]], hi_ends[1][active[ok]] = e0[ok], e[ok]
        lo_ends[0][active[~ok]], lo_ends[1][active[~ok]] = e0[~ok], e[~ok]
        return ok

    def least(active: np.ndarray, hi_t: float) -> tuple[np.ndarray, float]:
        """(the rows of ``active`` whose value is the least, that value) for rows that all reach ``hi_t``."""
        lo_t = -np.inf

        def test(t: float) -> bool:
            nonlocal active, lo_t, hi_t
            ok = reach(active, t)
            if ok.any():
                hi_t, active = t, active[ok]
                return True
            lo_t = t
            return False

        if 0.0 < floor < hi_t:
            test(floor)
        while True:
            lo_bits = -1 if lo_t == -np.inf else int(np.float64(lo_t).view(np.int64))
            hi_bits = int(np.float64(hi_t).view(np.int64))
            if hi_bits - lo_bits <= 1:
                return active, hi_t
            pairs = int((hi_ends[1][active] - lo_ends[1][active]).sum()
                        + (hi_ends[0][active] - lo_ends[0][active]).sum())
            if pairs > BEST_PAIRS_PER_ENTRY * len(active) * m:
                test(float(np.int64((lo_bits + hi_bits) // 2).view(np.float64)))
                continue
            # every segment of a row left whose cost may lie in (lo, hi]
            lo1, hi1 = lo_ends[1][active].reshape(-1), hi_ends[1][active].reshape(-1)
            count = hi1 - lo1
            start = np.repeat((pr.base[active] + pr.idx).reshape(-1), count)
            within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
            row_base = np.repeat(np.repeat(pr.base[active, 0], m), count)
            later = pr.cost(start, row_base + np.repeat(lo1, count) + 1 + within)
            count0 = hi_ends[0][active] - lo_ends[0][active]
            within0 = np.arange(int(count0.sum())) - np.repeat(np.cumsum(count0) - count0, count0)
            stage0 = pr.first(np.repeat(active, count0), np.repeat(lo_ends[0][active], count0) + 1 + within0)
            cands = np.unique(np.concatenate([later, stage0]))
            cands = cands[(cands > lo_t) & (cands < hi_t)]
            lo_i, hi_i = -1, len(cands)  # cands[lo_i] < the least value <= cands[hi_i] (hi_t past the end)
            while hi_i - lo_i > 1:
                mid = (lo_i + hi_i) // 2
                if test(float(cands[mid])):
                    hi_i = mid
                else:
                    lo_i = mid
            return active, hi_t

    _, value = least(rows[:1], float(pr.upper()[0]))  # row 0 reaches its upper bound (every node on stage 0)
    best = rows[:1]
    if r > 1:
        below = np.nextafter(value, -np.inf)
        ok = reach(rows[1:], below)
        if ok.any():  # rows with a value below row 0's: the least among them
            left, value = least(rows[1:][ok], float(below))
            best = left[:1]
    t = np.full(1, value)
    e0, e = pr.ends(best, t, (lo_ends[0][best], lo_ends[1][best]), (hi_ends[0][best], hi_ends[1][best]))
    return int(best[0]), pr.cuts(e0, e, last_start)[0], float(value)


def split_many(items: Sequence[tuple[Graph, Sequence[np.ndarray]]], hw: Hardware, objective: str,
               lam: float) -> list[list[tuple[list[int], float]]]:
    """``(cuts, value)`` of the best contiguous split of every order of every ``(graph, orders)`` item: what
    ``contiguous_search`` returns for it (minus the count of caps visited). ``paper``: the rows of all items with one
    node count run in lockstep (:func:`paper_search`, :data:`CHUNK_ROWS` rows per pass); ``latency``: the orders of a
    graph above :data:`DENSE_SPLIT_MAX_NODES` nodes together (:func:`latency_search`) when it has at least
    :data:`LATENCY_MIN_ROWS` of them, else one ``contiguous_search`` per order (faster there)."""
    if objective == "latency":
        return [_latency_item(graph, hw, lam, orders) for graph, orders in items]
    if objective != "paper":
        raise ValueError(f"unknown objective {objective!r}")
    out: list[list] = [[None] * len(orders) for _, orders in items]
    rows: dict[int, list] = {}  # node count -> [(item, order index, par row, cut_b row)]
    for i, (graph, orders) in enumerate(items):
        if len(orders) == 0:
            continue
        par, cut_b = segment_rows(graph, hw, np.stack([np.asarray(o, np.int64) for o in orders]))
        for o in range(len(orders)):
            rows.setdefault(graph.num_nodes, []).append((i, o, par[o], cut_b[o]))
    for group in rows.values():
        if len(group) < PAPER_MIN_ROWS:  # one order (a greedy decoding): the one-order programme is faster
            for i, o, _, _ in group:
                out[i][o] = tuple(contiguous_search(items[i][0], hw, objective, lam, items[i][1][o])[:2])
            continue
        for lo in range(0, len(group), CHUNK_ROWS):
            block = group[lo : lo + CHUNK_ROWS]
            cuts, values = paper_search(np.stack([b[2] for b in block]), np.stack([b[3] for b in block]), hw.stages,
                                        float(lam))
            for (i, o, _, _), c, v in zip(block, cuts, values, strict=True):
                out[i][o] = (c.tolist(), float(v))
    return out


#: rows of one node count from which the ``paper`` splits run in lockstep (:func:`paper_search`); one row takes
#: ``contiguous_search`` (one order of 430-780 nodes at K = 8: 54-58 ms vs 80-87 ms, equal at K = 2; load ~7)
PAPER_MIN_ROWS = 2

#: orders of one graph from which its ``latency`` splits run together (:func:`latency_search`; its ~60 bisection steps
#: cost ~40 ms whatever the rows, one ``contiguous_search`` ~20 ms per order at 780 nodes on this CPU: 33 orders of
#: Inception-ResNet-v2 at K = 2-8, 680-790 ms -> 240-370 ms at load ~7; one order 22 ms vs 48 ms)
LATENCY_MIN_ROWS = 8


def _latency_item(graph: Graph, hw: Hardware, lam: float,
                  orders: Sequence[np.ndarray]) -> list[tuple[list[int], float]]:
    """``(cuts, value)`` of the ``latency`` split of each order of ``graph`` (:func:`split_many`)."""
    if graph.num_nodes <= DENSE_SPLIT_MAX_NODES or len(orders) < LATENCY_MIN_ROWS:
        return [contiguous_search(graph, hw, "latency", lam, order)[:2] for order in orders]
    out = []
    for lo in range(0, len(orders), CHUNK_ROWS):
        block = np.stack([np.asarray(o, np.int64) for o in orders[lo : lo + CHUNK_ROWS]])
        par, cut_b = segment_rows(graph, hw, block)
        cuts, values = latency_search(par, macs_rows(graph, block), cut_b, hw, last_start=False)
        out += [(c.tolist(), float(v)) for c, v in zip(cuts, values, strict=True)]
    return out


def best_latency_splits(items: Sequence[tuple[Graph, Sequence[np.ndarray]]], hw: Hardware,
                        lam: float) -> list[tuple[int, list[int], float]]:
    """Per ``(graph, orders)`` item: (index of the first order of the least ``latency`` split value, its cuts, that
    value), what :func:`split_many` followed by the first strict minimum gives. A graph with at least
    :data:`LATENCY_MIN_ROWS` orders takes :func:`latency_best` (one bisection shared by its orders: the orders that
    cannot reach the bottleneck being tried leave it, so the search costs about one order's), the others
    :func:`split_many`."""
    out = []
    for graph, orders in items:
        if len(orders) < LATENCY_MIN_ROWS:
            split = split_many([(graph, orders)], hw, "latency", lam)[0]
            best = 0
            for c in range(1, len(orders)):
                if split[c][1] < split[best][1]:
                    best = c
            out.append((best, list(split[best][0]), float(split[best][1])))
            continue
        best_item = None
        for lo in range(0, len(orders), CHUNK_ROWS):
            block = np.stack([np.asarray(o, np.int64) for o in orders[lo : lo + CHUNK_ROWS]])
            par, cut_b = segment_rows(graph, hw, block)
            row, cuts, value = latency_best(par, macs_rows(graph, block), cut_b, hw,
                                            last_start=graph.num_nodes <= DENSE_SPLIT_MAX_NODES)
            if best_item is None or value < best_item[2]:
                best_item = (lo + row, cuts.tolist(), value)
        out.append(best_item)
    return out


def split_rows(graph: Graph, hw: Hardware, objective: str, lam: float,
               orders: Sequence[np.ndarray]) -> list[tuple[list[int], float]]:
    """``(cuts, value)`` of the best contiguous split of each order of ``graph`` (:func:`split_many` of one graph)."""
    return split_many([(graph, orders)], hw, objective, lam)[0]
