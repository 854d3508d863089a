"""``solver=auto``'s learned member started early (beside the downset programme and the exact solver), and the order
policy's cooperative stop that lets auto collect it by the deadline."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import make_hw, random_graphs

import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
from respect_jax.local_search import refine_boundaries
from respect_jax.policy.order_solver import solve_order_policy
from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.stopping import Stopped

#: the order policy's default decoding (solver=policy), as auto runs it
DEFAULT = dict(samples=32, noise=0.2, local_search=100, ls_moves="single", ls_screen=16, ls_escapes=10)


def _multi_order_graph(seed: int, nodes: int = 60):
    """A random graph with several topological orders (no proof shortcut: the policy member runs)."""
    from respect_jax.graphs.graph import has_unique_order

    for graph in random_graphs(8, seed=seed, min_nodes=nodes, max_nodes=nodes):
        if not has_unique_order(graph):
            return graph
    raise AssertionError("no multi-order graph drawn")


def _slow_policy(seconds: float, assignment: np.ndarray, calls: list):
    """A stand-in for solver=policy that takes ``seconds`` (a cold compilation) and returns ``assignment``."""
    from respect_jax.solvers.base import SolveResult

    def solve(graph, hw, objective, lam, stop=None, **options):
        calls.append(time.perf_counter())
        time.sleep(seconds)
        return SolveResult(np.asarray(assignment, np.int64), optimal=None, gap=None, info={"compile_s": seconds})

    def route(**options):
        return solve, {}

    solve.forwards_to = route
    return solve


def test_policy_member_starts_beside_the_downset_programme_and_is_in_the_portfolio(monkeypatch):
    """A policy member taking 2.8 s (as a cold compilation) and a downset programme using its whole share (30 % of a
    4 s budget): started after the programme, as before, the member would end past the deadline and be abandoned;
    started EARLY_AFTER_S into the programme it is in the portfolio, it wins (its schedule is the best here) and the
    call keeps its budget."""
    import respect_jax.solvers.auto as auto

    graph, hw = _multi_order_graph(seed=31), make_hw(4)
    best = run_solver("cpsat", graph, hw, "latency", time_limit_s=20.0)  # a schedule better than the contiguous split
    contiguous = run_solver("contiguous", graph, hw, "latency")["objective"]
    assert best["objective"] < contiguous * (1 - 1e-6)
    calls: list = []
    real = auto.get_solver
    stub = _slow_policy(2.8, best["assignment"], calls)
    monkeypatch.setattr(auto, "get_solver", lambda name: stub if name == "policy" else real(name))

    def lattice_gives_up(graph, hw, objective, lam, max_downsets, deadline, upper, lower, patience):
        time.sleep(max(deadline - time.perf_counter(), 0.0))  # its whole share, then no proof
        return {"lower": lower, "probes": []}

    monkeypatch.setattr(auto, "search_lattice", lattice_gives_up)
    monkeypatch.setattr(auto, "learned_ready", lambda *args: True)  # its forward pass compiled or stored
    start = time.perf_counter()
    result = run_solver("auto", graph, hw, "latency", time_budget_s=4.0, members=["contiguous", "policy"],
                        exact="none", crossing_bound=False, polish_moves=0, progress=False)
    elapsed = time.perf_counter() - start
    info = result["info"]
    entry = info["portfolio"]["policy"]
    assert elapsed <= 4.0 + 1.0, elapsed
    assert len(calls) == 1 and calls[0] - start <= auto.EARLY_AFTER_S + 0.5, calls[0] - start
    assert "objective" in entry and entry["started_s"] <= auto.EARLY_AFTER_S + 0.5, entry
    assert entry["objective"] == pytest.approx(best["objective"], rel=1e-6)  # float64 vs the float32 evaluator
    assert info["winner"] == "policy" and result["objective"] <= entry["objective"] * (1 + 1e-9)
    assert result["objective"] <= info["portfolio"]["contiguous"]["objective"] * (1 + 1e-9)


def test_a_cold_policy_member_runs_in_turn_not_early(monkeypatch):
    """Its forward pass neither compiled nor stored (:func:`learned_ready` False): the member is not started beside
    the downset programme but after it (as the other members), so its compilation cannot hold up theirs."""
    import respect_jax.solvers.auto as auto

    graph, hw = _multi_order_graph(seed=31), make_hw(4)
    calls: list = []
    real = auto.get_solver
    stub = _slow_policy(0.1, run_solver("contiguous", graph, hw, "latency")["assignment"], calls)
    monkeypatch.setattr(auto, "get_solver", lambda name: stub if name == "policy" else real(name))

    def lattice_gives_up(graph, hw, objective, lam, max_downsets, deadline, upper, lower, patience):
        time.sleep(max(deadline - time.perf_counter(), 0.0))
        return {"lower": lower, "probes": []}

    monkeypatch.setattr(auto, "search_lattice", lattice_gives_up)
    monkeypatch.setattr(auto, "learned_ready", lambda *args: False)
    start = time.perf_counter()
    result = run_solver("auto", graph, hw, "latency", time_budget_s=4.0, members=["contiguous", "policy"],
                        exact="none", crossing_bound=False, polish_moves=0, progress=False)
    entry = result["info"]["portfolio"]["policy"]
    assert len(calls) == 1 and calls[0] - start >= auto.LATTICE_SHARE * 4.0 - 0.05, calls[0] - start
    assert "objective" in entry and "started_s" not in entry, entry


def test_learned_ready_tells_a_compiled_forward_pass_from_a_cold_one(monkeypatch):
    """After solver=policy on a graph in this process its forward pass is ready; with nothing in memory and no
    executable folder (a fresh process without a cache) it is not."""
    import respect_jax.compile_cache as cc
    from respect_jax.solvers.auto import learned_ready

    graph, hw = _multi_order_graph(seed=35), make_hw(4)
    run_solver("policy", graph, hw, "latency", local_search=0)
    assert learned_ready(graph, hw, "latency", {})
    monkeypatch.setattr(cc, "_COMPILED", {})
    monkeypatch.setitem(cc._EXECUTABLES, "folder", None)
    assert not learned_ready(graph, hw, "latency", {})


def test_policy_member_is_not_started_on_a_graph_the_downset_programme_proves_at_once(monkeypatch):
    """The downset programme proves this graph well within EARLY_AFTER_S: no compilation is started that would only be
    abandoned (the member is skipped, the optimum proven)."""
    import respect_jax.solvers.auto as auto

    graph, hw = _multi_order_graph(seed=32, nodes=14), make_hw(3)
    calls: list = []
    real = auto.get_solver
    stub = _slow_policy(0.0, run_solver("contiguous", graph, hw, "paper")["assignment"], calls)
    monkeypatch.setattr(auto, "get_solver", lambda name: stub if name == "policy" else real(name))
    monkeypatch.setattr(auto, "learned_ready", lambda *args: True)
    result = run_solver("auto", graph, hw, "paper", time_budget_s=10.0, members=["contiguous", "policy"],
                        progress=False)
    portfolio = result["info"]["portfolio"]
    assert portfolio["lattice"]["optimal"] and portfolio["lattice"]["time_s"] < auto.EARLY_AFTER_S
    assert calls == [] and "skipped" in portfolio["policy"], portfolio["policy"]
    assert result["optimal"]


def test_auto_runs_the_real_policy_member_and_is_never_worse_than_it():
    """The shipped order policy inside auto (compiled beforehand in this process, as with a warm cache): its entry
    holds its own schedule's objective, equal to solver=policy's alone with the same options; auto never worse."""
    graph, hw = _multi_order_graph(seed=33), make_hw(4)
    alone = run_solver("policy", graph, hw, "paper", local_search=30)  # compiles this bucket's forward and polish
    result = run_solver("auto", graph, hw, "paper", time_budget_s=8.0, members=["contiguous", "policy"],
                        exact="none", polish_moves=30, lattice_downsets=0, progress=False)
    entry = result["info"]["portfolio"]["policy"]
    assert entry["objective"] == pytest.approx(alone["objective"], rel=1e-6), entry
    assert "stopped" not in entry and entry["started_s"] < 1.0
    assert result["objective"] <= entry["objective"] * (1 + 1e-9)
    exact = reference_objective(graph, result["assignment"], hw, "paper")
    assert exact == pytest.approx(result["objective"], rel=1e-6)


def test_order_policy_stop_returns_the_schedule_so_far():
    """stop() True from the start: Stopped (no forward pass); True after the forward pass: the sampled orders' best
    split, unpolished (equal to the decoding without local search), ``info['stopped']`` names the polish; never True:
    the full decoding (on a graph where the polish improves that split)."""
    hw = make_hw(4)
    for seed in range(34, 64):
        graph = _multi_order_graph(seed=seed, nodes=80)
        unpolished = solve_order_policy(graph, hw, "paper", **{**DEFAULT, "local_search": 0})
        full = solve_order_policy(graph, hw, "paper", **DEFAULT)
        if full.assignment.tolist() != unpolished.assignment.tolist():
            break
    else:
        pytest.skip("no graph whose polish changes the split")
    with pytest.raises(Stopped):
        solve_order_policy(graph, hw, "paper", stop=lambda: True, **DEFAULT)
    looks: list = []

    def after_forward() -> bool:  # False at the first look (before the forward pass), True from then on
        looks.append(1)
        return len(looks) > 1

    stopped = solve_order_policy(graph, hw, "paper", stop=after_forward, **DEFAULT)
    assert stopped.info["stopped"] == "local_search" and "stopped" not in full.info
    assert stopped.assignment.tolist() == unpolished.assignment.tolist()
    value = {name: reference_objective(graph, r.assignment, hw, "paper")
             for name, r in (("stopped", stopped), ("full", full))}
    assert value["full"] <= value["stopped"] * (1 + 1e-9), value


def test_refine_boundaries_stop_keeps_the_schedule_so_far():
    """A stop already set: the schedule comes back unchanged; never set: the re-cuts improve it (on this graph), never
    worse."""
    for seed in range(40, 60):
        graph, hw = _multi_order_graph(seed=seed, nodes=80), make_hw(4)
        start = run_solver("contiguous", graph, hw, "paper")["assignment"]
        refined = refine_boundaries(graph, hw, "paper", 1.0, np.asarray(start))
        if refined.tolist() != list(start):
            break
    else:
        pytest.skip("no graph whose boundaries the re-cuts change")
    assert refine_boundaries(graph, hw, "paper", 1.0, np.asarray(start), stop=lambda: True).tolist() == list(start)
    assert reference_objective(graph, refined, hw, "paper") <= reference_objective(graph, start, hw, "paper")
