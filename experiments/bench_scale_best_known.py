"""Every method of every recorded scale run (``experiments/bench_scale.py``'s JSON files) against the best schedule any
run found for the same graph, K and objective.

A single ``bench_scale.py`` run compares the methods it ran; the runs of different sessions (an ``auto`` run, a
600 s CP-SAT reference, a run of the learned policy alone) each hold part of the picture. This joins them: for each
(graph, K, objective) the best known value is the least objective over all the files given, and every record of the
chosen methods is reported as its ratio to it, with the method and file that set the best. The graphs are generated
from their name's size, family and seed, so the records of different runs are of the same graph. Writes
``<out>.md`` and ``<out>.json`` (with the machine description).

    .venv/bin/python experiments/bench_scale_best_known.py --runs 'experiments/results/bench_scale*.json' \
        --methods policy --report 'experiments/results/bench_scale_s24_policy*.json' \
        --out experiments/results/bench_scale_s24_policy_vs_best
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from respect_jax.experiments.report import markdown_table, result_stem, write_results  # noqa: E402


def best_known(records: list[tuple[str, dict]]) -> dict[tuple, tuple[float, str, str]]:
    """(graph, K, objective) -> (least objective, its method, its file) over every ``ok`` record."""
    best: dict[tuple, tuple[float, str, str]] = {}
    for file, rec in records:
        key = (rec["graph"], rec["stages"], rec["objective_name"])
        if key not in best or rec["objective"] < best[key][0]:
            best[key] = (float(rec["objective"]), rec["method"], file)
    return best


def compare(records: list[tuple[str, dict]], methods: list[str], report: set[str] | None = None) -> list[dict]:
    """One row per record of ``methods`` (of the files named in ``report``; None: every file): its objective, the best
    known over all ``records`` and the ratio (1.0: it is the best known)."""
    best = best_known(records)
    rows = []
    for file, rec in records:
        if rec["method"] not in methods or (report is not None and file not in report):
            continue
        value, by, where = best[(rec["graph"], rec["stages"], rec["objective_name"])]
        rows.append({"graph": rec["graph"], "nodes": rec["num_nodes"], "stages": rec["stages"],
                     "objective_name": rec["objective_name"], "method": rec["method"], "file": file,
                     "objective": rec["objective"], "best_known": value, "best_by": f"{by} ({where})",
                     "ratio": rec["objective"] / value, "time_s": rec.get("time_s")})
    return sorted(rows, key=lambda r: (r["method"], r["objective_name"], r["stages"], r["nodes"], r["graph"]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", required=True, help="bench_scale JSON files or globs")
    parser.add_argument("--methods", default="policy", help="comma list of the methods to report")
    parser.add_argument("--report", nargs="+", default=None, help="report the records of these files (globs) only")
    parser.add_argument("--within", type=float, default=0.05, help="the share above the best known counted as near")
    parser.add_argument("--out", required=True, help="output stem (writes .md and .json)")
    args = parser.parse_args(argv)
    files = sorted({f for pattern in args.runs for f in glob.glob(pattern)})
    if not files:
        raise SystemExit(f"bench_scale_best_known: error: no file matches {' '.join(args.runs)}")
    docs = {Path(f).name: json.loads(Path(f).read_text()) for f in files}
    records = [(name, rec) for name, doc in docs.items() for rec in doc.get("records", [])  # this script's: none
               if rec.get("status") == "ok"]
    report = None if args.report is None else {Path(f).name for pattern in args.report for f in glob.glob(pattern)}
    rows = compare(records, args.methods.split(","), report)
    table = markdown_table(
        ["graph", "N", "K", "objective", "method", "objective value", "/ best known", "best known by", "time s"],
        [[r["graph"], f"{r['nodes']:,}", r["stages"], r["objective_name"], r["method"], f"{r['objective']:.6g}",
          f"{r['ratio']:.4f}", r["best_by"], f"{r['time_s']:.1f}" if r["time_s"] is not None else "-"] for r in rows],
    )
    near = sum(r["ratio"] <= 1 + args.within for r in rows)
    worst = 100 * (max(r["ratio"] for r in rows) - 1)
    summary = (f"{near} of {len(rows)} records within {100 * args.within:g} % of the best known; worst {worst:.2f} % "
               f"above it. Runs: {', '.join(n for n, d in docs.items() if 'records' in d)}.")
    print(table)
    print(summary)
    stem = result_stem(args.out)
    write_results(stem.parent, stem.name, {"experiment": "bench_scale_best_known", "args": vars(args), "rows": rows},
                  table + "\n\n" + summary + "\n")


if __name__ == "__main__":
    main()
