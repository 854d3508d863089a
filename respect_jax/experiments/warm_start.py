"""RL-to-ILP warm start: exact solvers' time to optimality with and without the policy's schedule.

For every graph (synthetic sizes of ``experiment.sizes`` and the real models of
``experiment.models``), the start method (the learned policy) schedules it once; then each exact
solver of ``experiment.exact`` runs with each start of ``experiment.starts``:

* ``none``: no start; * ``heuristic``: the solvers' own ``auto`` start (the better of the compiler
  split and RESPECT's label packing); * ``policy``: the start method's schedule.

Per run: wall time, whether optimality was proven, the proven gap and the objective. The table
reports the time ratio none/policy (> 1: the warm start helps; arXiv 2308.11652 reports up to 128x).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from respect_jax.experiments.methods import (
    Method,
    Setting,
    ensure_registered,
    methods_from_dict,
    require_items,
    run_method,
)
from respect_jax.experiments.report import geomean, markdown_table, write_results

STARTS = ("none", "heuristic", "policy")


@dataclass(frozen=True)
class WarmStartConfig:
    """``conf/experiment/warm_start.yaml``: generated graphs (generator ``family``, ``sizes``, ``graphs_per_size``
    drawn with seed ``seed + size``) and the models ``<models_dir>/<model>.json``; the start kinds (of
    :data:`STARTS`), the start method (``{solver, options, warmup}``) and the exact solvers (label ->
    ``{solver, start_option, options}``: the option that takes the start)."""

    family: str
    sizes: list
    graphs_per_size: int
    seed: int
    models: list
    starts: list
    start_method: dict
    exact: dict
    models_dir: str = "data/models"


def run(exp: WarmStartConfig, setting: Setting) -> dict:
    """Every exact solver with every start on every graph; write ``warm_start.{json,md}``; return the doc."""
    from respect_jax.graphs import GeneratorConfig, generate_dataset
    from respect_jax.graphs.graph import load_graph

    hw, objective, lam = setting.hw, setting.objective, setting.lam
    start_method = methods_from_dict({"policy": exp.start_method})[0]
    exact = exp.exact
    for label, spec in exact.items():
        if set(spec) - {"solver", "start_option", "options"} or "start_option" not in spec:
            raise ValueError(f"experiment.exact.{label} needs solver, start_option and options")
    require_items(exp, lists=("starts", "exact"))
    bad = set(exp.starts) - set(STARTS)
    if bad:
        raise ValueError(f"experiment.starts: unknown {sorted(bad)}; choose from {', '.join(STARTS)}")
    ensure_registered([start_method] + [
        Method(lbl, s["solver"], {**dict(s.get("options") or {}), s["start_option"]: None}) for lbl, s in exact.items()
    ])
    graphs = []
    for size in exp.sizes:
        gcfg = GeneratorConfig(mode=str(exp.family), min_nodes=int(size), max_nodes=int(size))
        graphs += generate_dataset(gcfg, int(exp.graphs_per_size), seed=int(exp.seed) + int(size),
                                   prefix=f"{exp.family}{size}_")
    graphs += [load_graph(Path(exp.models_dir) / f"{m}.json") for m in exp.models]
    if not graphs:
        raise ValueError("experiment.sizes x graphs_per_size and experiment.models give no graph: nothing to run")
    records = []
    bar = tqdm(total=len(graphs) * (1 + len(exact) * len(exp.starts)), desc="warm start", disable=not setting.progress)
    for graph in graphs:
        start = run_method(start_method, graph, hw, objective, lam)
        bar.update()
        for label, spec in exact.items():
            for start_kind in exp.starts:
                value = {"none": None, "heuristic": "auto", "policy": start["assignment"]}[start_kind]
                options = {**dict(spec.get("options") or {}), spec["start_option"]: value}
                rec = run_method(Method(label, spec["solver"], options), graph, hw, objective, lam)
                records.append({
                    "graph": graph.name, "num_nodes": graph.num_nodes, "solver": label, "start": start_kind,
                    "time_s": rec["solve_time_s"], "optimal": bool(rec["optimal"]), "gap": rec["gap"],
                    "objective": rec["objective"], "start_objective": start["objective"],
                    "start_time_s": start["solve_time_s"],
                })
                bar.update()
    bar.close()
    doc = {"experiment": "warm_start", "objective": objective, "lam": lam, "hardware": hw.to_dict(),
           "time_limit_note": "runs that hit the time limit count with the limit as their time", "records": records}
    write_results(setting.out_dir, "warm_start", doc, render(doc, list(exp.starts)))
    return doc


def render(doc: dict, starts: list[str]) -> str:
    records = doc["records"]
    rows = []
    for g in dict.fromkeys(r["graph"] for r in records):
        for solver in dict.fromkeys(r["solver"] for r in records):
            by = {r["start"]: r for r in records if r["graph"] == g and r["solver"] == solver}
            row = [g, by[starts[0]]["num_nodes"], solver]
            for s in starts:
                r = by[s]
                row.append(f"{r['time_s']:.2f}" + ("" if r["optimal"] else f" (gap {100 * (r['gap'] or 0):.2f}%)"))
            ratio = by["none"]["time_s"] / max(by["policy"]["time_s"], 1e-9) if {"none", "policy"} <= set(by) else None
            row.append(ratio)
            rows.append(row)
    summary = []
    for solver in dict.fromkeys(r["solver"] for r in records):
        ratios = [row[-1] for row in rows if row[2] == solver and row[-1] is not None]
        for s in starts:
            mine = [r for r in records if r["solver"] == solver and r["start"] == s]
            summary.append([solver, s, sum(r["optimal"] for r in mine), len(mine),
                            sum(r["time_s"] for r in mine), geomean(ratios) if s == "policy" else None,
                            max(ratios) if ratios and s == "policy" else None])
    return "\n".join([
        "# RL-to-ILP warm start",
        "",
        f"Objective `{doc['objective']}`, K = {doc['hardware']['stages']}. Time to proven optimality (s); a run "
        "that hit the time limit shows its remaining gap. `none/policy`: time without a start divided by the time "
        "with the policy's schedule as the start.",
        "",
        markdown_table(["solver", "start", "proven", "runs", "total time s", "geomean none/policy",
                        "max none/policy"], summary, digits=2),
        "",
        markdown_table(["graph", "nodes", "solver"] + [f"{s} s" for s in starts] + ["none/policy"], rows, digits=2),
    ])
