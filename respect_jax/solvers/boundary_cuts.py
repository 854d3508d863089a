"""Interval re-cuts under ``latency``: one stage boundary re-chosen among *all* downsets between its neighbours.

A valid schedule is a chain of downsets ``D_1 <= D_2 <= ... <= D_{K-1}`` (``D_k``: the nodes on stages ``< k``).
Under the cost model stage ``j``'s time is ``T_j = overhead + c(D_{j+1} - D_j) + spill_j + x(D_j)``, with ``c`` the
compute time of a node set and ``x(D)`` the transfer time of the tensors produced in ``D`` and read outside it (graph
outputs included): the tensors entering stage ``j``. Moving boundary ``k`` alone (``D_{k-1}`` and ``D_{k+1}`` kept)
changes only ``T_{k-1} = a + c(D_k)`` and ``T_k = b - c(D_k) + x(D_k)``. For a multiplier ``mu`` in [0, 1] the downset
``D`` of the interval ``D_{k-1} <= D <= D_{k+1}`` minimising ``mu T_{k-1} + (1 - mu) T_k``, i.e.
``(1 - mu) x(D) - (1 - 2 mu) c(D)``, is a minimum-cost closure (one max flow: :class:`IntervalCut`); its compute
``c(D)`` falls as ``mu`` grows, so a bisection on ``mu`` towards ``T_{k-1} = T_k`` visits the Lagrangian points
between the two stages. Each such downset is scored exactly (float64, spill included) and the best is kept when it
lowers the larger of the two stage times (:func:`interval_recut`). Unlike the band re-cuts of
:mod:`respect_jax.local_search` (a band of positions of one topological order), the interval is every downset between
the neighbouring boundaries: nodes move between the two stages in any pattern.

:func:`interval_sweep` applies it around the longest stages until no boundary improves, a round limit or ``stop()``.
"""

from __future__ import annotations

import numpy as np

from respect_jax.costs import Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.solvers.bounds import closure_cut
from respect_jax.solvers.rebalance import stage_times_np

#: bisection steps on the multiplier per interval re-cut (each one max flow on the interval's nodes)
RECUT_STEPS = 12
#: integer capacities of the max flow: costs are scaled so that the largest total is about 2**50
_CAP_BITS = 50


class IntervalCut:
    """The minimum-cost closures of one interval ``lo <= D <= hi`` (bool[N] downsets, ``lo`` inside ``hi``) of
    ``graph``: :meth:`solve` ``(alpha, beta)`` returns the downset ``D`` of the interval minimising
    ``alpha x(D) - beta c(D)`` (``x``: transfer time of the tensors leaving ``D``, ``c``: compute time of ``D``), by
    one max flow on the interval's nodes (OR-tools ``SimpleMaxFlow``): a node ``x_v`` per interval node (v in D), a
    node ``z_u`` per node u whose tensor can stop crossing (every reader inside the interval or ``lo``, u not a graph
    output; z_u: every reader of u in D), the implications ``x_v -> x_u`` per edge inside the interval and
    ``z_u -> x_w`` per reader w in the interval."""

    def __init__(self, graph: Graph, hw: Hardware, lo: np.ndarray, hi: np.ndarray):
        from ortools.graph.python import max_flow  # imported at the first use

        n = graph.num_nodes
        lo, hi = np.asarray(lo, bool), np.asarray(hi, bool)
        self.lo, self.hi = lo, hi
        window = hi & ~lo
        self.nodes = np.flatnonzero(window)
        m = len(self.nodes)
        local = np.full(n, -1, np.int64)
        local[self.nodes] = np.arange(m)
        e = np.asarray(graph.edges, np.int64).reshape(-1, 2)
        out_t = graph.output_size.astype(np.float64) * float(hw.act_bytes) / float(hw.link_bw)
        self.comp = graph.macs.astype(np.float64)[self.nodes] / float(hw.macs_per_s)
        # a tensor can stop crossing when its producer is in lo or the window, every reader is in lo or the window
        # (not beyond hi), at least one reader in the window (else it is constant), and it is no graph output
        has_succ = np.zeros(n, bool)
        has_succ[e[:, 0]] = True
        beyond = np.zeros(n, bool)  # a reader outside hi
        beyond[e[~hi[e[:, 1]], 0]] = True
        into = np.zeros(n, bool)  # a reader in the window
        into[e[window[e[:, 1]], 0]] = True
        zs = np.flatnonzero(hi & has_succ & ~beyond & into & (out_t > 0))
        z_of = np.full(n, -1, np.int64)
        z_of[zs] = 2 + m + np.arange(len(zs))
        self.zs = zs
        # x_v's own crossing cost: a window node's tensor crosses when it is in D unless z_v
        self.out_w = out_t[self.nodes]
        self.out_z = out_t[zs]
        # a z of a node in lo has no x: its profit is earned when all its window readers are in D
        inner = window[e[:, 0]] & window[e[:, 1]]
        zw = (z_of[e[:, 0]] >= 0) & window[e[:, 1]]
        x = 2 + np.arange(m)
        tails = [2 + local[e[inner, 1]], z_of[e[zw, 0]], np.zeros(m, np.int64), x, np.zeros(len(zs), np.int64)]
        heads = [2 + local[e[inner, 0]], 2 + local[e[zw, 1]], x, np.ones(m, np.int64), z_of[zs]]
        # z_u of a window node u also implies x_u (u's tensor saved only when u is in D: implied by its readers anyway)
        self.n_implications = int(inner.sum() + zw.sum())
        self._flow = max_flow.SimpleMaxFlow()
        tail, head = np.concatenate(tails), np.concatenate(heads)
        self._arcs = self._flow.add_arcs_with_capacity(tail, head, np.zeros(len(tail), np.int64))
        self.cuts = 0

    def solve(self, alpha: float, beta: float) -> np.ndarray:
        """bool[N]: a downset of the interval minimising ``alpha x(D) - beta c(D)`` up to the integer rounding."""
        m = len(self.nodes)
        if m == 0:
            return self.lo.copy()
        cost = alpha * self.out_w - beta * self.comp
        profit = alpha * self.out_z
        total = float(np.abs(cost).sum() + profit.sum())
        scale = 2.0 ** np.floor(np.log2(2.0**_CAP_BITS / max(total, 1e-300)))
        scaled = np.rint(scale * cost).astype(np.int64)
        profit_z = np.rint(scale * profit).astype(np.int64)
        _, side = closure_cut(self._flow, self._arcs, self.n_implications, scaled, profit_z, "an interval cut")
        self.cuts += 1
        member = self.lo.copy()
        chosen = side[(side >= 2) & (side < 2 + m)] - 2
        member[self.nodes[chosen]] = True
        return member


def _max2(times: np.ndarray, k: int) -> float:
    return float(max(times[k - 1], times[k]))


def interval_recut(graph: Graph, hw: Hardware, assignment: np.ndarray, k: int, steps: int = RECUT_STEPS,
                   info: dict | None = None, stop=None) -> np.ndarray:
    """int64[N]: ``assignment`` (a valid ``latency`` schedule by node id) with boundary ``k`` (between stages ``k - 1``
    and ``k``, 1 <= k < K) re-chosen among the downsets between its neighbouring boundaries: the best, by the larger of
    the two stage times (exact, float64), of the Lagrangian downsets a bisection on the multiplier visits
    (``steps`` max flows, module docstring), kept only when that larger time drops; otherwise ``assignment`` itself.
    Only stages ``k - 1`` and ``k`` change. ``info`` (optional): gets ``cuts`` (max flows solved). ``stop()``
    (optional) is looked at before each max flow: the best downset so far is then returned."""
    s = np.asarray(assignment, np.int64)
    kk = int(hw.stages)
    if not 1 <= int(k) < kk:
        raise ValueError(f"boundary k must satisfy 1 <= k < K = {kk}, got {k}")
    lo, hi = s < k - 1, s <= k
    cut = IntervalCut(graph, hw, lo, hi)
    base = stage_times_np(graph, s[None], hw)[0]
    best, best_val = s, _max2(base, k)
    a, b = 0.0, 1.0  # mu: 0 favours T_k alone (more compute before the boundary), 1 the compute of D alone
    seen: set = set()
    for _ in range(int(steps)):
        if stop is not None and stop():
            break
        mu = 0.5 * (a + b)
        member = cut.solve(1.0 - mu, 1.0 - 2.0 * mu)
        cand = s.copy()
        cand[cut.nodes] = np.where(member[cut.nodes], k - 1, k)
        key = member[cut.nodes].tobytes()
        if key not in seen:
            seen.add(key)
            times = stage_times_np(graph, cand[None], hw)[0]
            val = _max2(times, k)
            if val < best_val:
                best, best_val = cand, val
        else:
            times = stage_times_np(graph, cand[None], hw)[0]
        if times[k - 1] > times[k]:
            a = mu  # stage k - 1 too long: less compute before the boundary
        else:
            b = mu
    if info is not None:
        info["cuts"] = cut.cuts
    return best


def interval_sweep(graph: Graph, hw: Hardware, assignment: np.ndarray, rounds: int = 4, steps: int = RECUT_STEPS,
                   stop=None, offer=None, memo: set | None = None) -> np.ndarray:
    """int64[N]: ``assignment`` after interval re-cuts (:func:`interval_recut`) of the boundaries next to each stage,
    the longest stage first (its lower boundary, then its upper one), a re-cut kept when the stage times sorted in
    decreasing order get smaller (:func:`~respect_jax.solvers.rebalance.leximax_less`: the largest never grows); until
    a round changes nothing, ``rounds`` rounds or ``stop()``. Each kept schedule goes to ``offer`` (optional).
    ``memo`` (optional, kept by the caller across calls): the re-cuts that kept nothing, by boundary and the stages
    around it (a re-cut depends on nothing else), skipped when met again. Never worse."""
    from respect_jax.solvers.rebalance import leximax_less

    s = np.asarray(assignment, np.int64).copy()
    kk = int(hw.stages)
    if kk < 2:
        return s
    memo = set() if memo is None else memo
    times = stage_times_np(graph, s[None], hw)[0]
    for _ in range(int(rounds)):
        changed = False
        tried = set()
        for j in np.argsort(-times, kind="stable"):
            for k in (int(j), int(j) + 1):
                if not 1 <= k < kk or k in tried:
                    continue
                if stop is not None and stop():
                    return s
                tried.add(k)
                key = (k, np.clip(s, k - 2, k + 1).astype(np.int8).tobytes())
                if key in memo:
                    continue
                cand = interval_recut(graph, hw, s, k, steps, stop=stop)
                ctimes = stage_times_np(graph, cand[None], hw)[0]
                if leximax_less(ctimes, times):
                    s, times, changed = cand, ctimes, True
                    if offer is not None:
                        offer(s)
                elif stop is None or not stop():  # a re-cut cut short is not remembered
                    memo.add(key)
        if not changed:
            break
    return s


#: :func:`jump_move` scores its candidate schedules in batches of about this many (candidate x edge) entries, so that a
#: stop is seen within ~0.1-0.4 s at 10,000 nodes (a batch of 256 candidates there took 1.6 s under load).
JUMP_BATCH_ENTRIES = 2**20


def jump_move(graph: Graph, hw: Hardware, assignment: np.ndarray, stop=None) -> np.ndarray:
    """int64[N]: ``assignment`` (a valid ``latency`` schedule by node id) with one node moved across at least two
    stages, to any stage its predecessors' and successors' stages allow (the single-node polish moves one stage up or
    down only; such a jump can save a tensor crossing two boundaries at once), the move whose stage times are the least
    in the leximax order (:func:`~respect_jax.solvers.rebalance.leximax_less`: sorted in decreasing order), taken only
    when they are leximax-less than ``assignment``'s (the largest never grows); otherwise ``assignment`` itself. Every
    candidate is scored exactly (float64, spill included), in batches of :data:`JUMP_BATCH_ENTRIES` (candidate x edge)
    entries; ``stop()`` (optional) is looked at between batches (the best so far is then taken)."""
    from respect_jax.solvers.rebalance import leximax_less

    s = np.asarray(assignment, np.int64)
    kk, n = int(hw.stages), graph.num_nodes
    if kk < 3 or n == 0:
        return s
    e = np.asarray(graph.edges, np.int64).reshape(-1, 2)
    lo = np.zeros(n, np.int64)  # the latest predecessor's stage
    np.maximum.at(lo, e[:, 1], s[e[:, 0]])
    hi = np.full(n, kk - 1, np.int64)  # the earliest successor's stage
    np.minimum.at(hi, e[:, 0], s[e[:, 1]])
    nodes, targets = [], []
    for t in range(kk):
        v = np.flatnonzero((lo <= t) & (t <= hi) & (np.abs(t - s) >= 2))
        nodes.append(v)
        targets.append(np.full(len(v), t, np.int64))
    nodes, targets = np.concatenate(nodes), np.concatenate(targets)
    current = stage_times_np(graph, s[None], hw)[0]
    best, best_times = None, current
    batch = max(1, JUMP_BATCH_ENTRIES // max(len(e), n))
    for i in range(0, len(nodes), batch):
        if stop is not None and stop():
            break
        v, t = nodes[i:i + batch], targets[i:i + batch]
        cand = np.repeat(s[None], len(v), axis=0)
        cand[np.arange(len(v)), v] = t
        times = stage_times_np(graph, cand, hw)
        for j in np.argsort(times.max(axis=1), kind="stable"):
            if times[j].max() > best_times.max():
                break
            if leximax_less(times[j], best_times):
                best, best_times = cand[j].copy(), times[j]
    return s if best is None else best
