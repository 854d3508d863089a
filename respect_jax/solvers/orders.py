"""Cheap topological orders whose exact contiguous split is good at scale (host Python, no learning, no JAX).

Under ``latency`` the time of stage k >= 1 includes ``in_k / link_bw``: the bytes of every tensor made before stage k
and read at stage k or later (a sink's output travels to the last stage). On the ICML'24-style random layered graphs
(``experiments/bench_scale.py``) that term dominates the SPEC order's split: its prefixes keep many tensors live. The
exact contiguous split (:func:`respect_jax.solvers.partitioners.contiguous_search`) of an order whose prefixes hold few
live bytes is much better there, so ``solver=auto`` splits such orders too (``portfolio['orders']``).

:func:`live_order` is a list schedule (Kahn's algorithm) that takes, among the ready nodes, the one whose placement
adds the fewest live bytes: its own output (``sink_weight`` times it for a sink, whose output stays live to the end)
less the outputs of the predecessors it is the last unplaced successor of. :func:`best_live_split` splits the orders
of a few sink weights and keeps the best. :func:`macs_first_order` (the ready node of most MACs first) is another
such order: on dense layered graphs its split has a short, compute-heavy first stage. :func:`hull_order` puts first
the downsets of :func:`hull_downsets`, those on the lower convex hull of (MACs, bytes crossing) over all downsets
(parametric minimum cuts): a stage boundary at one of them sends the fewest bytes for the work before it, which a list
schedule's prefixes miss on sparse layered graphs at 5k-10k nodes.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from respect_jax.costs import Hardware
from respect_jax.graphs.graph import Graph, kahn_order
from respect_jax.solvers.numpy_eval import objective_np
from respect_jax.solvers.partitioners import contiguous_assignment, contiguous_search

#: Sink weights :func:`best_live_split` tries by default (``solver=auto``'s ``orders`` option): on the generated
#: validation layered graphs (seeds 11-12, 1,000 and 5,000 nodes, dense and sparse, K = 4, ``latency``) the best raw
#: split of weights 1, 2, 3, 4, 6, 10 and sinks last came from 3 or 4 on 6 of 8 graphs and from 6 on 2 (weights 3-4
#: within 0.7 % of it there); weight 1, the plain live-byte count, was 4-32 % worse, sinks last 2-13 %
#: (``experiments/results/auto_orders_val_s28.md``).
SINK_WEIGHTS = (2.0, 3.0, 4.0)


def live_order(graph: Graph, sink_weight: float = 3.0) -> np.ndarray:
    """int64[N]: a topological order of node ids that keeps few bytes live. Among the ready nodes the one of least
    ``delta`` first (ties by depth from the sources, then id), where ``delta(u) = w(u) * output_size[u] - sum of
    output_size[p]`` over the predecessors ``p`` all of whose other successors are placed already (their output is
    then no longer live), ``w(u) = sink_weight`` for a sink and 1 otherwise. O((N + E) log N)."""
    n = graph.num_nodes
    succ = graph.successors()
    preds = graph.predecessors()
    out = graph.output_size.astype(np.float64).tolist()
    indeg = [len(p) for p in preds]
    left = [len(s) for s in succ]  # successors of u not placed yet
    delta = [out[u] * (1.0 if succ[u] else float(sink_weight)) for u in range(n)]
    for v in range(n):
        for p in preds[v]:
            if left[p] == 1:
                delta[v] -= out[p]
    depth = graph.depth().tolist()
    version = [0] * n  # lazy deletion: a heap entry is current when its version is
    heap = [(delta[u], depth[u], u, 0) for u in range(n) if indeg[u] == 0]
    heapq.heapify(heap)
    placed = [False] * n
    order = []
    while heap:
        _, _, u, ver = heapq.heappop(heap)
        if placed[u] or ver != version[u]:
            continue
        placed[u] = True
        order.append(u)
        for p in preds[u]:
            left[p] -= 1
            if left[p] == 1:  # p's last unplaced successor w now frees p's output
                for w in succ[p]:
                    if not placed[w]:
                        delta[w] -= out[p]
                        version[w] += 1
                        if indeg[w] == 0:
                            heapq.heappush(heap, (delta[w], depth[w], w, version[w]))
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, (delta[v], depth[v], v, version[v]))
    if len(order) != n:
        raise ValueError(f"graph {graph.name!r} has a cycle")
    return np.asarray(order, np.int64)


def live_splits(graph: Graph, hw: Hardware, objective: str, lam: float, sink_weights: Sequence[float] = SINK_WEIGHTS,
                stop=None, keep: dict | None = None) -> list[tuple[float, np.ndarray, float]]:
    """[(sink weight, int64[N] assignment by node id, its objective)]: the exact contiguous split of the
    :func:`live_order` of each of ``sink_weights``, in that order (float64 objective). ``stop()`` (optional) is looked
    at before each order; the orders not reached are left out. ``keep`` (optional): each order is stored there under
    its sink weight."""
    out = []
    for w in sink_weights:
        if stop is not None and stop():
            break
        order = live_order(graph, float(w))
        if keep is not None:
            keep[float(w)] = order
        out.append((float(w), *split_of_order(graph, hw, objective, lam, order)))
    return out


def split_of_order(graph: Graph, hw: Hardware, objective: str, lam: float,
                   order: np.ndarray) -> tuple[np.ndarray, float]:
    """(int64[N] assignment by node id, its float64 objective): the exact contiguous split of ``order``."""
    cuts, _, _ = contiguous_search(graph, hw, objective, lam, order)
    a = np.asarray(contiguous_assignment(graph, cuts, order), np.int64)
    return a, objective_np(graph, a, hw, objective, lam)


def macs_first_order(graph: Graph) -> np.ndarray:
    """int64[N]: a topological order that takes, among the ready nodes, the one of most MACs first (ties by id). On
    dense generated layered graphs its exact contiguous split puts a short, compute-heavy first stage before a long
    second one, the shape of CP-SAT's long-run schedules there, where the live-byte orders' splits put ~80 % of the
    nodes on the first stage (``experiments/results/auto_scale_val_s31_summary.md``). O((N + E) log N)."""
    n = graph.num_nodes
    indeg = [len(p) for p in graph.predecessors()]
    macs = graph.macs.astype(np.float64).tolist()
    order = kahn_order(indeg, graph.successors(), [(-macs[u], u) for u in range(n)])
    if len(order) != n:
        raise ValueError(f"graph {graph.name!r} has a cycle")
    return np.asarray(order, np.int64)


def macs_first_split(graph: Graph, hw: Hardware, objective: str, lam: float) -> tuple[np.ndarray, float]:
    """(int64[N] assignment by node id, its float64 objective): the exact contiguous split of the MACs-first order."""
    return split_of_order(graph, hw, objective, lam, macs_first_order(graph))


def best_live_split(graph: Graph, hw: Hardware, objective: str, lam: float,
                    sink_weights: Sequence[float] = SINK_WEIGHTS, stop=None) -> tuple[np.ndarray | None, float, float]:
    """(int64[N] assignment by node id, its objective, its sink weight): the best (float64 objective, the first of
    equals) of :func:`live_splits`; ``(None, inf, nan)`` when there are none."""
    best, value, weight = None, np.inf, float("nan")
    for w, a, v in live_splits(graph, hw, objective, lam, sink_weights, stop):
        if v < value:
            best, value, weight = a, v, w
    return best, value, weight


def hull_downsets(graph: Graph, weight: np.ndarray, max_cuts: int, stop=None) -> list[np.ndarray]:
    """bool[N] downsets on the lower convex hull of the points ``(weight(D), cross(D))`` over all downsets D of
    ``graph`` (``cross``: the bytes of the tensors of D read outside it or graph outputs, the ``in_k`` of a stage
    boundary at D; ``weight``: int64[N] >= 0), by increasing weight, the empty and the full set left out. Each is a
    parametric minimum cut (:meth:`respect_jax.solvers.bounds.HullCrossing.least_cost`: the least ``cross(D) - mu
    weight(D)``, one max flow) at the slope ``mu`` of a hull edge between two points found so far, the widest edge (by
    weight) first, until no edge has a point below it, ``max_cuts`` cuts, or ``stop()`` (optional, looked at before
    each cut)."""
    from respect_jax.solvers.bounds import HullCrossing  # OR-tools' max flow: imported when first used

    w = np.asarray(weight, np.int64)
    n = graph.num_nodes
    if n == 0 or int(w.sum()) <= 0:
        return []
    hull = HullCrossing(graph, w[None])
    full = np.ones(n, bool)
    ends = ((0.0, 0.0, None), (float(w.sum()), float(hull.cross(full)), None))
    edges = [(-ends[1][0], 0, ends)]  # (-width, tie, (left point, right point)), widest first
    found: list[tuple[float, np.ndarray]] = []
    cuts = 0
    while edges and cuts < int(max_cuts) and not (stop is not None and stop()):
        _, _, (a, b) = heapq.heappop(edges)
        mu = max((b[1] - a[1]) / (b[0] - a[0]), 0.0)
        _, member = hull.least_cost(mu, w)
        cuts += 1
        point = (float(w[member].sum()), float(hull.cross(member)), member)
        line = a[1] - mu * a[0]
        if not point[1] - mu * point[0] < line - 1e-9 * max(1.0, abs(line)) or not a[0] < point[0] < b[0]:
            continue  # nothing below the edge (up to rounding)
        found.append((point[0], member))
        for left, right in ((a, point), (point, b)):
            heapq.heappush(edges, (-(right[0] - left[0]), cuts * 2 + (right is b), (left, right)))
    return [m for _, m in sorted(found, key=lambda x: x[0])]


def hull_order(graph: Graph, downsets: Sequence[np.ndarray], ties: np.ndarray | None = None) -> np.ndarray:
    """int64[N]: a topological order whose prefixes include each of ``downsets`` (bool[N] downsets): node v goes by
    the first downset holding it (those in none last), ties by position in ``ties`` (a topological order; None:
    ``graph.topological_order()``). Topological: a downset holding v holds v's predecessors, so none of them goes
    later; nested downsets are then prefixes."""
    n = graph.num_nodes
    rank = np.full(n, len(downsets), np.int64)
    for i in range(len(downsets) - 1, -1, -1):
        rank[np.asarray(downsets[i], bool)] = i
    tie = np.empty(n, np.int64)
    tie[graph.topological_order() if ties is None else np.asarray(ties, np.int64)] = np.arange(n)
    return np.lexsort((tie, rank)).astype(np.int64)
