"""Window re-solves in threads (``ls_window_threads``) on validation graphs: the same schedules, and the wall time.

The default decoding of ``solver=policy`` under ``latency`` on ``data/models_val`` (and its generated NAS graphs) at
every K given, with ``ls_window_threads`` 1 and the value(s) given, alternating per case (A B, then B A), each timed
``--repeats`` times after a warm-up call (the median kept). Every schedule must be identical across the settings;
the report gives per-setting total and median wall time of the cases whose window search ran, and their ratio.
Validation graphs only (the bundled ``data/models`` are the test set)."""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
from respect_jax.api import hardware, load_graph
from respect_jax.solvers import run_solver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+",
                        default=["data/models_val/*.json", "data/models_val/nas_generated/*.json"])
    parser.add_argument("--stages", default="2,4,6,8")
    parser.add_argument("--threads", default="2", help="the settings compared with 1, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="experiments/results/window_threads_val")
    args = parser.parse_args()
    if any(Path(p).parts[:2] == ("data", "models") for p in args.graphs):
        raise SystemExit("data/models is the test set; validate on data/models_val")
    paths = sorted({p for pattern in args.graphs for p in glob.glob(pattern)})
    settings = [1] + [int(t) for t in args.threads.split(",")]
    rows, flip = [], False
    for path in paths:
        graph = load_graph(path)
        for k in (int(x) for x in args.stages.split(",")):
            hw = hardware("coral_usb", stages=k)
            order = settings[::-1] if flip else settings
            flip = not flip
            out = {}
            for threads in order:
                run_solver("policy", graph, hw, "latency", ls_window_threads=threads)  # warm
                times, result = [], None
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    result = run_solver("policy", graph, hw, "latency", ls_window_threads=threads)
                    times.append(time.perf_counter() - start)
                out[threads] = (np.asarray(result["assignment"]), statistics.median(times),
                                result["info"].get("windowed"))
            same = all(np.array_equal(out[1][0], out[t][0]) for t in settings)
            row = {"graph": Path(path).stem, "k": k, "same": same, "windowed": out[1][2],
                   **{f"ms_{t}": round(out[t][1] * 1000, 2) for t in settings}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    ran = [r for r in rows if r["windowed"] is not None]
    lines = [f"# Window re-solves in threads: {len(rows)} validation cases, {len(ran)} with the window search",
             "", f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, load average "
                 f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])} at the end",
             f"Command: `experiments/window_threads_val.py --stages {args.stages} --threads {args.threads} "
             f"--repeats {args.repeats}`", "",
             f"All schedules identical: **{all(r['same'] for r in rows)}**", "",
             "| threads | total ms (window cases) | median ms | x threads 1 (total) |", "|---|---|---|---|"]
    base = sum(r["ms_1"] for r in ran) or 1.0
    for t in settings:
        total = sum(r[f"ms_{t}"] for r in ran)
        med = statistics.median(r[f"ms_{t}"] for r in ran) if ran else 0.0
        lines.append(f"| {t} | {total:.0f} | {med:.1f} | x{total / base:.3f} |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    Path(args.out + ".json").write_text(json.dumps({"rows": rows, "settings": settings}, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
