"""Coarse-to-fine interval re-cuts in ``solver=auto`` (session 36, ``coarse_cut_steps``): the line's re-cuts first
converge with few bisection steps (max flows) per re-cut, then go on with ``interval_cut_steps``; the two phases keep
memos of their own (a memo entry says a re-cut with one step count kept nothing). Bad values:
``test_auto_line_cuts``."""

from __future__ import annotations

import pytest
from test_auto_line_cuts import assert_valid_within_the_cuts, host_line_case, sweep_spy

import respect_jax.solvers.auto as auto
from respect_jax.reference import reference_metrics, reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.orders import split_of_order


def test_cuts_until_runs_the_coarse_steps_to_convergence_then_the_fine_ones(monkeypatch):
    """From the contiguous split of the SPEC order of a 400-node dense layered graph (K = 4): the sweeps run with 3
    steps until they change nothing, then with 12, each 12-step phase solving max flows (its memo is not the coarse
    one's, which would skip every re-cut); the result is valid (loop reference) and at most the split's objective."""
    graph, hw = host_line_case()
    start, _ = split_of_order(graph, hw, "latency", 1.0, graph.topological_order())
    seen = sweep_spy(monkeypatch)
    out = auto.cuts_until(graph, hw, "latency", 1.0, start, 200, 50, lambda: False, None, set(), 12, False, 3, set())
    steps = [s for s, _ in seen]
    assert 3 in steps and 12 in steps, seen
    first_fine = steps.index(12)
    assert set(steps[:first_fine]) == {3} and set(steps[first_fine:]) == {12}, seen
    assert sum(f for s, f in seen if s == 12) > 0, seen
    for s, flows in seen:
        assert flows % s == 0, (s, flows)
    assert reference_metrics(graph, out, hw)["valid"]
    before = reference_objective(graph, start, hw, "latency")
    assert reference_objective(graph, out, hw, "latency") <= before * (1 + 1e-9)


@pytest.mark.parametrize("coarse, expected", [(3, {3, 12}), (None, {12}), (12, {12})])
def test_coarse_cut_steps_reach_the_line_re_cuts(monkeypatch, coarse, expected):
    """Through auto on the host line (no restarts, no exact solver): with ``coarse_cut_steps`` 3 the sweeps take 3 and
    12 steps, the first sweep 3; with None, or not below ``interval_cut_steps``, only 12. The result is valid and at
    most the line's re-cuts as the loop evaluator scores it."""
    graph, hw = host_line_case()
    seen = sweep_spy(monkeypatch)
    options = dict(members=["contiguous"], exact="none", crossing_bound=False, progress=False, lattice_downsets=0,
                   line_restarts={"latency": 0}, rebalance={"latency": 1}, host_line_min_nodes=300,
                   interval_cuts_min_nodes=0)
    result = run_solver("auto", graph, hw, "latency", time_budget_s=60.0, interval_cut_steps=12,
                        coarse_cut_steps=coarse, **options)
    assert {s for s, _ in seen} == expected, seen
    assert seen[0][0] == min(expected), seen
    assert_valid_within_the_cuts(graph, hw, result)
