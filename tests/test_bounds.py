"""Lower bounds (solvers/bounds.py): never above the optimum (brute force, the MILP), stronger where they must be."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from conftest import make_hw, random_graphs, random_valid_schedule
from test_oracles import EDGE_CASES, brute_force, hand_graph, tiny_graphs

from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.bounds import CrossingOracle, Deadline, analytic_lower_bound, crossing_lower_bound, group_bound

OBJECTIVES = ("paper", "latency")
RTOL = 1e-9


def test_group_bound_never_exceeds_the_best_packing():
    """``group_bound`` is below the least largest bin over every way to put the values into K bins."""
    rng = np.random.default_rng(3)
    for _ in range(40):
        n, k = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        values = rng.integers(0, 100, n).astype(np.float64)
        best = min(
            max(values[np.asarray(bins) == b].sum() for b in range(k)) for bins in itertools.product(range(k), repeat=n)
        )
        assert group_bound(values, k) <= best + 1e-9
    assert group_bound(np.full(5, 7.0), 4) == 14.0  # five equal items, four bins: one bin holds two


@pytest.mark.parametrize("k", [2, 3])
def test_crossing_bounds_never_exceed_the_brute_force_optimum(k):
    graphs = tiny_graphs() + list(EDGE_CASES.values())
    rng = np.random.default_rng(k)
    stronger = 0
    for graph in graphs:
        hw = make_hw(k)
        best = brute_force(graph, hw, lam=0.7)
        for objective in OBJECTIVES:
            # the search range ends at some schedule's objective: the optimum itself or a random schedule's
            schedule = random_valid_schedule(graph, k, rng)
            some = reference_objective(graph, schedule, hw, objective, 0.7)
            for upper in (best[objective], max(best[objective], some)):
                found = crossing_lower_bound(graph, hw, objective, 0.7, upper, time_limit_s=30.0)
                assert found["analytic"] == analytic_lower_bound(graph, hw, objective, 0.7)
                assert found["analytic"] <= found["bound"], (graph.name, objective)
                assert found["bound"] <= best[objective] * (1 + RTOL) + 1e-15, (graph.name, objective)
                stronger += found["bound"] > found["analytic"] * (1 + 1e-6)
    assert stronger >= 8  # the crossing bound is not just the analytic one


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_crossing_bounds_never_exceed_the_milp_optimum(objective):
    """20-35-node random graphs, K = 4: below the MILP's proven optimum, and closer to it than the analytic bound."""
    hw = make_hw(4)
    gaps = []
    for graph in random_graphs(3, seed=17, min_nodes=20, max_nodes=35):
        milp = run_solver("milp", graph, hw, objective, 0.7, time_limit_s=120.0)
        assert milp["optimal"], graph.name
        found = crossing_lower_bound(graph, hw, objective, 0.7, milp["objective"], time_limit_s=30.0)
        assert found["bound"] <= milp["objective"] * (1 + 1e-6), (graph.name, found)
        gaps.append((milp["objective"] - found["bound"]) / milp["objective"])
        gaps.append((milp["objective"] - found["analytic"]) / milp["objective"])
    assert np.mean(gaps[0::2]) < np.mean(gaps[1::2])


def test_crossing_oracle_is_the_least_crossing_of_a_downset_in_the_window():
    """Against enumeration of every downset of a 7-node graph, for many windows (the cache included)."""
    graph = hand_graph(
        "diamond",
        [5, 1, 8, 3, 2, 9, 4],
        [10, 3, 7, 1, 6, 2, 5],
        [0, 0, 0, 0, 0, 0, 0],
        [[0, 1], [0, 2], [1, 3], [2, 3], [2, 4], [3, 5], [4, 5], [4, 6]],
    )
    succs = graph.successors()
    downsets = []
    for bits in itertools.product((0, 1), repeat=graph.num_nodes):
        if all(bits[u] or not bits[v] for u, v in graph.edges.tolist()):
            crossing = [bits[u] and (not succs[u] or any(not bits[v] for v in succs[u])) for u in range(7)]
            cross = sum(graph.output_size[u] for u in range(7) if crossing[u])
            downsets.append((int(np.dot(bits, graph.params)), int(cross)))
    oracle = CrossingOracle(graph, graph.params[None, :])
    total = int(graph.params.sum())
    for lo, hi in [(a, b) for a in range(0, total + 2, 3) for b in range(a - 1, total + 2, 4)]:
        want = min((c for w, c in downsets if lo <= w <= hi), default=math.inf)
        assert oracle([(lo, hi)], Deadline(math.inf)) == want, (lo, hi)


def test_crossing_bound_is_tight_on_a_chain_with_heavy_tensors():
    """A chain whose only cheap cut is in the middle: the analytic bound misses the crossing, the crossing bound
    finds the optimum (brute force)."""
    graph = hand_graph("chain", [10, 10, 10, 10], [900, 5, 900, 1], [0, 0, 0, 0], [[0, 1], [1, 2], [2, 3]])
    hw = make_hw(2)
    best = brute_force(graph, hw)["paper"]
    found = crossing_lower_bound(graph, hw, "paper", 1.0, best + 500, time_limit_s=30.0)
    assert found["analytic"] < best
    assert found["bound"] == pytest.approx(best)


def test_crossing_bound_stops_when_asked():
    graph = random_graphs(1, seed=4, min_nodes=40, max_nodes=40)[0]
    found = crossing_lower_bound(graph, make_hw(4), "paper", 1.0, 1e12, time_limit_s=60.0, stop=lambda: True)
    assert found["calls"] == 0 and found["time_s"] < 5.0
