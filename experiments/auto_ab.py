"""Paired, alternating comparison of ``solver=auto`` variants on validation graphs (issue 27).

Each (graph, variant) runs in its own process: a warm-up run per K (short budget, discarded; it pays the imports
and the JAX compilations of that graph's size bucket), then the measured runs. The variants' order rotates from one
graph to the next, so machine load and cache warmth hit every variant alike. A variant is a code tree (e.g. a
``git worktree`` of an earlier commit, run with this checkout's .venv) plus optional settings applied before the runs:
``windows=SHARE`` (``bounds.WINDOWS_FIRST_SHARE``), ``seed=0|1`` (``bounds.SEED_CHAINS[objective]``),
``chain=0`` (auto's crossing bound without the chain relaxations). Between runs the worker waits for every
thread a run left behind (so no run shares the CPU with the last one's members).

    nice -n 5 .venv/bin/python experiments/auto_ab.py --variant s20=/tmp/hb_s20 --variant cur=. \
        --models efficientnetb0,convnext_base --stages 2,4,8 --objectives latency --budget 10 \
        --out experiments/results/auto_ab_s23.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"


def apply_settings(settings: str, objective: str) -> None:
    """Set a variant's module knobs (``windows=0.5;seed=0;chain=0``) in the imported tree."""
    import functools

    import respect_jax.solvers.auto as auto
    from respect_jax.solvers import bounds

    for item in filter(None, settings.split(";")):
        name, _, value = item.partition("=")
        if name == "windows":
            bounds.WINDOWS_FIRST_SHARE = float(value)
        elif name == "seed":
            bounds.SEED_CHAINS = {**bounds.SEED_CHAINS, objective: bool(int(value))}
        elif name == "chain":
            auto.crossing_lower_bound = functools.partial(bounds.crossing_lower_bound, chain=bool(int(value)))
        elif name == "chain_share":
            bounds.CHAIN_SHARE = float(value)
        else:
            raise ValueError(f"unknown setting {item!r}; use windows=SHARE, seed=0|1, chain=0|1, chain_share=X")


def wait_for_threads(limit_s: float = 120.0) -> float:
    """Wait (at most ``limit_s``) until only the main thread is alive; returns the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit_s:
        alive = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()]
        if not alive:
            break
        time.sleep(0.1)
    return time.perf_counter() - start


def worker(args: argparse.Namespace) -> None:
    """Runs inside the variant's tree (its respect_jax first on sys.path): warm-up, then the measured runs."""
    tree = Path(args.tree).resolve()
    sys.path.insert(0, str(tree))
    import yaml

    import respect_jax
    import respect_jax.policy.solver  # noqa: F401  (registers the learned solver: a member of auto)
    from respect_jax.compile_cache import enable_compilation_cache, resolve_cache_dir
    from respect_jax.costs import hardware_from_dict
    from respect_jax.graphs.graph import load_graph
    from respect_jax.solvers import run_solver

    assert Path(respect_jax.__file__).resolve().is_relative_to(tree), respect_jax.__file__
    enable_compilation_cache(resolve_cache_dir("auto"))
    apply_settings(args.settings, args.objective)
    base = yaml.safe_load((tree / "conf" / "hardware" / "coral_usb.yaml").read_text())
    options = yaml.safe_load((tree / "conf" / "solver" / "auto.yaml").read_text())["options"]
    options.update(progress=False)
    graph = load_graph(args.graph)
    stages = [int(k) for k in args.stages.split(",")]
    for k in stages:  # warm-up: imports, compilations of this size bucket (waited for), discarded
        run_solver("auto", graph, hardware_from_dict({**base, "stages": k}), args.objective, 1.0,
                   **{**options, "time_budget_s": args.warmup_budget})
        wait_for_threads()
    for k in stages:
        hw = hardware_from_dict({**base, "stages": k})
        load = os.getloadavg()[0]
        start = time.perf_counter()
        result = run_solver("auto", graph, hw, args.objective, 1.0, **{**options, "time_budget_s": args.budget})
        wall = time.perf_counter() - start
        waited = wait_for_threads()
        info = result["info"]
        print("RECORD " + json.dumps({
            "graph": graph.name, "num_nodes": graph.num_nodes, "stages": k, "objective_name": args.objective,
            "objective": result["objective"], "optimal": bool(result["optimal"]), "certified_gap": result["gap"],
            "lower_bound": info["lower_bound"], "winner": info["winner"], "wall_s": wall,
            "auto_s": info.get("elapsed_s"), "waited_s": waited, "load_before": load,
            "bound_info": {k2: v for k2, v in (info["portfolio"].get("bound") or {}).items()
                           if isinstance(v, (int, float, str, bool))},
            "module": respect_jax.__file__,
        }), flush=True)


def run_variant(label: str, spec: str, graph: str, stages: str, objective: str, budget: float,
                warmup_budget: float, cache: str) -> list[dict]:
    tree, _, settings = spec.partition(":")
    tree = str(Path(tree).resolve())
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": tree, "RESPECT_JAX_CACHE": cache}
    cmd = [str(PYTHON), str(Path(__file__).resolve()), "--worker", "--tree", tree, "--settings", settings,
           "--graph", graph, "--stages", stages, "--objective", objective, "--budget", str(budget),
           "--warmup-budget", str(warmup_budget)]
    for _ in range(2):  # once more after a failure (a JAX persistent-cache entry another process was writing)
        proc = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
        if proc.returncode == 0:
            break
        print(f"{label} on {graph} failed, once more:\n{proc.stderr[-600:]}", flush=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{label} on {graph} failed:\n{proc.stderr[-3000:]}")
    records = [json.loads(line[len("RECORD "):]) for line in proc.stdout.splitlines() if line.startswith("RECORD ")]
    for r in records:
        r["variant"] = label
    return records


def summarise(records: list[dict], labels: list[str]) -> str:
    """Per variant and K: runs, proven share, mean certified gap; then per (graph, K) the paired gaps."""
    lines = ["| variant | K | runs | % proven | mean certified gap % | runs gap <= 1 % | mean load |", "|---" * 7 + "|"]
    for label in labels:
        for k in sorted({r["stages"] for r in records}):
            sel = [r for r in records if r["variant"] == label and r["stages"] == k]
            if sel:
                lines.append(f"| {label} | {k} | {len(sel)} | {100 * sum(r['optimal'] for r in sel) / len(sel):.1f} | "
                             f"{100 * sum(r['certified_gap'] for r in sel) / len(sel):.2f} | "
                             f"{sum(r['certified_gap'] <= 0.01 for r in sel)} | "
                             f"{sum(r['load_before'] for r in sel) / len(sel):.1f} |")
        sel = [r for r in records if r["variant"] == label]
        if sel:
            lines.append(f"| {label} | all | {len(sel)} | {100 * sum(r['optimal'] for r in sel) / len(sel):.1f} | "
                         f"{100 * sum(r['certified_gap'] for r in sel) / len(sel):.2f} | "
                         f"{sum(r['certified_gap'] <= 0.01 for r in sel)} | "
                         f"{sum(r['load_before'] for r in sel) / len(sel):.1f} |")
    lines += ["", "| graph | K | " + " | ".join(f"{label} gap % (proven)" for label in labels) + " |",
              "|---" * (2 + len(labels)) + "|"]
    keys = sorted({(r["graph"], r["stages"]) for r in records})
    for graph, k in keys:
        cells = []
        for label in labels:
            hit = [r for r in records if r["variant"] == label and r["graph"] == graph and r["stages"] == k]
            cells.append(f"{100 * hit[0]['certified_gap']:.2f}{' *' if hit[0]['optimal'] else ''}" if hit else "-")
        lines.append(f"| {graph} | {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", default=[], help="LABEL=TREE[:SETTINGS], repeatable")
    parser.add_argument("--models", default="efficientnetb0,convnext_base", help="names in data/models_val")
    parser.add_argument("--stages", default="2,4,8")
    parser.add_argument("--objectives", default="latency")
    parser.add_argument("--budget", type=float, default=10.0)
    parser.add_argument("--warmup-budget", type=float, default=1.0)
    parser.add_argument("--out", help="output JSON (a .md beside it)")
    parser.add_argument("--cache", default="/tmp/auto_ab_jax_cache",
                        help="JAX compilation cache of the workers (RESPECT_JAX_CACHE; shared by every variant)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--settings", default="", help=argparse.SUPPRESS)
    parser.add_argument("--graph", help=argparse.SUPPRESS)
    parser.add_argument("--objective", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if not args.variant or not args.out:
        raise SystemExit("auto_ab: give --variant LABEL=TREE[:SETTINGS] (at least one) and --out")
    variants = [v.partition("=")[::2] for v in args.variant]
    labels = [label for label, _ in variants]
    out = Path(args.out)
    records: list[dict] = []
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    for i, name in enumerate(args.models.split(",")):
        graph = str(ROOT / "data" / "models_val" / f"{name}.json")
        order = variants[i % len(variants):] + variants[:i % len(variants)]
        for objective in args.objectives.split(","):
            for label, spec in order:
                t0 = time.perf_counter()
                got = run_variant(label, spec, graph, args.stages, objective, args.budget, args.warmup_budget,
                                  args.cache)
                records += got
                print(f"{name:>24} {objective:<7} {label:<10} " + "  ".join(
                    f"K={r['stages']} {100 * r['certified_gap']:.2f}%{'*' if r['optimal'] else ''}" for r in got)
                      + f"  ({time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f})", flush=True)
                doc = {"experiment": "auto_ab", "command": " ".join(sys.argv), "started": started,
                       "variants": dict(variants), "budget_s": args.budget, "records": records}
                out.write_text(json.dumps(doc, indent=1))
                out.with_suffix(".md").write_text(
                    f"`{' '.join(sys.argv)}`, started {started}\n\n" + summarise(records, labels))
    print(summarise(records, labels))


if __name__ == "__main__":
    main()
