"""``solver=auto``'s latency rebalancing of the contiguous line (respect_jax/solvers/auto.py: ``rebalance_host``,
``rebalance_until``; the steps of respect_jax/solvers/rebalance.py) against the loop evaluator, brute force and the
steps run one by one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import make_hw, random_graphs, random_valid_schedule
from test_oracles import brute_force

from respect_jax.graphs import GeneratorConfig, generate_numpy
from respect_jax.graphs.graph import has_unique_order
from respect_jax.local_search import BOUNDARY_ROUNDS, objectives_np, refine_boundaries
from respect_jax.reference import reference_metrics, reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.auto import POLISH_CLOSURE_MAX_NODES, rebalance_host, rebalance_until
from respect_jax.solvers.partitioners import contiguous_assignment, contiguous_search
from respect_jax.solvers.rebalance import rebalance_step


def contiguous(graph, hw, objective="latency"):
    order = graph.topological_order()
    cuts, _, _ = contiguous_search(graph, hw, objective, 1.0, order)
    return np.asarray(contiguous_assignment(graph, cuts, order), np.int64)


def layered(nodes: int, seed: int, edges_per_node: float = 2.9):
    """A generated layered graph like experiments/bench_scale.py's (conf/graphs/layered1k.yaml)."""
    base = yaml.safe_load((Path(__file__).resolve().parents[1] / "conf" / "graphs" / "layered1k.yaml").read_text())
    base.update(min_nodes=nodes, max_nodes=nodes, edges_per_node=edges_per_node)
    return generate_numpy(GeneratorConfig(**base), np.random.default_rng(seed), name=f"layered{nodes}_{seed}")


def steps_reference(graph, hw, start, cycles):
    """rebalance_host written out: the re-cuts, then rebalancing steps until one changes nothing (never worse)."""
    s = refine_boundaries(graph, hw, "latency", 1.0, start, BOUNDARY_ROUNDS)
    for _ in range(cycles):
        t = rebalance_step(graph, hw, "latency", 1.0, s, BOUNDARY_ROUNDS)
        if np.array_equal(t, s):
            break
        s = t
    return s


def test_rebalance_host_is_the_steps_run_in_turn_valid_and_above_the_optimum():
    """On small graphs (K = 3), from the contiguous split and from random valid schedules: valid, its latency (loop
    evaluator) never above its start's, never below the brute-force optimum, and equal to the re-cuts and rebalancing
    steps run one by one; it improves some starts."""
    improved = 0
    rng = np.random.default_rng(43)
    for graph in random_graphs(8, seed=41, min_nodes=6, max_nodes=9):
        for random_start in (False, True):
            hw = make_hw(3)
            start = random_valid_schedule(graph, 3, rng) if random_start else contiguous(graph, hw)
            offered = []
            out = rebalance_host(graph, hw, "latency", 1.0, start, 8, lambda: False, offered.append)
            assert reference_metrics(graph, out, hw)["valid"]
            before, after = (reference_objective(graph, s, hw, "latency") for s in (start, out))
            assert brute_force(graph, hw)["latency"] * (1 - 1e-9) <= after <= before * (1 + 1e-12)
            want = steps_reference(graph, hw, start, 8)
            assert after == pytest.approx(reference_objective(graph, want, hw, "latency"), rel=1e-9)
            if offered:  # every schedule it offers is its own, the last one the result
                assert np.array_equal(offered[-1], out)
            improved += after < before * (1 - 1e-6)
    assert improved >= 1


def test_rebalance_host_stops_when_told():
    graph = layered(400, 3)
    hw = make_hw(4)
    start = contiguous(graph, hw)
    assert np.array_equal(rebalance_host(graph, hw, "latency", 1.0, start, 8, lambda: True), start)


def test_rebalance_until_never_worse_and_offers_each_better_schedule():
    """On a 400-node layered graph (latency, K = 4): each offered schedule valid and no worse than the one before
    (NumPy evaluator), the result the last one offered, never worse than its start."""
    graph = layered(400, 5)
    hw = make_hw(4)
    start = rebalance_host(graph, hw, "latency", 1.0, contiguous(graph, hw), 8, lambda: False)
    offered = []
    out, cycles = rebalance_until(graph, hw, "latency", 1.0, start, 50, 3, lambda: False, offered.append)
    value = lambda s: float(objectives_np(graph, s[None], hw, "latency", 1.0)[0])  # noqa: E731
    previous = value(start)
    for s in offered:
        assert reference_metrics(graph, s, hw)["valid"]
        assert value(s) <= previous * (1 + 1e-12)
        previous = value(s)
    assert value(out) <= value(start) * (1 + 1e-12)
    if offered:
        assert np.array_equal(out, offered[-1])
    assert 0 <= cycles <= 3


def test_auto_rebalances_the_contiguous_line_under_latency_only():
    """A 400-node layered graph, K = 4, contiguous member only, no exact solver: under ``latency`` auto's schedule is
    no worse than the host rebalancing of the contiguous split run alone (its line starts there), which beats the split
    and its local search here; ``rebalance={'latency': 0}`` and ``paper`` run no rebalancing, nor does a graph below
    ``rebalance_min_nodes``."""
    graph = layered(400, 7)
    assert graph.num_nodes > POLISH_CLOSURE_MAX_NODES and not has_unique_order(graph)
    hw = make_hw(4)
    split = contiguous(graph, hw)
    host = rebalance_host(graph, hw, "latency", 1.0, split, 8, lambda: False)
    value = lambda s: float(objectives_np(graph, s[None], hw, "latency", 1.0)[0])  # noqa: E731
    assert value(host) < value(split) * (1 - 1e-6)
    options = dict(members=["contiguous"], exact="none", crossing_bound=False, progress=False, time_budget_s=30.0,
                   lattice_downsets=0, orders={"latency": []}, line_moves={})  # no bound: each call ends with its
    # line, not at the budget; no live-byte orders and the old first polish (200 moves): the line starts at the SPEC
    # split and the polish alone stops where the rebalancing goes on (tests/test_auto_orders.py covers the orders)
    result = run_solver("auto", graph, hw, "latency", **options)
    portfolio = result["info"]["portfolio"]
    assert "contiguous+rebalance" in portfolio
    got = reference_objective(graph, result["assignment"], hw, "latency")
    assert got <= value(host) * (1 + 1e-9)
    assert got <= portfolio["contiguous+ls"]["objective"] * (1 + 1e-9)
    assert got < value(split) * (1 - 1e-6)
    off = run_solver("auto", graph, hw, "latency", rebalance={"latency": 0}, **options)
    assert "contiguous+rebalance" not in off["info"]["portfolio"]
    # both through the float64 reference (auto's own objective is float32: equal schedules differ there by ~1e-8)
    assert got <= reference_objective(graph, off["assignment"], hw, "latency") * (1 + 1e-9)
    small = run_solver("auto", graph, hw, "latency", rebalance_min_nodes=graph.num_nodes + 1, **options)
    assert "contiguous+rebalance" not in small["info"]["portfolio"]
    paper = run_solver("auto", graph, hw, "paper", **options)
    assert "contiguous+rebalance" not in paper["info"]["portfolio"]


def test_auto_rejects_a_bad_rebalance_option():
    graph = random_graphs(1, seed=3, min_nodes=5, max_nodes=6)[0]
    with pytest.raises(ValueError, match="rebalance"):
        run_solver("auto", graph, make_hw(2), "latency", rebalance={"latency": -1}, progress=False)
    with pytest.raises(ValueError, match="rebalance"):
        run_solver("auto", graph, make_hw(2), "latency", rebalance={"speed": 1}, progress=False)
