"""``solver=auto``'s CP-SAT presolve switch (``cpsat_presolve_max_nodes``): CP-SAT without its presolve still proves
the brute-force optimum, and auto turns the presolve off exactly on graphs larger than the limit."""

from __future__ import annotations

import pytest
from conftest import make_hw
from test_oracles import brute_force, tiny_graphs

from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.cpsat import solve_cpsat


@pytest.mark.parametrize("objective", ["paper", "latency"])
def test_cpsat_without_presolve_proves_the_brute_force_optimum(objective):
    hw = make_hw(3)
    for graph in tiny_graphs()[:4]:
        best = brute_force(graph, hw)[objective]
        result = solve_cpsat(graph, hw, objective, time_limit_s=20.0, workers=1, presolve=False)
        assert result.optimal
        assert reference_objective(graph, result.assignment, hw, objective) == pytest.approx(best, rel=1e-9)


def test_auto_turns_cpsat_presolve_off_above_its_limit_only():
    graph = tiny_graphs()[4]
    hw = make_hw(3)
    best = brute_force(graph, hw)["latency"]
    options = dict(members=["contiguous"], exact="cpsat", crossing_bound=False, progress=False, time_budget_s=20.0,
                   lattice_downsets=0, head_start_s=20.0)
    for limit, presolve in ((graph.num_nodes - 1, False), (graph.num_nodes, True), (None, True)):
        result = run_solver("auto", graph, hw, "latency", cpsat_presolve_max_nodes=limit, **options)
        assert result["info"]["portfolio"]["cpsat"]["presolve"] is presolve
        assert result["optimal"] and result["objective"] == pytest.approx(best, rel=1e-6)
    default = run_solver("auto", graph, hw, "latency", **options)  # the default limit (900) keeps it on
    assert default["info"]["portfolio"]["cpsat"]["presolve"] is True


@pytest.mark.parametrize("value", [-1, 1.5, "900", True])
def test_auto_rejects_a_bad_presolve_limit(value):
    graph = tiny_graphs()[0]
    with pytest.raises(ValueError, match="cpsat_presolve_max_nodes"):
        run_solver("auto", graph, make_hw(2), "latency", progress=False, cpsat_presolve_max_nodes=value)
