"""Latency rebalancing (respect_jax/solvers/rebalance.py) against the loop reference evaluator and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import make_hw, random_graphs, random_valid_schedule

from respect_jax.graphs.graph import has_unique_order
from respect_jax.local_search import objectives_np, refine_boundaries
from respect_jax.reference import reference_metrics, reference_objective
from respect_jax.solvers.rebalance import (
    leximax_less,
    refine_leximax,
    resplit,
    stage_major_orders,
    stage_times_np,
)


def test_stage_times_equal_the_reference_evaluator():
    rng = np.random.default_rng(1)
    for graph in random_graphs(4, seed=21, min_nodes=6, max_nodes=20):
        hw = make_hw(3)
        s = random_valid_schedule(graph, 3, rng)
        np.testing.assert_allclose(stage_times_np(graph, s[None], hw)[0], reference_metrics(graph, s, hw)["time_k"],
                                   rtol=1e-9)


def test_leximax_less_is_the_order_of_sorted_tuples():
    """Against Python's tuple order of the decreasingly sorted values (distinct integers: no tolerance ties)."""
    rng = np.random.default_rng(2)
    for _ in range(300):
        a, b = rng.integers(0, 6, 4).astype(float), rng.integers(0, 6, 4).astype(float)
        want = tuple(sorted(a, reverse=True)) < tuple(sorted(b, reverse=True))
        assert leximax_less(a, b) == want
    assert not leximax_less(np.array([3.0, 1.0]), np.array([3.0, 1.0]))
    assert leximax_less(np.array([3.0, 1.0]), np.array([1.0, 3.0 + 1e-6]))  # the maximum decides first


def test_stage_major_orders_are_topological_and_keep_the_schedule_contiguous():
    rng = np.random.default_rng(3)
    for graph in random_graphs(4, seed=23, min_nodes=6, max_nodes=25):
        s = random_valid_schedule(graph, 4, rng)
        for order in stage_major_orders(graph, s):
            assert sorted(order.tolist()) == list(range(graph.num_nodes))
            where = np.empty(graph.num_nodes, np.int64)
            where[order] = np.arange(graph.num_nodes)
            assert np.all(where[graph.edges[:, 0]] < where[graph.edges[:, 1]])
            assert np.all(np.diff(s[order]) >= 0)  # stage-major: s is one contiguous split of it


def brute_best_split(graph, hw, objective: str, order: np.ndarray) -> float:
    """The least objective over every contiguous split of ``order`` into K stages (empty stages allowed)."""
    n, k = graph.num_nodes, hw.stages
    best = np.inf
    for cuts in itertools.combinations_with_replacement(range(n + 1), k - 1):
        s = np.empty(n, np.int64)
        s[order] = np.searchsorted(np.array(cuts), np.arange(n), side="right")
        best = min(best, reference_objective(graph, s, hw, objective))
    return best


@pytest.mark.parametrize("objective", ["paper", "latency"])
def test_resplit_is_valid_never_worse_and_the_best_split_of_its_orders(objective):
    """Its value is the loop evaluator's and never above the start's; under ``latency`` (whose contiguous programme is
    exact: a bisection of the bottleneck) it equals the brute-force best contiguous split of the stage-major orders
    (``paper``'s programme searches a grid of memory caps: not always the least)."""
    rng = np.random.default_rng(4)
    improved = 0
    for graph in random_graphs(6, seed=25, min_nodes=6, max_nodes=11):
        hw = make_hw(3)
        s = random_valid_schedule(graph, 3, rng)
        before = reference_objective(graph, s, hw, objective)
        out = resplit(graph, hw, objective, 1.0, s)
        assert reference_metrics(graph, out, hw)["valid"]
        after = reference_objective(graph, out, hw, objective)
        assert objectives_np(graph, out[None], hw, objective, 1.0)[0] == pytest.approx(after, rel=1e-9)
        assert after <= before * (1 + 1e-9)
        if objective == "latency" and not has_unique_order(graph):  # one order: already split exactly, left alone
            best = min(brute_best_split(graph, hw, objective, o) for o in stage_major_orders(graph, s))
            assert after == pytest.approx(min(best, before), rel=1e-6)
        improved += after < before * (1 - 1e-6)
    assert improved >= 3


def test_refine_leximax_is_valid_never_worse_and_leximax_smaller():
    """From random valid schedules: valid, the latency objective never worse (loop evaluator), the sorted stage times
    never lexicographically larger; and from the objective-accepting re-cuts' own result it still improves the
    objective on some graphs (a cascade over boundaries those re-cuts do not take)."""
    rng = np.random.default_rng(6)
    improved = beyond = 0
    for graph in random_graphs(10, seed=27, min_nodes=10, max_nodes=30):
        for k in (3, 4):
            hw = make_hw(k)
            s = random_valid_schedule(graph, k, rng)
            before = reference_objective(graph, s, hw, "latency")
            out = refine_leximax(graph, hw, s, rounds=2)
            assert reference_metrics(graph, out, hw)["valid"]
            after = reference_objective(graph, out, hw, "latency")
            assert after <= before * (1 + 1e-12)
            t_in, t_out = stage_times_np(graph, s[None], hw)[0], stage_times_np(graph, out[None], hw)[0]
            assert not leximax_less(t_in, t_out)
            improved += leximax_less(t_out, t_in)
            plain = refine_boundaries(graph, hw, "latency", 1.0, s, rounds=4)
            lex = refine_leximax(graph, hw, plain, rounds=4)
            beyond += (reference_objective(graph, lex, hw, "latency")
                       < reference_objective(graph, plain, hw, "latency") * (1 - 1e-6))
    assert improved >= 8
    assert beyond >= 1


@pytest.mark.slow  # the forward pass and the polish compile for a new shape
def test_rebalance_in_the_decoding_is_never_worse_and_rescored():
    """solver=policy's default under ``latency`` runs the rebalancing (``ls_rebalance``, default 1 cycle; ``paper``:
    none); the schedule is valid, its objective the evaluator's re-score, and never worse than ``ls_rebalance=0``."""
    import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
    from respect_jax.api import hardware
    from respect_jax.costs import evaluate_assignment
    from respect_jax.graphs.architectures import FAMILIES, ArchConfig, generate_arch_numpy
    from respect_jax.solvers import run_solver

    weights = tuple(1.0 if f.name.startswith("nas") else 0.0 for f in FAMILIES)
    graph = generate_arch_numpy(60, 90, np.random.default_rng(2), arch=ArchConfig(family_weights=weights, p_hybrid=0.0))
    hw = hardware("coral_usb", stages=4)
    plain = run_solver("policy", graph, hw, "latency", 1.0, ls_rebalance=0)
    out = run_solver("policy", graph, hw, "latency", 1.0)
    assert out["info"]["ls_rebalance"] == 1 and "ls_rebalance" not in plain["info"]
    metrics = evaluate_assignment(graph, np.asarray(out["assignment"]), hw, "latency", 1.0)
    assert metrics["valid"] and metrics["objective"] == pytest.approx(out["objective"], rel=1e-6)
    assert out["objective"] <= plain["objective"] * (1 + 1e-6)
    assert "ls_rebalance" not in run_solver("policy", graph, hw, "paper", 1.0)["info"]
    with pytest.raises(ValueError, match="ls_rebalance"):
        run_solver("policy", graph, hw, "latency", 1.0, ls_rebalance=-1)


def test_boundary_candidate_memo_gives_the_computed_candidates():
    """boundary_candidates with a memo: a schedule whose stages k, k + 1 (and which nodes lie before / after them)
    match a memorised one gets the candidates computed afresh for it, its other stages kept (a schedule moved on an
    earlier boundary); refine_boundaries / refine_leximax / rebalance_many with memos return what they return
    without."""
    from respect_jax.local_search import boundary_candidates
    from respect_jax.solvers.rebalance import rebalance_many

    rng = np.random.default_rng(12)
    hits, checked_many = 0, False
    for graph in random_graphs(6, seed=21, min_nodes=20, max_nodes=45):
        if has_unique_order(graph):
            continue
        hw = make_hw(4)
        memo: dict = {}
        for _ in range(4):
            s = random_valid_schedule(graph, 4, rng)
            for k in range(3):
                want = boundary_candidates(graph, s, k, hw, "latency")
                assert np.array_equal(boundary_candidates(graph, s, k, hw, "latency", memo=memo), want)
            # move nodes between stages 0 and 1 only where it stays valid: boundary 2's pattern is unchanged
            moved = s.copy()
            for v in rng.permutation(graph.num_nodes):
                if moved[v] == 0 and all(moved[w] >= 1 for w in graph.edges[graph.edges[:, 0] == v, 1]):
                    moved[v] = 1
                    break
            if not np.array_equal(moved, s):
                hits += 1
                got = boundary_candidates(graph, moved, 2, hw, "latency", memo=memo)
                assert np.array_equal(got, boundary_candidates(graph, moved, 2, hw, "latency"))
                kept = moved <= 1
                assert not len(got) or np.array_equal(got[:, kept], np.repeat(moved[None, kept], len(got), 0))
        s = random_valid_schedule(graph, 4, rng)
        assert np.array_equal(refine_boundaries(graph, hw, "latency", 1.0, s, 2, memo={}),
                              refine_boundaries(graph, hw, "latency", 1.0, s, 2))
        assert np.array_equal(refine_leximax(graph, hw, s, 2, memo={}), refine_leximax(graph, hw, s, 2))
        if not checked_many:  # one graph (the polish compiles per graph size)
            a = rebalance_many([graph], hw, "latency", 1.0, [s], 20, {"kind": "single"}, 2, 2, memos=[{}])
            b = rebalance_many([graph], hw, "latency", 1.0, [s], 20, {"kind": "single"}, 2, 2)
            assert np.array_equal(a[0][0], b[0][0]) and a[1] == b[1]
            checked_many = True
    assert hits >= 4 and checked_many
