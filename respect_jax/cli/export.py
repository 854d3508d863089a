"""``respect-export``: Keras application models -> SPEC JSON graphs (needs the ``coral`` extra).

Examples::

    respect-export model=resnet50                      # -> data/models/resnet50.json
    respect-export model=all                           # every bundled model
    respect-export model=[vgg16,mobilenetv2] include_top=true   # -> data/models/vgg16_top.json ...
    respect-export model=xception input_size=224 out=/tmp/x.json

Options: ``model`` (a name from ``respect_jax.coral.keras_export.MODELS``, a list, or ``all``),
``include_top`` (false, as RESPECT's graphs), ``input_size`` (null: 224, or 299 for Inception/
Xception), ``out_dir`` (data/models), ``out`` (explicit file, one model only). The config is
registered in Python (Hydra ConfigStore), so no YAML file is needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, ListConfig

from respect_jax.cli.common import user_errors_exit
from respect_jax.coral._deps import CoralDependencyError

HYDRA_QUIET = {
    "run": {"dir": "."},
    "output_subdir": None,
}

ConfigStore.instance().store(
    name="respect_export",
    node={
        "defaults": ["_self_", {"override hydra/job_logging": "none"}, {"override hydra/hydra_logging": "none"}],
        "model": "???",
        "include_top": False,
        "input_size": None,
        "out_dir": "data/models",
        "out": None,
        "hydra": HYDRA_QUIET,
    },
)


def model_names(value) -> list[str]:
    """``model=`` as a list of bundled names (``all`` expands)."""
    from respect_jax.coral.keras_export import MODELS

    names = list(value) if isinstance(value, list | tuple | ListConfig) else [str(value)]
    if names == ["all"]:
        return list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise ValueError(f"unknown model {unknown[0]!r}; choose from all, {', '.join(MODELS)}")
    return names


def export(cfg: DictConfig) -> list[Path]:
    """Export every requested model; returns the written paths."""
    from respect_jax.coral.keras_export import export_keras_model, graph_name
    from respect_jax.coral.paths import check_output_file
    from respect_jax.graphs.graph import save_graph

    names = model_names(cfg.model)
    if cfg.out and len(names) != 1:
        raise ValueError("out= names one file; use out_dir= for several models")
    paths = [Path(cfg.out) if cfg.out else Path(cfg.out_dir) / f"{graph_name(name, bool(cfg.include_top))}.json"
             for name in names]
    for path in paths:  # before the first (slow) model is built
        check_output_file(path, "out")
    written = []
    for name, path in zip(names, paths, strict=True):
        graph = export_keras_model(name, include_top=bool(cfg.include_top), input_size=cfg.input_size)
        save_graph(graph, path)
        print(
            f"{graph.name}: {graph.num_nodes} nodes, {graph.num_edges} edges, params={int(graph.params.sum()):,} "
            f"macs={int(graph.macs.sum()):,} -> {path}",
            file=sys.stderr,
        )
        written.append(path)
    return written


@hydra.main(config_path=None, config_name="respect_export", version_base="1.3")
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
