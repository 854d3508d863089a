"""The crossing lower bound of an earlier commit against the working tree's, bound only (issue 27).

Each case: the contiguous split's objective is the fixed ``upper`` (so the bound is isolated from the schedule
search), then :func:`respect_jax.solvers.bounds.crossing_lower_bound` of both versions with ``--limit`` seconds, in
alternating order (the first of a pair in one case runs second in the next). Certified gap ``(upper - bound) /
upper``. ``--auto B``: instead, ``solver=auto`` with a budget of B s and each version's crossing bound, one fresh
process per run (no executable cache: a user's first call), reporting its objective and certified gap. Graphs:
validation models (``--val``, paths under data/models_val without ``.json``) and/or generated
layered graphs of experiments/bench_scale.py's families with seeds of our own (``--sizes``: seed ``1000 x size +
--seed-offset``, default 200; the benchmark's reported graphs use offset 0). Writes ``<out>.json`` and ``<out>.md``.

    .venv/bin/python experiments/bounds_old_vs_new.py --old 2898e22 --sizes 1000,5000,10000 --stages 4,8 \\
        --limit 5 --out experiments/results/bounds_hull_cache_s27_scale
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.experiments.report import markdown_table, mean  # noqa: E402
from respect_jax.graphs import generate_numpy  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.solvers import bounds as new  # noqa: E402
from respect_jax.solvers.base import run_solver  # noqa: E402


def old_module(rev: str):
    """``respect_jax/solvers/bounds.py`` as of ``rev``, imported as a module of its own."""
    text = subprocess.run(["git", "show", f"{rev}:respect_jax/solvers/bounds.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "old_bounds.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("old_bounds", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_bounds"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _auto_child(queue, rev: str | None, graph, hw, objective: str, budget: float) -> None:
    """``solver=auto`` in this fresh process, with the crossing bound of ``rev`` (None: the working tree's)."""
    import respect_jax.policy.solver  # noqa: F401  (registers the learned member)
    from respect_jax.solvers import auto

    if rev is not None:
        auto.crossing_lower_bound = old_module(rev).crossing_lower_bound
    start = time.perf_counter()
    result = run_solver("auto", graph, hw, objective, 1.0, time_budget_s=budget, progress=False)
    info = result["info"]
    queue.put({"objective": result["objective"], "certified_gap": info["certified_gap"], "winner": info["winner"],
               "bound": info["lower_bound"], "wall_s": time.perf_counter() - start})


def run_auto(rev: str | None, graph, hw, objective: str, budget: float) -> dict:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_auto_child, args=(queue, rev, graph, hw, objective, budget))
    proc.start()
    out = queue.get()
    proc.join()
    return out


def graphs(args) -> list:
    from bench_scale import graph_config

    out = [load_graph(ROOT / "data" / "models_val" / f"{name}.json") for name in filter(None, args.val.split(","))]
    for size in [int(s) for s in filter(None, args.sizes.split(","))]:
        for family in args.families.split(","):
            seed = 1000 * size + args.seed_offset
            out.append(generate_numpy(graph_config(size, family), np.random.default_rng(seed),
                                      name=f"layered_{family}_{size}_seed{seed}"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="git revision of the old bounds.py")
    parser.add_argument("--val", default="", help="validation graphs (paths under data/models_val, no .json)")
    parser.add_argument("--sizes", default="", help="generated layered graph sizes")
    parser.add_argument("--families", default="dense,sparse")
    parser.add_argument("--seed-offset", type=int, default=200)
    parser.add_argument("--stages", default="4,8")
    parser.add_argument("--objectives", default="latency,paper")
    parser.add_argument("--hardware", default="coral_usb")
    parser.add_argument("--limit", type=float, default=5.0)
    parser.add_argument("--auto", type=float, default=None, help="run solver=auto with this budget instead")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    old = old_module(args.old)
    base = yaml.safe_load((ROOT / "conf" / "hardware" / f"{args.hardware}.yaml").read_text())
    records = []
    for graph in graphs(args):
        for k in [int(x) for x in args.stages.split(",")]:
            hw = hardware_from_dict({**base, "stages": k})
            for objective in args.objectives.split(","):
                upper = run_solver("contiguous", graph, hw, objective)["objective"]
                rec = {"graph": graph.name, "nodes": graph.num_nodes, "stages": k, "objective": objective,
                       "upper": upper, "load": os.getloadavg()[0]}
                pair = [("old", old), ("new", new)][:: 1 if len(records) % 2 == 0 else -1]
                for tag, module in pair:
                    if args.auto is not None:
                        got = run_auto(args.old if tag == "old" else None, graph, hw, objective, args.auto)
                        rec.update({f"{tag}_{key}": value for key, value in got.items()})
                        rec.update({f"{tag}_gap": got["certified_gap"], f"{tag}_cuts": None, f"{tag}_calls": None,
                                    f"{tag}_s": got["wall_s"]})
                        continue
                    start = time.perf_counter()
                    found = module.crossing_lower_bound(graph, hw, objective, 1.0, upper, args.limit)
                    rec.update({f"{tag}_bound": found["bound"], f"{tag}_gap": (upper - found["bound"]) / upper,
                                f"{tag}_cuts": found["cuts"], f"{tag}_calls": found["calls"],
                                f"{tag}_s": time.perf_counter() - start})
                records.append(rec)
                if args.auto is not None:
                    print(f"{graph.name:>32} K={k} {objective:<7} auto objective {rec['old_objective']:.6g} -> "
                          f"{rec['new_objective']:.6g}, certified gap {100 * rec['old_gap']:.2f} -> "
                          f"{100 * rec['new_gap']:.2f} %  wall s {rec['old_s']:.1f} -> {rec['new_s']:.1f}", flush=True)
                    continue
                print(f"{graph.name:>32} K={k} {objective:<7} gap {100 * rec['old_gap']:.2f} -> "
                      f"{100 * rec['new_gap']:.2f} %  cuts {rec['old_cuts']} -> {rec['new_cuts']}  "
                      f"s {rec['old_s']:.1f} -> {rec['new_s']:.1f}  load {rec['load']:.1f}", flush=True)
    Path(f"{args.out}.json").write_text(json.dumps({"args": vars(args), "records": records}, indent=1))
    rows = []
    for objective in args.objectives.split(","):
        sel = [r for r in records if r["objective"] == objective]
        rows.append([objective, len(sel), 100 * mean([r["old_gap"] for r in sel]),
                     100 * mean([r["new_gap"] for r in sel]), sum(r["new_gap"] < r["old_gap"] - 1e-9 for r in sel),
                     sum(r["new_gap"] > r["old_gap"] + 1e-9 for r in sel)])
    summary = markdown_table(["objective", "cases", f"mean gap % ({args.old})", "mean gap % (new)", "better",
                              "worse"], rows)
    detail = markdown_table(
        ["graph", "N", "K", "objective", "gap % old", "gap % new", "cuts old", "cuts new", "CP-SAT calls old",
         "CP-SAT calls new", "s old", "s new", "load"],
        [[r["graph"], r["nodes"], r["stages"], r["objective"], 100 * r["old_gap"], 100 * r["new_gap"], r["old_cuts"],
          r["new_cuts"], r["old_calls"], r["new_calls"], r["old_s"], r["new_s"], r["load"]] for r in records])
    head = (f"Crossing bound only, `{args.old}` vs the working tree, {args.limit:g} s each, upper = the contiguous "
            f"split, `{args.hardware}`; certified gap (upper - bound) / upper.\n\n")
    if args.auto is not None:
        head = (f"`solver=auto`, {args.auto:g} s, with the crossing bound of `{args.old}` vs the working tree's, one "
                f"fresh process per run (no executable cache), `{args.hardware}`; auto's certified gap ('s': wall "
                f"time of the run_solver call).\n\n")
    Path(f"{args.out}.md").write_text(head + summary + "\n\n" + detail + "\n")


if __name__ == "__main__":
    main()
