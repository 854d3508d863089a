"""The single-node local search of :func:`respect_jax.local_search.polish` (``kind="single"``, no escapes) on the host,
in float64 NumPy: no JAX compilation.

``solver=auto``'s contiguous line polishes its split with up to ``line_moves`` single-node moves on graphs of more than
300 nodes. The compiled search needs a compilation per padded shape (2-5 s at 1k-5k nodes on a quiet 2-core CPU, over
10 s under load beside CP-SAT and the host rebalancing), so inside a 10 s budget its first move often came late or never
(validation: ``contiguous+ls`` "still running at the deadline" in 5 of 8 runs at load ~6). The moves themselves are
cheap: O(N K + E) vector operations each, on the host as on the device.

The search is the compiled one's (:func:`respect_jax.local_search._improve_mixed` without escapes): at every step all
``2 N`` moves of one node one stage up or down that its predecessors' and successors' stages allow are scored
incrementally from the current per-stage totals (:class:`_Moves`); the best-scored one is taken when its
score (the objective times ``1 + TIE_BREAK * mean((load / max load)^4)``, loads = stage times under ``latency``, stage
memory under ``paper``) is lower by a relative ``MIN_IMPROVEMENT``; the best objective seen is returned.

Since session 33 the search keeps the per-node quantities of the scan (:class:`_State`: allowed stages, latest consumer
stage, bytes lifted / dropped by a move) from move to move, recomputing only those of the moved node's neighbours and
their producers' consumers, in the same float order: the same moves as a from-scratch scan at every step, 2-3x faster
(a move of a 10,000-node layered graph: ~1 ms under load instead of ~3 ms).
"""

from __future__ import annotations

import numpy as np

from respect_jax.costs import Hardware, stage_time
from respect_jax.graphs.graph import Graph
from respect_jax.local_search import MIN_IMPROVEMENT, TIE_BREAK
from respect_jax.solvers.numpy_eval import stage_loads


def _score(obj: np.ndarray, loads: np.ndarray) -> np.ndarray:
    """The search score of :func:`respect_jax.local_search.search_value` (last axis = K)."""
    top = np.maximum(np.max(loads, axis=-1, keepdims=True), 1e-30)
    return obj * (1.0 + TIE_BREAK * np.mean((loads / top) ** 4, axis=-1))


def value_and_score(graph: Graph, stage: np.ndarray, hw: Hardware, objective: str, lam: float) -> tuple[float, float]:
    """(objective, search score) of the schedule ``stage`` (int64[N] by node id) in float64; inf if invalid."""
    m = stage_loads(graph, stage, hw)
    if not m["valid"]:
        return np.inf, np.inf
    if objective == "latency":
        obj, loads = float(np.max(m["time_k"])), m["time_k"]
    else:
        obj, loads = float(np.max(m["mem_k"]) + lam * m["comm_bytes"]), m["mem_k"]
    return obj, float(_score(np.asarray(obj), loads))


class _Moves:
    """(objective f64[2N], score f64[2N]) of moving node v alone one stage up (rows 0..N-1) or down (rows N..2N-1), inf
    where its predecessors' / successors' stages (or 0..K-1) forbid it, incremental from the current totals as
    :func:`respect_jax.local_search.single_move_values`; the graph's per-node data and edge groupings are computed
    once, so each call costs a few O(N + E) reductions (``reduceat`` over edges grouped by producer / consumer,
    ``bincount``) and O(N) arithmetic on the two stages a move changes (the other stages' max and sum of fourth powers
    come from a K-entry table)."""

    def __init__(self, graph: Graph, hw: Hardware, objective: str, lam: float):
        self.graph, self.hw, self.objective, self.lam = graph, hw, objective, float(lam)
        self.k, self.n = int(hw.stages), graph.num_nodes
        snd, rcv = graph.edges[:, 0].astype(np.int64), graph.edges[:, 1].astype(np.int64)
        self.snd, self.rcv = snd, rcv
        by_rcv, by_snd = np.argsort(rcv, kind="stable"), np.argsort(snd, kind="stable")
        self.pred_of = snd[by_rcv]  # producers grouped by consumer
        self.succ_of = rcv[by_snd]  # consumers grouped by producer
        self.has_pred = np.bincount(rcv, minlength=self.n) > 0
        self.has_succ = np.bincount(snd, minlength=self.n) > 0
        self.pred_starts = np.searchsorted(rcv[by_rcv], np.flatnonzero(self.has_pred))
        self.succ_starts = np.searchsorted(snd[by_snd], np.flatnonzero(self.has_succ))
        self.p = float(hw.param_bytes) * graph.params.astype(np.float64)
        self.c = graph.macs.astype(np.float64)
        self.out = float(hw.act_bytes) * graph.output_size.astype(np.float64)

    def loads(self, mem, macs, in_k):
        return stage_time(mem, macs, in_k, self.hw) if self.objective == "latency" else mem

    def state(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(low, high, last, lifted, dropped) of ``s`` from scratch: the stages a node may take (its predecessors'
        latest, its successors' earliest), its successors' latest stage (K - 1 for a sink), and per node the bytes of
        the tensors it reads from a producer whose latest consumer is on its stage (``lifted``) or whose only consumer
        there it is (``dropped``)."""
        k, n = self.k, self.n
        low = np.zeros(n, np.int64)
        high = np.full(n, k - 1, np.int64)
        last = np.full(n, k - 1, np.int64)
        if len(self.snd):
            low[self.has_pred] = np.maximum.reduceat(s[self.pred_of], self.pred_starts)
            succ_stages = s[self.succ_of]
            high[self.has_succ] = np.minimum.reduceat(succ_stages, self.succ_starts)
            last[self.has_succ] = np.maximum.reduceat(succ_stages, self.succ_starts)
        out, snd, rcv = self.out, self.snd, self.rcv
        at_last = s[rcv] == last[snd]
        on_last = np.bincount(snd, at_last, minlength=n)
        lifted = np.bincount(rcv, np.where(at_last, out[snd], 0.0), minlength=n)
        sole = at_last & (on_last[snd] == 1)
        dropped = np.bincount(rcv, np.where(sole, out[snd], 0.0), minlength=n)
        return low, high, last, lifted, dropped

    def __call__(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.scores(s, *self.state(s))

    def scores(self, s: np.ndarray, low: np.ndarray, high: np.ndarray, last: np.ndarray, lifted: np.ndarray,
               dropped: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(objective, score) of every move of ``s`` given its :meth:`state`."""
        k, n = self.k, self.n
        out = self.out
        mem = np.bincount(s, self.p, minlength=k)
        macs = np.bincount(s, self.c, minlength=k)
        crossing = np.bincount(np.minimum(s + 1, k), out, minlength=k + 1) - \
            np.bincount(np.minimum(last + 1, k), out, minlength=k + 1)
        in_k = np.cumsum(crossing)[:k]
        base = self.loads(mem, macs, in_k)  # [K]
        # for the pair of stages (a, a + 1) a move touches: the other stages' max load and sum of fourth powers
        others_max = np.zeros(max(k - 1, 1))
        others_sum4 = np.zeros(max(k - 1, 1))
        for a in range(k - 1):
            rest = np.delete(base, [a, a + 1])
            others_max[a] = rest.max() if len(rest) else 0.0
            others_sum4[a] = np.sum(rest ** 4)
        # only the allowed moves are scored (near the stage boundaries: a small share of the nodes)
        up = np.flatnonzero(s + 1 <= high)
        dn = np.flatnonzero(s - 1 >= low)
        p, c = self.p, self.c
        su, sd = s[up], s[dn]
        a_up = self.loads(mem[su] - p[up], macs[su] - c[up], in_k[su])  # stage s loses v
        b_up = self.loads(mem[su + 1] + p[up], macs[su + 1] + c[up], in_k[su + 1] + lifted[up] - out[up])
        a_dn = self.loads(mem[sd - 1] + p[dn], macs[sd - 1] + c[dn], in_k[sd - 1])  # stage s - 1 gains v
        b_dn = self.loads(mem[sd] - p[dn], macs[sd] - c[dn], in_k[sd] + out[dn] - dropped[dn])
        one = np.concatenate([a_up, a_dn])
        two = np.concatenate([b_up, b_dn])
        pair = np.concatenate([su, sd - 1])
        top = np.maximum(np.maximum(others_max[pair], one), two)
        if self.objective == "latency":
            val = top
        else:
            comm = float(np.sum(out * (last - s)))
            val = top + self.lam * np.concatenate([comm + lifted[up] - out[up], comm + out[dn] - dropped[dn]])
        sum4 = others_sum4[pair] + one ** 4 + two ** 4
        rows = np.concatenate([up, dn + n])
        obj = np.full(2 * n, np.inf)
        score = np.full(2 * n, np.inf)
        obj[rows] = val
        score[rows] = val * (1.0 + TIE_BREAK * sum4 / (np.maximum(top, 1e-30) ** 4 * k))
        return obj, score


class _State:
    """:meth:`_Moves.state` of a schedule kept up to date move by move (:meth:`move`), so that a step of the search
    costs O(N) for the per-stage totals and the allowed moves' scores instead of O(N + E) reductions over the edges:
    moving node v changes the allowed range of its neighbours only, the latest consumer stage (and the count of
    consumers there) of its producers only, and ``lifted`` / ``dropped`` of those producers' consumers only; these are
    recomputed from their edges in the edge list's order, the order of :meth:`_Moves.state`'s ``bincount``, so every
    array equals the from-scratch one bit for bit (and the search takes the same moves)."""

    def __init__(self, scan: _Moves, s: np.ndarray):
        self.scan = scan
        self.s = np.asarray(s, np.int64).copy()
        self.low, self.high, self.last, self.lifted, self.dropped = scan.state(self.s)
        n = scan.n
        pred_ptr = np.zeros(n + 1, np.int64)
        pred_ptr[1:] = np.cumsum(np.bincount(scan.rcv, minlength=n))
        succ_ptr = np.zeros(n + 1, np.int64)
        succ_ptr[1:] = np.cumsum(np.bincount(scan.snd, minlength=n))
        self.pred_ptr, self.succ_ptr = pred_ptr.tolist(), succ_ptr.tolist()
        self.preds, self.succs = scan.pred_of.tolist(), scan.succ_of.tolist()  # by edge index within each node
        self.out = scan.out.tolist()
        self.sl = self.s.tolist()
        self.lastl = self.last.tolist()
        self.on_last = np.bincount(scan.snd, self.s[scan.rcv] == self.last[scan.snd], minlength=n).astype(
            np.int64).tolist()

    def move(self, v: int, stage: int) -> None:
        """Node ``v`` to ``stage`` (the caller checks that the move is allowed)."""
        sl, lastl, on_last, preds, succs = self.sl, self.lastl, self.on_last, self.preds, self.succs
        pp, sp = self.pred_ptr, self.succ_ptr
        sl[v] = stage
        self.s[v] = stage
        for w in dict.fromkeys(succs[sp[v]:sp[v + 1]]):  # v's consumers: their earliest allowed stage
            self.low[w] = max(sl[u] for u in preds[pp[w]:pp[w + 1]])
        producers = list(dict.fromkeys(preds[pp[v]:pp[v + 1]]))
        for u in producers:  # v's producers: their latest allowed stage, latest consumer stage, consumers there
            stages = [sl[w] for w in succs[sp[u]:sp[u + 1]]]
            self.high[u] = min(stages)
            lu = max(stages)
            lastl[u] = lu
            self.last[u] = lu
            on_last[u] = stages.count(lu)
        out = self.out
        for w in dict.fromkeys(w for u in producers for w in succs[sp[u]:sp[u + 1]]):
            lifted = dropped = 0.0
            sw = sl[w]
            for u in preds[pp[w]:pp[w + 1]]:
                if sw == lastl[u]:
                    lifted += out[u]
                    if on_last[u] == 1:
                        dropped += out[u]
            self.lifted[w] = lifted
            self.dropped[w] = dropped

    def scores(self) -> tuple[np.ndarray, np.ndarray]:
        return self.scan.scores(self.s, self.low, self.high, self.last, self.lifted, self.dropped)


def host_polish(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray, moves: int,
                stop=None, offer=None, check_every: int = 10) -> np.ndarray:
    """int64[N]: ``assignment`` after at most ``moves`` single-node moves (module docstring), never worse (float64).
    ``stop()`` (optional) is looked at every ``check_every`` moves; each time the best schedule has improved since the
    last look it is passed to ``offer`` (optional), so a caller that abandons this keeps it."""
    return descend(graph, hw, objective, lam, assignment, moves, stop, offer, check_every)[0]


def descend(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray, moves: int,
            stop=None, offer=None, check_every: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """(best schedule by objective, the search's last schedule) of :func:`host_polish`'s hill climb (by score)."""
    best = np.asarray(assignment, np.int64).copy()
    if moves <= 0 or int(hw.stages) < 2:
        return best, best
    s = best.copy()
    best_obj, s_score = value_and_score(graph, s, hw, objective, lam)
    offered = best_obj
    n = graph.num_nodes
    state = _State(_Moves(graph, hw, objective, lam), s)
    for step in range(int(moves)):
        if step % int(check_every) == 0 and step:
            if offer is not None and best_obj < offered:
                offer(best.copy())
                offered = best_obj
            if stop is not None and stop():
                break
        objs, scores = state.scores()
        j = int(np.argmin(scores))
        if not scores[j] < s_score * (1.0 - MIN_IMPROVEMENT):
            break
        # the incremental values are exact (float64), or above the exact ones where a producer feeds one consumer
        # twice (a duplicate edge): never below, so the best kept is never worse than it looks
        obj, score = float(objs[j]), float(scores[j])
        v = j % n
        state.move(v, int(state.s[v]) + (1 if j < n else -1))
        s_score = score
        if obj < best_obj:
            best, best_obj = state.s.copy(), obj
    s = state.s.copy()
    if offer is not None and best_obj < offered:
        offer(best.copy())
    return best, s
