"""``host_line_min_nodes`` / ``host_line_max_nodes``: on graphs in that range ``solver=auto``'s rebalanced contiguous
line runs on the host only (no compiled polish, no warm compile): :func:`auto.host_rounds` against a written-out
reference, and auto with the option against the compiled path (which must then never run)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_hw
from test_auto_rebalance import layered

import respect_jax.solvers.auto as auto
from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.host_polish import host_polish


def test_host_rounds_is_rebalance_then_host_polish_repeated():
    """host_rounds without restarts equals the loop written out (rebalance_host, then host_polish in calls of 100
    moves from the best schedule while a call improves it, rounds while a round improves), scored by the loop
    evaluator; its restarts' schedules are offered and valid, and never worse than their start's rebalancing."""
    graph, hw = layered(400, 21, 1.2), make_hw(4)
    start = auto.live_splits(graph, hw, "latency", 1.0, [3.0])[0][1]

    def value(a):
        return reference_objective(graph, a, hw, "latency")

    def polish_ref(a):
        best = a
        for _ in range(30):
            c = host_polish(graph, hw, "latency", 1.0, best, 100)
            if not value(c) < value(best):
                break
            best = c
        return best

    ref = np.asarray(start)
    while True:
        out = polish_ref(auto.rebalance_host(graph, hw, "latency", 1.0, ref, 1, lambda: False))
        if not value(out) < value(ref):
            break
        ref = out
    offered: list = []
    other = auto.live_splits(graph, hw, "latency", 1.0, [2.0])[0][1]
    best, rounds, restarts = auto.host_rounds(graph, hw, "latency", 1.0, start, [lambda: other], 1, 3000, 100,
                                              lambda: False, lambda a: None, offered.append)
    assert np.array_equal(best, ref) and rounds == 2 and restarts == 1  # this graph takes two improving rounds
    assert value(best) < value(start)
    assert offered and all(np.all(a[graph.edges[:, 0]] <= a[graph.edges[:, 1]]) for a in offered)
    assert min(value(a) for a in offered) <= value(auto.rebalance_host(graph, hw, "latency", 1.0, other, 1,
                                                                       lambda: False)) * (1 + 1e-12)


def test_auto_host_line_compiles_nothing_for_the_line(monkeypatch):
    """A 400-node layered graph (latency, K = 4, contiguous member, no exact solver): with host_line_min_nodes below
    its size auto never calls the compiled polish nor its warm compile, returns a valid schedule better than the best
    split and says host_only; at its size (not above) the compiled path runs."""
    graph, hw = layered(400, 22, 1.2), make_hw(4)
    calls = {"polish": 0, "compile": 0}
    real_polish, real_compile = auto.polish, auto.compile_polish

    def counted_polish(*args, **kwargs):
        calls["polish"] += 1
        return real_polish(*args, **kwargs)

    def counted_compile(*args, **kwargs):
        calls["compile"] += 1
        return real_compile(*args, **kwargs)

    monkeypatch.setattr(auto, "polish", counted_polish)
    monkeypatch.setattr(auto, "compile_polish", counted_compile)
    options = dict(members=["contiguous"], exact="none", crossing_bound=False, progress=False, time_budget_s=30.0,
                   lattice_downsets=0, rebalance={"latency": 2}, line_restarts={"latency": 1})
    result = run_solver("auto", graph, hw, "latency", host_line_min_nodes=graph.num_nodes - 1, **options)
    portfolio = result["info"]["portfolio"]
    assert calls == {"polish": 0, "compile": 0}
    assert portfolio["contiguous+rebalance"]["host_only"] is True
    a = np.asarray(result["assignment"])
    split = min(portfolio["contiguous"]["objective"], portfolio["orders"]["objective"])
    assert reference_objective(graph, a, hw, "latency") < split * (1 - 1e-3)
    run_solver("auto", graph, hw, "latency", host_line_min_nodes=graph.num_nodes, **options)
    assert calls["polish"] + calls["compile"] > 0
    calls.update(polish=0, compile=0)  # above host_line_max_nodes: the compiled path again
    capped = run_solver("auto", graph, hw, "latency", host_line_min_nodes=graph.num_nodes - 1,
                        host_line_max_nodes=graph.num_nodes - 1, **options)
    assert calls["polish"] + calls["compile"] > 0 and "host_only" not in capped["info"]["portfolio"].get(
        "contiguous+rebalance", {})


@pytest.mark.parametrize("name", ["host_line_min_nodes", "host_line_max_nodes"])
@pytest.mark.parametrize("value", [-1, 1.5, "3000", True])
def test_auto_rejects_a_bad_host_line_limit(name, value):
    with pytest.raises(ValueError, match=f"{name} must be an integer >= 0 or null"):
        run_solver("auto", layered(40, 1, 1.2), make_hw(2), "latency", progress=False, **{name: value})
