"""Certified gaps of recorded ``solver=auto`` incumbents under the crossing lower bound (solvers/bounds.py).

For every run of an earlier ``experiments/auto_models.py`` output that was not proven optimal, it recomputes the
lower bound from the same incumbent objective: the analytic bound and the crossing bound (searched for
``--limit`` seconds), and reports the certified gap ``(objective - bound) / objective`` before (the recorded
bound: the exact solver's and the analytic ones) and after (the best of the recorded and the crossing bound).
This isolates the bound from the schedule search and from the load of the machine. Writes ``<out>.md`` and
``<out>.json``.

    .venv/bin/python experiments/bounds_real_models.py --runs experiments/results/auto_real_models.json \
        --limit 5 --out experiments/results/bounds_real_models
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from respect_jax.cli.common import user_errors_exit  # noqa: E402
from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.experiments.report import markdown_table, mean, result_stem, write_results  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.solvers.bounds import crossing_lower_bound  # noqa: E402


def run(runs: dict, limit: float, stages: set[int] | None = None, compare_chain: bool = False) -> list[dict]:
    base = yaml.safe_load((ROOT / "conf" / "hardware" / f"{runs['hardware']}.yaml").read_text())
    records = []
    for r in runs["records"]:
        if r["optimal"] or (stages is not None and r["stages"] not in stages):
            continue
        graph = load_graph(ROOT / "data" / "models" / f"{r['graph']}.json")
        hw = hardware_from_dict({**base, "stages": r["stages"]})
        without = None
        if compare_chain:  # the independent windows alone, as in session 20
            without = crossing_lower_bound(graph, hw, r["objective_name"], 1.0, r["objective"], limit, chain=False)
        start = time.perf_counter()
        found = crossing_lower_bound(graph, hw, r["objective_name"], 1.0, r["objective"], limit)
        bound = max(found["bound"], r["lower_bound"])
        records.append({
            "graph": r["graph"], "stages": r["stages"], "objective_name": r["objective_name"],
            "objective": r["objective"], "gap_before": r["certified_gap"],
            "gap_after": (r["objective"] - bound) / r["objective"], "crossing_bound": found["bound"],
            "calls": found["calls"], "time_s": time.perf_counter() - start,
        })
        if without is not None:
            old_bound = max(without["bound"], r["lower_bound"])
            records[-1]["gap_without_chain"] = (r["objective"] - old_bound) / r["objective"]
        rec = records[-1]
        print(f"{r['graph']:>20} K={r['stages']} {r['objective_name']:<7} gap {100 * rec['gap_before']:.2f}% -> "
              f"{100 * rec.get('gap_without_chain', float('nan')):.2f}% (no chain) -> "
              f"{100 * rec['gap_after']:.2f}% ({rec['calls']} CP-SAT calls, {rec['time_s']:.1f} s)", flush=True)
    return records


def summary(records: list[dict], limit: float) -> str:
    rows = []
    for objective in sorted({r["objective_name"] for r in records}):
        sel = [r for r in records if r["objective_name"] == objective]
        rows.append([
            objective, len(sel), 100 * mean([r["gap_before"] for r in sel]), 100 * mean([r["gap_after"] for r in sel]),
            100 * max(r["gap_before"] for r in sel), 100 * max(r["gap_after"] for r in sel),
            sum(r["gap_after"] <= 0.01 for r in sel),
            100 * mean([r["gap_without_chain"] for r in sel if "gap_without_chain" in r]),
        ])
    head = ["objective", "runs not proven", "mean gap before %", "mean gap after %", "max gap before %",
            "max gap after %", "runs with gap <= 1 % after", "mean gap after, no chain %"]
    detail = markdown_table(
        ["graph", "K", "objective", "gap before %", "gap after, no chain %", "gap after %", "CP-SAT calls", "time s"],
        [[r["graph"], r["stages"], r["objective_name"], 100 * r["gap_before"],
          100 * r["gap_without_chain"] if "gap_without_chain" in r else None, 100 * r["gap_after"], r["calls"],
          r["time_s"]] for r in records],
    )
    note = (f"Crossing bound searched for at most {limit:g} s per run from the recorded incumbent; 'before': the "
            "recorded certified gap (exact solver's and analytic bounds); 'after': with the crossing bound too; "
            "'no chain': the crossing bound without the chain relaxations (session 20's), same limit.")
    return "\n\n".join([markdown_table(head, rows), note, detail])


@user_errors_exit("bounds_real_models")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", required=True, help="an experiments/auto_models.py output JSON")
    parser.add_argument("--limit", type=float, default=5.0, help="seconds of crossing-bound search per run")
    parser.add_argument("--stages", default=None, help="only these K (e.g. '8' or '4,8'); default: every K")
    parser.add_argument("--compare-chain", action="store_true",
                        help="also search without the chain relaxations (chain=False), as session 20 did")
    parser.add_argument("--out", required=True, help="output stem (writes .md and .json)")
    args = parser.parse_args()
    runs = json.loads(Path(args.runs).read_text())
    stages = None if args.stages is None else {int(k) for k in args.stages.split(",")}
    records = run(runs, args.limit, stages, args.compare_chain)
    stem = result_stem(args.out)
    doc = {"experiment": "bounds_real_models", "args": vars(args), "records": records}
    write_results(stem.parent, stem.name, doc, summary(records, args.limit))
    print(summary(records, args.limit))


if __name__ == "__main__":
    main()
