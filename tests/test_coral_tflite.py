"""Cutting an existing int8 ``.tflite`` into Edge TPU-named segments, and the checks that judge a pipeline.

Tests marked ``coral`` need the coral extra (TensorFlow to build the small int8 models, LiteRT to cut
and run them): ``make test-coral`` or ``.venv-coral/bin/pytest -m coral tests/test_coral_tflite.py``.
The others need no TensorFlow and run in the default suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from respect_jax.coral import runner
from respect_jax.coral.runner import check_equality, choose_backend, constant_outputs

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- no TensorFlow needed


def _stream(values) -> list[dict]:
    return [{"y": np.asarray(v, np.float32)} for v in values]


def test_constant_reference_is_inconclusive_not_ok():
    zeros = _stream([[0.0, 0.0], [0.0, 0.0]])
    assert constant_outputs(zeros) == {"y": 0.0}
    for variant in ("float32", "int8"):
        eq = check_equality(variant, zeros, zeros, None, 0.1, num_nodes=5, num_stages=2)
        assert eq["ok"] is None and "cannot fail" in eq["note"]
    eq = check_equality("int8", zeros, zeros, None, 0.1, exact=True)
    assert eq["ok"] is None
    varied = _stream([[0.0, 0.5], [0.25, 0.0]])
    assert constant_outputs(varied) == {}
    assert check_equality("int8", varied, varied, None, 0.1, exact=True)["ok"] is True
    # a wrong result is still FAILED, constant reference or not
    assert check_equality("float32", _stream([[1.0, 0.0], [0.0, 0.0]]), zeros, None, 0.0)["ok"] is False


def test_exact_criterion_fails_on_any_difference():
    ref = _stream([[0.1, 0.2], [0.3, 0.4]])
    off = _stream([[0.1, 0.2], [0.3, 0.4 + 1e-6]])
    assert check_equality("int8", off, ref, None, 0.1, num_stages=3, exact=True)["ok"] is False
    # the re-quantized (Keras) int8 criterion allows steps per cut
    assert check_equality("int8", off, ref, None, 0.1, num_stages=3)["ok"] is True


def _probe(pipeline, unsegmented, step=0.0):
    return {"output": "y", "tensor": "logits", "stage": 1, "step": step,
            "pipeline": _stream(pipeline), "unsegmented": _stream(unsegmented)}


def test_pre_activation_tensor_is_compared_too():
    out = _stream([[0.2, 0.8], [0.6, 0.4]])
    good = _probe([[1.0, 2.0], [3.0, 1.0]], [[1.0, 2.0], [3.0, 1.0]])
    bad = _probe([[1.0, 2.0], [3.0, 1.5]], [[1.0, 2.0], [3.0, 1.0]])
    eq = check_equality("int8", out, out, None, 0.1, exact=True, probes=[good])
    assert eq["ok"] is True and eq["pre_activation"][0]["ok"] is True
    eq = check_equality("int8", out, out, None, 0.1, exact=True, probes=[bad])
    assert eq["ok"] is False and "before the activation" in eq["note"]
    eq = check_equality("float32", out, out, None, 0.0, num_nodes=4, probes=[bad])
    assert eq["ok"] is False
    # constant outputs (a saturated activation): inconclusive even where the logits agree, and the note says so
    zeros = _stream([[0.0, 0.0], [0.0, 0.0]])
    eq = check_equality("int8", zeros, zeros, None, 0.1, exact=True, probes=[good])
    assert eq["ok"] is None and "varies and agrees" in eq["note"]


def test_backend_choice_order_and_explicit_refusals(monkeypatch):
    manifest = {"num_stages": 2, "stages": [{"edgetpu": {"status": "compiled", "file": "a"}}] * 2}
    monkeypatch.setattr(runner, "pycoral_status", lambda k, m=None: (False, "no pycoral"))
    monkeypatch.setattr(runner, "edgetpu_library_present", lambda: (False, "no libedgetpu"))
    backend, why = choose_backend(manifest, "int8")
    assert backend == "litert" and "no pycoral" in why and "no libedgetpu" in why
    with pytest.raises(ValueError, match="edgetpu backend unavailable: no libedgetpu"):
        choose_backend(manifest, "int8", "edgetpu")
    with pytest.raises(ValueError, match="pycoral backend unavailable"):
        choose_backend(manifest, "int8", "pycoral")
    with pytest.raises(ValueError, match="backend must be one of"):
        choose_backend(manifest, "int8", "tpu")
    monkeypatch.setattr(runner, "edgetpu_library_present", lambda: (True, "libedgetpu.so.1 found"))
    assert choose_backend(manifest, "int8")[0] == "edgetpu"
    assert "load_delegate('libedgetpu.so.1')" in choose_backend(manifest, "int8")[1]
    assert choose_backend(manifest, "float32")[0] == "litert"  # the Edge TPU runs int8 only
    assert choose_backend(manifest, "int8", "litert")[0] == "litert"
    uncompiled = {"num_stages": 2, "stages": [{}, {}]}
    assert choose_backend(uncompiled, "int8")[0] == "litert"
    monkeypatch.setattr(runner, "pycoral_status", lambda k, m=None: (True, "2 Edge TPUs"))
    assert choose_backend(manifest, "int8")[0] == "pycoral"


def test_edgetpu_route_loads_one_delegate_per_stage_on_its_own_tpu(monkeypatch, tmp_path):
    """backend=edgetpu: stage k runs its compiled file with load_delegate("libedgetpu.so.1", {"device": ":k"});
    under auto, a delegate that cannot open its TPU falls back to LiteRT on CPU and the note says why."""
    calls, made = [], []

    def fake_load_delegate(library, options):
        calls.append((library, options["device"]))
        if options["device"] == ":1" and fail:
            raise ValueError("Failed to load delegate from libedgetpu.so.1")
        return f"delegate{options['device']}"

    class FakeStage:
        def __init__(self, path, num_threads=1, delegate=None):
            made.append((Path(path).name, delegate))

    monkeypatch.setattr(runner, "litert_load_delegate", lambda: fake_load_delegate)
    monkeypatch.setattr(runner, "LiteRTStage", FakeStage)
    stages = [{"files": {"int8": f"m_segment_{k}_of_2.tflite"},
               "edgetpu": {"status": "compiled", "file": f"m_segment_{k}_of_2_edgetpu.tflite"}} for k in range(2)]
    manifest = {"num_stages": 2, "stages": stages}
    fail = False
    runner.litert_stages(manifest, tmp_path, "int8", edgetpu=True)
    assert calls == [("libedgetpu.so.1", ":0"), ("libedgetpu.so.1", ":1")]
    assert made == [(f"m_segment_{k}_of_2_edgetpu.tflite", f"delegate:{k}") for k in range(2)]
    fail = True
    with pytest.raises(ValueError, match="cannot open Edge TPU :1 for stage 1 through libedgetpu.so.1"):
        runner.litert_stages(manifest, tmp_path, "int8", edgetpu=True)

    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "format": "respect-jax-segments/1"}))
    monkeypatch.setattr(runner, "choose_backend", lambda m, v, b: ("edgetpu", "LiteRT with load_delegate"))
    ran = []

    def fake_pipeline(manifest, root, inputs, variant, queue_size, num_threads, warmup, edgetpu=False):
        ran.append(edgetpu)
        runner.litert_stages(manifest, root, variant, num_threads, edgetpu)
        return runner.PipelineResult(outputs=[], report={"backend": "edgetpu" if edgetpu else "litert"})

    monkeypatch.setattr(runner, "run_litert_pipeline", fake_pipeline)
    result = runner.run_manifest(tmp_path, [], "int8", backend="auto")
    assert ran == [True, False] and result.report["backend"] == "litert"
    assert result.report["backend_note"].startswith("LiteRT on CPU threads (the Edge TPU delegate failed: cannot open")
    with pytest.raises(ValueError, match="cannot open Edge TPU :1"):
        runner.run_manifest(tmp_path, [], "int8", backend="edgetpu")


def test_segment_file_names_follow_the_edgetpu_compiler():
    from respect_jax.coral.tflite_segment import segment_file_name

    assert segment_file_name("mnv2_int8", 0, 4) == "mnv2_int8_segment_0_of_4.tflite"
    assert segment_file_name("mnv2_int8", 3, 4, compiled=True) == "mnv2_int8_segment_3_of_4_edgetpu.tflite"


# ----------------------------------------------------------------------------- int8 models (coral)


def _int8_tflite(model, path: Path, seed: int = 0) -> Path:
    """Full-integer int8 conversion (int8 inputs/outputs) calibrated on 8 seeded uniform inputs."""
    from respect_jax.coral._deps import import_tensorflow, quiet_fds

    tf = import_tensorflow()
    rng = np.random.default_rng(seed)
    shapes = [(1, *t.shape[1:]) for t in model.inputs]

    def representative():
        for _ in range(8):
            yield [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    with quiet_fds():
        path.write_bytes(converter.convert())
    return path


@pytest.fixture(scope="module")
def int8_models(tmp_path_factory):
    """``branchy``: residual Add + Concatenate + softmax head (9 graph nodes). ``chain``: a plain
    conv chain whose int8 output is all zeros (sigmoid of a very negative dense), over a varying pre-activation."""
    from respect_jax.coral._deps import import_keras

    keras = import_keras()
    L = keras.layers
    folder = tmp_path_factory.mktemp("int8_models")
    keras.utils.set_random_seed(0)
    x = keras.Input((16, 16, 3), name="img")
    a = L.Conv2D(8, 3, padding="same", activation="relu", name="c1")(x)
    b = L.Conv2D(8, 3, padding="same", activation="relu", name="c2")(a)
    c = L.Add(name="add")([a, b])
    d = L.DepthwiseConv2D(3, padding="same", activation="relu", name="dw")(c)
    e = L.Concatenate(name="cat")([c, d])
    logits = L.Dense(5, name="fc", bias_initializer="random_normal")(L.GlobalAveragePooling2D(name="gap")(e))
    branchy = keras.Model(x, L.Softmax(name="prob")(logits), name="branchy")

    y = keras.Input((8, 8, 2), name="img")
    h = L.Conv2D(4, 3, activation="relu", name="k1")(y)
    h = L.Flatten(name="flat")(L.Conv2D(4, 3, activation="relu", name="k2")(h))
    dense = L.Dense(3, name="fc", bias_initializer=keras.initializers.Constant(-100.0))(h)
    chain = keras.Model(y, L.Activation("sigmoid", name="out")(dense), name="chain")
    # the same body with a ReLU fused into the dense layer: the output range [0, 0] gives it a scale of ~1e-8
    relu_head = keras.Model(y, L.ReLU(name="out")(dense), name="relu_head")
    return {
        "branchy": _int8_tflite(branchy, folder / "branchy_int8.tflite"),
        "chain": _int8_tflite(chain, folder / "chain_int8.tflite"),
        "relu_head": _int8_tflite(relu_head, folder / "relu_head_int8.tflite"),
    }


def _run(manifest_dir: Path, n: int = 12):
    """(pipeline outputs, whole-model outputs) on LiteRT CPU for ``n`` seeded inputs."""
    manifest, root = runner.load_manifest(manifest_dir)
    xs = runner.random_inputs(manifest, n, seed=3)
    piped = runner.run_manifest(manifest_dir, xs, "int8", backend="litert")
    whole = runner.run_single(root / manifest["full"]["files"]["int8"], manifest, xs, "int8")
    return manifest, piped.outputs, whole.outputs


def _names(path: Path) -> set[str]:
    from respect_jax.coral.tflite_segment import read_tflite_model, tensor_name

    return {tensor_name(t) for t in read_tflite_model(path).subgraphs[0].tensors}


# branchy's nodes: 0 img, 1 c1, 2 c2, 3 add, 4 dw, 5 cat, 6 gap (MEAN), 7 fc, 8 softmax
BRANCHY_SCHEDULES = [
    [0, 0, 1, 1, 1, 2, 2, 2, 2],  # the residual branch (c1 -> add) crosses a cut
    [0, 0, 0, 1, 1, 1, 1, 1, 2],  # the logits cross the last cut: the probe reads a stage input
    [0, 1, 1, 2, 2, 3, 3, 3, 3],  # stage 0 only forwards the input
    [0, 0, 2, 2, 2, 2, 2, 2, 2],  # stage 1 is empty: c1 is forwarded through it
]


@pytest.mark.coral
@pytest.mark.parametrize("assignment", BRANCHY_SCHEDULES)
def test_cut_int8_tflite_pipeline_equals_whole_model(int8_models, tmp_path, assignment):
    from respect_jax.coral.tflite_import import import_tflite
    from respect_jax.coral.tflite_segment import read_tflite_model, segment_tflite_model

    src = int8_models["branchy"]
    k = max(assignment) + 1
    assert import_tflite(src).num_nodes == len(assignment)
    out = tmp_path / "seg"
    manifest = segment_tflite_model(src, assignment, out)
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(
        ["branchy_int8.tflite", "manifest.json", *[f"branchy_int8_segment_{i}_of_{k}.tflite" for i in range(k)]]
    )
    assert manifest["variants"] == ["int8"] and manifest["source"]["kind"] == "tflite"

    # tensor names and quantization are the source's: every boundary tensor has its source encoding
    source = read_tflite_model(src).subgraphs[0]
    by_name = {t.name.decode(): t for t in source.tensors}
    src_names = set(by_name)
    for st in manifest["stages"]:
        assert _names(out / st["files"]["int8"]) <= src_names
        for side in ("inputs", "outputs"):
            for name, d in st["io"]["int8"][side].items():
                q = by_name[name].quantization
                assert d["dtype"] == "int8" and d["scale"] == pytest.approx(float(q.scale[0]), rel=1e-7)
                assert d["zero_point"] == int(q.zeroPoint[0])
        st_names = set(st["inputs"]) | set(st["outputs"])
        assert st_names <= _names(out / st["files"]["int8"])
    for i in range(1, k):  # what a stage receives is what the stage before sends or forwards
        assert set(manifest["stages"][i]["inputs"]) <= set(manifest["stages"][i - 1]["outputs"])

    manifest, piped, whole = _run(out)
    assert constant_outputs(whole) == {}  # the comparison can fail on this model
    eq = check_equality("int8", piped, whole, None, 0.0, num_stages=k, exact=True,
                        probes=runner.probe_pre_activations(manifest, out, runner.random_inputs(manifest, 6), "int8"))
    assert eq["ok"] is True, eq
    assert eq["vs_unsegmented"]["max_abs_diff"] == 0.0
    assert [p["output"] for p in eq["pre_activation"]] == manifest["model_outputs"]  # the softmax's input
    assert eq["pre_activation"][0]["constant_reference"] is False


@pytest.mark.coral
def test_a_broken_cut_fails_the_equality_check(int8_models, tmp_path, monkeypatch):
    """Drop one boundary tensor (the c1 -> add residual) from a cut: the pipeline must not look equal."""
    from respect_jax.coral import tflite_segment

    real = tflite_segment.plan_tflite_segments

    def drop_residual(model, assignment, num_stages):
        plan = real(model, assignment, num_stages)
        dropped = plan.outputs[0][0]
        assert plan.inputs[1] == [dropped] and dropped in plan.inputs[2]
        plan.inputs[2].remove(dropped)  # stage 2 (add) no longer receives c1's output
        plan.outputs[1].remove(dropped)
        return plan

    monkeypatch.setattr(tflite_segment, "plan_tflite_segments", drop_residual)
    out = tmp_path / "seg"
    schedule = [0, 0, 1, 2, 2, 2, 2, 2, 2]
    with pytest.raises(RuntimeError, match="segment_2_of_3.tflite: operator 0 reads .*c1.*neither receives"):
        tflite_segment.segment_tflite_model(int8_models["branchy"], schedule, out)
    assert not out.exists()
    # without the segmenter's self-check the files are written, and running them fails (the add's input is unset)
    monkeypatch.setattr(tflite_segment, "check_stage_model", lambda *args: None)
    tflite_segment.segment_tflite_model(int8_models["branchy"], schedule, out)
    with pytest.raises(RuntimeError, match="lacks data"):
        _run(out)


@pytest.mark.coral
def test_lost_boundary_quantization_fails_the_equality_check(int8_models, tmp_path, monkeypatch):
    """A cut that does not keep a boundary tensor's scale on the receiving side computes something else."""
    from respect_jax.coral import tflite_segment

    real = tflite_segment.cut_stage

    def rescale_inputs(model, plan, k):
        stage = real(model, plan, k)
        if k > 0:
            for t in stage.subgraphs[0].inputs:
                stage.subgraphs[0].tensors[t].quantization.scale = [2 * s for s in
                                                                    stage.subgraphs[0].tensors[t].quantization.scale]
        return stage

    monkeypatch.setattr(tflite_segment, "cut_stage", rescale_inputs)
    out = tmp_path / "seg"
    tflite_segment.segment_tflite_model(int8_models["branchy"], BRANCHY_SCHEDULES[1], out)
    _, piped, whole = _run(out)
    assert check_equality("int8", piped, whole, None, 0.0, num_stages=3, exact=True)["ok"] is False


@pytest.mark.coral
def test_invalid_schedules_are_one_line_errors(int8_models, tmp_path):
    from respect_jax.coral.tflite_segment import segment_tflite_model

    src = int8_models["branchy"]
    for assignment, message in (
        ([0, 1, 0, 1, 1, 1, 1, 1, 1], "produced on stage 1 and read on stage 0"),
        ([0, 0, 1], "for each of the 9 nodes"),
        ([0, 0, 0, 0, 0, 0, 0, 0, -1], "must lie in"),
    ):
        with pytest.raises(ValueError, match=message):
            segment_tflite_model(src, assignment, tmp_path / "seg", num_stages=2)
        assert not (tmp_path / "seg").exists()
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a flatbuffer at all")
    with pytest.raises(ValueError, match="not a .tflite model"):
        segment_tflite_model(bad, [0], tmp_path / "seg")


@pytest.mark.coral
def test_constant_int8_output_is_inconclusive_and_its_pre_activation_checked(int8_models, tmp_path):
    """chain: sigmoid(dense - 100) is 0 for every input after int8 quantization; the report must not say OK."""
    from respect_jax.coral.deploy import pipeline_report, verdict
    from respect_jax.coral.options import PipelineOptions
    from respect_jax.coral.tflite_import import import_tflite
    from respect_jax.coral.tflite_segment import segment_tflite_model

    src = int8_models["chain"]
    graph = import_tflite(src)
    assignment = [0] + [min(1, i // 2) for i in range(graph.num_nodes - 1)]
    segment_tflite_model(src, assignment, tmp_path / "seg")
    report = pipeline_report(str(tmp_path / "seg"), "int8", PipelineOptions(num_inputs=6, profile=False))
    eq = report["equality"]
    assert verdict(eq["ok"]) == "INCONCLUSIVE", eq
    assert list(eq["constant_reference_outputs"].values()) == [0.0]
    probe = eq["pre_activation"][0]
    assert probe["ok"] is True and probe["constant_reference"] is False  # the logits vary and agree
    assert "varies and agrees" in eq["note"]
    assert report["pipeline"]["backend"] == "litert"


@pytest.mark.coral
def test_a_stage_xnnpack_refuses_runs_on_litert_kernels(int8_models, tmp_path):
    """XNNPACK (ai-edge-litert 2.3.0) refuses to prepare the dense layer alone (its requantization scale, with
    an output scale of ~1e-8, is out of XNNPACK's range; inside the whole model it is not delegated): that stage
    runs on LiteRT's own kernels, the report says so, and the outputs are still identical."""
    from respect_jax.coral.tflite_segment import segment_tflite_model

    out = tmp_path / "seg"
    segment_tflite_model(int8_models["relu_head"], [0, 0, 0, 0, 0, 0, 0, 1], out)
    manifest, root = runner.load_manifest(out)
    xs = runner.random_inputs(manifest, 4, seed=3)
    piped = runner.run_manifest(out, xs, "int8", backend="litert")
    whole = runner.run_single(root / manifest["full"]["files"]["int8"], manifest, xs, "int8")
    assert piped.report["xnnpack_per_stage"] == [True, False]
    assert runner.compare_outputs(piped.outputs, whole.outputs)["max_abs_diff"] == 0.0


@pytest.mark.coral
def test_keras_int8_pipeline_compares_the_tensor_before_the_softmax(tmp_path):
    """The Keras segmenter's int8 files (re-converted per stage): the softmax's input is found in the whole
    file and in the stage computing the output, and compared within the int8 bound."""
    from respect_jax.coral._deps import import_keras
    from respect_jax.coral.deploy import pipeline_report
    from respect_jax.coral.keras_export import graph_from_keras
    from respect_jax.coral.options import PipelineOptions
    from respect_jax.coral.segment import segment_keras_model

    keras = import_keras()
    L = keras.layers
    keras.utils.set_random_seed(1)
    x = keras.Input((8, 8, 3), name="img")
    h = L.Conv2D(6, 3, activation="relu", name="c1")(x)
    h = L.GlobalAveragePooling2D(name="gap")(L.Conv2D(6, 3, activation="relu", name="c2")(h))
    model = keras.Model(x, L.Softmax(name="prob")(L.Dense(4, name="fc")(h)), name="soft")
    n = graph_from_keras(model).num_nodes
    segment_keras_model(model, [0, 0] + [1] * (n - 2), tmp_path / "seg", variants=("int8",), samples=4,
                        compile_edgetpu_segments=False)
    eq = pipeline_report(str(tmp_path / "seg"), "int8", PipelineOptions(num_inputs=6, profile=False))["equality"]
    (probe,) = eq["pre_activation"]
    assert probe["output"] == "prob" and probe["stage"] == 1 and probe["constant_reference"] is False
    assert probe["ok"] is True and eq["ok"] is not False, eq


@pytest.mark.coral
def test_cli_segment_tflite_and_pipeline(int8_models, tmp_path):
    """respect-segment model=<int8>.tflite schedule=result.json, then respect-pipeline: OK, backend printed."""
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"assignment": BRANCHY_SCHEDULES[0], "hardware": {"stages": 3}, "solver": "hand"}))
    seg = tmp_path / "seg"
    env_bin = Path(sys.executable).parent

    def cli(name: str, *args: str) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(env_bin / name), *args], capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc

    proc = cli("respect-segment", f"model={int8_models['branchy']}", f"schedule={result}", f"out_dir={seg}")
    assert "edgetpu_compiler: not run" in proc.stderr or "edgetpu_compiler: compiled" in proc.stderr
    manifest = json.loads((seg / "manifest.json").read_text())
    assert [st["files"]["int8"] for st in manifest["stages"]] == [
        f"branchy_int8_segment_{k}_of_3.tflite" for k in range(3)
    ]
    assert manifest["schedule"]["solver"] == "hand"
    proc = cli("respect-pipeline", f"manifest={seg}", "variant=int8", "num_inputs=5", "profile=false",
               f"out={seg}/r.json")
    assert "equality OK (identical values" in proc.stderr, proc.stderr
    assert "backend: litert: LiteRT on CPU threads" in proc.stderr
