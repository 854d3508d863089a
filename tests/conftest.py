"""Shared fixtures: small hardware settings and random graphs/schedules for the tests."""

from __future__ import annotations

import numpy as np
import pytest

from respect_jax.costs import Hardware
from respect_jax.graphs import GeneratorConfig, generate_numpy

# a setting where every term of the cost model matters for small synthetic graphs
SMALL_HW = dict(
    sram_bytes=600_000.0,
    param_bytes=1.0,
    act_bytes=1.0,
    macs_per_s=1e10,
    host_bw=4.7e8,
    link_bw=2.35e8,
    stage_overhead_s=2e-4,
)


def make_hw(stages: int = 4, **overrides) -> Hardware:
    return Hardware(stages=stages, **{**SMALL_HW, **overrides})


def random_valid_schedule(graph, k: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly-stepped random valid assignment (by id)."""
    s = np.zeros(graph.num_nodes, dtype=np.int64)
    preds = graph.predecessors()
    for v in graph.topological_order():
        low = max((s[u] for u in preds[v]), default=0)
        s[v] = rng.integers(low, k)
    return s


def random_graphs(count: int, seed: int, min_nodes: int = 5, max_nodes: int = 40) -> list:
    rng = np.random.default_rng(seed)
    graphs = []
    for i in range(count):
        mode = "respect" if i % 2 == 0 else "dnn"
        cfg = GeneratorConfig(mode=mode, min_nodes=min_nodes, max_nodes=max_nodes)
        graphs.append(generate_numpy(cfg, rng, name=f"{mode}{i}"))
    return graphs


@pytest.fixture
def hw4() -> Hardware:
    return make_hw(4)
