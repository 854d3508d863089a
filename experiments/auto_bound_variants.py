"""Validation of the crossing bound's search order inside ``solver=auto`` (issue 27): runs auto on validation models
(never the bundled test models) once per variant and writes the certified gaps side by side.

Variants: ``seed=False|True`` (``crossing_lower_bound(seed=...)``: chain buckets from their hull bounds, latency's
hull pass first) and ``windows=SHARE`` (``bounds.WINDOWS_FIRST_SHARE``: latency's independent windows first).

    .venv/bin/python experiments/auto_bound_variants.py --variants seed=False,seed=True --stages 8 \
        --objectives paper,latency --out experiments/results/bounds_val_seed_s22.json
    .venv/bin/python experiments/auto_bound_variants.py --variants windows=0,windows=0.5 --stages 4,8 \
        --objectives latency --out experiments/results/bounds_val_latency_order_s22.json
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

import auto_models  # noqa: E402

import respect_jax.solvers.auto as auto  # noqa: E402
from respect_jax.compile_cache import enable_compilation_cache, resolve_cache_dir  # noqa: E402
from respect_jax.solvers import bounds  # noqa: E402

VALIDATION = "efficientnetb0,convnext_base,efficientnetb3,efficientnetv2s,efficientnetb6,efficientnetv2m"


def apply(variant: str) -> None:
    """Set one variant (``seed=True``, ``windows=0.5``) for the next runs."""
    name, _, value = variant.partition("=")
    if name == "seed":
        auto.crossing_lower_bound = functools.partial(bounds.crossing_lower_bound, seed=value == "True")
    elif name == "windows":
        bounds.WINDOWS_FIRST_SHARE = float(value)
    else:
        raise ValueError(f"unknown variant {variant!r}; use seed=True|False or windows=SHARE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", required=True, help="comma list, e.g. seed=False,seed=True")
    parser.add_argument("--models", default=VALIDATION, help="names in data/models_val")
    parser.add_argument("--stages", default="8")
    parser.add_argument("--objectives", default="paper,latency")
    parser.add_argument("--budget", type=float, default=10.0)
    parser.add_argument("--out", required=True, help="output JSON")
    args = parser.parse_args()
    enable_compilation_cache(resolve_cache_dir("auto"))
    paths = [str(ROOT / "data" / "models_val" / f"{name}.json") for name in args.models.split(",")]
    out = {}
    for variant in args.variants.split(","):
        apply(variant)
        records = auto_models.run(paths, auto_models.stage_range(args.stages), args.objectives.split(","),
                                  args.budget, "coral_usb")
        out[variant] = [{k: r[k] for k in ("graph", "stages", "objective_name", "certified_gap", "optimal", "auto_s",
                                           "running_after_return")} for r in records]
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
