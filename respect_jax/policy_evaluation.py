"""A trained policy on a dataset, against the oracle labels and baseline solvers (the library of ``respect-eval``).

The checkpoint may be a GNN policy run folder or a RESPECT-pointer one (told apart by its ``network.json``).
Per graph: the objective of every decoding and baseline, its gap to the reference (the dataset's oracle
objective; for unlabelled graphs the best schedule any method found), whether it is optimal, validity
(re-checked with the shared evaluator) and schedule time. Aggregates per method: mean/median/max gap,
% optimal, % valid, time per graph.

"% optimal" is the project's one definition (:func:`respect_jax.solvers.base.matches_reference`): the share of
graphs whose objective is within ``OPTIMAL_RTOL`` (1e-6 relative) of the reference. With an oracle reference
that is the share that reaches the label; the document states how many labels are proven optima
(``reference_proven_optimal_pct``, per graph ``reference_optimal``; 100% for every shipped label set).

:func:`write_outputs` writes the JSON document, a Markdown table (same name, ``.md``), the per-graph rows as
CSV (``.csv``, one row per graph and method: :data:`CSV_FIELDS`) and a histogram of every method's gaps
(``.png``, :func:`respect_jax.viz.plot_gap_histogram`).
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from respect_jax.solvers.base import matches_reference

#: columns of the CSV: one row per (graph, method), the values of the JSON's ``per_graph`` rows
CSV_FIELDS = ("index", "graph", "num_nodes", "reference", "reference_optimal", "method", "objective", "gap", "valid",
              "time_s")  # fmt: skip


@dataclass(frozen=True)
class EvalConfig:
    """What to evaluate and how.

    Attributes:
        checkpoint: run folder of a GNN policy or of a RESPECT pointer.
        dataset: a labelled dataset folder (manifest.json + shards), a folder of graph JSONs, or one graph JSON.
        limit: at most this many graphs (None: all).
        decodings: decoding strategies, each one row (greedy | sample | best_of | beam | sbs).
        samples: candidates of the multi-candidate strategies (width of beam).
        temperature, local_search, pair_escapes, pair_candidates: the :class:`~respect_jax.policy.decoding.Decoding`
            options of every decoding.
        batch_size: graphs decoded together.
        baselines: solver name -> its options, each run on every graph (one row each; a name that is also a
            decoding row is prefixed ``solver_``).
        objective, lam: None: the labelled dataset's, else the checkpoint's.
        hardware_from: ``dataset`` (a labelled set's manifest) or ``checkpoint`` (the training hardware).
        seed: of the decoding keys (one per batch).
    """

    checkpoint: Path
    dataset: str
    limit: int | None = None
    decodings: tuple[str, ...] = ("greedy", "best_of")
    samples: int = 64
    temperature: float = 1.0
    local_search: int = 0
    pair_escapes: int = 0
    pair_candidates: int = 1
    batch_size: int = 64
    baselines: dict[str, dict] = field(default_factory=dict)
    objective: str | None = None
    lam: float | None = None
    hardware_from: str = "dataset"
    seed: int = 0


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


def resolve_problem(config: EvalConfig, manifest: dict | None, doc: dict):
    """(hardware, objective, lam) from the config, the dataset manifest and the checkpoint document."""
    from respect_jax.costs import OBJECTIVES, hardware_from_dict

    if config.hardware_from not in ("dataset", "checkpoint"):
        raise ValueError(f"hardware_from must be dataset or checkpoint, got {config.hardware_from!r}")
    hw_doc = doc["hardware"]
    if config.hardware_from == "dataset" and manifest and manifest.get("hardware"):
        hw_doc = manifest["hardware"]
    objective = config.objective or (manifest or {}).get("objective") or doc["objective"]
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    lam = config.lam if config.lam is not None else (manifest or {}).get("lam", doc["lam"])
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


def load_any_policy(checkpoint: Path):
    """(model, checkpoint document, decoder factory) of a GNN policy or a RESPECT-pointer run folder."""
    from respect_jax.respect_pointer.checkpoints import checkpoint_kind

    if checkpoint_kind(checkpoint) == "respect_pointer":  # the RESPECT-faithful baseline's run folder
        from respect_jax.respect_pointer.checkpoints import load_pointer
        from respect_jax.respect_pointer.decoding import make_decoder as make_pointer_decoder

        model, doc = load_pointer(checkpoint)
        return model, doc, make_pointer_decoder
    from respect_jax.policy.decoding import make_decoder
    from respect_jax.train.checkpoints import load_policy

    model, doc = load_policy(checkpoint)
    return model, doc, make_decoder


def _decode_rows(config: EvalConfig, model, make, graphs, reference, hw, objective, lam, log) -> tuple[dict, dict]:
    """Every decoding of ``config`` on every graph: ({label: objective[n], valid[n], time[n]}, {label: compile s})."""
    import jax

    from respect_jax.costs import evaluate_assignment
    from respect_jax.graphs.padded import graph_at, to_original_order
    from respect_jax.policy.decoding import MULTI_STRATEGIES, Decoding
    from respect_jax.train.data import make_batches
    from respect_jax.train.evaluation import decode_set

    n = len(graphs)
    results: dict[str, dict] = {}
    compile_s: dict[str, float] = {}
    batches = make_batches(graphs, None, reference)
    for name in config.decodings:
        dec = Decoding(
            strategy=str(name),
            samples=int(config.samples) if name in MULTI_STRATEGIES else 1,
            temperature=float(config.temperature),
            local_search=int(config.local_search),
            pair_escapes=int(config.pair_escapes),
            pair_candidates=int(config.pair_candidates),
        )
        decoder = make(model, hw, objective, lam, dec)
        obj, valid, times = np.full(n, np.nan), np.zeros(n, bool), np.zeros(n)
        compile_s[dec.label] = 0.0
        for bi, (batch, idx) in enumerate(batches):
            key = jax.random.fold_in(jax.random.PRNGKey(int(config.seed)), bi)
            out = decode_set(None, batch, hw, objective, lam, dec, int(config.batch_size), key, decoder)
            compile_s[dec.label] += out.compile_s
            for row, i in enumerate(idx):
                assignment = to_original_order(graph_at(batch.graphs, row), out.stage[row])
                check = evaluate_assignment(graphs[i], assignment, hw, objective, lam)
                obj[i], valid[i] = check["objective"], check["valid"]
                times[i] = out.time_s / len(idx)
        results[dec.label] = {"objective": obj, "valid": valid, "time": times}
        log(f"{dec.label}: decoded {n} graphs")
    return results, compile_s


def _baseline_rows(config: EvalConfig, graphs, hw, objective, lam, results: dict, log) -> None:
    """Run every baseline solver of ``config`` on every graph; add its row to ``results``."""
    from respect_jax.solvers import run_solver

    n = len(graphs)
    for name, options in config.baselines.items():
        if name in ("policy", "respect_pointer"):  # the learned solvers register on import
            import respect_jax.policy.solver  # noqa: F401
            import respect_jax.respect_pointer.solver  # noqa: F401
        obj, valid, times = np.full(n, np.nan), np.zeros(n, bool), np.zeros(n)
        for i, g in enumerate(graphs):
            r = run_solver(str(name), g, hw, objective, lam, **options)
            obj[i], valid[i], times[i] = r["objective"], True, r["solve_time_s"]
        key = str(name) if str(name) not in results else f"solver_{name}"  # the greedy solver vs greedy decoding
        results[key] = {"objective": obj, "valid": valid, "time": times}
        log(f"baseline {key}: solved {n} graphs")


def evaluate(config: EvalConfig, log: Callable[[str], None] | None = None) -> dict:
    """Decode and solve every graph of ``config.dataset``; returns the evaluation document (JSON-serialisable).

    ``log``: called with a line after each decoding and baseline (None: silent).
    """
    from respect_jax.reporting import machine_description
    from respect_jax.train.checkpoints import checkpoint_label

    log = log or (lambda message: None)
    model, doc, make = load_any_policy(Path(config.checkpoint))
    graphs, reference, ref_optimal, manifest = load_eval_graphs(str(config.dataset), config.limit)
    hw, objective, lam = resolve_problem(config, manifest, doc)
    n = len(graphs)
    results, compile_s = _decode_rows(config, model, make, graphs, reference, hw, objective, lam, log)
    _baseline_rows(config, graphs, hw, objective, lam, results, log)
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
        aggregate[method] = _stats(gaps, matches_reference(r["objective"], ref), r["valid"], r["time"])
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
        "dataset": str(config.dataset),
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
