"""Probe for issue 27 (session 31): why auto's contiguous line is far from CP-SAT on dense 1k layered graphs. On one
generated graph of an own seed (graph seed ``seed + 1000 * size``; never bench_scale's seed-0 test graphs), K = 4,
latency: the line's schedule (auto with the contiguous member only, no exact solver, no bound, 10 s) and CP-SAT's after
``--cpsat-s`` seconds hinted with it (2 workers, no presolve): per stage its time, node count, MAC time and parameter
MB; and the exact contiguous split of an as-late-as-possible topological order (each node just before its first
reader) beside the best live-byte split.

    .venv/bin/python experiments/auto_dense_structure_probe.py --seed 3106 --size 1000 --family dense
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "experiments"))
from bench_scale import graph_config  # noqa: E402

import respect_jax.solvers.cpsat  # noqa: E402,F401  (registers solver=cpsat)
from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.graphs import generate_numpy  # noqa: E402
from respect_jax.graphs.graph import kahn_order  # noqa: E402
from respect_jax.solvers import get_solver  # noqa: E402
from respect_jax.solvers.auto import solve_auto  # noqa: E402
from respect_jax.solvers.orders import live_splits  # noqa: E402
from respect_jax.solvers.partitioners import contiguous_assignment, contiguous_search  # noqa: E402
from respect_jax.solvers.rebalance import stage_times_np  # noqa: E402


def alap_order(graph) -> np.ndarray:
    """A topological order with every node as late as possible (Kahn's algorithm on the reversed graph, reversed)."""
    n = graph.num_nodes
    pos = np.empty(n, np.int64)
    pos[np.asarray(graph.topological_order())] = np.arange(n)
    outdeg = [len(s) for s in graph.successors()]
    order = kahn_order(outdeg, graph.predecessors(), [-int(pos[u]) for u in range(n)])
    return np.asarray(order[::-1], np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=3106)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--family", default="dense")
    parser.add_argument("--cpsat-s", type=float, default=60.0)
    args = parser.parse_args()
    if args.seed == 0:
        raise SystemExit("seed 0: bench_scale's test graphs; use a seed of your own")
    graph = generate_numpy(graph_config(args.size, args.family), np.random.default_rng(args.seed + 1000 * args.size),
                           name=f"val_{args.family}_{args.size}_s{args.seed}")
    hw = hardware_from_dict({**yaml.safe_load((HERE / "conf" / "hardware" / "coral_usb.yaml").read_text()),
                             "stages": 4})

    def show(name: str, s: np.ndarray) -> None:
        t = stage_times_np(graph, s[None], hw)[0]
        macs = [float(graph.macs[s == k].sum()) / hw.macs_per_s for k in range(hw.stages)]
        mb = [float(graph.params[s == k].sum()) * hw.param_bytes / 1e6 for k in range(hw.stages)]
        print(f"{name}: {t.max():.6g}; stage times {np.round(t, 6).tolist()}, nodes "
              f"{np.bincount(s, minlength=hw.stages).tolist()}, MAC s {np.round(macs, 6).tolist()}, parameter MB "
              f"{np.round(mb, 2).tolist()}", flush=True)

    weight, split, _ = min(live_splits(graph, hw, "latency", 1.0, [2.0, 3.0, 4.0]), key=lambda x: x[2])
    show(f"best live-byte split (sink weight {weight})", split)
    order = alap_order(graph)
    cuts, _, _ = contiguous_search(graph, hw, "latency", 1.0, order)
    show("as-late-as-possible order's split", np.asarray(contiguous_assignment(graph, cuts, order), np.int64))
    line = np.asarray(solve_auto(graph, hw, "latency", 1.0, time_budget_s=10.0, exact="none", members=["contiguous"],
                                 progress=False, crossing_bound=False).assignment, np.int64)
    show("the line (10 s)", line)
    result = get_solver("cpsat")(graph, hw, "latency", 1.0, time_limit_s=args.cpsat_s, workers=2, presolve=False,
                                 hint=line)
    show(f"CP-SAT {args.cpsat_s:g} s hinted with the line", np.asarray(result.assignment, np.int64))


if __name__ == "__main__":
    main()
