"""The Coral adapter.

Tests without a marker need no TensorFlow and run in the default suite. Tests marked ``coral``
need the ``coral`` extra (TensorFlow, LiteRT, tflite) and use tiny models only::

    .venv-coral/bin/pytest -m coral tests/test_coral.py
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from respect_jax.coral import INSTALL_HINT, CoralDependencyError
from respect_jax.coral._deps import google_pycoral, import_tensorflow, litert_interpreter_class
from respect_jax.coral.calibrate import CPU_BASE, fit_hardware, predict_times
from respect_jax.coral.runner import dequantize, quantize
from respect_jax.coral.segment import parse_edgetpu_log, plan_segments
from respect_jax.graphs import Graph

ROOT = Path(__file__).resolve().parents[1]
HAVE_TF = importlib.util.find_spec("tensorflow") is not None

# int8 pipeline vs the unsegmented int8 model: at most this many output quantization steps apart.
# Both are calibrated on the same generated data; they differ only where the segmented files
# requantize a boundary tensor (e.g. into a Concatenate's shared scale) that the whole-model
# converter could fold into the producer, one extra rounding per such boundary.
INT8_TOLERANCE_STEPS = 3.0


# ----------------------------------------------------------------------------- no TensorFlow needed


def test_coral_modules_import_without_tensorflow():
    code = (
        "import sys\n"
        "import respect_jax.coral, respect_jax.coral.keras_export, respect_jax.coral.tflite_import\n"
        "import respect_jax.coral.segment, respect_jax.coral.runner, respect_jax.coral.calibrate\n"
        "import respect_jax.coral.deploy, respect_jax.coral.export, respect_jax.coral.options\n"
        "import respect_jax.cli.export, respect_jax.cli.coral\n"
        "bad = [m for m in ('tensorflow', 'keras', 'ai_edge_litert', 'tflite', 'pycoral') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_missing_dependency_is_one_clear_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    with pytest.raises(CoralDependencyError) as err:
        import_tensorflow()
    assert INSTALL_HINT in str(err.value) and "\n" not in str(err.value)
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)
    with pytest.raises(CoralDependencyError, match="ai-edge-litert"):
        litert_interpreter_class()


def test_unrelated_pypi_pycoral_is_never_executed(tmp_path, monkeypatch):
    """A ``pycoral`` package without Google's modules (the PyPI coral-reef tool) is ignored unrun."""
    pkg = tmp_path / "pycoral"
    pkg.mkdir()
    marker = tmp_path / "executed"
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pycoral", raising=False)
    assert google_pycoral() is None
    assert not marker.exists()
    text = (ROOT / "pyproject.toml").read_text().lower()
    assert '"pycoral' not in text, "never depend on the PyPI package called pycoral"


def test_export_cli_rejects_unknown_model_in_one_line():
    proc = subprocess.run(
        [sys.executable, "-m", "respect_jax.cli.export", "model=nope"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "unknown model 'nope'" in proc.stderr


@pytest.mark.skipif(HAVE_TF, reason="checks the message shown when TensorFlow is missing")
def test_export_cli_without_tensorflow_says_what_to_install():
    proc = subprocess.run(
        [sys.executable, "-m", "respect_jax.cli.export", "model=vgg16", "out=/tmp/never.json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert INSTALL_HINT in proc.stderr and proc.stderr.strip().count("\n") == 0


def _toy_graph() -> Graph:
    # 0 input -> 1 -> 2 -> 3 -> 5 (output); 1 -> 4 -> 5; 1 -> 5 (skip); 2 is also an output
    edges = [[0, 1], [1, 2], [2, 3], [3, 5], [1, 4], [4, 5], [1, 5]]
    n = 6
    return Graph("toy", np.ones(n, np.int64), np.arange(1, n + 1), np.ones(n, np.int64), np.array(edges))


def test_plan_forwards_tensors_through_intermediate_stages():
    g = _toy_graph()
    plan = plan_segments(g, [0, 0, 1, 1, 2, 3], 4, input_nodes=[0], output_nodes=[5, 2])
    st = plan.stages
    assert [s.nodes for s in st] == [[1], [2, 3], [4], [5]]
    assert st[0].inputs == [0] and st[0].outputs == [1]
    # node 1 feeds stages 1, 2 and 3: forwarded through 1 and 2
    assert st[1].inputs == [1] and sorted(st[1].outputs) == [1, 2, 3]
    # node 2 is a model output: forwarded to the last stage; 3 skips stage 2
    assert sorted(st[2].inputs) == [1, 2, 3] and sorted(st[2].outputs) == [1, 2, 3, 4]
    assert st[3].outputs == [5, 2]


def test_plan_input_on_a_later_stage_and_empty_stages():
    g = _toy_graph()
    plan = plan_segments(g, [2, 2, 2, 2, 2, 2], 4, input_nodes=[0], output_nodes=[5])
    assert [sorted(s.nodes) for s in plan.stages] == [[], [], [1, 2, 3, 4, 5], []]
    assert [s.inputs for s in plan.stages] == [[0], [0], [0], [5]]
    assert [s.outputs for s in plan.stages] == [[0], [0], [5], [5]]


def test_plan_rejects_backward_edges():
    with pytest.raises(ValueError, match=r"edge \[1, 2\]"):
        plan_segments(_toy_graph(), [0, 1, 0, 1, 1, 1], 2, input_nodes=[0], output_nodes=[5])


def test_parse_edgetpu_compiler_log():
    log = """Edge TPU Compiler version 16.0.384591198
Model compiled successfully in 1234 ms.
Input model: stage0_int8.tflite
On-chip memory used for caching model parameters: 3.25MiB
On-chip memory remaining for caching model parameters: 4.50MiB
Off-chip memory used for streaming uncached model parameters: 120.00KiB
Number of Edge TPU subgraphs: 1
"""
    info = parse_edgetpu_log(log)
    assert info["on_chip_bytes"] == int(3.25 * 2**20)
    assert info["on_chip_remaining_bytes"] == int(4.5 * 2**20)
    assert info["off_chip_bytes"] == 120 * 1024
    assert len(info["lines"]) == 3


def test_fit_hardware_recovers_known_values():
    truth = {**CPU_BASE, "macs_per_s": 2.0e9, "link_bw": 5.0e8, "stage_overhead_s": 3e-4}
    rng = np.random.default_rng(0)
    samples = [
        {"macs": float(m), "spill_bytes": 0.0, "in_bytes": float(b), "time_s": 0.0}
        for m, b in zip(rng.uniform(1e6, 1e8, 12), rng.uniform(0, 1e6, 12), strict=True)
    ]
    for s, t in zip(samples, predict_times(samples, truth), strict=True):
        s["time_s"] = float(t)
    fit = fit_hardware(samples, CPU_BASE)
    assert fit["r2"] > 0.999999
    assert fit["fitted"]["macs_per_s"] == pytest.approx(2.0e9, rel=1e-6)
    assert fit["fitted"]["link_bw"] == pytest.approx(5.0e8, rel=1e-6)
    assert fit["fitted"]["stage_overhead_s"] == pytest.approx(3e-4, rel=1e-6)
    assert "not identifiable" in fit["kept"]["host_bw"]  # nothing spills on a CPU
    assert fit["hardware"]["host_bw"] == CPU_BASE["host_bw"]


def test_quantize_roundtrip():
    d = {"dtype": "int8", "scale": 0.05, "zero_point": -3}
    x = np.linspace(-8, 8, 161, dtype=np.float32)
    q = quantize(x, d)
    assert q.dtype == np.int8 and q.min() == -128 and q.max() == 127  # clipped, not wrapped
    inside = np.abs(x) < 6.0
    assert np.max(np.abs(dequantize(q, d)[inside] - x[inside])) <= 0.025 + 1e-6
    f = {"dtype": "float32", "scale": 0.0, "zero_point": 0}
    assert np.array_equal(dequantize(quantize(x, f), f), x)


# ----------------------------------------------------------------------------- TensorFlow / LiteRT


def _tiny_cnn(seed: int = 0):
    """A CNN with skip connections, a concatenation, BN and a shared-free DAG (16x16 input)."""
    import keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    L = keras.layers
    x = keras.Input((16, 16, 3), name="img")
    a = L.ReLU(name="r1")(L.BatchNormalization(name="bn1")(L.Conv2D(8, 3, padding="same", name="c1")(x)))
    b = L.DepthwiseConv2D(3, padding="same", name="dw")(L.Conv2D(8, 3, padding="same", activation="relu", name="c2")(a))
    c = L.Add(name="add")([a, b])
    d = L.Conv2D(4, 1, name="c3")(c)
    e = L.Concatenate(name="cat")([c, d, a])
    f = L.GlobalAveragePooling2D(name="gap")(L.MaxPooling2D(name="pool")(e))
    return keras.Model(x, L.Dense(5, name="fc", bias_initializer="random_normal")(f), name="tiny")


@pytest.mark.coral
def test_keras_export_counts_on_a_tiny_model():
    from respect_jax.coral.keras_export import graph_from_keras

    model = _tiny_cnn()
    g = graph_from_keras(model)
    assert g.node_names == ("img", "c1", "bn1", "r1", "c2", "dw", "add", "c3", "cat", "pool", "gap", "fc")
    assert int(g.params.sum()) == model.count_params()
    i = g.node_names.index
    assert g.macs[i("c1")] == 16 * 16 * 8 * 27
    assert g.macs[i("dw")] == 16 * 16 * 8 * 9
    assert g.macs[i("c3")] == 16 * 16 * 4 * 8
    assert g.macs[i("add")] == 16 * 16 * 8
    assert g.macs[i("cat")] == 0 and g.output_size[i("cat")] == 16 * 16 * 20
    assert g.macs[i("pool")] == 8 * 8 * 20 * 4 and g.macs[i("gap")] == 8 * 8 * 20
    assert g.macs[i("fc")] == 20 * 5
    assert sorted(map(tuple, g.edges.tolist())) == sorted(
        [
            (0, 1),
            (1, 2),
            (2, 3),
            (3, 4),
            (4, 5),
            (3, 6),
            (5, 6),
            (6, 7),
            (6, 8),
            (7, 8),
            (3, 8),
            (8, 9),
            (9, 10),
            (10, 11),
        ]
    )


@pytest.mark.coral
def test_shared_layer_gives_one_node_per_call():
    import keras

    from respect_jax.coral.keras_export import graph_from_keras

    keras.backend.clear_session()
    x = keras.Input((8, 8, 4), name="x")
    conv = keras.layers.Conv2D(4, 3, padding="same", name="shared")
    y = conv(keras.layers.ReLU(name="r")(conv(x)))
    model = keras.Model(x, y)
    g = graph_from_keras(model)
    assert g.node_names == ("x", "shared", "shared@1", "r")
    assert g.params.tolist() == [0, model.count_params(), 0, 0]
    assert sorted(map(tuple, g.edges.tolist())) == [(0, 1), (1, 3), (3, 2)]


@pytest.mark.coral
def test_export_reproduces_committed_mobilenetv2():
    from respect_jax.coral.keras_export import export_keras_model
    from respect_jax.graphs import load_graph

    fresh = export_keras_model("mobilenetv2").to_dict()
    committed = load_graph(ROOT / "data" / "models" / "mobilenetv2.json").to_dict()
    assert fresh["nodes"] == committed["nodes"] and fresh["edges"] == committed["edges"]


def _convert(model, variant: str, tmp_path: Path, samples: int = 4) -> Path:
    from respect_jax.coral.segment import convert_to_tflite, rename_io_tensors

    rng = np.random.default_rng(0)
    name = model.inputs[0].name
    rep = [{name: rng.uniform(-1, 1, (1, *model.inputs[0].shape[1:])).astype(np.float32)} for _ in range(samples)]
    buf, _ = rename_io_tensors(convert_to_tflite(model, variant, rep))
    path = tmp_path / f"{model.name}_{variant}.tflite"
    path.write_bytes(buf)
    return path


def _fusion_free_cnn():
    """No BN, activations inside conv/dense: TFLite keeps one operator per Keras layer."""
    import keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(1)
    L = keras.layers
    bias = {"bias_initializer": "random_normal"}
    x = keras.Input((12, 12, 3), name="img")
    a = L.Conv2D(6, 3, padding="same", activation="relu", name="c1", **bias)(x)
    b = L.Conv2D(6, 3, padding="same", activation="relu", name="c2", **bias)(a)
    c = L.Add(name="add")([a, b])
    d = L.DepthwiseConv2D(3, padding="same", activation="relu", name="dw", **bias)(c)
    e = L.Concatenate(name="cat")([c, d])
    f = L.AveragePooling2D(2, name="pool")(e)
    g = L.GlobalAveragePooling2D(name="gap")(f)
    return keras.Model(x, L.Dense(4, name="fc", **bias)(g), name="fusionfree")


@pytest.mark.coral
def test_tflite_importer_agrees_with_keras_exporter(tmp_path):
    from respect_jax.coral.keras_export import graph_from_keras
    from respect_jax.coral.tflite_import import import_tflite

    model = _fusion_free_cnn()
    kg = graph_from_keras(model)
    tg = import_tflite(_convert(model, "float32", tmp_path))
    assert tg.num_nodes == kg.num_nodes and tg.num_edges == kg.num_edges
    assert int(tg.params.sum()) == int(kg.params.sum())
    assert int(tg.macs.sum()) == int(kg.macs.sum())
    assert sorted(tg.output_size.tolist()) == sorted(kg.output_size.tolist())
    assert tg.ops[0] == "Input" and "CONV_2D" in tg.ops and "DEPTHWISE_CONV_2D" in tg.ops


@pytest.mark.coral
def test_tflite_importer_on_an_int8_model(tmp_path):
    from respect_jax.coral.keras_export import graph_from_keras
    from respect_jax.coral.tflite_import import import_tflite

    model = _tiny_cnn()
    g = import_tflite(_convert(model, "int8", tmp_path))
    kg = graph_from_keras(model)
    # BN (4 x 8 params in Keras) is folded into c1's bias; convolutions, dense layers keep theirs
    assert int(g.params.sum()) == model.count_params() - 4 * 8
    conv_macs = sum(int(kg.macs[i]) for i, op in enumerate(kg.ops) if op in ("Conv2D", "DepthwiseConv2D", "Dense"))
    tfl_conv = sum(
        int(g.macs[i]) for i, op in enumerate(g.ops) if op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
    )
    assert tfl_conv == conv_macs
    assert g.ops[0] == "Input" and g.output_size[0] == 16 * 16 * 3


@pytest.mark.coral
@pytest.mark.parametrize(
    "stages_by_name",
    [
        # r1 (used by add and cat) skips stage 1; add crosses into stage 2
        {
            "img": 0,
            "c1": 0,
            "bn1": 0,
            "r1": 0,
            "c2": 1,
            "dw": 1,
            "add": 1,
            "c3": 2,
            "cat": 2,
            "pool": 2,
            "gap": 2,
            "fc": 2,
        },
        # stage 1 is empty (only forwards); the input layer sits on stage 2
        {
            "img": 2,
            "c1": 2,
            "bn1": 2,
            "r1": 2,
            "c2": 2,
            "dw": 2,
            "add": 2,
            "c3": 2,
            "cat": 2,
            "pool": 2,
            "gap": 2,
            "fc": 2,
        },
        # three tensors cross boundary 0 -> 1 and r1 / add are forwarded through stage 1
        {
            "img": 0,
            "c1": 0,
            "bn1": 0,
            "r1": 0,
            "c2": 0,
            "dw": 0,
            "add": 0,
            "c3": 1,
            "cat": 2,
            "pool": 2,
            "gap": 2,
            "fc": 2,
        },
    ],
    ids=["skip", "empty-stage", "forward"],
)
def test_segment_round_trip_k3(tmp_path, stages_by_name):
    from respect_jax.coral.keras_export import graph_from_keras
    from respect_jax.coral.runner import (
        check_equality,
        compare_outputs,
        load_manifest,
        random_inputs,
        run_manifest,
        run_single,
    )
    from respect_jax.coral.segment import representative_inputs, segment_keras_model, set_batchnorm_statistics

    model = _tiny_cnn()
    g = graph_from_keras(model)
    assignment = [stages_by_name[n] for n in g.node_names]
    set_batchnorm_statistics(model, representative_inputs(model, 8, 3, (-1.0, 1.0)))
    out = tmp_path / "seg"
    segment_keras_model(model, assignment, out, num_stages=3, samples=8, compile_edgetpu_segments=None)
    manifest, root = load_manifest(out)
    assert manifest["num_stages"] == 3 and len(manifest["stages"]) == 3
    assert manifest["int8_boundary_mismatches"] == []
    assert manifest["edgetpu_compiler"]["status"].startswith(("not run", "compiled"))
    for k in range(2):
        assert manifest["boundaries"][k]["tensors"] == manifest["stages"][k]["outputs"]
        assert set(manifest["stages"][k + 1]["inputs"]) == set(manifest["stages"][k]["outputs"])
    xs = random_inputs(manifest, 6, seed=5)
    keras_out = [{"fc": np.asarray(model(x["img"]))} for x in xs]

    piped = run_manifest(out, xs, variant="float32")
    assert piped.report["backend"] == "litert" and "not used" in piped.report["backend_note"]
    single = run_single(root / manifest["full"]["files"]["float32"], manifest, xs, "float32")
    assert compare_outputs(piped.outputs, single.outputs)["max_abs_diff"] <= 1e-5
    assert compare_outputs(piped.outputs, keras_out)["max_abs_diff"] <= 1e-4
    assert len(piped.report["stages"]) == 3 and piped.report["throughput_per_s"] > 0

    piped8 = run_manifest(out, xs, variant="int8")
    single8 = run_single(root / manifest["full"]["files"]["int8"], manifest, xs, "int8")
    step = manifest["full"]["io"]["int8"]["outputs"]["fc"]["scale"]
    diff = compare_outputs(piped8.outputs, single8.outputs)
    assert diff["max_abs_diff"] <= INT8_TOLERANCE_STEPS * step + 1e-7
    # the stated int8 criterion: as close to the float model as the unsegmented int8 model
    check = check_equality("int8", piped8.outputs, single8.outputs, single.outputs, step, g.num_nodes, 3)
    assert check["ok"] and check["int8_reference_meaningful"], check
    zeros = [{"fc": np.zeros_like(o["fc"])} for o in piped8.outputs]
    assert check_equality("int8", zeros, single8.outputs, single.outputs, step, g.num_nodes, 3)["ok"] is False


@pytest.mark.coral
def test_int8_stage_files_have_consistent_boundaries(tmp_path):
    """Every int8 boundary tensor has the same encoding on both sides (raw bytes can cross)."""
    from respect_jax.coral.keras_export import graph_from_keras
    from respect_jax.coral.runner import LiteRTStage, load_manifest
    from respect_jax.coral.segment import segment_keras_model

    model = _tiny_cnn()
    g = graph_from_keras(model)
    # r1 and add enter stage 2 where Concatenate wants its own scale: QUANTIZE ops are inserted
    by_name = {"c3": 2, "cat": 2, "pool": 2, "gap": 2, "fc": 2, "c2": 1, "dw": 1, "add": 1}
    segment_keras_model(model, [by_name.get(n, 0) for n in g.node_names], tmp_path, num_stages=3, samples=4)
    manifest, root = load_manifest(tmp_path)
    for k in range(1, 3):
        prev = LiteRTStage(root / manifest["stages"][k - 1]["files"]["int8"]).outputs
        cur = LiteRTStage(root / manifest["stages"][k]["files"]["int8"]).inputs
        for name, d in cur.items():
            assert d["dtype"] == np.int8 and prev[name]["dtype"] == np.int8
            assert np.isclose(d["quantization"][0], prev[name]["quantization"][0], rtol=1e-6)
            assert d["quantization"][1] == prev[name]["quantization"][1]
    assert manifest["stages"][2]["io"]["int8"]["requantized_inputs"]


@pytest.mark.coral
def test_cli_segment_pipeline_calibrate(tmp_path):
    model = _tiny_cnn()
    keras_file = tmp_path / "tiny.keras"
    model.save(keras_file)
    seg = tmp_path / "seg"
    env_bin = Path(sys.executable).parent

    def run(cmd: list[str]) -> subprocess.CompletedProcess:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc

    run(
        [
            str(env_bin / "respect-segment"),
            f"model={keras_file}",
            "solver=compiler",
            "hardware.stages=3",
            f"out_dir={seg}",
            "variants=[float32]",
            "samples=4",
        ]
    )
    manifest = json.loads((seg / "manifest.json").read_text())
    assert manifest["num_stages"] == 3 and manifest["schedule"]["solver"] == "compiler"
    report = tmp_path / "report.json"
    run([str(env_bin / "respect-pipeline"), f"manifest={seg}", "num_inputs=6", f"out={report}", "profile_inputs=2"])
    doc = json.loads(report.read_text())
    assert doc["equality"]["ok"] and doc["equality"]["vs_unsegmented"]["max_abs_diff"] <= 1e-5
    assert len(doc["profile"]) == 3
    out = tmp_path / "cpu.yaml"
    run([str(env_bin / "respect-calibrate"), f"reports=[{report}]", f"out={out}", "fit=[stage_overhead_s,macs_per_s]"])
    text = out.read_text()
    assert "macs_per_s:" in text and "stages: 4" in text
    bad = subprocess.run(
        [str(env_bin / "respect-pipeline"), f"manifest={tmp_path / 'missing'}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0


# ----------------------------------------------------------------------------- audit regressions


def test_unique_tensor_names_never_collide():
    """``dense@1`` (second call of a shared layer) must not become Keras's next default name ``dense_1``."""
    from respect_jax.coral.segment import unique_tensor_names

    nodes = [("x", 1), ("dense", 1), ("dense@1", 1), ("dense_1", 1), ("split", 2), ("split__0", 1), ("a-b", 1)]
    names = unique_tensor_names(nodes)
    flat = [n for ns in names for n in ns]
    assert len(set(flat)) == len(flat)
    assert all(re.fullmatch(r"[A-Za-z0-9_]+", n) for n in flat)
    # safe single-output names are kept, so a layer's output is found under the layer's name
    assert names[1] == ["dense"] and names[3] == ["dense_1"] and names[5] == ["split__0"]
    assert names[2] != ["dense_1"] and names[4][0] != "split__0"


def test_bn_stats_auto_only_for_bundled_models():
    from respect_jax.coral.deploy import resolve_bn_stats

    assert resolve_bn_stats(None, "mobilenetv2") is True
    assert resolve_bn_stats(None, "/data/trained.keras") is False
    assert resolve_bn_stats(True, "/data/trained.keras") is True
    assert resolve_bn_stats(False, "mobilenetv2") is False
    with pytest.raises(ValueError, match="bn_stats"):
        resolve_bn_stats("yes", "mobilenetv2")


def _litert_outputs(path: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    """Float outputs of a float32 ``.tflite`` (single input), by signature name."""
    from respect_jax.coral.runner import LiteRTStage

    stage = LiteRTStage(path)
    (name,) = stage.inputs
    return {k: np.asarray(v) for k, v in stage({name: x}).items()}


@pytest.mark.coral
def test_cli_keeps_a_user_models_batchnorm_statistics(tmp_path):
    """respect-segment on a .keras file: the float32 .tflite computes the user's model, trained BN included."""
    model = _tiny_cnn()
    bn = model.get_layer("bn1")
    bn.moving_mean.assign(np.linspace(-0.5, 0.5, 8).astype(np.float32))
    bn.moving_variance.assign(np.linspace(0.5, 4.0, 8).astype(np.float32))
    keras_file = tmp_path / "trained.keras"
    model.save(keras_file)
    seg = tmp_path / "seg"
    cmd = [
        str(Path(sys.executable).parent / "respect-segment"),
        f"model={keras_file}",
        "solver=compiler",
        "hardware.stages=2",
        f"out_dir={seg}",
        "variants=[float32]",
        "samples=4",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    x = np.random.default_rng(0).uniform(-1, 1, (1, 16, 16, 3)).astype(np.float32)
    want = np.asarray(model(x))
    got = _litert_outputs(seg / "full_float32.tflite", x)["fc"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _shared_dense_model():
    """A Dense layer called twice next to a layer Keras would name ``dense_1``; both are outputs."""
    import keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(0)
    L = keras.layers
    x = keras.Input((8,), name="x")
    shared = L.Dense(8, name="dense", bias_initializer="random_normal")
    b = L.Dense(8, name="dense_1", bias_initializer="random_normal")(shared(x))
    return keras.Model(x, [b, shared(b)], name="shared2")


@pytest.mark.coral
def test_shared_layer_outputs_match_keras_by_name(tmp_path):
    from respect_jax.coral.keras_export import graph_from_keras
    from respect_jax.coral.runner import load_manifest, random_inputs, run_manifest
    from respect_jax.coral.segment import segment_keras_model

    model = _shared_dense_model()
    g = graph_from_keras(model)
    assert g.node_names == ("x", "dense", "dense@1", "dense_1")
    stage = {"x": 0, "dense": 0, "dense_1": 1, "dense@1": 1}
    segment_keras_model(model, [stage[n] for n in g.node_names], tmp_path, variants=("float32",), samples=4)
    manifest, _ = load_manifest(tmp_path)
    names = manifest["model_outputs"]
    assert len(names) == 2 and len(set(names)) == 2 and names[0] == "dense_1"
    xs = random_inputs(manifest, 3, seed=2)
    piped = run_manifest(tmp_path, xs, "float32").outputs
    for x, out in zip(xs, piped, strict=True):
        want = [np.asarray(v) for v in model(x["x"])]
        for name, ref in zip(names, want, strict=True):
            np.testing.assert_allclose(out[name], ref, rtol=1e-5, atol=1e-5)


def test_float32_bound_scales_with_depth_and_outputs():
    """MobileNetV2's MILP split: 6.2e-5 apart at outputs up to 5.81 is float rounding (154 nodes), 1e-2 is not."""
    from respect_jax.coral.runner import check_equality

    ref = [{"y": np.array([[5.81, -1.0, 0.25]], np.float32)}]
    near = [{"y": ref[0]["y"] + np.float32(6.2e-5)}]
    far = [{"y": ref[0]["y"] + np.float32(1e-2)}]
    bound = 4 * 2.0**-23 * 154 * 5.81  # FLOAT32_EPS_PER_NODE eps32 per node times the output scale
    ok = check_equality("float32", near, ref, None, 0.0, num_nodes=154, num_stages=4)
    assert ok["ok"] is True and ok["bound"] == pytest.approx(bound, rel=1e-6)
    assert check_equality("float32", far, ref, None, 0.0, num_nodes=154, num_stages=4)["ok"] is False


def _int8_streams(noise_rel: float, seed: int = 0):
    """(float reference, unsegmented int8, pipeline within 1 step of it, step) on 16 synthetic outputs.

    The int8 streams are the float outputs plus ``noise_rel`` x N(0, 2.4) noise (1: 0.7 relative
    RMS), rounded to the step.
    """
    rng = np.random.default_rng(seed)
    f = [{"y": rng.uniform(0, 6, (1, 32)).astype(np.float32)} for _ in range(16)]
    step = 6.0 / 255
    unseg = [{"y": np.round((o["y"] + noise_rel * rng.normal(0, 2.4, o["y"].shape)) / step) * step} for o in f]
    pipe = [{"y": o["y"] + step * rng.integers(-1, 2, o["y"].shape)} for o in unseg]
    return f, unseg, pipe, step


def test_int8_check_rejects_zeros_and_shuffled_outputs():
    from respect_jax.coral.runner import check_equality

    f, unseg, pipe, step = _int8_streams(noise_rel=0.0)
    honest = check_equality("int8", pipe, unseg, f, step, num_nodes=12, num_stages=3)
    assert honest["ok"] is True and honest["int8_reference_meaningful"] is True
    assert honest["unsegmented_vs_float"]["rel_rms"] < 0.01
    zeros = [{"y": np.zeros_like(o["y"])} for o in pipe]
    shuffled = pipe[1:] + pipe[:1]  # every output belongs to another input
    for bad in (zeros, shuffled):
        assert check_equality("int8", bad, unseg, f, step, num_nodes=12, num_stages=3)["ok"] is False
    # 2 cuts allow 3 steps, not 5
    assert check_equality("int8", [{"y": o["y"] + 5 * step} for o in unseg], unseg, f, step, 12, 3)["ok"] is False


def test_int8_check_on_a_meaningless_reference_is_inconclusive_not_ok():
    """The unsegmented int8 model itself 0.7 rel. RMS from float (random MobileNetV2): no pointwise claim."""
    from respect_jax.coral.runner import check_equality

    f, unseg, _, step = _int8_streams(noise_rel=1.0)
    rng = np.random.default_rng(7)  # another, equally noisy int8 result of the same inputs
    other = [{"y": np.round((o["y"] + rng.normal(0, 2.4, o["y"].shape)) / step) * step} for o in f]
    check = check_equality("int8", other, unseg, f, step, num_nodes=154, num_stages=4)
    assert check["int8_reference_meaningful"] is False and check["unsegmented_vs_float"]["rel_rms"] > 0.3
    assert check["ok"] is None and "inconclusive" in check["note"]
    zeros = [{"y": np.zeros_like(o["y"])} for o in unseg]
    assert check_equality("int8", zeros, unseg, f, step, num_nodes=154, num_stages=4)["ok"] is False


def test_int8_check_without_float_reference_never_says_failed_for_noise():
    from respect_jax.coral.runner import check_equality

    _, unseg, pipe, step = _int8_streams(noise_rel=0.0)
    assert check_equality("int8", pipe, unseg, None, step, 12, 3)["ok"] is True
    far = check_equality("int8", [{"y": o["y"] + 1.0} for o in unseg], unseg, None, step, 12, 3)
    assert far["ok"] is None and "no float32 reference" in far["note"]


def test_report_verdict_words():
    from respect_jax.coral.deploy import equality_failed, verdict

    assert [verdict(v) for v in (True, False, None)] == ["OK", "FAILED", "INCONCLUSIVE"]
    assert equality_failed({"equality": {"ok": False}}) and not equality_failed({"equality": {"ok": None}})
    assert not equality_failed({})


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([0, 1], "must be a JSON object"),
        ({"assignment": [0, 1], "hardware": None}, "hardware must be an object"),
        ({"assignment": [0, 0.5, 1.9]}, "got 0.5"),
        ({"assignment": [0, 1], "hardware": {"stages": "three"}}, "hardware.stages must be a positive integer"),
        ({"assignment": [0, 3], "hardware": {"stages": 2}}, "uses stage 3"),
        ({"assignment": []}, "non-empty list"),
    ],
    ids=["list", "hardware-null", "floats", "stages-str", "stage-too-high", "empty"],
)
def test_read_schedule_rejects_bad_files_naming_them(tmp_path, doc, message):
    from respect_jax.coral.deploy import read_schedule

    path = tmp_path / "sched.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        read_schedule(str(path))
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_schedule_stages_refuses_a_conflicting_command_line(tmp_path):
    from respect_jax.cli.coral import stages_override
    from respect_jax.coral.deploy import read_schedule, schedule_stages

    path = tmp_path / "sched.json"
    path.write_text(json.dumps({"assignment": [0, 1, 1], "hardware": {"stages": 3}}))
    sched = read_schedule(str(path))
    assert stages_override(["model=x", "hardware.stages=4"]) == 4 and stages_override(["model=x"]) is None
    assert schedule_stages(sched, None) == 3 and schedule_stages(sched, 3) == 3
    with pytest.raises(ValueError, match="conflicts with"):
        schedule_stages(sched, 4)
    path.write_text(json.dumps({"assignment": [0, 1, 1]}))
    assert schedule_stages(read_schedule(str(path)), None) == 2
    assert schedule_stages(read_schedule(str(path)), 4) == 4
    with pytest.raises(ValueError, match="assigns nodes to stage 1"):
        schedule_stages(read_schedule(str(path)), 1)


def _run_cli(entry: str, args: list[str], block_tensorflow: bool = False) -> subprocess.CompletedProcess:
    """Run a coral console script's function in this interpreter (optionally with TensorFlow unimportable)."""
    block = "import sys; sys.modules['tensorflow'] = None; " if block_tensorflow else ""
    code = f"{block}from respect_jax.cli.coral import {entry}; {entry}()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)


def _one_line_error(proc: subprocess.CompletedProcess, prog: str, needle: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error:") and needle in lines[0], proc.stderr[-2000:]


def test_cli_unwritable_outputs_fail_first_in_one_line(tmp_path):
    """A file where a folder must be: each command stops before any work (no TensorFlow) and writes nothing."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = _run_cli("segment_main", ["model=mobilenetv2", f"out_dir={afile}/seg"], block_tensorflow=True)
    _one_line_error(proc, "respect-segment", "is not a folder")
    proc = _run_cli("deploy_main", ["model=mobilenetv2", f"out_dir={afile}"], block_tensorflow=True)
    _one_line_error(proc, "respect-deploy", "is not a folder")
    proc = _run_cli("pipeline_main", [f"manifest={tmp_path}/missing", f"out={afile}/r.json"], block_tensorflow=True)
    _one_line_error(proc, "respect-pipeline", "is not a folder")
    proc = _run_cli("calibrate_main", [f"reports=[{afile}]", f"out={afile}/sub/c.yaml"], block_tensorflow=True)
    _one_line_error(proc, "respect-calibrate", "is not a folder")
    code = "import sys; sys.modules['tensorflow'] = None; from respect_jax.cli.export import main; main()"
    proc = subprocess.run([sys.executable, "-c", code, "model=vgg16", f"out={afile}/v.json"], capture_output=True,
                          text=True, cwd=ROOT)
    _one_line_error(proc, "respect-export", "is not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == before and afile.read_text() == "x"


def test_cli_checks_arguments_before_tensorflow(tmp_path):
    sched = tmp_path / "s.json"
    sched.write_text("[1, 2]")
    proc = _run_cli("segment_main", [f"model={tmp_path}/nope.keras", f"out_dir={tmp_path}/o"], block_tensorflow=True)
    _one_line_error(proc, "respect-segment", "existing .keras file")
    args = ["model=mobilenetv2", f"schedule={sched}", f"out_dir={tmp_path}/o"]
    _one_line_error(_run_cli("segment_main", args, block_tensorflow=True), "respect-segment", "JSON object")
    args = ["model=mobilenetv2", "compile=true", f"out_dir={tmp_path}/o"]
    if shutil.which("edgetpu_compiler") is None:
        _one_line_error(_run_cli("segment_main", args, block_tensorflow=True), "respect-segment", "edgetpu_compiler")
    proc = _run_cli("pipeline_main", [f"manifest={tmp_path}", "num_inputs=0"], block_tensorflow=True)
    _one_line_error(proc, "respect-pipeline", "num_inputs must be an integer >= 1")
    damaged = tmp_path / "d.keras"
    damaged.write_text("not a zip")  # respect-segment checks the content as respect-export does
    proc = _run_cli("segment_main", [f"model={damaged}", f"out_dir={tmp_path}/o"], block_tensorflow=True)
    _one_line_error(proc, "respect-segment", "is not a Keras .keras file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.keras", "s.json"]


def test_calibrate_rejects_empty_and_foreign_reports(tmp_path):
    from respect_jax.coral.calibrate import calibrate_reports as calibrate

    with pytest.raises(ValueError, match="reports is empty"):
        calibrate([], dict(CPU_BASE), ["macs_per_s"])
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"nodes": []}))
    with pytest.raises(ValueError, match="not a respect-pipeline report"):
        calibrate([str(other)], dict(CPU_BASE), ["macs_per_s"])
    for name, content in (("bad.json", b"{not json"), ("latin.json", b"\xff\xfe{")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=rf"{name}: not valid JSON \(") as err:  # no AttributeError
            calibrate([str(tmp_path / name)], dict(CPU_BASE), ["macs_per_s"])
        assert "\n" not in str(err.value)


def _fake_report(path: Path, model: str, stages: list[tuple[int, int, int]], truth: dict, variant: str) -> None:
    """A respect-pipeline report whose stage profile follows the cost model under ``truth`` (nothing spills):
    T_k = stage_overhead_s + macs_k / macs_per_s + bytes * in_elements_k / link_bw (bytes: 4 float32, 1 int8)."""
    nbytes = {"float32": 4.0, "int8": 1.0}[variant]
    times = [truth["stage_overhead_s"] + m / truth["macs_per_s"] + nbytes * e / truth["link_bw"] for _, m, e in stages]
    doc = {
        "variant": variant,
        "model": model,
        "num_stages": len(stages),
        "stage_features": [
            {"stage": k, "params": p, "macs": m, "in_elements": e} for k, (p, m, e) in enumerate(stages)
        ],
        "pipeline": {"throughput_per_s": 0.9 / max(times)},
        "profile": [{"median_s": t} for t in times],
    }
    path.write_text(json.dumps(doc))


def test_calibrate_command_recovers_the_hardware_of_its_reports(tmp_path):
    """respect-calibrate on two reports made under known parameters: the fit finds them, the YAML (conf/hardware
    format) and its JSON twin are written, the validation predicts each report's slowest stage; no TensorFlow."""
    from omegaconf import OmegaConf

    from respect_jax.coral.calibrate import calibrate
    from respect_jax.coral.options import CalibrateConfig
    from respect_jax.costs import hardware_from_dict

    truth = {"macs_per_s": 3.0e9, "link_bw": 4.0e8, "stage_overhead_s": 5e-4}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _fake_report(a, "m1", [(10, 2_000_000, 0), (20, 9_000_000, 150_528), (5, 4_000_000, 50_000)], truth, "float32")
    _fake_report(b, "m2", [(10, 30_000_000, 0), (20, 1_000_000, 400_000)], truth, "float32")
    out = tmp_path / "hw" / "fit.yaml"
    proc = _run_cli("calibrate_main", [f"reports=[{a},{b}]", f"out={out}"], block_tensorflow=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr.startswith("fitted (float32, 5 stages)")
    doc = OmegaConf.to_container(OmegaConf.load(out))  # as Hydra reads conf/hardware (3e+09 is a float there)
    assert doc["stages"] == 4 and doc["param_bytes"] == doc["act_bytes"] == 4.0  # coral_usb's K; float32 bytes
    for key, value in truth.items():
        assert doc[key] == pytest.approx(value, rel=1e-4), key
    hardware_from_dict(doc)  # a valid hardware config
    result = json.loads(out.with_suffix(".json").read_text())
    assert [v["report"] for v in result["validation"]] == [str(a), str(b)]
    slowest = [max(p["median_s"] for p in json.loads(f.read_text())["profile"]) for f in (a, b)]
    got = [v["predicted_bottleneck_s"] for v in result["validation"]]
    assert got == pytest.approx(slowest, rel=1e-6)
    # the library call gives the same fit; base=hardware needs the hardware, an unknown variant is refused
    lib = calibrate(CalibrateConfig(reports=[str(a), str(b)]))
    assert lib["fitted"] == pytest.approx(result["fitted"], rel=1e-9)
    with pytest.raises(ValueError, match="base=hardware needs a hardware config"):
        calibrate(CalibrateConfig(reports=[str(a)], base="hardware"))
    doc16 = {**json.loads(a.read_text()), "variant": "float16"}
    (tmp_path / "f16.json").write_text(json.dumps(doc16))
    with pytest.raises(ValueError, match="variant 'float16'"):
        calibrate(CalibrateConfig(reports=[str(tmp_path / "f16.json")]))


def test_option_dataclasses_are_the_commands_defaults():
    """The configs of the Coral commands are built from the option dataclasses (one place for a default)."""
    from hydra import compose, initialize_config_dir

    import respect_jax.cli.coral  # noqa: F401  (registers the configs)
    from respect_jax.cli.common import CONF_DIR
    from respect_jax.coral.options import SegmentConfig, config_from, defaults

    assert defaults(SegmentConfig)["model"] == "???" and defaults(SegmentConfig)["variants"] == ["float32", "int8"]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("respect_deploy", overrides=["model=mobilenetv2", "out_dir=x", "samples=3"])
    values = {k: v for k, v in cfg.items() if k not in ("hardware", "solver")}
    segment_keys = list(defaults(SegmentConfig))
    assert list(values)[: len(segment_keys)] == segment_keys
    config = config_from(SegmentConfig, values)
    assert config.samples == 3 and config.model == "mobilenetv2" and config.lam == 1.0
    assert values["run_seed"] == 1 and values["num_inputs"] == 50 and "seed" in values


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.coral
def test_failed_segment_leaves_previous_out_dir_unchanged(tmp_path, monkeypatch):
    from respect_jax.coral import segment as seg_mod
    from respect_jax.coral.keras_export import graph_from_keras

    model = _tiny_cnn()
    n = graph_from_keras(model).num_nodes
    out = tmp_path / "seg"
    seg_mod.segment_keras_model(model, [0] * 6 + [1] * (n - 6), out, variants=("float32",), samples=2)
    before = _tree(out)
    # a conversion that fails half-way (after the unsegmented file was written)
    real, calls = seg_mod.convert_to_tflite, []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) > 2:
            raise RuntimeError("converter crashed")
        return real(*args, **kwargs)

    monkeypatch.setattr(seg_mod, "convert_to_tflite", flaky)
    with pytest.raises(RuntimeError, match="converter crashed"):
        seg_mod.segment_keras_model(model, [0] * n, out, num_stages=3, variants=("float32",), samples=2)
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seg"]  # no staging folder left behind
    # nothing at all when the folder did not exist
    with pytest.raises(RuntimeError):
        seg_mod.segment_keras_model(model, [0] * n, tmp_path / "new" / "seg", variants=("float32",), samples=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seg"]


@pytest.mark.coral
def test_resegmenting_replaces_the_whole_folder(tmp_path):
    from respect_jax.coral.keras_export import graph_from_keras
    from respect_jax.coral.segment import segment_keras_model

    model = _tiny_cnn()
    n = graph_from_keras(model).num_nodes
    out = tmp_path / "seg"
    segment_keras_model(model, [0] * 4 + [1] * 4 + [2] * (n - 8), out, variants=("float32",), samples=2)
    manifest = segment_keras_model(model, [0] * n, out, num_stages=1, variants=("float32",), samples=2)
    assert sorted(p.name for p in out.iterdir()) == ["full_float32.tflite", "manifest.json", "stage0_float32.tflite"]
    assert json.loads((out / "manifest.json").read_text()) == json.loads(json.dumps(manifest))
    (out / "notes.txt").write_text("mine")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="non-empty folder without manifest.json"):
        segment_keras_model(model, [0] * n, tmp_path / "other", num_stages=1, variants=("float32",))
    assert (tmp_path / "other" / "keep.txt").read_text() == "mine"


@pytest.mark.coral
def test_cli_pipeline_exits_1_when_equality_fails(tmp_path):
    """A pipeline that does not compute its unsegmented model: FAILED, exit 1, report still written."""
    from respect_jax.coral.keras_export import graph_from_keras
    from respect_jax.coral.segment import segment_keras_model

    n = graph_from_keras(_tiny_cnn()).num_nodes
    good, other = tmp_path / "good", tmp_path / "other"
    segment_keras_model(_tiny_cnn(seed=0), [0] * 6 + [1] * (n - 6), good, variants=("float32",), samples=2)
    segment_keras_model(_tiny_cnn(seed=1), [0] * n, other, num_stages=1, variants=("float32",), samples=2)
    report = tmp_path / "r.json"
    args = [f"manifest={good}", "num_inputs=3", "profile=false", f"out={report}"]
    ok = _run_cli("pipeline_main", args)
    assert ok.returncode == 0 and "equality OK" in ok.stderr, ok.stderr[-2000:]
    assert "WARNING" not in ok.stderr and "INFO" not in ok.stderr  # no TensorFlow/LiteRT start-up lines
    (good / "full_float32.tflite").write_bytes((other / "full_float32.tflite").read_bytes())  # another model
    bad = _run_cli("pipeline_main", args)
    assert bad.returncode == 1 and "equality FAILED" in bad.stderr, bad.stderr[-2000:]
    assert bad.stderr.strip().splitlines()[-1].startswith("respect-pipeline: error: equality FAILED for float32")
    assert json.loads(report.read_text())["equality"]["ok"] is False


@pytest.mark.coral
def test_cli_error_after_tensorflow_is_one_line(tmp_path):
    """An error found after TensorFlow was imported (schedule length vs model): still exactly one line."""
    model = _tiny_cnn()
    keras_file = tmp_path / "tiny.keras"
    model.save(keras_file)
    sched = tmp_path / "s.json"
    sched.write_text(json.dumps({"assignment": [0, 1, 1]}))
    proc = _run_cli("segment_main", [f"model={keras_file}", f"schedule={sched}", f"out_dir={tmp_path}/o"])
    _one_line_error(proc, "respect-segment", "for each of the 12 nodes")
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------- respect-export of model files


def _fake_model_files(folder: Path) -> dict[str, Path]:
    """Files whose first bytes pass respect-export's checks (no TensorFlow needed to make them)."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    keras_file = folder / "mine.keras"
    with zipfile.ZipFile(keras_file, "w") as zf:
        zf.writestr("config.json", "{}")
    h5 = folder / "legacy.h5"
    h5.write_bytes(b"\0" * 512 + b"\x89HDF\r\n\x1a\n" + b"\0" * 64)  # signature after a 512-byte user block
    tfl = folder / "net.tflite"
    tfl.write_bytes(b"\x1c\0\0\0TFL3" + b"\0" * 64)
    return {"keras": keras_file, "h5": h5, "tflite": tfl}


def _export_cfg(model, **kw):
    from omegaconf import OmegaConf

    defaults = {"include_top": False, "input_size": None, "out_dir": "x", "out": None}
    return OmegaConf.create({"model": model, **defaults, **kw})


def test_export_model_files_are_classified_and_named_after_their_stem(tmp_path):
    from respect_jax.coral.export import model_args, output_paths

    files = _fake_model_files(tmp_path / "m")
    args = model_args([str(files["keras"]), "vgg16", str(files["tflite"]), str(files["h5"])])
    assert [a.kind for a in args] == ["keras", "bundled", "tflite", "keras"]
    paths = output_paths(args, None, str(tmp_path / "out"), include_top=True)
    assert [p.name for p in paths] == ["mine.json", "vgg16_top.json", "net.json", "legacy.json"]
    assert output_paths(args[2:3], str(tmp_path / "g.json"), "unused", False) == [tmp_path / "g.json"]
    assert [a.text for a in model_args("all")][:2] == ["vgg16", "vgg19"]


def _bad_export_cases(tmp: Path) -> list[tuple[object, dict, str]]:
    files = _fake_model_files(tmp / "ok")
    (tmp / "folder.keras").mkdir()
    (tmp / "saved_model").mkdir()
    (tmp / "garbage.keras").write_text("not a zip")
    import zipfile

    with zipfile.ZipFile(tmp / "nocfg.keras", "w") as zf:
        zf.writestr("weights.h5", "x")
    (tmp / "garbage.h5").write_bytes(b"\0" * 2048)
    (tmp / "garbage.tflite").write_bytes(b"\x1c\0\0\0NOPE" + b"\0" * 64)
    (tmp / "empty.tflite").write_bytes(b"")
    (tmp / "model.onnx").write_bytes(b"onnx")
    (tmp / "model.pb").write_bytes(b"pb")
    twin = tmp / "twin"
    twin.mkdir()
    (twin / "net.tflite").write_bytes(files["tflite"].read_bytes())
    k, t = str(files["keras"]), str(files["tflite"])
    return [
        (str(tmp / "missing.keras"), {}, "missing.keras: no such file"),
        (str(tmp / "folder.keras"), {}, "is a folder"),
        (str(tmp / "saved_model"), {}, "is a folder"),
        (str(tmp / "garbage.keras"), {}, "is not a Keras .keras file"),
        (str(tmp / "nocfg.keras"), {}, "is not a Keras .keras file"),
        (str(tmp / "garbage.h5"), {}, "is not an HDF5 (.h5) Keras file"),
        (str(tmp / "garbage.tflite"), {}, "is not a TFLite model"),
        (str(tmp / "empty.tflite"), {}, "is not a TFLite model"),
        (str(tmp / "model.onnx"), {}, "is not an ONNX model"),
        (str(tmp / "model.pb"), {}, "unsupported file type '.pb'"),
        ("nope", {}, "unknown model 'nope'"),
        (k, {"include_top": True}, "include_top=true applies to bundled models only"),
        (["vgg16", t], {"input_size": 224}, "input_size=224 applies to bundled models only"),
        ([t, str(twin / "net.tflite")], {}, "would both write"),
        ([k, "vgg16"], {"out": str(tmp / "one.json")}, "out= names one file"),
        (t, {"out": str(tmp / "ok" / "mine.keras" / "g.json")}, "is not a folder"),
        ([], {}, "empty list"),
    ]


def test_export_refuses_bad_model_arguments_without_tensorflow(tmp_path, monkeypatch):
    """Missing, folder, damaged, wrong type, options that do not apply: ValueError before any import or write."""
    from respect_jax.cli.export import export

    for module in ("tensorflow", "keras", "tflite"):
        monkeypatch.setitem(sys.modules, module, None)  # an import would raise CoralDependencyError instead
    cases = _bad_export_cases(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for model, extra, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)) as err:
            export(_export_cfg(model, out_dir=str(tmp_path / "graphs"), **extra))
        assert "\n" not in str(err.value), model
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing written, no out_dir made


def test_export_cli_bad_model_file_is_one_line_before_tensorflow(tmp_path):
    bad = tmp_path / "bad.keras"
    bad.write_text("not a zip")
    code = "import sys; sys.modules['tensorflow'] = None; from respect_jax.cli.export import main; main()"
    for args, needle in [
        ([f"model={bad}"], "is not a Keras .keras file"),
        ([f"model={_fake_model_files(tmp_path / 'ok')['keras']}", "include_top=true"], "bundled models only"),
    ]:
        proc = subprocess.run([sys.executable, "-c", code, *args, f"out_dir={tmp_path}/g"], capture_output=True,
                              text=True, cwd=ROOT)
        _one_line_error(proc, "respect-export", needle)
    assert not (tmp_path / "g").exists()


def _env_cli(name: str, args: list[str]) -> subprocess.CompletedProcess:
    """Run a console script of this interpreter's environment; it must succeed."""
    proc = subprocess.run(
        [str(Path(sys.executable).parent / name), *args], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


@pytest.mark.coral
def test_cli_export_schedule_segment_pipeline_round_trip(tmp_path):
    """Your own .keras: respect-export -> respect-schedule -> respect-segment schedule=... -> equality OK."""
    from respect_jax.coral.keras_export import graph_from_keras
    from respect_jax.graphs import load_graph

    model = _tiny_cnn()  # branches: r1 feeds c2, add and cat
    keras_file = tmp_path / "mynet.keras"
    model.save(keras_file)
    proc = _env_cli("respect-export", [f"model={keras_file}", f"out_dir={tmp_path}/graphs"])
    graph_file = tmp_path / "graphs" / "mynet.json"
    assert proc.stderr.strip().splitlines() == [
        f"mynet: 12 nodes, 14 edges, params={model.count_params():,} macs=239,972 -> {graph_file}"
    ]
    graph = load_graph(graph_file)
    assert graph.name == "mynet" and "mynet.keras (sha256 " in graph.source
    assert graph.node_names == graph_from_keras(model).node_names

    # slow MACs, free links: the exact latency optimum splits the model over the 3 stages
    result = tmp_path / "result.json"
    hw = ["hardware.macs_per_s=1e6", "hardware.stage_overhead_s=0", "hardware.link_bw=1e12"]
    _env_cli(
        "respect-schedule",
        [f"graph={graph_file}", "solver=cpsat", "solver.options.workers=1", "hardware.stages=3", "objective=latency",
         *hw, f"out={result}"],
    )
    assignment = json.loads(result.read_text())["assignment"]
    assert len(assignment) == 12 and len(set(assignment)) == 3

    seg = tmp_path / "seg"
    _env_cli("respect-segment", [f"model={keras_file}", f"schedule={result}", f"out_dir={seg}", "variants=[float32]",
                                 "samples=4"])
    manifest = json.loads((seg / "manifest.json").read_text())
    assert manifest["assignment"] == assignment and manifest["schedule"]["solver"] == "cpsat"
    for k, stage in enumerate(manifest["stages"]):  # the segmenter's nodes are the exported graph's
        assert stage["nodes"] == [n for n, s in zip(graph.node_names, assignment, strict=True) if s == k and n != "img"]
    proc = _env_cli("respect-pipeline", [f"manifest={seg}", "num_inputs=3", "profile=false", f"out={seg}/r.json"])
    assert "equality OK" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.coral
def test_cli_export_keras_h5_tflite_and_bundled_in_one_list(tmp_path):
    """One list mixes files and a bundled name; .keras, .h5 and .tflite of one fusion-free model agree."""
    from respect_jax.graphs import load_graph

    model = _fusion_free_cnn()
    model.save(tmp_path / "ff.keras")
    model.save(tmp_path / "ff_legacy.h5")
    tfl = _convert(model, "float32", tmp_path)  # fusionfree_float32.tflite
    out = tmp_path / "graphs"
    files = [tmp_path / "ff.keras", "vgg16", tfl, tmp_path / "ff_legacy.h5"]
    proc = _env_cli("respect-export", [f"model=[{','.join(map(str, files))}]", f"out_dir={out}"])
    lines = proc.stderr.strip().splitlines()
    names = ["ff", "vgg16", "fusionfree_float32", "ff_legacy"]
    assert [line.split(":")[0] for line in lines] == names and all(f"-> {out}/" in line for line in lines)
    kg, vgg, tg, hg = (load_graph(out / f"{n}.json") for n in names)
    assert vgg.num_nodes == 19 and int(vgg.params.sum()) == 14_714_688
    assert hg.to_dict()["nodes"] == kg.to_dict()["nodes"] and hg.to_dict()["edges"] == kg.to_dict()["edges"]
    # one TFLite operator per Keras layer here: same counts and totals, other names and op types
    assert (tg.num_nodes, tg.num_edges) == (kg.num_nodes, kg.num_edges)
    assert int(tg.params.sum()) == int(kg.params.sum()) == model.count_params()
    assert int(tg.macs.sum()) == int(kg.macs.sum())
    assert sorted(tg.output_size.tolist()) == sorted(kg.output_size.tolist())
    assert tg.ops[0] == "Input" and kg.ops[0] == "InputLayer" and "CONV_2D" in tg.ops
    assert "tflite_import" in tg.source and "keras_export" in kg.source


@pytest.mark.coral
def test_cli_export_warns_about_layers_without_a_mac_rule(tmp_path):
    """LSTMs (one inside a nested model) have no MAC rule: one warning line, the graph is still written."""
    import keras

    keras.backend.clear_session()
    L = keras.layers
    x = keras.Input((6, 5), name="seq_in")
    inner_in = keras.Input((6, 5))
    block = keras.Model(inner_in, L.LSTM(4, return_sequences=True, name="lstm_in")(inner_in), name="block")
    model = keras.Model(x, L.Dense(2, name="fc")(L.LSTM(3, name="lstm")(block(x))), name="rnn")
    model.save(tmp_path / "rnn.keras")
    proc = _env_cli("respect-export", [f"model={tmp_path / 'rnn.keras'}", f"out={tmp_path / 'rnn.json'}"])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("rnn: 4 nodes, 3 edges")
    assert lines[1] == (
        "respect-export: warning: rnn: 2 layers have no MAC rule, counted as 0 MACs: block/lstm_in (LSTM), lstm (LSTM)"
    )
    assert (tmp_path / "rnn.json").is_file()


@pytest.mark.coral
def test_cli_export_unloadable_model_file_writes_nothing(tmp_path):
    """A .keras that passes the quick checks but cannot be loaded (damaged inside, subclassed model): one line,
    exit 2, and no graph written, not even that of a good file listed before it."""
    import zipfile

    import keras

    _tiny_cnn().save(tmp_path / "good.keras")
    with zipfile.ZipFile(tmp_path / "damaged.keras", "w") as zf:
        zf.writestr("config.json", "{not json")

    class Sub(keras.Model):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.fc = keras.layers.Dense(2)

        def call(self, x):
            return self.fc(x)

    sub = Sub(name="sub")
    sub(np.zeros((1, 4), np.float32))
    sub.save(tmp_path / "sub.keras")
    code = "from respect_jax.cli.export import main; main()"
    for bad, needle in [("damaged.keras", "cannot load the Keras model (JSONDecodeError"),
                        ("sub.keras", "cannot load the Keras model")]:
        args = [f"model=[{tmp_path / 'good.keras'},{tmp_path / bad}]", f"out_dir={tmp_path}/graphs"]
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
        _one_line_error(proc, "respect-export", needle)
        assert bad in proc.stderr
    assert not (tmp_path / "graphs").exists()


@pytest.mark.coral
def test_sequential_and_subclassed_models(tmp_path):
    """A Sequential model exports through its inner functional graph; a subclassed model has no layer graph."""
    import keras

    from respect_jax.coral.keras_export import export_keras_file, graph_from_keras

    keras.backend.clear_session()
    L = keras.layers
    seq = keras.Sequential([keras.Input((4,), name="x"), L.Dense(3, name="d"), L.Dense(2, name="e")], name="seq")
    g = graph_from_keras(seq)
    assert g.node_names == ("x", "d", "e") and g.edges.tolist() == [[0, 1], [1, 2]]
    assert int(g.params.sum()) == seq.count_params() and g.macs.tolist() == [0, 12, 6]
    seq.save(tmp_path / "seq.keras")
    assert export_keras_file(tmp_path / "seq.keras").to_dict()["nodes"] == g.to_dict()["nodes"]
    with pytest.raises(ValueError, match="without an input shape"):
        graph_from_keras(keras.Sequential([L.Dense(2)]))

    class Sub(keras.Model):
        def call(self, x):
            return x

    with pytest.raises(ValueError, match="subclassed model"):
        graph_from_keras(Sub())
