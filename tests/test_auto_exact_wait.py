"""When ``solver=auto`` starts its exact solver and its crossing bound on large graphs. ``exact_after_line_min_nodes``:
on a graph above the limit CP-SAT starts after the contiguous line's polish and rebalancing, hinted with their schedule;
at or below it, at once with the best split (CP-SAT replaced by a stub that records its hint, scored with the loop
evaluator); ``exact_after_polish_min_edges_per_node``: on dense enough graphs it waits for the polish only.
``bound_early_max_nodes``: above it the bound starts after the line's restarts, not beside them."""

from __future__ import annotations

import time

import pytest
from conftest import make_hw
from test_auto_rebalance import layered

import respect_jax.solvers.auto as auto
from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.base import SolveResult


def slow_rebalancing(monkeypatch, seconds: float) -> None:
    """auto's line rebalancing (``rebalance_until``), each call delayed by ``seconds``."""
    real = auto.rebalance_until

    def slow(*args, **kwargs):
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(auto, "rebalance_until", slow)


@pytest.fixture
def hints(monkeypatch):
    """The hints the (stubbed) CP-SAT member is called with, in order."""
    seen = []
    real = auto.get_solver

    def get_solver(name):
        if name != "cpsat":
            return real(name)

        def stub(graph, hw, objective, lam, **o):
            seen.append(o["hint"])
            return SolveResult(o["hint"], optimal=False, info={"status": "FEASIBLE"})

        return stub

    monkeypatch.setattr(auto, "get_solver", get_solver)
    return seen


def test_auto_starts_cpsat_after_the_line_above_the_limit_only(hints):
    """A 400-node sparse layered graph, latency, K = 4, contiguous member, stubbed CP-SAT, no bound: with the limit
    below its size the hint is the line's polished (and rebalanced) schedule, as good as every line result
    auto reports and strictly better than the best split; at its size (not above) the hint is the best split, given
    at once."""
    graph, hw = layered(400, 11, 1.2), make_hw(4)
    options = dict(members=["contiguous"], exact="cpsat", crossing_bound=False, progress=False, time_budget_s=60.0,
                   lattice_downsets=0, rebalance={"latency": 1}, line_moves={"latency": 30},
                   line_restarts={"latency": 0})
    waited = run_solver("auto", graph, hw, "latency", exact_after_line_min_nodes=graph.num_nodes - 1, **options)
    portfolio = waited["info"]["portfolio"]
    split = min(portfolio["contiguous"]["objective"], portfolio["orders"]["objective"])
    hint = reference_objective(graph, hints[-1], hw, "latency")
    line = [portfolio[k]["objective"] for k in ("contiguous+ls", "contiguous+rebalance") if "objective" in portfolio[k]]
    assert line and hint <= min(line) * (1 + 1e-9)
    assert hint < split * (1 - 1e-3)
    assert portfolio["cpsat"]["started_s"] < auto.EXACT_WAIT_SHARE * 60.0  # by the line, not by the timer
    at_once = run_solver("auto", graph, hw, "latency", exact_after_line_min_nodes=graph.num_nodes, **options)
    assert reference_objective(graph, hints[-1], hw, "latency") == pytest.approx(split, rel=1e-9)
    assert "started_s" not in at_once["info"]["portfolio"]["cpsat"]


def test_auto_starts_a_waiting_cpsat_by_its_timer_when_the_line_runs_long(hints, monkeypatch):
    """The line held past the wait share (its rebalancing slowed down): CP-SAT starts at the timer, near
    EXACT_WAIT_SHARE of the budget, not after the line."""
    graph, hw = layered(400, 11, 1.2), make_hw(4)
    slow_rebalancing(monkeypatch, 4.0)
    monkeypatch.setattr(auto, "EXACT_WAIT_SHARE", 0.1)
    result = run_solver("auto", graph, hw, "latency", members=["contiguous"], exact="cpsat", crossing_bound=False,
                        progress=False, time_budget_s=20.0, lattice_downsets=0, rebalance={"latency": 1},
                        line_moves={"latency": 30}, line_restarts={"latency": 0}, exact_after_line_min_nodes=0)
    started = result["info"]["portfolio"]["cpsat"]["started_s"]
    assert len(hints) == 1 and 1.9 <= started < 4.0


@pytest.mark.parametrize("value", [-1, 1.5, "900", True])
def test_auto_rejects_a_bad_exact_wait_limit(value):
    graph = layered(40, 1, 1.2)
    with pytest.raises(ValueError, match="exact_after_line_min_nodes"):
        run_solver("auto", graph, make_hw(2), "latency", progress=False, exact_after_line_min_nodes=value)


def test_auto_starts_the_bound_after_the_restarts_above_its_limit(monkeypatch):
    """``bound_early_max_nodes``: on a 400-node layered graph (latency, K = 4, no exact solver) with one restart of the
    line (slowed by 2 s), the crossing bound starts before the restart ends when the limit is the graph's size or null,
    and after it when the limit is below the size."""
    graph, hw = layered(400, 13, 1.2), make_hw(4)
    events = []
    real_restart = auto.restart_line

    def restart_line(*args, **kwargs):
        time.sleep(2.0)
        out = real_restart(*args, **kwargs)
        events.append(("restart done", time.perf_counter()))
        return out

    def crossing_lower_bound(*args, **kwargs):  # when it starts; a trivial bound at once (the run then ends early)
        events.append(("bound", time.perf_counter()))
        return {"bound": 0.0, "calls": 0, "cuts": 0, "time_s": 0.0}

    monkeypatch.setattr(auto, "restart_line", restart_line)
    monkeypatch.setattr(auto, "crossing_lower_bound", crossing_lower_bound)
    options = dict(members=["contiguous"], exact="none", progress=False, time_budget_s=30.0, lattice_downsets=0,
                   orders={"latency": [3.0]}, line_moves={"latency": 30}, line_restarts={"latency": 1})
    for limit, early in ((graph.num_nodes, True), (None, True), (graph.num_nodes - 1, False)):
        events.clear()
        run_solver("auto", graph, hw, "latency", bound_early_max_nodes=limit, **options)
        names = [name for name, _ in sorted(events, key=lambda e: e[1])]
        assert names == (["bound", "restart done"] if early else ["restart done", "bound"]), (limit, names)


@pytest.mark.parametrize("value", [-1, 2.5, "3000", False])
def test_auto_rejects_a_bad_bound_early_limit(value):
    graph = layered(40, 1, 1.2)
    with pytest.raises(ValueError, match="bound_early_max_nodes"):
        run_solver("auto", graph, make_hw(2), "latency", progress=False, bound_early_max_nodes=value)



def test_auto_starts_a_waiting_cpsat_after_the_polish_on_dense_enough_graphs(hints, monkeypatch):
    """``exact_after_polish_min_edges_per_node``: on a graph with at least that many edges per node (here the limit is
    exactly the graph's own density) a waiting CP-SAT starts once the line's first polish is done, before the
    rebalancing (slowed by 2 s here) ends, hinted with a schedule as good as the polish's; with the limit just above
    the density, only after the rebalancing."""
    graph, hw = layered(400, 11, 1.2), make_hw(4)
    slow_rebalancing(monkeypatch, 2.0)
    options = dict(members=["contiguous"], exact="cpsat", crossing_bound=False, progress=False, time_budget_s=60.0,
                   lattice_downsets=0, rebalance={"latency": 1}, line_moves={"latency": 30},
                   line_restarts={"latency": 0}, exact_after_line_min_nodes=0)
    density = graph.num_edges / graph.num_nodes
    started = {}
    for label, limit in (("polish", density), ("rebalance", density * (1 + 1e-6))):
        result = run_solver("auto", graph, hw, "latency", exact_after_polish_min_edges_per_node=limit, **options)
        portfolio = result["info"]["portfolio"]
        started[label] = portfolio["cpsat"]["started_s"]
        assert reference_objective(graph, hints[-1], hw, "latency") <= \
            portfolio["contiguous+ls"]["objective"] * (1 + 1e-9)
    assert started["polish"] < started["rebalance"] - 1.5, started


@pytest.mark.parametrize("value", [-1, "2", True, float("inf")])
def test_auto_rejects_a_bad_exact_after_polish_density(value):
    graph = layered(40, 1, 1.2)
    with pytest.raises(ValueError, match="exact_after_polish_min_edges_per_node must be a number >= 0 or null"):
        run_solver("auto", graph, make_hw(2), "latency", progress=False, exact_after_polish_min_edges_per_node=value)


def test_auto_exact_wait_share_sets_the_timer(hints, monkeypatch):
    """``exact_wait_share`` (None: EXACT_WAIT_SHARE): the line held past it (its rebalancing slowed down), the waiting
    CP-SAT starts by the timer at that share of the budget."""
    graph, hw = layered(400, 11, 1.2), make_hw(4)
    slow_rebalancing(monkeypatch, 4.0)
    monkeypatch.setattr(auto, "EXACT_WAIT_SHARE", 0.9)  # the option, not the constant, sets the timer
    result = run_solver("auto", graph, hw, "latency", members=["contiguous"], exact="cpsat", crossing_bound=False,
                        progress=False, time_budget_s=20.0, lattice_downsets=0, rebalance={"latency": 1},
                        line_moves={"latency": 30}, line_restarts={"latency": 0}, exact_after_line_min_nodes=0,
                        exact_wait_share=0.1)
    started = result["info"]["portfolio"]["cpsat"]["started_s"]
    assert len(hints) == 1 and 1.9 <= started < 4.0


def test_auto_skips_the_exact_solver_by_its_build_gate(hints):
    """``exact_build_s_per_unit``: a 400-node layered graph (1,276 nodes + edges, K = 4: 3,828 units) with 0.01 s per
    unit (38 s "to build" against a 5 s budget) skips CP-SAT with a message naming that estimate; null never skips it
    for its build (the stub is called with the best split)."""
    graph, hw = layered(400, 11, 1.2), make_hw(4)
    units = (graph.num_nodes + len(graph.edges)) * 3
    options = dict(members=["contiguous"], exact="cpsat", crossing_bound=False, progress=False, time_budget_s=5.0,
                   lattice_downsets=0, rebalance={"latency": 0}, line_restarts={"latency": 0},
                   exact_after_line_min_nodes=None)
    gated = run_solver("auto", graph, hw, "latency", exact_build_s_per_unit=0.01, **options)
    skipped = gated["info"]["portfolio"]["cpsat"]["skipped"]
    assert skipped.startswith(f"its model takes about {0.01 * units:.1f} s to build") and not hints
    run_solver("auto", graph, hw, "latency", exact_build_s_per_unit=None, **options)
    assert len(hints) == 1
    assert auto.estimated_build_s(graph, 4, 2e-5) == pytest.approx(2e-5 * units)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("exact_build_s_per_unit", -1e-5, "exact_build_s_per_unit must be a number >= 0 or null"),
    ("exact_build_s_per_unit", "fast", "exact_build_s_per_unit must be a number >= 0 or null"),
    ("exact_build_s_per_unit", True, "exact_build_s_per_unit must be a number >= 0 or null"),
    ("exact_wait_share", 1.5, "exact_wait_share must be a number in \\[0, 1\\] or null"),
    ("exact_wait_share", "half", "exact_wait_share must be a number in \\[0, 1\\] or null"),
])
def test_auto_rejects_bad_exact_gate_options(name, value, message):
    with pytest.raises(ValueError, match=message):
        run_solver("auto", layered(40, 1, 1.2), make_hw(2), "latency", progress=False, **{name: value})
