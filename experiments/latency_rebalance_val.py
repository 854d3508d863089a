"""Choosing the latency rebalancing cycles (``ls_rebalance``, :mod:`respect_jax.solvers.rebalance`) on validation graphs
only.

For every case of ``--cases`` (JSON lines with ``path``, ``K``, optional ``sram`` (an ``sram_bytes`` override; null:
the preset's), and a reference ``milp`` value: the MILP hinted with the default decoding, written by
``experiments/latency_rebalance_val.py oracle``) and each value of ``--cycles``: ``solver=policy``'s default decoding
with ``ls_rebalance`` = that value (0: the session-24 default), its objective, gap to the least of the reference and
every column, and ``solve_time_s`` (compilation excluded; a warm-up call per graph and K first). Never run on the
bundled models (the test set).

    .venv/bin/python experiments/latency_rebalance_val.py oracle --graphs ... --stages 4,5,6 --time-limit 45 \\
        --out experiments/results/latency_rebalance_oracle.jsonl
    .venv/bin/python experiments/latency_rebalance_val.py compare \\
        --cases experiments/results/latency_rebalance_oracle.jsonl --cycles 0 1 \\
        --out experiments/results/latency_rebalance_val
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import respect_jax.policy.solver  # noqa: E402,F401  (registers solver=policy)
from respect_jax.api import hardware  # noqa: E402
from respect_jax.cli.common import machine_description  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402


def _hw(k: int, sram):
    return hardware("coral_usb", stages=k, **({"sram_bytes": float(sram)} if sram else {}))


def oracle(paths: list[str], stages: list[int], objective: str, time_limit: float, sram, out: Path) -> None:
    """A reference per (graph, K): the MILP (HiGHS, one thread) started from the default decoding's schedule."""
    for path in paths:
        graph = load_graph(path)
        for k in stages:
            hw = _hw(k, sram)
            default = run_solver("policy", graph, hw, objective, 1.0)
            start = time.perf_counter()
            milp = run_solver("milp", graph, hw, objective, 1.0, time_limit_s=time_limit, threads=1,
                              warm_start=np.asarray(default["assignment"]), highs_start=True)
            rec = {"path": path, "graph": graph.name, "n": graph.num_nodes, "K": k, "sram": sram,
                   "objective_name": objective, "default": default["objective"], "milp": milp["objective"],
                   "optimal": bool(milp["optimal"]), "milp_s": time.perf_counter() - start}
            print(json.dumps(rec), flush=True)
            with out.open("a") as f:
                f.write(json.dumps(rec) + "\n")


def compare(cases: list[dict], cycles: list[int], objective: str) -> list[dict]:
    records = []
    for case in cases:
        if "data/models/" in case["path"]:
            raise SystemExit("the bundled models are the test set: not for choosing")
        graph, hw = load_graph(case["path"]), _hw(case["K"], case.get("sram"))
        run_solver("policy", graph, hw, objective, 1.0, ls_rebalance=max(cycles))  # warm-up (compilation)
        rec = {"graph": graph.name, "n": graph.num_nodes, "K": case["K"], "sram": case.get("sram"),
               "milp": case["milp"], "optimal": case.get("optimal")}
        for c in cycles:
            r = run_solver("policy", graph, hw, objective, 1.0, ls_rebalance=c)
            rec[f"c{c}"], rec[f"time_c{c}_s"] = r["objective"], r["solve_time_s"]
        rec["reference"] = min([case["milp"]] + [rec[f"c{c}"] for c in cycles])
        records.append(rec)
        print(f"{rec['graph']} K={rec['K']}: " + " ".join(
            f"c{c} {100 * (rec[f'c{c}'] / rec['reference'] - 1):.2f} % ({rec[f'time_c{c}_s']:.2f} s)" for c in cycles),
            flush=True)
    return records


def column_summary(records: list[dict], columns: list, prefix: str, label: str) -> str:
    """Markdown table: per column ``c`` (the record keys ``f"{prefix}{c}"`` and ``f"time_{prefix}{c}_s"``), the mean and
    max gap to ``reference``, cases above 2 %, cases better / worse than the first column, median and max time."""
    lines = [f"| {label} | cases | mean gap % | max gap % | cases > 2 % | improved | worse | median s | max s |",
             "|---" * 9 + "|"]
    base = f"{prefix}{columns[0]}"
    for c in columns:
        key = f"{prefix}{c}"
        gaps = np.array([100 * (r[key] / r["reference"] - 1) for r in records])
        t = np.array([r[f"time_{key}_s"] for r in records])
        better = sum(r[key] < r[base] * (1 - 1e-9) for r in records)
        worse = sum(r[key] > r[base] * (1 + 1e-9) for r in records)
        lines.append(f"| {c} | {len(records)} | {gaps.mean():.3f} | {gaps.max():.3f} | {int(np.sum(gaps > 2))} | "
                     f"{better} | {worse} | {np.median(t):.3f} | {t.max():.3f} |")
    return "\n".join(lines) + "\n"


def summary(records: list[dict], cycles: list[int]) -> str:
    return column_summary(records, cycles, "c", "cycles")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("oracle", "compare"))
    parser.add_argument("--graphs", nargs="*", default=[])
    parser.add_argument("--stages", default="4,5,6")
    parser.add_argument("--sram", type=float, default=None)
    parser.add_argument("--time-limit", type=float, default=45.0)
    parser.add_argument("--cases", nargs="*", default=[])
    parser.add_argument("--cycles", nargs="+", type=int, default=[0, 3])
    parser.add_argument("--objective", default="latency")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.command == "oracle":
        paths = list(dict.fromkeys(p for g in args.graphs for p in sorted(glob.glob(g))))
        if any("data/models/" in p for p in paths):
            raise SystemExit("the bundled models are the test set: not for choosing")
        oracle(paths, [int(k) for k in args.stages.split(",")], args.objective, args.time_limit, args.sram,
               Path(args.out))
        return
    cases = [json.loads(line) for path in args.cases for line in Path(path).read_text().splitlines() if line.strip()]
    cases = [c for c in cases if c.get("objective_name", "latency") == args.objective]
    records = compare(cases, args.cycles, args.objective)
    write_report(Path(args.out), "latency_rebalance_val.py", records, summary(records, args.cycles),
                 "Latency rebalancing on validation")


def write_report(out: Path, script: str, records: list[dict], text: str, title: str) -> None:
    """``out``.json (the command, the machine, the records) and ``out``.md (the title, the command, ``text``)."""
    command = f"python experiments/{script} " + " ".join(sys.argv[1:])
    doc = {"command": command, "machine": machine_description(load_average=True), "records": records}
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    out.with_suffix(".md").write_text(f"# {title}\n\n`{command}`\n\n{text}")
    print(text)


if __name__ == "__main__":
    main()
