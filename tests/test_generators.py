"""The NumPy and JAX synthetic generators: valid DAGs, the promised structure, same distribution."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest
import yaml

from respect_jax.graphs import (
    GeneratorConfig,
    generate_dataset,
    generate_numpy,
    graph_at,
    graph_from_dict,
    load_graph,
    make_jax_generator,
    padded_to_graph,
    save_graph,
)

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


# ----------------------------------------------------------------------------- mode layered (ICML'24-style)

CONF_GRAPHS = Path(__file__).resolve().parents[1] / "conf" / "graphs"
LAYERED_PRESETS = ["layered1k", "layered5k", "layered10k"]


def layered_cfg(nodes: int, edges_per_node: float, **overrides) -> GeneratorConfig:
    values = yaml.safe_load((CONF_GRAPHS / "layered1k.yaml").read_text())
    values.update(min_nodes=nodes, max_nodes=nodes, edges_per_node=edges_per_node, **overrides)
    return GeneratorConfig(**values)


@pytest.mark.parametrize("family, edges_per_node", [("dense", 2.9), ("sparse", 1.2)])
def test_layered_mode_statistics(family, edges_per_node):
    """ICML'24 benchmark statistics (NOTES.md): 8-19 levels, 20-33 % sources, ~2.9 / ~1.2 edges per node, integer
    node weights 0-4,999 with most nodes 0; a valid DAG whose ids are in SPEC order."""
    graphs = generate_dataset(layered_cfg(1000, edges_per_node), 6, seed=3)
    stats = per_graph_stats(graphs)
    assert np.all((stats["depth"] + 1 >= 8) & (stats["depth"] + 1 <= 19))
    assert np.all((stats["source_fraction"] >= 0.20) & (stats["source_fraction"] <= 0.33 + 1e-3))
    assert abs(stats["edges_per_node"].mean() - edges_per_node) < 0.1 * edges_per_node
    for g in graphs:
        assert g.num_nodes == 1000
        assert np.array_equal(g.topological_order(), np.arange(g.num_nodes)), "ids are in SPEC order"
        assert graph_from_dict(g.to_dict()).num_edges == g.num_edges  # the loader's validation (DAG, ids, counts)
        depth = g.depth()
        assert np.all(depth[g.edges[:, 1]] > depth[g.edges[:, 0]])
        assert np.array_equal(depth[1:] >= depth[:-1], np.ones(g.num_nodes - 1, bool)), "levels in id order"
        assert 0 <= g.params.min() and g.params.max() < 5000 and (g.params == 0).mean() > 0.6
        assert g.output_size.max() < 5000 and np.array_equal(g.macs, g.params * g.output_size)
        indeg = np.bincount(g.edges[:, 1], minlength=g.num_nodes)
        assert indeg.max() <= 12  # max_preds


def test_layered_mode_is_deterministic_by_seed_and_writes_json(tmp_path):
    cfg = layered_cfg(500, 1.2)
    a, b = generate_dataset(cfg, 2, seed=7), generate_dataset(cfg, 2, seed=7)
    other = generate_dataset(cfg, 1, seed=8)[0]
    for ga, gb in zip(a, b, strict=True):
        assert np.array_equal(ga.edges, gb.edges) and np.array_equal(ga.params, gb.params)
        assert np.array_equal(ga.output_size, gb.output_size)
    assert not np.array_equal(a[0].params, other.params)
    save_graph(a[0], tmp_path / "g.json")
    loaded = load_graph(tmp_path / "g.json")
    assert np.array_equal(loaded.edges, a[0].edges) and np.array_equal(loaded.macs, a[0].macs)


@pytest.mark.parametrize("name", LAYERED_PRESETS)
def test_layered_presets(name):
    """Each preset is a layered GeneratorConfig (the dense family) the CLI accepts, also with the sparse family's
    edges_per_node override; the 1k one is drawn and checked here."""
    from omegaconf import OmegaConf

    from respect_jax.cli.label import generator_from_cfg

    node = OmegaConf.load(CONF_GRAPHS / f"{name}.yaml")
    cfg = generator_from_cfg(node)
    size = int(name.removeprefix("layered").removesuffix("k")) * 1000
    assert cfg.mode == "layered" and cfg.min_nodes == cfg.max_nodes == size and cfg.edges_per_node == 2.9
    node.edges_per_node = 1.2
    assert generator_from_cfg(node).edges_per_node == 1.2
    if size == 1000:
        g = generate_numpy(cfg, np.random.default_rng(0))
        assert 8 <= g.depth().max() + 1 <= 19


def test_layered_mode_has_no_jax_generator_and_checks_its_fields():
    with pytest.raises(ValueError, match="NumPy generator only"):
        make_jax_generator(layered_cfg(100, 2.9))
    with pytest.raises(ValueError, match="source_frac"):
        layered_cfg(100, 2.9, min_source_frac=0.5, max_source_frac=0.4)
    with pytest.raises(ValueError, match="edges_per_node"):
        layered_cfg(100, -1.0)
    with pytest.raises(ValueError, match="p_params"):
        layered_cfg(100, 2.9, p_params=1.5)


def test_layered_mode_small_graphs_are_valid():
    """Tiny sizes (fewer nodes than levels, one node) still give valid graphs with the promised structure."""
    for n in (1, 2, 3, 5, 12):
        for g in generate_dataset(layered_cfg(n, 2.9), 5, seed=n):
            assert g.num_nodes == n
            assert np.array_equal(g.topological_order(), np.arange(n))
            assert (np.bincount(g.edges[:, 1], minlength=n) == 0).sum() >= 1
