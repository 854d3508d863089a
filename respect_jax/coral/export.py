"""The library of ``respect-export``: model arguments -> graph JSON files, checked before any framework loads.

A model argument is a bundled name (:data:`respect_jax.coral.keras_export.MODELS`) or a model file:

* ``.keras``/``.h5``: loaded with ``keras.models.load_model(path, compile=False)`` (the loader of
  ``respect-segment``) and exported by :mod:`respect_jax.coral.keras_export` (one node per layer call, named
  after the layer), so a schedule of the exported graph can be given back to ``respect-segment``;
* ``.tflite``: read by :mod:`respect_jax.coral.tflite_import` (one node per TFLite operator, no TensorFlow);
* ``.onnx``: read by :func:`respect_jax.graphs.onnx_import.graph_from_onnx` (the ``onnx`` package only: one
  node per ONNX node that reads activations; reshapes, identities and constant folding dropped).

A file's graph is named after the file's stem. Every argument is checked first without TensorFlow: its name,
its type, its first bytes (``.keras``: a zip archive with ``config.json``; ``.h5``: the HDF5 signature at 0,
512, 1024, ...; ``.tflite``: the ``TFL3`` identifier; ``.onnx``: a ``ModelProto`` starting with its
``ir_version`` field), the options that apply to bundled models only, and every output location; then every
model file is loaded (a damaged one fails before anything is written); then the graphs are written in the
order given. Errors are one-line ``ValueError``s. Layers without a MAC rule get 0 MACs and are listed in the
result (:class:`ExportedGraph`), as are ONNX nodes whose output shape is unknown (0 elements).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from respect_jax.coral.options import ExportConfig, as_list

KERAS_SUFFIXES = (".keras", ".h5")  # = keras_export.KERAS_FILE_SUFFIXES (not imported here: no numpy at start-up)
TFLITE_SUFFIX = ".tflite"
ONNX_SUFFIX = ".onnx"
FILE_SUFFIXES = (*KERAS_SUFFIXES, TFLITE_SUFFIX, ONNX_SUFFIX)
_ONNX_FIRST_BYTE = 0x08  # a serialised ModelProto starts with field 1 (ir_version, a varint): tag 0x08
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
UNKNOWN_SHOWN = 8  # layers named in a warning line


@dataclass(frozen=True)
class ModelArg:
    """One entry of ``model=``: a bundled name (``file`` None) or a model file."""

    text: str
    file: Path | None = None

    @property
    def kind(self) -> str:
        if self.file is None:
            return "bundled"
        return {TFLITE_SUFFIX: "tflite", ONNX_SUFFIX: "onnx"}.get(self.file.suffix, "keras")


@dataclass
class ExportedGraph:
    """A graph written by :func:`export_graphs`: where, and its nodes without a MAC rule or output shape."""

    graph: object  # respect_jax.graphs.graph.Graph
    path: Path
    kind: str
    unknown: list[str] = field(default_factory=list)
    shapeless: list[str] = field(default_factory=list)


def _looks_like_file(text: str) -> bool:
    return bool(text) and (bool(Path(text).suffix) or "/" in text or os.sep in text or Path(text).exists())


def _check_file_content(path: Path, text: str) -> None:
    """Cheap content check by the first bytes (no TensorFlow): ``ValueError`` if it is not one."""
    try:
        with path.open("rb") as fh:
            head = fh.read(8)
            if path.suffix == ".keras":
                ok = zipfile.is_zipfile(fh)
                if ok:
                    with zipfile.ZipFile(fh) as zf:
                        ok = "config.json" in zf.namelist()
                what = "a Keras .keras file (a zip archive with config.json, as model.save writes)"
            elif path.suffix == ".h5":
                # HDF5's signature is at offset 0 or, after a user block, at 512, 1024, 2048...
                ok, offset = False, 0
                while not ok and offset <= path.stat().st_size - len(_HDF5_SIGNATURE):
                    fh.seek(offset)
                    ok = fh.read(len(_HDF5_SIGNATURE)) == _HDF5_SIGNATURE
                    offset = 512 if offset == 0 else offset * 2
                what = "an HDF5 (.h5) Keras file"
            elif path.suffix == ONNX_SUFFIX:
                ok = head[:1] == bytes([_ONNX_FIRST_BYTE])
                what = "an ONNX model (a ModelProto protobuf, which starts with its ir_version)"
            else:
                from respect_jax.coral.tflite_import import TFLITE_IDENTIFIER, has_tflite_identifier

                ok = has_tflite_identifier(head)
                what = f"a TFLite model (no {TFLITE_IDENTIFIER.decode()} flatbuffer identifier)"
    except zipfile.BadZipFile as err:
        raise ValueError(f"model {text} is damaged ({err})") from None
    except OSError as err:
        raise ValueError(f"model {text}: cannot read ({err.strerror or err})") from None
    if not ok:
        raise ValueError(f"model {text} is not {what}; is it damaged or of another format?")


def check_model_file(text: str) -> Path:
    """A model file argument, checked without TensorFlow; ``ValueError`` (one line) otherwise."""
    path = Path(text)
    if path.is_dir():
        raise ValueError(
            f"model {text} is a folder; give a .keras, .h5, .tflite or .onnx file "
            "(convert a TensorFlow SavedModel folder to .tflite first)"
        )
    if path.suffix not in FILE_SUFFIXES:
        kind = f"unsupported file type {path.suffix!r}" if path.suffix else "neither a bundled model name nor a file"
        raise ValueError(f"model {text}: {kind}; expected .keras, .h5, .tflite or .onnx")
    if not path.exists():
        raise ValueError(f"model {text}: no such file")
    if not path.is_file():
        raise ValueError(f"model {text} is not a regular file")
    _check_file_content(path, text)
    return path


def model_args(value) -> list[ModelArg]:
    """``model=`` as bundled names and checked model files (``all`` expands); no TensorFlow needed."""
    from respect_jax.coral.keras_export import MODELS

    items = [str(v) for v in as_list(value)]
    if items == ["all"]:
        return [ModelArg(name) for name in MODELS]
    if not items:
        raise ValueError("model is an empty list; give a bundled name, all, or a .keras/.h5/.tflite/.onnx file")
    args = []
    for text in items:
        if text in MODELS:
            args.append(ModelArg(text))
        elif _looks_like_file(text):
            args.append(ModelArg(text, check_model_file(text)))
        else:
            raise ValueError(
                f"unknown model {text!r}; choose from all, {', '.join(MODELS)}, or give a .keras/.h5/.tflite/.onnx file"
            )
    return args


def _check_options_apply(args: list[ModelArg], include_top, input_size) -> None:
    files = [a.text for a in args if a.file is not None]
    given = ["include_top=true"] if include_top else []
    if input_size is not None:
        given.append(f"input_size={input_size}")
    if files and given:
        verb, them = ("apply", "them") if len(given) > 1 else ("applies", "it")
        raise ValueError(
            f"{' and '.join(given)} {verb} to bundled models only; {files[0]} is exported as saved "
            f"(drop {them}, or export the bundled models in a separate command)"
        )


def output_paths(args: list[ModelArg], out: str | None, out_dir: str, include_top: bool) -> list[Path]:
    """Where each model's graph goes; two models writing one file are refused."""
    from respect_jax.coral.keras_export import graph_name

    if out and len(args) != 1:
        raise ValueError("out= names one file; use out_dir= for several models")
    paths = [
        Path(out) if out else Path(out_dir) / f"{a.file.stem if a.file else graph_name(a.text, include_top)}.json"
        for a in args
    ]
    seen: dict[Path, str] = {}
    for a, path in zip(args, paths, strict=True):
        key = Path(os.path.abspath(path))
        if key in seen:
            raise ValueError(
                f"models {seen[key]} and {a.text} would both write {path}; export them one at a time with out="
            )
        seen[key] = a.text
    return paths


def _graph_of(arg: ModelArg, include_top: bool, input_size, unknown: list[str], shapeless: list[str]):
    """The graph of one model; appends its layers without a MAC rule to ``unknown`` (and, for ONNX, its
    nodes without an inferred output shape to ``shapeless``)."""
    if arg.kind == "onnx":
        from respect_jax.graphs.onnx_import import graph_from_onnx, onnx_unknown_mac_operators

        graph = graph_from_onnx(arg.file, name=arg.file.stem, unknown_shapes=shapeless)
        unknown += onnx_unknown_mac_operators(graph)
        return graph
    if arg.kind == "tflite":
        from respect_jax.coral.tflite_import import import_tflite, unknown_mac_operators

        graph = import_tflite(arg.file, name=arg.file.stem)
        unknown += unknown_mac_operators(graph)
        return graph
    from respect_jax.coral.keras_export import export_keras_file, export_keras_model

    if arg.kind == "keras":
        return export_keras_file(arg.file, unknown=unknown)
    return export_keras_model(arg.text, include_top=include_top, input_size=input_size, unknown=unknown)


def export_graphs(config: ExportConfig) -> Iterator[ExportedGraph]:
    """Export every requested model, yielding each one right after its graph file is written.

    Arguments and output locations are checked first (no TensorFlow), then every model file is
    loaded (a damaged one fails before anything is written), then the graphs are written in the
    order given, bundled models built one at a time.
    """
    from respect_jax.coral.paths import check_output_file
    from respect_jax.graphs.graph import save_graph

    include_top = bool(config.include_top)
    args = model_args(config.model)
    _check_options_apply(args, config.include_top, config.input_size)
    paths = output_paths(args, config.out, str(config.out_dir), include_top)
    for path in paths:  # before the first (slow) model is built
        check_output_file(path, "out")
    loaded = {}
    for i, arg in enumerate(args):
        if arg.file is not None:
            unknown: list[str] = []
            shapeless: list[str] = []
            loaded[i] = (_graph_of(arg, include_top, config.input_size, unknown, shapeless), unknown, shapeless)
    for i, (arg, path) in enumerate(zip(args, paths, strict=True)):
        if i in loaded:
            graph, unknown, shapeless = loaded.pop(i)
        else:
            unknown, shapeless = [], []
            graph = _graph_of(arg, include_top, config.input_size, unknown, shapeless)
        save_graph(graph, path)
        yield ExportedGraph(graph, path, arg.kind, unknown, shapeless)


def _named(names: list[str]) -> str:
    shown = ", ".join(names[:UNKNOWN_SHOWN])
    more = f" (and {len(names) - UNKNOWN_SHOWN} more)" if len(names) > UNKNOWN_SHOWN else ""
    return shown + more


def export_lines(item: ExportedGraph, prog: str = "respect-export") -> list[str]:
    """The progress line of an exported graph, then its warning lines (layers without a MAC rule; ONNX nodes
    with an unknown output shape)."""
    graph, unknown, shapeless = item.graph, item.unknown, item.shapeless
    lines = [
        f"{graph.name}: {graph.num_nodes} nodes, {graph.num_edges} edges, params={int(graph.params.sum()):,} "
        f"macs={int(graph.macs.sum()):,} -> {item.path}"
    ]
    what = {"tflite": "operator", "onnx": "node"}.get(item.kind, "layer")
    if unknown:
        lines.append(
            f"{prog}: warning: {graph.name}: {len(unknown)} {what}{'s' if len(unknown) > 1 else ''} "
            f"{'have' if len(unknown) > 1 else 'has'} no MAC rule, counted as 0 MACs: {_named(unknown)}"
        )
    if shapeless:
        lines.append(
            f"{prog}: warning: {graph.name}: {len(shapeless)} node{'s' if len(shapeless) > 1 else ''} "
            f"{'have' if len(shapeless) > 1 else 'has'} an unknown output shape, counted as 0 elements: "
            f"{_named(shapeless)}"
        )
    return lines
