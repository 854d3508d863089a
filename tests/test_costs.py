"""The jnp cost model equals the NumPy loop reference (SPEC section 2)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_hw, random_graphs, random_valid_schedule

from respect_jax.costs import evaluate, evaluate_assignment, hardware_from_dict, objective_lower_bound, objective_value
from respect_jax.graphs import Graph, graph_at, stack_graphs, to_position_order, unstack_positions
from respect_jax.reference import enumerate_valid_schedules, reference_metrics, reference_objective

FIELDS = (
    "mem_k",
    "in_k",
    "spill_k",
    "macs_k",
    "time_k",
    "comm_bytes",
    "peak_mem_bytes",
    "spill_bytes",
    "bottleneck_s",
    "latency_s",
)


def assert_close(jax_value, ref_value, what):
    np.testing.assert_allclose(
        np.asarray(jax_value, dtype=np.float64),
        np.asarray(ref_value, dtype=np.float64),
        rtol=2e-6,
        atol=1e-9,
        err_msg=what,
    )


@pytest.mark.parametrize("stages", [1, 3, 4, 6])
def test_batched_evaluator_matches_reference_on_1000_schedules(stages):
    hw = make_hw(stages)
    graphs = random_graphs(50, seed=stages, min_nodes=3, max_nodes=60)
    rng = np.random.default_rng(100 + stages)
    schedules = [[random_valid_schedule(g, stages, rng) for _ in range(20)] for g in graphs]
    batch = stack_graphs(graphs)  # one padded bucket for all 50 graphs
    singles = [jax.tree.map(np.asarray, graph_at(batch, i)) for i in range(len(graphs))]
    positions = np.stack([[to_position_order(singles[i], s) for s in per] for i, per in enumerate(schedules)])
    metrics = jax.jit(jax.vmap(jax.vmap(lambda g, s: evaluate(g, s, hw), in_axes=(None, 0))))(
        batch, jnp.asarray(positions)
    )
    metrics = jax.tree.map(np.asarray, metrics)
    checked = 0
    for i, graph in enumerate(graphs):
        for j, s in enumerate(schedules[i]):
            ref = reference_metrics(graph, s, hw)
            assert bool(metrics.valid[i, j]) and ref["valid"]
            for field in FIELDS:
                assert_close(getattr(metrics, field)[i, j], ref[field], f"{graph.name} schedule {j} {field}")
            checked += 1
    assert checked == 1000


def test_objectives_match_reference():
    hw = make_hw(4)
    rng = np.random.default_rng(0)
    for graph in random_graphs(20, seed=7):
        s = random_valid_schedule(graph, 4, rng)
        for objective in ("paper", "latency"):
            for lam in (0.0, 1.0, 3.5):
                got = evaluate_assignment(graph, s, hw, objective, lam)["objective"]
                assert_close(got, reference_objective(graph, s, hw, objective, lam), f"{objective} lam={lam}")


def test_invalid_schedules_are_flagged():
    hw = make_hw(3)
    rng = np.random.default_rng(1)
    flagged = 0
    for graph in random_graphs(30, seed=3, min_nodes=4):
        if graph.num_edges == 0:
            continue
        s = random_valid_schedule(graph, 3, rng)
        u, v = graph.edges[rng.integers(graph.num_edges)]
        s[u], s[v] = 2, 0  # this edge now goes backwards
        assert not reference_metrics(graph, s, hw)["valid"]
        assert not evaluate_assignment(graph, s, hw)["valid"]
        flagged += 1
        out_of_range = random_valid_schedule(graph, 3, rng)
        out_of_range[graph.num_nodes - 1] = 3
        assert not evaluate_assignment(graph, out_of_range, hw)["valid"]
    assert flagged >= 25


def test_hand_computed_example():
    # 0 -> 1 -> 2 and 0 -> 2; stages 0, 1, 1 on K=3
    graph = Graph(
        name="hand",
        params=[100, 200, 300],
        output_size=[10, 20, 30],
        macs=[1000, 0, 500],
        edges=[[0, 1], [1, 2], [0, 2]],
    )
    hw = make_hw(3, sram_bytes=250.0, macs_per_s=100.0, host_bw=10.0, link_bw=5.0, stage_overhead_s=1.0)
    m = evaluate_assignment(graph, [0, 1, 1], hw)
    assert m["mem_k"] == [100, 500, 0]
    # node 0: last=1 -> crosses boundary 1; node 1: last=1, no crossing; node 2 (output): last=2 -> crosses 2
    assert m["in_k"] == [0, 10, 30]
    assert m["comm_bytes"] == 10 + 30
    assert m["spill_k"] == [0, 250, 0]
    assert m["time_k"] == pytest.approx([1 + 10, 1 + 5 + 25 + 2, 1 + 6])
    assert m["objective"] == 500 + 40
    assert m["bottleneck_s"] == pytest.approx(33)
    assert m["latency_s"] == pytest.approx(11 + 33 + 7)


def test_padding_does_not_change_costs():
    hw = make_hw(4)
    graph = random_graphs(1, seed=11, min_nodes=20, max_nodes=20)[0]
    s = random_valid_schedule(graph, 4, np.random.default_rng(2))
    small = stack_graphs([graph])
    big = stack_graphs([graph], shape=(128, 1024, 16))
    values = []
    for batch in (small, big):
        g = graph_at(batch, 0)
        values.append(jax.jit(evaluate, static_argnums=2)(g, jnp.asarray(to_position_order(g, s)), hw))
    for field in FIELDS:
        np.testing.assert_allclose(getattr(values[0], field), getattr(values[1], field), rtol=1e-6)


def test_lower_bound_is_below_optimum():
    hw = make_hw(3)
    for graph in random_graphs(6, seed=5, min_nodes=3, max_nodes=7):
        g = graph_at(stack_graphs([graph]), 0)
        for objective in ("paper", "latency"):
            best = min(reference_objective(graph, s, hw, objective) for s in enumerate_valid_schedules(graph, 3))
            assert float(objective_lower_bound(g, hw, objective)) <= best * (1 + 1e-6)


def test_hardware_validation():
    good = dict(
        stages=4,
        sram_bytes=8e6,
        param_bytes=1,
        act_bytes=1,
        macs_per_s=1e9,
        host_bw=1e8,
        link_bw=1e8,
        stage_overhead_s=0,
    )
    assert hardware_from_dict(good).stages == 4
    for key, bad in [("stages", 0), ("stages", 2.5), ("link_bw", 0), ("sram_bytes", -1), ("host_bw", "fast")]:
        with pytest.raises(ValueError, match=f"hardware.{key}"):
            hardware_from_dict({**good, key: bad})
    with pytest.raises(ValueError, match="missing macs_per_s"):
        hardware_from_dict({k: v for k, v in good.items() if k != "macs_per_s"})
    with pytest.raises(ValueError, match="unknown objective"):
        objective_value(None, "speed")


def test_unstack_positions_roundtrip():
    graphs = random_graphs(4, seed=9)
    batch = stack_graphs(graphs)
    rng = np.random.default_rng(0)
    schedules = [random_valid_schedule(g, 4, rng) for g in graphs]
    positions = np.stack([to_position_order(graph_at(batch, i), s) for i, s in enumerate(schedules)])
    back = unstack_positions(batch, positions)
    for s, b in zip(schedules, back, strict=True):
        assert s.tolist() == b.tolist()


def test_throughput_is_null_when_nothing_takes_time():
    """An all-zero graph with no stage overhead has a 0 s bottleneck: throughput is None (JSON null, not Infinity)."""
    graph = Graph(name="zero", params=np.zeros(3), output_size=np.zeros(3), macs=np.zeros(3),
                  edges=np.array([[0, 1], [1, 2]], dtype=np.int64))
    metrics = evaluate_assignment(graph, np.array([0, 0, 1]), make_hw(2, stage_overhead_s=0.0), "latency", 1.0)
    assert metrics["bottleneck_s"] == 0.0 and metrics["throughput_per_s"] is None
    positive = evaluate_assignment(graph, np.array([0, 0, 1]), make_hw(2), "latency", 1.0)
    assert positive["throughput_per_s"] == pytest.approx(1.0 / positive["bottleneck_s"])
