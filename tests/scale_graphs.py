"""Large random layered DAGs (ICML'24-style, 1k-10k nodes) for the scale tests and benchmarks.

A stand-in until ``respect_jax.graphs.generators`` has its own layered kind: ``levels`` levels of
about equal size; every node past the first level draws 1-5 distinct predecessors from earlier
levels (mostly the previous one), about 3 edges per node; parameter, output and MAC counts are
integers 0-5000, mostly 0 (as in the public benchmark graphs).
"""

from __future__ import annotations

import numpy as np

from respect_jax.graphs.graph import Graph


def layered_graph(num_nodes: int, seed: int = 0, levels: int = 10, name: str | None = None) -> Graph:
    """A random layered DAG with ``num_nodes`` nodes and about ``3 * num_nodes`` edges."""
    rng = np.random.default_rng(seed)
    level = np.sort(rng.integers(0, levels, num_nodes))
    level[0] = 0
    starts = np.searchsorted(level, np.arange(levels + 1))
    edges = []
    for v in range(num_nodes):
        lv = level[v]
        if lv == 0:
            continue
        count = int(rng.integers(1, 6))
        prev_lo, prev_hi = starts[lv - 1], starts[lv]
        near = rng.random(count) < 0.7  # mostly from the previous level, else from any earlier one
        picks = np.where(near, rng.integers(prev_lo, prev_hi, count), rng.integers(0, prev_hi, count))
        edges.extend((int(u), v) for u in np.unique(picks))

    def counts(zero_share):
        x = rng.integers(0, 5001, num_nodes)
        return np.where(rng.random(num_nodes) < zero_share, 0, x)

    return Graph(
        name=name or f"layered_{num_nodes}_{seed}",
        params=counts(0.7),
        output_size=counts(0.3),
        macs=counts(0.5),
        edges=np.asarray(edges, dtype=np.int64).reshape(-1, 2),
    )
