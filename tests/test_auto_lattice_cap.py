"""``lattice_max_nodes``: ``solver=auto`` skips the downset programme's search on graphs of more than that many nodes
(its search ran to its share of the budget and proved nothing on 5,000-10,000-node layered graphs), but still proves
a graph with a unique topological order at once."""

from __future__ import annotations

import pytest
from conftest import make_hw
from test_auto_rebalance import layered
from test_oracles import hand_graph

import respect_jax.solvers.auto as auto
from respect_jax.solvers import run_solver


@pytest.fixture
def searches(monkeypatch):
    """The graphs the downset programme's search is called on (the real search runs)."""
    seen = []
    real = auto.search_lattice

    def search_lattice(graph, *args, **kwargs):
        seen.append(graph.num_nodes)
        return real(graph, *args, **kwargs)

    monkeypatch.setattr(auto, "search_lattice", search_lattice)
    return seen


def test_auto_skips_the_downset_search_above_its_node_cap_only(searches):
    """A 40-node layered graph (several topological orders), K = 3, paper, no exact solver: the search runs with the
    cap at the graph's size or null, not with the cap one below it (the portfolio then says why)."""
    graph, hw = layered(40, 1, 1.2), make_hw(3)
    options = dict(members=["contiguous"], exact="none", crossing_bound=False, progress=False, time_budget_s=5.0)
    for cap, runs in ((graph.num_nodes, True), (None, True), (graph.num_nodes - 1, False)):
        searches.clear()
        result = run_solver("auto", graph, hw, "paper", lattice_max_nodes=cap, **options)
        lattice = result["info"]["portfolio"]["lattice"]
        assert searches == ([graph.num_nodes] if runs else []), (cap, searches)
        assert ("skipped" in lattice) is not runs, (cap, lattice)
        if not runs:
            assert lattice["skipped"] == f"40 nodes > lattice_max_nodes {cap}"


def test_auto_still_proves_a_unique_order_above_the_node_cap(searches):
    """A 5-node chain (one topological order) with the cap at 0: proven optimal at once by the unique order, as
    without the cap; the search itself is not needed."""
    chain = hand_graph("chain", [5, 1, 9, 2, 7], [3, 8, 1, 6, 2], [4, 2, 8, 1, 5], [[0, 1], [1, 2], [2, 3], [3, 4]])
    result = run_solver("auto", chain, make_hw(3), "latency", lattice_max_nodes=0, exact="none", progress=False,
                        time_budget_s=5.0)
    assert result["info"]["portfolio"]["lattice"]["optimal"] is True
    assert result["optimal"] and result["info"]["certified_gap"] == 0.0 and searches == []


@pytest.mark.parametrize("value", [-1, 2.5, "5000", True])
def test_auto_rejects_a_bad_lattice_node_cap(value):
    with pytest.raises(ValueError, match="lattice_max_nodes must be an integer >= 0 or null"):
        run_solver("auto", layered(40, 1, 1.2), make_hw(2), "latency", progress=False, lattice_max_nodes=value)
