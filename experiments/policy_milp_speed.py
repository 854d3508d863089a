"""``solver=policy``'s default decoding against the MILP to its proven optimum, timed in one window.

Issue 26's speed target compares the policy's time with the MILP's time to its proven optimum on models with >= 300
nodes (>= 20x). ``order_policy_models.py`` compares with MILP times recorded in an earlier Table 1 run (another day's
machine). This script times both here, case after case: per (graph, K, objective) the policy once to compile, then
``--repeats`` timed calls (``solve_time_s``: compilation and set-up excluded; the median is reported), then the MILP
(``solver=milp``, ``--milp-limit`` seconds, as Table 1 ran it), so both see the same load. Writes ``<out>.md`` and
``<out>.json`` (per case, with the machine description and the load before each case).

    .venv/bin/python experiments/policy_milp_speed.py --graphs 'data/models/*.json' --stages 4,5,6 \\
        --out experiments/results/policy_milp_speed_s33
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import respect_jax.policy.solver  # noqa: E402,F401  (registers solver=policy)
from respect_jax.api import hardware  # noqa: E402
from respect_jax.cli.common import machine_description  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.reporting import markdown_table  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402


def time_case(graph, hw, objective: str, repeats: int, milp_limit: float) -> dict:
    """The policy's default decoding (``repeats`` timed calls after one untimed) and the MILP on one case."""
    run_solver("policy", graph, hw, objective, 1.0)  # compilation of this graph's shapes
    load = os.getloadavg()[0]
    runs = [run_solver("policy", graph, hw, objective, 1.0) for _ in range(int(repeats))]
    milp = run_solver("milp", graph, hw, objective, 1.0, time_limit_s=float(milp_limit))
    policy_s = statistics.median(r["solve_time_s"] for r in runs)
    return {"graph": graph.name, "num_nodes": graph.num_nodes, "stages": int(hw.stages), "objective_name": objective,
            "policy_s": policy_s, "policy_runs_s": [r["solve_time_s"] for r in runs],
            "policy_objective": runs[0]["objective"], "milp_s": milp["solve_time_s"],
            "milp_optimal": bool(milp.get("optimal")), "milp_objective": milp["objective"],
            "ratio": milp["solve_time_s"] / max(policy_s, 1e-9), "load1": load}


def report(records: list[dict], factor: float, command: str) -> str:
    """The per-case table and the count of proven cases at least ``factor`` x faster."""
    rows, met = [], 0
    proven = [r for r in records if r["milp_optimal"]]
    for r in records:
        ok = r["milp_optimal"] and r["ratio"] >= factor
        met += ok
        gap = 100.0 * (r["policy_objective"] - r["milp_objective"]) / r["milp_objective"]
        rows.append([r["objective_name"], r["graph"], r["num_nodes"], r["stages"],
                     f"{r['milp_s']:.2f}" + ("" if r["milp_optimal"] else " (not proven)"),
                     f"{1e3 * r['policy_s']:.0f}", f"{r['ratio']:.1f}", f"{gap:.3f}", f"{r['load1']:.1f}"])
    head = ["objective", "graph", "N", "K", "MILP s", "policy default ms (median)", "MILP / policy",
            "policy vs MILP objective %", "load"]
    return (f"# Policy default decoding vs the MILP, timed in one window\n\n`{command}`\n\n"
            f"The policy is >= {factor:.0f}x faster than the MILP's proof on {met} of {len(proven)} cases where the "
            f"MILP proved the optimum ({len(records) - len(proven)} more cases: not proven within the limit).\n\n"
            + markdown_table(head, rows) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", required=True, help="graph JSON files or globs")
    parser.add_argument("--stages", default="4,5,6")
    parser.add_argument("--objectives", default="latency,paper")
    parser.add_argument("--min-nodes", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--milp-limit", type=float, default=30.0)
    parser.add_argument("--factor", type=float, default=20.0)
    parser.add_argument("--preset", default="coral_usb")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    paths = sorted({p for pattern in args.graphs for p in glob.glob(pattern)})
    graphs = [g for g in (load_graph(p) for p in paths) if g.num_nodes >= args.min_nodes]
    if not graphs:
        sys.exit(f"error: no graph of >= {args.min_nodes} nodes in {' '.join(args.graphs)}")
    records = []
    for objective in args.objectives.split(","):
        for graph in graphs:
            for k in (int(x) for x in args.stages.split(",")):
                rec = time_case(graph, hardware(args.preset, stages=k), objective, args.repeats,
                                args.milp_limit)
                records.append(rec)
                print(f"{objective:7s} {graph.name:22s} K={k} policy {1e3 * rec['policy_s']:6.0f} ms  MILP "
                      f"{rec['milp_s']:6.2f} s{'' if rec['milp_optimal'] else ' (not proven)'}  x{rec['ratio']:.1f}"
                      f"  load {rec['load1']:.1f}", flush=True)
    command = " ".join(["experiments/policy_milp_speed.py"] + sys.argv[1:])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(report(records, args.factor, command))
    out.with_suffix(".json").write_text(json.dumps({"command": command, "machine": machine_description(),
                                                    "records": records}, indent=1))
    print(f"wrote {out.with_suffix('.md')} and .json")


if __name__ == "__main__":
    main()
