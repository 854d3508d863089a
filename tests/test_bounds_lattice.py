"""The downset programme (solvers/lattice.py): the exact optimum (brute force, the MILP) on graphs with few
downsets; the unique-order test; auto proves such graphs at once."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import make_hw, random_graphs
from test_oracles import EDGE_CASES, brute_force, hand_graph, tiny_graphs

from respect_jax.costs import OBJECTIVES
from respect_jax.graphs.graph import Graph, has_unique_order
from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.lattice import (
    _segment_downsets,
    enumerate_downsets,
    search_lattice,
    series_segments,
    solve_lattice,
)
from respect_jax.solvers.partitioners import best_contiguous_cuts

RTOL = 1e-9


def _downsets_by_subsets(graph) -> set[tuple[int, ...]]:
    """Every downset of a tiny graph, by checking all subsets."""
    preds = graph.predecessors()
    found = set()
    for bits in itertools.product([0, 1], repeat=graph.num_nodes):
        if all(not bits[v] or all(bits[u] for u in preds[v]) for v in range(graph.num_nodes)):
            found.add(bits)
    return found


def test_enumerated_downsets_are_exactly_the_closed_subsets():
    for graph in tiny_graphs() + list(EDGE_CASES.values()):
        sets = enumerate_downsets(graph, 10_000)
        rows = {tuple(int(x) for x in row) for row in sets}
        assert len(rows) == len(sets), graph.name  # no repeats
        assert rows == _downsets_by_subsets(graph), graph.name
        assert not sets[0].any()
    assert enumerate_downsets(tiny_graphs()[0], 2) is None  # more than the limit


def test_downset_enumeration_of_a_wide_graph_stops_at_its_limit_within_bounded_memory():
    """A 200-node antichain has 2^200 downsets: the enumeration gives up at its limit (None) having held about that
    many sets, not the 19,900 of the second level (a check per batch of parents let a 5,000-node layered graph's
    level grow to 22 GB); with a limit above the count (a 12-node antichain: 4,096) it still finds them all."""
    import tracemalloc

    wide = hand_graph("antichain200", [1] * 200, [1] * 200, [1] * 200, [])
    tracemalloc.start()
    try:
        assert enumerate_downsets(wide, 2_000) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, peak  # the old enumeration: ~150 MB here
    small = hand_graph("antichain12", [1] * 12, [1] * 12, [1] * 12, [])
    assert len(enumerate_downsets(small, 4_096)) == 4_096 and enumerate_downsets(small, 4_095) is None


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_lattice_optimum_equals_brute_force(k):
    hw = make_hw(k)
    for graph in tiny_graphs() + list(EDGE_CASES.values()):
        best = brute_force(graph, hw, lam=0.7)
        for objective in OBJECTIVES:
            found = solve_lattice(graph, hw, objective, 0.7)
            own = reference_objective(graph, found["assignment"], hw, objective, 0.7)
            assert own == pytest.approx(best[objective], rel=RTOL, abs=1e-15), (graph.name, objective)
            assert found["value"] == pytest.approx(best[objective], rel=RTOL, abs=1e-15), (graph.name, objective)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_lattice_optimum_equals_the_milp_on_small_graphs(objective):
    pytest.importorskip("cvxpy")
    hw = make_hw(4)
    checked = 0
    for graph in random_graphs(6, seed=11, min_nodes=10, max_nodes=16):
        found = solve_lattice(graph, hw, objective, 1.0, max_downsets=5000)
        if found is None:
            continue
        milp = run_solver("milp", graph, hw, objective, 1.0, time_limit_s=60)
        assert milp["optimal"]
        assert found["value"] == pytest.approx(milp["objective"], rel=1e-5), graph.name
        checked += 1
    assert checked >= 3


def test_unique_order_means_the_contiguous_split_is_optimal():
    chain = hand_graph("chain", [5, 1, 9, 2, 7], [3, 8, 1, 6, 2], [4, 2, 8, 1, 5], [[0, 1], [1, 2], [2, 3], [3, 4]])
    # a skip edge keeps the order unique; a parallel branch does not
    skip = hand_graph("skip", [5, 1, 9, 2, 7], [3, 8, 1, 6, 2], [4, 2, 8, 1, 5],
                      [[0, 1], [1, 2], [2, 3], [3, 4], [0, 3], [1, 4]])
    branch = hand_graph("branch", [5, 1, 9, 2], [3, 8, 1, 6], [4, 2, 8, 1], [[0, 1], [0, 2], [1, 3], [2, 3]])
    assert has_unique_order(chain) and has_unique_order(skip) and not has_unique_order(branch)
    for graph in (chain, skip):
        assert len(enumerate_downsets(graph)) == graph.num_nodes + 1
        for k, objective in itertools.product([2, 3, 4], OBJECTIVES):
            hw = make_hw(k)
            _, value = best_contiguous_cuts(graph, hw, objective, 0.7)
            assert value == pytest.approx(brute_force(graph, hw, lam=0.7)[objective], rel=RTOL)
    for graph in tiny_graphs():
        assert has_unique_order(graph) == (len(enumerate_downsets(graph)) == graph.num_nodes + 1), graph.name


def test_lattice_gives_up_past_its_deadline():
    graph = random_graphs(1, seed=3, min_nodes=30, max_nodes=30)[0]
    assert solve_lattice(graph, make_hw(4), "latency", deadline=0.0) is None


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_auto_proves_few_downset_graphs_at_once(objective):
    """auto's certificate: graphs whose downsets the programme enumerates are proven optimal (the bound equals the
    brute-force optimum) without the exact solver."""
    hw = make_hw(3)
    proven = 0
    for graph in tiny_graphs()[:6]:
        best = brute_force(graph, hw)[objective]
        result = run_solver("auto", graph, hw, objective, 1.0, time_budget_s=5.0, progress=False,
                            members=["contiguous"], exact="none", crossing_bound=False)
        assert result["objective"] == pytest.approx(best, rel=1e-5), graph.name
        assert result["optimal"] and result["gap"] == 0.0, graph.name
        assert result["info"]["lower_bound"] <= best * (1 + 1e-9), graph.name
        proven += result["info"]["portfolio"]["lattice"].get("optimal", False)
    assert proven == 6
    np.testing.assert_equal(proven, 6)


def module_chain(seed: int, modules: int = 2) -> Graph:
    """A chain of inception-like modules: each fans out from a join node into 2-3 branches of 1-2 nodes that meet
    in the next join node (sometimes with a skip edge from join to join, like a residual), random sizes."""
    rng = np.random.default_rng(seed)
    edges, count, join = [], 1, 0
    for _ in range(modules):
        ends = []
        for _ in range(int(rng.integers(2, 4))):
            prev = join
            for _ in range(int(rng.integers(1, 3))):
                edges.append([prev, count])
                prev, count = count, count + 1
            ends.append(prev)
        edges += [[e, count] for e in ends] + ([[join, count]] if rng.random() < 0.3 else [])
        join, count = count, count + 1
    return hand_graph(f"modules{seed}", rng.integers(0, 400_000, count), rng.integers(1, 3000, count),
                      rng.integers(100_000, 100_000_000, count), edges)


def _small_problems():
    return [module_chain(s) for s in range(4)] + tiny_graphs()[:6] + [EDGE_CASES["huge_node"]]


def test_segments_hold_every_downset_once():
    """series_segments: each downset is base ∪ X for exactly one segment and one downset X of its nodes."""
    for graph in _small_problems() + list(EDGE_CASES.values()):
        rows = []
        for base, nodes in series_segments(graph):
            for x in _segment_downsets(graph.predecessors(), nodes, 10_000, None):
                row = base.copy()
                row[nodes] = x
                rows.append(tuple(int(b) for b in row))
        assert len(rows) == len(set(rows)), graph.name
        assert set(rows) == _downsets_by_subsets(graph), graph.name
    assert all(len(series_segments(module_chain(s))) >= 3 for s in range(4))  # the joins are separators


@pytest.mark.parametrize("k", [2, 3, 4])
def test_pruned_programme_equals_brute_force(k):
    """With a limit at the optimum or a contiguous split's value the filtered programme finds the optimum; with a
    limit just below it, it proves that no schedule meets the limit (also with a slow link: crossings decide)."""
    for graph, hw in itertools.product(_small_problems(), (make_hw(k), make_hw(k, link_bw=3e5))):
        best = brute_force(graph, hw, lam=0.7)
        for objective in OBJECTIVES:
            opt = best[objective]
            _, contiguous = best_contiguous_cuts(graph, hw, objective, 0.7)
            for upper in (opt, contiguous):
                found = solve_lattice(graph, hw, objective, 0.7, upper=upper)
                own = reference_objective(graph, found["assignment"], hw, objective, 0.7)
                assert own == pytest.approx(opt, rel=RTOL, abs=1e-15), (graph.name, objective, upper)
                assert found["value"] == pytest.approx(opt, rel=RTOL, abs=1e-15), (graph.name, objective)
            if opt > 0:
                below = solve_lattice(graph, hw, objective, 0.7, upper=opt * (1 - 1e-4))
                assert below["assignment"] is None and below["value"] == np.inf, (graph.name, objective)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_search_lattice_finds_the_optimum_or_a_lower_bound(objective):
    """Probing: the optimum when the programme fits; otherwise (few downsets allowed) a lower bound <= the optimum
    that the probes raised above the given one on some graphs."""
    hw = make_hw(3)
    raised = improved = stopped = 0
    for graph in _small_problems():
        opt = brute_force(graph, hw)[objective]
        _, upper = best_contiguous_cuts(graph, hw, objective, 1.0)
        found = search_lattice(graph, hw, objective, upper=upper, lower=0.0)
        assert found["value"] == pytest.approx(opt, rel=RTOL, abs=1e-15), graph.name
        assert found["lower"] <= opt * (1 + 1e-9), graph.name
        few = search_lattice(graph, hw, objective, max_downsets=4, upper=upper, lower=0.0, fewest=8)
        assert few["lower"] <= opt * (1 + 1e-9), graph.name
        if "value" in few:
            assert few["value"] == pytest.approx(opt, rel=RTOL, abs=1e-15), graph.name
        if "incumbent" in few:  # the heuristic's schedule: valid, its value its own, better than the given one
            value = reference_objective(graph, few["incumbent"]["assignment"], hw, objective, 1.0)
            assert value == pytest.approx(few["incumbent"]["value"], rel=RTOL, abs=1e-15), graph.name
            assert opt * (1 - 1e-9) <= value < upper, graph.name
            improved += 1
        raised += 0 < few["lower"] and "value" not in few
        patient, eager = (search_lattice(graph, hw, objective, max_downsets=4, upper=upper, lower=0.0, fewest=0,
                                         patience=p)["probes"] for p in (2, 0))
        outcomes = "".join(p[1][0] for p in patient)  # g(ave up), n(one), o(ptimum)
        assert "ggg" not in outcomes and (outcomes.endswith("gg") or len(patient) == len(eager)), graph.name
        stopped += len(patient) < len(eager)
    assert raised >= 2 and improved >= 1 and stopped >= 3
