"""Export the validation architectures (keras.applications models not among the 17 bundled ones).

Builds each model with ``weights=None, include_top=False`` and input 224x224x3 (random weights; the
graph does not depend on them) and writes its SPEC graph with the project's exporter,
:func:`respect_jax.coral.keras_export.graph_from_keras` (the function ``respect-export`` calls for
the bundled models), to ``data/models_val/<name>.json``. ``respect-export model=...`` accepts only the
bundled names (or saved model files), so this script builds the models itself and calls the same
export function. Needs the ``coral`` extra (TensorFlow); run one model at a time on a shared CPU::

    .venv-coral/bin/python data/models_val/export_val.py            # every model of VAL_MODELS
    .venv-coral/bin/python data/models_val/export_val.py efficientnetb0 nasnetlarge

Exits 1 if a model has layers without a MAC rule (nothing is written for it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# file name -> (keras.applications constructor, extra constructor keyword arguments). Input 224x224x3 for all.
VAL_MODELS: dict[str, tuple[str, dict]] = {
    "mobilenetv3small": ("MobileNetV3Small", {}),
    "mobilenetv3small_minimalistic": ("MobileNetV3Small", {"minimalistic": True}),
    "mobilenetv3large": ("MobileNetV3Large", {}),
    "mobilenetv3large_minimalistic": ("MobileNetV3Large", {"minimalistic": True}),
    "efficientnetb0": ("EfficientNetB0", {}),
    "efficientnetb1": ("EfficientNetB1", {}),
    "efficientnetb2": ("EfficientNetB2", {}),
    "efficientnetb3": ("EfficientNetB3", {}),
    "efficientnetb4": ("EfficientNetB4", {}),
    "efficientnetb5": ("EfficientNetB5", {}),
    "efficientnetb6": ("EfficientNetB6", {}),
    "efficientnetb7": ("EfficientNetB7", {}),
    "efficientnetv2b0": ("EfficientNetV2B0", {}),
    "efficientnetv2b1": ("EfficientNetV2B1", {}),
    "efficientnetv2b2": ("EfficientNetV2B2", {}),
    "efficientnetv2b3": ("EfficientNetV2B3", {}),
    "efficientnetv2s": ("EfficientNetV2S", {}),
    "efficientnetv2m": ("EfficientNetV2M", {}),
    "efficientnetv2l": ("EfficientNetV2L", {}),
    "convnext_tiny": ("ConvNeXtTiny", {}),
    "convnext_small": ("ConvNeXtSmall", {}),
    "convnext_base": ("ConvNeXtBase", {}),
    "convnext_large": ("ConvNeXtLarge", {}),
    "convnext_xlarge": ("ConvNeXtXLarge", {}),
    "nasnetlarge": ("NASNetLarge", {}),
}
INPUT_SIZE = 224


def _call_text(ctor: str, kwargs: dict, size: int) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    return f"keras.applications.{ctor}(weights=None, include_top=False, input_shape=({size}, {size}, 3){extra})"


def export_one(name: str, out_dir: Path) -> bool:
    """Build, export and save one model; False (nothing written) if a layer has no MAC rule."""
    from respect_jax.coral._deps import import_keras, import_tensorflow
    from respect_jax.coral.keras_export import describe_unknown_macs, graph_from_keras
    from respect_jax.graphs.graph import load_graph, save_graph

    tf, keras = import_tensorflow(), import_keras()
    ctor, kwargs = VAL_MODELS[name]
    keras.backend.clear_session()
    model = getattr(keras.applications, ctor)(
        weights=None, include_top=False, input_shape=(INPUT_SIZE, INPUT_SIZE, 3), **kwargs
    )
    unknown = describe_unknown_macs(model)
    if unknown:
        print(f"{name}: {len(unknown)} layers without a MAC rule: {', '.join(unknown[:8])}", file=sys.stderr)
        return False
    source = (
        f"{_call_text(ctor, kwargs, INPUT_SIZE)} "
        f"[keras {keras.__version__}, tensorflow {tf.__version__}; respect_jax.coral.keras_export]"
    )
    graph = graph_from_keras(model, name=name, source=source)
    assert int(graph.params.sum()) == model.count_params(), name
    path = out_dir / f"{name}.json"
    save_graph(graph, path)
    load_graph(path)  # the project's loader accepts it
    print(
        f"{name}: {graph.num_nodes} nodes, {graph.num_edges} edges, params={int(graph.params.sum()):,} "
        f"macs={int(graph.macs.sum()):,} -> {path}",
        file=sys.stderr,
    )
    keras.backend.clear_session()
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"models to export (default: all): {', '.join(VAL_MODELS)}")
    parser.add_argument("--out-dir", type=Path, default=HERE)
    args = parser.parse_args()
    names = args.names or list(VAL_MODELS)
    bad = [n for n in names if n not in VAL_MODELS]
    if bad:
        parser.error(f"unknown model {bad[0]!r}; choose from {', '.join(VAL_MODELS)}")
    failed = [n for n in names if not export_one(n, args.out_dir)]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
