"""``respect-eval``: a trained policy on a dataset, against the oracle labels and baseline solvers.

The checkpoint may be a GNN policy run folder or a RESPECT-pointer one (``policy=respect_pointer``;
told apart by its ``network.json``).

Example::

    respect-eval checkpoint=data/checkpoints/respect_k4_paper dataset=data/labels/respect50_k4_paper \
        decodings=[greedy,best_of] samples=64 baselines=[compiler]

Per graph: the objective of every decoding and baseline, its gap to the reference (the dataset's
oracle objective; for unlabelled graphs the best schedule any method found), whether it is optimal
(within 1e-6 relative of a proven optimum), validity (re-checked with the shared evaluator) and
schedule time. Aggregates per method: mean/median/max gap, % optimal, % valid, time per graph.
Writes JSON, a Markdown table (same name, ``.md``), the per-graph rows as CSV (``.csv``, one row per
graph and method: :data:`CSV_FIELDS`) and a histogram of every method's gaps (``.png``,
:func:`respect_jax.viz.plot_gap_histogram`).
"""

from __future__ import annotations

import csv
import io
import sys
import time
from pathlib import Path

import hydra
import numpy as np
from omegaconf import DictConfig, OmegaConf

from respect_jax.cli.common import (
    CONF_DIR,
    check_group_choices,
    job_file,
    machine_description,
    shipped_path,
    user_errors_exit,
)

PROG = "respect-eval"
OPTIMAL_RTOL = 1e-6
#: columns of the CSV: one row per (graph, method), the values of the JSON's ``per_graph`` rows
CSV_FIELDS = ("index", "graph", "num_nodes", "reference", "reference_optimal", "method", "objective", "gap", "valid",
              "time_s")  # fmt: skip


def load_eval_graphs(path: str, limit: int | None):
    """(graphs, reference objectives or None, reference-proven-optimal flags, manifest or None)."""
    from respect_jax.graphs.graph import load_graph
    from respect_jax.labels.dataset import load_labelled_dataset, read_manifest

    p = Path(path)
    if (p / "manifest.json").is_file():
        manifest = read_manifest(p)
        items = load_labelled_dataset(p, limit=limit)
        if not items:
            raise ValueError(f"{p}: the labelled dataset has no records")
        return [it.graph for it in items], [it.objective for it in items], [it.optimal for it in items], manifest
    if p.is_dir():
        files = sorted(p.glob("*.json"))
        if not files:
            raise FileNotFoundError(f"{p}: no graph JSON files")
        files = files[:limit] if limit else files
        graphs = [load_graph(f) for f in files]
    elif p.is_file():
        graphs = [load_graph(p)]
    else:
        raise FileNotFoundError(f"dataset {p} does not exist")
    return graphs, None, None, None


def resolve_problem(cfg: DictConfig, manifest: dict | None, doc: dict):
    """(hardware, objective, lam) from the config, the dataset manifest and the checkpoint."""
    from respect_jax.costs import OBJECTIVES, hardware_from_dict

    if cfg.hardware_from not in ("dataset", "checkpoint"):
        raise ValueError(f"hardware_from must be dataset or checkpoint, got {cfg.hardware_from!r}")
    hw_doc = doc["hardware"]
    if cfg.hardware_from == "dataset" and manifest and manifest.get("hardware"):
        hw_doc = manifest["hardware"]
    objective = cfg.objective or (manifest or {}).get("objective") or doc["objective"]
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    lam = cfg.lam if cfg.lam is not None else (manifest or {}).get("lam", doc["lam"])
    if manifest and (
        manifest.get("objective") not in (None, objective) or float(manifest.get("lam", lam)) != float(lam)
    ):
        raise ValueError("objective/lam differ from the labelled dataset's: its oracle objectives would not apply")
    return hardware_from_dict(hw_doc), objective, float(lam)


def _stats(gaps: np.ndarray, optimal: np.ndarray, valid: np.ndarray, times: np.ndarray) -> dict:
    finite = np.isfinite(gaps)
    g = gaps[finite]
    return {
        "graphs": int(gaps.size),
        "gap_mean_pct": float(100 * g.mean()) if g.size else None,
        "gap_median_pct": float(100 * np.median(g)) if g.size else None,
        "gap_max_pct": float(100 * g.max()) if g.size else None,
        "optimal_pct": float(100 * np.mean(optimal[finite])) if g.size else None,
        "valid_pct": float(100 * np.mean(valid)),
        "time_per_graph_ms": float(1000 * np.mean(times)),
    }


def evaluate(cfg: DictConfig) -> dict:
    """Run the evaluation; returns the JSON document."""
    import jax

    from respect_jax.costs import evaluate_assignment
    from respect_jax.graphs.padded import graph_at, to_original_order
    from respect_jax.policy.decoding import MULTI_STRATEGIES, Decoding, make_decoder
    from respect_jax.respect_pointer.checkpoints import checkpoint_kind
    from respect_jax.solvers import run_solver
    from respect_jax.train.checkpoints import checkpoint_label, load_policy
    from respect_jax.train.data import make_batches
    from respect_jax.train.evaluation import decode_set

    checkpoint = shipped_path(cfg.checkpoint)  # the default works from any working directory
    if checkpoint_kind(checkpoint) == "respect_pointer":  # the RESPECT-faithful baseline's run folder
        from respect_jax.respect_pointer.checkpoints import load_pointer
        from respect_jax.respect_pointer.decoding import make_decoder as make_pointer_decoder

        model, doc = load_pointer(checkpoint)
        make = make_pointer_decoder
    else:
        model, doc = load_policy(checkpoint)
        make = make_decoder
    graphs, reference, ref_optimal, manifest = load_eval_graphs(str(cfg.dataset), cfg.limit)
    hw, objective, lam = resolve_problem(cfg, manifest, doc)
    n = len(graphs)
    log = (lambda m: print(m, file=sys.stderr)) if cfg.progress else (lambda m: None)
    results: dict[str, dict] = {}  # method -> objective[n], valid[n], time[n]
    compile_s: dict[str, float] = {}
    batches = make_batches(graphs, None, reference)
    for name in cfg.decodings:
        dec = Decoding(
            strategy=str(name),
            samples=int(cfg.samples) if name in MULTI_STRATEGIES else 1,
            temperature=float(cfg.temperature),
            local_search=int(cfg.local_search),
            pair_escapes=int(cfg.pair_escapes),
            pair_candidates=int(cfg.pair_candidates),
        )
        decoder = make(model, hw, objective, lam, dec)
        obj, valid, times = np.full(n, np.nan), np.zeros(n, bool), np.zeros(n)
        compile_s[dec.label] = 0.0
        for bi, (batch, idx) in enumerate(batches):
            key = jax.random.fold_in(jax.random.PRNGKey(int(cfg.seed)), bi)
            out = decode_set(None, batch, hw, objective, lam, dec, int(cfg.batch_size), key, decoder)
            compile_s[dec.label] += out.compile_s
            for row, i in enumerate(idx):
                assignment = to_original_order(graph_at(batch.graphs, row), out.stage[row])
                check = evaluate_assignment(graphs[i], assignment, hw, objective, lam)
                obj[i], valid[i] = check["objective"], check["valid"]
                times[i] = out.time_s / len(idx)
        results[dec.label] = {"objective": obj, "valid": valid, "time": times}
        log(f"{PROG}: {dec.label}: decoded {n} graphs")
    for name in cfg.baselines:
        options = _solver_options(str(name))
        if name in ("policy", "respect_pointer"):  # the learned solvers register on import
            import respect_jax.policy.solver  # noqa: F401
            import respect_jax.respect_pointer.solver  # noqa: F401
        obj, valid, times = np.full(n, np.nan), np.zeros(n, bool), np.zeros(n)
        for i, g in enumerate(graphs):
            r = run_solver(str(name), g, hw, objective, lam, **options)
            obj[i], valid[i], times[i] = r["objective"], True, r["solve_time_s"]
        key = str(name) if str(name) not in results else f"solver_{name}"  # the greedy solver vs greedy decoding
        results[key] = {"objective": obj, "valid": valid, "time": times}
        log(f"{PROG}: baseline {key}: solved {n} graphs")
    if reference is not None:
        ref = np.asarray(reference, float)
        ref_kind = "oracle"
        proven = np.asarray([bool(o) for o in ref_optimal])
    else:
        ref = np.min(np.stack([r["objective"] for r in results.values()]), axis=0)
        ref_kind = "best_of_methods"
        proven = np.zeros(n, bool)
    aggregate, per_graph = {}, []
    for method, r in results.items():
        gaps = r["objective"] / ref - 1.0
        optimal = (
            (r["objective"] <= ref * (1 + OPTIMAL_RTOL)) & proven if ref_kind == "oracle" else gaps <= OPTIMAL_RTOL
        )
        aggregate[method] = _stats(gaps, optimal, r["valid"], r["time"])
        if method in compile_s:
            aggregate[method]["compile_s"] = compile_s[method]
    for i, g in enumerate(graphs):
        row = {
            "index": i,
            "graph": g.name,
            "num_nodes": g.num_nodes,
            "reference": float(ref[i]),
            "reference_optimal": bool(proven[i]),
        }
        for method, r in results.items():
            row[method] = {
                "objective": float(r["objective"][i]),
                "gap": float(r["objective"][i] / ref[i] - 1.0),
                "valid": bool(r["valid"][i]),
                "time_s": float(r["time"][i]),
            }
        per_graph.append(row)
    return {
        "checkpoint": doc["run_dir"],
        "checkpoint_step": doc.get("step"),
        "checkpoint_label": checkpoint_label(doc),
        "trained_on": {"objective": doc["objective"], "lam": doc["lam"], "hardware": doc["hardware"]},
        "dataset": str(cfg.dataset),
        "graphs": n,
        "objective_name": objective,
        "lam": lam,
        "hardware": hw.to_dict(),
        "reference": ref_kind,
        "reference_proven_optimal_pct": float(100 * proven.mean()),
        "aggregate": aggregate,
        "per_graph": per_graph,
        "machine": machine_description(),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _solver_options(name: str) -> dict:
    path = Path(CONF_DIR) / "solver" / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"unknown baseline solver {name!r} (no conf/solver/{name}.yaml)")
    node = OmegaConf.load(path)
    return OmegaConf.to_container(node.options, resolve=True) if node.get("options") else {}


def _label(doc: dict) -> str:
    """The checkpoint's step, or what it averages (documents written before the label existed: the step)."""
    return doc.get("checkpoint_label") or f"step {doc['checkpoint_step']}"


def markdown(doc: dict) -> str:
    """The aggregate table of an evaluation document."""
    lines = [
        f"# Policy evaluation: {doc['dataset']}",
        "",
        f"checkpoint `{doc['checkpoint']}` ({_label(doc)}), objective `{doc['objective_name']}`, "
        f"K = {doc['hardware']['stages']}, {doc['graphs']} graphs, reference: {doc['reference']} "
        f"({doc['reference_proven_optimal_pct']:.0f}% proven optimal). Measured on {doc['machine']['processor']} "
        f"({doc['machine']['cpu_count']} CPUs, JAX {doc['machine']['jax_backend']}), {doc['created']}.",
        "",
        "| method | mean gap % | median gap % | max gap % | optimal % | valid % | time/graph ms | compile s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def f(x, fmt="{:.2f}"):
        return "-" if x is None else fmt.format(x)

    for method, a in doc["aggregate"].items():
        lines.append(
            f"| {method} | {f(a['gap_mean_pct'])} | {f(a['gap_median_pct'])} | {f(a['gap_max_pct'])} | "
            f"{f(a['optimal_pct'], '{:.1f}')} | {f(a['valid_pct'], '{:.1f}')} | "
            f"{f(a['time_per_graph_ms'], '{:.3f}')} | {f(a.get('compile_s'), '{:.1f}')} |"
        )
    lines.append("")
    lines.append(
        "Policy time per graph is batched wall time / graphs (after compilation); baselines run one graph at a time."
    )
    return "\n".join(lines) + "\n"


def csv_rows(doc: dict) -> list[dict]:
    """The per-graph results of an evaluation document as CSV rows (:data:`CSV_FIELDS`): one per graph
    and method, graphs in order, methods in the order of ``doc['aggregate']``."""
    rows = []
    for g in doc["per_graph"]:
        for method in doc["aggregate"]:
            r = g[method]
            rows.append({
                "index": g["index"], "graph": g["graph"], "num_nodes": g["num_nodes"], "reference": g["reference"],
                "reference_optimal": g["reference_optimal"], "method": method, "objective": r["objective"],
                "gap": r["gap"], "valid": r["valid"], "time_s": r["time_s"],
            })  # fmt: skip
    return rows


def csv_text(doc: dict) -> str:
    """:func:`csv_rows` as CSV text with a header line (floats as Python's repr: exact round trip)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(doc))
    return buf.getvalue()


def write_outputs(doc: dict, out: Path) -> list[Path]:
    """``out`` (JSON), and beside it ``.md`` (table), ``.csv`` (per-graph rows) and ``.png`` (gap
    histogram), each written atomically; returns the paths."""
    from respect_jax.graphs.graph import write_json_atomic, write_text_atomic
    from respect_jax.viz import plot_gap_histogram, save_png

    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(doc, out)
    write_text_atomic(markdown(doc), out.with_suffix(".md"))
    write_text_atomic(csv_text(doc), out.with_suffix(".csv"))
    save_png(plot_gap_histogram(doc), out.with_suffix(".png"))
    return [out, out.with_suffix(".md"), out.with_suffix(".csv"), out.with_suffix(".png")]


@hydra.main(config_path=CONF_DIR, config_name="eval", version_base="1.3")
@user_errors_exit(PROG)
def _main(cfg: DictConfig) -> None:
    doc = evaluate(cfg)
    out = job_file(cfg, "out", f"runs/eval/eval_{Path(doc['checkpoint']).name}_{Path(str(cfg.dataset)).stem}.json")
    paths = write_outputs(doc, out)
    print(markdown(doc))
    print(f"{PROG}: wrote {', '.join(map(str, paths))}", file=sys.stderr)


def main() -> None:
    check_group_choices("respect-eval", (), config="eval")
    _main()


if __name__ == "__main__":
    main()
