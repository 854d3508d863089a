"""The committed real-model graphs in data/models/ (no TensorFlow needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from respect_jax.coral.keras_export import MODELS, RESPECT_NODE_COUNTS
from respect_jax.graphs import load_graph

DATA = Path(__file__).resolve().parents[1] / "data" / "models"

# keras.applications(weights=None, include_top=False).count_params() (Keras 3.15 / TF 2.21).
KERAS_PARAMS = {
    "vgg16": 14_714_688,
    "vgg19": 20_024_384,
    "mobilenet": 3_228_864,
    "mobilenetv2": 2_257_984,
    "xception": 20_861_480,
    "resnet50": 23_587_712,
    "resnet101": 42_658_176,
    "resnet152": 58_370_944,
    "resnet50v2": 23_564_800,
    "resnet101v2": 42_626_560,
    "resnet152v2": 58_331_648,
    "inception_v3": 21_802_784,
    "inception_resnet_v2": 54_336_736,
    "densenet121": 7_037_504,
    "densenet169": 12_642_880,
    "densenet201": 18_321_984,
    "nasnetmobile": 4_269_716,
}

# RESPECT's counts include one dummy source and one dummy sink (NOTES.md); ours do not.
RESPECT_DUMMY_NODES = 2


def _json_files() -> list[Path]:
    return sorted(DATA.glob("*.json"))


def test_every_bundled_model_is_committed():
    missing = [name for name in MODELS if not (DATA / f"{name}.json").is_file()]
    assert not missing, f"run respect-export model={missing[0]}"


@pytest.mark.parametrize("path", _json_files(), ids=lambda p: p.stem)
def test_committed_graph_loads_and_is_sane(path: Path):
    graph = load_graph(path)
    assert graph.name == path.stem
    assert graph.num_nodes == len(set(graph.node_names)), "node names must be unique"
    assert graph.ops[0] == "InputLayer"
    size = 299 if path.stem.startswith(("inception", "xception")) else 224
    assert graph.output_size[0] == size * size * 3
    assert np.all(graph.output_size > 0)
    # exactly one source (the input) and a connected DAG
    indeg = np.bincount(graph.edges[:, 1], minlength=graph.num_nodes)
    assert np.flatnonzero(indeg == 0).tolist() == [0]


@pytest.mark.parametrize("name", sorted(RESPECT_NODE_COUNTS))
def test_node_counts_match_respect(name: str):
    graph = load_graph(DATA / f"{name}.json")
    assert graph.num_nodes == RESPECT_NODE_COUNTS[name] - RESPECT_DUMMY_NODES


@pytest.mark.parametrize("name", sorted(KERAS_PARAMS))
def test_params_total_equals_keras(name: str):
    graph = load_graph(DATA / f"{name}.json")
    assert int(graph.params.sum()) == KERAS_PARAMS[name]


def _node(graph, name: str) -> int:
    return graph.node_names.index(name)


@pytest.mark.parametrize(
    "model, layer, params, output_size, macs",
    [
        # 3x3x3 -> 64 conv at 224x224: 224*224*64 outputs, 27 MACs each
        ("vgg16", "block1_conv1", 3 * 3 * 3 * 64 + 64, 224 * 224 * 64, 224 * 224 * 64 * 27),
        ("vgg16", "block1_pool", 0, 112 * 112 * 64, 112 * 112 * 64 * 4),
        # 7x7/2 conv, 3 -> 64, 112x112 output
        ("resnet50", "conv1_conv", 7 * 7 * 3 * 64 + 64, 112 * 112 * 64, 112 * 112 * 64 * 147),
        ("resnet50", "conv1_bn", 4 * 64, 112 * 112 * 64, 112 * 112 * 64),
        ("resnet50", "conv2_block1_add", 0, 56 * 56 * 256, 56 * 56 * 256),
        # 3x3/2 depthwise on 96 channels -> 56x56x96
        ("mobilenetv2", "block_1_depthwise", 3 * 3 * 96, 56 * 56 * 96, 56 * 56 * 96 * 9),
        # separable 3x3, 64 -> 128 at 147x147: depthwise + pointwise
        (
            "xception",
            "block2_sepconv1",
            3 * 3 * 64 + 64 * 128,
            147 * 147 * 128,
            147 * 147 * 64 * 9 + 147 * 147 * 128 * 64,
        ),
    ],
)
def test_hand_computed_layers(model, layer, params, output_size, macs):
    graph = load_graph(DATA / f"{model}.json")
    i = _node(graph, layer)
    assert (graph.params[i], graph.output_size[i], graph.macs[i]) == (params, output_size, macs)


def test_top_level_macs_are_plausible():
    """Totals against well-known figures (conv MACs of the include_top=False backbones)."""
    approx = {"vgg16": 15.35e9, "resnet50": 3.87e9, "mobilenetv2": 0.30e9, "mobilenet": 0.57e9}
    for name, expected in approx.items():
        total = load_graph(DATA / f"{name}.json").macs.sum()
        assert abs(total - expected) / expected < 0.03, (name, total)


@pytest.mark.slow
def test_every_bundled_model_with_every_solver():
    """Issue 5: every bundled model schedules validly with every registered solver (exact ones with a
    short time limit), and no solver beats a proven optimum."""
    import yaml

    import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
    import respect_jax.respect_pointer.solver  # noqa: F401
    from respect_jax.costs import hardware_from_dict
    from respect_jax.solvers import available_solvers, run_solver

    base = yaml.safe_load((DATA.parents[1] / "conf" / "hardware" / "coral_usb.yaml").read_text())
    hw = hardware_from_dict({**base, "stages": 4})
    limits = {"milp": {"time_limit_s": 5.0}, "cpsat": {"time_limit_s": 5.0}, "gumbel": {"steps": 20, "samples": 8}}
    for path in _json_files():
        graph = load_graph(path)
        results = {s: run_solver(s, graph, hw, "paper", **limits.get(s, {})) for s in available_solvers()}
        proven = [r["objective"] for r in results.values() if r["optimal"]]
        for name, r in results.items():  # run_solver raises on an invalid schedule
            assert len(r["assignment"]) == graph.num_nodes, (path.name, name)
            if proven:
                assert r["objective"] >= min(proven) * (1 - 1e-5), (path.name, name)


# ---------------------------------------------------------------------------------------------------------------
# data/models_val/: the validation architectures (issue 26). Model selection and early stopping use these only; the
# bundled models above are the test set.

VAL = DATA.parent / "models_val"
VAL_MIN_MODELS = 20
VAL_INPUT_SIZE = 224
_WEIGHTED_OPS = {"Conv2D", "DepthwiseConv2D", "SeparableConv2D", "Dense"}


def _val_files() -> list[Path]:
    return sorted(VAL.glob("*.json"))


def _structure(graph) -> tuple:
    """What makes two graphs the same architecture up to layer widths: layer types and edges in node order."""
    return graph.num_nodes, graph.ops, graph.edges.tobytes()


def test_validation_set_has_enough_models():
    assert len(_val_files()) >= VAL_MIN_MODELS, "run data/models_val/export_val.py (see data/models_val/README.md)"
    # some are the same topology at other widths (ConvNeXt Small..XLarge, EfficientNet B1/B2); 20 distinct ones
    assert len({_structure(load_graph(p)) for p in _val_files()}) >= VAL_MIN_MODELS


def test_validation_models_are_not_bundled_models():
    bundled = {path.stem: load_graph(path) for path in _json_files()}
    bundled_structures = {_structure(g) for g in bundled.values()}
    for path in _val_files():
        graph = load_graph(path)
        assert graph.name not in bundled and graph.name not in MODELS, graph.name
        assert _structure(graph) not in bundled_structures, f"{graph.name} has the structure of a bundled model"
        assert not set(graph.node_names[1:]) <= set().union(*(g.node_names for g in bundled.values())), graph.name


@pytest.mark.parametrize("path", _val_files(), ids=lambda p: p.stem)
def test_validation_graph_loads_and_is_sane(path: Path):
    graph = load_graph(path)  # the project's loader: counts >= 0, edges in range, unique, acyclic
    assert graph.name == path.stem
    assert "include_top=False" in graph.source and "weights=None" in graph.source
    assert graph.num_nodes == len(set(graph.node_names)), "node names must be unique"
    assert graph.ops[0] == "InputLayer" and graph.output_size[0] == VAL_INPUT_SIZE**2 * 3
    assert np.all(graph.output_size > 0)
    indeg = np.bincount(graph.edges[:, 1], minlength=graph.num_nodes)
    outdeg = np.bincount(graph.edges[:, 0], minlength=graph.num_nodes)
    assert np.flatnonzero(indeg == 0).tolist() == [0], "one source, the input"
    assert np.count_nonzero(outdeg == 0) == 1, "one sink, the backbone's output"
    weighted = np.array([op in _WEIGHTED_OPS for op in graph.ops])
    assert weighted.sum() >= 10
    assert np.all(graph.params[weighted] > 0) and np.all(graph.macs[weighted] > 0)
    # a convolution does at least one MAC per output element; zero-MAC layers have no weights
    assert np.all(graph.macs[weighted] >= graph.output_size[weighted])
    assert np.all(graph.params[graph.macs == 0] == 0)
    assert 1e5 < graph.params.sum() < 1e9 and 1e7 < graph.macs.sum() < 1e12


def test_validation_set_spans_sizes_and_families():
    graphs = [load_graph(p) for p in _val_files()]
    nodes = [g.num_nodes for g in graphs]
    assert min(nodes) <= 150 and max(nodes) >= 1000, nodes
    families = ("mobilenetv3small", "mobilenetv3large", "efficientnetb", "efficientnetv2", "convnext_", "nasnetlarge")
    for family in families:
        assert any(g.name.startswith(family) for g in graphs), family


def test_layer_scale_counts_one_mac_per_element():
    """ConvNeXt's LayerScale (x * gamma) has the element-wise affine rule (a stand-in class: no TensorFlow)."""
    from respect_jax.coral.keras_export import layer_macs

    layer = type("LayerScale", (), {})()
    assert layer_macs(layer, [(1, 7, 7, 768)], [(1, 7, 7, 768)]) == 7 * 7 * 768
    graph = load_graph(VAL / "convnext_tiny.json")
    scale = [i for i, op in enumerate(graph.ops) if op == "LayerScale"]
    assert len(scale) == 18  # one per block: depths 3 + 3 + 9 + 3
    assert all(graph.macs[i] == graph.output_size[i] > 0 and graph.params[i] > 0 for i in scale)


@pytest.mark.parametrize(
    "model, layer, params, output_size, macs",
    [
        # EfficientNet stem: 3x3/2 conv 3 -> 32 without bias, 112x112 output
        ("efficientnetb0", "stem_conv", 3 * 3 * 3 * 32, 112 * 112 * 32, 112 * 112 * 32 * 27),
        # squeeze-excite of block 1a: 32 -> 8 channels (1x1 conv with bias) on the pooled 1x1 map
        ("efficientnetb0", "block1a_se_reduce", 32 * 8 + 8, 8, 8 * 32),
        # ConvNeXt stem, a nested Sequential: 4x4/4 patchify conv 3 -> 96 with bias, then LayerNormalization
        ("convnext_tiny", "convnext_tiny_stem", 4 * 4 * 3 * 96 + 96 + 2 * 96, 56 * 56 * 96, 56 * 56 * 96 * (48 + 1)),
        # ConvNeXt's 7x7 depthwise convolution is a grouped Conv2D (groups = 96 channels)
        (
            "convnext_tiny",
            "convnext_tiny_stage_0_block_0_depthwise_conv",
            7 * 7 * 96 + 96,
            56 * 56 * 96,
            56 * 56 * 96 * 49,
        ),
        # its pointwise convolutions are Dense layers on the channels: 96 -> 384
        (
            "convnext_tiny",
            "convnext_tiny_stage_0_block_0_pointwise_conv_1",
            96 * 384 + 384,
            56 * 56 * 384,
            56 * 56 * 384 * 96,
        ),
    ],
)
def test_validation_hand_computed_layers(model, layer, params, output_size, macs):
    graph = load_graph(VAL / f"{model}.json")
    i = _node(graph, layer)
    assert (graph.params[i], graph.output_size[i], graph.macs[i]) == (params, output_size, macs)
