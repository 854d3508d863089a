"""Segmenter: a Keras model + a schedule (node -> stage) -> one ``.tflite`` per stage + a manifest.

Planning (:func:`plan_segments`, pure Python, no TensorFlow)
    Node ids are those of :func:`~respect_jax.coral.keras_export.graph_from_keras` on the same
    model. For a tensor produced by node ``u`` (all outputs of a node travel together):
    ``first(u) = s(u)``, except that a model input enters the pipeline at stage 0 whatever the
    stage of its ``InputLayer``; ``last(u)`` is the latest stage of its consumers, and ``K-1`` if
    it is a model output (outputs leave from the last stage, as in the cost model of
    :mod:`respect_jax.costs`). Stage ``k``
    receives every tensor with ``first(u) < k <= last(u)`` (stage 0 receives the model inputs) and
    sends every tensor with ``first(u) <= k < last(u)``; the last stage sends the model outputs.
    A tensor needed later is thus an input *and* an output of every intermediate stage (forwarded
    unchanged), which is how ``PipelinedModelRunner`` passes tensors along. Empty stages are
    allowed: they only forward.

Building (:func:`segment_keras_model`)
    Each stage becomes a functional Keras sub-model that calls the *original* layer objects (same
    weights) on ``keras.Input`` placeholders named after the boundary tensors, in topological
    order, and returns a dict keyed by tensor name. Each sub-model is converted with
    ``TFLiteConverter``: ``float32`` as is, and ``int8`` as a full-integer model (int8 inputs and
    outputs, ``TFLITE_BUILTINS_INT8``), calibrated on representative data that is *generated*:
    ``samples`` seeded uniform inputs in ``input_range`` pushed through the float Keras model, so
    every stage is calibrated on the activations it will really see. The TFLite tensors of each
    stage's inputs and outputs are renamed to the boundary tensor names (PipelinedModelRunner
    matches tensors by name). In the int8 files every boundary tensor is made to carry its
    producer's encoding on both sides, so raw int8 bytes can cross (as on Edge TPUs): a forwarded
    tensor (no operator touches it, so the converter leaves it float32) is stored as int8 with the
    producer's scale, and where a consumer insists on another scale (a Concatenate forces its
    inputs onto its output scale) an int8 -> int8 ``QUANTIZE`` op is inserted at the stage's entry
    (:func:`rename_io_tensors`). Model inputs take the unsegmented int8 model's input encoding.
    The unsegmented model is converted the same way (``full_<variant>.tflite``) as the reference.

    :func:`set_batchnorm_statistics` (used by the CLI for bundled models only, never for a user's
    trained ``.keras`` file unless asked) first gives random-weight models sane BatchNorm
    statistics, otherwise their outputs are ~0 and every comparison is vacuous.

    Boundary tensor names (:func:`unique_tensor_names`) are the layer names where those are safe
    and unique after sanitising; a shared layer's later call ``dense@1`` never takes Keras's
    default name ``dense_1`` of another layer.

Edge TPU (optional)
    If ``edgetpu_compiler`` is on PATH each int8 stage is compiled (``edgetpu_compiler -s``) and
    its "On-chip memory used for caching model parameters" / "Off-chip memory used for streaming
    uncached model parameters" lines are parsed into bytes in the manifest. Otherwise the manifest
    says ``"not run: edgetpu_compiler is not on PATH"``.

Manifest (``manifest.json``, format ``respect-jax-segments/1``)
    ``stages[k]``: ``inputs`` / ``outputs`` (tensor names), ``nodes``, ``params``, ``macs``,
    ``in_elements`` (elements entering stage k from earlier stages: the cost model's
    ``in_k / act_bytes``), ``files`` per variant, ``io`` per variant (shape,
    dtype, scale, zero point of every input and output; ``requantized_inputs``), ``edgetpu``
    (when compiled); ``boundaries[k]``: the tensors crossing
    from stage k to k+1; ``tensors``: shape, dtype, producer node and stage span of every boundary
    tensor; ``model_inputs`` / ``model_outputs``; ``full``: the unsegmented files; the schedule.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from respect_jax.coral._deps import (
    edgetpu_compiler_path,
    flatbuffer_utils,
    import_keras,
    import_tensorflow,
    quiet_fds,
)
from respect_jax.coral.keras_export import graph_from_keras, keras_call_nodes, sanitize
from respect_jax.coral.paths import StagedDir, check_output_dir
from respect_jax.graphs.graph import Graph, write_json_atomic

MANIFEST_FORMAT = "respect-jax-segments/1"
# keras.Input placeholders of a stage are named PREFIX + tensor name: Keras wants operation names
# unique inside a model, and a stage may both receive tensor "x" and call the (shared) layer "x".
INPUT_PREFIX = "in__"
VARIANTS = ("float32", "int8")


@dataclass
class StagePlan:
    """What one pipeline stage computes and exchanges (node ids of the exported graph)."""

    index: int
    nodes: list[int] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)  # producer nodes of the received tensors
    outputs: list[int] = field(default_factory=list)  # producer nodes of the sent tensors


@dataclass
class SegmentPlan:
    """The stages of a schedule plus each boundary tensor's stage span ``[first, last]``."""

    num_stages: int
    stages: list[StagePlan]
    first: dict[int, int]
    last: dict[int, int]


def plan_segments(
    graph: Graph, assignment, num_stages: int, input_nodes: list[int], output_nodes: list[int]
) -> SegmentPlan:
    """Stage contents and boundary tensors of a valid schedule (module docstring rules).

    Args:
        graph: the exported graph of the model.
        assignment: int[N] stage of every node.
        num_stages: K.
        input_nodes: ids of the model's input nodes (``InputLayer`` calls), in model input order.
        output_nodes: ids of the nodes producing the model outputs, in model output order.
    """
    s = np.asarray(assignment, dtype=np.int64)
    if s.shape != (graph.num_nodes,):
        raise ValueError(f"assignment has {s.size} entries, graph {graph.name!r} has {graph.num_nodes} nodes")
    if num_stages < 1 or s.min() < 0 or s.max() >= num_stages:
        raise ValueError(f"assignment stages must lie in 0..{num_stages - 1}")
    for u, v in graph.edges.tolist():
        if s[u] > s[v]:
            raise ValueError(f"invalid schedule: edge [{u}, {v}] goes from stage {s[u]} back to stage {s[v]}")
    succs = graph.successors()
    first = {u: (0 if u in input_nodes else int(s[u])) for u in range(graph.num_nodes)}
    last: dict[int, int] = {}
    for u in range(graph.num_nodes):
        ends = [int(s[v]) for v in succs[u]]
        if u in output_nodes:
            ends.append(num_stages - 1)
        last[u] = max(ends) if ends else num_stages - 1
    order = graph.topological_order().tolist()
    stages = [StagePlan(index=k) for k in range(num_stages)]
    for v in order:
        if v not in input_nodes:
            stages[int(s[v])].nodes.append(v)
    crossing = [u for u in order if last[u] > first[u]]
    for k, st in enumerate(stages):
        st.inputs = list(input_nodes) if k == 0 else [u for u in crossing if first[u] < k <= last[u]]
        if k == num_stages - 1:
            st.outputs = list(output_nodes)
        else:
            st.outputs = [u for u in crossing if first[u] <= k < last[u]]
    return SegmentPlan(num_stages=num_stages, stages=stages, first=first, last=last)


# ----------------------------------------------------------------------------- Keras side


def unique_tensor_names(nodes: list[tuple[str, int]]) -> list[list[str]]:
    """Unique ``[A-Za-z0-9_]`` names for the output tensors of graph nodes.

    ``nodes``: ``(node name, number of outputs)`` per node, in node order. A single-output node
    whose name is already safe keeps its name (so outputs are found under their layer's name).
    Every other tensor gets ``sanitize(name)`` (``__i`` appended for output i of a multi-output
    node), and if that is taken (``dense@1`` sanitises to ``dense_1``, Keras's default name of
    the next Dense layer), ``_2``, ``_3``... is appended until it is free.
    """
    taken = {name for name, count in nodes if count == 1 and sanitize(name) == name}
    out: list[list[str]] = []
    for name, count in nodes:
        base = sanitize(name)
        names = []
        for i in range(count):
            wanted = base if count == 1 else f"{base}__{i}"
            if count == 1 and wanted == name:
                names.append(wanted)  # reserved above
                continue
            candidate, k = wanted, 1
            while candidate in taken:
                k += 1
                candidate = f"{wanted}_{k}"
            taken.add(candidate)
            names.append(candidate)
        out.append(names)
    flat = [n for names in out for n in names]
    if len(set(flat)) != len(flat):  # cannot happen by construction; a collision would swap tensors
        raise AssertionError("boundary tensor names are not unique")
    return out


def _tensor_names(calls, node_ids: list[int]) -> dict[int, list[tuple[object, str]]]:
    """Boundary tensors of each node: ``[(keras tensor, unique name), ...]``."""
    unique = unique_tensor_names([(c.name, len(c.node.outputs)) for c in calls])
    return {u: list(zip(calls[u].node.outputs, unique[u], strict=True)) for u in node_ids}


def _io_nodes(model, calls) -> tuple[list[int], list[int]]:
    producer = {id(t): c.index for c in calls for t in c.node.outputs}
    inputs = [producer[id(t)] for t in model.inputs]
    outputs = []
    for t in model.outputs:
        if producer[id(t)] not in outputs:
            outputs.append(producer[id(t)])
    return inputs, outputs


def build_stage_models(model, plan: SegmentPlan, calls=None) -> tuple[list, dict[int, list[tuple[object, str]]]]:
    """One functional Keras model per stage (shared layer objects, dict outputs by tensor name)."""
    keras = import_keras()
    from keras import tree

    calls = calls or keras_call_nodes(model)
    boundary = sorted({u for st in plan.stages for u in st.inputs + st.outputs})
    names = _tensor_names(calls, boundary)
    models = []
    for st in plan.stages:
        values: dict[int, object] = {}
        inputs = []
        for u in st.inputs:
            for t, name in names[u]:
                x = keras.Input(shape=tuple(t.shape[1:]), batch_size=1, dtype=t.dtype, name=INPUT_PREFIX + name)
                values[id(t)] = x
                inputs.append(x)
        for v in st.nodes:
            c = calls[v]
            args, kwargs = c.node.arguments.fill_in(values)
            result = c.operation(*args, **kwargs)
            for t, y in zip(c.node.outputs, tree.flatten(result), strict=True):
                values[id(t)] = y
        outputs = {name: values[id(t)] for u in st.outputs for t, name in names[u]}
        models.append(keras.Model(inputs=inputs, outputs=outputs, name=f"stage{st.index}"))
    return models, names


def set_batchnorm_statistics(model, inputs: list[list[np.ndarray]]) -> int:
    """Set every BatchNormalization's moving mean/variance to its input statistics on ``inputs``.

    ``keras.applications`` models built with ``weights=None`` keep BN's initial moving statistics
    (mean 0, variance 1), so activations shrink layer after layer and deep models output almost
    exactly 0, which makes output comparisons meaningless. One forward pass in training mode
    (where every BN normalises by the batch's own statistics) gives each BN's input statistics;
    storing them as the moving statistics makes inference reproduce that normalisation. Weights
    and graph are unchanged. Returns the number of BN layers updated.
    """
    keras = import_keras()
    bns = [
        c
        for c in keras_call_nodes(model)
        if type(c.operation).__name__ == "BatchNormalization" and c.node.input_tensors
    ]
    if not bns:
        return 0
    probe = keras.Model(inputs=model.inputs, outputs=[c.node.input_tensors[0] for c in bns])
    batch = [np.concatenate([row[i] for row in inputs]) for i in range(len(model.inputs))]
    outs = probe(batch, training=True)
    outs = outs if isinstance(outs, list | tuple) else [outs]
    for c, x in zip(bns, outs, strict=True):
        layer = c.operation
        x = np.asarray(x, dtype=np.float64)
        axis = layer.axis if isinstance(layer.axis, int) else layer.axis[0]
        axis = axis % x.ndim
        reduce = tuple(i for i in range(x.ndim) if i != axis)
        layer.moving_mean.assign(x.mean(axis=reduce).astype(np.float32))
        layer.moving_variance.assign(x.var(axis=reduce).astype(np.float32))
    return len(bns)


def representative_inputs(model, samples: int, seed: int, input_range: tuple[float, float]) -> list[list[np.ndarray]]:
    """``samples`` seeded uniform input lists (one array per model input, batch 1)."""
    rng = np.random.default_rng(seed)
    lo, hi = input_range
    return [
        [rng.uniform(lo, hi, size=(1, *tuple(t.shape[1:]))).astype(np.float32) for t in model.inputs]
        for _ in range(samples)
    ]


def boundary_values(model, names: dict[int, list[tuple[object, str]]], inputs: list[list[np.ndarray]]) -> list[dict]:
    """Float activations of every boundary tensor, by name, for each input sample."""
    keras = import_keras()
    flat = [(t, name) for pairs in names.values() for t, name in pairs]
    probe = keras.Model(inputs=model.inputs, outputs=[t for t, _ in flat])
    rows = []
    for x in inputs:
        outs = probe(list(x), training=False)
        outs = outs if isinstance(outs, list | tuple) else [outs]
        rows.append({name: np.asarray(o) for (_, name), o in zip(flat, outs, strict=True)})
    return rows


def convert_to_tflite(keras_model, variant: str, representative: list[dict] | None = None) -> bytes:
    """Convert a (stage) Keras model; ``int8`` = full-integer with int8 inputs and outputs.

    ``representative``: for int8, dicts of float arrays keyed by boundary tensor name (the
    model's input names without :data:`INPUT_PREFIX`).
    """
    tf = import_tensorflow()
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    converter = tf.lite.TFLiteConverter.from_keras_model(keras_model)
    if variant == "int8":
        if not representative:
            raise ValueError("int8 conversion needs representative data")
        in_names = [t.name for t in keras_model.inputs]

        def gen():
            for row in representative:
                yield {n: row[n.removeprefix(INPUT_PREFIX)] for n in in_names}

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = gen
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    with quiet_fds():
        return converter.convert()


def _close_quant(a: tuple[float, int], b: tuple[float, int]) -> bool:
    """Same int8 encoding (scales equal up to float32 rounding, zero points equal)."""
    return bool(np.isclose(a[0], b[0], rtol=1e-6, atol=0.0)) and int(a[1]) == int(b[1])


def rename_io_tensors(buf: bytes, producer_quant: dict[str, tuple[float, int]] | None = None) -> tuple[bytes, dict]:
    """Rename each signature input/output tensor to its signature key; return (bytes, io details).

    ``producer_quant`` (int8 stage files): boundary tensor name -> (scale, zero point) the
    producing stage emits. Each input of this stage is made to accept exactly that encoding:

    * a float32 input that no operator reads (a forwarded tensor) becomes int8 with it;
    * an int8 input quantized differently (e.g. a Concatenate forces its inputs onto its output
      scale) gets a new input tensor with the producer's encoding feeding an inserted int8 ->
      int8 ``QUANTIZE`` (requantize) operator into the original one.

    io details: ``{"inputs": {name: {...}}, "outputs": {...}, "requantized_inputs": [...]}`` with
    shape, dtype, scale, zero point per tensor.
    """
    import copy

    fbu = flatbuffer_utils()
    from tensorflow.lite.python import schema_py_generated as schema

    model = fbu.convert_bytearray_to_object(bytearray(buf))
    sg = model.subgraphs[0]
    sig = model.signatureDefs[0]
    for entry in list(sig.inputs) + list(sig.outputs):
        key = entry.name.decode() if isinstance(entry.name, bytes) else entry.name
        entry.name = key.removeprefix(INPUT_PREFIX)
        sg.tensors[entry.tensorIndex].name = entry.name.encode()
    touched = {t for op in sg.operators for t in list(op.inputs) + list(op.outputs)}
    requantized = []
    for entry in sig.inputs if producer_quant else []:
        key = entry.name.decode() if isinstance(entry.name, bytes) else entry.name
        if key not in producer_quant:
            continue
        scale, zp = producer_quant[key]
        tensor = sg.tensors[entry.tensorIndex]
        if tensor.type == schema.TensorType.FLOAT32 and entry.tensorIndex not in touched:
            tensor.type = schema.TensorType.INT8
            tensor.quantization = _quant_params(schema, scale, zp)
        elif tensor.type == schema.TensorType.INT8 and not _close_quant(_tensor_quant(tensor), (scale, zp)):
            fresh = copy.deepcopy(tensor)
            fresh.quantization = _quant_params(schema, scale, zp)
            fresh.buffer = 0
            sg.tensors.append(fresh)
            new_idx = len(sg.tensors) - 1
            op = schema.OperatorT()
            op.opcodeIndex = _opcode_index(model, schema, schema.BuiltinOperator.QUANTIZE, version=2)
            op.inputs, op.outputs = [new_idx], [entry.tensorIndex]
            sg.operators.insert(0, op)
            sg.inputs = [new_idx if int(i) == entry.tensorIndex else int(i) for i in sg.inputs]
            entry.tensorIndex = new_idx
            requantized.append(key)
    details: dict = {"inputs": {}, "outputs": {}, "requantized_inputs": requantized}
    for side, entries in (("inputs", sig.inputs), ("outputs", sig.outputs)):
        for entry in entries:
            key = entry.name.decode() if isinstance(entry.name, bytes) else entry.name
            tensor = sg.tensors[entry.tensorIndex]
            scale, zp = _tensor_quant(tensor)
            details[side][key] = {
                "shape": [int(d) for d in tensor.shape],
                "dtype": _type_name(schema, tensor.type),
                "scale": scale,
                "zero_point": zp,
            }
    return bytes(fbu.convert_object_to_bytearray(model)), details


def _tensor_quant(tensor) -> tuple[float, int]:
    q = tensor.quantization
    scale = float(q.scale[0]) if q is not None and q.scale is not None and len(q.scale) else 0.0
    zp = int(q.zeroPoint[0]) if q is not None and q.zeroPoint is not None and len(q.zeroPoint) else 0
    return scale, zp


def _quant_params(schema, scale: float, zero_point: int):
    q = schema.QuantizationParametersT()
    q.scale, q.zeroPoint = [float(scale)], [int(zero_point)]
    return q


def _opcode_index(model, schema, builtin: int, version: int) -> int:
    for i, code in enumerate(model.operatorCodes):
        if max(int(code.builtinCode), int(code.deprecatedBuiltinCode)) == builtin:
            code.version = max(int(code.version), version)
            return i
    code = schema.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = builtin, min(builtin, 127), version
    model.operatorCodes.append(code)
    return len(model.operatorCodes) - 1


def _type_name(schema, code: int) -> str:
    for k, v in vars(schema.TensorType).items():
        if v == code and not k.startswith("_"):
            return k.lower()
    return str(code)


_MEM_RE = re.compile(
    r"(On-chip memory used for caching model parameters|On-chip memory remaining for caching model parameters|"
    r"Off-chip memory used for streaming uncached model parameters):\s*([\d.]+)\s*([KMG]?i?B)"
)
_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "KB": 1000, "MB": 1000**2, "GB": 1000**3}


def parse_edgetpu_log(text: str) -> dict:
    """Bytes from edgetpu_compiler's memory lines (``on_chip_bytes``, ``off_chip_bytes``...)."""
    keys = {
        "On-chip memory used for caching model parameters": "on_chip_bytes",
        "On-chip memory remaining for caching model parameters": "on_chip_remaining_bytes",
        "Off-chip memory used for streaming uncached model parameters": "off_chip_bytes",
    }
    out: dict = {}
    for label, value, unit in _MEM_RE.findall(text):
        out[keys[label]] = int(round(float(value) * _UNITS.get(unit, 1)))
    out["lines"] = [ln.strip() for ln in text.splitlines() if "memory" in ln.lower()]
    return out


def compile_edgetpu(path: Path, out_dir: Path, compiler: str) -> dict:
    """Run ``edgetpu_compiler -s`` on one int8 file; returns the parsed log (+ compiled file)."""
    proc = subprocess.run([compiler, "-s", "-o", str(out_dir), str(path)], capture_output=True, text=True, timeout=600)
    info = parse_edgetpu_log(proc.stdout + proc.stderr)
    info["returncode"] = proc.returncode
    compiled = out_dir / f"{path.stem}_edgetpu.tflite"
    info["file"] = compiled.name if compiled.exists() else None
    info["status"] = "compiled" if proc.returncode == 0 and compiled.exists() else "failed"
    if info["status"] == "failed":
        info["log_tail"] = (proc.stdout + proc.stderr)[-2000:]
    return info


def segment_keras_model(
    model,
    assignment,
    out_dir: str | os.PathLike,
    num_stages: int | None = None,
    variants: tuple[str, ...] = VARIANTS,
    samples: int = 16,
    seed: int = 0,
    input_range: tuple[float, float] = (-1.0, 1.0),
    compile_edgetpu_segments: bool | None = None,
    graph: Graph | None = None,
    name: str | None = None,
    schedule_info: dict | None = None,
) -> dict:
    """Segment ``model`` by ``assignment`` into ``out_dir``; returns (and writes) the manifest.

    Everything is checked before anything is written (variants, ``edgetpu_compiler`` when
    required, the schedule, ``out_dir``); the files are built in a staging folder next to
    ``out_dir`` that replaces it only when complete (:class:`~respect_jax.coral.paths.StagedDir`):
    a failure leaves no ``out_dir``, or the previous one unchanged.

    Args:
        model: a functional Keras model.
        assignment: int[N] stage per node of ``graph_from_keras(model)``.
        out_dir: where ``stage{k}_{variant}.tflite``, ``full_{variant}.tflite`` and
            ``manifest.json`` go (new, empty, or a previous segment folder, which is replaced).
        num_stages: K (default: ``max(assignment) + 1``).
        variants: subset of ``("float32", "int8")``.
        samples, seed, input_range: the generated representative data (int8 calibration).
        compile_edgetpu_segments: None = compile if ``edgetpu_compiler`` is on PATH; False = never;
            True = required (an error, before any work, if it is not on PATH).
        graph: the graph the schedule was computed on; its node names must match the model's.
        name: model name for the manifest.
        schedule_info: free-form provenance (solver, objective...) stored in the manifest.
    """
    for v in variants:
        if v not in VARIANTS:
            raise ValueError(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    if not variants:
        raise ValueError("variants is empty; choose from " + ", ".join(VARIANTS))
    check_compiler(compile_edgetpu_segments)
    check_output_dir(out_dir)
    calls = keras_call_nodes(model)
    own = graph_from_keras(model, name=name)
    if graph is not None and tuple(graph.node_names) != own.node_names:
        raise ValueError(f"graph {graph.name!r} does not describe this Keras model (node names differ)")
    assignment = np.asarray(assignment, dtype=np.int64)
    k_stages = int(num_stages or (int(assignment.max()) + 1))
    input_nodes, output_nodes = _io_nodes(model, calls)
    plan = plan_segments(own, assignment, k_stages, input_nodes, output_nodes)
    stage_models, names = build_stage_models(model, plan, calls)
    with StagedDir(out_dir) as staging:
        manifest = _write_segments(
            model, own, plan, stage_models, names, calls, staging, variants, samples, seed, input_range, name
        )
        manifest["assignment"] = assignment.tolist()
        manifest["schedule"] = schedule_info or {}
        manifest["edgetpu_compiler"] = _maybe_compile(manifest, staging, compile_edgetpu_segments)
        write_json_atomic(manifest, staging / "manifest.json")
    return manifest


def check_compiler(wanted: bool | None) -> None:
    """``compile=true`` needs ``edgetpu_compiler`` on PATH: raise ``ValueError`` before any work."""
    if wanted and edgetpu_compiler_path() is None:
        raise ValueError("compile=true but edgetpu_compiler is not on PATH (https://coral.ai/docs/edgetpu/compiler)")


def _write_segments(
    model,
    own: Graph,
    plan: SegmentPlan,
    stage_models,
    names,
    calls,
    out: Path,
    variants,
    samples,
    seed,
    input_range,
    name,
) -> dict:
    """Convert the unsegmented model and every stage into ``out``; returns the manifest (no schedule yet)."""
    input_nodes, output_nodes = plan.stages[0].inputs, plan.stages[-1].outputs
    rep_inputs = representative_inputs(model, samples, seed, input_range)
    rep = boundary_values(model, names, rep_inputs) if "int8" in variants else []

    manifest_stages = []
    for st in plan.stages:
        in_elements = 0 if st.index == 0 else int(sum(own.output_size[u] for u in st.inputs))
        manifest_stages.append(
            {
                "index": st.index,
                "nodes": [own.node_names[v] for v in st.nodes],
                "num_nodes": len(st.nodes),
                "params": int(sum(own.params[v] for v in st.nodes)),
                "macs": int(sum(own.macs[v] for v in st.nodes)),
                "in_elements": in_elements,
                "inputs": [n for u in st.inputs for _, n in names[u]],
                "outputs": [n for u in st.outputs for _, n in names[u]],
                "files": {},
                "io": {},
            }
        )

    (full_model,), _ = build_stage_models(model, _full_plan(own, input_nodes, output_nodes), calls)
    full: dict = {"files": {}, "io": {}}
    for variant in variants:
        buf, details = rename_io_tensors(convert_to_tflite(full_model, variant, rep))
        fname = f"full_{variant}.tflite"
        (out / fname).write_bytes(buf)
        full["files"][variant] = fname
        full["io"][variant] = details

    # int8: a model input enters with the unsegmented model's input encoding; every other boundary
    # tensor with the encoding of the stage that produces it.
    producer_quant: dict[str, tuple[float, int]] = {}
    if "int8" in variants:
        producer_quant = {n: (d["scale"], d["zero_point"]) for n, d in full["io"]["int8"]["inputs"].items()}
    for variant in variants:
        for st, sub, entry in zip(plan.stages, stage_models, manifest_stages, strict=True):
            buf = convert_to_tflite(sub, variant, rep)
            buf, details = rename_io_tensors(buf, producer_quant if variant == "int8" else None)
            fname = f"stage{st.index}_{variant}.tflite"
            (out / fname).write_bytes(buf)
            entry["files"][variant] = fname
            entry["io"][variant] = details
            if variant == "int8":
                for n, d in details["outputs"].items():
                    if d["dtype"] == "int8":
                        producer_quant[n] = (d["scale"], d["zero_point"])

    tensors = {}
    for u in sorted({u for st in plan.stages for u in st.inputs + st.outputs}):
        for t, n in names[u]:
            tensors[n] = {
                "producer": own.node_names[u],
                "shape": [1, *[int(d) for d in t.shape[1:]]],
                "dtype": str(t.dtype),
                "first_stage": plan.first[u],
                "last_stage": plan.last[u],
            }
    manifest = {
        "format": MANIFEST_FORMAT,
        "model": name or model.name,
        "num_stages": plan.num_stages,
        "num_nodes": own.num_nodes,
        "variants": list(variants),
        "model_inputs": [n for u in input_nodes for _, n in names[u]],
        "model_outputs": [n for u in output_nodes for _, n in names[u]],
        "tensors": tensors,
        "boundaries": [
            {"after_stage": k, "tensors": manifest_stages[k]["outputs"]} for k in range(plan.num_stages - 1)
        ],
        "stages": manifest_stages,
        "full": full,
        "representative": {
            "samples": samples,
            "seed": seed,
            "distribution": f"uniform{tuple(input_range)} inputs through the float Keras model",
        },
        "int8_boundary_mismatches": _quant_mismatches(manifest_stages) if "int8" in variants else [],
    }
    return manifest


def _full_plan(graph: Graph, input_nodes: list[int], output_nodes: list[int]) -> SegmentPlan:
    """The one-stage plan of the unsegmented model (its reference ``.tflite``)."""
    nodes = [v for v in graph.topological_order().tolist() if v not in input_nodes]
    return SegmentPlan(1, [StagePlan(0, nodes, list(input_nodes), list(output_nodes))], {}, {})


def _quant_mismatches(stages: list[dict]) -> list[dict]:
    """int8 boundary tensors whose producer and consumer quantization differ (runner requantizes)."""
    out = []
    for k in range(1, len(stages)):
        prev, cur = stages[k - 1]["io"].get("int8"), stages[k]["io"].get("int8")
        if not prev or not cur:
            continue
        for n, d in cur["inputs"].items():
            p = prev["outputs"].get(n)
            same = (
                p
                and p["dtype"] == d["dtype"]
                and _close_quant((p["scale"], p["zero_point"]), (d["scale"], d["zero_point"]))
            )
            if p and not same:
                out.append({"tensor": n, "stage": k, "producer": p, "consumer": d})
    return out


def _maybe_compile(manifest: dict, out: Path, wanted: bool | None) -> dict:
    compiler = edgetpu_compiler_path()
    if wanted is False:
        return {"available": compiler is not None, "status": "not run: disabled by the caller"}
    if compiler is None:
        check_compiler(wanted)
        return {"available": False, "status": "not run: edgetpu_compiler is not on PATH"}
    if "int8" not in manifest["variants"]:
        return {"available": True, "status": "not run: the Edge TPU needs the int8 variant"}
    for st in manifest["stages"]:
        st["edgetpu"] = compile_edgetpu(out / st["files"]["int8"], out, compiler)
    ok = all(st["edgetpu"]["status"] == "compiled" for st in manifest["stages"])
    return {"available": True, "path": compiler, "status": "compiled" if ok else "failed (see stages[].edgetpu)"}
