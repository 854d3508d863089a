"""Run a segment manifest as a pipeline and measure it.

Backends
    ``pycoral``: Google's pycoral ``PipelinedModelRunner`` over the Edge-TPU-compiled stages, one
    Edge TPU per stage (used by ``backend="auto"`` only when Google's pycoral is importable, at
    least K Edge TPUs are listed and every stage was compiled). ``litert``: one LiteRT
    (``ai-edge-litert``) interpreter per stage, each on its own thread, chained by bounded queues;
    a stage consumes the tensors it needs and emits the ones later stages need (forwarded tensors
    included), so the data flow is the one PipelinedModelRunner implements. LiteRT's ``invoke``
    releases the GIL, so stages really overlap.

Quantized boundaries
    Tensors cross stages raw (int8 stays int8). Where the consumer's quantization differs from the
    producer's (the manifest lists these; normally none) the value is requantized through float.
    Pipeline inputs are float and quantized to the first stage's int8 inputs; outputs are
    dequantized to float, so every variant is compared in float.

Measurements (``report``)
    ``stages[k]``: service time of stage k (set inputs + invoke + read outputs) per item: mean,
    median, p90, and ``busy_fraction`` (sum of service time / wall time). ``end_to_end``: latency
    from an input entering the first queue to its output leaving the last stage. ``throughput``:
    items / (last output time - first input time), after ``warmup`` items not timed.
    :func:`run_single` measures the unsegmented file the same way (one interpreter, sequential).
    :func:`profile_stages` times each stage *alone* (sequentially, no other stage running): the
    per-stage latencies the calibration fits (libcoral's profiling partitioner measures the same).

Equality with the unsegmented model (:func:`check_equality`)
    float32: the pipeline and ``full_float32.tflite`` agree to :data:`FLOAT32_EPS_PER_NODE`
    float32 epsilons per graph node times the largest output magnitude (at least 1): only float
    reassociation differs (LiteRT/XNNPACK fuses differently inside each file), and rounding errors
    grow at worst linearly with the number of operations on a path (the node count bounds the
    depth). MobileNetV2 (154 nodes, outputs up to 5.8): bound 4.3e-4; measured bit-identical for
    its parameter-count split, 2e-5 and 6.2e-5 for two MILP splits (the unsegmented file itself
    is 1.2e-4 from Keras). A wrong tensor or a missing layer is off by the output scale.

    int8: the per-stage converter may choose other scales for intermediate tensors than the
    whole-model converter, and each cut may requantize a boundary tensor once more, so the
    pipeline's int8 outputs agree with the unsegmented int8 model's to within one output
    quantization step plus :data:`INT8_STEPS_PER_CUT` per cut (measured on a 12-node CNN: 1 step
    at K = 3..6, 2 steps at K = 8). That pointwise check is the criterion, but it only holds
    where int8 rounding does not dominate the result: when the unsegmented int8 model is itself
    more than :data:`INT8_MEANINGFUL_REL_RMS` relative RMS from the float32 model (random-weight
    MobileNetV2: 0.70, its int8 output is mostly quantization noise, and a one-step difference
    in an early layer changes the output completely) the int8 reference is *meaningless*; then a
    pointwise disagreement gives ``ok = None`` (inconclusive) unless the pipeline is clearly
    worse against the float model than the unsegmented int8 model (mean absolute error or
    relative RMS above :data:`INT8_VS_FLOAT_RATIO` times the unsegmented model's), which fails.
    Without a float32 reference (int8-only manifests) a pointwise disagreement is inconclusive.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from respect_jax.coral._deps import (
    EDGETPU_LIBRARY,
    edgetpu_library_present,
    google_pycoral,
    litert_interpreter_class,
    litert_load_delegate,
    quiet_fds,
)

_STOP = object()
FLOAT32_EPS_PER_NODE = 4.0  # float32 epsilons of reassociation error allowed per graph node
INT8_STEPS_PER_CUT = 1.0  # output quantization steps allowed per stage boundary (plus one)
INT8_MEANINGFUL_REL_RMS = 0.1  # int8 vs float relative RMS above which int8 outputs are noise
INT8_VS_FLOAT_RATIO = 1.25  # a meaningless int8 reference: pipeline at most this much worse vs float


def load_manifest(path: str | os.PathLike) -> tuple[dict, Path]:
    """Read ``manifest.json`` (or a directory holding one); returns (manifest, its directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"{path}: cannot read manifest ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err.msg})") from None
    if manifest.get("format") != "respect-jax-segments/1":
        raise ValueError(f"{path}: not a respect-jax segment manifest")
    return manifest, path.parent


def quantize(x: np.ndarray, detail: dict) -> np.ndarray:
    """Float -> the tensor's dtype (int8/uint8 with scale and zero point; float stays float)."""
    dtype = np.dtype(detail["dtype"])
    if dtype.kind == "f":
        return np.asarray(x, dtype=dtype)
    scale, zp = detail["scale"], detail["zero_point"]
    info = np.iinfo(dtype)
    return np.clip(np.round(np.asarray(x, np.float32) / scale) + zp, info.min, info.max).astype(dtype)


def dequantize(x: np.ndarray, detail: dict) -> np.ndarray:
    """The tensor's value as float32."""
    if np.dtype(detail["dtype"]).kind == "f" or not detail["scale"]:
        return np.asarray(x, dtype=np.float32)
    return (np.asarray(x, np.float32) - detail["zero_point"]) * np.float32(detail["scale"])


def _same_encoding(a: dict, b: dict) -> bool:
    """Raw values can cross unchanged (scales equal up to float32 rounding)."""
    scale_ok = bool(np.isclose(a["scale"], b["scale"], rtol=1e-6, atol=0.0))
    return a["dtype"] == b["dtype"] and scale_ok and a["zero_point"] == b["zero_point"]


class LiteRTStage:
    """One ``.tflite`` file on a LiteRT interpreter; called with and returning dicts by name.

    ``delegate``: a loaded delegate (e.g. ``load_delegate("libedgetpu.so.1", {"device": ":0"})``) or
    None (CPU, XNNPACK). ``preserve_all_tensors``: keep intermediate tensors readable
    (:meth:`tensor`); LiteRT then runs its reference kernels without the default XNNPACK delegate.
    A CPU file that XNNPACK fails to prepare (it refuses some int8 requantization scales that LiteRT's
    own kernels accept) is run on LiteRT's own kernels; ``xnnpack`` says which was used.
    """

    def __init__(
        self, path: str | os.PathLike, num_threads: int = 1, delegate=None, preserve_all_tensors: bool = False
    ) -> None:
        interpreter_cls = litert_interpreter_class()
        self.path = str(path)
        kwargs: dict = {"model_path": self.path, "num_threads": num_threads}
        if delegate is not None:
            kwargs["experimental_delegates"] = [delegate]
        if preserve_all_tensors:
            kwargs["experimental_preserve_all_tensors"] = True
        self.xnnpack = delegate is None and not preserve_all_tensors
        self._build = lambda **extra: interpreter_cls(**kwargs, **extra)
        try:
            self._start()
        except RuntimeError as err:
            self._without_xnnpack(err)

    def _start(self, **extra) -> None:
        with quiet_fds():  # the XNNPACK delegate's INFO line
            self.interpreter = self._build(**extra)
            self.interpreter.allocate_tensors()
        self.inputs = {d["name"]: d for d in self.interpreter.get_input_details()}
        self.outputs = {d["name"]: d for d in self.interpreter.get_output_details()}

    def _without_xnnpack(self, err: RuntimeError) -> None:
        """Re-create the interpreter on LiteRT's own kernels after XNNPACK failed (else re-raise ``err``)."""
        if not self.xnnpack or "XNNPACK" not in str(err):
            raise err
        from ai_edge_litert.interpreter import OpResolverType

        self._start(experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        self.xnnpack = False

    def __call__(self, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            self._invoke(tensors)
        except RuntimeError as err:  # XNNPACK may prepare lazily, at the first invoke
            self._without_xnnpack(err)
            self._invoke(tensors)
        return {name: self.interpreter.get_tensor(d["index"]) for name, d in self.outputs.items()}

    def _invoke(self, tensors: dict[str, np.ndarray]) -> None:
        for name, d in self.inputs.items():
            self.interpreter.set_tensor(d["index"], tensors[name])
        self.interpreter.invoke()

    def _detail(self, name: str) -> dict:
        for d in self.interpreter.get_tensor_details():
            if d["name"] == name:
                return d
        raise KeyError(f"{self.path}: no tensor named {name!r}")

    def tensor(self, name: str) -> np.ndarray:
        """The float32 value of the tensor ``name`` after the last call (needs ``preserve_all_tensors``)."""
        d = self._detail(name)
        scale, zp = d["quantization"]
        detail = {"dtype": str(np.dtype(d["dtype"])), "scale": float(scale), "zero_point": int(zp)}
        return dequantize(self.interpreter.get_tensor(d["index"]), detail)

    def scale(self, name: str) -> float:
        """The quantization scale of the tensor ``name`` (0 for a float tensor)."""
        return float(self._detail(name)["quantization"][0])


@dataclass
class PipelineResult:
    """Outputs (float32, by model output name, one dict per input) and the timing report."""

    outputs: list[dict[str, np.ndarray]]
    report: dict = field(default_factory=dict)


def _stats(values: Sequence[float]) -> dict:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return {"mean_s": None, "median_s": None, "p90_s": None, "n": 0}
    return {
        "mean_s": float(arr.mean()),
        "median_s": float(np.median(arr)),
        "p90_s": float(np.percentile(arr, 90)),
        "n": int(arr.size),
    }


def _adapters(manifest: dict, variant: str) -> list[Callable[[dict], dict]]:
    """Per stage: converts the incoming dict to the stage's input encodings (by manifest io)."""
    stages = manifest["stages"]
    adapters = []
    for k, st in enumerate(stages):
        ins = st["io"][variant]["inputs"]
        if k == 0:
            adapters.append(lambda d, ins=ins: {n: quantize(d[n], ins[n]) for n in ins})
            continue
        prev = stages[k - 1]["io"][variant]["outputs"]
        convert = {n for n in ins if not _same_encoding(prev[n], ins[n])}
        if not convert:
            adapters.append(lambda d: d)
        else:
            adapters.append(
                lambda d, ins=ins, prev=prev, convert=convert: {
                    n: (quantize(dequantize(d[n], prev[n]), ins[n]) if n in convert else d[n]) for n in ins
                }
            )
    return adapters


def _final(manifest: dict, variant: str) -> Callable[[dict], dict]:
    outs = manifest["stages"][-1]["io"][variant]["outputs"]
    names = manifest["model_outputs"]
    return lambda d: {n: dequantize(d[n], outs[n]) for n in names}


def as_input_dicts(manifest: dict, inputs) -> list[dict[str, np.ndarray]]:
    """Accept arrays (single-input models), lists of arrays, or dicts keyed by input name."""
    names = manifest["model_inputs"]
    rows = []
    for x in inputs:
        if isinstance(x, dict):
            rows.append({n: np.asarray(x[n], np.float32) for n in names})
        elif isinstance(x, list | tuple):
            rows.append({n: np.asarray(v, np.float32) for n, v in zip(names, x, strict=True)})
        else:
            rows.append({names[0]: np.asarray(x, np.float32)})
    return rows


def random_inputs(manifest: dict, count: int, seed: int = 1, input_range: tuple[float, float] = (-1.0, 1.0)) -> list:
    """``count`` seeded uniform float inputs shaped like the manifest's model inputs."""
    rng = np.random.default_rng(seed)
    shapes = {n: manifest["tensors"][n]["shape"] for n in manifest["model_inputs"]}
    return [{n: rng.uniform(*input_range, size=s).astype(np.float32) for n, s in shapes.items()} for _ in range(count)]


def run_litert_pipeline(
    manifest: dict,
    root: Path,
    inputs,
    variant: str = "float32",
    queue_size: int = 2,
    num_threads: int = 1,
    warmup: int = 2,
    edgetpu: bool = False,
) -> PipelineResult:
    """Run the stages of ``manifest`` as a threaded LiteRT pipeline over ``inputs``.

    ``edgetpu``: run the Edge-TPU-compiled stages through ``load_delegate("libedgetpu.so.1")``, stage
    ``k`` on Edge TPU ``:k`` (Coral's documented LiteRT route); else the CPU files of ``variant``.
    """
    if variant not in manifest["variants"]:
        raise ValueError(f"variant {variant!r} was not built; the manifest has {', '.join(manifest['variants'])}")
    rows = as_input_dicts(manifest, inputs)
    stages = litert_stages(manifest, root, variant, num_threads, edgetpu)
    adapters = _adapters(manifest, variant)
    final = _final(manifest, variant)
    for row in rows[: min(warmup, len(rows))]:  # warm each interpreter outside the timed stream
        d = row
        for stage, adapt in zip(stages, adapters, strict=True):
            d = stage(adapt(d))

    k = len(stages)
    queues = [queue.Queue(maxsize=queue_size) for _ in range(k + 1)]
    service: list[list[float]] = [[] for _ in range(k)]
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        q_in, q_out = queues[i], queues[i + 1]
        while True:
            item = q_in.get()
            if item is _STOP:
                q_out.put(_STOP)
                return
            seq, t_in, d = item
            try:
                t0 = time.perf_counter()
                out = stages[i](adapters[i](d))
                service[i].append(time.perf_counter() - t0)
            except BaseException as err:  # surface in the caller, keep the pipeline draining
                errors.append(err)
                out = {}
            q_out.put((seq, t_in, out))

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(k)]
    for t in threads:
        t.start()
    results: list[dict | None] = [None] * len(rows)
    latency: list[float] = []
    t_first = time.perf_counter()

    def feed() -> None:
        for seq, row in enumerate(rows):
            queues[0].put((seq, time.perf_counter(), row))
        queues[0].put(_STOP)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    t_last = t_first
    while True:
        item = queues[k].get()
        if item is _STOP:
            break
        seq, t_in, d = item
        t_last = time.perf_counter()
        latency.append(t_last - t_in)
        results[seq] = final(d) if d else None
    feeder.join()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"pipeline stage failed: {errors[0]}") from errors[0]
    wall = t_last - t_first
    report = {
        "backend": "edgetpu" if edgetpu else "litert",
        "variant": variant,
        "num_stages": k,
        "items": len(rows),
        "queue_size": queue_size,
        "num_threads_per_stage": num_threads,
        "xnnpack_per_stage": [stage.xnnpack for stage in stages],
        "wall_s": wall,
        "throughput_per_s": len(rows) / wall if wall > 0 else None,
        "end_to_end": _stats(latency),
        "stages": [
            {**_stats(service[i]), "busy_fraction": float(sum(service[i]) / wall) if wall > 0 else None}
            for i in range(k)
        ],
    }
    return PipelineResult(outputs=results, report=report)


def litert_stages(
    manifest: dict, root: Path, variant: str, num_threads: int = 1, edgetpu: bool = False
) -> list[LiteRTStage]:
    """One interpreter per stage: the CPU file of ``variant``, or (``edgetpu``) the compiled file with
    the Edge TPU delegate on device ``:k``."""
    if not edgetpu:
        return [LiteRTStage(root / st["files"][variant], num_threads) for st in manifest["stages"]]
    load_delegate = litert_load_delegate()
    stages = []
    for k, st in enumerate(manifest["stages"]):
        compiled = (st.get("edgetpu") or {}).get("file")
        if not compiled:
            raise ValueError(f"stage {k} was not compiled with edgetpu_compiler")
        try:
            delegate = load_delegate(EDGETPU_LIBRARY, {"device": f":{k}"})
        except ValueError as err:
            raise ValueError(f"cannot open Edge TPU :{k} for stage {k} through {EDGETPU_LIBRARY} ({err})") from None
        stages.append(LiteRTStage(root / compiled, num_threads, delegate=delegate))
    return stages


def run_single(
    path: str | os.PathLike, manifest: dict, inputs, variant: str, num_threads: int = 1, warmup: int = 2
) -> PipelineResult:
    """The unsegmented ``full_<variant>.tflite`` on one interpreter, inputs one after another."""
    rows = as_input_dicts(manifest, inputs)
    stage = LiteRTStage(path, num_threads)
    ins, outs = manifest["full"]["io"][variant]["inputs"], manifest["full"]["io"][variant]["outputs"]
    for row in rows[: min(warmup, len(rows))]:
        stage({n: quantize(row[n], ins[n]) for n in ins})
    times, results = [], []
    t_first = time.perf_counter()
    for row in rows:
        t0 = time.perf_counter()
        out = stage({n: quantize(row[n], ins[n]) for n in ins})
        times.append(time.perf_counter() - t0)
        results.append({n: dequantize(out[n], outs[n]) for n in manifest["model_outputs"]})
    wall = time.perf_counter() - t_first
    report = {
        "backend": "litert",
        "variant": variant,
        "num_stages": 1,
        "items": len(rows),
        "num_threads": num_threads,
        "xnnpack": stage.xnnpack,
        "wall_s": wall,
        "throughput_per_s": len(rows) / wall if wall > 0 else None,
        "end_to_end": _stats(times),
    }
    return PipelineResult(outputs=results, report=report)


def profile_stages(
    manifest: dict, root: Path, inputs, variant: str, num_threads: int = 1, repeats: int = 5
) -> list[dict]:
    """Each stage timed alone: median service time over ``repeats`` x inputs (calibration data)."""
    rows = as_input_dicts(manifest, inputs)
    stages = [LiteRTStage(root / st["files"][variant], num_threads) for st in manifest["stages"]]
    adapters = _adapters(manifest, variant)
    feeds: list[list[dict]] = [[] for _ in stages]
    for row in rows:  # the real inputs of every stage
        d = row
        for i, (stage, adapt) in enumerate(zip(stages, adapters, strict=True)):
            d = adapt(d)
            feeds[i].append(d)
            d = stage(d)
    out = []
    for i, stage in enumerate(stages):
        stage(feeds[i][0])
        times = []
        for _ in range(repeats):
            for d in feeds[i]:
                t0 = time.perf_counter()
                stage(d)
                times.append(time.perf_counter() - t0)
        out.append({"stage": i, **_stats(times)})
    return out


def pycoral_status(num_stages: int, manifest: dict | None = None) -> tuple[bool, str]:
    """(usable, reason): can the pycoral/Edge TPU path run this manifest here?"""
    edgetpu = google_pycoral()
    if edgetpu is None:
        return False, "Google's pycoral is not installed (it is not on PyPI; see coral.ai/software)"
    try:
        tpus = edgetpu.list_edge_tpus()
    except Exception as err:  # libedgetpu missing or broken
        return False, f"cannot list Edge TPUs ({err})"
    if len(tpus) < num_stages:
        return False, f"{len(tpus)} Edge TPU(s) found, {num_stages} needed"
    if manifest is not None and not all(st.get("edgetpu", {}).get("status") == "compiled" for st in manifest["stages"]):
        return False, "the segments were not compiled with edgetpu_compiler"
    return True, f"{len(tpus)} Edge TPUs"


def run_pycoral_pipeline(manifest: dict, root: Path, inputs, queue_size: int = 2, warmup: int = 2) -> PipelineResult:
    """PipelinedModelRunner over the Edge-TPU-compiled stages (one TPU per stage).

    Code-complete but never run in this project's CI (no Edge TPU there).
    """
    import importlib

    edgetpu = google_pycoral()
    if edgetpu is None:
        raise ValueError("Google's pycoral is not installed")
    pmr = importlib.import_module("pycoral.pipeline.pipelined_model_runner")
    rows = as_input_dicts(manifest, inputs)
    interpreters = []
    for i, st in enumerate(manifest["stages"]):
        it = edgetpu.make_interpreter(str(root / st["edgetpu"]["file"]), device=f":{i}")
        it.allocate_tensors()
        interpreters.append(it)
    runner = pmr.PipelinedModelRunner(interpreters)
    runner.set_input_queue_size(queue_size)
    runner.set_output_queue_size(queue_size)
    ins = manifest["stages"][0]["io"]["int8"]["inputs"]
    final = _final(manifest, "int8")

    def push_all(items: list[dict], stamps: list[float]) -> None:
        for row in items:
            stamps.append(time.perf_counter())
            runner.push({n: quantize(row[n], ins[n]) for n in ins})
        runner.push({})

    for row in rows[:warmup]:
        runner.push({n: quantize(row[n], ins[n]) for n in ins})
        runner.pop()
    stamps: list[float] = []
    pusher = threading.Thread(target=push_all, args=(rows, stamps), daemon=True)
    t_first = time.perf_counter()
    pusher.start()
    results, latency, t_last = [], [], t_first
    while True:
        out = runner.pop()
        if not out:
            break
        t_last = time.perf_counter()
        latency.append(t_last - stamps[len(results)])
        results.append(final(out))
    pusher.join()
    wall = t_last - t_first
    report = {
        "backend": "pycoral",
        "variant": "int8",
        "num_stages": len(interpreters),
        "items": len(rows),
        "wall_s": wall,
        "throughput_per_s": len(rows) / wall if wall > 0 else None,
        "end_to_end": _stats(latency),
    }
    stats_fn = getattr(runner, "segment_stats", None)
    if callable(stats_fn):
        report["segment_stats"] = [
            {"total_time_ns": int(s.total_time_ns), "num_inferences": int(s.num_inferences)} for s in stats_fn()
        ]
    return PipelineResult(outputs=results, report=report)


BACKENDS = ("auto", "pycoral", "edgetpu", "litert")


def edgetpu_delegate_status(manifest: dict) -> tuple[bool, str]:
    """(usable, reason): can the stages run through ``load_delegate("libedgetpu.so.1")`` here?"""
    present, why = edgetpu_library_present()
    if not present:
        return False, why
    if not all((st.get("edgetpu") or {}).get("status") == "compiled" for st in manifest["stages"]):
        return False, f"{why}, but the segments were not compiled with edgetpu_compiler"
    return True, f"{why}, segments compiled"


def choose_backend(manifest: dict, variant: str, backend: str = "auto") -> tuple[str, str]:
    """(backend, reason) for running ``manifest``: ``auto`` takes, for ``variant="int8"``, pycoral's
    PipelinedModelRunner when Google's pycoral, enough Edge TPUs and compiled segments are there, else
    LiteRT with the Edge TPU delegate when ``libedgetpu.so.1`` loads and the segments are compiled,
    else LiteRT on CPU threads. A backend named explicitly that cannot run is a ``ValueError``."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "litert":
        return "litert", "LiteRT on CPU threads (backend=litert)"
    pc_ok, pc_why = pycoral_status(manifest["num_stages"], manifest)
    if backend == "pycoral":
        if not pc_ok:
            raise ValueError(f"pycoral backend unavailable: {pc_why}")
        return "pycoral", f"pycoral PipelinedModelRunner on Edge TPUs ({pc_why})"
    et_ok, et_why = edgetpu_delegate_status(manifest)
    if backend == "edgetpu":
        if not et_ok:
            raise ValueError(f"edgetpu backend unavailable: {et_why}")
        return "edgetpu", f"LiteRT with load_delegate({EDGETPU_LIBRARY!r}) on Edge TPUs ({et_why})"
    if variant == "int8" and pc_ok:
        return "pycoral", f"pycoral PipelinedModelRunner on Edge TPUs ({pc_why})"
    if variant == "int8" and et_ok:
        return "edgetpu", f"LiteRT with load_delegate({EDGETPU_LIBRARY!r}) on Edge TPUs ({et_why}; pycoral: {pc_why})"
    return "litert", f"LiteRT on CPU threads (Edge TPU not used: pycoral: {pc_why}; delegate: {et_why})"


def run_manifest(
    manifest_path: str | os.PathLike,
    inputs,
    variant: str = "float32",
    backend: str = "auto",
    queue_size: int = 2,
    num_threads: int = 1,
    warmup: int = 2,
) -> PipelineResult:
    """Run a manifest on the backend :func:`choose_backend` picks; the reason is in
    ``report["backend_note"]``. With ``auto``, an Edge TPU delegate that fails to open (no device)
    falls back to LiteRT on CPU, and the note says so."""
    manifest, root = load_manifest(manifest_path)
    chosen, why = choose_backend(manifest, variant, backend)
    if chosen == "pycoral":
        result = run_pycoral_pipeline(manifest, root, inputs, queue_size, warmup)
    elif chosen == "edgetpu":
        try:
            result = run_litert_pipeline(manifest, root, inputs, variant, queue_size, num_threads, warmup, True)
        except ValueError as err:
            if backend != "auto":
                raise
            result = run_litert_pipeline(manifest, root, inputs, variant, queue_size, num_threads, warmup)
            why = f"LiteRT on CPU threads (the Edge TPU delegate failed: {err})"
    else:
        result = run_litert_pipeline(manifest, root, inputs, variant, queue_size, num_threads, warmup)
    result.report["backend_note"] = why
    return result


def compare_outputs(a: list[dict], b: list[dict]) -> dict:
    """How far output stream ``a`` is from reference stream ``b`` (float, same names).

    ``max_abs_diff``, ``mean_abs_diff``, ``max_abs_reference`` (largest |b|), ``relative``
    (max_abs_diff / max_abs_reference) and ``rel_rms`` (RMS of a - b over RMS of b).
    """
    diffs, refs = [], []
    for x, y in zip(a, b, strict=True):
        for n in y:
            diffs.append((np.asarray(x[n], np.float64) - np.asarray(y[n], np.float64)).ravel())
            refs.append(np.asarray(y[n], np.float64).ravel())
    d, r = np.concatenate(diffs), np.concatenate(refs)
    max_abs, scale = float(np.max(np.abs(d))), float(np.max(np.abs(r)))
    rms_ref = float(np.sqrt(np.mean(r**2)))
    return {
        "max_abs_diff": max_abs,
        "mean_abs_diff": float(np.mean(np.abs(d))),
        "max_abs_reference": scale,
        "relative": max_abs / scale if scale else 0.0,
        "rel_rms": float(np.sqrt(np.mean(d**2))) / rms_ref if rms_ref else 0.0,
    }


def float32_bound(num_nodes: int, max_abs_reference: float) -> float:
    """Largest float32 |pipeline - unsegmented| explained by reassociation (module docstring)."""
    eps = float(np.finfo(np.float32).eps)
    return FLOAT32_EPS_PER_NODE * eps * max(1, int(num_nodes)) * max(1.0, float(max_abs_reference))


def int8_bound(num_stages: int, step: float) -> float:
    """Largest int8 |pipeline - unsegmented int8| (dequantized) allowed: (1 + cuts) output steps."""
    return (1.0 + INT8_STEPS_PER_CUT * max(0, int(num_stages) - 1)) * float(step)


def constant_outputs(stream: list[dict]) -> dict[str, float]:
    """Outputs whose every value, over every element and input, is one number (name -> that number).

    A comparison with such a reference cannot fail for a pipeline that outputs that constant whatever
    it computes (e.g. a random-weight int8 model whose outputs all quantize to 0).
    """
    out = {}
    for name in stream[0] if stream else {}:
        values = np.concatenate([np.asarray(row[name], np.float64).ravel() for row in stream])
        if values.size and float(values.min()) == float(values.max()):
            out[name] = float(values[0])
    return out


def _pointwise(variant: str, a: list[dict], b: list[dict], step: float, num_nodes: int, num_stages: int,
               exact: bool) -> tuple[dict, float, str]:
    """(comparison, bound, criterion text) of stream ``a`` against reference ``b``."""
    diff = compare_outputs(a, b)
    if exact:
        return diff, 0.0, "identical values (the segments run the model's own operators on the same tensors)"
    if variant == "float32":
        bound = float32_bound(num_nodes, diff["max_abs_reference"])
        text = (f"max |pipeline - unsegmented| <= {FLOAT32_EPS_PER_NODE:g} eps32 x {num_nodes} nodes "
                f"x max(1, max |unsegmented|) = {bound:.3g}")
        return diff, bound, text
    bound = int8_bound(num_stages, step)
    text = f"max |pipeline - unsegmented int8| <= (1 + {INT8_STEPS_PER_CUT:g} per cut) output steps = {bound:.3g}"
    return diff, bound, text


def check_equality(
    variant: str,
    pipeline: list[dict],
    unsegmented: list[dict],
    float_reference: list[dict] | None,
    step: float,
    num_nodes: int = 1,
    num_stages: int = 1,
    exact: bool = False,
    probes: list[dict] | None = None,
) -> dict:
    """The stated equality criterion (module docstring) with the numbers behind it.

    ``float_reference``: outputs of the float32 model (int8 only; None when not built).
    ``exact``: the segments were cut from the reference file itself (same operators, same
    quantization), so outputs must be identical.
    ``probes``: :func:`probe_pre_activations` entries (the tensor before each output activation, in
    the pipeline and in the unsegmented model), checked by the same criterion with their own
    quantization step; a mismatch fails the check (int8 re-converted stages: inconclusive).
    ``ok``: True (equal within the bound), False (not), None (inconclusive: a constant reference
    output, or int8 noise, see the module docstring).
    """
    out = _outputs_equality(variant, pipeline, unsegmented, float_reference, step, num_nodes, num_stages, exact)
    notes = [out["note"]] if out.get("note") else []
    checked = []
    for probe in probes or []:
        diff, bound, text = _pointwise(
            variant, probe["pipeline"], probe["unsegmented"], probe["step"], num_nodes, num_stages, exact
        )
        ok = bool(diff["max_abs_diff"] <= bound * (1 + 1e-4))
        constant = bool(constant_outputs(probe["unsegmented"]))
        checked.append({"output": probe["output"], "tensor": probe["tensor"], "stage": probe["stage"],
                        "vs_unsegmented": diff, "bound": bound, "criterion": text, "ok": ok,
                        "constant_reference": constant})
        if not ok:
            if variant == "int8" and not exact:
                out["ok"] = False if out["ok"] is False else None
                notes.append(f"inconclusive: the tensor before the activation of {probe['output']} differs by "
                             f"{diff['max_abs_diff']:.3g} (> {bound:.3g}; re-quantized stages)")
            else:
                out["ok"] = False
                notes.append(f"the tensor before the activation of {probe['output']} ({probe['tensor']}) differs by "
                             f"{diff['max_abs_diff']:.3g} (> {bound:.3g})")
    if probes is not None:
        out["pre_activation"] = checked
    constant = constant_outputs(unsegmented)
    out["constant_reference_outputs"] = constant
    if constant and out["ok"] is not False:
        out["ok"] = None
        agree = [c["output"] for c in checked if c["ok"] and not c["constant_reference"]]
        notes.append(
            "inconclusive: the unsegmented model's output "
            + ", ".join(f"{n} is {v:g} everywhere" for n, v in constant.items())
            + " on these inputs, so comparing outputs cannot fail"
            + (f" (the tensor before the activation of {', '.join(agree)} varies and agrees)" if agree else "")
        )
    if notes:
        out["note"] = "; ".join(notes)
    return out


def _outputs_equality(
    variant: str,
    pipeline: list[dict],
    unsegmented: list[dict],
    float_reference: list[dict] | None,
    step: float,
    num_nodes: int,
    num_stages: int,
    exact: bool,
) -> dict:
    """The output comparison of :func:`check_equality` (without probes and the constant rule)."""
    vs_full, bound, text = _pointwise(variant, pipeline, unsegmented, step, num_nodes, num_stages, exact)
    out = {"variant": variant, "vs_unsegmented": vs_full, "output_quant_step": step, "bound": bound,
           "criterion": text}
    if exact or variant == "float32":
        out["ok"] = bool(vs_full["max_abs_diff"] <= bound)
        return out
    pointwise_ok = bool(vs_full["max_abs_diff"] <= bound * (1 + 1e-4))  # 1e-4: dequantization rounding
    out["max_diff_in_quant_steps"] = vs_full["max_abs_diff"] / step if step else None
    if float_reference is None:
        out["int8_reference_meaningful"] = None
        out["ok"] = True if pointwise_ok else None
        if not pointwise_ok:
            out["note"] = "inconclusive: no float32 reference to tell int8 noise from a wrong result"
        return out
    pipe_err = compare_outputs(pipeline, float_reference)
    full_err = compare_outputs(unsegmented, float_reference)
    meaningful = full_err["rel_rms"] <= INT8_MEANINGFUL_REL_RMS
    no_worse = (
        pipe_err["mean_abs_diff"] <= INT8_VS_FLOAT_RATIO * full_err["mean_abs_diff"] + step
        and pipe_err["rel_rms"] <= INT8_VS_FLOAT_RATIO * full_err["rel_rms"]
    )
    out.update(
        {
            "pipeline_vs_float": pipe_err,
            "unsegmented_vs_float": full_err,
            "int8_reference_meaningful": meaningful,
            "mae_ratio": pipe_err["mean_abs_diff"] / full_err["mean_abs_diff"] if full_err["mean_abs_diff"] else None,
        }
    )
    if pointwise_ok:
        out["ok"] = True
    elif meaningful or not no_worse:
        out["ok"] = False
    else:
        out["ok"] = None
        out["note"] = (
            f"inconclusive: the unsegmented int8 model is itself {full_err['rel_rms']:.2f} relative RMS from "
            f"float32 (> {INT8_MEANINGFUL_REL_RMS:g}), so int8 outputs are mostly quantization noise; the pipeline "
            "is no worse against float32"
        )
    return out


# ----------------------------------------------------------------------------- pre-activation probes

# operators whose input is "the last tensor before the output activation"
ACTIVATION_OPS = frozenset(
    {"SOFTMAX", "LOG_SOFTMAX", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU",
     "HARD_SWISH", "GELU", "ELU", "PRELU"}
)
_TRANSPARENT_OPS = frozenset({"QUANTIZE", "DEQUANTIZE"})  # a float-interface model's output conversion


def pre_activation_tensor(path: str | os.PathLike, output_name: str) -> str | None:
    """The input tensor of the activation operator producing ``output_name`` in the file ``path``
    (looking through QUANTIZE/DEQUANTIZE), or None: no such activation, or ``output_name`` is not
    computed in this file (only forwarded, or absent)."""
    from respect_jax.coral._deps import litert_flatbuffers

    fbu, _ = litert_flatbuffers()
    model = fbu.read_model(str(path))
    sg = model.subgraphs[0]
    names = [t.name.decode() if isinstance(t.name, bytes) else str(t.name or "") for t in sg.tensors]
    producer = {int(t): op for op in sg.operators for t in op.outputs or [] if t >= 0}
    if output_name not in names:
        return None
    t = names.index(output_name)
    while t in producer:
        op = producer[t]
        kind = fbu.opcode_to_name(model, op.opcodeIndex)
        if kind in _TRANSPARENT_OPS and op.inputs is not None and len(op.inputs):
            t = int(op.inputs[0])
            continue
        return names[int(op.inputs[0])] if kind in ACTIVATION_OPS and len(op.inputs) else None
    return None


def probe_pre_activations(manifest: dict, root: Path, inputs, variant: str) -> list[dict]:
    """The tensor before each output activation, in the unsegmented model and in the stage chain.

    For every model output produced by an activation (:data:`ACTIVATION_OPS`) in the unsegmented file,
    the activation's input tensor is read (dequantized) in that file and in the stage that computes the
    output, the stages chained one after another. Both runs keep all tensors
    (``preserve_all_tensors``: LiteRT's reference kernels, without XNNPACK), so they are comparable.
    Returns ``{"output", "tensor", "stage", "step", "pipeline": [{output: array}], "unsegmented": [...]}``
    per probed output (empty if no output comes from an activation).
    """
    rows = as_input_dicts(manifest, inputs)
    full_path = root / manifest["full"]["files"][variant]
    stage_paths = [root / st["files"][variant] for st in manifest["stages"]]
    probes = []
    for out_name in manifest["model_outputs"]:
        full_tensor = pre_activation_tensor(full_path, out_name)
        if full_tensor is None:
            continue
        for k, path in enumerate(stage_paths):
            tensor = pre_activation_tensor(path, out_name)
            if tensor is not None:
                probes.append({"output": out_name, "tensor": tensor, "full_tensor": full_tensor, "stage": k,
                               "pipeline": [], "unsegmented": []})
                break
    if not probes:
        return []
    full = LiteRTStage(full_path, preserve_all_tensors=True)
    stages = [LiteRTStage(p, preserve_all_tensors=True) for p in stage_paths]
    adapters = _adapters(manifest, variant)
    ins = manifest["full"]["io"][variant]["inputs"]
    for row in rows:
        full({n: quantize(row[n], ins[n]) for n in ins})
        d = row
        for k, (stage, adapt) in enumerate(zip(stages, adapters, strict=True)):
            d = stage(adapt(d))
            for probe in probes:
                if probe["stage"] == k:
                    probe["pipeline"].append({probe["output"]: stage.tensor(probe["tensor"])})
        for probe in probes:
            probe["unsegmented"].append({probe["output"]: full.tensor(probe["full_tensor"])})
    for probe in probes:
        probe["step"] = max(full.scale(probe["full_tensor"]), stages[probe["stage"]].scale(probe["tensor"]))
    return probes
