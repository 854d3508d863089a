"""``respect-export``: Keras/TFLite/ONNX models -> graph JSON files (Keras/TFLite need the ``coral`` extra,
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

Options (the fields of :class:`respect_jax.coral.options.ExportConfig`, whose defaults are this command's):
``model`` (a name from ``respect_jax.coral.keras_export.MODELS``, a ``.keras``/``.h5``/``.tflite``/``.onnx``
file, a list of these, or ``all``), ``include_top`` (false, as RESPECT's graphs), ``input_size`` (null: 224,
or 299 for Inception/Xception), ``out_dir`` (data/models), ``out`` (explicit file, one model only).

How each kind of file is read, and what is checked before TensorFlow is imported:
:mod:`respect_jax.coral.export`. Errors (an unknown name; a missing, damaged or foreign file;
``include_top``/``input_size`` with a file; two models writing one file; an unwritable output; a file that
cannot be loaded) print one line and exit 2, with nothing written: every model file of the list is loaded
before the first graph is written. Layers without a MAC rule get 0 MACs, and the command says so in one
warning line after the progress line of that model (``respect-export: warning: <graph>: N layers have no MAC
rule, counted as 0 MACs: name (Type), ...``; "operators" for a ``.tflite``, "nodes" for an ``.onnx``); ONNX
nodes whose output shape is unknown get a second warning line (``N nodes have an unknown output shape, counted
as 0 elements: ...``). The graph is still written.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from respect_jax.cli.common import CONF_DIR, user_errors_exit
from respect_jax.coral._deps import CoralDependencyError
from respect_jax.coral.options import ExportConfig, config_from, defaults

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
        **defaults(ExportConfig),
        "hydra": {**HYDRA_QUIET, "help": {"app_name": "respect-export", "header": _EXPORT_HELP}},
    },
)


def export(cfg: DictConfig) -> list[Path]:
    """Export every model of a ``respect_export`` config (:func:`respect_jax.coral.export.export_graphs`),
    printing a progress line (and any warning lines) per graph; returns the written paths."""
    from respect_jax.coral.export import export_graphs, export_lines

    values = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    written = []
    for item in export_graphs(config_from(ExportConfig, values)):
        for line in export_lines(item):
            print(line, file=sys.stderr)
        written.append(item.path)
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
