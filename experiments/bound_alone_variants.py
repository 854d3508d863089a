"""The crossing lower bound alone (``solvers/bounds.crossing_lower_bound``) on one case, with a variant of its module
constants: prints one JSON line (bound, certified gap against ``upper``, time). Run each variant in a fresh process,
alternating, so that the variants see the same load (session 29, issue 27; validation graphs only).

    for v in base noinh nocone; do .venv/bin/python experiments/bound_alone_variants.py \\
        data/models_val/nas_generated/nas0_b.json 8 latency 0.004737631883472204 8 $v; done

Variants: ``base`` (the module as it is), ``noinh`` (``CHAIN_INHERIT = False``), ``nocone`` (``CONE = False``),
``pb<N>`` (``N`` chain buckets per boundary from the first pass), ``inh72`` (chain refinement up to 72 per boundary).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.solvers import bounds as B  # noqa: E402


def main() -> None:
    path, k, objective, upper, limit, variant = sys.argv[1:7]
    k, upper, limit = int(k), float(upper), float(limit)
    graph = load_graph(path)
    base = yaml.safe_load((ROOT / "conf" / "hardware" / "coral_usb.yaml").read_text())
    hw = hardware_from_dict({**base, "stages": k})
    if variant.startswith("pb"):
        B.CHAIN_BUCKETS_PER_BOUNDARY = int(variant[2:])
        B.CHAIN_REFINE_MAX_PER_BOUNDARY = max(B.CHAIN_REFINE_MAX_PER_BOUNDARY, int(variant[2:]))
    elif variant == "noinh":
        B.CHAIN_INHERIT = False
    elif variant == "nocone":
        B.CONE = False
    elif variant == "inh72":
        B.CHAIN_REFINE_MAX_PER_BOUNDARY = 72
    elif variant != "base":
        raise SystemExit(f"unknown variant {variant!r}")
    start = time.perf_counter()
    found = B.crossing_lower_bound(graph, hw, objective, 1.0, upper, limit)
    print(json.dumps({"graph": Path(path).name, "K": k, "obj": objective, "variant": variant, "limit": limit,
                      "bound": found["bound"], "gap": 1 - found["bound"] / upper,
                      "time": time.perf_counter() - start}), flush=True)


if __name__ == "__main__":
    main()
