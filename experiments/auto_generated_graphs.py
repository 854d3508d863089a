"""Write generated multi-branch architectures (Inception, Inception-ResNet, NAS cells) as SPEC JSON graphs: the
validation set of ``solver=auto``'s downset programme (issue 27), never the bundled test models.

    .venv/bin/python experiments/auto_generated_graphs.py --out /tmp/valgen
    .venv/bin/python experiments/auto_models.py --graphs '/tmp/valgen/*.json' --stages 2,4,8 --budget 10 --out ...

Each graph: ``respect_jax.graphs.architectures.generate_arch_numpy`` with one family only (no hybrid), a node target
drawn in ``[--min-nodes, --max-nodes]``, ``numpy.random.default_rng(seed)``, relabelled into SPEC order.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from respect_jax.graphs.architectures import FAMILY_NAMES, ArchConfig, generate_arch_numpy  # noqa: E402
from respect_jax.graphs.generators import relabel_spec_order  # noqa: E402
from respect_jax.graphs.graph import Graph, save_graph  # noqa: E402

#: family -> seeds of the session-24 validation set (seeds 0-2 were looked at while designing; 10-12 held out)
DEFAULT_SET = {"inception": [10, 11, 12], "incres": [10, 11], "nas0": [10], "nas1": [10]}


def family_graph(family: str, seed: int, min_nodes: int, max_nodes: int) -> Graph:
    """One architecture of ``family`` only (no second family), drawn with ``default_rng(seed)``."""
    if family not in FAMILY_NAMES:
        raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILY_NAMES)}")
    weights = [0.0] * len(FAMILY_NAMES)
    weights[FAMILY_NAMES.index(family)] = 1.0
    arch = ArchConfig(family_weights=tuple(weights), p_hybrid=0.0)
    graph = generate_arch_numpy(min_nodes, max_nodes, np.random.default_rng(seed), name=f"{family}_{seed}", arch=arch)
    return relabel_spec_order(graph)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the JSON graphs")
    parser.add_argument("--min-nodes", type=int, default=300)
    parser.add_argument("--max-nodes", type=int, default=800)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for family, seeds in DEFAULT_SET.items():
        for seed in seeds:
            graph = family_graph(family, seed, args.min_nodes, args.max_nodes)
            save_graph(graph, out / f"{graph.name}.json")
            print(graph.name, graph.num_nodes)


if __name__ == "__main__":
    main()
