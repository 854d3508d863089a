"""``solver=auto`` scores in float64 NumPy: the same objective as the shared JAX evaluator, and a first incumbent
that waits for no JAX compilation."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import make_hw, random_graphs, random_valid_schedule

import respect_jax.costs as costs
from respect_jax.costs import evaluate_assignment, hardware_from_dict
from respect_jax.graphs.graph import load_graph
from respect_jax.reference import reference_metrics, reference_objective
from respect_jax.resources import conf_path, data_path
from respect_jax.solvers import get_solver, run_solver
from respect_jax.solvers.numpy_eval import objective_np, stage_loads


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_numpy_objective_equals_the_jax_evaluator_and_the_loop_reference(k):
    rng = np.random.default_rng(3)
    hw = make_hw(k, sram_bytes=2_000.0)  # a small SRAM: spill counts in the latency
    for graph in random_graphs(6, seed=k, min_nodes=5, max_nodes=60):
        for _ in range(4):
            s = random_valid_schedule(graph, k, rng)
            ref = reference_metrics(graph, s, hw)
            loads = stage_loads(graph, s, hw)
            assert loads["valid"]
            for key in ("mem_k", "macs_k", "in_k", "time_k"):
                np.testing.assert_allclose(loads[key], np.asarray(ref[key], np.float64), rtol=1e-12, atol=1e-15)
            assert loads["comm_bytes"] == pytest.approx(ref["comm_bytes"], rel=1e-12)
            for objective in ("paper", "latency"):
                value = objective_np(graph, s, hw, objective, lam=0.7)
                assert value == pytest.approx(reference_objective(graph, s, hw, objective, lam=0.7), rel=1e-12)
                jax_value = evaluate_assignment(graph, s, hw, objective, lam=0.7)["objective"]
                assert value == pytest.approx(jax_value, rel=2e-6)  # float32 there


def test_numpy_objective_rejects_an_invalid_schedule():
    graph = random_graphs(1, seed=1, min_nodes=10, max_nodes=10)[0]
    hw = make_hw(3)
    backwards = np.zeros(graph.num_nodes, np.int64)
    u, v = graph.edges[0]
    backwards[u] = 2
    for bad in (backwards, np.full(graph.num_nodes, 3), np.zeros(graph.num_nodes - 1, np.int64)):
        with pytest.raises(ValueError):
            objective_np(graph, bad, hw, "paper")
    with pytest.raises(ValueError, match="unknown objective"):
        objective_np(graph, np.zeros(graph.num_nodes, np.int64), hw, "speed")


def _coral(k: int):
    import yaml

    base = yaml.safe_load(conf_path("hardware", "coral_usb.yaml").read_text())
    return hardware_from_dict({**base, "stages": k})


def test_auto_first_incumbent_needs_no_jax_compilation(monkeypatch):
    """With the JAX evaluator made unusable, auto still gets its first incumbent (the contiguous split of a bundled
    model) within a fraction of a second, and it scores what the shared evaluator scores."""
    graph = load_graph(data_path("models", "densenet121.json"))
    hw = _coral(4)

    def no_jax(*args, **kwargs):
        raise AssertionError("auto called the JAX evaluator before its first incumbent")

    monkeypatch.setattr(costs, "_evaluate_compiled", no_jax)
    options = dict(members=["contiguous"], exact="none", polish_moves=0, crossing_bound=False, progress=False)
    start = time.perf_counter()
    result = get_solver("auto")(graph, hw, "paper", 1.0, time_budget_s=5.0, **options)
    assert time.perf_counter() - start < 1.0
    assert result.info["first_incumbent_s"] < 0.5
    monkeypatch.undo()
    value = result.info["portfolio"]["contiguous"]["objective"]
    assert value == pytest.approx(evaluate_assignment(graph, result.assignment, hw, "paper")["objective"], rel=2e-6)
    assert value == pytest.approx(run_solver("contiguous", graph, hw, "paper")["objective"], rel=2e-6)
