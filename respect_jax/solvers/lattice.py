"""Exact optima of graphs with few downsets: a dynamic programme over the lattice of downsets (order ideals).

A valid schedule (``s(u) <= s(v)`` on every edge) is the same thing as a chain of downsets ``{} = D_0 ⊆ D_1 ⊆ ...
⊆ D_{K-1} ⊆ D_K = V`` with ``D_k = {v : s(v) < k}`` (closed under predecessors): stage k holds ``D_{k+1} \\ D_k``
(empty stages allowed) and receives ``in_k = b_a cross(D_k)``, where ``cross(D) = sum(out_u : u in D, u has a
consumer outside D or is a graph output)`` (``cross({}) = 0``). So with every downset enumerated:

* ``latency`` (``max_k T_k``, ``T_k = tau + macs_k / R + max(0, mem_k - C) / H + in_k / L``): the stage time of
  ``D_k ⊆ D_{k+1}`` depends on that pair only, and the least bottleneck is a min-max path of K steps from ``{}`` to
  ``V`` in the containment order: ``f_{k+1}(J) = min_{I ⊆ J} max(f_k(I), T(I, J))``, O(K M^2) for M downsets.
* ``paper`` (``max_k mem_k + lam b_a sum_{k=1}^{K-1} cross(D_k)``): for a memory cap the least communication
  ``G(cap)`` is a min-sum path over the pairs whose stage fits the cap; the caps are walked down exactly as the
  contiguous split's search does (:func:`respect_jax.solvers.partitioners.best_contiguous_cuts`): the split found
  at a cap, with largest stage M', is the best of every split whose largest stage lies in ``[M', cap]``, and a
  split with a smaller largest stage m (communication >= ``G(cap)``) can only beat the best value b when
  ``m <= b - G(cap)``; so the next cap is the smaller of "just below M'" and ``b - G(cap)``.

Both are exact, so the value is the optimum and a certified lower bound. A graph whose reachability is a total
order (a unique topological order, :func:`has_unique_order`: every consecutive pair of its order is an edge) has
exactly N + 1 downsets, the prefixes of that order: there every schedule is a contiguous split of the order, and
the exact best contiguous split is the optimum (no programme needed).
"""

from __future__ import annotations

import time

import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph

#: Downsets enumerated at most (the programme is O(K P) in time and memory for P <= M^2 / 2 comparable pairs
#: of the M downsets).
MAX_DOWNSETS = 2000
#: Relative slack on ``upper`` when pairs are dropped (float rounding of a schedule's value).
UPPER_SLACK = 1e-9
#: Memory caps the ``paper`` walk visits at most (then no optimum is claimed).
MAX_CAPS = 400


def has_unique_order(graph: Graph) -> bool:
    """True when the graph has one topological order only (its reachability is a total order): then every valid
    schedule is a contiguous split of :meth:`~respect_jax.graphs.graph.Graph.topological_order`."""
    n = graph.num_nodes
    if n <= 1:
        return True
    order = graph.topological_order().astype(np.int64)
    if len(graph.edges) == 0:
        return False
    keys = graph.edges[:, 0].astype(np.int64) * n + graph.edges[:, 1].astype(np.int64)
    return bool(np.isin(order[:-1] * n + order[1:], keys).all())


def enumerate_downsets(graph: Graph, max_count: int = MAX_DOWNSETS, deadline: float | None = None
                       ) -> np.ndarray | None:
    """bool[M, N] every downset of the graph (row 0 the empty one), or None when there are more than
    ``max_count`` or ``deadline`` (a ``time.perf_counter()`` instant) passes first. Breadth first by size: a
    downset's extensions are the nodes whose predecessors all lie in it."""
    n = graph.num_nodes
    preds = [0] * n
    succs: list[list[int]] = [[] for _ in range(n)]
    for u, v in graph.edges.tolist():
        preds[v] |= 1 << u
        succs[u].append(v)
    level = {0: frozenset(v for v in range(n) if preds[v] == 0)}
    found = [0]
    while level:
        if deadline is not None and time.perf_counter() > deadline:
            return None
        nxt: dict[int, frozenset] = {}
        for ideal, avail in level.items():
            for v in avail:
                child = ideal | (1 << v)
                if child in nxt:
                    continue
                new = [w for w in succs[v] if preds[w] & ~child == 0]
                nxt[child] = (avail - {v}) | frozenset(new)
        found.extend(nxt)
        if len(found) > max_count:
            return None
        level = nxt
    width = (n + 7) // 8
    raw = b"".join(i.to_bytes(width, "little") for i in found)
    bits = np.unpackbits(np.frombuffer(raw, np.uint8).reshape(len(found), width), axis=1, bitorder="little")
    return bits[:, :n].astype(bool)


def _downset_terms(graph: Graph, hw: Hardware, sets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """f64[M] parameter bytes, MACs and crossing bytes ``b_a cross(D)`` of each downset (rows of ``sets``)."""
    m, n = sets.shape
    weights = sets.astype(np.float64)
    par = hw.param_bytes * (weights @ graph.params.astype(np.float64))
    macs = weights @ graph.macs.astype(np.float64)
    crossing = sets.copy()  # u in D crosses unless u has consumers and all of them lie in D
    has_succ = np.zeros(n, bool)
    if len(graph.edges):
        has_succ[graph.edges[:, 0]] = True
        inside = np.ones((m, n), bool)
        for u, v in graph.edges.tolist():
            inside[:, u] &= sets[:, v]
        crossing &= ~(inside & has_succ[None, :])
    cross = hw.act_bytes * (crossing.astype(np.float64) @ graph.output_size.astype(np.float64))
    return par, macs, cross


def _pairs(sets: np.ndarray, deadline: float | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """The comparable pairs ``sets[i] ⊆ sets[j]`` as i64 arrays ``(i, j)``, sorted by j (then i); None once
    ``deadline`` passes."""
    m = sets.shape[0]
    packed = np.packbits(sets, axis=1)
    pad = (-packed.shape[1]) % 8
    words = np.pad(packed, ((0, 0), (0, pad))).view(np.uint64)
    firsts, seconds = [], []
    for j in range(m):
        if deadline is not None and j % 64 == 0 and time.perf_counter() > deadline:
            return None
        i = np.flatnonzero(~np.any(words & ~words[j], axis=1))
        firsts.append(i)
        seconds.append(np.full(len(i), j, np.int64))
    return np.concatenate(firsts).astype(np.int64), np.concatenate(seconds)


def _groups(group: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The segment starts of the non-empty groups of the sorted ``group`` (i64[P]) and a bool[m] of them."""
    counts = np.bincount(group, minlength=m)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    nonempty = counts > 0
    return starts[nonempty], nonempty


def _group_min(values: np.ndarray, group: np.ndarray, segments: tuple[np.ndarray, np.ndarray], m: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per group g in ``0..m-1`` (``group``: i64[P] sorted, one per value; ``segments``: :func:`_groups`) the least
    value (inf for an empty group) and the index into ``values`` of its first occurrence (-1 for an empty group)."""
    starts, nonempty = segments
    least = np.full(m, np.inf)
    if len(values):
        least[nonempty] = np.minimum.reduceat(values, starts)
    hit = np.flatnonzero(values == least[group])
    hit_group = group[hit]
    new = np.ones(len(hit), bool)
    new[1:] = hit_group[1:] != hit_group[:-1]
    first = np.full(m, -1, np.int64)
    first[hit_group[new]] = hit[new]
    return least, first


def _assignment(sets: np.ndarray, chain: list[int]) -> np.ndarray:
    """i64[N] stages of the downset chain ``D_1..D_{K-1}`` (row indices): ``s(v) = #{k : v not in D_k}``."""
    if not chain:
        return np.zeros(sets.shape[1], np.int64)
    return np.sum(~sets[chain], axis=0).astype(np.int64)


def _path(args: list[np.ndarray], end: int) -> list[int]:
    """The downsets ``D_1..D_{K-1}`` from the argmin tables (per step: j -> the previous downset) of the K - 1
    steps after the first stage."""
    chain, j = [], end
    for arg in reversed(args):
        j = int(arg[j])
        chain.append(j)
    return chain[::-1]


def _min_path(first: np.ndarray, step, pi: np.ndarray, pj: np.ndarray, stages: int, full: int, deadline
              ) -> tuple[float, list[int]] | None:
    """K-step path over the pairs ``(pi, pj)``: ``f_0 = first``, ``f_{k+1}(j) = min_pairs step(f_k[pi], pair)``."""
    m = len(first)
    f, args, segments = first, [], _groups(pj, m)
    for _ in range(stages - 1):
        if deadline is not None and time.perf_counter() > deadline:
            return None
        f, at = _group_min(step(f[pi]), pj, segments, m)
        args.append(np.where(at >= 0, pi[np.maximum(at, 0)], -1))
    if not np.isfinite(f[full]):
        return np.inf, []
    return float(f[full]), _path(args, full)


def _latency(par, macs, cross, pi, pj, hw: Hardware, full: int, deadline, upper: float
             ) -> tuple[float, list[int]] | None:
    rate, sram, host, link = float(hw.macs_per_s), float(hw.sram_bytes), float(hw.host_bw), float(hw.link_bw)
    t = (hw.stage_overhead_s + (macs[pj] - macs[pi]) / rate + np.maximum((par[pj] - par[pi]) - sram, 0.0) / host
         + cross[pi] / link)
    keep = t <= upper * (1 + UPPER_SLACK)  # no stage of the optimum is slower than a known schedule's bottleneck
    pi, pj, t = pi[keep], pj[keep], t[keep]
    first = np.full(len(par), np.inf)  # stage 0 = D_1 (the empty downset, row 0, receives nothing)
    from_empty = pi == 0
    first[pj[from_empty]] = t[from_empty]
    return _min_path(first, lambda prev: np.maximum(prev, t), pi, pj, hw.stages, full, deadline)


def _paper(par, cross, pi, pj, hw: Hardware, lam: float, full: int, deadline, upper: float
           ) -> tuple[float, list[int]] | None:
    weight = lam * cross
    size = par[pj] - par[pi]
    keep = size <= upper * (1 + UPPER_SLACK)  # no stage of the optimum holds more than a known schedule's objective
    pi, pj, size = pi[keep], pj[keep], size[keep]
    best_value, best_chain = np.inf, None
    step = 0.5 * float(hw.param_bytes) if hw.param_bytes > 0 else 0.5
    cap = float(par[full])  # every stage fits: the first visit
    for _ in range(MAX_CAPS):
        fits = size <= cap
        i, j = pi[fits], pj[fits]
        first = np.full(len(par), np.inf)
        first[j[i == 0]] = 0.0
        found = _min_path(first, lambda prev, w=weight[i]: prev + w, i, j, hw.stages, full, deadline)
        if found is None:
            return None
        comm, chain = found
        if not np.isfinite(comm):
            break
        bounds = [0, *chain, full]
        largest = float(max(par[b] - par[a] for a, b in zip(bounds[:-1], bounds[1:], strict=True)))
        if largest + comm < best_value:
            best_value, best_chain = largest + comm, chain
        cap = min(largest - step, min(best_value, upper) - comm)
        if cap < 0:
            break
    else:
        return None
    return best_value, best_chain


def solve_lattice(graph: Graph, hw: Hardware, objective: str, lam: float = 1.0, max_downsets: int = MAX_DOWNSETS,
                  deadline: float | None = None, upper: float = np.inf) -> dict | None:
    """The optimum by the downset programme (module docstring), or None when the graph has more than
    ``max_downsets`` downsets or ``deadline`` passes first.

    Args:
        graph, hw, objective, lam: the problem.
        max_downsets: enumerate at most this many downsets.
        deadline: a ``time.perf_counter()`` instant (None: none).
        upper: the objective of some valid schedule (or inf): stages worse than it are not considered and the
            ``paper`` walk is pruned with it; the result is still the optimum.
    Returns:
        ``{"assignment": i64[N], "value": the optimum (the programme's float64 arithmetic), "downsets": M,
        "time_s": float}``.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    start = time.perf_counter()
    sets = enumerate_downsets(graph, max_downsets, deadline)
    if sets is None:
        return None
    full = int(np.flatnonzero(sets.all(axis=1))[0])
    par, macs, cross = _downset_terms(graph, hw, sets)
    if hw.stages == 1:
        found = (0.0, [])
    else:
        pairs = _pairs(sets, deadline)
        if pairs is None:
            return None
        pi, pj = pairs
        if objective == "latency":
            found = _latency(par, macs, cross, pi, pj, hw, full, deadline, upper)
        else:
            found = _paper(par, cross, pi, pj, hw, lam, full, deadline, upper)
    if found is None:
        return None
    value, chain = found
    assignment = _assignment(sets, chain)
    if hw.stages == 1:
        from respect_jax.solvers.numpy_eval import objective_np

        value = objective_np(graph, assignment, hw, objective, lam)
    return {"assignment": assignment, "value": float(value), "downsets": int(len(sets)),
            "time_s": time.perf_counter() - start}
