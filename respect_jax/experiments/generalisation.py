"""Table 3: generalisation from small training graphs to large synthetic graphs.

For every graph family (``respect``: RESPECT's random layered DAGs; ``dnn``: DNN-like backbones)
and every size of ``experiment.sizes``, ``experiment.graphs_per_size`` graphs are drawn with a
fixed seed and scheduled by every method. The reference per graph is the best schedule any method
found (``best known``; exact methods that prove optimality make it the optimum, counted in the
table). Writes ``generalisation.{json,md}`` and ``generalisation.png`` (mean gap vs size).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure
from tqdm.auto import tqdm

from respect_jax.experiments.methods import Setting, ensure_registered, methods_from_dict, require_items, run_method
from respect_jax.experiments.report import markdown_table, mean, write_results
from respect_jax.viz import new_figure, save_png


@dataclass(frozen=True)
class GeneralisationConfig:
    """``conf/experiment/generalisation.yaml``: graph families (generator modes), sizes (nodes), graphs per
    size (drawn with seed ``seed + size``) and the methods (label -> ``{solver, options, warmup}``)."""

    families: list
    sizes: list
    graphs_per_size: int
    seed: int
    methods: dict


def run(exp: GeneralisationConfig, setting: Setting) -> dict:
    """Schedule every generated graph with every method; write ``generalisation.{json,md,png}``; return the doc."""
    from respect_jax.graphs import GeneratorConfig, generate_dataset

    hw = setting.hw
    require_items(exp, lists=("families", "sizes"), counts=("graphs_per_size",))
    methods = methods_from_dict(exp.methods)
    ensure_registered(methods)
    jobs = []
    for family in exp.families:
        for size in exp.sizes:
            gcfg = GeneratorConfig(mode=str(family), min_nodes=int(size), max_nodes=int(size))
            for g in generate_dataset(gcfg, int(exp.graphs_per_size), seed=int(exp.seed) + int(size),
                                      prefix=f"{family}{size}_"):
                jobs.extend((family, int(size), g, m) for m in methods)
    records = []
    for family, size, graph, method in tqdm(jobs, desc="generalisation", disable=not setting.progress):
        rec = run_method(method, graph, hw, setting.objective, setting.lam)
        rec.update(family=family, size=size)
        rec.pop("assignment")
        records.append(rec)
    add_best_known(records)
    doc = {
        "experiment": "generalisation",
        "objective": setting.objective,
        "lam": setting.lam,
        "hardware": hw.to_dict(),
        "methods": [m.label for m in methods],
        "records": records,
    }
    write_results(setting.out_dir, "generalisation", doc, render(doc))
    plot(doc, setting.out_dir / "generalisation.png")
    return doc


def add_best_known(records: list[dict]) -> None:
    """``gap_pct``: objective relative to the best schedule found for the same graph."""
    best: dict[str, float] = {}
    proven: dict[str, bool] = {}
    for r in records:
        best[r["graph"]] = min(best.get(r["graph"], float("inf")), r["objective"])
        proven[r["graph"]] = proven.get(r["graph"], False) or bool(r["optimal"])
    for r in records:
        r["gap_pct"] = 100.0 * (r["objective"] / best[r["graph"]] - 1.0)
        r["reference_proven"] = proven[r["graph"]]


def render(doc: dict) -> str:
    records, labels = doc["records"], doc["methods"]
    rows = []
    for family in dict.fromkeys(r["family"] for r in records):
        for size in sorted({r["size"] for r in records if r["family"] == family}):
            recs = [r for r in records if r["family"] == family and r["size"] == size]
            n = len({r["graph"] for r in recs})
            n_proven = len({r["graph"] for r in recs if r["reference_proven"]})
            for label in labels:
                mine = [r for r in recs if r["method"] == label]
                times = sorted(r["solve_time_s"] for r in mine)
                rows.append([
                    family, size, f"{n} ({n_proven})", label, mean([r["gap_pct"] for r in mine]),
                    max(r["gap_pct"] for r in mine), sum(r["gap_pct"] <= 1e-4 for r in mine), times[len(times) // 2],
                ])
    return "\n".join([
        "# Table 3: generalisation to larger graphs",
        "",
        f"Objective `{doc['objective']}`, K = {doc['hardware']['stages']}. Gap: objective relative to the best "
        "schedule any method found for the graph (`graphs (proven)`: graphs, and how many of them an exact "
        "method proved optimal). Learned methods were trained on <= 50-node graphs only.",
        "",
        markdown_table(["family", "nodes", "graphs (proven)", "method", "mean gap %", "max gap %", "# best",
                        "median time s"], rows),
    ])


def plot(doc: dict, path: Path) -> Figure:
    families = list(dict.fromkeys(r["family"] for r in doc["records"]))
    fig = new_figure(5 * len(families), 3.8)
    axes = fig.subplots(1, len(families), squeeze=False)
    for ax, family in zip(axes[0], families, strict=True):
        recs = [r for r in doc["records"] if r["family"] == family]
        sizes = sorted({r["size"] for r in recs})
        for label in doc["methods"]:
            ax.plot(sizes, [mean([r["gap_pct"] for r in recs if r["size"] == s and r["method"] == label])
                            for s in sizes], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("nodes")
        ax.set_ylabel("mean gap to best known (%)")
        ax.set_title(f"{family} graphs")
    axes[0][0].legend(fontsize=7)
    save_png(fig, path)
    return fig
