"""``solver=auto`` keeps the exact solver's best schedule when it abandons it at the deadline: CP-SAT reports each
improving solution as it comes (``solve_cpsat(on_solution=...)``), and a search still running after the deadline and
the grace no longer loses what it found (at 5k-10k nodes under load CP-SAT came back late and its result was dropped).
CP-SAT is replaced by a stub that reports the brute-force optimum of a small graph, with it as its bound, then
outlasts the budget; the only fast member left on (the contiguous split, no polish, no downset programme) does not
find that optimum."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from conftest import make_hw, random_graphs

import respect_jax.solvers.auto as auto
from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.common import structure, thresholds
from respect_jax.solvers.cpsat import Incumbent

BUDGET_S = 1.0


def _brute(graph, hw, objective: str) -> tuple[float, np.ndarray]:
    best, best_a = np.inf, None
    for combo in itertools.product(range(hw.stages), repeat=graph.num_nodes):
        a = np.asarray(combo)
        if len(graph.edges) and np.any(a[graph.edges[:, 0]] > a[graph.edges[:, 1]]):
            continue
        value = reference_objective(graph, a, hw, objective, 1.0)
        if value < best:
            best, best_a = value, a
    return best, best_a


def _case(objective: str):
    """A small graph whose best contiguous split (auto's only fast member here) is not optimal."""
    hw = make_hw(3)
    for graph in random_graphs(40, seed=35, min_nodes=7, max_nodes=8):
        alone = run_solver("contiguous", graph, hw, objective)
        best, best_a = _brute(graph, hw, objective)
        if reference_objective(graph, np.asarray(alone["assignment"]), hw, objective, 1.0) > best * (1 + 1e-6):
            return graph, hw, best, best_a
    raise AssertionError("no small graph with a non-optimal contiguous split")


@pytest.mark.parametrize("objective", ["latency", "paper"])
def test_auto_keeps_an_abandoned_cpsat_incumbent(objective, monkeypatch):
    graph, hw, best, best_a = _case(objective)
    calls = []

    def slow_cpsat(graph_, hw_, objective_, lam, on_solution=None, **options):
        calls.append(on_solution)
        if on_solution is not None:
            on_solution(Incumbent(best, best, thresholds(best_a, hw.stages).astype(np.int8), structure(graph)))
        time.sleep(BUDGET_S + 1.5)  # past the deadline and the grace: abandoned
        raise AssertionError("an abandoned call's return is never used")

    real = auto.get_solver
    monkeypatch.setattr(auto, "get_solver", lambda name: slow_cpsat if name == "cpsat" else real(name))
    result = run_solver("auto", graph, hw, objective, members=["contiguous"], exact="cpsat", crossing_bound=False,
                        progress=False, time_budget_s=BUDGET_S, polish_moves=0, lattice_downsets=0)
    auto.join_abandoned(5.0)
    info = result["info"]
    entry = info["portfolio"]["cpsat"]
    assert calls and calls[0] is not None
    assert "abandoned" in entry and entry["objective"] == pytest.approx(best, rel=1e-9)
    assert reference_objective(graph, np.asarray(result["assignment"]), hw, objective, 1.0) == pytest.approx(
        best, rel=1e-9)
    assert info["winner"] == "cpsat"
    # its bound (here the optimum: valid, and above the analytic ones) is auto's, so the schedule is proven optimal
    assert entry["bound"] == pytest.approx(best) and info["analytic_lower_bound"] < best * (1 - 1e-6)
    assert info["lower_bound"] == pytest.approx(best, rel=1e-9) and result["optimal"]
