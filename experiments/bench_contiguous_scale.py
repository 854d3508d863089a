"""Time and peak memory of ``solver=contiguous`` (the exact best contiguous split) on 1k-10k-node layered graphs.

For each size and family of ICML'24-style random layered DAGs (``conf/graphs/layered*.yaml``, generator mode
``layered``; the sparse family with ``edges_per_node = 1.2``), each K and both objectives, on the Coral USB
hardware (``conf/hardware/coral_usb.yaml``) with the requested K: the best of ``--repeats`` wall times of
:func:`respect_jax.solvers.partitioners.solve_contiguous` (the whole solver: the SPEC order, the programme and
the assignment), the memory caps its ``paper`` walk visited, and the peak of the memory NumPy allocated during
one more call (``tracemalloc``). The process's peak resident set (``ru_maxrss``: imports and graphs included) is
printed at the end.

    .venv/bin/python experiments/bench_contiguous_scale.py --sizes 1000 5000 10000 --stages 4 8 --repeats 3
    .venv/bin/python experiments/bench_contiguous_scale.py --sizes 10000 --objectives paper --lams 0.1

(``lam = 0.1`` makes memory and communication weigh about the same on these graphs: the hardest case for the
paper programme's walk over memory caps; with lam = 1 its optimum is a single stage.)
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.graphs import GeneratorConfig, generate_numpy  # noqa: E402
from respect_jax.solvers.partitioners import contiguous_search, solve_contiguous  # noqa: E402

EDGES_PER_NODE = {"dense": 2.9, "sparse": 1.2}  # the two ICML'24 families


def layered_graph(size: int, family: str, seed: int):
    """One graph of the ``conf/graphs/layered1k.yaml`` distribution with ``size`` nodes and the family's
    ``edges_per_node`` (``layered{1,5,10}k`` are this with 1,000, 5,000 and 10,000 nodes)."""
    values = yaml.safe_load((ROOT / "conf" / "graphs" / "layered1k.yaml").read_text())
    values.update(min_nodes=size, max_nodes=size, edges_per_node=EDGES_PER_NODE[family])
    name = f"layered{size // 1000}k_{family}_s{seed}"
    return generate_numpy(GeneratorConfig(**values), np.random.default_rng(seed), name=name)


def measure(graph, hw, objective: str, lam: float, repeats: int) -> dict:
    """Best-of-``repeats`` seconds of solve_contiguous, its objective, caps visited and NumPy peak bytes."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = solve_contiguous(graph, hw, objective, lam)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    _, value, caps = contiguous_search(graph, hw, objective, lam)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert value == result.info["dp_objective"]
    return {"best_s": min(times), "median_s": float(np.median(times)), "objective": value, "caps": caps,
            "numpy_peak_mib": peak / 2**20}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--families", nargs="+", default=["dense", "sparse"], choices=sorted(EDGES_PER_NODE))
    parser.add_argument("--stages", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--objectives", nargs="+", default=["paper", "latency"])
    parser.add_argument("--lams", type=float, nargs="+", default=[1.0], help="lam values of the paper objective")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    base = yaml.safe_load((ROOT / "conf" / "hardware" / "coral_usb.yaml").read_text())
    print("| graph | nodes | edges | K | objective | lam | best s | median s | caps | NumPy MiB | objective value |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        for family in args.families:
            graph = layered_graph(size, family, args.seed)
            for k in args.stages:
                hw = hardware_from_dict({**base, "stages": k})
                for objective, lam in [(o, lam) for o in args.objectives for lam in
                                       (args.lams if o == "paper" else [1.0])]:
                    m = measure(graph, hw, objective, lam, args.repeats)
                    print(f"| {graph.name} | {graph.num_nodes} | {graph.num_edges} | {k} | {objective} | {lam:g} "
                          f"| {m['best_s']:.3f} | {m['median_s']:.3f} | {m['caps']} | {m['numpy_peak_mib']:.1f} "
                          f"| {m['objective']:.6g} |", flush=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"\nprocess peak resident set (ru_maxrss, imports and graphs included): {rss:.0f} MiB")


if __name__ == "__main__":
    main()
