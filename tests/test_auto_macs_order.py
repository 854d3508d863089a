"""The MACs-first order (``respect_jax.solvers.orders.macs_first_order``) and its exact split in ``solver=auto``
(``macs_order``): checked against a from-scratch list schedule, the exact contiguous split of that order and the loop
evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_hw, random_graphs
from test_auto_rebalance import layered

from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.orders import live_splits, macs_first_order, macs_first_split
from respect_jax.solvers.partitioners import contiguous_assignment, contiguous_search


def reference_order(graph) -> list[int]:
    """The list schedule written out: again and again the ready node (predecessors placed) of most MACs, least id."""
    placed: list[int] = []
    done = np.zeros(graph.num_nodes, bool)
    preds = [set() for _ in range(graph.num_nodes)]
    for u, v in graph.edges.tolist():
        preds[v].add(u)
    while len(placed) < graph.num_nodes:
        ready = [u for u in range(graph.num_nodes) if not done[u] and all(done[p] for p in preds[u])]
        u = min(ready, key=lambda x: (-float(graph.macs[x]), x))
        placed.append(u)
        done[u] = True
    return placed


def test_macs_first_order_is_the_heaviest_ready_node_first():
    graphs = random_graphs(12, seed=41, min_nodes=2, max_nodes=40) + [layered(120, 5, 2.9)]
    for graph in graphs:
        order = macs_first_order(graph)
        assert order.tolist() == reference_order(graph), graph.name
        pos = np.empty(graph.num_nodes, np.int64)
        pos[order] = np.arange(graph.num_nodes)
        assert np.all(pos[graph.edges[:, 0]] < pos[graph.edges[:, 1]]) if graph.num_edges else True


def test_macs_first_split_is_the_exact_split_of_that_order():
    graph, hw = layered(150, 7, 2.9), make_hw(4)
    order = np.asarray(reference_order(graph), np.int64)
    cuts, _, _ = contiguous_search(graph, hw, "latency", 1.0, order)
    expected = np.asarray(contiguous_assignment(graph, cuts, order), np.int64)
    split, value = macs_first_split(graph, hw, "latency", 1.0)
    assert np.array_equal(split, expected)
    assert value == pytest.approx(reference_objective(graph, split, hw, "latency"), rel=1e-9)


@pytest.mark.parametrize("seed", [3, 5])  # seed 3: a live-byte split best; 5: the MACs-first split
def test_auto_orders_entry_is_the_best_of_the_live_and_macs_splits(seed):
    """400-node dense layered graphs, latency, K = 4: with ``macs_order`` on, auto's ``orders`` entry is the best of the
    live-byte splits and the MACs-first split ("macs" when that one is strictly best); off, the best live-byte split
    (the hull order off: tests/test_auto_hull_order.py)."""
    graph, hw = layered(400, seed, 2.9), make_hw(4)
    live = min(v for _, _, v in live_splits(graph, hw, "latency", 1.0, [2.0, 3.0, 4.0]))
    _, macs = macs_first_split(graph, hw, "latency", 1.0)
    options = dict(members=["contiguous"], exact="none", crossing_bound=False, progress=False, time_budget_s=30.0,
                   lattice_downsets=0, line_restarts={"latency": 0}, hull_order={"latency": False})
    for on, expected in ((True, min(live, macs)), (False, live)):
        entry = run_solver("auto", graph, hw, "latency", macs_order={"latency": on}, **options)["info"]["portfolio"]
        assert entry["orders"]["objective"] == pytest.approx(expected, rel=1e-12), (on, entry["orders"])
        assert (entry["orders"]["sink_weight"] == "macs") is (on and macs < live)


@pytest.mark.parametrize("value", [{"latency": 1}, {"latency": "yes"}, {"both": True}])
def test_auto_rejects_a_bad_macs_order(value):
    with pytest.raises(ValueError, match="macs_order must map objectives"):
        run_solver("auto", layered(40, 1, 1.2), make_hw(2), "latency", progress=False, macs_order=value)
