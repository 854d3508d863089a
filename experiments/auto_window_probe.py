"""Probe for issue 27 (session 31): would exact window re-solves (:func:`respect_jax.solvers.window.window_search`, the
order policy's CP-SAT re-solves of 2-3 adjacent stages around the bottleneck) improve ``solver=auto``'s contiguous line
at 1k-10k nodes? On generated layered graphs of own seeds (graph seed ``seed + 1000 * size``, as ``bench_scale.py
--seed`` draws it; never bench_scale's default seed-0 test graphs): the line's schedule (``solver=auto`` with the
contiguous member only, no exact solver, no bound, ``--budget`` seconds), then ``window_search`` from it with no node
cap and no free-share filter (``--limit`` deterministic CP-SAT units per re-solve, ``--solves`` re-solves, widths 2 and
3): its gain and wall time. Also from the best live-byte split (``--from-split``). Prints one line per case.

    .venv/bin/python experiments/auto_window_probe.py --seeds 3150 --sizes 1000,5000,10000 --families dense,sparse
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "experiments"))
from bench_scale import graph_config  # noqa: E402

from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.graphs import generate_numpy  # noqa: E402
from respect_jax.solvers.auto import solve_auto  # noqa: E402
from respect_jax.solvers.orders import live_splits  # noqa: E402
from respect_jax.solvers.rebalance import stage_times_np  # noqa: E402
from respect_jax.solvers.window import window_search  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="3150")
    parser.add_argument("--sizes", default="1000,5000,10000")
    parser.add_argument("--families", default="dense,sparse")
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--budget", type=float, default=10.0)
    parser.add_argument("--limit", type=float, default=0.2)
    parser.add_argument("--solves", type=int, default=6)
    parser.add_argument("--from-split", action="store_true")
    args = parser.parse_args()
    hw = hardware_from_dict({**yaml.safe_load((HERE / "conf" / "hardware" / "coral_usb.yaml").read_text()),
                             "stages": args.stages})
    for seed in (int(s) for s in args.seeds.split(",")):
        if seed == 0:
            raise SystemExit("seed 0: bench_scale's test graphs; use seeds of your own")
        for size in (int(s) for s in args.sizes.split(",")):
            for family in args.families.split(","):
                graph = generate_numpy(graph_config(size, family), np.random.default_rng(seed + 1000 * size),
                                       name=f"val_{family}_{size}_s{seed}")
                t = time.perf_counter()
                if args.from_split:
                    start = min(live_splits(graph, hw, "latency", 1.0, [2.0, 3.0, 4.0]), key=lambda x: x[2])[1]
                else:
                    start = np.asarray(solve_auto(graph, hw, "latency", 1.0, time_budget_s=args.budget, exact="none",
                                                  members=["contiguous"], progress=False,
                                                  crossing_bound=False).assignment, np.int64)
                made = time.perf_counter() - t
                before = stage_times_np(graph, start[None], hw)[0]
                t = time.perf_counter()
                info: dict = {}
                after, kept = window_search(graph, hw, start, args.solves, deterministic_limit=args.limit,
                                            max_nodes=10**9, min_free=0.0, info=info)
                took = time.perf_counter() - t
                times = stage_times_np(graph, after[None], hw)[0]
                shares = np.round(before / before.max(), 4).tolist()
                counts = np.bincount(start, minlength=args.stages).tolist()
                print(f"{graph.name} K={args.stages}: start {before.max():.6g} ({made:.1f} s; stage times / max "
                      f"{shares}, nodes {counts}) -> windows {times.max():.6g} = x{times.max() / before.max():.4f}, "
                      f"{kept} kept of {info['used']} re-solves, {took:.1f} s", flush=True)


if __name__ == "__main__":
    main()
