"""Exact optima by a dynamic programme over the lattice of downsets (order ideals), filtered by a limit.

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

Both are exact, so the value is the optimum and a certified lower bound.

**Fewer downsets: a limit.** Given a limit U (a known schedule's value, or a guess), only schedules at most U matter,
and each of their boundaries obeys necessary conditions (:func:`_boundary_mask`): for ``latency`` stage k receives
``cross(D_k)``, the first k stages hold ``macs(D_k)`` and the last K - k the rest (each stage at least ``tau``, the
spills at least the excess over k SRAMs); for ``paper`` every stage holds at most ``U - lam cross(D_k)`` bytes.
So the programme is layered: ``D_k`` ranges over the downsets that may be boundary k, and a stage ``I ⊆ J`` is only
examined when J's weight (MACs for latency, parameter bytes for paper) exceeds I's by at most one stage's worth.

**Fewer downsets: modules.** A separator is a node comparable with every other node (the join of a chain of
modules: Inception's concatenations). Every downset holds the separator's closure or lies below it, so the downsets
are enumerated module by module (:func:`series_segments`): a module whose weights cannot meet any boundary's
conditions is not enumerated, and two downsets of different modules are always nested (only a module's own bits
are compared).

**Probing** (:func:`search_lattice`): a limit just above the optimum keeps the fewest downsets, and a limit below it
proves, when the programme finds no schedule, a lower bound. The probes bisect between the best lower bound and
the smallest limit for which the programme had too many downsets or pairs.

A graph whose reachability is a total
order (a unique topological order, :func:`has_unique_order`: every consecutive pair of its order is an edge) has
exactly N + 1 downsets, the prefixes of that order: there every schedule is a contiguous split of the order, and
the exact best contiguous split is the optimum (no programme needed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph

#: Downsets kept at most per probe (those that may be a stage boundary under the limit; the programme is O(K P) in
#: time and memory for the P pairs it examines, at most ``MAX_PAIRS``).
MAX_DOWNSETS = 100_000
#: Relative slack on ``upper`` when pairs are dropped (float rounding of a schedule's value).
UPPER_SLACK = 1e-9
#: Memory caps the ``paper`` walk visits at most (then no optimum is claimed).
MAX_CAPS = 400
#: Downsets enumerated at most, over all segments, before the filters of a known schedule's value.
MAX_ENUMERATED = 100_000
#: Downsets x segment nodes enumerated at most in one segment: its rows (bool) and their weights (float64) take 9 bytes
#: per cell, so at most ~0.9 GB (a 5,000-node segment stops at 20,000 downsets; a 1,000-node one keeps 100,000).
MAX_ENUMERATED_CELLS = 100_000_000
#: Seconds spent enumerating downsets at most (over all probes of one problem).
ENUMERATION_S = 1.0
#: Candidate pairs (a window of keys, :func:`_window_pairs`) examined at most.
MAX_PAIRS = 12_000_000
#: Candidate pairs examined per vectorised chunk.
PAIR_CHUNK = 2_000_000
#: Relative slack of the necessary conditions that drop downsets and pairs (float rounding).
FILTER_SLACK = 1e-7
#: :func:`search_lattice` stops probing once the bracket around the optimum is this narrow (relative to ``upper``).
PROBE_RTOL = 1e-7
#: Downsets of least crossing the heuristic programme of :func:`search_lattice` keeps.
HEURISTIC_DOWNSETS = 1500


def _bfs_downsets(preds: list[int], succs: list[list[int]], max_count: int, deadline: float | None
                  ) -> list[int] | None:
    """Every downset of a DAG on nodes ``0..n-1`` (``preds[v]``: bitmask of v's predecessors; ``succs[v]``: its
    successors) as bitmasks (the empty one first), or None past ``max_count`` or ``deadline``. Breadth first by
    size: a downset's extensions are the nodes whose predecessors all lie in it (``avail``, a bitmask too).

    Memory stays within about ``max_count`` pairs of n-bit integers: the count is checked at every new downset and
    the deadline every 256 downsets extended (a wide graph's level holds up to n children per downset, so a check
    per batch of parents let one level grow to millions of sets: 22 GB on a 5,000-node layered graph)."""
    n = len(preds)
    sources = 0
    for v in range(n):
        if preds[v] == 0:
            sources |= 1 << v
    level = {0: sources}
    found = [0]
    while level:
        if deadline is not None and time.perf_counter() > deadline:
            return None
        budget = max_count - len(found)
        nxt: dict[int, int] = {}
        for count, (ideal, avail) in enumerate(level.items()):
            if count % 256 == 255 and deadline is not None and time.perf_counter() > deadline:
                return None
            rest = avail
            while rest:
                low = rest & -rest
                rest ^= low
                child = ideal | low
                if child in nxt:
                    continue
                new = 0
                for w in succs[low.bit_length() - 1]:
                    if preds[w] & ~child == 0:
                        new |= 1 << w
                nxt[child] = (avail ^ low) | new
                if len(nxt) > budget:
                    return None
        found.extend(nxt)
        level = nxt
    return found


def _bits_to_rows(masks: list[int], n: int) -> np.ndarray:
    """bool[M, n] of the bitmasks ``masks``."""
    width = max((n + 7) // 8, 1)
    raw = b"".join(i.to_bytes(width, "little") for i in masks)
    bits = np.unpackbits(np.frombuffer(raw, np.uint8).reshape(len(masks), width), axis=1, bitorder="little")
    return bits[:, :n].astype(bool)


def enumerate_downsets(graph: Graph, max_count: int = MAX_DOWNSETS, deadline: float | None = None
                       ) -> np.ndarray | None:
    """bool[M, N] every downset of the graph (row 0 the empty one), or None when there are more than
    ``max_count`` or ``deadline`` (a ``time.perf_counter()`` instant) passes first."""
    n = graph.num_nodes
    preds = [0] * n
    succs: list[list[int]] = [[] for _ in range(n)]
    for u, v in graph.edges.tolist():
        preds[v] |= 1 << u
        succs[u].append(v)
    found = _bfs_downsets(preds, succs, max_count, deadline)
    return None if found is None else _bits_to_rows(found, n)


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


def _layered_path(steps, m: int, full: int, combine, deadline) -> tuple[float, list[int]] | None:
    """The K-step path ``{} = D_0 ⊆ D_1 ⊆ ... ⊆ D_K = V`` (row 0 and row ``full``) over the pairs of each step:
    ``steps[k] = (pi, pj, cost)`` (i32/f64[P_k], sorted by pj) the allowed ``(D_k, D_{k+1})`` and their cost;
    ``f_0 = 0`` at the empty set, ``f_{k+1}(j) = min over the pairs (i, j) of combine(f_k(i), cost)``.
    Returns ``(f_K(V), [D_1..D_{K-1}])`` (inf and [] when no path), None once ``deadline`` passes."""
    f = np.full(m, np.inf)
    f[0] = 0.0
    args = []
    for pi, pj, cost in steps:
        if deadline is not None and time.perf_counter() > deadline:
            return None
        if len(pi) == 0:
            return np.inf, []
        f, at = _group_min(combine(f[pi], cost), pj, _groups(pj, m), m)
        args.append(np.where(at >= 0, pi[np.maximum(at, 0)], -1))
    if not np.isfinite(f[full]):
        return np.inf, []
    return float(f[full]), _path(args[1:], full)


def _step_windows(key: np.ndarray, width: float, src: np.ndarray, dst: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each J in ``dst`` (bool[M] over downsets sorted so that a subset comes first: by ``key``, a weight that
    grows with the set, then segment, then size) the I in ``src`` that may precede it: at most J's index, keys at
    most ``width`` below; they are ``src_at[a : a + count]``. Returns i64 ``(js, a, counts, src_at)``."""
    js = np.flatnonzero(dst)
    src_at = np.flatnonzero(src)
    lo = np.searchsorted(key, key[js] - width, side="left") if np.isfinite(width) else np.zeros(len(js), np.int64)
    a = np.searchsorted(src_at, lo, side="left")
    b = np.searchsorted(src_at, js, side="right")
    return js, a, np.maximum(b - a, 0), src_at


def _step_pairs(windows: tuple[np.ndarray, ...], segment: np.ndarray, words: np.ndarray, extra, deadline
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """The pairs ``I ⊆ J`` of the windows (:func:`_step_windows`) kept by ``extra(i, j)`` (bool of index arrays):
    i32 arrays sorted by j, then i. A downset of an earlier segment lies in every downset of a later one; within a
    segment the bits of X (``words``: u64[M, W]) decide. None once ``deadline`` passes."""
    js, a, counts, src_at = windows
    ends = np.cumsum(counts)
    firsts, seconds = [np.zeros(0, np.int32)], [np.zeros(0, np.int32)]
    begin = 0
    while begin < len(js):
        if deadline is not None and time.perf_counter() > deadline:
            return None
        done = ends[begin - 1] if begin else 0
        stop = max(int(np.searchsorted(ends, done + PAIR_CHUNK, side="right")), begin + 1)
        c = counts[begin:stop]
        pj = np.repeat(js[begin:stop], c)
        pi = src_at[np.repeat(a[begin:stop], c) + np.arange(len(pj)) - np.repeat(np.cumsum(c) - c, c)]
        keep = segment[pi] != segment[pj]
        same = ~keep
        if same.any():
            keep[same] = ~np.any(words[pi[same]] & ~words[pj[same]], axis=1)
        keep &= extra(pi, pj)
        firsts.append(pi[keep].astype(np.int32))
        seconds.append(pj[keep].astype(np.int32))
        begin = stop
    return np.concatenate(firsts), np.concatenate(seconds)


def series_segments(graph: Graph) -> list[tuple[np.ndarray, np.ndarray]]:
    """The graph cut at its separators: nodes comparable with every other node, ``s_1 < ... < s_m`` in topological
    order (the joins of a chain of modules). Segment 0 holds the strict ancestors of ``s_1`` on the empty base;
    segment i >= 1 holds the nodes after ``s_i`` and before ``s_{i+1}`` (after ``s_m`` for the last) on the base
    ``A_i`` = ``s_i`` and its ancestors. Every downset is exactly one ``base ∪ X`` with X a downset of its
    segment's nodes (a downset either holds ``s_i``, so all of ``A_i``, or lies strictly below ``s_i``).

    Returns:
        ``[(bool[N] base, i64[n_i] nodes), ...]`` in order (m + 1 segments; no separator: one segment).
    """
    n = graph.num_nodes
    order = graph.topological_order().tolist()
    preds, succs = graph.predecessors(), graph.successors()
    anc, desc = [0] * n, [0] * n
    for v in order:
        for u in preds[v]:
            anc[v] |= anc[u] | (1 << u)
    for u in reversed(order):
        for v in succs[u]:
            desc[u] |= desc[v] | (1 << v)
    everything = (1 << n) - 1
    seps = sorted((v for v in range(n) if anc[v] | desc[v] | (1 << v) == everything),
                  key=lambda v: bin(anc[v]).count("1"))
    bases = [0] + [anc[v] | (1 << v) for v in seps]
    tops = [anc[v] for v in seps] + [everything]
    rows = _bits_to_rows(bases + [t & ~b for b, t in zip(bases, tops, strict=True)], n)
    return [(rows[i], np.flatnonzero(rows[len(bases) + i])) for i in range(len(bases))]


def _segment_downsets(preds: list[list[int]], nodes: np.ndarray, max_count: int, deadline: float | None
                      ) -> np.ndarray | None:
    """bool[M_i, n_i] every downset X of the subgraph on ``nodes`` (a segment of :func:`series_segments`, whose
    nodes' predecessors outside it lie in its base; ``preds``: the graph's predecessor lists), or None past
    ``max_count`` or ``deadline``."""
    local = {int(v): i for i, v in enumerate(nodes.tolist())}
    masks = [0] * len(nodes)
    succs: list[list[int]] = [[] for _ in range(len(nodes))]
    for i, v in enumerate(nodes.tolist()):
        for u in preds[v]:
            j = local.get(u)
            if j is not None:
                masks[i] |= 1 << j
                succs[j].append(i)
    found = _bfs_downsets(masks, succs, max_count, deadline)
    return None if found is None else _bits_to_rows(found, len(nodes))


def _segment_terms(graph: Graph, hw: Hardware, succs: list[list[int]], base: np.ndarray, nodes: np.ndarray,
                   sets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """f64[M_i] parameter bytes, MACs and crossing bytes ``b_a cross(D)`` of the downsets ``D = base ∪ X`` (rows X
    of ``sets``: bool[M_i, n_i] over ``nodes``). A node of D crosses when it is a graph output or has a consumer
    outside D; a base node's consumers outside the base lie in this segment or later ones."""
    weights = sets.astype(np.float64)
    par = hw.param_bytes * (float(graph.params[base].sum()) + weights @ graph.params[nodes].astype(np.float64))
    macs = float(graph.macs[base].sum()) + weights @ graph.macs[nodes].astype(np.float64)
    local = {int(v): i for i, v in enumerate(nodes.tolist())}
    out = graph.output_size.astype(np.float64)
    cross = np.zeros(len(sets))
    always = 0.0
    for u in np.flatnonzero(base).tolist():
        outside = [v for v in succs[u] if not base[v]]
        if not succs[u] or any(v not in local for v in outside):
            always += out[u]  # an output, or a consumer beyond this segment
        elif outside:
            cross += out[u] * ~sets[:, [local[v] for v in outside]].all(axis=1)
    for i, u in enumerate(nodes.tolist()):
        if not succs[u] or any(v not in local for v in succs[u]):
            cross += out[u] * sets[:, i]
        else:
            cross += out[u] * (sets[:, i] & ~sets[:, [local[v] for v in succs[u]]].all(axis=1))
    return par, macs, hw.act_bytes * (cross + always)


@dataclass(frozen=True)
class _Terms:
    """f64[M] parameter bytes, MACs and crossing bytes of the kept downsets, and the graph's totals
    ``(par(V), macs(V))``."""

    par: np.ndarray
    macs: np.ndarray
    cross: np.ndarray
    totals: tuple[float, float]


def _boundary_mask(k: int, par_lo, macs_lo, par_hi, macs_hi, cross, totals: tuple[float, float], hw: Hardware,
                   objective: str, lam: float, upper: float, cap: float = np.inf) -> np.ndarray:
    """bool[M]: may a downset (or a segment's downsets: ``*_lo`` their least, ``*_hi`` their largest parameter bytes
    and MACs, ``cross`` a lower bound of their crossing) be the boundary ``D_k`` (1 <= k <= K-1) of a schedule whose
    objective is at most ``upper`` (and, for ``paper``, whose stages hold at most ``cap`` bytes)? Necessary
    conditions only, each implied by the objective:

    * latency: ``tau + cross(D) / L <= upper`` (stage k receives it); the first k stages take at least
      ``k tau + macs(D) / R + max(0, par(D) - k C) / H <= k upper``; the last K - k at least
      ``(K-k) tau + (macs(V) - macs(D)) / R + max(0, par(V) - par(D) - (K-k) C) / H + cross(D) / L <= (K-k) upper``.
    * paper: every stage holds at most ``min(cap, upper - lam cross(D))`` bytes: at most k times that below D,
      (K - k) times that above.
    """
    par_total, macs_total = totals
    u = upper * (1 + FILTER_SLACK)
    rest = hw.stages - k
    if objective == "latency":
        tau, rate, sram, host, link = (float(hw.stage_overhead_s), float(hw.macs_per_s), float(hw.sram_bytes),
                                       float(hw.host_bw), float(hw.link_bw))
        first = k * tau + macs_lo / rate + np.maximum(par_lo - k * sram, 0.0) / host <= k * u
        last = (rest * tau + (macs_total - macs_hi) / rate + np.maximum(par_total - par_hi - rest * sram, 0.0) / host
                + cross / link <= rest * u)
        return first & last & (tau + cross / link <= u)
    most = np.minimum(cap * (1 + FILTER_SLACK), u - lam * cross)
    return (par_lo <= k * most) & (par_total - par_hi <= rest * most)


def _boundary_masks(terms: _Terms, hw: Hardware, objective: str, lam: float, upper: float, cap: float = np.inf
                    ) -> list[np.ndarray]:
    """bool[M] per boundary k = 0..K over downsets sorted with the empty set first and the full set last: which may
    be ``D_k`` (:func:`_boundary_mask`; ``D_0`` the empty set, ``D_K`` the full set)."""
    m = len(terms.par)
    ends = np.zeros(m, bool), np.zeros(m, bool)
    ends[0][0] = ends[1][m - 1] = True
    inner = [_boundary_mask(k, terms.par, terms.macs, terms.par, terms.macs, terms.cross, terms.totals, hw, objective,
                            lam, upper, cap) for k in range(1, hw.stages)]
    return [ends[0], *inner, ends[1]]


def _boundary_ok(par_lo, macs_lo, par_hi, macs_hi, cross, totals: tuple[float, float], hw: Hardware,
                 objective: str, lam: float, upper: float) -> np.ndarray:
    """bool[M]: may a downset (a segment's downsets) be some boundary ``D_k``, 1 <= k <= K-1
    (:func:`_boundary_mask`)?"""
    ok = np.zeros(np.shape(cross), bool)
    for k in range(1, hw.stages):
        ok |= _boundary_mask(k, par_lo, macs_lo, par_hi, macs_hi, cross, totals, hw, objective, lam, upper)
    return ok


def _candidate_downsets(graph: Graph, hw: Hardware, objective: str, lam: float, upper: float, max_downsets: int,
                        deadline: float | None, cache: dict | None = None, fewest: int = 0) -> dict | None:
    """The downsets that may be a boundary of a schedule at most ``upper`` (:func:`_boundary_ok`), and the empty
    and the full set, segment by segment (:func:`series_segments`; a segment none of whose downsets can pass is not
    enumerated). None past ``MAX_ENUMERATED`` downsets enumerated, ``max_downsets`` kept, or ``deadline``.
``cache`` (a dict kept between calls on the same problem) keeps the segments and their downsets' terms;
``cache["too_many"]`` is set when a segment has more downsets than enumerated at most (``MAX_ENUMERATED`` in
``ENUMERATION_S`` seconds).

    Returns:
        ``{"par", "macs", "cross": f64[M], "segment": i64[M], "words": u64[M, W] (X's bits), "size": i64[M]
        (|X|), "segments": series_segments(graph), "enumerated": int}``, rows in no particular order.
    """
    cache = {} if cache is None else cache
    if "segments" not in cache:
        cache.update(segments=series_segments(graph), preds=graph.predecessors(), succs=graph.successors(),
                     enumerated=0, enumeration_s=0.0)
    segments, preds, succs = cache["segments"], cache["preds"], cache["succs"]
    totals = (float(hw.param_bytes * graph.params.sum()), float(graph.macs.sum()))
    parts = []
    for s, (base, nodes) in enumerate(segments):
        lo = (hw.param_bytes * float(graph.params[base].sum()), float(graph.macs[base].sum()))
        hi = (lo[0] + hw.param_bytes * float(graph.params[nodes].sum()), lo[1] + float(graph.macs[nodes].sum()))
        needed = bool(_boundary_ok(lo[0], lo[1], hi[0], hi[1], 0.0, totals, hw, objective, lam, upper))
        ends = []  # the empty set (segment 0, X = {}) and the full set (the last segment, X = its nodes)
        if s == 0:
            ends.append(np.zeros(len(nodes), bool))
        if s == len(segments) - 1:
            ends.append(np.ones(len(nodes), bool))
        if needed and s not in cache:
            t0 = time.perf_counter()
            own = t0 + ENUMERATION_S - cache["enumeration_s"]
            cap = min(MAX_ENUMERATED - cache["enumerated"], MAX_ENUMERATED_CELLS // max(len(nodes), 1))
            sets = _segment_downsets(preds, nodes, cap,
                                     own if deadline is None else min(deadline, own))
            cache["enumeration_s"] += time.perf_counter() - t0
            if sets is None:
                cache["too_many"] = deadline is None or time.perf_counter() <= deadline
                cache["why"] = (f"more than {cap} downsets or {ENUMERATION_S} s to enumerate"
                                if cache["too_many"] else "deadline")
                return None
            cache["enumerated"] += len(sets)
            cache[s] = (sets, *_segment_terms(graph, hw, succs, base, nodes, sets))
        if needed:
            sets, par, macs, cross = cache[s]
        elif ends:
            sets = np.array(ends).reshape(len(ends), len(nodes))
            par, macs, cross = _segment_terms(graph, hw, succs, base, nodes, sets)
        else:
            continue
        keep = _boundary_ok(par, macs, par, macs, cross, totals, hw, objective, lam, upper)
        keep |= ~sets.any(axis=1) if s == 0 else False
        keep |= sets.all(axis=1) if s == len(segments) - 1 else False
        parts.append((s, sets[keep], par[keep], macs[keep], cross[keep]))
        if not fewest and sum(len(p[1]) for p in parts) > max_downsets:
            cache["why"] = f"more than {max_downsets} downsets kept"
            return None
    if fewest:  # a heuristic: only the ``fewest`` downsets of least crossing (and the empty and the full set)
        crossings = np.concatenate([p[4] for p in parts])
        chosen = np.zeros(len(crossings), bool)
        chosen[np.argsort(crossings, kind="stable")[:fewest]] = True
        chosen[0] = chosen[-1] = True  # the empty set opens the first part, the full set closes the last
        offsets = np.cumsum([0] + [len(p[1]) for p in parts])
        parts = [(p[0], *(x[chosen[a:b]] for x in p[1:])) for p, a, b in zip(parts, offsets[:-1], offsets[1:],
                                                                            strict=True)]
    width = max((max(len(p[1][0]) if len(p[1]) else 0 for p in parts) + 63) // 64, 1)
    words = []
    for _, sets, *_ in parts:
        packed = np.packbits(sets, axis=1, bitorder="little") if sets.shape[1] else np.zeros((len(sets), 0), np.uint8)
        packed = np.pad(packed, ((0, 0), (0, 8 * width - packed.shape[1])))
        words.append(np.ascontiguousarray(packed).view(np.uint64))
    return {"par": np.concatenate([p[2] for p in parts]), "macs": np.concatenate([p[3] for p in parts]),
            "cross": np.concatenate([p[4] for p in parts]),
            "segment": np.concatenate([np.full(len(p[1]), p[0], np.int64) for p in parts]),
            "words": np.concatenate(words), "size": np.concatenate([p[1].sum(axis=1) for p in parts]),
            "sets": [p[1] for p in parts], "parts": [p[0] for p in parts], "segments": segments,
            "enumerated": cache["enumerated"]}


def solve_lattice(graph: Graph, hw: Hardware, objective: str, lam: float = 1.0, max_downsets: int = MAX_DOWNSETS,
                  deadline: float | None = None, upper: float = np.inf, cache: dict | None = None, fewest: int = 0
                  ) -> dict | None:
    """The optimum by the downset programme (module docstring), or None when more than ``max_downsets`` downsets
    remain after the filters of ``upper``, more than ``MAX_PAIRS`` pairs are to be examined, or ``deadline``
    passes first. With ``fewest`` > 0 a heuristic instead: the programme over only the ``fewest`` kept downsets of
    least crossing (its schedule is valid, its value proves nothing; ``assignment`` None when it finds none).

    Args:
        graph, hw, objective, lam: the problem.
        max_downsets: keep at most this many downsets (those that may be some stage boundary of a schedule at most
            ``upper``: :func:`_boundary_mask`); at most ``MAX_ENUMERATED`` are enumerated, segment by segment.
        deadline: a ``time.perf_counter()`` instant (None: none).
        upper: the objective of some valid schedule (or inf): downsets and stages that cannot be part of a
            schedule at most ``upper`` are not considered, and the ``paper`` walk is pruned with it; the result is
            still the optimum when some schedule is at most ``upper``.
        cache: a dict kept between calls on the same problem (:func:`_candidate_downsets`).
    Returns:
        ``{"assignment": i64[N], "value": the optimum (the programme's float64 arithmetic), "downsets": M (kept),
        "enumerated": downsets enumerated, "pairs": pairs kept, "time_s": float}``; ``value`` inf and
        ``assignment`` None when no schedule is at most ``upper`` (then ``upper`` is a lower bound of the optimum).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    start = time.perf_counter()
    if hw.stages == 1:
        from respect_jax.solvers.numpy_eval import objective_np

        assignment = np.zeros(graph.num_nodes, np.int64)
        return {"assignment": assignment, "value": float(objective_np(graph, assignment, hw, objective, lam)),
                "downsets": 2, "enumerated": 0, "pairs": 0, "time_s": time.perf_counter() - start}
    cache = {} if cache is None else cache
    cache["why"] = "deadline"
    found = _candidate_downsets(graph, hw, objective, lam, upper, max_downsets, deadline, cache, fewest)
    if found is None:
        return None
    key = found["macs"] if objective == "latency" else found["par"]
    order = np.lexsort((found["size"], found["segment"], key))
    par, macs, cross, segment = (found[name][order] for name in ("par", "macs", "cross", "segment"))
    words = found["words"][order]
    terms = _Terms(par, macs, cross, (float(hw.param_bytes * graph.params.sum()), float(graph.macs.sum())))
    solve = _latency if objective == "latency" else _paper
    result = solve(terms, segment, words, hw, lam, upper, deadline, cache)
    if result is None:
        return None
    value, chain, pairs = result
    if not np.isfinite(value) or not fewest and not value <= upper * (1 + FILTER_SLACK):
        # exact: the filters keep every schedule at most upper, so there is none
        return {"assignment": None, "value": np.inf, "downsets": int(len(order)),
                "enumerated": int(found["enumerated"]), "pairs": int(pairs), "time_s": time.perf_counter() - start}
    rows = _rows(found, order[chain], graph.num_nodes)
    return {"assignment": _assignment(rows, list(range(len(chain)))), "value": float(value),
            "downsets": int(len(order)), "enumerated": int(found["enumerated"]), "pairs": int(pairs),
            "time_s": time.perf_counter() - start}


def _forward_steps(masks: list[np.ndarray], key: np.ndarray, width: float, segment: np.ndarray, words: np.ndarray,
                   extra, deadline, note: dict) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The pairs ``(D_k, D_{k+1})`` of each step k = 0..K-1 (:func:`_step_pairs`): ``D_{k+1}`` in ``masks[k + 1]``
    and ``D_k`` one that the kept pairs of the steps before reach from the empty set. None past ``MAX_PAIRS``
    candidate pairs (``note["why"]`` says so) or ``deadline``."""
    reach, steps, total = masks[0], [], 0
    for k in range(len(masks) - 1):
        windows = _step_windows(key, width, reach, masks[k + 1])
        total += int(windows[2].sum())
        if total > MAX_PAIRS:
            note["why"] = f"more than {MAX_PAIRS} pairs"
            return None
        pairs = _step_pairs(windows, segment, words, extra, deadline)
        if pairs is None:
            return None
        steps.append(pairs)
        reach = np.zeros(len(key), bool)
        reach[pairs[1]] = True
    return steps


def _latency(terms: _Terms, segment, words, hw: Hardware, lam: float, upper: float, deadline, note: dict):
    """Least bottleneck: a K-step min-max path; a stage ``I ⊆ J`` takes ``T(I, J) = tau + (macs(J) - macs(I)) / R
    + max(0, par(J) - par(I) - C) / H + cross(I) / L`` and only stages within ``upper`` are kept."""
    par, macs, cross = terms.par, terms.macs, terms.cross
    tau, rate, sram, host, link = (float(hw.stage_overhead_s), float(hw.macs_per_s), float(hw.sram_bytes),
                                   float(hw.host_bw), float(hw.link_bw))
    u = upper * (1 + FILTER_SLACK)

    before, after = tau + cross / link - macs / rate, macs / rate  # T(I, J) without the spill: before[I] + after[J]

    def cost(i, j):
        return before[i] + after[j] + np.maximum((par[j] - par[i]) - sram, 0.0) / host

    steps = _forward_steps(_boundary_masks(terms, hw, "latency", lam, upper), macs, (u - tau) * rate, segment, words,
                           lambda i, j: cost(i, j) <= u, deadline, note)
    if steps is None:
        return None
    steps = [(pi, pj, cost(pi, pj)) for pi, pj in steps]
    found = _layered_path(steps, len(par), len(par) - 1, np.maximum, deadline)
    return None if found is None else (*found, sum(len(st[0]) for st in steps))


def _paper(terms: _Terms, segment, words, hw: Hardware, lam: float, upper: float, deadline, note: dict):
    """Least ``max_k mem_k + lam b_a sum_k cross(D_k)``: for a memory cap, a K-step min-sum path over the stages
    that fit it; the caps walked down as in the module docstring. The boundaries kept at a cap also obey
    :func:`_boundary_mask` with that cap and the best value so far."""
    par, cross = terms.par, terms.cross
    u = upper * (1 + FILTER_SLACK)
    full = len(par) - 1
    inner = lam * np.where(np.arange(len(par)) == full, 0.0, cross)  # the full set's crossing is not counted

    def fits(i, j):  # the stage I -> J and the crossings of both its ends (inner boundaries) within the limit
        return par[j] - par[i] <= u - lam * cross[i] - inner[j]

    steps = _forward_steps(_boundary_masks(terms, hw, "paper", lam, upper), par, u, segment, words, fits, deadline,
                           note)
    if steps is None:
        return None
    steps = [(pi, pj, par[pj] - par[pi], lam * cross[pi]) for pi, pj in steps]
    kept = sum(len(st[0]) for st in steps)
    best_value, best_chain = np.inf, None
    step = 0.5 * float(hw.param_bytes) if hw.param_bytes > 0 else 0.5
    cap = float(par[full])  # every stage fits: the first visit
    for _ in range(MAX_CAPS):
        if deadline is not None and time.perf_counter() > deadline:
            return None
        masks = _boundary_masks(terms, hw, "paper", lam, min(best_value, upper), cap)
        for k, (pi, pj, size, weight) in enumerate(steps):  # caps and the best value only fall: the pairs shrink
            sel = (size <= cap) & masks[k][pi] & masks[k + 1][pj]
            steps[k] = (pi[sel], pj[sel], size[sel], weight[sel])
        found = _layered_path([(pi, pj, weight) for pi, pj, _, weight in steps], len(par), full, np.add, deadline)
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
    if best_chain is None:
        return np.inf, [], kept
    return best_value, best_chain, kept


def _rows(found: dict, picks: np.ndarray, n: int) -> np.ndarray:
    """bool[len(picks), N] the downsets ``base ∪ X`` of the candidate rows ``picks`` (indices into the
    concatenation of ``found['sets']``)."""
    offsets = np.cumsum([0] + [len(s) for s in found["sets"]])
    rows = np.zeros((len(picks), n), bool)
    for r, pick in enumerate(np.asarray(picks, np.int64).tolist()):
        part = int(np.searchsorted(offsets, pick, side="right") - 1)
        base, nodes = found["segments"][found["parts"][part]]
        rows[r] = base
        rows[r, nodes] = found["sets"][part][pick - offsets[part]]
    return rows


def search_lattice(graph: Graph, hw: Hardware, objective: str, lam: float = 1.0, max_downsets: int = MAX_DOWNSETS,
                   deadline: float | None = None, upper: float = np.inf, lower: float = 0.0,
                   fewest: int = HEURISTIC_DOWNSETS, patience: int = 0) -> dict:
    """The optimum, or a certified lower bound, by probing :func:`solve_lattice` with guessed upper limits.

    A probe with limit ``p`` either finds the optimum (some schedule is at most ``p``), proves that none is at most
    ``p`` (``p`` is a lower bound), or gives up (too many downsets or pairs pass the filters of so loose a limit).
    The first probe is ``upper`` (a known schedule's value); then the probes bisect between the best lower bound and
    the smallest limit that gave up: a limit just above the optimum filters the most. Stops at the optimum, when
    the bracket is below ``PROBE_RTOL`` of ``upper``, when a segment has too many downsets to enumerate, or at
    ``deadline``. When the first probe gives up, the heuristic programme over the ``fewest`` downsets of least
    crossing (:func:`solve_lattice`) may find a better schedule; its value is probed next (0: no heuristic).
    ``patience`` > 0: stop after that many probes in a row gave up (leaving the time to other bounds).

    Returns:
        ``{"lower": the best lower bound proven (>= lower), "probes": [(limit, "optimum" | "none" | "gave up")],
        "time_s": float}`` and, when the optimum was found, :func:`solve_lattice`'s result (``assignment``,
        ``value``, ...) besides (then ``lower`` is the value); otherwise ``incumbent`` (``{"assignment", "value"}``)
        when the heuristic found a schedule better than ``upper``.
    """
    start = time.perf_counter()
    cache: dict = {}
    lo, top, probe = float(lower), float(upper), float(upper)
    probes: list[tuple[float, str]] = []
    incumbent: dict | None = None
    while deadline is None or time.perf_counter() < deadline:
        found = solve_lattice(graph, hw, objective, lam, max_downsets, deadline, probe, cache)
        if found is not None and found["assignment"] is not None:
            probes.append((probe, "optimum"))
            return {**found, "lower": max(lo, found["value"]), "probes": probes, "time_s": time.perf_counter() - start}
        if found is None:
            probes.append((probe, f"gave up: {cache.get('why', 'deadline')}"))
            top = probe
            since = max((i for i, p in enumerate(probes) if p[1] == "none"), default=-1) + 1
            run = sum(p[1].startswith("gave up") for p in probes[since:])  # give-ups since the last bound
            if cache.get("too_many") or not np.isfinite(probe) or 0 < patience <= run:
                break
            if fewest > 0 and len(probes) == 1:
                guess = solve_lattice(graph, hw, objective, lam, max_downsets, deadline, upper, cache, fewest)
                if guess is not None and guess["assignment"] is not None and guess["value"] < upper * (1 - PROBE_RTOL):
                    incumbent = {"assignment": guess["assignment"], "value": guess["value"]}
                    probes.append((guess["value"], "heuristic"))
                    probe = guess["value"]
                    continue
        else:
            probes.append((probe, "none"))
            lo = max(lo, probe)
        if not np.isfinite(top) or top - lo <= PROBE_RTOL * abs(upper):
            break
        probe = lo + 0.5 * (top - lo)
    out = {"lower": lo, "probes": probes, "time_s": time.perf_counter() - start}
    return out if incumbent is None else {**out, "incumbent": incumbent}
