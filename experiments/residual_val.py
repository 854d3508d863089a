"""Residual-network validation graphs: generated architectures whose topological orders differ in a few places only.

``build`` writes ten architectures of the residual and inception families of :mod:`respect_jax.graphs.architectures`
(``basic``, ``bottleneck``, ``preact``, ``xception``: chains of residual blocks whose only freedom of order is a
downsampling block's shortcut; ``incres``, ``inception``: multi-branch modules), 300-800 nodes, one family per graph,
no hybrid, seeds 2701-2710 (session 27's own), ids in SPEC order, to ``data/models_val/residual_generated/``. They
stand for the multi-order test models of that kind (ResNets, Inception-ResNet) that ``data/models_val`` lacked when the
window re-solves' skip rule was chosen (``experiments/results/latency_window_free_val.md``). Validation only: the
bundled models of ``data/models/`` are the test set.

    .venv/bin/python experiments/residual_val.py build
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nas_val import write_family_graphs  # noqa: E402

OUT_DIR = ROOT / "data" / "models_val" / "residual_generated"
#: (family, seed); every graph has 300-800 nodes
GRAPHS = (
    ("basic", 2701), ("bottleneck", 2702), ("bottleneck", 2703), ("preact", 2704), ("preact", 2705),
    ("incres", 2706), ("incres", 2707), ("inception", 2708), ("xception", 2709), ("bottleneck", 2710),
)


def build() -> list[Path]:
    """Write the :data:`GRAPHS` (SPEC JSON, ids in SPEC order) and return their paths."""
    return write_family_graphs([(f"{family}_{seed}", family, 300, 800, seed) for family, seed in GRAPHS], OUT_DIR)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build",))
    parser.parse_args()
    build()


if __name__ == "__main__":
    main()
