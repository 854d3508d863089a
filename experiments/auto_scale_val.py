"""Validation of ``solver=auto``'s time sharing at scale (issue 27, session 29), on generated layered graphs of seeds of
our own (graph seed ``seed + 1000 * size`` as ``bench_scale.py --seed <seed>`` draws it; never bench_scale's default
seed-0 test graphs). Each method runs cold in a fresh process, the methods alternating per graph; each record keeps
auto's ``portfolio`` (every member's own objective and time) and is reported against the best of all methods on its
graph (and, with ``--best-known``, against the best of earlier runs' records of the same graph). Writes ``<out>.md``
and ``<out>.json``.

    .venv/bin/python experiments/auto_scale_val.py --seeds 11,12 --sizes 1000 --stages 4 \
        --methods '{"auto": ["auto", {}], "auto_g": ["auto", {"line_restarts": {"latency": 0}}]}' \
        --out experiments/results/auto_scale_val_s29
"""

from __future__ import annotations

import argparse
import glob
import importlib
import json
import multiprocessing as mp
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
#: The tree whose respect_jax a child imports (``AUTO_SCALE_VAL_ROOT``, set per method: an A/B against an older
#: tree, e.g. ``git archive HEAD | tar -x -C /tmp/old``).
ROOT = Path(os.environ.get("AUTO_SCALE_VAL_ROOT", HERE))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE / "experiments"))

# respect_jax from ROOT, before bench_scale puts this checkout first on the path (until session 30 a child imported this
# checkout's respect_jax whatever its tree, so the tree A/Bs ran one code on both sides)
importlib.import_module("respect_jax")
import yaml  # noqa: E402
from bench_scale import graph_config  # noqa: E402

from respect_jax.experiments.report import markdown_table, result_stem, write_results  # noqa: E402


def _child(queue, cfg: dict, seed: int, name: str, hw: dict, objective: str, solver: str, options: dict) -> None:
    try:
        _run_child(queue, cfg, seed, name, hw, objective, solver, options)
    except BaseException as err:  # the parent records it at once instead of waiting out its limit
        queue.put({"status": f"error: {type(err).__name__}: {err}"[:300]})
        raise


def _run_child(queue, cfg: dict, seed: int, name: str, hw: dict, objective: str, solver: str, options: dict) -> None:
    import resource

    import numpy as np

    import respect_jax.policy.solver  # noqa: F401  (registers the learned solvers)
    from respect_jax.costs import hardware_from_dict
    from respect_jax.graphs import GeneratorConfig, generate_numpy
    from respect_jax.solvers import run_solver

    if isinstance(cfg, str):  # a graph file (--graphs)
        from respect_jax.graphs.graph import load_graph

        graph = load_graph(cfg)
    else:
        graph = generate_numpy(GeneratorConfig(**cfg), np.random.default_rng(seed), name=name)
    start = time.perf_counter()
    result = run_solver(solver, graph, hardware_from_dict(hw), objective, 1.0, **options)
    wall = time.perf_counter() - start
    info = result.get("info") or {}
    portfolio = {k: {kk: vv for kk, vv in v.items() if isinstance(vv, (int, float, str, bool))}
                 for k, v in (info.get("portfolio") or {}).items()}
    queue.put({"status": "ok", "objective": result["objective"], "time_s": wall, "winner": info.get("winner"),
               "certified_gap": info.get("certified_gap"), "num_nodes": graph.num_nodes, "portfolio": portfolio,
               "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20})


def run(cfg, seed, name, hw, objective, solver, options, limit_s, root: str | None = None) -> dict:
    os.environ["AUTO_SCALE_VAL_ROOT"] = root or str(HERE)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, cfg if isinstance(cfg, str) else asdict(cfg), seed, name, hw,
                                            objective, solver, options))
    start = time.perf_counter()
    proc.start()
    try:
        record = queue.get(timeout=limit_s)
    except Exception:  # past the limit, or the child died
        record = {"status": "killed" if proc.is_alive() else f"died (exit {proc.exitcode})",
                  "time_s": time.perf_counter() - start}
    proc.kill()
    proc.join()
    return record


def best_known(patterns: list[str]) -> dict:
    """Best objective per (graph, stages, objective) over the records of earlier runs of this script."""
    best: dict = {}
    for pattern in patterns:
        for path in glob.glob(pattern):
            for r in json.loads(Path(path).read_text()).get("records", []):
                if r.get("status") == "ok":
                    key = (r["graph"], r["stages"], r["objective_name"])
                    best[key] = min(best.get(key, float("inf")), r["objective"])
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="11,12")
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--families", default="dense,sparse")
    parser.add_argument("--graphs", default=None,
                        help="graph files (comma-separated globs) instead of generated graphs")
    parser.add_argument("--stages", default="4")
    parser.add_argument("--objectives", default="latency")
    parser.add_argument("--budget", type=float, default=10.0, help="time_budget_s of every auto method")
    parser.add_argument("--methods", required=True,
                        help='JSON {label: [solver, options]} or {label: [solver, options, tree]} (tree: the root '
                             'of another checkout whose respect_jax that method runs)')
    parser.add_argument("--best-known", nargs="*", default=[], help="earlier runs' JSON (globs) for best knowns")
    parser.add_argument("--alternate", action="store_true",
                        help="reverse the methods' order by the parity of the graph's seed index + family index + size "
                             "index (graph files: its index) + stages index: each family's graphs alternate A B, B A")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    methods = json.loads(args.methods)
    records = []
    if args.graphs:
        cases = [(Path(f).stem, f, 0, 0, "file") for g in args.graphs.split(",") for f in sorted(glob.glob(g))]
    else:
        cases = [(f"val_{family}_{size}_s{seed}", graph_config(size, family), seed + 1000 * size, size, family)
                 for seed in (int(s) for s in args.seeds.split(",")) for size in (int(s) for s in args.sizes.split(","))
                 for family in args.families.split(",")]
    seed_index: dict = {}
    for case, (name, cfg, graph_seed, size, family) in enumerate(cases):
        seed = graph_seed - 1000 * size
        parity = case if family == "file" else seed_index.setdefault(seed, len(seed_index)) \
            + args.families.split(",").index(family) + [int(x) for x in args.sizes.split(",")].index(size)
        for k_index, stages in enumerate(int(k) for k in args.stages.split(",")):
            for objective in args.objectives.split(","):
                hw = {**yaml.safe_load((HERE / "conf" / "hardware" / "coral_usb.yaml").read_text()),
                      "stages": stages}
                group = []
                order = list(methods.items())
                if args.alternate and (parity + k_index) % 2:
                    order.reverse()
                for label, (solver, options, *tree) in order:
                    options = dict(options)
                    if solver == "auto":
                        options = {"time_budget_s": args.budget, "progress": False, **options}
                    load = os.getloadavg()[0]
                    rec = run(cfg, graph_seed, name, hw, objective, solver, options, 900.0,
                              tree[0] if tree else None)
                    rec.update(graph=name, size=size, family=family, seed=seed, stages=stages,
                               objective_name=objective, method=label, load_before=load)
                    group.append(rec)
                    members = " ".join(f"{k}={v.get('objective', next(iter(v.values()), ''))!s:.8}"
                                       for k, v in (rec.get("portfolio") or {}).items())
                    print(f"{name} K={stages} {objective} {label}: {rec['status']} "
                          f"{rec.get('objective', float('nan')):.6g} {rec.get('time_s', 0):.1f}s "
                          f"winner {rec.get('winner')} load {load:.1f} | {members}", flush=True)
                here = min((r["objective"] for r in group if r["status"] == "ok"), default=float("nan"))
                for r in group:
                    r["best_here"] = here
                records.extend(group)
                write(args, records)


def write(args: argparse.Namespace, records: list[dict]) -> None:
    known = best_known(args.best_known)
    rows = []
    for r in records:
        ok = r["status"] == "ok"
        bk = min(known.get((r["graph"], r["stages"], r["objective_name"]), float("inf")), r["best_here"])
        rows.append([r["graph"], r["stages"], r["objective_name"], r["method"], r["status"],
                     f"{r['objective']:.6g}" if ok else "-", f"{r['objective'] / r['best_here']:.4f}" if ok else "-",
                     f"{r['objective'] / bk:.4f}" if ok else "-", r.get("winner"), f"{r.get('time_s', 0):.1f}",
                     f"{r['load_before']:.1f}"])
    table = markdown_table(["graph", "K", "objective", "method", "status", "objective", "/ best here",
                            "/ best known", "winner", "time s", "load before"], rows)
    stem = result_stem(args.out)
    write_results(stem.parent, stem.name, {"experiment": "auto_scale_val", "args": vars(args), "records": records},
                  table)


if __name__ == "__main__":
    main()
