"""``solver=auto`` on real models: how often a time budget buys a proven optimum, and the certified gap.

For every graph, K and objective it runs ``solver=auto`` (default members and exact solver, the given budget)
through the shared pipeline and records the objective, whether it is proven optimal, the certified gap
``(objective - bound) / objective``, the wall time and which member found the winner. Writes ``<out>.md``,
``<out>.json`` (per run, with the machine description) and ``<out>.png`` (certified gap per run).

    .venv/bin/python experiments/auto_models.py --graphs 'data/models/*.json' --stages 2-8 --budget 10 \
        --out experiments/results/auto_real_models --best-known experiments/results/real_models/real_models.json \
        experiments/results/real_models_latency/real_models.json experiments/results/real_models_si/real_models.json
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

import yaml  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import respect_jax.policy.solver  # noqa: E402,F401  (registers the learned solver: a member of auto)
from respect_jax.cli.common import user_errors_exit  # noqa: E402
from respect_jax.compile_cache import enable_compilation_cache, resolve_cache_dir  # noqa: E402
from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.experiments.report import markdown_table, mean, result_stem, with_extension, write_results  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402
from respect_jax.solvers.auto import join_abandoned  # noqa: E402
from respect_jax.viz import new_figure, save_png  # noqa: E402


def stage_range(text: str) -> list[int]:
    """``"2-8"`` -> [2, ..., 8]; ``"4,6"`` -> [4, 6]."""
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",")]


def run(graph_paths: list[str], stages: list[int], objectives: list[str], budget: float, hardware: str) -> list[dict]:
    base = yaml.safe_load((ROOT / "conf" / "hardware" / f"{hardware}.yaml").read_text())
    options = yaml.safe_load((ROOT / "conf" / "solver" / "auto.yaml").read_text())["options"]
    options.update(time_budget_s=budget, progress=False)
    records = []
    for path in graph_paths:
        graph = load_graph(path)
        for objective in objectives:
            for k in stages:
                hw = hardware_from_dict({**base, "stages": k})
                drain = join_abandoned()  # the last run's uninterruptible JAX members must not slow this one
                start = time.perf_counter()
                result = run_solver("auto", graph, hw, objective, 1.0, **options)
                wall = time.perf_counter() - start
                info = result["info"]
                records.append({
                    "graph": graph.name, "num_nodes": graph.num_nodes, "stages": k, "objective_name": objective,
                    "objective": result["objective"], "optimal": result["optimal"], "certified_gap": result["gap"],
                    "lower_bound": info["lower_bound"], "winner": info["winner"], "wall_s": wall,
                    "auto_s": info["elapsed_s"], "running_after_return": info.get("running_after_return"),
                    "drain_s": drain,
                    "portfolio": info["portfolio"],
                })
                print(f"{graph.name:>22} K={k} {objective:<7} {result['objective']:.6g} optimal={result['optimal']} "
                      f"gap={100 * result['gap']:.3f}% winner={info['winner']} {wall:.1f}s", flush=True)
    return records


def best_known(paths: list[str]) -> dict:
    """(graph, K, objective) -> the lowest objective any method of the given Table 1 records reached."""
    best: dict = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        lam_ok = doc["objective"] == "latency" or float(doc.get("lam", 1.0)) == 1.0
        hw_ok = {k: v for k, v in doc["hardware"].items() if k != "stages"}
        for r in doc["records"] if lam_ok else []:
            key = (r["graph"], int(r["stages"]), doc["objective"], json.dumps(hw_ok, sort_keys=True))
            best[key] = min(best.get(key, float("inf")), float(r["objective"]))
    return best


def summary(records: list[dict], budget: float) -> str:
    rows = []
    for objective in sorted({r["objective_name"] for r in records}):
        sel = [r for r in records if r["objective_name"] == objective]
        winners = {}
        for r in sel:
            winners[r["winner"]] = winners.get(r["winner"], 0) + 1
        rows.append([
            objective, len(sel), 100 * mean([float(r["optimal"]) for r in sel]),
            100 * max(r["certified_gap"] for r in sel), 100 * mean([r["certified_gap"] for r in sel]),
            max(r["wall_s"] for r in sel), max((r.get("auto_s", float("nan")) for r in sel), default=float("nan")),
            sum(bool(r.get("running_after_return")) for r in sel),
            ", ".join(f"{k} {v}" for k, v in sorted(winners.items())),
            100 * mean([r.get("vs_best_known") for r in sel if r.get("vs_best_known") is not None]),
            100 * max([r["vs_best_known"] for r in sel if r.get("vs_best_known") is not None], default=float("nan")),
        ])
    head = ["objective", "runs", "% proven optimal", "max certified gap %", "mean certified gap %", "max wall s",
            "max auto s", "runs leaving a thread", "winner (runs)", "mean vs recorded best %", "max vs recorded best %"]
    detail = markdown_table(
        ["graph", "N", "K", "objective", "value", "optimal", "certified gap %", "vs recorded best %", "winner",
         "wall s", "auto s", "running after return"],
        [[r["graph"], r["num_nodes"], r["stages"], r["objective_name"], r["objective"], r["optimal"],
          100 * r["certified_gap"], None if r.get("vs_best_known") is None else 100 * r["vs_best_known"], r["winner"],
          r["wall_s"], r.get("auto_s"), ", ".join(r.get("running_after_return") or []) or "-"] for r in records],
    )
    note = ("'vs recorded best': (auto - best) / best, against the best objective any method reached in the given "
            "Table 1 records (K = 4..6 there; negative: auto is better); 'wall s': run_solver's call (auto plus the "
            "shared JAX evaluator's re-scoring, compiled once per padded size); 'auto s': auto's own elapsed time; "
            "'running after return': worker threads still alive when auto returned (uninterruptible JAX members; "
            "each run first waits for the last run's to end)")
    return f"`solver=auto`, time budget {budget:g} s; {note}\n\n" + markdown_table(head, rows) + "\n\n" + detail + "\n"


def compare(sources: list[str]) -> str:
    """A markdown table of earlier runs side by side, per (objective, K): proven share, mean certified gap, runs with
    a gap <= 1 %, mean / max auto and wall seconds, runs leaving a thread. ``sources``: ``LABEL=PATH`` or
    ``LABEL=PATH:OBJECTIVE`` (only that objective's records of PATH); labels keep their first-seen order."""
    groups: dict[str, list[dict]] = {}
    for source in sources:
        label, _, rest = source.partition("=")
        path, _, objective = rest.partition(":")
        if not label or not path:
            raise ValueError(f"--compare takes LABEL=PATH[:OBJECTIVE], got {source!r}")
        records = json.loads(Path(path).read_text())["records"]
        groups.setdefault(label, []).extend(r for r in records if not objective or r["objective_name"] == objective)
    rows = []
    keys = sorted({(r["objective_name"], r["stages"]) for recs in groups.values() for r in recs})
    for objective, k in keys:
        for label, recs in groups.items():
            sel = [r for r in recs if r["objective_name"] == objective and r["stages"] == k]
            if not sel:
                continue
            rows.append([
                objective, k, label, len(sel), 100 * mean([float(r["optimal"]) for r in sel]),
                100 * mean([r["certified_gap"] for r in sel]), sum(r["certified_gap"] <= 0.01 for r in sel),
                mean([r.get("auto_s", float("nan")) for r in sel]), max(r.get("auto_s", float("nan")) for r in sel),
                max(r["wall_s"] for r in sel),
                sum(bool(r.get("running_after_return")) for r in sel) if any("running_after_return" in r for r in sel)
                else None,
            ])
    head = ["objective", "K", "run", "runs", "% proven", "mean certified gap %", "runs gap <= 1 %", "mean auto s",
            "max auto s", "max wall s", "runs leaving a thread"]
    return markdown_table(head, rows) + "\n"


def plot(records: list[dict], png: Path) -> Figure:
    fig = new_figure(9, 4)
    ax = fig.subplots()
    for objective, marker in (("paper", "o"), ("latency", "s")):
        sel = [r for r in records if r["objective_name"] == objective]
        ax.scatter([r["num_nodes"] for r in sel], [100 * r["certified_gap"] for r in sel], marker=marker,
                   label=objective, alpha=0.7)
    ax.set_xlabel("nodes")
    ax.set_ylabel("certified gap (%)")
    ax.set_title("solver=auto: certified gap per (model, K)")
    ax.legend()
    save_png(fig, png)
    return fig


@user_errors_exit("auto_models")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", default="data/models/*.json", help="glob of SPEC JSON graphs")
    parser.add_argument("--stages", default="2-8", help="K values: '2-8' or '4,6'")
    parser.add_argument("--objectives", default="paper,latency")
    parser.add_argument("--budget", type=float, default=10.0, help="time_budget_s of every run")
    parser.add_argument("--hardware", default="coral_usb", help="a conf/hardware preset")
    parser.add_argument("--best-known", nargs="*", default=[], help="Table 1 records (real_models.json) to compare")
    parser.add_argument("--rescore", default=None, help="rewrite the tables of this earlier output JSON (no runs)")
    parser.add_argument("--compare", nargs="*", default=None,
                        help="LABEL=PATH[:OBJECTIVE] earlier outputs: write <out>.md comparing them (no runs)")
    parser.add_argument("--out", required=True, help="output stem (writes .md, .json, .png)")
    args = parser.parse_args()
    if args.compare:
        text = compare(args.compare)
        with_extension(result_stem(args.out), ".md").write_text(text)
        print(text)
        return
    enable_compilation_cache(resolve_cache_dir("auto"))  # as the commands do: compiled once per size bucket
    paths = sorted(glob.glob(args.graphs))
    if not paths:
        raise ValueError(f"no graph matches {args.graphs!r}")
    runs_machine = None
    if args.rescore:
        earlier = json.loads(Path(args.rescore).read_text())
        records, runs_machine = earlier["records"], earlier.get("runs_machine", earlier.get("machine"))
    else:
        records = run(paths, stage_range(args.stages), args.objectives.split(","), args.budget, args.hardware)
    preset = yaml.safe_load((ROOT / "conf" / "hardware" / f"{args.hardware}.yaml").read_text())
    rest = hardware_from_dict(preset).to_dict()
    rest.pop("stages")
    known = best_known(args.best_known)
    for r in records:
        key = (r["graph"], r["stages"], r["objective_name"], json.dumps(rest, sort_keys=True))
        if key in known:
            r["best_known"] = known[key]
            r["vs_best_known"] = (r["objective"] - known[key]) / known[key]
    stem = result_stem(args.out)
    doc = {"experiment": "auto_models", "budget_s": args.budget, "hardware": args.hardware, "graphs": args.graphs,
           "records": records}
    markdown = summary(records, args.budget)
    if runs_machine is not None:  # tables re-made from an earlier run: say where and when it ran
        doc["runs_machine"] = runs_machine
        markdown += (f"\nRuns measured {runs_machine.get('date')} (load average "
                     f"{runs_machine.get('load_average', ['?'])[0]} at their end); tables re-made with --rescore.\n")
    write_results(stem.parent, stem.name, doc, markdown)
    plot(records, with_extension(stem, ".png"))
    print(summary(records, args.budget).split("\n\n")[1])


if __name__ == "__main__":
    main()
