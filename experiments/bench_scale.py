"""Scheduling at scale: 1k / 5k / 10k-node random layered graphs (ICML'24 benchmark style), per solver and ``auto``.

For every generated graph (``graphs`` mode ``layered``: the dense family, ~2.9 edges per node, and the sparse
one, ~1.2), K and objective, each method runs in a fresh process (so its peak memory, ``ru_maxrss``, is its
own) with a wall-clock limit; recorded: objective, gap to the best known (best of every method run, the long
CP-SAT reference included), certified gap (``auto``), time and peak memory. A method that runs past its limit is
killed and recorded as such; one that refuses the size says why. Writes ``<out>.md``, ``<out>.json`` (with the
machine description) and ``<out>.png`` (objective relative to the best known vs time, one panel per size).

The full grid of the issue (3 graphs per size and family, K = 4 and 8, both objectives, CP-SAT 600 s reference)
takes about a day on 2 cores; the options select a part of it, e.g.:

    .venv/bin/python experiments/bench_scale.py --sizes 1000,5000,10000 --families dense,sparse --per-size 1 \
        --stages 4 --objectives paper --budgets 1,10,60 --reference-s 120 --out experiments/results/bench_scale
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from respect_jax.cli.common import user_errors_exit  # noqa: E402
from respect_jax.experiments.report import markdown_table, result_stem, with_extension, write_results  # noqa: E402
from respect_jax.graphs import GeneratorConfig  # noqa: E402
from respect_jax.viz import new_figure, save_png  # noqa: E402

# edges per node of the ICML'24 families (their public rand_graph / rand_graph_sparse sets)
FAMILIES = {"dense": 2.9, "sparse": 1.2}


def graph_config(size: int, family: str) -> GeneratorConfig:
    base = yaml.safe_load((ROOT / "conf" / "graphs" / "layered1k.yaml").read_text())
    base.update(min_nodes=size, max_nodes=size, edges_per_node=FAMILIES[family])
    return GeneratorConfig(**base)


def _child(queue, cfg: dict, seed: int, name: str, hw: dict, objective: str, solver: str, options: dict,
           cache: str | None = None, warm: tuple = ()) -> None:
    """Run one method in this fresh process and put its record (or the error) on ``queue``. ``cache``: the executable
    cache folder (None: compiled in memory only, the cold first call); ``warm``: ``(seed, solvers)``, run each of
    those solvers first, unrecorded, in a process of its own, on the graph of that seed (same size and family) with
    this cache, so that the measured run is a user's later call on a warm cache."""
    import resource

    import numpy as np

    from respect_jax.costs import hardware_from_dict
    from respect_jax.graphs import generate_numpy
    from respect_jax.solvers import run_solver

    try:
        if cache is not None:
            from respect_jax.compile_cache import enable_compilation_cache

            enable_compilation_cache(cache)
        if solver in ("policy", "auto") or warm:
            import respect_jax.policy.solver  # noqa: F401  (registers the learned solver)
        if warm:  # the warm-up call: run and put nothing but a note on the queue
            other = generate_numpy(GeneratorConfig(**cfg), np.random.default_rng(warm[0]), name=f"{name}_warmup")
            for s in warm[1]:
                run_solver(s, other, hardware_from_dict(hw), objective, 1.0,
                           **(options if s == solver else {}))
            queue.put({"status": "warm"})
            return
        graph = generate_numpy(GeneratorConfig(**cfg), np.random.default_rng(seed), name=name)
        start = time.perf_counter()
        result = run_solver(solver, graph, hardware_from_dict(hw), objective, 1.0, **options)
        wall = time.perf_counter() - start
        info = result.get("info") or {}
        queue.put({
            "status": "ok", "objective": result["objective"], "time_s": wall, "optimal": result["optimal"],
            "gap": result["gap"], "certified_gap": info.get("certified_gap"), "lower_bound": info.get("lower_bound"),
            "winner": info.get("winner"), "num_nodes": graph.num_nodes, "num_edges": int(len(graph.edges)),
            "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        })
    except (ValueError, MemoryError) as err:  # a solver refusing the size says why in one line
        queue.put({"status": "refused", "reason": str(err).splitlines()[0]})


def run_method(cfg: GeneratorConfig, seed: int, name: str, hw: dict, objective: str, solver: str, options: dict,
               limit_s: float, cache: str | None = None, warm: tuple = ()) -> dict:
    """One method on one graph in a fresh process, killed after ``limit_s`` seconds (``cache``, ``warm``:
    :func:`_child`'s)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, asdict(cfg), seed, name, hw, objective, solver, options, cache,
                                            warm))
    start = time.perf_counter()
    proc.start()
    try:
        record = queue.get(timeout=limit_s)
    except Exception:  # queue.Empty: past the limit (or the child died, e.g. killed for memory)
        record = {"status": "killed" if proc.is_alive() else f"died (exit {proc.exitcode})",
                  "time_s": time.perf_counter() - start}
    proc.kill()
    proc.join()
    return record


def methods(budgets: list[float], reference_s: float) -> dict[str, tuple[str, dict, float]]:
    """name -> (solver, options, wall limit of its process)."""
    out = {
        "contiguous": ("contiguous", {}, 600.0),
        "gumbel": ("gumbel", {}, 600.0),
        "policy": ("policy", {}, 600.0),
        f"cpsat_{reference_s:g}s": ("cpsat", {"time_limit_s": reference_s}, reference_s + 600.0),
    }
    for b in budgets:
        out[f"auto_{b:g}s"] = ("auto", {"time_budget_s": b, "progress": False}, b + 600.0)
    return out


def summary(records: list[dict]) -> str:
    head = ["graph", "N", "E", "K", "objective", "method", "status", "value / best", "certified gap %", "time s",
            "peak GiB"]
    rows = []
    for r in records:
        ok = r["status"] == "ok"
        rows.append([
            r["graph"], r.get("num_nodes"), r.get("num_edges"), r["stages"], r["objective_name"], r["method"],
            r["status"], r["objective"] / r["best_known"] if ok else None,
            100 * r["certified_gap"] if ok and r.get("certified_gap") is not None else None,
            r.get("time_s"), r.get("peak_rss_gib"),
        ])
    return markdown_table(head, rows)


def plot(records: list[dict], png: Path) -> Figure:
    sizes = sorted({r["size"] for r in records})
    fig = new_figure(5 * len(sizes), 4)
    axes = fig.subplots(1, len(sizes), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        for method in sorted({r["method"] for r in records}):
            sel = [r for r in records if r["size"] == size and r["method"] == method and r["status"] == "ok"]
            if sel:
                ax.scatter([r["time_s"] for r in sel], [r["objective"] / r["best_known"] for r in sel], label=method)
        ax.set_xscale("log")
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("objective / best known")
        ax.set_title(f"{size} nodes")
        ax.legend(fontsize=7)
    save_png(fig, png)
    return fig


@user_errors_exit("bench_scale")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,5000,10000")
    parser.add_argument("--families", default="dense,sparse")
    parser.add_argument("--per-size", type=int, default=3, help="graphs per size and family")
    parser.add_argument("--stages", default="4,8")
    parser.add_argument("--objectives", default="paper,latency")
    parser.add_argument("--budgets", default="1,10,60", help="time budgets of solver=auto (s)")
    parser.add_argument("--reference-s", type=float, default=600.0, help="CP-SAT time limit of the reference run")
    parser.add_argument("--methods", default=None, help="comma list of method names to run (default: all)")
    parser.add_argument("--hardware", default="coral_usb")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="output stem (writes .md, .json, .png)")
    parser.add_argument("--warm-cache", default=None,
                        help="executable cache folder: before each measured run, a process of its own runs "
                             "--warm-solvers on a graph of another seed (same size and family) with this cache, and "
                             "the measured run uses it too (a user's later call; method names get '_warm'); "
                             "default: no cache, each run compiles what it needs (a cold first call)")
    parser.add_argument("--warm-solvers", default="policy,auto",
                        help="comma list of the solvers of the warm-up process (auto with the method's options)")
    parser.add_argument("--warm-seed-offset", type=int, default=500, help="the warm-up graph's seed = seed + this")
    args = parser.parse_args()
    hw_base = yaml.safe_load((ROOT / "conf" / "hardware" / f"{args.hardware}.yaml").read_text())
    table = methods([float(b) for b in args.budgets.split(",")], args.reference_s)
    chosen = args.methods.split(",") if args.methods else list(table)
    unknown = sorted(set(chosen) - set(table))
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(table)}")
    records = []
    for size in (int(s) for s in args.sizes.split(",")):
        for family in args.families.split(","):
            if family not in FAMILIES:
                raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
            cfg = graph_config(size, family)
            for i in range(args.per_size):
                seed, name = args.seed + 1000 * size + i, f"layered_{family}_{size}_{i}"
                for objective in args.objectives.split(","):
                    for k in (int(x) for x in args.stages.split(",")):
                        hw = {**hw_base, "stages": k}
                        group = []
                        for method in chosen:
                            solver, options, limit = table[method]
                            label = method
                            if args.warm_cache:
                                warmup = run_method(cfg, seed, name, hw, objective, solver, options, 2 * limit,
                                                    args.warm_cache,
                                                    (seed + args.warm_seed_offset, args.warm_solvers.split(",")))
                                if warmup["status"] != "warm":
                                    print(f"{name} K={k} {objective} {method}: warm-up {warmup}", flush=True)
                                label = f"{method}_warm"
                            rec = run_method(cfg, seed, name, hw, objective, solver, options, limit, args.warm_cache)
                            rec.update(graph=name, size=size, family=family, stages=k, objective_name=objective,
                                       method=label)
                            group.append(rec)
                            print(f"{name} K={k} {objective} {method}: {rec['status']} "
                                  f"{rec.get('objective', float('nan')):.6g} {rec.get('time_s', 0):.1f}s "
                                  f"{rec.get('peak_rss_gib', float('nan')):.2f}GiB", flush=True)
                        best = min((r["objective"] for r in group if r["status"] == "ok"), default=float("nan"))
                        for r in group:
                            r["best_known"] = best
                        records.extend(group)
                        write(args, records)  # after every group: a run stopped early keeps what it measured
    print(summary(records))


def write(args: argparse.Namespace, records: list[dict]) -> None:
    """``<out>.md``, ``<out>.json`` (with the machine description) and ``<out>.png`` of the records so far."""
    stem = result_stem(args.out)
    doc = {"experiment": "bench_scale", "args": vars(args), "records": records}
    write_results(stem.parent, stem.name, doc, summary(records))
    plot(records, with_extension(stem, ".png"))


if __name__ == "__main__":
    main()
