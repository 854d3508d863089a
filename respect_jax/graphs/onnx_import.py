"""ONNX model -> SPEC graph (with the ``onnx`` package only: no PyTorch, no ONNX Runtime).

Install with the ``onnx`` extra (``pip install respect-jax[onnx]``). Only the main graph is read
(the bodies of ``If``/``Loop``/``Scan`` are not descended into: such a node is one node, 0 MACs).

Tensors
    Every tensor is one of three kinds. *Constant*: an initializer, the output of a ``Constant``
    node, or the output of a node all of whose inputs are constant (a subgraph any compiler folds,
    e.g. ``DequantizeLinear`` of an int8 weight, or a weight ``Transpose``). *Shape*: the output of
    ``Shape``/``Size``, or of a node whose inputs are only shape and constant tensors (PyTorch's
    ``Shape -> Gather -> Unsqueeze -> Concat`` chains that feed a ``Reshape``). *Data*: a graph input
    (one that is not also an initializer) or an output of any other node, i.e. of a node that reads
    at least one data tensor.

Nodes
    One ``Input`` node per graph input that is not an initializer, named after the input, then one
    node per ONNX node that reads a data tensor, in the file's order (ONNX requires a topological
    order), named after the ONNX node's ``name`` or, when it has none, its first output (duplicate
    names get ``#1``, ``#2``...); ``op`` is the ONNX ``op_type`` (prefixed ``domain:`` for a
    custom domain).

Dropped nodes (no node in the graph, and how edges are re-wired)
    * nodes that read no data tensor (constant and shape computations, see above): dropped; they
      give no edges. Their constant outputs still count as weights of the nodes that read them.
    * :data:`ALIAS_OPS` (``Identity``, ``Dropout``, ``Reshape``, ``Flatten``, ``Squeeze``,
      ``Unsqueeze``): their output holds the same elements as their data input (a view, or
      inference-time identity), so they carry no tensor of their own. Their outputs are aliases of
      their first input: every consumer of a dropped node's output gets an edge from the node that
      produced that input (an alias of an alias follows the chain to a real node or ``Input``).
      Any second output (``Dropout``'s mask) is dropped.

Edges
    ``[producer, consumer]`` for every data input of every kept node (duplicates merged).

Counts (batch 1: every symbolic or unknown dimension is set to 1, e.g. ``batch``, ``N``)
    ``params``: elements of the constant tensors a node reads: all of them for
    :data:`WEIGHTED_OPS` (``Conv``, ``ConvTranspose``, ``Gemm``, ``MatMul``, normalisations...),
    and the floating-point ones (not int32/int64 shapes, axes, pads, and not int8 zero points) for
    any other op (e.g. the constant scale of a ``Mul``). A constant read by several nodes counts
    once per reader (weight sharing is not detected).
    ``output_size``: elements of the node's outputs (summed over several outputs, e.g. ``Split``),
    from ``onnx.shape_inference.infer_shapes``; an output whose shape is still unknown counts 0
    and the node is listed in ``unknown_shapes`` of :func:`graph_from_onnx`.
    ``macs``: the rules of the Keras and TFLite importers (:mod:`respect_jax.coral.keras_export`):

    ===================================================  ===========================================
    Conv (W [M, C/group, k1, k2...])                     out_elements * C/group * prod(k)
    ConvTranspose (W [C, M/group, k1, k2...])            in_elements * M/group * prod(k)
    Gemm (A [M, K] or [K, M] with transA)                out_elements * K
    MatMul (A [..., K])                                  out_elements * K
    MaxPool, AveragePool, LpPool                         out_elements * prod(kernel_shape)
    GlobalAveragePool, GlobalMaxPool, Reduce*            in_elements
    BatchNormalization, InstanceNormalization,           out_elements
    LayerNormalization, GroupNormalization
    Add, Sub, Mul, Div, Max, Min, Sum, Mean              (number of inputs - 1) * out_elements
    :data:`ZERO_MAC_OPS` (activations, data movement)    0
    anything else                                        0 (listed by :func:`onnx_unknown_mac_operators`)
    ===================================================  ===========================================
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from respect_jax.graphs.graph import Graph

ALIAS_OPS = frozenset({"Identity", "Dropout", "Reshape", "Flatten", "Squeeze", "Unsqueeze"})
SHAPE_OPS = frozenset({"Shape", "Size"})
WEIGHTED_OPS = frozenset(
    {"Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization", "InstanceNormalization",
     "LayerNormalization", "GroupNormalization", "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger"}
)  # fmt: skip
_POOL = frozenset({"MaxPool", "AveragePool", "LpPool"})
_GLOBAL_OR_REDUCE = frozenset(
    {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
     "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"}
)  # fmt: skip
_NORM = frozenset({"BatchNormalization", "InstanceNormalization", "LayerNormalization", "GroupNormalization"})
_MERGE = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean"})
# ops whose 0 MACs is a rule (activations and data movement), as the other importers' zero-MAC lists
ZERO_MAC_OPS = frozenset(
    {"Input", "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
     "Clip", "Softmax", "LogSoftmax", "Gelu", "Mish", "Softplus", "Concat", "Split", "Slice", "Pad", "Transpose",
     "Gather", "GatherElements", "GatherND", "Tile", "Expand", "Resize", "Upsample", "DepthToSpace",
     "SpaceToDepth", "Cast", "QuantizeLinear", "DequantizeLinear", "ConstantOfShape"}
)  # fmt: skip
_MAC_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"}) | _POOL | _GLOBAL_OR_REDUCE | _NORM | _MERGE
_FLOAT_TYPES = frozenset({"FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16"})
Shape = tuple[int | None, ...]  # None: a dimension shape inference could not determine


def _import_onnx():
    try:
        import onnx
    except ImportError:  # pragma: no cover - the onnx extra is in the test environment
        raise ValueError(
            "reading ONNX models needs the onnx package: pip install 'respect-jax[onnx]' (or pip install onnx)"
        ) from None
    return onnx


def _elements(shape: Shape | None) -> int:
    """Elements of a shape; an unknown dimension (None) counts 1, an unknown shape 0."""
    return 0 if shape is None else int(math.prod(1 if d is None else d for d in shape))


def _complete(shape: Shape | None) -> bool:
    return shape is not None and None not in shape


def _type_shape(onnx, type_proto) -> tuple[Shape | None, str | None]:
    """(shape with symbolic/unknown dims set to 1, element type name); (None, None) if unknown."""
    if not type_proto.HasField("tensor_type"):
        return None, None
    tt = type_proto.tensor_type
    elem = onnx.TensorProto.DataType.Name(tt.elem_type) if tt.elem_type else None
    if not tt.HasField("shape"):
        return None, elem
    dims = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None for d in tt.shape.dim)
    return dims, elem


def _load(onnx, path: Path):
    try:
        return onnx.load(str(path))
    except OSError as err:
        raise ValueError(f"{path}: cannot read ({err.strerror or err})") from None
    except Exception as err:  # protobuf's DecodeError and friends on a file of another format
        raise ValueError(f"{path}: not a readable ONNX model ({type(err).__name__}: {err})") from None


def _fix_input_dims(model) -> None:
    """Set every symbolic or missing dimension of the graph inputs to 1 (batch 1), in place, so
    that shape inference (with data propagation) can resolve ``Reshape(x, [N, -1])`` and alike."""
    inits = {t.name for t in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in inits or not inp.type.HasField("tensor_type"):
            continue
        for d in inp.type.tensor_type.shape.dim:
            if not (d.HasField("dim_value") and d.dim_value > 0):
                d.Clear()
                d.dim_value = 1


def _infer(onnx, model, path: Path):
    _fix_input_dims(model)
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as err:  # shape inference rejects inconsistent models
        raise ValueError(f"{path}: ONNX shape inference failed ({str(err).splitlines()[0]})") from None


def _product(shape: Shape | None, start: int) -> int | None:
    """prod(shape[start:]), None when unknown."""
    if shape is None or len(shape) <= start or None in shape[start:]:
        return None
    return int(math.prod(shape[start:]))


def _times(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a * b


def node_macs(
    op: str, attrs: dict, in_shapes: list[Shape | None], out_shapes: list[Shape | None], n_inputs: int
) -> int | None:
    """MACs of one ONNX node (module docstring rules), batch 1; None when shapes are missing.

    ``in_shapes`` are the shapes of all its inputs (data and constant, file order), ``out_shapes``
    of its outputs; ``n_inputs`` counts its non-empty inputs.
    """
    out_el = sum(_elements(s) for s in out_shapes)
    first = in_shapes[0] if in_shapes else None
    weight = in_shapes[1] if len(in_shapes) > 1 else None
    if op == "Conv":
        return _times(out_el, _product(weight, 1))
    if op == "ConvTranspose":
        return _times(_elements(first) if _complete(first) else None, _product(weight, 1))
    if op == "Gemm":
        k = first[0 if attrs.get("transA", 0) else 1] if first is not None and len(first) == 2 else None
        return _times(out_el, k)
    if op == "MatMul":
        return _times(out_el, first[-1] if first else None)
    if op in _POOL:
        return out_el * int(math.prod(attrs.get("kernel_shape", [1])))
    if op in _GLOBAL_OR_REDUCE:
        return _elements(first)
    if op in _NORM:
        return out_el
    if op in _MERGE:
        return max(0, n_inputs - 1) * out_el
    return 0


def onnx_unknown_mac_operators(graph: Graph) -> list[str]:
    """``"node (op)"`` for every node of an imported ONNX graph whose op has no MAC rule (0 MACs
    recorded: custom-domain ops, LSTM, Attention, Einsum, transcendental functions...)."""
    return [
        f"{name} ({op})"
        for name, op in zip(graph.node_names, graph.ops, strict=True)
        if op not in ZERO_MAC_OPS and op not in _MAC_OPS
    ]


def graph_from_onnx(path: str | os.PathLike, name: str | None = None, unknown_shapes: list | None = None) -> Graph:
    """Read the ONNX model at ``path`` and return its SPEC graph (module docstring rules).

    Args:
        path: an ``.onnx`` file (protobuf ``ModelProto``; external data is loaded from beside it).
        name: graph name (default: the file's stem).
        unknown_shapes: if given, ``"node (op)"`` is appended for every node whose output shape
            (or an input shape its MAC rule needs) shape inference could not determine: its
            ``output_size`` / ``macs`` count that tensor as 0.

    Returns:
        The :class:`Graph`: N nodes = the non-initializer graph inputs + the kept ONNX nodes.

    Raises:
        ValueError: one line, when the file cannot be read or parsed, shape inference fails, or
            the model has no data node.
    """
    onnx = _import_onnx()
    path = Path(path)
    model = _infer(onnx, _load(onnx, path), path)
    g = model.graph

    shapes: dict[str, Shape | None] = {}
    elem: dict[str, str | None] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        shapes[vi.name], elem[vi.name] = _type_shape(onnx, vi.type)
    constant: set[str] = set()
    for init in g.initializer:
        constant.add(init.name)
        shapes[init.name] = tuple(int(d) for d in init.dims)
        elem[init.name] = onnx.TensorProto.DataType.Name(init.data_type)
    shape_like: set[str] = set()
    producer: dict[str, int] = {}  # data tensor -> graph node id (aliases resolved)

    names: list[str] = []
    ops: list[str] = []
    params: list[int] = []
    out_size: list[int] = []
    macs: list[int] = []
    no_shape: list[bool] = []
    edges: set[tuple[int, int]] = set()
    used: set[str] = set()

    def add_node(node_name: str, op: str, p: int, o: int, m: int, shapeless: bool) -> int:
        base, k = node_name, 1
        while node_name in used:
            node_name, k = f"{base}#{k}", k + 1
        used.add(node_name)
        for lst, val in ((names, node_name), (ops, op), (params, p), (out_size, o), (macs, m)):
            lst.append(val)
        no_shape.append(shapeless)
        return len(names) - 1

    for inp in g.input:
        if inp.name not in constant:
            shp = shapes.get(inp.name)
            producer[inp.name] = add_node(inp.name, "Input", 0, _elements(shp), 0, not _complete(shp))

    for j, node in enumerate(g.node):
        inputs = [t for t in node.input if t]
        outputs = [t for t in node.output if t]
        data_in = [t for t in inputs if t in producer]
        if not data_in:  # constant or shape computation: folded away
            if node.op_type == "Constant" or all(t in constant for t in inputs):
                constant.update(outputs)
            else:
                shape_like.update(outputs)
            continue
        if node.op_type in SHAPE_OPS:  # reads data, yields metadata
            shape_like.update(outputs)
            continue
        if node.op_type in ALIAS_OPS and node.domain in ("", "ai.onnx"):
            producer[outputs[0]] = producer[inputs[0]] if inputs[0] in producer else producer[data_in[0]]
            continue
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"
        p = sum(
            _elements(shapes.get(t))
            for t in inputs
            if t in constant and (op in WEIGHTED_OPS or elem.get(t) in _FLOAT_TYPES)
        )
        out_shapes = [shapes.get(t) for t in outputs]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        m = node_macs(op, attrs, [shapes.get(t) for t in inputs], out_shapes, len(inputs))
        nid = add_node(
            node.name or (outputs[0] if outputs else f"node{j}"),
            op,
            p,
            sum(_elements(s) for s in out_shapes),
            m or 0,
            not all(_complete(s) for s in out_shapes) or m is None,
        )
        for t in data_in:
            edges.add((producer[t], nid))
        for t in outputs:
            producer[t] = nid

    if not names:
        raise ValueError(f"{path}: the ONNX graph has no inputs and no nodes reading data")
    graph = Graph(
        name=name or path.stem,
        params=np.array(params, dtype=np.int64),
        output_size=np.array(out_size, dtype=np.int64),
        macs=np.array(macs, dtype=np.int64),
        edges=np.array(sorted(edges), dtype=np.int64).reshape(-1, 2),
        node_names=tuple(names),
        ops=tuple(ops),
        source=(
            f"{path.name}: ONNX opset {_opset(model)}, {len(g.node)} nodes, {len(names)} kept "
            "[respect_jax.graphs.onnx_import]"
        ),
    )
    if unknown_shapes is not None:
        unknown_shapes += [f"{n} ({o})" for n, o, u in zip(graph.node_names, ops, no_shape, strict=True) if u]
    return graph


def _opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 0
