"""Choosing the window re-solves (``ls_window`` / ``ls_window_limit``, :mod:`respect_jax.solvers.window`) of
``solver=policy``'s default decoding on validation graphs only.

Cases: ``--cases`` (JSON lines of ``experiments/latency_rebalance_val.py oracle``: ``path``, ``K``, ``sram``, the
MILP's ``milp`` value as a reference) and / or ``--graphs`` globs at ``--stages`` (no reference: the least column).
Columns: ``--windows`` entries ``SOLVES:LIMIT`` or ``SOLVES:LIMIT:FREE`` (``0:0``: session 25's default, the window
step off) run as ``ls_window=SOLVES, ls_window_limit=LIMIT`` (and ``ls_window_free=FREE``; without it the default);
each case's objective, gap to the least of the reference and every column, ``solve_time_s`` (compilation excluded; a
warm-up call per graph and K first). Refuses the bundled models (the test
set).

    .venv/bin/python experiments/latency_window_val.py --cases experiments/results/latency_rebalance_oracle.jsonl \\
        --windows 0:0 2:0.1 --out experiments/results/latency_window_val
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


import respect_jax.policy.solver  # noqa: E402,F401  (registers solver=policy)
from respect_jax.api import hardware  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402

sys.path.insert(0, str(ROOT / "experiments"))
from latency_rebalance_val import column_summary, write_report  # noqa: E402


def _hw(k: int, sram):
    return hardware("coral_usb", stages=k, **({"sram_bytes": float(sram)} if sram else {}))


def _parse(spec: str) -> dict:
    """``SOLVES:LIMIT[:FREE]`` -> the policy's options."""
    solves, limit, *free = spec.split(":")
    return {"ls_window": int(solves)} | ({"ls_window_limit": float(limit)} if int(solves) > 0 else {}) | (
        {"ls_window_free": float(free[0])} if free else {})


def compare(cases: list[dict], windows: list[str], objective: str) -> list[dict]:
    records = []
    for case in cases:
        if "data/models/" in case["path"]:
            raise SystemExit("the bundled models are the test set: not for choosing")
        graph, hw = load_graph(case["path"]), _hw(case["K"], case.get("sram"))
        run_solver("policy", graph, hw, objective, 1.0)  # warm-up (compilation)
        rec = {"graph": graph.name, "path": case["path"], "n": graph.num_nodes, "K": case["K"],
               "sram": case.get("sram"), "milp": case.get("milp"), "optimal": case.get("optimal")}
        for spec in windows:
            opts = _parse(spec)
            r = run_solver("policy", graph, hw, objective, 1.0, **opts)
            rec[f"w{spec}"], rec[f"time_w{spec}_s"] = r["objective"], r["solve_time_s"]
            rec[f"kept_w{spec}"] = r["info"].get("windowed", 0)
        rec["reference"] = min([v for v in [case.get("milp")] if v is not None] + [rec[f"w{s}"] for s in windows])
        records.append(rec)
        print(f"{rec['graph']} K={rec['K']}: " + " ".join(
            f"{s} {100 * (rec[f'w{s}'] / rec['reference'] - 1):.2f} % ({rec[f'time_w{s}_s']:.2f} s)" for s in windows),
            flush=True)
    return records


def summary(records: list[dict], windows: list[str]) -> str:
    return column_summary(records, windows, "w", "ls_window:limit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=[])
    parser.add_argument("--graphs", nargs="*", default=[])
    parser.add_argument("--stages", default="4,5,6")
    parser.add_argument("--windows", nargs="+", default=["0:0", "2:0.1"])
    parser.add_argument("--objective", default="latency")
    parser.add_argument("--widths", default=None, help="comma-separated window widths (default: the module's)")
    parser.add_argument("--max-nodes", type=int, default=None, help="largest window re-solved (default: the module's)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.widths:
        import respect_jax.solvers.window as window

        window.WINDOW_WIDTHS = tuple(int(w) for w in args.widths.split(","))
    if args.max_nodes is not None:
        import respect_jax.solvers.window as window

        window.WINDOW_MAX_NODES = int(args.max_nodes)
    cases = [json.loads(line) for path in args.cases for line in Path(path).read_text().splitlines() if line.strip()]
    cases = [c for c in cases if c.get("objective_name", "latency") == args.objective]
    paths = list(dict.fromkeys(p for g in args.graphs for p in sorted(glob.glob(g))))
    cases += [{"path": p, "K": int(k), "sram": None} for p in paths for k in args.stages.split(",")]
    records = compare(cases, args.windows, args.objective)
    write_report(Path(args.out), "latency_window_val.py", records, summary(records, args.windows),
                 "Window re-solves on validation")


if __name__ == "__main__":
    main()
