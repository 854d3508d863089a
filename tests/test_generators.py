"""The NumPy and JAX synthetic generators: valid DAGs, the promised structure, same distribution."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from respect_jax.graphs import GeneratorConfig, generate_dataset, graph_at, make_jax_generator, padded_to_graph

COUNT = 300


def per_graph_stats(graphs) -> dict[str, np.ndarray]:
    def indeg(g):
        return np.bincount(g.edges[:, 1], minlength=g.num_nodes)

    return {
        "nodes": np.array([g.num_nodes for g in graphs], float),
        "edges_per_node": np.array([g.num_edges / g.num_nodes for g in graphs]),
        "depth": np.array([g.depth().max() for g in graphs], float),
        "params": np.array([g.params.mean() for g in graphs]),
        "output_size": np.array([g.output_size.mean() for g in graphs]),
        "macs": np.array([g.macs.mean() for g in graphs]),
        "source_fraction": np.array([(indeg(g) == 0).mean() for g in graphs]),
        "max_in_degree": np.array([indeg(g).max() for g in graphs], float),
    }


def jax_graphs(cfg, count, seed):
    batch = jax.jit(jax.vmap(make_jax_generator(cfg)))(jax.random.split(jax.random.key(seed), count))
    batch = jax.tree.map(np.asarray, batch)
    return [padded_to_graph(graph_at(batch, i), name=f"j{i}") for i in range(count)]


CONFIGS = [
    GeneratorConfig(mode="respect", min_nodes=30, max_nodes=30),
    GeneratorConfig(mode="respect", min_nodes=12, max_nodes=50),
    GeneratorConfig(mode="dnn", min_nodes=40, max_nodes=40),
    GeneratorConfig(mode="dnn", min_nodes=20, max_nodes=60),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.mode}-{c.min_nodes}-{c.max_nodes}")
def test_numpy_and_jax_generators_agree_in_distribution(cfg):
    """Every per-graph statistic has the same mean in both generators within 4 standard errors."""
    a = per_graph_stats(generate_dataset(cfg, COUNT, seed=0))
    b = per_graph_stats(jax_graphs(cfg, COUNT, seed=0))
    for name in a:
        se = np.sqrt(a[name].var() / COUNT + b[name].var() / COUNT)
        diff = abs(a[name].mean() - b[name].mean())
        assert diff <= 4 * se + 1e-9 * abs(a[name].mean()), (
            f"{name}: numpy {a[name].mean():.4g} vs jax {b[name].mean():.4g} (se {se:.3g})"
        )


@pytest.mark.parametrize("source", ["numpy", "jax"])
def test_respect_mode_structure(source):
    cfg = GeneratorConfig(mode="respect", min_nodes=30, max_nodes=30)
    graphs = generate_dataset(cfg, 100, seed=1) if source == "numpy" else jax_graphs(cfg, 100, seed=1)
    for g in graphs:
        assert g.num_nodes == 30
        assert np.array_equal(g.topological_order(), np.arange(30)), "ids are in SPEC order"
        depth = g.depth()
        levels = depth.max() + 1
        assert 10 <= levels <= 25  # RESPECT: 10-25 levels for 30 nodes
        preds = g.predecessors()
        for v in range(30):
            assert len(preds[v]) <= 6
            if depth[v] > 0:
                assert any(depth[u] == depth[v] - 1 for u in preds[v])
        assert np.all((g.params >= 0) & (g.params < 5 * cfg.param_scale))


@pytest.mark.parametrize("source", ["numpy", "jax"])
def test_dnn_mode_structure(source):
    cfg = GeneratorConfig(mode="dnn", min_nodes=60, max_nodes=60)
    graphs = generate_dataset(cfg, 50, seed=2) if source == "numpy" else jax_graphs(cfg, 50, seed=2)
    for g in graphs:
        indeg = np.bincount(g.edges[:, 1], minlength=g.num_nodes)
        outdeg = np.bincount(g.edges[:, 0], minlength=g.num_nodes)
        assert (indeg == 0).sum() == 1 and (outdeg == 0).sum() == 1, "one input, one output"
        assert indeg.max() <= 3
        assert np.array_equal(g.topological_order(), np.arange(g.num_nodes))
        assert g.params[0] == 0 and g.macs[0] == 0
        assert g.params.sum() > 0 and np.all(g.output_size > 0)


def test_jax_generator_is_deterministic_and_shape_stable():
    cfg = GeneratorConfig(mode="respect", min_nodes=10, max_nodes=40)
    gen = jax.jit(make_jax_generator(cfg))
    a, b = gen(jax.random.key(5)), gen(jax.random.key(5))
    jax.tree.map(np.testing.assert_array_equal, a, b)
    assert a.params.shape == (64,) and a.preds.shape == (64, 8) and a.senders.shape == (512,)
    assert cfg.padded_shape == (64, 512, 8)


def test_bad_generator_config():
    with pytest.raises(ValueError, match="graphs.mode"):
        GeneratorConfig(mode="tree")
    with pytest.raises(ValueError, match="min_nodes <= max_nodes"):
        GeneratorConfig(min_nodes=10, max_nodes=5)
