"""Tables 1 and 2 of the paper on the bundled keras.applications graphs (``data/models/``).

For every model and every stage count K of ``experiment.stages`` every method of
``experiment.methods`` schedules the graph under the hardware preset; the shared evaluator scores
it. Table 1: objective gap to the reference method (the MILP: its proven optimum, or its best
schedule and proven gap at the time limit), bottleneck stage time, spilled bytes, simulated
throughput and the throughput speedup over the compiler baseline. Table 2: schedule time of each
method and the speedup of the fastest learned method over the MILP and the partitioners. Figures:
per-stage parameter memory bars, and the quality-vs-solve-time Pareto front.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure
from tqdm.auto import tqdm

from respect_jax.experiments.methods import Setting, ensure_registered, methods_from_dict, require_items, run_method
from respect_jax.experiments.report import fmt, geomean, markdown_table, mean, write_results
from respect_jax.viz import new_figure, save_png

MIB = 2.0**20


@dataclass(frozen=True)
class RealModelsConfig:
    """``conf/experiment/real_models.yaml``: the models (graph files ``<models_dir>/<model>.json``), the stage
    counts, the methods (label -> ``{solver, options, warmup}``), the labels of the gaps' ``reference``, of the
    throughput ``baseline`` and of Table 2's ``timed_method``, and the models and K of the memory bars."""

    models: list
    stages: list
    methods: dict
    reference: str
    baseline: str
    timed_method: str
    models_dir: str = "data/models"
    bar_models: tuple = ()
    bar_stages: int = 4


def run(exp: RealModelsConfig, setting: Setting) -> dict:
    """Run every (model, K, method); write ``real_models.{json,md}`` and PNGs; return the doc."""
    from respect_jax.graphs.graph import load_graph

    hw, out_dir = setting.hw, setting.out_dir
    require_items(exp, lists=("models", "stages"))
    methods = methods_from_dict(exp.methods)
    ensure_registered(methods)
    labels = [m.label for m in methods]
    for key in ("reference", "baseline", "timed_method"):
        if getattr(exp, key) not in labels:
            raise ValueError(f"experiment.{key}={getattr(exp, key)!r} is not one of the methods ({', '.join(labels)})")
    models_dir = Path(exp.models_dir)
    graphs = []
    for name in exp.models:
        path = models_dir / f"{name}.json"
        if not path.is_file():
            raise ValueError(f"model {name!r}: no graph file {path}")
        graphs.append(load_graph(path))
    records = []
    jobs = [(g, k, m) for g in graphs for k in exp.stages for m in methods]
    for graph, k, method in tqdm(jobs, desc="real models", disable=not setting.progress):
        rec = run_method(method, graph, hw.replace(stages=int(k)), setting.objective, setting.lam)
        records.append(rec)
    add_relative_figures(records, exp.reference, exp.baseline)
    doc = {
        "experiment": "real_models",
        "objective": setting.objective,
        "lam": setting.lam,
        "hardware": hw.to_dict(),
        "reference": exp.reference,
        "baseline": exp.baseline,
        "timed_method": exp.timed_method,
        "methods": {m.label: {"solver": m.solver, "options": m.options, "warmup": m.warmup} for m in methods},
        "records": records,
    }
    md = render(doc)
    write_results(out_dir, "real_models", doc, md)
    plot_memory_bars(doc, out_dir / "stage_memory.png", list(exp.bar_models), int(exp.bar_stages), hw.sram_bytes)
    plot_pareto(doc, out_dir / "pareto.png")
    return doc


def add_relative_figures(records: list[dict], reference: str, baseline: str) -> None:
    """Add ``gap_pct`` (to the reference's objective), ``best_known_gap_pct`` and ``speedup`` (throughput
    over the baseline's) to every record, per (graph, K)."""
    groups: dict[tuple, list[dict]] = {}
    for rec in records:
        groups.setdefault((rec["graph"], rec["stages"]), []).append(rec)
    for group in groups.values():
        by = {r["method"]: r for r in group}
        ref, base = by[reference]["objective"], by[baseline]
        best = min(r["objective"] for r in group)
        for r in group:
            r["gap_pct"] = 100.0 * (r["objective"] / ref - 1.0)
            r["best_known_gap_pct"] = 100.0 * (r["objective"] / best - 1.0)
            r["speedup"] = r["throughput_per_s"] / base["throughput_per_s"]
            r["reference_optimal"] = by[reference]["optimal"]
            r["reference_gap"] = by[reference]["gap"]


def summary_rows(records: list[dict], labels: list[str], stages: list[int]) -> list[list]:
    """Per (K, method): mean/max gap %, # graphs at the best known, geomean speedup, median time."""
    rows = []
    for k in stages:
        recs = [r for r in records if r["stages"] == k]
        n = len({r["graph"] for r in recs})
        for label in labels:
            mine = [r for r in recs if r["method"] == label]
            if not mine:
                continue
            times = sorted(r["solve_time_s"] for r in mine)
            rows.append([
                k, label, n,
                mean([r["gap_pct"] for r in mine]),
                max(r["gap_pct"] for r in mine),
                sum(r["best_known_gap_pct"] <= 1e-4 for r in mine),
                geomean([r["speedup"] for r in mine]),
                times[len(times) // 2],
            ])
    return rows


def render(doc: dict) -> str:
    records, ref, base = doc["records"], doc["reference"], doc["baseline"]
    labels = list(doc["methods"])
    stages = sorted({r["stages"] for r in records})
    graphs = list(dict.fromkeys(r["graph"] for r in records))
    ref_recs = [r for r in records if r["method"] == ref]
    proven = sum(bool(r["optimal"]) for r in ref_recs)
    out = [
        "# Table 1: real models (keras.applications graphs)",
        "",
        f"Objective `{doc['objective']}` (lam = {doc['lam']}), hardware: "
        f"{fmt(doc['hardware']['sram_bytes'] / MIB, 1)} MiB SRAM per stage, K = {', '.join(map(str, stages))}. "
        f"Gap: objective relative to `{ref}` "
        f"(proven optimal on {proven} of {len(ref_recs)} (model, K) pairs; elsewhere its best schedule at the time "
        f"limit). Speedup: simulated throughput (1 / bottleneck stage time) over `{base}`. Time: schedule time "
        "after compilation (JAX methods) per graph, one graph at a time.",
        "",
        "## Summary per K and method",
        "",
        markdown_table(
            ["K", "method", "models", "mean gap %", "max gap %", "# at best known", "geomean speedup", "median time s"],
            summary_rows(records, labels, stages),
        ),
        "",
        "## Per model",
        "",
    ]
    rows = []
    for g in graphs:
        for k in stages:
            for label in labels:
                r = next((r for r in records if r["graph"] == g and r["stages"] == k and r["method"] == label), None)
                if r is None:
                    continue
                rows.append([
                    g, r["num_nodes"], k, label, r["objective"], r["gap_pct"], 1e3 * r["bottleneck_s"],
                    r["spill_bytes"] / MIB, r["throughput_per_s"], r["speedup"], r["solve_time_s"],
                    "proven" if r["optimal"] else (fmt(r["gap"]) if r["gap"] is not None else "-"),
                ])
    out.append(markdown_table(
        ["model", "nodes", "K", "method", "objective", "gap %", "bottleneck ms", "spill MiB", "throughput /s",
         "speedup", "time s", "optimality"],
        rows,
    ))
    out += ["", table2(doc)]
    return "\n".join(out)


def table2(doc: dict) -> str:
    """Schedule time per model (first K) and the learned methods' speedup over the others."""
    records, ref = doc["records"], doc["reference"]
    labels = list(doc["methods"])
    k0 = min(r["stages"] for r in records)
    fast = doc.get("timed_method")
    fast = fast if fast in labels else None
    graphs = list(dict.fromkeys(r["graph"] for r in records))
    header = ["model", "nodes"] + [f"{m} s" for m in labels]
    if fast:
        header += [f"{fast} vs {m}" for m in labels if m != fast]
    rows = []
    for g in graphs:
        by = {r["method"]: r for r in records if r["graph"] == g and r["stages"] == k0}
        row = [g, by[labels[0]]["num_nodes"]] + [by[m]["solve_time_s"] for m in labels]
        if fast:
            for m in labels:
                if m == fast:
                    continue
                ratio = by[m]["solve_time_s"] / max(by[fast]["solve_time_s"], 1e-9)
                quality = "better" if by[fast]["objective"] < by[m]["objective"] * (1 - 1e-6) else (
                    "same" if by[fast]["objective"] <= by[m]["objective"] * (1 + 1e-6) else "worse")
                row.append(f"{ratio:,.1f}x ({quality})")
        rows.append(row)
    text = [
        f"# Table 2: schedule time (K = {k0})",
        "",
        f"Seconds per graph (after compilation for JAX methods). `{fast} vs X`: X's time / {fast}'s time, and "
        f"whether {fast}'s schedule is better, the same or worse than X's. `{ref}` runs to proven optimality or its "
        "time limit (see Table 1's optimality column).",
        "",
        markdown_table(header, rows, digits=4),
    ]
    return "\n".join(text)


def plot_memory_bars(doc: dict, path: Path, models: list[str], k: int, sram_bytes: float) -> Figure | None:
    """Per-stage parameter memory of a few models under each method, against the SRAM line."""
    import numpy as np

    records = [r for r in doc["records"] if r["stages"] == k]
    models = [m for m in models if any(r["graph"] == m for r in records)]
    if not models:
        print(f"no {path.name}: experiment.bar_models / bar_stages name no model and K that ran", file=sys.stderr)
        return
    labels = list(doc["methods"])
    fig = new_figure(4.2 * len(models), 3.6)
    axes = fig.subplots(1, len(models), squeeze=False)
    width = 0.8 / len(labels)
    for ax, model in zip(axes[0], models, strict=True):
        for i, label in enumerate(labels):
            r = next((r for r in records if r["graph"] == model and r["method"] == label), None)
            if r is None:
                continue
            ax.bar(np.arange(k) + i * width, np.asarray(r["mem_k"]) / MIB, width, label=label)
        ax.axhline(sram_bytes / MIB, color="k", ls="--", lw=1)
        ax.set_title(f"{model} (K={k})")
        ax.set_xticks(np.arange(k) + 0.4 - width / 2, [f"stage {s}" for s in range(k)])
        ax.set_ylabel("parameters MiB")
    axes[0][0].legend(fontsize=7)
    save_png(fig, path)
    return fig


def plot_pareto(doc: dict, path: Path) -> Figure:
    """Mean gap to the reference vs median schedule time, one point per method (log time)."""
    fig = new_figure(5.5, 4)
    ax = fig.subplots()
    for label in doc["methods"]:
        mine = [r for r in doc["records"] if r["method"] == label]
        times = sorted(r["solve_time_s"] for r in mine)
        ax.scatter(max(times[len(times) // 2], 1e-5), mean([r["gap_pct"] for r in mine]), s=40)
        ax.annotate(label, (max(times[len(times) // 2], 1e-5), mean([r["gap_pct"] for r in mine])), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("median schedule time per graph (s)")
    ax.set_ylabel(f"mean gap to {doc['reference']} (%)")
    ax.set_title("quality vs schedule time, real models")
    save_png(fig, path)
    return fig
