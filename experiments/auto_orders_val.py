"""Validation of ``solver=auto``'s live-byte orders and long first polish at scale (issue 27), on generated layered
graphs of seeds of our own (not ``experiments/bench_scale.py``'s test seeds).

For each size, family and seed (graph seed ``seed + 1000 * size``, as ``bench_scale.py --seed <seed>`` would draw it;
named ``val_<family>_<size>_s<seed>``), each method runs cold in a fresh process (``bench_scale.run_method``), the
methods alternating: ``auto_<b>s_base`` (auto without the live-byte orders and with the old first polish:
``orders={latency: [], paper: []}``, ``line_moves={}``), ``auto_<b>s`` (the defaults) and, unless
``--no-policy``, the order policy alone (the best known latency schedules at 5,000-10,000 nodes came from it).
Each record is reported against the best of all methods on its graph. Writes ``<out>.md`` and ``<out>.json``.

    .venv/bin/python experiments/auto_orders_val.py --seeds 11,12 --sizes 1000,5000,10000 \
        --out experiments/results/auto_orders_val_s28
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

import yaml  # noqa: E402
from bench_scale import graph_config, run_method  # noqa: E402

from respect_jax.experiments.report import markdown_table, result_stem, write_results  # noqa: E402

BASE = {"orders": {"latency": [], "paper": []}, "line_moves": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="11,12")
    parser.add_argument("--sizes", default="1000,5000,10000")
    parser.add_argument("--families", default="dense,sparse")
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--objective", default="latency")
    parser.add_argument("--budget", type=float, default=10.0)
    parser.add_argument("--no-policy", action="store_true", help="skip the order policy alone")
    parser.add_argument("--base-options", default=None,
                        help="JSON options of the base run (default: the old line, orders and line_moves off)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    hw = {**yaml.safe_load((ROOT / "conf" / "hardware" / "coral_usb.yaml").read_text()), "stages": args.stages}
    b = args.budget
    base = BASE if args.base_options is None else json.loads(args.base_options)
    methods = {f"auto_{b:g}s_base": ("auto", {"time_budget_s": b, "progress": False, **base}, b + 600),
               f"auto_{b:g}s": ("auto", {"time_budget_s": b, "progress": False}, b + 600)}
    if not args.no_policy:
        methods["policy"] = ("policy", {}, 600.0)
    records = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for size in (int(s) for s in args.sizes.split(",")):
            for family in args.families.split(","):
                name = f"val_{family}_{size}_s{seed}"
                group = []
                for method, (solver, options, limit) in methods.items():
                    load = os.getloadavg()[0]
                    rec = run_method(graph_config(size, family), seed + 1000 * size, name, hw, args.objective, solver,
                                     options, limit)
                    rec.update(graph=name, size=size, family=family, seed=seed, stages=args.stages,
                               objective_name=args.objective, method=method, load_before=load)
                    group.append(rec)
                    print(f"{name} {method}: {rec['status']} {rec.get('objective', float('nan')):.6g} "
                          f"{rec.get('time_s', 0):.1f}s {rec.get('peak_rss_gib', float('nan')):.2f}GiB "
                          f"winner {rec.get('winner')} load {load:.1f}", flush=True)
                best = min((r["objective"] for r in group if r["status"] == "ok"), default=float("nan"))
                for r in group:
                    r["best_here"] = best
                records.extend(group)
                write(args, records)


def write(args: argparse.Namespace, records: list[dict]) -> None:
    rows = [[r["graph"], r["method"], r["status"], f"{r['objective']:.6g}" if r["status"] == "ok" else "-",
             f"{r['objective'] / r['best_here']:.4f}" if r["status"] == "ok" else "-", r.get("winner"),
             f"{r.get('time_s', 0):.1f}", f"{r.get('peak_rss_gib', float('nan')):.2f}", f"{r['load_before']:.1f}"]
            for r in records]
    table = markdown_table(["graph", "method", "status", "objective", "/ best here", "winner", "time s", "peak GiB",
                            "load before"], rows)
    stem = result_stem(args.out)
    write_results(stem.parent, stem.name, {"experiment": "auto_orders_val", "args": vars(args), "records": records},
                  table)


if __name__ == "__main__":
    main()
