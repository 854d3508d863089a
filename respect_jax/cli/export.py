"""``respect-export``: Keras/TFLite/ONNX models -> SPEC JSON graphs (Keras/TFLite need the ``coral`` extra,
ONNX the ``onnx`` extra).

Examples::

    respect-export model=resnet50                      # -> data/models/resnet50.json
    respect-export model=all                           # every bundled model
    respect-export model=[vgg16,mobilenetv2] include_top=true   # -> data/models/vgg16_top.json ...
    respect-export model=xception input_size=224 out=/tmp/x.json
    respect-export model=path/to/my_model.keras        # your own model (.keras or .h5) -> data/models/my_model.json
    respect-export model=path/to/my_model.tflite out=/tmp/my_tflite.json
    respect-export model=path/to/my_model.onnx         # e.g. torch.onnx.export's file -> data/models/my_model.json
    respect-export model=[vgg16,my_model.keras] out_dir=graphs   # names and files mixed

Options: ``model`` (a name from ``respect_jax.coral.keras_export.MODELS``, a ``.keras``/``.h5``/
``.tflite``/``.onnx`` file, a list of these, or ``all``), ``include_top`` (false, as RESPECT's graphs),
``input_size`` (null: 224, or 299 for Inception/Xception), ``out_dir`` (data/models), ``out``
(explicit file, one model only). The config is registered in Python (Hydra ConfigStore), so no
YAML file is needed.

Model files
    A ``.keras``/``.h5`` file is loaded with ``keras.models.load_model(path, compile=False)``, the
    loader of ``respect-segment``, and exported with the rules of
    :mod:`respect_jax.coral.keras_export` (one node per layer call, named after the layer), so a
    schedule of the exported graph can be given back to
    ``respect-segment model=<the same file> schedule=RESULT.json``. A ``.tflite`` file is read with
    :mod:`respect_jax.coral.tflite_import` (one node per TFLite operator, no TensorFlow needed);
    its graph is for scheduling and analysis (respect-segment needs the Keras model; that module's
    docstring lists where the two exports of one model differ). An ``.onnx`` file is read with
    :func:`respect_jax.graphs.onnx_import.graph_from_onnx` (the ``onnx`` package only: no framework;
    one node per ONNX node that reads activations, reshapes/identities/constant folding dropped, as
    that module's docstring says); its graph is for scheduling and analysis. A file's graph is named after the
    file's stem and written to ``out_dir/<stem>.json`` (or ``out``). ``include_top`` and
    ``input_size`` only build bundled models: with a file in ``model`` they are refused
    (``include_top=true`` or any ``input_size``), since a file is exported as it was saved.

Errors (one line, exit 2, nothing written)
    An unknown name; a file that is missing, a folder, of another type, or not a Keras/TFLite/ONNX
    file by its first bytes (``.keras``: a zip archive with ``config.json``; ``.h5``: the HDF5
    signature; ``.tflite``: the ``TFL3`` identifier; ``.onnx``: a ``ModelProto`` starting with its
    ``ir_version`` field); ``include_top``/``input_size`` with a file;
    two models that would write the same file; an unwritable output. All of these are checked
    before TensorFlow is imported and before any model is built. A file that passes these checks
    but cannot be loaded (damaged inside; a custom layer or model class, whose code this command
    cannot import: call ``graph_from_keras`` in Python after importing it; a subclassed model,
    which has no layer graph) fails when it is loaded, before anything is written: every model
    file of the list is loaded before the first graph is written.

Layers without a MAC rule (custom layers, LSTM, attention... in Keras; custom operators such as
``edgetpu-custom-op`` in TFLite; in ONNX, any op of the table in :mod:`respect_jax.graphs.onnx_import`'s
docstring) get 0 MACs, and the command says so in one warning line after the
progress line of that model (``respect-export: warning: <graph>: N layers have no MAC rule, counted
as 0 MACs: name (Type), ...``; "operators" for a ``.tflite``; a layer inside a nested model is named
``outer/inner``); the graph is still written. ONNX nodes whose output shape ONNX shape inference cannot determine (a
custom-domain op, say) get a second warning line (``N nodes have an unknown output shape, counted as 0
elements: ...``).
"""

from __future__ import annotations

import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, ListConfig

from respect_jax.cli.common import CONF_DIR, user_errors_exit
from respect_jax.coral._deps import CoralDependencyError

HYDRA_QUIET = {
    "run": {"dir": "."},
    "output_subdir": None,
}

# --help (hydra.help.header; the usage line and the footer: conf/hydra/help/respect.yaml). No dollar sign
# but the ${...} interpolations of current values: Hydra substitutes $NAME into the help.
_EXPORT_HELP = """\
Keras/TFLite/ONNX models -> SPEC JSON graphs (Keras/TFLite need the coral extra, ONNX the onnx extra): bundled
models by name, or .keras/.h5/.tflite/.onnx files; written to out_dir/<name>.json, or out for one model.

Main options (key=value; current values in brackets):
  model               (required) a bundled name, a .keras/.h5/.tflite/.onnx file, a list of these, or all
  include_top         true: with the classifier head (bundled models; RESPECT's graphs have none)
  input_size          input resolution of bundled models (default: 224, 299 for Inception/Xception)
  out_dir             [${out_dir}]
  out                 explicit output file, one model only

Config groups: none.

Examples:
  respect-export model=resnet50                      # -> data/models/resnet50.json
  respect-export model=[vgg16,mobilenetv2] include_top=true
  respect-export model=path/to/my_model.keras        # -> data/models/my_model.json
  respect-export model=path/to/my_model.onnx         # -> data/models/my_model.json"""

ConfigStore.instance().store(
    name="respect_export",
    node={
        "defaults": [
            "_self_",
            {"override hydra/job_logging": "none"},
            {"override hydra/hydra_logging": "none"},
            {"override hydra/help": "respect"},  # --help: the layout of conf/hydra/help/respect.yaml
        ],
        "model": "???",
        "include_top": False,
        "input_size": None,
        "out_dir": "data/models",
        "out": None,
        "hydra": {**HYDRA_QUIET, "help": {"app_name": "respect-export", "header": _EXPORT_HELP}},
    },
)

KERAS_SUFFIXES = (".keras", ".h5")  # = keras_export.KERAS_FILE_SUFFIXES (not imported here: no numpy at start-up)
TFLITE_SUFFIX = ".tflite"
ONNX_SUFFIX = ".onnx"
FILE_SUFFIXES = (*KERAS_SUFFIXES, TFLITE_SUFFIX, ONNX_SUFFIX)
_ONNX_FIRST_BYTE = 0x08  # a serialised ModelProto starts with field 1 (ir_version, a varint): tag 0x08
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_UNKNOWN_SHOWN = 8  # layers named in the warning line


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

    items = [str(v) for v in value] if isinstance(value, list | tuple | ListConfig) else [str(value)]
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
    """The SPEC graph of one model; appends its layers without a MAC rule to ``unknown`` (and, for
    ONNX, its nodes without an inferred output shape to ``shapeless``)."""
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


def _report(graph, path: Path, unknown: list[str], what: str = "layer", shapeless: tuple[str, ...] = ()) -> None:
    print(
        f"{graph.name}: {graph.num_nodes} nodes, {graph.num_edges} edges, params={int(graph.params.sum()):,} "
        f"macs={int(graph.macs.sum()):,} -> {path}",
        file=sys.stderr,
    )
    if unknown:
        shown = ", ".join(unknown[:_UNKNOWN_SHOWN])
        more = f" (and {len(unknown) - _UNKNOWN_SHOWN} more)" if len(unknown) > _UNKNOWN_SHOWN else ""
        print(
            f"respect-export: warning: {graph.name}: {len(unknown)} {what}{'s' if len(unknown) > 1 else ''} "
            f"{'have' if len(unknown) > 1 else 'has'} no MAC rule, counted as 0 MACs: {shown}{more}",
            file=sys.stderr,
        )
    if shapeless:
        shown = ", ".join(shapeless[:_UNKNOWN_SHOWN])
        more = f" (and {len(shapeless) - _UNKNOWN_SHOWN} more)" if len(shapeless) > _UNKNOWN_SHOWN else ""
        print(
            f"respect-export: warning: {graph.name}: {len(shapeless)} node{'s' if len(shapeless) > 1 else ''} "
            f"{'have' if len(shapeless) > 1 else 'has'} an unknown output shape, counted as 0 elements: "
            f"{shown}{more}",
            file=sys.stderr,
        )


def export(cfg: DictConfig) -> list[Path]:
    """Export every requested model; returns the written paths.

    Arguments and output locations are checked first (no TensorFlow), then every model file is
    loaded (a damaged one fails before anything is written), then the graphs are written in the
    order given, bundled models built one at a time.
    """
    from respect_jax.coral.paths import check_output_file
    from respect_jax.graphs.graph import save_graph

    include_top = bool(cfg.include_top)
    args = model_args(cfg.model)
    _check_options_apply(args, cfg.include_top, cfg.input_size)
    paths = output_paths(args, cfg.out, str(cfg.out_dir), include_top)
    for path in paths:  # before the first (slow) model is built
        check_output_file(path, "out")
    loaded = {}
    for i, arg in enumerate(args):
        if arg.file is not None:
            unknown: list[str] = []
            shapeless: list[str] = []
            loaded[i] = (_graph_of(arg, include_top, cfg.input_size, unknown, shapeless), unknown, shapeless)
    written = []
    for i, (arg, path) in enumerate(zip(args, paths, strict=True)):
        if i in loaded:
            graph, unknown, shapeless = loaded.pop(i)
        else:
            unknown, shapeless = [], []
            graph = _graph_of(arg, include_top, cfg.input_size, unknown, shapeless)
        save_graph(graph, path)
        what = {"tflite": "operator", "onnx": "node"}.get(arg.kind, "layer")
        _report(graph, path, unknown, what, tuple(shapeless))
        written.append(path)
    return written


@hydra.main(config_path=CONF_DIR, config_name="respect_export", version_base="1.3")
@user_errors_exit("respect-export")
def _main(cfg: DictConfig) -> None:
    try:
        export(cfg)
    except CoralDependencyError as err:
        print(f"respect-export: error: {err}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    """Console-script entry point."""
    _main()


if __name__ == "__main__":
    main()
