"""``solver=auto``'s live-byte orders (respect_jax/solvers/orders.py) and the contiguous line's long first polish
(``line_moves``) against a from-scratch reference of the list order, brute-force splits and the loop evaluator."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from conftest import make_hw, random_graphs
from test_auto_rebalance import layered

from respect_jax.graphs.graph import has_unique_order
from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.auto import LINE_CHUNK, polish_until, restart_line
from respect_jax.solvers.orders import best_live_split, live_order, live_splits


def live_order_reference(graph, sink_weight):
    """The list order recomputed from its definition at every step: among the nodes whose predecessors are all
    placed, the least (w(u) * out_u - the outputs of the predecessors whose other successors are all placed, depth,
    id), w = sink_weight for a sink and 1 otherwise."""
    n = graph.num_nodes
    preds = [[] for _ in range(n)]
    succs = [[] for _ in range(n)]
    for u, v in graph.edges.tolist():
        preds[v].append(u)
        succs[u].append(v)
    out, depth = graph.output_size.astype(float), graph.depth()
    placed: set[int] = set()
    order = []
    while len(order) < n:
        best = None
        for u in range(n):
            if u in placed or any(p not in placed for p in preds[u]):
                continue
            freed = sum(out[p] for p in set(preds[u]) if all(w in placed or w == u for w in succs[p]))
            key = (out[u] * (1.0 if succs[u] else sink_weight) - freed, depth[u], u)
            best = key if best is None or key < best else best
        order.append(best[2])
        placed.add(best[2])
    return order


def test_live_order_is_the_list_order_of_its_definition_and_topological():
    graphs = random_graphs(12, seed=5, min_nodes=5, max_nodes=40) + [layered(120, 3, 1.2), layered(120, 4)]
    for graph in graphs:
        for weight in (1.0, 3.0):
            order = live_order(graph, weight)
            assert order.tolist() == live_order_reference(graph, weight)
            pos = np.empty(graph.num_nodes, np.int64)
            pos[order] = np.arange(graph.num_nodes)
            assert sorted(order.tolist()) == list(range(graph.num_nodes))
            assert all(pos[u] < pos[v] for u, v in graph.edges.tolist())


def brute_split(graph, hw, order):
    """The least latency over every split of ``order`` into K contiguous (possibly empty) stages, by the loop
    evaluator."""
    n, k = graph.num_nodes, hw.stages
    best = np.inf
    for cuts in itertools.combinations_with_replacement(range(n + 1), k - 1):
        bounds = (0, *cuts, n)
        a = np.empty(n, np.int64)
        for s in range(k):
            a[order[bounds[s]:bounds[s + 1]]] = s
        best = min(best, reference_objective(graph, a, hw, "latency"))
    return best


def test_best_live_split_is_the_best_exact_split_of_its_orders():
    hw = make_hw(3)
    weights = (1.0, 3.0)
    for graph in random_graphs(6, seed=9, min_nodes=5, max_nodes=9):
        split, value, weight = best_live_split(graph, hw, "latency", 1.0, weights)
        expected = min(brute_split(graph, hw, live_order(graph, w)) for w in weights)
        assert value == pytest.approx(expected, rel=1e-9)
        assert reference_objective(graph, split, hw, "latency") == pytest.approx(value, rel=1e-9)
        assert weight in weights
    assert best_live_split(graph, hw, "latency", 1.0, ())[0] is None


def test_auto_starts_the_contiguous_line_at_the_best_live_split_with_its_own_moves():
    """A 400-node sparse layered graph, latency, K = 4, contiguous member only, no exact solver, no rebalancing: the
    live-byte split beats the SPEC one here; auto reports it (``portfolio['orders']``), and its line's polish is
    :func:`polish_until` from it with ``line_moves`` moves in calls of ``LINE_CHUNK``; the result is never worse
    than either split (the hull order off: tests/test_auto_hull_order.py). No orders under ``paper`` (default), with
    ``orders={'latency': []}`` or below ``orders_min_nodes``."""
    graph, hw = layered(400, 11, 1.2), make_hw(4)
    assert not has_unique_order(graph)
    split, value, _ = best_live_split(graph, hw, "latency", 1.0)
    options = dict(members=["contiguous"], exact="none", crossing_bound=False, progress=False, time_budget_s=60.0,
                   lattice_downsets=0, rebalance={"latency": 0}, line_moves={"latency": 30},
                   hull_order={"latency": False})
    result = run_solver("auto", graph, hw, "latency", **options)
    portfolio = result["info"]["portfolio"]
    assert portfolio["orders"]["objective"] == pytest.approx(value, rel=1e-12)
    assert value < portfolio["contiguous"]["objective"] * (1 - 1e-3)
    polished = polish_until(graph, hw, "latency", 1.0, split, 30, lambda: False, LINE_CHUNK)
    assert portfolio["contiguous+ls"]["objective"] == pytest.approx(
        reference_objective(graph, polished, hw, "latency"), rel=1e-9)
    got = reference_objective(graph, result["assignment"], hw, "latency")
    assert got <= value * (1 + 1e-9) and got <= portfolio["contiguous"]["objective"] * (1 + 1e-9)
    off = run_solver("auto", graph, hw, "latency", **{**options, "orders": {"latency": []}})
    assert "orders" not in off["info"]["portfolio"]
    small = run_solver("auto", graph, hw, "latency", **{**options, "orders_min_nodes": graph.num_nodes + 1})
    assert "orders" not in small["info"]["portfolio"]
    paper = run_solver("auto", graph, hw, "paper", **options)
    assert "orders" not in paper["info"]["portfolio"]


@pytest.mark.parametrize("options, message", [({"orders": {"latency": [0.0]}}, "orders"),
                                              ({"orders": {"speed": [1.0]}}, "orders"),
                                              ({"line_moves": {"latency": -1}}, "line_moves")])
def test_auto_rejects_bad_order_options(options, message):
    graph = random_graphs(1, seed=3, min_nodes=5, max_nodes=6)[0]
    with pytest.raises(ValueError, match=message):
        run_solver("auto", graph, make_hw(2), "latency", progress=False, **options)


@pytest.mark.slow
def test_live_orders_at_10k_nodes_are_cheap_and_auto_keeps_its_budget():
    """10,000-node sparse layered graph (bench_scale's size, another seed), latency, K = 4: the three live-byte
    splits take < 5 s together on the 2-core CPU, and auto (10 s) returns by its budget (+ grace) a schedule no worse
    than its ``orders`` entry, itself no worse than the best live-byte split (the MACs-first and hull splits join it
    since sessions 32-33: here the entry is below it)."""
    graph, hw = layered(10000, 21, 1.2), make_hw(4)
    t0 = time.perf_counter()
    _, value, _ = best_live_split(graph, hw, "latency", 1.0)
    assert time.perf_counter() - t0 < 5.0
    result = run_solver("auto", graph, hw, "latency", time_budget_s=10.0, progress=False)
    info = result["info"]
    assert info["elapsed_s"] < 10.0 + 2.0
    entry = info["portfolio"]["orders"]["objective"]
    assert entry <= value * (1 + 1e-12)
    assert reference_objective(graph, result["assignment"], hw, "latency") <= entry * (1 + 1e-9)


def test_restart_line_polishes_and_rebalances_each_start_until_told():
    """``restart_line`` on a 400-node layered graph (latency, K = 4) from the SPEC split and two live-byte splits:
    each start polished (:func:`polish_until`) and its schedule offered, so the best offered is no worse than each
    start's polish run alone, and every offered schedule is valid by the loop evaluator; a stop at once runs none."""
    graph, hw = layered(400, 12, 1.2), make_hw(4)
    order = graph.topological_order()
    from respect_jax.solvers.partitioners import contiguous_assignment, contiguous_search

    cuts, _, _ = contiguous_search(graph, hw, "latency", 1.0, order)
    starts = [np.asarray(contiguous_assignment(graph, cuts, order), np.int64)]
    starts += [a for _, a, _ in live_splits(graph, hw, "latency", 1.0, (2.0, 6.0))]
    offered = []
    count = restart_line(graph, hw, "latency", 1.0, [lambda a=a: a for a in starts], 50, LINE_CHUNK, 20, 2,
                         lambda: False, offered.append)
    assert count == 3
    values = [reference_objective(graph, a, hw, "latency") for a in offered]
    for a in starts:
        alone = polish_until(graph, hw, "latency", 1.0, a, 50, lambda: False, LINE_CHUNK)
        assert min(values) <= reference_objective(graph, alone, hw, "latency") * (1 + 1e-9)
    none = []
    assert restart_line(graph, hw, "latency", 1.0, [lambda: starts[0]], 50, LINE_CHUNK, 20, 2, lambda: True,
                        none.append) == 0
    assert none == []


def test_auto_restarts_the_rebalanced_line_and_keeps_the_best():
    """A 400-node sparse layered graph, latency, K = 4, contiguous member only, no exact solver, no bound: after its
    line auto restarts it once (``line_restarts={'latency': 1}``: the SPEC split, the only other split with one
    sink weight), and its schedule is no worse than the restart's; ``line_restarts={'latency': 0}``: none."""
    graph, hw = layered(400, 13, 1.2), make_hw(4)
    options = dict(members=["contiguous"], exact="none", crossing_bound=False, progress=False, time_budget_s=60.0,
                   lattice_downsets=0, orders={"latency": [3.0]}, line_moves={"latency": 50})
    result = run_solver("auto", graph, hw, "latency", line_restarts={"latency": 1}, **options)
    entry = result["info"]["portfolio"]["contiguous+restart"]
    assert entry["restarts"] == 1
    assert reference_objective(graph, result["assignment"], hw, "latency") <= entry["objective"] * (1 + 1e-9)
    off = run_solver("auto", graph, hw, "latency", line_restarts={"latency": 0}, **options)
    assert "contiguous+restart" not in off["info"]["portfolio"]


def test_polish_until_offers_each_better_chunk_as_it_comes():
    """The line's first polish (:func:`polish_until`, ``offer``) on a 400-node layered graph (latency, K = 4) from
    its best live-byte split: every call of moves that improves is offered at once (strictly better each time, by the
    loop evaluator), the last offer is the returned schedule, and a stop after the first offer returns that one. auto
    relies on it: a first polish still running at the deadline keeps its schedules so far."""
    graph, hw = layered(400, 11, 1.2), make_hw(4)
    split, value, _ = best_live_split(graph, hw, "latency", 1.0)
    offered = []
    polished = polish_until(graph, hw, "latency", 1.0, split, 40, lambda: False, 1, offered.append)
    values = [reference_objective(graph, a, hw, "latency") for a in offered]
    assert len(offered) >= 2
    assert all(b < a for a, b in zip([value, *values], values, strict=False))
    assert np.array_equal(offered[-1], polished)
    first = []
    stopped = polish_until(graph, hw, "latency", 1.0, split, 40, lambda: bool(first), 1, first.append)
    assert len(first) == 1 and np.array_equal(stopped, first[0]) and np.array_equal(first[0], offered[0])


def test_the_line_runs_when_the_orders_end_past_fast_share(monkeypatch):
    """The live-byte orders slowed past ``fast_share`` of the budget (as at 10k nodes under load): the contiguous line
    still runs from the best split (its polish is called, here a stand-in that returns its start), while a fast member
    started after fast_share is skipped for it."""
    import respect_jax.solvers.auto as auto

    graph, hw = layered(400, 11, 1.2), make_hw(4)
    real, calls = auto.live_splits, []

    def slow_splits(*args, **kwargs):
        time.sleep(1.6)
        return real(*args, **kwargs)

    def polish_until(graph, hw, objective, lam, assignment, *args, **kwargs):
        calls.append(time.perf_counter())
        return np.asarray(assignment, np.int64)

    monkeypatch.setattr(auto, "live_splits", slow_splits)
    monkeypatch.setattr(auto, "polish_until", polish_until)
    t0 = time.perf_counter()
    result = auto.solve_auto(graph, hw, "latency", members=["contiguous", "gumbel"], exact="none", crossing_bound=False,
                             progress=False, time_budget_s=4.0, fast_share=0.25, lattice_downsets=0,
                             rebalance={"latency": 0}, line_restarts={"latency": 0}, hull_order={"latency": False})
    portfolio = result.info["portfolio"]
    assert calls and calls[0] - t0 > 0.25 * 4.0
    assert portfolio["contiguous+ls"]["objective"] == pytest.approx(portfolio["orders"]["objective"], rel=1e-12)
    assert "fast_share" in portfolio["gumbel"]["skipped"]
