"""``.tflite`` operator graph -> graph (:class:`~respect_jax.graphs.graph.Graph`), with the ``tflite``
flatbuffer parser package.

Works on float, quantized (int8/uint8) and Edge-TPU-compiled models; only subgraph 0 (the main
graph) is read.

Nodes
    One ``Input`` node per subgraph input tensor (0 params, ``output_size`` = its elements), then
    one node per operator in execution order (which is topological). A node is named after its
    first output tensor (the part before the first ``;`` of TFLite's fused names); ``op`` is the
    builtin operator name (``CONV_2D``...) or the custom code (``edgetpu-custom-op``).

Edges
    ``[producer, consumer]`` for every non-constant input tensor of every operator.

Counts (batch dimension and unknown dimensions set to 1)
    ``params``: elements of the constant tensors (tensors backed by a non-empty buffer) an
    operator reads as weights: the filter and bias of CONV_2D / CONV_3D / DEPTHWISE_CONV_2D /
    TRANSPOSE_CONV / FULLY_CONNECTED (int32 biases of quantized models included), and any
    float/int8/uint8/int16 constant of other operators (e.g. the scale of an unfused BatchNorm's
    MUL); int32/int64 constants of other operators (shapes, axes, paddings) are not weights.
    Constants are counted per reading operator: the converter merges identical constants (e.g.
    all-zero biases of the same shape) into one tensor, which would otherwise hide them.
    An ``edgetpu-custom-op`` keeps its compiled parameters inside its custom
    options, not in tensors; its ``params`` is the byte length of those options (about one byte
    per int8 weight plus the compiled instruction stream: an estimate, not a count).
    ``output_size``: elements of the operator's output tensor(s).
    ``macs``: the same rules as the Keras exporter (:mod:`respect_jax.coral.keras_export`) on
    the TFLite operators:

    ==========================================  =============================================
    CONV_2D (filter [O, kh, kw, I])             out_elements * kh * kw * I
    CONV_3D (filter [kd, kh, kw, I, O])         out_elements * kd * kh * kw * I
    DEPTHWISE_CONV_2D (filter [1, kh, kw, C])   out_elements * kh * kw
    TRANSPOSE_CONV (filter [O, kh, kw, I])      in_elements * kh * kw * O
    FULLY_CONNECTED (weights [units, in])       out_elements * in
    BATCH_MATMUL                                out_elements * shared dimension
    AVERAGE/MAX/L2_POOL_2D                      out_elements * filter_h * filter_w
    MEAN, SUM, REDUCE_MAX/MIN/PROD              in_elements
    ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM,       out_elements
    SQUARED_DIFFERENCE
    activations, data movement (reshapes,       0
    concatenation, padding, slicing, resizing,
    (de)quantize, casts): :data:`ZERO_MAC_OPS`
    anything else (e.g. ``edgetpu-custom-op``,  0 (listed by :func:`unknown_mac_operators`)
    other custom ops, LSTM, EXP, SQRT)
    ==========================================  =============================================

TFLite fuses what Keras keeps apart (BatchNorm folded into convolutions, activations into their
producer, ``ZeroPadding2D`` becomes ``PAD``), so a Keras export and a TFLite import of the same
model agree node for node only on models without such layers; totals of conv/dense MACs agree.
Where they agree node for node (one operator per Keras layer, e.g. convolutions with their
activation argument, Add, Concatenate, pooling, Dense), the number of nodes and edges, the
parameter and MAC totals and the multiset of output sizes are equal; node *names* differ (TFLite
names nodes after tensors, e.g. ``serving_default_img:0``, ``mynet_1/c1_1/Relu``,
``StatefulPartitionedCall_1:0``), so a schedule of an imported ``.tflite`` graph is for
scheduling and analysis, and ``respect-segment`` (which needs the Keras model) takes schedules of
the Keras export only. Other differences (TensorFlow 2.21's converter): an unfused
BatchNormalization is a ``MUL`` and an ``ADD`` (two nodes, 2 MACs per element against Keras's
one node with 1), ``Dropout`` disappears, ``Flatten`` becomes a ``RESHAPE`` plus the operators
computing its shape (``SHAPE``, ``STRIDED_SLICE``, ``PACK``), and an Edge-TPU-compiled model is
mostly one ``edgetpu-custom-op`` node whose MACs are unknown.

A file is checked for the ``TFL3`` flatbuffer identifier (bytes 4-8) before it is parsed, so a
file that is not a TFLite model is a one-line ``ValueError`` rather than a garbage graph.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from respect_jax.coral._deps import import_tflite_parser
from respect_jax.graphs.graph import Graph

_POOL = {"AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"}
_REDUCE = {"MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"}
_ELEMENTWISE = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"}
_WEIGHTED = {"CONV_2D", "CONV_3D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "FULLY_CONNECTED"}
_INDEX_TYPES = {"INT32", "INT64"}
TFLITE_IDENTIFIER = b"TFL3"
# operators whose 0 MACs is a rule (activations and data movement), as Keras's zero-MAC layers
ZERO_MAC_OPS = frozenset(
    {
        "Input",
        "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU", "PRELU", "ELU", "LOGISTIC", "TANH",
        "HARD_SWISH", "GELU", "SOFTMAX", "LOG_SOFTMAX",
        "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "CONCATENATION", "PACK", "UNPACK", "SPLIT",
        "SPLIT_V", "SLICE", "STRIDED_SLICE", "GATHER", "GATHER_ND", "PAD", "PADV2", "MIRROR_PAD", "TILE",
        "BROADCAST_TO", "SHAPE", "CAST", "QUANTIZE", "DEQUANTIZE", "RESIZE_BILINEAR",
        "RESIZE_NEAREST_NEIGHBOR", "SPACE_TO_DEPTH", "DEPTH_TO_SPACE", "SPACE_TO_BATCH_ND",
        "BATCH_TO_SPACE_ND", "FILL", "ZEROS_LIKE", "ONES_LIKE",
    }
)  # fmt: skip
_MAC_OPS = _POOL | _REDUCE | _ELEMENTWISE | _WEIGHTED | {"BATCH_MATMUL"}


def has_tflite_identifier(head: bytes) -> bool:
    """Whether the first bytes of a file carry the TFLite flatbuffer identifier ``TFL3``."""
    return len(head) >= 8 and head[4:8] == TFLITE_IDENTIFIER


def read_tflite_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of a ``.tflite`` file; one-line ValueError when it cannot be read or is not a TFLite flatbuffer."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ValueError(f"{path}: cannot read ({err.strerror})") from None
    if not has_tflite_identifier(data):
        raise ValueError(f"{path}: not a .tflite model (no {TFLITE_IDENTIFIER.decode()} flatbuffer identifier)")
    return data


def unknown_mac_operators(graph: Graph) -> list[str]:
    """``"node (OP)"`` for every node of an imported graph whose operator has no MAC rule (0 MACs
    recorded: custom ops such as ``edgetpu-custom-op``, LSTM, transcendental functions...)."""
    return [
        f"{name} ({op})"
        for name, op in zip(graph.node_names, graph.ops, strict=True)
        if op not in ZERO_MAC_OPS and op not in _MAC_OPS
    ]


def _shape(tensor) -> tuple[int, ...]:
    if tensor.ShapeLength() == 0:
        return ()
    return tuple(1 if int(d) < 0 else int(d) for d in tensor.ShapeAsNumpy())


def _elements(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape))


def _is_constant(model, tensor) -> bool:
    idx = tensor.Buffer()
    if idx <= 0 or idx >= model.BuffersLength():
        return False
    buf = model.Buffers(idx)
    if buf is None:
        return False
    return buf.DataLength() > 0 or buf.Offset() > 1


def _opcode_name(tfl, model, op) -> str:
    code = model.OperatorCodes(op.OpcodeIndex())
    builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
    if builtin == tfl.BuiltinOperator.CUSTOM:
        custom = code.CustomCode()
        return custom.decode() if isinstance(custom, bytes) else str(custom)
    try:
        return tfl.opcode2name(builtin)
    except ValueError:
        return f"BUILTIN_{builtin}"


def _pool_window(tfl, op) -> int:
    table = op.BuiltinOptions()
    if table is None:
        return 1
    opts = tfl.Pool2DOptions()
    opts.Init(table.Bytes, table.Pos)
    return int(opts.FilterHeight()) * int(opts.FilterWidth())


def operator_macs(
    opname: str, in_shapes: list[tuple[int, ...]], out_shapes: list[tuple[int, ...]], pool_window: int
) -> int:
    """MACs of one TFLite operator (module docstring rules); shapes have batch 1."""
    out_el = sum(_elements(s) for s in out_shapes)
    if opname == "CONV_2D" and len(in_shapes) > 1 and len(in_shapes[1]) == 4:
        _, kh, kw, cin = in_shapes[1]
        return out_el * kh * kw * cin
    if opname == "CONV_3D" and len(in_shapes) > 1 and len(in_shapes[1]) == 5:
        kd, kh, kw, cin, _ = in_shapes[1]
        return out_el * kd * kh * kw * cin
    if opname == "DEPTHWISE_CONV_2D" and len(in_shapes) > 1 and len(in_shapes[1]) == 4:
        return out_el * in_shapes[1][1] * in_shapes[1][2]
    if opname == "TRANSPOSE_CONV" and len(in_shapes) > 2 and len(in_shapes[1]) == 4:
        cout, kh, kw, _ = in_shapes[1]
        return _elements(in_shapes[2]) * kh * kw * cout
    if opname == "FULLY_CONNECTED" and len(in_shapes) > 1 and len(in_shapes[1]) == 2:
        return out_el * in_shapes[1][1]
    if opname == "BATCH_MATMUL" and in_shapes and in_shapes[0]:
        return out_el * in_shapes[0][-1]
    if opname in _POOL:
        return out_el * pool_window
    if opname in _REDUCE and in_shapes:
        return _elements(in_shapes[0])
    if opname in _ELEMENTWISE:
        return out_el
    return 0


def _short_name(raw) -> str:
    name = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "")
    return name.split(";")[0] or "tensor"


def import_tflite(path: str | os.PathLike, name: str | None = None) -> Graph:
    """Read ``path`` (a ``.tflite`` flatbuffer) and return its operator graph as a
    :class:`~respect_jax.graphs.graph.Graph`."""
    tfl = import_tflite_parser()
    path = Path(path)
    data = read_tflite_bytes(path)
    try:
        model = tfl.Model.GetRootAs(data, 0)
        if model.SubgraphsLength() < 1:
            raise ValueError("no subgraph")
        sg = model.Subgraphs(0)
    except Exception as err:  # the flatbuffer reader raises assorted errors on garbage
        raise ValueError(f"{path}: not a readable .tflite model ({err})") from None

    names: list[str] = []
    ops: list[str] = []
    params: list[int] = []
    out_size: list[int] = []
    macs: list[int] = []
    edges: set[tuple[int, int]] = set()
    producer: dict[int, int] = {}
    type_names = {v: k for k, v in vars(tfl.TensorType).items() if not k.startswith("_")}

    def add_node(node_name: str, op: str, p: int, o: int, m: int) -> int:
        base, k = node_name, 1
        while node_name in used:
            node_name, k = f"{base}#{k}", k + 1
        used.add(node_name)
        names.append(node_name)
        ops.append(op)
        params.append(p)
        out_size.append(o)
        macs.append(m)
        return len(names) - 1

    used: set[str] = set()
    for i in range(sg.InputsLength()):
        t_idx = int(sg.Inputs(i))
        tensor = sg.Tensors(t_idx)
        producer[t_idx] = add_node(_short_name(tensor.Name()), "Input", 0, _elements(_shape(tensor)), 0)

    for j in range(sg.OperatorsLength()):
        op = sg.Operators(j)
        opname = _opcode_name(tfl, model, op)
        in_idx = [int(t) for t in (op.InputsAsNumpy() if op.InputsLength() else [])]
        out_idx = [int(t) for t in (op.OutputsAsNumpy() if op.OutputsLength() else [])]
        in_shapes, p = [], 0
        for t in in_idx:
            if t < 0:
                in_shapes.append(())
                continue
            tensor = sg.Tensors(t)
            in_shapes.append(_shape(tensor))
            if _is_constant(model, tensor):
                if opname in _WEIGHTED or type_names.get(tensor.Type()) not in _INDEX_TYPES:
                    p += _elements(_shape(tensor))
        if opname == "edgetpu-custom-op":
            p += int(op.CustomOptionsLength())
        out_shapes = [_shape(sg.Tensors(t)) for t in out_idx if t >= 0]
        window = _pool_window(tfl, op) if opname in _POOL else 1
        first_out = sg.Tensors(out_idx[0]).Name() if out_idx else f"op{j}"
        node = add_node(
            _short_name(first_out),
            opname,
            p,
            sum(_elements(s) for s in out_shapes),
            operator_macs(opname, in_shapes, out_shapes, window),
        )
        for t in in_idx:
            if t in producer and producer[t] != node:
                edges.add((producer[t], node))
        for t in out_idx:
            if t >= 0:
                producer[t] = node

    return Graph(
        name=name or path.stem,
        params=np.array(params, dtype=np.int64),
        output_size=np.array(out_size, dtype=np.int64),
        macs=np.array(macs, dtype=np.int64),
        edges=np.array(sorted(edges), dtype=np.int64).reshape(-1, 2),
        node_names=tuple(names),
        ops=tuple(ops),
        source=f"{path.name}: subgraph 0, {sg.OperatorsLength()} operators [respect_jax.coral.tflite_import]",
    )
