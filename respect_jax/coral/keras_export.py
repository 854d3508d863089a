"""Keras model -> graph (:class:`~respect_jax.graphs.graph.Graph`, the graph JSON format): one node per Keras
layer (per layer *call*), as RESPECT's graphs.

Nodes
    One node per call of an operation in the functional model, in ``model.operations`` order (the
    order of ``model.layers``, which starts with the ``InputLayer``). A layer called once (every
    ``keras.applications`` model) gives one node named like the layer. A *shared* layer called
    ``n > 1`` times inside the model (several inbound nodes) gives ``n`` nodes named
    ``layer``, ``layer@1``, ... ``layer@{n-1}``: one node per call keeps the graph a DAG (one node
    per layer could create a cycle when a layer is applied at two depths), and the segmenter can
    execute each call on its own stage. The layer's weights are counted once, on its first call
    (so node params always sum to ``model.count_params()``); a stage holding a later call also
    needs those weights, which the cost model then undercounts (documented limitation; none of the
    bundled models has shared layers). Calls of a layer from outside this model (other inbound
    nodes) are ignored. A nested ``keras.Model`` used as a layer is one node (its parameters and
    the sum of its inner MACs). Non-layer operations (``keras.ops`` calls in a functional graph)
    are nodes too, with 0 params.

Edges
    ``[producer call, consumer call]`` for every tensor argument of every call (duplicates merged).

Counts (batch 1)
    ``params``: ``layer.count_params()`` (trainable + non-trainable, e.g. BatchNorm's moving mean
    and variance, as Keras reports). ``output_size``: elements of the call's output tensor(s),
    batch dimension set to 1 (several outputs are summed). ``macs``: multiply-accumulates, by type:

    ======================================  ================================================
    Conv1D/2D/3D (``BaseConv``)             out_elements * prod(kernel) * in_channels / groups
    DepthwiseConv1D/2D                      out_elements * prod(kernel)
    SeparableConv1D/2D                      depthwise (spatial_out * in_ch * depth_mult *
                                            prod(kernel)) + pointwise (out_elements * in_ch *
                                            depth_mult)
    Conv*Transpose                          in_elements * prod(kernel) * filters
    Dense                                   out_elements * in_features
    BatchNormalization, LayerNormalization, out_elements (inference: one scale-and-shift per
    GroupNormalization, Normalization,      element); CustomScaleLayer is Inception-ResNet's
    Rescaling, CustomScaleLayer,            ``x + scale * r``, LayerScale ConvNeXt's per-channel
    LayerScale                              ``x * gamma``
    Max/AveragePooling                      out_elements * prod(pool_size) (one op per window
                                            element)
    GlobalMax/GlobalAveragePooling          in_elements
    Add, Subtract, Multiply, Average,       (number of inputs - 1) * out_elements
    Maximum, Minimum
    Concatenate, activations (Activation,   0 (data movement or element-wise non-MAC work)
    ReLU, Softmax...), padding, cropping,
    reshape, flatten, dropout, InputLayer
    nested Model                            sum of its layers' MACs by these rules
    anything else                           0 (listed by :func:`unknown_mac_layers`)
    ======================================  ================================================

Node counts equal RESPECT's (the per-model node counts of its released graphs, :data:`RESPECT_NODE_COUNTS`)
minus its dummy source and sink for all 17 models; see
``data/models/README.md``.

Models
    Functional models and ``Sequential`` models with a known input shape (their inner functional
    graph, whose first node is the ``InputLayer``) have a layer graph; a subclassed model (only a
    ``call`` method) has none and is refused with a ``ValueError``. A saved ``.keras``/``.h5``
    file is read by :func:`load_keras_file` (``keras.models.load_model(path, compile=False)``),
    the loader ``respect-segment`` uses, so node names and order (the layer names saved in the
    file) are the same in both and a schedule of the exported graph fits the segmenter.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from respect_jax.coral._deps import import_keras, import_tensorflow
from respect_jax.graphs.graph import Graph

# name -> (keras.applications constructor, default input size). Names follow RESPECT's model list.
MODELS: dict[str, tuple[str, int]] = {
    "vgg16": ("VGG16", 224),
    "vgg19": ("VGG19", 224),
    "mobilenet": ("MobileNet", 224),
    "mobilenetv2": ("MobileNetV2", 224),
    "xception": ("Xception", 299),
    "resnet50": ("ResNet50", 224),
    "resnet101": ("ResNet101", 224),
    "resnet152": ("ResNet152", 224),
    "resnet50v2": ("ResNet50V2", 224),
    "resnet101v2": ("ResNet101V2", 224),
    "resnet152v2": ("ResNet152V2", 224),
    "inception_v3": ("InceptionV3", 299),
    "inception_resnet_v2": ("InceptionResNetV2", 299),
    "densenet121": ("DenseNet121", 224),
    "densenet169": ("DenseNet169", 224),
    "densenet201": ("DenseNet201", 224),
    "nasnetmobile": ("NASNetMobile", 224),
}

# RESPECT's node counts (of its released graphs, arXiv 2304.04716), which include one dummy source and one
# dummy sink.
RESPECT_NODE_COUNTS: dict[str, int] = {
    "vgg16": 21,
    "vgg19": 24,
    "mobilenet": 88,
    "xception": 134,
    "mobilenetv2": 156,
    "resnet50": 177,
    "resnet50v2": 192,
    "inception_v3": 313,
    "resnet101": 347,
    "resnet101v2": 379,
    "densenet121": 429,
    "resnet152": 517,
    "resnet152v2": 566,
    "densenet169": 597,
    "densenet201": 709,
    "nasnetmobile": 771,
    "inception_resnet_v2": 782,
}

_ELEMENTWISE_AFFINE = {
    "BatchNormalization",
    "LayerNormalization",
    "GroupNormalization",
    "UnitNormalization",
    "Normalization",
    "Rescaling",
    "CustomScaleLayer",
    "LayerScale",
}
_ELEMENTWISE_MERGE = {"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum"}
_ZERO_MAC = {
    "InputLayer",
    "Concatenate",
    "Activation",
    "ReLU",
    "LeakyReLU",
    "PReLU",
    "ELU",
    "Softmax",
    "ZeroPadding1D",
    "ZeroPadding2D",
    "ZeroPadding3D",
    "Cropping1D",
    "Cropping2D",
    "Cropping3D",
    "Reshape",
    "Flatten",
    "Permute",
    "RepeatVector",
    "Dropout",
    "SpatialDropout1D",
    "SpatialDropout2D",
    "SpatialDropout3D",
    "GaussianNoise",
    "GaussianDropout",
    "AlphaDropout",
    "Identity",
    "UpSampling1D",
    "UpSampling2D",
    "UpSampling3D",
    "Resizing",
    "CenterCrop",
}


@dataclass(frozen=True)
class CallNode:
    """One call of an operation inside a functional model (one graph node).

    Attributes:
        index: graph node id.
        name: unique node name (``layer`` or ``layer@i`` for the i-th call of a shared layer).
        operation: the Keras layer/operation.
        node: the Keras ``Node`` of this call (its ``arguments``, ``input_tensors``, ``outputs``).
    """

    index: int
    name: str
    operation: Any
    node: Any


def _shape(tensor) -> tuple[int, ...]:
    """Static shape with the batch (and any unknown) dimension set to 1."""
    return tuple(1 if d is None else int(d) for d in tensor.shape)


def _elements(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape))


def _mro_names(obj) -> set[str]:
    return {cls.__name__ for cls in type(obj).__mro__}


def _channels(layer, shape: tuple[int, ...]) -> int:
    fmt = getattr(layer, "data_format", "channels_last")
    return shape[1] if fmt == "channels_first" else shape[-1]


def layer_macs(layer, in_shapes: list[tuple[int, ...]], out_shapes: list[tuple[int, ...]]) -> int | None:
    """Multiply-accumulates of one call of ``layer`` (module docstring rules), batch 1.

    Returns None for a layer type without a rule (the caller records 0 and reports it).
    """
    names = _mro_names(layer)
    out_el = sum(_elements(s) for s in out_shapes)
    in_el = sum(_elements(s) for s in in_shapes)
    cls = type(layer).__name__
    if "Functional" in names or "Sequential" in names:
        return sum(int(m) for m in graph_from_keras(layer).macs)
    if "BaseSeparableConv" in names:
        k = math.prod(layer.kernel_size)
        in_ch = _channels(layer, in_shapes[0])
        mult = layer.depth_multiplier
        spatial = out_el // max(1, _channels(layer, out_shapes[0]))
        return spatial * in_ch * mult * k + out_el * in_ch * mult
    if "BaseDepthwiseConv" in names:
        return out_el * math.prod(layer.kernel_size)
    if "BaseConvTranspose" in names:
        return in_el * math.prod(layer.kernel_size) * layer.filters
    if "BaseConv" in names:
        groups = getattr(layer, "groups", 1) or 1
        return out_el * math.prod(layer.kernel_size) * (_channels(layer, in_shapes[0]) // groups)
    if cls == "Dense":
        return out_el * in_shapes[0][-1]
    if names & _ELEMENTWISE_AFFINE:
        return out_el
    if "BaseGlobalPooling" in names:
        return in_el
    if "BasePooling" in names:
        return out_el * math.prod(layer.pool_size)
    if cls in _ELEMENTWISE_MERGE:
        return max(0, len(in_shapes) - 1) * out_el
    if names & _ZERO_MAC:
        return 0
    return None


def functional_graph(model):
    """The functional model whose layer graph describes ``model``: ``model`` itself, or the inner
    functional graph of a ``Sequential`` model. ``ValueError`` for a model without one (subclassed,
    or a ``Sequential`` model that was never given an input shape)."""
    inner = getattr(model, "_functional", None) if "Sequential" in _mro_names(model) else None
    graph = inner if inner is not None else model
    if not hasattr(graph, "_nodes_by_depth") or not hasattr(graph, "operations"):
        if "Sequential" in _mro_names(model):
            kind = "Sequential model without an input shape"
        else:
            kind = f"{type(model).__name__} (a subclassed model)"
        raise ValueError(
            f"Keras model {getattr(model, 'name', '?')!r} is a {kind}: it has no layer graph; "
            "export a functional or Sequential model built with keras.Input"
        )
    return graph


def keras_call_nodes(model) -> list[CallNode]:
    """Every call of every operation inside ``model``, numbered as the exported graph's nodes."""
    model = functional_graph(model)
    in_model = {id(n) for nodes in model._nodes_by_depth.values() for n in nodes}
    calls: list[CallNode] = []
    for op in model.operations:
        own = [n for n in op._inbound_nodes if id(n) in in_model]
        for i, node in enumerate(own):
            name = op.name if i == 0 else f"{op.name}@{i}"
            calls.append(CallNode(index=len(calls), name=name, operation=op, node=node))
    return calls


def call_edges(calls: list[CallNode]) -> list[tuple[int, int]]:
    """Sorted unique ``(producer, consumer)`` pairs between the calls of :func:`keras_call_nodes`."""
    producer = {id(t): c.index for c in calls for t in c.node.outputs}
    edges = set()
    for c in calls:
        for t in c.node.input_tensors:
            if id(t) in producer and producer[id(t)] != c.index:
                edges.add((producer[id(t)], c.index))
    return sorted(edges)


def _unknown_calls(model, prefix: str = "") -> list[tuple[str, str]]:
    """``(name, layer type)`` of every call without a MAC rule, nested models searched too."""
    found = []
    for c in keras_call_nodes(model):
        op = c.operation
        if {"Functional", "Sequential"} & _mro_names(op):
            found += _unknown_calls(op, f"{prefix}{c.name}/")
        elif layer_macs(op, [_shape(t) for t in c.node.input_tensors], [_shape(t) for t in c.node.outputs]) is None:
            found.append((prefix + c.name, type(op).__name__))
    return found


def unknown_mac_layers(model) -> list[str]:
    """Names of calls whose layer type has no MAC rule (they were given 0 MACs).

    A layer inside a nested model is named ``outer/inner`` (its MACs are part of ``outer``'s).
    """
    return [name for name, _ in _unknown_calls(model)]


def describe_unknown_macs(model) -> list[str]:
    """:func:`unknown_mac_layers` as ``"name (LayerType)"`` strings, for messages."""
    return [f"{name} ({cls})" for name, cls in _unknown_calls(model)]


def graph_from_keras(model, name: str | None = None, source: str = "") -> Graph:
    """The graph of a functional Keras model (module docstring rules)."""
    calls = keras_call_nodes(model)
    params, out_size, macs = [], [], []
    counted: set[int] = set()
    for c in calls:
        op = c.operation
        first = id(op) not in counted
        counted.add(id(op))
        params.append(int(op.count_params()) if first and hasattr(op, "count_params") and op.built else 0)
        outs = [_shape(t) for t in c.node.outputs]
        ins = [_shape(t) for t in c.node.input_tensors]
        out_size.append(sum(_elements(s) for s in outs))
        m = layer_macs(op, ins, outs)
        macs.append(0 if m is None else int(m))
    return Graph(
        name=name or model.name,
        params=np.array(params, dtype=np.int64),
        output_size=np.array(out_size, dtype=np.int64),
        macs=np.array(macs, dtype=np.int64),
        edges=np.array(call_edges(calls), dtype=np.int64).reshape(-1, 2),
        node_names=tuple(c.name for c in calls),
        ops=tuple(type(c.operation).__name__ for c in calls),
        source=source,
    )


def model_spec(name: str, input_size: int | None = None) -> tuple[str, int]:
    """``(keras.applications constructor, input size)`` of a bundled model name."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    ctor, size = MODELS[name]
    return ctor, int(input_size or size)


def build_keras_model(name: str, include_top: bool = False, input_size: int | None = None, weights: str | None = None):
    """``keras.applications.<Model>(weights=None, include_top=..., input_shape=(s, s, 3))``.

    With ``include_top=True`` the input shape is passed too (allowed when ``weights`` is None).
    """
    keras = import_keras()
    ctor, size = model_spec(name, input_size)
    return getattr(keras.applications, ctor)(weights=weights, include_top=include_top, input_shape=(size, size, 3))


def graph_name(name: str, include_top: bool = False) -> str:
    """File/graph name of an exported model: ``resnet50`` or ``resnet50_top``."""
    return f"{name}_top" if include_top else name


def export_keras_model(
    name: str, include_top: bool = False, input_size: int | None = None, unknown: list[str] | None = None
) -> Graph:
    """Build a bundled ``keras.applications`` model (random weights) and return its graph.

    ``unknown``: if a list, the layers without a MAC rule (:func:`describe_unknown_macs`) are
    appended to it (none for the bundled models).
    """
    tf = import_tensorflow()
    keras = import_keras()
    ctor, size = model_spec(name, input_size)
    model = build_keras_model(name, include_top, size)
    source = (
        f"keras.applications.{ctor}(weights=None, include_top={include_top}, input_shape=({size}, {size}, 3)) "
        f"[keras {keras.__version__}, tensorflow {tf.__version__}; respect_jax.coral.keras_export]"
    )
    graph = graph_from_keras(model, name=graph_name(name, include_top), source=source)
    if unknown is not None:
        unknown += describe_unknown_macs(model)
    keras.backend.clear_session()
    return graph


KERAS_FILE_SUFFIXES = (".keras", ".h5")


def _first_line(err: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message`` (cut at ``limit`` characters: Keras may append whole configs)."""
    text = str(err).strip()
    line = text.splitlines()[0] if text else ""
    if len(line) > limit:
        line = line[: limit - 3].rstrip() + "..."
    return f"{type(err).__name__}: {line}" if line else type(err).__name__


def load_keras_file(path: str | os.PathLike):
    """``keras.models.load_model(path, compile=False)`` in a fresh Keras session.

    The loader of ``respect-segment``; any failure (corrupt file, unknown custom layer, a
    ``Lambda`` layer refused by safe mode...) is a one-line ``ValueError`` naming the file.
    """
    keras = import_keras()
    path = Path(path)
    if path.suffix not in KERAS_FILE_SUFFIXES:
        raise ValueError(f"{path}: expected a {' or '.join(KERAS_FILE_SUFFIXES)} file")
    keras.backend.clear_session()
    try:
        return keras.models.load_model(path, compile=False)
    except Exception as err:  # Keras raises assorted types (ValueError, TypeError, KeyError, OSError...)
        raise ValueError(f"{path}: cannot load the Keras model ({_first_line(err)})") from None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export_keras_file(path: str | os.PathLike, name: str | None = None, unknown: list[str] | None = None) -> Graph:
    """The graph of a saved ``.keras``/``.h5`` model (graph name: the file's stem).

    Node names are the ones ``respect-segment model=<path>`` uses (same loader, same rules).
    ``unknown``: as in :func:`export_keras_model`.
    """
    tf = import_tensorflow()
    keras = import_keras()
    path = Path(path)
    model = load_keras_file(path)
    source = (
        f"{path.name} (sha256 {_sha256(path)[:16]}): keras.models.load_model(compile=False) "
        f"[keras {keras.__version__}, tensorflow {tf.__version__}; respect_jax.coral.keras_export]"
    )
    graph = graph_from_keras(model, name=name or path.stem, source=source)
    if unknown is not None:
        unknown += describe_unknown_macs(model)
    keras.backend.clear_session()
    return graph


def sanitize(name: str) -> str:
    """A tensor/file-safe version of a node name (``[A-Za-z0-9_]`` only)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)
