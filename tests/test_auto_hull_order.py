"""The hull order (``respect_jax.solvers.orders.hull_downsets`` / ``hull_order``) and its exact split in
``solver=auto`` (``hull_order``, ``hull_max_cuts``): the downsets against the lower convex hull of every downset's
(weight, crossing bytes) point enumerated by brute force, the order against the definition of a topological order whose
prefixes hold the downsets, and auto's ``orders`` entry against the exact contiguous split of that order."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import make_hw, random_graphs
from test_auto_rebalance import layered

from respect_jax.reference import reference_metrics, reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.orders import (
    hull_downsets,
    hull_order,
    live_order,
    live_splits,
    macs_first_split,
    split_of_order,
)


def crossing(graph, member) -> int:
    """Bytes (elements) of the tensors made in ``member`` and read outside it, or graph outputs, written out."""
    succ = [[] for _ in range(graph.num_nodes)]
    for u, v in graph.edges.tolist():
        succ[u].append(v)
    return sum(int(graph.output_size[u]) for u in range(graph.num_nodes)
               if member[u] and (not succ[u] or any(not member[v] for v in succ[u])))


def all_downsets(graph):
    """Every downset (bool[N]) of a small graph, by brute force over all subsets."""
    n = graph.num_nodes
    for bits in itertools.product([False, True], repeat=n):
        member = np.array(bits, bool)
        if not graph.num_edges or np.all(member[graph.edges[:, 1]] <= member[graph.edges[:, 0]]):
            yield member


def lower_hull(points):
    """Vertices (weight, crossing) of the lower convex hull of ``points`` (monotone chain, collinear points dropped)."""
    hull = []
    for p in sorted(set(points)):
        while len(hull) >= 2 and (hull[-1][0] - hull[-2][0]) * (p[1] - hull[-2][1]) - \
                (hull[-1][1] - hull[-2][1]) * (p[0] - hull[-2][0]) <= 0:
            hull.pop()
        hull.append(p)
    return hull


def test_hull_downsets_are_the_vertices_of_the_lower_hull():
    """Small random and layered graphs (<= 12 nodes), MACs or random integers as the weight: every downset returned
    is a downset, and with cuts to spare their (weight, crossing) points are exactly the inner vertices of the lower
    convex hull of all downsets' points (both ends, the empty and the full set, left out), by increasing weight."""
    checked, rng = 0, np.random.default_rng(22)
    for i, graph in enumerate(random_graphs(12, 21, 4, 12) + [layered(12, seed, 1.5) for seed in range(6)]):
        w = graph.macs.astype(np.int64) if i % 2 else rng.integers(0, 100, graph.num_nodes)
        points = [(int(w[m].sum()), crossing(graph, m)) for m in all_downsets(graph)]
        hull = lower_hull(points)
        got = hull_downsets(graph, w, 200)
        for m in got:
            assert np.all(m[graph.edges[:, 0]] >= m[graph.edges[:, 1]]) if graph.num_edges else True
        got_points = [(int(w[m].sum()), crossing(graph, m)) for m in got]
        inner = [p for p in hull if 0 < p[0] < int(w.sum())]
        assert got_points == inner, graph.name
        checked += len(inner)
    assert checked >= 6


def test_hull_downsets_stop_at_the_cut_limit_and_when_told():
    graph = layered(1000, 6, 1.2)
    w = graph.macs.astype(np.int64)
    assert len(hull_downsets(graph, w, 16)) > 3
    assert 1 <= len(hull_downsets(graph, w, 3)) <= 3
    assert hull_downsets(graph, w, 50, stop=lambda: True) == []
    assert hull_downsets(graph, np.zeros(graph.num_nodes, np.int64), 50) == []


def test_hull_order_is_topological_with_each_nested_downset_a_prefix():
    """On 1,000-node layered graphs, by the definition: every edge goes forward in the order, each hull downset is the
    set of its first |D| nodes, and nodes of the same first downset keep their order in ``ties``."""
    for seed, density in ((6, 1.2), (7, 2.9)):
        graph = layered(1000, seed, density)
        downsets = hull_downsets(graph, graph.macs.astype(np.int64), 16)
        assert len(downsets) >= 2
        ties = live_order(graph, 4.0)
        order = hull_order(graph, downsets, ties)
        assert sorted(order.tolist()) == list(range(graph.num_nodes))
        pos = np.empty(graph.num_nodes, np.int64)
        pos[order] = np.arange(graph.num_nodes)
        assert np.all(pos[graph.edges[:, 0]] < pos[graph.edges[:, 1]])
        for d in downsets:
            assert set(order[:int(d.sum())].tolist()) == set(np.flatnonzero(d).tolist())
        tie_pos = np.empty(graph.num_nodes, np.int64)
        tie_pos[ties] = np.arange(graph.num_nodes)
        first = np.full(graph.num_nodes, len(downsets))
        for i in range(len(downsets) - 1, -1, -1):
            first[downsets[i]] = i
        same = first[order[:-1]] == first[order[1:]]
        assert np.all(tie_pos[order[:-1]][same] < tie_pos[order[1:]][same])


def test_auto_orders_entry_adds_the_hull_split():
    """A 1,000-node sparse layered graph (latency, K = 4; its hull split is the best there): with ``hull_order`` on,
    auto's ``orders`` entry is the exact split of the hull order (8 cuts, ties by the best live-byte order), "hull";
    off (or 0 cuts, or a ``hull_min_nodes`` above the graph's size), the best of the live-byte and MACs-first splits;
    the objective as the loop evaluator's."""
    graph, hw = layered(1000, 6, 1.2), make_hw(4)
    live = live_splits(graph, hw, "latency", 1.0, [2.0, 3.0, 4.0])
    weight, _, live_best = min(live, key=lambda x: x[2])
    others = min(live_best, macs_first_split(graph, hw, "latency", 1.0)[1])
    order = hull_order(graph, hull_downsets(graph, graph.macs.astype(np.int64), 8), live_order(graph, weight))
    split, hull = split_of_order(graph, hw, "latency", 1.0, order)
    assert hull < others  # the case this graph was picked for
    assert hull == pytest.approx(reference_objective(graph, split, hw, "latency"), rel=1e-9)
    assert reference_metrics(graph, split, hw)["valid"]
    options = dict(members=["contiguous"], exact="none", crossing_bound=False, progress=False, time_budget_s=30.0,
                   lattice_downsets=0, line_restarts={"latency": 0}, rebalance={"latency": 0}, polish_moves=0)
    for extra, expected, name in (({}, hull, "hull"), ({"hull_order": {"latency": False}}, others, None),
                                  ({"hull_max_cuts": 0}, others, None),
                                  ({"hull_min_nodes": graph.num_nodes + 1}, others, None)):
        entry = run_solver("auto", graph, hw, "latency", **options, **extra)["info"]["portfolio"]["orders"]
        assert entry["objective"] == pytest.approx(expected, rel=1e-12), (extra, entry)
        assert (entry["sink_weight"] == "hull") is (name == "hull")


@pytest.mark.parametrize("option, value, match", [
    ("hull_order", {"latency": 1}, "hull_order must map objectives"),
    ("hull_order", {"both": True}, "hull_order must map objectives"),
    ("hull_max_cuts", -1, "hull_max_cuts must be an integer >= 0"),
    ("hull_max_cuts", 2.5, "hull_max_cuts must be an integer >= 0"),
    ("hull_max_cuts", True, "hull_max_cuts must be an integer >= 0"),
    ("hull_min_nodes", -1, "hull_min_nodes must be an integer >= 0 or null"),
    ("hull_min_nodes", 2.5, "hull_min_nodes must be an integer >= 0 or null"),
])
def test_auto_rejects_bad_hull_options(option, value, match):
    with pytest.raises(ValueError, match=match):
        run_solver("auto", layered(40, 1, 1.2), make_hw(2), "latency", progress=False, **{option: value})
