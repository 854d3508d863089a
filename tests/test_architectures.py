"""The synthetic architecture generator (mode ``arch``): real layer formulas, valid single-input /
single-output DAGs in range, statistics near the real models of data/models, NumPy and JAX twins
that build the same graph from the same program and agree in distribution, fixed JAX shapes."""

from __future__ import annotations

import glob
from pathlib import Path

import jax
import numpy as np
import pytest

from respect_jax.graphs import GeneratorConfig, generate_dataset, generate_numpy, graph_at, load_graph
from respect_jax.graphs import architectures as arch
from respect_jax.graphs.generators import make_jax_generator, padded_to_graph, relabel_spec_order

MODELS = sorted(glob.glob(str(Path(__file__).resolve().parents[1] / "data" / "models" / "*.json")))


# ---------------------------------------------------------------------------- statistics


def graph_stats(g) -> dict[str, float]:
    """Per-graph statistics: degree-histogram shares (0, 1, 2, >= 3), zero-parameter share, 10/50/90 %
    quantiles of log10 params (nodes with params) and log10 output size, longest-path share."""
    n = g.num_nodes
    stats = {}
    for side, col in (("in", 1), ("out", 0)):
        hist = np.bincount(np.minimum(np.bincount(g.edges[:, col], minlength=n), 3), minlength=4) / n
        stats.update({f"{side}_deg{d}": hist[d] for d in range(4)})
    stats["zero_params"] = float(np.mean(g.params == 0))
    for name, values in (("params", g.params[g.params > 0]), ("output", g.output_size[g.output_size > 0])):
        for q, v in zip((10, 50, 90), np.percentile(np.log10(values), [10, 50, 90]), strict=True):
            stats[f"log_{name}_q{q}"] = v
    stats["longest_path_share"] = (g.depth().max() + 1) / n
    return stats


def stats_table(graphs) -> dict[str, np.ndarray]:
    rows = [graph_stats(g) for g in graphs]
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


# stated tolerances: |mean over generated graphs - mean over the 17 real models|
TOLERANCES = {
    **{f"{s}_deg{d}": 0.03 for s in ("in", "out") for d in range(4)},  # shares of nodes
    "zero_params": 0.05,  # share of nodes
    # decades; the real models' own spread (std over the 17) is 0.5-0.8 for params, 0.3-0.5 for outputs.
    # Params run ~0.4 decades low: the generator draws every family alike (mobile, NAS, transformer
    # blocks are narrower), the real set is half full-width ResNets
    **{f"log_params_q{q}": 0.6 for q in (10, 50, 90)},
    **{f"log_output_q{q}": 0.4 for q in (10, 50, 90)},
    "longest_path_share": 0.08,
}


@pytest.fixture(scope="module")
def real_graphs():
    assert len(MODELS) == 17
    return [load_graph(p) for p in MODELS]


def test_statistics_match_the_real_models(real_graphs):
    """Generated architectures over the real models' node range hold every statistic of
    :data:`TOLERANCES` within its tolerance of the real models' mean (computed here, not stored)."""
    sizes = [g.num_nodes for g in real_graphs]
    cfg = GeneratorConfig(mode="arch", min_nodes=min(sizes), max_nodes=max(sizes))
    graphs = generate_dataset(cfg, 120, seed=0)
    counts = np.array([g.num_nodes for g in graphs])
    assert counts.min() >= min(sizes) and counts.max() <= max(sizes)
    assert counts.min() <= np.percentile(sizes, 10) and counts.max() >= np.percentile(sizes, 90)
    real, gen = stats_table(real_graphs), stats_table(graphs)
    bad = [
        f"{k}: generated {gen[k].mean():.3f} vs real {real[k].mean():.3f} (tolerance {tol})"
        for k, tol in TOLERANCES.items()
        if abs(gen[k].mean() - real[k].mean()) > tol
    ]
    assert not bad, "; ".join(bad)


# ---------------------------------------------------------------------------- layer formulas


@pytest.mark.parametrize(
    "model, node, kind, k, h, cin, cout, bias",
    [
        ("resnet50", "conv1_pad", "pad", 6, 224, 3, 3, 0),
        ("resnet50", "conv1_conv", "conv", 7, 112, 3, 64, 1),
        ("resnet50", "conv1_bn", "bn", 1, 112, 64, 64, 0),
        ("resnet50", "pool1_pool", "pool", 3, 56, 64, 64, 0),
        ("resnet50", "conv2_block1_2_conv", "conv", 3, 56, 64, 64, 1),
        ("resnet50", "conv2_block1_add", "eltwise", 1, 56, 256, 256, 0),
        ("resnet50", "conv5_block3_3_conv", "conv", 1, 7, 512, 2048, 1),
        ("mobilenetv2", "block_1_pad", "pad", 1, 112, 96, 96, 0),
        ("mobilenetv2", "block_1_depthwise", "dwconv", 3, 56, 96, 96, 0),
        ("mobilenetv2", "block_1_project", "conv", 1, 56, 96, 24, 0),
        ("xception", "block2_sepconv1", "sepconv", 3, 147, 64, 128, 0),
        ("densenet121", "pool2_pool", "pool", 2, 28, 128, 128, 0),
        ("densenet121", "conv2_block1_concat", "concat", 1, 56, 96, 96, 0),
    ],
)
def test_layer_formulas_reproduce_the_exported_keras_layers(model, node, kind, k, h, cin, cout, bias):
    """params / output_size / MACs of a layer equal the Keras exporter's numbers for that layer."""
    g = load_graph(Path(MODELS[0]).parent / f"{model}.json")
    i = g.node_names.index(node)
    params, out, macs = arch.layer_counts(np.array(arch.K[kind]), k, h, cin, cout, bias)
    assert (params, out, macs) == (g.params[i], g.output_size[i], g.macs[i])


# ---------------------------------------------------------------------------- templates and graphs


def test_templates_are_well_formed():
    """Every node reads earlier nodes or the block inputs, every node but the last feeds a later
    one (the last is the block's output), in-degree fits the predecessor slots."""
    for name, tpl in arch.TEMPLATES.items():
        consumed = set()
        for j, (op, preds, *_rest) in enumerate(tpl.nodes):
            assert op in arch.OP_KIND, (name, op)
            assert len(preds) <= arch.PRED_SLOTS
            assert all(p in (arch.X, arch.XX) or 0 <= p < j for p in preds), (name, j, preds)
            assert (op == "InputLayer") == (len(preds) == 0), (name, j)
            consumed.update(p for p in preds if p >= 0)
        assert consumed == set(range(len(tpl.nodes) - 1)), f"{name}: a node other than the last has no consumer"
    for fam in arch.FAMILIES:
        assert f"{fam.name}_rep" in arch.TEMPLATES and arch._down_name(fam) in arch.TEMPLATES


@pytest.mark.parametrize("lo, hi", [(8, 8), (20, 60), (100, 128), (300, 300)])
def test_numpy_graphs_are_valid_single_input_output_dags_in_range(lo, hi):
    cfg = GeneratorConfig(mode="arch", min_nodes=lo, max_nodes=hi)
    for g in generate_dataset(cfg, 25, seed=lo):
        assert lo <= g.num_nodes <= hi
        indeg = np.bincount(g.edges[:, 1], minlength=g.num_nodes)
        outdeg = np.bincount(g.edges[:, 0], minlength=g.num_nodes)
        assert (indeg == 0).sum() == 1 and (outdeg == 0).sum() == 1, "one input, one output"
        assert g.ops[0] == "InputLayer" and g.params[0] == 0 and g.macs[0] == 0
        assert indeg.max() <= arch.PRED_SLOTS
        assert np.array_equal(g.topological_order(), np.arange(g.num_nodes)), "SPEC order"
        assert np.all(g.output_size > 0) and g.params.sum() > 0
        zero_ops = {g.ops[i] for i in np.flatnonzero(g.params == 0)}
        assert zero_ops <= {"InputLayer", "Activation", "ReLU", "Add", "Multiply", "CustomScaleLayer", "Concatenate",
                            "MaxPooling2D", "AveragePooling2D", "ZeroPadding2D", "GlobalAveragePooling2D", "Reshape",
                            "AttentionScores", "Softmax", "AttentionApply"}  # fmt: skip


def test_every_family_appears_with_its_motifs():
    """Each family is drawn, and a graph of one family carries that family's characteristic layers."""
    marks = {
        "plain": "Conv2D", "basic": "Add", "bottleneck": "Add", "preact": "ZeroPadding2D",
        "dwsep": "DepthwiseConv2D", "mbconv": "DepthwiseConv2D", "mbconv_se": "Multiply",
        "xception": "SeparableConv2D", "inception": "Concatenate", "incres": "CustomScaleLayer",
        "dense": "Concatenate", "nas0": "SeparableConv2D", "nas1": "SeparableConv2D", "nas2": "SeparableConv2D",
        "transformer": "AttentionScores",
    }  # fmt: skip
    rng = np.random.default_rng(0)
    def drawn(nodes):
        u = rng.random((400, arch.NUM_UNIFORMS))
        return {int(arch.draw_program(x, nodes, nodes, arch.ArchConfig())["family"]) for x in u}

    assert drawn(60) == set(range(len(arch.FAMILIES)))
    assert drawn(300) == set(range(1, len(arch.FAMILIES))), "plain chains only up to plain_max_nodes"
    for f, fam in enumerate(arch.FAMILIES):
        weights = tuple(float(i == f) for i in range(len(arch.FAMILIES)))
        g = arch.generate_arch_numpy(150, 150, rng, arch=arch.ArchConfig(family_weights=weights, p_hybrid=0.0))
        assert g.num_nodes == 150 and marks[fam.name] in g.ops, fam.name


def test_widths_grow_as_resolution_shrinks():
    """Along the backbone, conv output channels per node never shrink when the resolution halves
    (except dense transitions), and the last stage is wider than the first."""
    rng = np.random.default_rng(1)
    weights = tuple(float(f.name == "bottleneck") for f in arch.FAMILIES)
    for _ in range(10):
        cfg = arch.ArchConfig(family_weights=weights, p_hybrid=0.0)
        prog = arch.draw_program(rng.random(arch.NUM_UNIFORMS), 200, 200, cfg)
        live = prog["type"] != arch.TYPE["empty"]
        body = live & np.isin(prog["type"], [arch.TYPE["bottleneck_rep"], arch.TYPE["bottleneck_down"]])
        h, c = prog["h_out"][body], prog["c_out"][body]
        assert np.all(np.diff(h) <= 0) and np.all(np.diff(c) >= 0)
        assert c[-1] > c[0] and h[-1] < h[0]


def test_numpy_generator_is_deterministic_by_seed():
    cfg = GeneratorConfig(mode="arch", min_nodes=30, max_nodes=200)
    a, b, c = (generate_dataset(cfg, 5, seed=s) for s in (3, 3, 4))
    for x, y in zip(a, b, strict=True):
        assert x.to_dict() == y.to_dict()
    assert any(x.to_dict() != y.to_dict() for x, y in zip(a, c, strict=True))


def test_bad_config():
    with pytest.raises(ValueError, match="min_nodes must be >= 8"):
        GeneratorConfig(mode="arch", min_nodes=5, max_nodes=50)
    with pytest.raises(ValueError, match="family_weights"):
        arch.ArchConfig(family_weights=(1.0,))


# ---------------------------------------------------------------------------- JAX twin

TWIN_CFG = GeneratorConfig(mode="arch", min_nodes=20, max_nodes=120)
TWIN_COUNT = 300


@pytest.fixture(scope="module")
def jax_twin():
    """TWIN_COUNT graphs of the jitted ``key -> PaddedGraph`` of TWIN_CFG (one graph per call, one
    compilation: vmapped it compiles 1.5x longer; the slow test runs it vmapped) with their keys,
    the raw outputs and the trace count."""
    gen = make_jax_generator(TWIN_CFG)
    traces = []

    def counted(key):
        traces.append(1)
        return gen(key)

    jitted = jax.jit(counted)
    keys = jax.random.split(jax.random.key(0), TWIN_COUNT)
    outputs = [jax.tree.map(np.asarray, jitted(k)) for k in keys]
    graphs = [padded_to_graph(out, name=f"j{i}") for i, out in enumerate(outputs)]
    return {"jitted": jitted, "keys": keys, "outputs": outputs, "graphs": graphs, "traces": traces}


def unbatch(batch, count):
    batch = jax.tree.map(np.asarray, batch)
    return [padded_to_graph(graph_at(batch, i), name=f"j{i}") for i in range(count)]


def test_jax_and_numpy_expansions_build_the_same_graph(jax_twin):
    """From the variates a key draws, the vectorised JAX expansion and the NumPy block-by-block
    build give the same nodes, counts and edges, on every graph; every family occurs among them."""
    uniforms = np.asarray(jax.vmap(lambda k: jax.random.uniform(k, (arch.NUM_UNIFORMS,)))(jax_twin["keys"]))
    families = set()
    for u, g in zip(uniforms, jax_twin["graphs"], strict=True):
        lo, hi = TWIN_CFG.min_nodes, TWIN_CFG.max_nodes
        families.add(int(arch.draw_program(u.astype(float), lo, hi, arch.ArchConfig())["family"]))
        ref = relabel_spec_order(arch.build_arch_numpy(u.astype(float), lo, hi))
        assert g.num_nodes == ref.num_nodes
        assert np.array_equal(g.edges[np.lexsort(g.edges.T[::-1])], ref.edges[np.lexsort(ref.edges.T[::-1])])
        for name in ("params", "output_size", "macs"):
            np.testing.assert_allclose(getattr(g, name), getattr(ref, name), rtol=2e-6, atol=1, err_msg=name)
    assert families == set(range(len(arch.FAMILIES)))


def test_jax_and_numpy_twins_agree_in_distribution(jax_twin):
    """Every per-graph statistic (plus node count and edges per node) has the same mean in both twins
    (independent random streams) within 4 standard errors, over TWIN_COUNT graphs each."""
    tables = []
    for graphs in (generate_dataset(TWIN_CFG, TWIN_COUNT, seed=0), jax_twin["graphs"]):
        table = stats_table(graphs)
        table["nodes"] = np.array([g.num_nodes for g in graphs], float)
        table["edges_per_node"] = np.array([g.num_edges / g.num_nodes for g in graphs])
        tables.append(table)
    a, b = tables
    for name in a:
        se = np.sqrt(a[name].var() / TWIN_COUNT + b[name].var() / TWIN_COUNT)
        diff = abs(a[name].mean() - b[name].mean())
        assert diff <= 4 * se + 1e-9, f"{name}: numpy {a[name].mean():.4g} vs jax {b[name].mean():.4g} (se {se:.3g})"


def test_jax_generator_has_fixed_shapes_and_traces_once(jax_twin):
    outputs = jax_twin["outputs"]
    n_pad, e_pad, p_pad = TWIN_CFG.padded_shape
    assert (n_pad, e_pad, p_pad) == (128, 1024, 8)
    shapes = {tuple(jax.tree.leaves(jax.tree.map(np.shape, out))) for out in outputs}
    assert len(shapes) == 1, "the output shapes do not depend on the key"
    out = outputs[0]
    assert out.params.shape == (n_pad,) and out.preds.shape == (n_pad, p_pad) and out.senders.shape == (e_pad,)
    nodes = np.array([int(o.num_nodes) for o in outputs])
    assert nodes.min() >= TWIN_CFG.min_nodes and nodes.max() <= TWIN_CFG.max_nodes and len(set(nodes)) > 20
    for o in outputs[:20]:
        n = int(o.num_nodes)
        assert o.node_mask[:n].all() and not o.node_mask[n:].any()
        assert np.array_equal(o.node_ids[:n], np.arange(n)) and not o.edge_mask[o.receivers >= n].any()
    again = jax_twin["jitted"](jax_twin["keys"][3])
    jax.tree.map(np.testing.assert_array_equal, outputs[3], jax.tree.map(np.asarray, again))
    assert len(jax_twin["traces"]) == 1, "one trace for every key"


@pytest.mark.slow
def test_jax_twin_matches_real_statistics_at_full_size(real_graphs):
    """The JAX generator (key path) over the real node range holds the same tolerances as NumPy."""
    sizes = [g.num_nodes for g in real_graphs]
    cfg = GeneratorConfig(mode="arch", min_nodes=min(sizes), max_nodes=max(sizes))
    count = 120
    batch = jax.jit(jax.vmap(make_jax_generator(cfg)))(jax.random.split(jax.random.key(0), count))
    real, gen = stats_table(real_graphs), stats_table(unbatch(batch, count))
    for k, tol in TOLERANCES.items():
        assert abs(gen[k].mean() - real[k].mean()) <= tol, k


def test_generate_numpy_dispatch_names_and_source():
    g = generate_numpy(GeneratorConfig(mode="arch", min_nodes=40, max_nodes=40), np.random.default_rng(0), name="a")
    assert g.name == "a" and "mode='arch'" in g.source and g.num_nodes == 40


@pytest.mark.parametrize("preset, lo, hi", [("arch100", 64, 128), ("arch300", 200, 400), ("arch1000", 600, 1000)])
def test_presets_load_through_the_cli_config_check(preset, lo, hi):
    from omegaconf import OmegaConf

    from respect_jax.cli.label import generator_from_cfg

    cfg = generator_from_cfg(OmegaConf.load(Path(MODELS[0]).parents[2] / "conf" / "graphs" / f"{preset}.yaml"))
    assert cfg.mode == "arch" and (cfg.min_nodes, cfg.max_nodes) == (lo, hi)
    assert lo <= generate_numpy(cfg, np.random.default_rng(0)).num_nodes <= hi


def main(count: int = 200) -> None:
    """Print the generated-vs-real statistics table (``python tests/test_architectures.py``)."""
    real_graphs = [load_graph(p) for p in MODELS]
    sizes = [g.num_nodes for g in real_graphs]
    cfg = GeneratorConfig(mode="arch", min_nodes=min(sizes), max_nodes=max(sizes))
    batch = jax.jit(jax.vmap(make_jax_generator(cfg)))(jax.random.split(jax.random.key(0), count))
    sets = {"real (17)": real_graphs, f"numpy ({count})": generate_dataset(cfg, count, seed=0)}
    sets[f"jax ({count})"] = unbatch(batch, count)
    tables = {}
    for name, graphs in sets.items():
        tables[name] = stats_table(graphs)
        tables[name]["nodes"] = np.array([g.num_nodes for g in graphs], float)
        tables[name]["edges_per_node"] = np.array([g.num_edges / g.num_nodes for g in graphs])
    print(f"| statistic | {' | '.join(sets)} | tolerance |\n|---|---|---|---|---|")
    for key in tables["real (17)"]:
        values = " | ".join(f"{t[key].mean():.3f}" for t in tables.values())
        print(f"| {key} | {values} | {TOLERANCES.get(key, '-')} |")


if __name__ == "__main__":
    main()
