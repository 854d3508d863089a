"""Cut an existing ``.tflite`` (e.g. the int8 model ``edgetpu_compiler`` takes) into one file per stage.

The Keras segmenter (:mod:`~respect_jax.coral.segment`) rebuilds and re-quantizes every stage from the
Keras model. A user who starts from a quantized ``.tflite`` has no Keras model; this module cuts the
file itself: each stage keeps the model's own operators, weights and quantization parameters, so the
pipeline computes bit for bit what the whole file computes (checked by ``respect-pipeline``).

Nodes and the schedule
    Node ids are those of :func:`~respect_jax.coral.tflite_import.import_tflite` on the same file
    (the graph ``respect-export model=<file>.tflite`` writes and ``respect-schedule`` schedules): one
    ``Input`` node per subgraph input, then one node per operator in execution order. The stage of
    an ``Input`` node is ignored: model inputs enter the pipeline at stage 0.

Boundary tensors (per tensor, not per node)
    For a non-constant tensor ``t``: ``first(t)`` is the stage of its producing operator (0 for a
    model input); ``last(t)`` the latest stage of an operator reading it, and ``K-1`` if ``t`` is a
    model output (outputs leave from the last stage). Stage ``k`` receives the tensors with
    ``first < k <= last`` (stage 0: the model inputs) and sends those with ``first <= k < last``
    (the last stage: the model outputs). A tensor needed two stages later is an input *and* an
    output of the stage between (forwarded unchanged, as PipelinedModelRunner passes tensors on).
    An operator reading a tensor produced on a later stage makes the schedule invalid (one-line
    ``ValueError``).

Stage files
    Each stage is a model with one subgraph: the stage's operators in their original order, the
    tensors they use (copied with names, shapes, types and quantization parameters unchanged), the
    constant buffers they read, the operator codes they need, and one signature ``serving_default``
    whose keys are the tensor names. Boundary tensors therefore carry the same name and the same
    int8 scale and zero point on both sides of a cut, and raw int8 values cross unchanged. The
    model's metadata entries (``min_runtime_version``, conversion metadata) are not copied.
    Models with more than one subgraph (control flow) or with variable tensors are refused.

File names (Edge TPU compiler convention)
    ``edgetpu_compiler --num_segments=K model.tflite`` writes
    ``model_segment_<k>_of_<K>_edgetpu.tflite`` (k = 0 .. K-1). The uncompiled CPU segments here are
    ``<model>_segment_<k>_of_<K>.tflite``, so compiling one with ``edgetpu_compiler -s`` (done when
    the compiler is on PATH) gives exactly the compiler's name. The whole model is copied beside them
    as ``<model>.tflite`` (the reference ``respect-pipeline`` compares with).

Manifest (``manifest.json``, format ``respect-jax-segments/1``, as the Keras segmenter's)
    One variant, named after the model: ``int8`` when it holds int8/uint8 quantized tensors, else
    ``float32``. ``source`` says it was cut from a file (``kind: tflite``, the file's sha256);
    ``stages[k]`` lists ``inputs``/``outputs`` (tensor names), ``operators`` (indices in the
    source), ``nodes`` (graph node names), params/MACs of the imported graph, and per-tensor
    ``io`` (shape, dtype, scale, zero point).
"""

from __future__ import annotations

import copy
import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from respect_jax.coral._deps import litert_flatbuffers, litert_interpreter_class, quiet_fds
from respect_jax.coral.paths import StagedDir, check_output_dir
from respect_jax.coral.segment import MANIFEST_FORMAT, _maybe_compile, check_compiler
from respect_jax.graphs.graph import Graph, write_json_atomic

SEGMENT_NAME = "{model}_segment_{k}_of_{K}.tflite"  # edgetpu_compiler's name without "_edgetpu"
QUANTIZED_TYPES = ("INT8", "UINT8")


@dataclass
class TflitePlan:
    """Operators and boundary tensors (tensor indices of the source subgraph) of every stage."""

    num_stages: int
    operators: list[list[int]] = field(default_factory=list)
    inputs: list[list[int]] = field(default_factory=list)
    outputs: list[list[int]] = field(default_factory=list)
    first: dict[int, int] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)


def segment_file_name(model: str, k: int, num_stages: int, compiled: bool = False) -> str:
    """``<model>_segment_<k>_of_<K>.tflite`` (``..._edgetpu.tflite`` when compiled), k from 0."""
    name = SEGMENT_NAME.format(model=model, k=k, K=num_stages)
    return name.replace(".tflite", "_edgetpu.tflite") if compiled else name


def read_tflite_model(path: str | os.PathLike):
    """The mutable flatbuffer object (``ModelT``) of a ``.tflite`` file; ``ValueError`` if it is not one
    or cannot be cut (several subgraphs, variable tensors)."""
    from respect_jax.coral.tflite_import import read_tflite_bytes

    fbu, _ = litert_flatbuffers()
    path = Path(path)
    data = read_tflite_bytes(path)
    try:
        model = fbu.read_model_from_bytearray(bytearray(data))
    except Exception as err:  # the flatbuffer reader raises assorted errors on garbage
        raise ValueError(f"{path}: not a readable .tflite model ({err})") from None
    if not model.subgraphs or len(model.subgraphs) != 1:
        raise ValueError(
            f"{path}: has {len(model.subgraphs or [])} subgraphs; only single-subgraph models (no control flow) "
            "can be cut"
        )
    if any(t.isVariable for t in model.subgraphs[0].tensors or []):
        raise ValueError(f"{path}: has variable tensors (a stateful model); it cannot be cut into stages")
    return model


def _is_constant(model, tensor) -> bool:
    buf = model.buffers[tensor.buffer] if 0 < tensor.buffer < len(model.buffers) else None
    return buf is not None and buf.data is not None and len(buf.data) > 0


def tensor_name(tensor) -> str:
    """A tensor's name as ``str`` (the object API stores bytes)."""
    name = tensor.name
    return name.decode() if isinstance(name, bytes) else str(name or "")


def num_graph_nodes(model) -> int:
    """Nodes of :func:`~respect_jax.coral.tflite_import.import_tflite`'s graph: inputs + operators."""
    sg = model.subgraphs[0]
    return len(sg.inputs) + len(sg.operators)


def plan_tflite_segments(model, assignment, num_stages: int) -> TflitePlan:
    """Operators and boundary tensors of each stage (module docstring rules).

    Args:
        model: ``ModelT`` of :func:`read_tflite_model`.
        assignment: int[inputs + operators] stage per graph node (an input node's stage is ignored).
        num_stages: K.
    """
    sg = model.subgraphs[0]
    n_in, n_ops = len(sg.inputs), len(sg.operators)
    s = np.asarray(assignment)
    if s.shape != (n_in + n_ops,) or (s.size and not np.issubdtype(s.dtype, np.integer)):
        raise ValueError(
            f"assignment must list a stage for each of the {n_in + n_ops} nodes ({n_in} inputs + {n_ops} operators) "
            f"of this model, it has {s.size}"
        )
    if num_stages < 1 or (s.size and (s.min() < 0 or s.max() >= num_stages)):
        raise ValueError(f"assignment stages must lie in 0..{num_stages - 1}")
    op_stage = [int(v) for v in s[n_in:]]
    model_inputs = [int(t) for t in sg.inputs]
    model_outputs = [int(t) for t in sg.outputs]
    producer: dict[int, int] = {}
    for j, op in enumerate(sg.operators):
        for t in op.outputs or []:
            if t >= 0:
                producer[int(t)] = j
    first = {t: 0 for t in model_inputs}
    first.update({t: op_stage[j] for t, j in producer.items()})
    last = dict(first)
    for j, op in enumerate(sg.operators):
        for t in op.inputs or []:
            t = int(t)
            if t < 0 or _is_constant(model, sg.tensors[t]):
                continue
            if t not in first:
                name = tensor_name(sg.tensors[t])
                raise ValueError(f"tensor {name!r} is read by operator {j} but nothing produces it")
            if first[t] > op_stage[j]:
                raise ValueError(
                    f"invalid schedule: tensor {tensor_name(sg.tensors[t])!r} is produced on stage {first[t]} "
                    f"and read on stage {op_stage[j]} (operator {j})"
                )
            last[t] = max(last[t], op_stage[j])
    for t in model_outputs:
        if t not in first:
            raise ValueError(f"model output {tensor_name(sg.tensors[t])!r} is not produced by any operator")
        last[t] = num_stages - 1
    order = {t: (-1, i) for i, t in enumerate(model_inputs)}
    for j, op in enumerate(sg.operators):
        for i, t in enumerate(op.outputs or []):
            order.setdefault(int(t), (j, i))
    crossing = sorted((t for t in first if last[t] > first[t]), key=lambda t: order[t])
    plan = TflitePlan(num_stages=num_stages, first=first, last=last)
    for k in range(num_stages):
        plan.operators.append([j for j in range(n_ops) if op_stage[j] == k])
        plan.inputs.append(list(model_inputs) if k == 0 else [t for t in crossing if first[t] < k <= last[t]])
        if k == num_stages - 1:
            plan.outputs.append(list(model_outputs))
        else:
            plan.outputs.append([t for t in crossing if first[t] <= k < last[t]])
    _check_boundary_names(sg, plan)
    return plan


def _check_boundary_names(sg, plan: TflitePlan) -> None:
    """Boundary tensors are matched by name (here and by PipelinedModelRunner): names must be unique."""
    boundary = sorted({t for ts in plan.inputs + plan.outputs for t in ts})
    seen: dict[str, int] = {}
    for t in boundary:
        name = tensor_name(sg.tensors[t])
        if not name:
            raise ValueError(f"boundary tensor {t} has no name; the stages could not be matched by name")
        if name in seen and seen[name] != t:
            raise ValueError(f"two boundary tensors are both named {name!r}; the stages could not be matched by name")
        seen[name] = t


def cut_stage(model, plan: TflitePlan, k: int):
    """The ``ModelT`` of stage ``k``: its operators, the tensors and buffers they use, one signature."""
    _, schema = litert_flatbuffers()
    sg = model.subgraphs[0]
    ops = [sg.operators[j] for j in plan.operators[k]]
    used: dict[int, int] = {}  # old tensor index -> new

    def take(t: int) -> int:
        if t < 0:
            return t
        if t not in used:
            used[t] = len(used)
        return used[t]

    for t in plan.inputs[k]:
        take(t)
    new_ops = []
    opcodes: dict[int, int] = {}
    for op in ops:
        new = copy.deepcopy(op)
        new.inputs = [take(int(t)) for t in op.inputs or []]
        new.outputs = [take(int(t)) for t in op.outputs or []]
        if op.intermediates is not None and len(op.intermediates):
            new.intermediates = [take(int(t)) for t in op.intermediates]
        new.opcodeIndex = opcodes.setdefault(int(op.opcodeIndex), len(opcodes))
        new_ops.append(new)
    for t in plan.outputs[k]:
        take(t)

    buffers = [schema.BufferT()]  # buffer 0: the empty sentinel every non-constant tensor points to
    buffer_map: dict[int, int] = {}
    tensors = []
    for old in used:  # insertion order = new index order
        tensor = copy.deepcopy(sg.tensors[old])
        if _is_constant(model, sg.tensors[old]):
            if tensor.buffer not in buffer_map:
                buffer_map[tensor.buffer] = len(buffers)
                buffers.append(copy.deepcopy(model.buffers[tensor.buffer]))
            tensor.buffer = buffer_map[tensor.buffer]
        else:
            tensor.buffer = 0
        tensors.append(tensor)

    sub = schema.SubGraphT()
    sub.tensors = tensors
    sub.inputs = [used[t] for t in plan.inputs[k]]
    sub.outputs = [used[t] for t in plan.outputs[k]]
    sub.operators = new_ops
    sub.name = sg.name

    signature = schema.SignatureDefT()
    signature.signatureKey = "serving_default"
    signature.subgraphIndex = 0
    signature.inputs = [_tensor_map(schema, sg.tensors[t], used[t]) for t in plan.inputs[k]]
    signature.outputs = [_tensor_map(schema, sg.tensors[t], used[t]) for t in plan.outputs[k]]

    out = schema.ModelT()
    out.version = model.version
    out.description = model.description
    out.operatorCodes = [copy.deepcopy(model.operatorCodes[old]) for old in opcodes]
    out.subgraphs = [sub]
    out.buffers = buffers
    out.signatureDefs = [signature]
    return out


def check_stage_model(stage, label: str) -> None:
    """Raise ``RuntimeError`` unless every non-constant tensor an operator of ``stage`` reads, and every
    output, is a stage input or produced by an earlier operator of the stage (a self-check of a cut)."""
    sg = stage.subgraphs[0]
    available = {int(t) for t in sg.inputs}
    for j, op in enumerate(sg.operators):
        for t in op.inputs or []:
            t = int(t)
            if t >= 0 and t not in available and not _is_constant(stage, sg.tensors[t]):
                raise RuntimeError(
                    f"{label}: operator {j} reads {tensor_name(sg.tensors[t])!r}, which the stage neither receives "
                    "nor computes"
                )
        available.update(int(t) for t in op.outputs or [] if t >= 0)
    missing = [tensor_name(sg.tensors[int(t)]) for t in sg.outputs if int(t) not in available]
    if missing:
        raise RuntimeError(f"{label}: outputs {missing} are neither received nor computed")


def _tensor_map(schema, tensor, index: int):
    entry = schema.TensorMapT()
    entry.name = tensor_name(tensor)
    entry.tensorIndex = index
    return entry


def model_to_bytes(model) -> bytes:
    """Serialise a ``ModelT``."""
    fbu, _ = litert_flatbuffers()
    return bytes(fbu.convert_object_to_bytearray(model))


def tensor_details(model, indices: list[int]) -> dict[str, dict]:
    """Name -> shape, dtype, scale, zero point of tensors of subgraph 0 (the manifest's ``io`` entries)."""
    _, schema = litert_flatbuffers()
    types = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    sg = model.subgraphs[0]
    out = {}
    for t in indices:
        tensor = sg.tensors[t]
        q = tensor.quantization
        scale = float(q.scale[0]) if q is not None and q.scale is not None and len(q.scale) else 0.0
        zp = int(q.zeroPoint[0]) if q is not None and q.zeroPoint is not None and len(q.zeroPoint) else 0
        out[tensor_name(tensor)] = {
            "shape": [int(d) for d in tensor.shape] if tensor.shape is not None else [],
            "dtype": types.get(tensor.type, str(tensor.type)).lower(),
            "scale": scale,
            "zero_point": zp,
        }
    return out


def model_variant(model) -> str:
    """``int8`` if the model holds int8/uint8 quantized tensors, else ``float32`` (the manifest's variant)."""
    _, schema = litert_flatbuffers()
    quantized = {getattr(schema.TensorType, name) for name in QUANTIZED_TYPES}
    for tensor in model.subgraphs[0].tensors or []:
        q = tensor.quantization
        if tensor.type in quantized and q is not None and q.scale is not None and len(q.scale):
            return "int8"
    return "float32"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_loads(path: Path, plan_inputs: list[str], plan_outputs: list[str]) -> None:
    """Load a written stage in LiteRT (its own kernels): it must allocate and expose exactly the
    planned tensor names; a cut that left an operator without its input fails here."""
    from ai_edge_litert.interpreter import OpResolverType

    interpreter_cls = litert_interpreter_class()
    try:
        with quiet_fds():
            it = interpreter_cls(
                model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
            )
            it.allocate_tensors()
    except (RuntimeError, ValueError) as err:
        raise RuntimeError(f"{path.name} does not load in LiteRT: {str(err).splitlines()[0]}") from None
    ins = sorted(d["name"] for d in it.get_input_details())
    outs = sorted(d["name"] for d in it.get_output_details())
    if ins != sorted(plan_inputs) or outs != sorted(set(plan_outputs)):
        raise AssertionError(f"{path.name}: LiteRT sees inputs {ins} and outputs {outs}, planned otherwise")


def segment_tflite_model(
    path: str | os.PathLike,
    assignment,
    out_dir: str | os.PathLike,
    num_stages: int | None = None,
    graph: Graph | None = None,
    name: str | None = None,
    schedule_info: dict | None = None,
    compile_edgetpu_segments: bool | None = None,
) -> dict:
    """Cut the ``.tflite`` at ``path`` by ``assignment`` into ``out_dir``; returns (and writes) the manifest.

    Everything is checked before anything is written; the folder is built aside and renamed into
    place when complete (:class:`~respect_jax.coral.paths.StagedDir`).

    Args:
        path: the source ``.tflite`` (typically full-integer int8, the input of ``edgetpu_compiler``).
        assignment: int[N] stage per node of ``import_tflite(path)`` (N = inputs + operators).
        out_dir: where ``<model>_segment_<k>_of_<K>.tflite``, ``<model>.tflite`` and ``manifest.json`` go.
        num_stages: K (default: ``max(assignment) + 1``).
        graph: the graph of ``import_tflite(path)`` (read here if None; gives params/MACs per stage).
        name: the model name in file names and the manifest (default: the file's stem).
        schedule_info: provenance of the schedule, stored in the manifest.
        compile_edgetpu_segments: None = compile if ``edgetpu_compiler`` is on PATH; False = never;
            True = required.
    """
    from respect_jax.coral.tflite_import import import_tflite

    path = Path(path)
    check_compiler(compile_edgetpu_segments)
    check_output_dir(out_dir)
    model = read_tflite_model(path)
    name = name or path.stem
    graph = graph if graph is not None else import_tflite(path, name=name)
    if graph.num_nodes != num_graph_nodes(model):
        raise ValueError(f"graph {graph.name!r} has {graph.num_nodes} nodes, {path.name} has {num_graph_nodes(model)}")
    assignment = np.asarray(assignment, dtype=np.int64)
    k_stages = int(num_stages or (int(assignment.max()) + 1))
    plan = plan_tflite_segments(model, assignment, k_stages)
    variant = model_variant(model)
    sg = model.subgraphs[0]
    n_in = len(sg.inputs)
    names = {t: tensor_name(sg.tensors[t]) for t in plan.first}

    with StagedDir(out_dir) as staging:
        full_name = f"{name}.tflite"
        shutil.copyfile(path, staging / full_name)
        stages = []
        for k in range(k_stages):
            stage_model = cut_stage(model, plan, k)
            fname = segment_file_name(name, k, k_stages)
            check_stage_model(stage_model, fname)
            (staging / fname).write_bytes(model_to_bytes(stage_model))
            ins, outs = [names[t] for t in plan.inputs[k]], [names[t] for t in plan.outputs[k]]
            _check_loads(staging / fname, ins, outs)
            nodes = [n_in + j for j in plan.operators[k]]
            stages.append(
                {
                    "index": k,
                    "operators": plan.operators[k],
                    "nodes": [graph.node_names[v] for v in nodes],
                    "num_nodes": len(nodes),
                    "params": int(sum(graph.params[v] for v in nodes)),
                    "macs": int(sum(graph.macs[v] for v in nodes)),
                    "in_elements": 0 if k == 0 else int(sum(np.prod(sg.tensors[t].shape) for t in plan.inputs[k])),
                    "inputs": ins,
                    "outputs": outs,
                    "files": {variant: fname},
                    "io": {
                        variant: {
                            "inputs": tensor_details(model, plan.inputs[k]),
                            "outputs": tensor_details(model, plan.outputs[k]),
                            "requantized_inputs": [],
                        }
                    },
                }
            )
        boundary = sorted({t for ts in plan.inputs + plan.outputs for t in ts}, key=lambda t: (plan.first[t], t))
        details = tensor_details(model, boundary)
        manifest = {
            "format": MANIFEST_FORMAT,
            "model": name,
            "source": {
                "kind": "tflite",
                "file": str(path),
                "sha256": _sha256(path),
                "naming": "segments: <model>_segment_<k>_of_<K>.tflite (k from 0); edgetpu_compiler -s names the "
                "compiled one <model>_segment_<k>_of_<K>_edgetpu.tflite, as edgetpu_compiler --num_segments does",
            },
            "num_stages": k_stages,
            "num_nodes": graph.num_nodes,
            "variants": [variant],
            "model_inputs": [names[int(t)] for t in sg.inputs],
            "model_outputs": [names[int(t)] for t in sg.outputs],
            "tensors": {
                names[t]: {
                    **details[names[t]],
                    "producer": "input" if t in sg.inputs else graph.node_names[n_in + _producer(sg, t)],
                    "first_stage": plan.first[t],
                    "last_stage": plan.last[t],
                }
                for t in boundary
            },
            "boundaries": [{"after_stage": k, "tensors": stages[k]["outputs"]} for k in range(k_stages - 1)],
            "stages": stages,
            "full": {
                "files": {variant: full_name},
                "io": {
                    variant: {
                        "inputs": tensor_details(model, [int(t) for t in sg.inputs]),
                        "outputs": tensor_details(model, [int(t) for t in sg.outputs]),
                        "requantized_inputs": [],
                    }
                },
            },
            "int8_boundary_mismatches": [],  # a cut keeps each tensor's one encoding on both sides
            "assignment": assignment.tolist(),
            "schedule": schedule_info or {},
        }
        manifest["edgetpu_compiler"] = _maybe_compile(manifest, staging, compile_edgetpu_segments)
        write_json_atomic(manifest, staging / "manifest.json")
    return manifest


def _producer(sg, t: int) -> int:
    for j, op in enumerate(sg.operators):
        if t in [int(x) for x in op.outputs or []]:
            return j
    raise KeyError(t)
