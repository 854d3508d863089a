"""The host line's interval re-cuts in ``solver=auto`` (session 35): ``restart_cut_steps`` (the restarts' re-cuts take
that many bisection steps, the line's own ``interval_cut_steps``) and ``exact_after_cuts_max_nodes`` (on a host-line
graph whose first re-cuts converge before the deadline the exact solver starts without its build gate, hinted with the
line's schedule; above the limit, or with None, the gate still skips it)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_hw
from test_auto_rebalance import layered

import respect_jax.solvers.auto as auto
from respect_jax.reference import reference_metrics, reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.boundary_cuts import IntervalCut, interval_sweep, jump_move

#: a 400-node dense layered graph on the host line (host_line_min_nodes below its size), the interval re-cuts on at its
#: size, the exact solver waiting for the line, a build gate that would skip it, no timer start (exact_wait_share 1)
OPTIONS = dict(members=["contiguous"], exact="cpsat", crossing_bound=False, progress=False, lattice_downsets=0,
               line_restarts={"latency": 0}, rebalance={"latency": 1}, host_line_min_nodes=300,
               interval_cuts_min_nodes=0, exact_build_s_per_unit=1e3, exact_wait_share=1.0,
               exact_after_line_min_nodes=300,
               member_options={"cpsat": {"workers": 1}})


def host_line_case():
    """A 400-node dense layered graph and 4 stages on which the host line's interval re-cuts run (with OPTIONS)."""
    return layered(400, 31), make_hw(4, macs_per_s=2.4e11, sram_bytes=8388608.0, stage_overhead_s=2e-4)


def sweep_spy(monkeypatch) -> list:
    """Records (steps, max flows solved) of every interval sweep auto's re-cuts run (``IntervalCut.solve`` counted)."""
    seen: list = []
    counter = {"flows": 0}
    original = IntervalCut.solve

    def counted(self, alpha, beta):
        counter["flows"] += 1
        return original(self, alpha, beta)

    def spy(*args, **kwargs):
        before = counter["flows"]
        out = interval_sweep(*args, **kwargs)
        seen.append((kwargs["steps"], counter["flows"] - before))
        return out

    monkeypatch.setattr(IntervalCut, "solve", counted)
    monkeypatch.setattr(auto, "interval_sweep", spy)
    return seen


def assert_valid_within_the_cuts(graph, hw, result) -> None:
    """``result`` (auto's, under ``latency``) is a valid schedule at most the line's re-cuts, as the loop evaluator
    scores it."""
    a = np.asarray(result["assignment"])
    assert reference_metrics(graph, a, hw)["valid"]
    cuts = result["info"]["portfolio"]["contiguous+cuts"]["objective"]
    assert reference_objective(graph, a, hw, "latency") <= cuts * (1 + 1e-6)


def test_exact_solver_starts_ungated_once_the_cuts_converged():
    """With the limit at the graph's size CP-SAT runs (``ungated``) although the gate estimates 1,000 s per unit; the
    result is a valid schedule, the loop evaluator's value of it, and at most both the line's re-cuts and CP-SAT's."""
    graph, hw = host_line_case()
    result = run_solver("auto", graph, hw, "latency", time_budget_s=5.0, exact_after_cuts_max_nodes=graph.num_nodes,
                        **OPTIONS)
    portfolio = result["info"]["portfolio"]
    assert "objective" in portfolio["contiguous+cuts"]
    assert portfolio["cpsat"].get("ungated") is True, portfolio["cpsat"]
    assert "objective" in portfolio["cpsat"]
    a = np.asarray(result["assignment"])
    assert reference_metrics(graph, a, hw)["valid"]
    value = reference_objective(graph, a, hw, "latency")
    assert result["objective"] == pytest.approx(value, rel=1e-6)  # the shared evaluator's float32
    assert value <= min(portfolio["contiguous+cuts"]["objective"], portfolio["cpsat"]["objective"]) * (1 + 1e-6)


@pytest.mark.parametrize("limit_offset", [-1, None])
def test_the_build_gate_still_applies_above_the_limit_or_without_it(limit_offset):
    graph, hw = host_line_case()
    limit = None if limit_offset is None else graph.num_nodes + limit_offset
    # a budget far beyond the line's ~0.1-0.4 s (auto returns once the gate skipped CP-SAT): with 5 s the test failed
    # once at load 8; a deadline before the line's end skips CP-SAT as "not started before the deadline", not the gate
    result = run_solver("auto", graph, hw, "latency", time_budget_s=60.0, exact_after_cuts_max_nodes=limit, **OPTIONS)
    entry = result["info"]["portfolio"]["cpsat"]
    assert "to build" in entry.get("skipped", ""), entry


@pytest.mark.parametrize("value", [-1, 2.5, "6000", True])
def test_auto_rejects_a_bad_exact_after_cuts_limit(value):
    with pytest.raises(ValueError, match="exact_after_cuts_max_nodes must be an integer >= 0 or null"):
        run_solver("auto", layered(40, 1, 1.2), make_hw(2), "latency", progress=False,
                   exact_after_cuts_max_nodes=value)


@pytest.mark.parametrize("restart_steps", [3, None])
def test_restart_cut_steps_reach_the_restarts_re_cuts_only(monkeypatch, restart_steps):
    """The same 400-node graph on the host line with two restarts (no exact solver): every interval sweep runs with
    either the line's ``interval_cut_steps`` (12 here) or ``restart_cut_steps`` (3), both occur, and each sweep's
    re-cuts solve that many max flows (``IntervalCut.solve`` counted); with None every sweep takes 12. The result is a
    valid schedule at most the line's re-cuts, as the loop evaluator scores it."""
    graph, hw = host_line_case()
    seen = sweep_spy(monkeypatch)
    options = {**OPTIONS, "exact": "none", "line_restarts": {"latency": 2}}
    result = run_solver("auto", graph, hw, "latency", time_budget_s=60.0, interval_cut_steps=12,
                        restart_cut_steps=restart_steps, **options)
    steps = {s for s, _ in seen}
    assert steps == ({12, 3} if restart_steps else {12}), seen
    for s, flows in seen:  # a sweep's re-cuts each solve `s` max flows (a sweep cut short by the memo: none)
        assert flows % s == 0, (s, flows)
    assert result["info"]["portfolio"]["contiguous+restart"]["restarts"] == 2
    assert_valid_within_the_cuts(graph, hw, result)


@pytest.mark.parametrize("name", ["restart_cut_steps", "coarse_cut_steps"])
@pytest.mark.parametrize("value", [0, 2.5, "4", True])
def test_auto_rejects_bad_cut_step_counts(name, value):
    with pytest.raises(ValueError, match=f"{name} must be an integer >= 1 or null"):
        run_solver("auto", layered(40, 1, 1.2), make_hw(2), "latency", progress=False, **{name: value})


@pytest.mark.parametrize("offset", [0, 1, None])
def test_jump_moves_reach_the_line_re_cuts_from_their_minimum_size(monkeypatch, offset):
    """With ``jump_moves_min_nodes`` at the graph's size the line's re-cuts call :func:`jump_move` once a sweep changes
    nothing (on the 400-node graph at least once); one node above it, or None, never; the result stays valid and at
    most the line's re-cuts."""
    graph, hw = host_line_case()
    calls: list = []

    def spy(*args, **kwargs):
        calls.append(1)
        return jump_move(*args, **kwargs)

    monkeypatch.setattr(auto, "jump_move", spy)
    options = {**OPTIONS, "exact": "none", "line_restarts": {"latency": 1}}
    limit = None if offset is None else graph.num_nodes + offset
    result = run_solver("auto", graph, hw, "latency", time_budget_s=60.0, jump_moves_min_nodes=limit, **options)
    assert bool(calls) == (offset == 0)
    a = np.asarray(result["assignment"])
    assert reference_metrics(graph, a, hw)["valid"]
    assert reference_objective(graph, a, hw, "latency") <= result["info"]["portfolio"]["contiguous+cuts"][
        "objective"] * (1 + 1e-6)


@pytest.mark.parametrize("value", [-1, 2.5, "3000", True])
def test_auto_rejects_a_bad_jump_moves_limit(value):
    with pytest.raises(ValueError, match="jump_moves_min_nodes must be an integer >= 0 or null"):
        run_solver("auto", layered(40, 1, 1.2), make_hw(2), "latency", progress=False, jump_moves_min_nodes=value)


def test_bound_refine_options_reach_the_crossing_bound(monkeypatch):
    """``bound_paper_refine_max`` / ``bound_latency_refine_max`` are handed to the crossing bound where the rule of
    session 36 allows them (K >= ``bound_refine_min_stages``, a graph that cannot spill; see
    tests/test_auto_bound_refine.py); here (K = 3) the defaults hand None (its module defaults), the rule switched
    off hands them on."""
    seen: list = []
    real = auto.crossing_lower_bound

    def spy(*args, **kwargs):
        seen.append((kwargs.get("paper_refine_max"), kwargs.get("latency_refine_max")))
        return real(*args, **kwargs)

    monkeypatch.setattr(auto, "crossing_lower_bound", spy)
    graph, hw = layered(60, 3, 1.5), make_hw(3)
    options = dict(members=["contiguous"], exact="none", progress=False, time_budget_s=5.0, lattice_downsets=0)
    run_solver("auto", graph, hw, "latency", **options)
    run_solver("auto", graph, hw, "latency", bound_paper_refine_max=72, bound_latency_refine_max=60,
               bound_refine_min_stages=None, bound_refine_spill=True, **options)
    assert seen == [(None, None), (72, 60)]


@pytest.mark.parametrize("name", ["bound_paper_refine_max", "bound_latency_refine_max"])
@pytest.mark.parametrize("value", [-1, 2.5, "63", True])
def test_auto_rejects_a_bad_bound_refine_option(name, value):
    with pytest.raises(ValueError, match=f"{name} must be an integer >= 0 or null"):
        run_solver("auto", layered(40, 1, 1.2), make_hw(2), "latency", progress=False, **{name: value})
