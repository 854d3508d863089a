"""How far is the best contiguous split from the proven optimum? (the search space of the compiler's partitioners)

The Edge TPU compiler (``--num_segments``) and libcoral's profiling partitioner cut the model's topological order
into K contiguous segments. For every graph of a labelled set with proven optima this script

* checks whether the oracle's optimal schedule is contiguous in the SPEC order (its stage never decreases along
  the order) and counts its stage changes along the order (K - 1 at most for a contiguous one);
* finds the best contiguous split by enumerating every split (all ``C(n + K - 1, K - 1)`` cut positions, empty
  stages included: 23,426 for n = 50, K = 4), each scored by the shared evaluator;
* scores the compiler's parameter-count split.

So the gap of the best contiguous split is what any partitioner that cuts the order into segments loses, however
good its search. The enumeration also checks the ``contiguous`` solver (the same optimum by dynamic programming,
:func:`respect_jax.solvers.partitioners.best_contiguous_cuts`) on every graph. Writes ``<out>.md``, ``<out>.json``
(per graph, with the machine description) and ``<out>.png`` (the distribution of the gaps).

With ``--real-models RECORD.json`` (the record of Table 1, ``experiments/results/real_models/real_models.json``) it
instead runs the ``contiguous`` solver on every model and K of that record (too many splits to enumerate) and sets
it beside the record's methods, as gaps to the best objective known for each (model, K): its methods' and this one's.

    .venv/bin/python experiments/contiguous_optimum.py --labels data/labels/respect50_k4_paper \
        --out experiments/results/contiguous_optimum_respect50
    .venv/bin/python experiments/contiguous_optimum.py --real-models experiments/results/real_models/real_models.json \
        --out experiments/results/contiguous_real_models
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from matplotlib.figure import Figure  # noqa: E402

from respect_jax.cli.common import user_errors_exit  # noqa: E402
from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.experiments.report import markdown_table, result_stem, write_results  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.graphs.padded import bucket_shape, pad_graph  # noqa: E402
from respect_jax.labels.dataset import load_labelled_dataset, read_manifest  # noqa: E402
from respect_jax.solvers.partitioners import best_contiguous_cuts, solve_compiler  # noqa: E402
from respect_jax.solvers.scoring import evaluate_positions  # noqa: E402
from respect_jax.viz import new_figure, save_png  # noqa: E402

CHUNK = 4096  # splits scored per evaluator call (one compilation per bucket)


def all_splits(n: int, k: int) -> np.ndarray:
    """i32[S, n]: the stage of every position for each of the ``C(n + k - 1, k - 1)`` contiguous splits of n
    positions into k stages (a stage may be empty)."""
    cuts = np.array(list(itertools.combinations_with_replacement(range(n + 1), k - 1)), dtype=np.int32)  # [S, k-1]
    return (cuts[:, None, :] <= np.arange(n)[None, :, None]).sum(axis=-1).astype(np.int32)


def best_split(padded, n: int, hw, objective: str, lam: float) -> tuple[float, np.ndarray]:
    """The lowest objective over every contiguous split of one padded graph (n real nodes), and its stages by
    position (i32[n])."""
    splits = all_splits(n, hw.stages)
    n_pad = padded.params.shape[-1]
    best, best_stage = np.inf, None
    for start in range(0, len(splits), CHUNK):
        part = splits[start : start + CHUNK]
        rows = np.zeros((CHUNK, n_pad), np.int32)
        rows[: len(part), :n] = part
        values = evaluate_positions(padded, rows, hw, objective, lam)[: len(part)]
        i = int(np.argmin(values))
        if values[i] < best:
            best, best_stage = float(values[i]), part[i]
    return best, best_stage


def analyse(labels: str, limit: int | None) -> dict:
    """Per-graph rows and the aggregate of the module docstring."""
    manifest = read_manifest(labels)
    hw = hardware_from_dict(manifest["hardware"])
    objective, lam = manifest["objective"], float(manifest["lam"])
    items = [it for it in load_labelled_dataset(labels, limit=limit) if it.optimal]
    if not items:
        raise ValueError(f"{labels}: no proven-optimal labels")
    shape = bucket_shape([it.graph for it in items])
    rows = []
    for it in tqdm(items, desc="graphs", file=sys.stderr):
        graph = it.graph
        order = graph.topological_order()
        stage_along_order = np.asarray(it.assignment)[order]
        padded = pad_graph(graph, shape)
        optimum = float(evaluate_positions(padded, _row(stage_along_order, shape[0]), hw, objective, lam)[0])
        if abs(optimum - it.objective) > 1e-6 * optimum:
            raise RuntimeError(f"graph {it.index}: its label scores {optimum}, the set records {it.objective}")
        contiguous, _ = best_split(padded, graph.num_nodes, hw, objective, lam)
        compiler_stage = np.asarray(solve_compiler(graph, hw, objective, lam).assignment)[order]
        compiler = float(evaluate_positions(padded, _row(compiler_stage, shape[0]), hw, objective, lam)[0])
        _, programme = best_contiguous_cuts(graph, hw, objective, lam)
        if abs(programme - contiguous) > 1e-6 * contiguous:
            raise RuntimeError(f"graph {it.index}: contiguous solver {programme}, enumeration {contiguous}")
        if contiguous < optimum * (1 - 1e-6):
            raise RuntimeError(f"graph {it.index}: a contiguous split beats the proven optimum (labels or evaluator)")
        rows.append({
            "index": it.index,
            "nodes": graph.num_nodes,
            "optimum": optimum,
            "label_objective": float(it.objective),
            "optimum_contiguous": bool(np.all(np.diff(stage_along_order) >= 0)),
            "optimum_stage_changes": int(np.sum(stage_along_order[1:] != stage_along_order[:-1])),
            "best_contiguous": contiguous,
            "best_contiguous_gap_pct": 100.0 * (contiguous / optimum - 1.0),
            "compiler": compiler,
            "compiler_gap_pct": 100.0 * (compiler / optimum - 1.0),
        })
    gaps = np.array([r["best_contiguous_gap_pct"] for r in rows])
    comp = np.array([r["compiler_gap_pct"] for r in rows])
    changes = np.array([r["optimum_stage_changes"] for r in rows])
    aggregate = {
        "graphs": len(rows),
        "optimum_contiguous_pct": 100.0 * float(np.mean([r["optimum_contiguous"] for r in rows])),
        "optimum_stage_changes_mean": float(changes.mean()),
        "optimum_stage_changes_median": float(np.median(changes)),
        "best_contiguous_gap_mean_pct": float(gaps.mean()),
        "best_contiguous_gap_median_pct": float(np.median(gaps)),
        "best_contiguous_gap_max_pct": float(gaps.max()),
        "best_contiguous_optimal_pct": 100.0 * float(np.mean(gaps <= 1e-6)),
        "compiler_gap_mean_pct": float(comp.mean()),
    }
    return {"labels": labels, "hardware": hw.to_dict(), "objective": objective, "lam": lam,
            "stages": hw.stages, "aggregate": aggregate, "per_graph": rows}


def real_models(record_path: str) -> dict:
    """The ``contiguous`` solver on every (model, K) of a Table 1 record, beside the record's methods.

    Returns rows ``{graph, nodes, stages, best_known, contiguous, gaps: {method: % to best_known}}``; ``best_known``
    is the lowest objective of the record's methods and the contiguous split. The record's ``compiler`` objective is
    recomputed as a check that the models and the hardware are those of the record.
    """
    from respect_jax.experiments.report import load_json
    from respect_jax.solvers import run_solver

    record = load_json(Path(record_path))
    objective, lam = record["objective"], float(record["lam"])
    base_hw = record["hardware"]
    models_dir = ROOT / "data" / "models"  # the bundled graphs of conf/experiment/real_models.yaml
    by_case: dict[tuple[str, int], dict[str, float]] = {}
    for rec in record["records"]:
        by_case.setdefault((rec["graph"], int(rec["stages"])), {})[rec["method"]] = float(rec["objective"])
    rows = []
    for (name, k), methods in tqdm(by_case.items(), desc="models", file=sys.stderr):
        graph = load_graph(models_dir / f"{name}.json")
        hw = hardware_from_dict({**base_hw, "stages": k})
        compiler = run_solver("compiler", graph, hw, objective, lam)["objective"]
        if "compiler" in methods and abs(compiler - methods["compiler"]) > 1e-5 * methods["compiler"]:
            raise ValueError(f"{name}, K={k}: the compiler split scores {compiler}, the record {methods['compiler']}")
        contiguous = run_solver("contiguous", graph, hw, objective, lam)["objective"]
        values = {**methods, "contiguous": contiguous}
        best = min(values.values())
        rows.append({"graph": name, "nodes": graph.num_nodes, "stages": k, "best_known": best,
                     "contiguous": contiguous, "gaps": {m: 100.0 * (v / best - 1.0) for m, v in values.items()}})
    return {"record": record_path, "objective": objective, "lam": lam, "hardware": base_hw,
            "reference": record.get("reference"), "rows": rows}


def real_models_markdown(doc: dict) -> str:
    """Per K: the mean gap to the best known objective and how often each method reaches it."""
    methods = list(dict.fromkeys(m for r in doc["rows"] for m in r["gaps"]))
    table = []
    for k in sorted({r["stages"] for r in doc["rows"]}):
        rows = [r for r in doc["rows"] if r["stages"] == k]
        for m in methods:
            gaps = np.array([r["gaps"][m] for r in rows if m in r["gaps"]])
            at_best = float(np.mean(gaps <= 1e-6) * 100)
            table.append([k, m, len(gaps), float(gaps.mean()), float(np.median(gaps)), at_best])
    return "\n".join([
        f"# The best contiguous split on the real models of {doc['record']}", "",
        "Generated by `python experiments/contiguous_optimum.py --real-models ...`: the `contiguous` solver (the exact "
        "best contiguous split of the SPEC order) beside the record's methods; gaps are to the lowest objective known "
        f"for each model and K (all methods and this one), `{doc['objective']}` objective.", "",
        markdown_table(["K", "method", "models", "gap to best known: mean %", "median %", "at the best known %"],
                       table, digits=2),
    ])


def _row(stage_by_position: np.ndarray, n_pad: int) -> np.ndarray:
    row = np.zeros((1, n_pad), np.int32)
    row[0, : len(stage_by_position)] = stage_by_position
    return row


def plot(doc: dict, path: Path) -> Figure:
    gaps = [r["best_contiguous_gap_pct"] for r in doc["per_graph"]]
    comp = [r["compiler_gap_pct"] for r in doc["per_graph"]]
    fig = new_figure(6.5, 3.8)
    ax = fig.subplots()
    bins = np.linspace(0, max(max(comp), 1e-3), 40)
    ax.hist(comp, bins=bins, alpha=0.6, label="compiler split (parameter count)")
    ax.hist(gaps, bins=bins, alpha=0.8, label="best contiguous split (exhaustive)")
    ax.set_xlabel("gap to the proven optimum (%)")
    ax.set_ylabel("graphs")
    ax.set_title(f"{doc['aggregate']['graphs']} graphs, K = {doc['stages']}, {doc['objective']} objective")
    ax.legend()
    save_png(fig, path)
    return fig


@user_errors_exit("contiguous_optimum")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", default="data/labels/respect50_k4_paper", help="labelled set with proven optima")
    parser.add_argument("--limit", type=int, default=None, help="first graphs of the set only")
    parser.add_argument("--real-models", default=None, help="a Table 1 record (real_models.json) instead of --labels")
    parser.add_argument("--out", default="experiments/results/contiguous_optimum_respect50")
    args = parser.parse_args()
    stem = result_stem(args.out)
    if args.real_models:
        doc = real_models(args.real_models)
        md = real_models_markdown(doc)
        paths = write_results(stem.parent, stem.name, doc, md)
        print(md)
        print("wrote " + ", ".join(str(p) for p in paths))
        return
    doc = analyse(args.labels, args.limit)
    a = doc["aggregate"]
    table = markdown_table(
        ["graphs", "optimum contiguous %", "stage changes of the optimum along the order (mean / median)",
         "best contiguous split: gap mean %", "median %", "max %", "optimal %", "compiler split: gap mean %"],
        [[a["graphs"], a["optimum_contiguous_pct"],
          f"{a['optimum_stage_changes_mean']:.1f} / {a['optimum_stage_changes_median']:.0f}",
          a["best_contiguous_gap_mean_pct"], a["best_contiguous_gap_median_pct"], a["best_contiguous_gap_max_pct"],
          a["best_contiguous_optimal_pct"], a["compiler_gap_mean_pct"]]],
        digits=2,
    )
    md = "\n".join([
        f"# Contiguous splits of the SPEC order against proven optima ({args.labels})", "",
        "Generated by `python experiments/contiguous_optimum.py` (every contiguous split enumerated and scored by the "
        "shared evaluator; the compiler split is libcoral's parameter-count partitioner).", "",
        f"K = {doc['stages']}, `{doc['objective']}` objective (lam {doc['lam']:g}).", "", table,
    ])
    paths = write_results(stem.parent, stem.name, doc, md)
    plot(doc, stem.with_name(stem.name + ".png"))
    print(md)
    print("wrote " + ", ".join(str(p) for p in paths) + f", {stem.name}.png")


if __name__ == "__main__":
    main()
