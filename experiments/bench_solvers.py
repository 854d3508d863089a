"""Benchmark the exact oracles and the baselines (issue 3's benchmark; not a test).

Part 1 (random graphs, RESPECT distribution, ``--stages`` K): for ``--n30`` graphs of 30 nodes and
``--n100`` of 100 nodes and each objective, run every solver of ``--solvers``; the reference is
the proven optimum (the best schedule of a MILP/CP-SAT run that proved optimality). Per solver:
mean and max objective ratio to that optimum, % of graphs where it reaches the optimum (ratio
<= 1 + 1e-5, the evaluator's float32 precision), % proven optimal (exact solvers) and median
solve time. Graphs without a proven optimum are counted and left out of the ratios.

Part 2 (DNN-like graphs): for ``--n300`` graphs of 300 nodes and ``--n700`` of 700 nodes, the MILP
and CP-SAT time to proven optimality, or their gap at ``--big-time-limit``, plus the compiler
split's ratio to the best schedule found.

Writes ``<out-dir>/bench_solvers.json`` (every record, the settings and a machine description)
and ``<out-dir>/bench_solvers.md`` (tables). Example (small):

    .venv/bin/python experiments/bench_solvers.py --n30 5 --n100 5 --n300 1 --n700 1 \\
        --time-limit 10 --big-time-limit 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import yaml

from respect_jax.cli.common import user_errors_exit
from respect_jax.costs import hardware_from_dict
from respect_jax.graphs import GeneratorConfig, generate_dataset, write_json_atomic
from respect_jax.reporting import machine_description
from respect_jax.solvers import available_solvers, run_solver

ROOT = Path(__file__).resolve().parents[1]
EXACT = ("milp", "cpsat")
DEFAULT_SOLVERS = ("compiler", "profiling", "greedy", "respect_label", "milp", "cpsat")
OPT_RTOL = 1e-5  # a schedule "reaches" the optimum within the float32 evaluator's precision


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--n30", type=int, default=100, help="number of random 30-node graphs (default 100)")
    p.add_argument("--n100", type=int, default=100, help="number of random 100-node graphs (default 100)")
    p.add_argument("--n300", type=int, default=5, help="number of 300-node DNN-like graphs (default 5)")
    p.add_argument("--n700", type=int, default=5, help="number of 700-node DNN-like graphs (default 5)")
    p.add_argument("--stages", type=int, default=4, help="pipeline stages K (default 4)")
    p.add_argument("--objectives", nargs="+", default=["paper", "latency"], choices=["paper", "latency"])
    p.add_argument("--lam", type=float, default=1.0, help="communication weight of the paper objective")
    p.add_argument("--solvers", nargs="+", default=list(DEFAULT_SOLVERS), help="registered solver names")
    p.add_argument("--time-limit", type=float, default=60.0, help="MILP/CP-SAT limit (s) on 30/100-node graphs")
    p.add_argument("--big-time-limit", type=float, default=60.0, help="MILP/CP-SAT limit (s) on 300/700-node graphs")
    p.add_argument("--threads", type=int, default=None, help="HiGHS threads (default: HiGHS's choice)")
    p.add_argument("--workers", type=int, default=2, help="CP-SAT workers (default 2)")
    p.add_argument("--hardware", type=Path, default=ROOT / "conf" / "hardware" / "coral_usb.yaml")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", type=Path, default=ROOT / "experiments" / "results")
    args = p.parse_args(argv)
    unknown = [s for s in args.solvers if s not in available_solvers()]
    if unknown:
        p.error(f"unknown solver(s) {', '.join(unknown)}; available: {', '.join(available_solvers())}")
    return args


def machine() -> dict:
    """The machine description with the versions of the packages the figures depend on, the load and the date."""
    return machine_description(packages=("jax", "numpy", "cvxpy", "highspy", "ortools"), load_average=True)


def solver_options(name: str, time_limit: float, args) -> dict:
    if name == "milp":
        return {"time_limit_s": time_limit, "threads": args.threads}
    if name == "cpsat":
        return {"time_limit_s": time_limit, "workers": args.workers}
    return {}


def run_one(name, graph, hw, objective, args, time_limit) -> dict:
    r = run_solver(name, graph, hw, objective, args.lam, **solver_options(name, time_limit, args))
    return {
        "graph": graph.name,
        "num_nodes": graph.num_nodes,
        "solver": name,
        "objective_name": objective,
        "objective": r["objective"],
        "optimal": r["optimal"],
        "gap": r["gap"],
        "solve_time_s": r["solve_time_s"],
    }


def warm_up(hw, args) -> None:
    """Compile the evaluator for every padding bucket used below, so no solver's time includes it."""
    for mode, n, names in (
        ("respect", 30, args.solvers),
        ("respect", 100, args.solvers),
        ("dnn", 300, ["compiler"]),
        ("dnn", 700, ["compiler"]),
    ):
        g = generate_dataset(GeneratorConfig(mode=mode, min_nodes=n, max_nodes=n), 1, seed=12345)[0]
        for objective in args.objectives:
            for name in names:
                if name not in EXACT:
                    run_solver(name, g, hw, objective, args.lam)


def part1(hw, args, log) -> list[dict]:
    records = []
    for size, count in ((30, args.n30), (100, args.n100)):
        if count <= 0:
            continue
        cfg = GeneratorConfig(mode="respect", min_nodes=size, max_nodes=size)
        graphs = generate_dataset(cfg, count, seed=args.seed + size, prefix=f"r{size}_")
        for graph in graphs:
            for objective in args.objectives:
                for name in args.solvers:
                    rec = run_one(name, graph, hw, objective, args, args.time_limit)
                    rec["set"] = f"random{size}"
                    records.append(rec)
                log(
                    f"{graph.name} {objective}: "
                    + " ".join(f"{r['solver']}={r['objective']:.6g}" for r in records[-len(args.solvers) :])
                )
    return records


def part2(hw, args, log) -> list[dict]:
    records = []
    names = [s for s in args.solvers if s in EXACT] + (["compiler"] if "compiler" in args.solvers else [])
    for size, count in ((300, args.n300), (700, args.n700)):
        if count <= 0:
            continue
        cfg = GeneratorConfig(mode="dnn", min_nodes=size, max_nodes=size)
        graphs = generate_dataset(cfg, count, seed=args.seed + size, prefix=f"d{size}_")
        for graph in graphs:
            for objective in args.objectives:
                for name in names:
                    rec = run_one(name, graph, hw, objective, args, args.big_time_limit)
                    rec["set"] = f"dnn{size}"
                    records.append(rec)
                    log(
                        f"{graph.name} {objective} {name}: {rec['objective']:.6g} optimal={rec['optimal']} "
                        f"gap={rec['gap']} {rec['solve_time_s']:.2f}s"
                    )
    return records


def reference_values(records: list[dict]) -> dict:
    """(set, graph, objective) -> (best objective, proven) over every solver's schedule."""
    ref: dict = {}
    for r in records:
        key = (r["set"], r["graph"], r["objective_name"])
        best, proven = ref.get(key, (np.inf, False))
        proven = proven or bool(r["optimal"])
        ref[key] = (min(best, r["objective"]), proven)
    return ref


def summarise_part1(records: list[dict], solvers: list[str]) -> list[dict]:
    ref = reference_values(records)
    rows = []
    for set_name in sorted({r["set"] for r in records}):
        for objective in sorted({r["objective_name"] for r in records}):
            sel = [r for r in records if r["set"] == set_name and r["objective_name"] == objective]
            for name in solvers:
                mine = [r for r in sel if r["solver"] == name]
                if not mine:
                    continue
                ratios, reached = [], 0
                for r in mine:
                    best, proven = ref[(set_name, r["graph"], objective)]
                    if not proven:
                        continue
                    ratio = r["objective"] / best if best > 0 else (1.0 if r["objective"] == 0 else np.inf)
                    ratios.append(ratio)
                    reached += ratio <= 1 + OPT_RTOL
                rows.append(
                    {
                        "set": set_name,
                        "objective": objective,
                        "solver": name,
                        "graphs": len(mine),
                        "graphs_with_proven_optimum": len(ratios),
                        "mean_ratio": float(np.mean(ratios)) if ratios else None,
                        "max_ratio": float(np.max(ratios)) if ratios else None,
                        "pct_reaching_optimum": 100.0 * reached / len(ratios) if ratios else None,
                        "pct_proven_optimal": 100.0 * sum(bool(r["optimal"]) for r in mine) / len(mine)
                        if name in EXACT
                        else None,
                        "median_time_s": statistics.median(r["solve_time_s"] for r in mine),
                    }
                )
    return rows


def summarise_part2(records: list[dict]) -> list[dict]:
    ref = reference_values(records)
    rows = []
    for r in records:
        best, proven = ref[(r["set"], r["graph"], r["objective_name"])]
        rows.append(
            {
                "set": r["set"],
                "graph": r["graph"],
                "objective": r["objective_name"],
                "solver": r["solver"],
                "optimal": r["optimal"],
                "gap": r["gap"],
                "time_s": r["solve_time_s"],
                "ratio_to_best": r["objective"] / best if best > 0 else None,
                "best_is_proven": proven,
            }
        )
    return rows


def fmt(x, spec=".4f") -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    return format(x, spec)


def markdown(summary1, summary2, meta) -> str:
    a = meta["args"]
    lines = [
        "# Solver benchmark (issue 3)",
        "",
        f"Generated by `experiments/bench_solvers.py` on {meta['machine']['date']}; "
        f"{meta['machine']['platform']}, {meta['machine']['cpu_count']} CPUs, Python {meta['machine']['python']}; "
        + ", ".join(f"{k} {v}" for k, v in meta["machine"]["packages"].items()),
        "",
        f"K = {a['stages']}, hardware `{Path(a['hardware']).name}`, lam = {a['lam']}, seed {a['seed']}; "
        f"MILP/CP-SAT limit {a['time_limit']} s (random graphs), {a['big_time_limit']} s (DNN-like graphs); "
        f"CP-SAT workers {a['workers']}, HiGHS threads {a['threads'] or 'default'}. "
        f"Wall time of the whole run: {meta['wall_time_s']:.0f} s.",
        "",
        "## Random graphs (RESPECT distribution): ratio to the proven optimum",
        "",
        "`reach opt`: schedules within 1e-5 of the optimum; `proven`: runs that proved optimality.",
        "",
        "| graphs | objective | solver | n (with proven opt) | mean ratio | max ratio | reach opt % | proven % "
        "| median time (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary1:
        lines.append(
            f"| {r['set']} | {r['objective']} | {r['solver']} | {r['graphs']} ({r['graphs_with_proven_optimum']}) | "
            f"{fmt(r['mean_ratio'])} | {fmt(r['max_ratio'])} | {fmt(r['pct_reaching_optimum'], '.0f')} | "
            f"{fmt(r['pct_proven_optimal'], '.0f')} | {fmt(r['median_time_s'], '.3f')} |"
        )
    if summary2:
        lines += [
            "",
            "## DNN-like graphs: time to proven optimality or gap at the limit",
            "",
            "| graph | objective | solver | optimal | gap | time (s) | ratio to best found |",
            "|---|---|---|---|---|---|---|",
        ]
    for r in summary2:
        lines.append(
            f"| {r['graph']} | {r['objective']} | {r['solver']} | {fmt(r['optimal'])} | {fmt(r['gap'], '.2e')} | "
            f"{fmt(r['time_s'], '.2f')} | {fmt(r['ratio_to_best'])} |"
        )
    return "\n".join(lines) + "\n"


@user_errors_exit("bench_solvers")
def main(argv=None) -> int:
    args = parse_args(argv)
    hw_values = yaml.safe_load(args.hardware.read_text())
    hw_values["stages"] = args.stages
    hw = hardware_from_dict(hw_values)
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:7.1f}s] {msg}", flush=True)

    warm_up(hw, args)
    rec1 = part1(hw, args, log)
    rec2 = part2(hw, args, log)
    summary1 = summarise_part1(rec1, args.solvers)
    summary2 = summarise_part2(rec2)
    meta = {
        "machine": machine(),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "hardware": hw.to_dict(),
        "wall_time_s": time.perf_counter() - start,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    doc = {**meta, "random_summary": summary1, "dnn_summary": summary2, "records": rec1 + rec2}
    write_json_atomic(json.loads(json.dumps(doc, default=float)), args.out_dir / "bench_solvers.json")
    md = markdown(summary1, summary2, meta)
    tmp = args.out_dir / ".bench_solvers.md.tmp"
    tmp.write_text(md)
    os.replace(tmp, args.out_dir / "bench_solvers.md")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
