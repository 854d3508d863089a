"""The learned order policy against the exact contiguous split, per (graph, K, objective).

For every graph of ``--graphs``, K of ``--stages`` and both objectives it runs, through the shared pipeline
(``run_solver``: every objective is the shared evaluator's), ``solver=contiguous`` and ``solver=order_policy``
greedily and with ``--samples`` sampled orders. The reference of a case is the best objective known: the least of
these runs and of the records given with ``--best-known`` (``auto_models.py`` / ``respect-label`` results, matched by
graph, K and objective) and, for labelled sets (``--labels``), the proven optimum. Reports the mean and max gap to
that reference, the share of cases where the policy is at the reference, the mean difference to contiguous, and the
median scheduling time (compilation reported apart). Writes ``<out>.md``, ``<out>.json`` (per case, with the
machine description) and ``<out>.png`` (gap per case).

    .venv/bin/python experiments/order_policy_models.py --graphs 'data/models/*.json' --stages 2-8 --samples 32 \
        --best-known experiments/results/auto_real_models.json --out experiments/results/order_policy_test
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

import respect_jax.policy.order_solver  # noqa: E402,F401  (registers solver=order_policy)
from respect_jax.cli.common import machine_description, user_errors_exit  # noqa: E402
from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.experiments.report import markdown_table  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.labels import load_labelled_dataset, read_manifest  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402

OBJECTIVES = ("paper", "latency")


def stage_range(text: str) -> list[int]:
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",")]


def known_values(paths: list[str]) -> dict:
    """(graph, K, objective) -> least recorded objective."""
    best: dict = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        for rec in doc.get("records", []):
            key = (rec["graph"], int(rec["stages"]), rec["objective_name"])
            best[key] = min(best.get(key, np.inf), float(rec["objective"]))
    return best


def cases_from_args(args) -> list[tuple]:
    """(graph, hw, objective, proven optimum or None) for every case."""
    base = yaml.safe_load((ROOT / "conf" / "hardware" / f"{args.hardware}.yaml").read_text())
    cases = []
    if args.graphs:
        paths = sorted(glob.glob(args.graphs))
        if not paths:
            raise ValueError(f"--graphs {args.graphs!r} matches no file")
        for path in paths:
            graph = load_graph(path)
            for objective in args.objectives:
                for k in stage_range(args.stages):
                    cases.append((graph, hardware_from_dict({**base, "stages": k}), objective, None))
    for directory in args.labels or []:
        manifest = read_manifest(directory)
        hw = hardware_from_dict(manifest["hardware"])
        for item in load_labelled_dataset(directory)[: args.label_limit]:
            graph = item.graph
            cases.append((graph, hw, manifest["objective"], item.objective if item.optimal else None))
    return cases


def run(cases: list[tuple], samples: int, checkpoint: str | None, known: dict) -> list[dict]:
    records = []
    options = {"checkpoint": checkpoint} if checkpoint else {}
    for i, (graph, hw, objective, optimum) in enumerate(cases):
        contiguous = run_solver("contiguous", graph, hw, objective, 1.0)
        greedy = run_solver("order_policy", graph, hw, objective, 1.0, samples=0, **options)
        sampled = run_solver("order_policy", graph, hw, objective, 1.0, samples=samples, **options)
        values = {"contiguous": contiguous["objective"], "greedy": greedy["objective"], "sampled": sampled["objective"]}
        key = (graph.name, hw.stages, objective)
        reference = min([*values.values(), known.get(key, np.inf), optimum if optimum is not None else np.inf])
        records.append({
            "graph": graph.name, "num_nodes": graph.num_nodes, "stages": hw.stages, "objective_name": objective,
            **values, "reference": reference, "proven": optimum is not None,
            "recorded_best": known.get(key), "time_contiguous_s": contiguous["solve_time_s"],
            "time_greedy_s": greedy["solve_time_s"], "time_sampled_s": sampled["solve_time_s"],
            "compile_s": greedy["info"].get("compile_s", 0.0),
        })
        if (i + 1) % 20 == 0:
            print(f"  {i + 1}/{len(cases)} cases", file=sys.stderr, flush=True)
    return records


def gap(value: float, reference: float) -> float:
    return 100.0 * (value / reference - 1.0)


def summary(records: list[dict], samples: int) -> str:
    rows = []
    for objective in sorted({r["objective_name"] for r in records}):
        rs = [r for r in records if r["objective_name"] == objective]
        for method, label in (("contiguous", "solver=contiguous"), ("greedy", "order_policy greedy"),
                              ("sampled", f"order_policy samples={samples}")):
            gaps = np.array([gap(r[method], r["reference"]) for r in rs])
            vs_contig = np.array([gap(r[method], r["contiguous"]) for r in rs])
            times = np.array([r[f"time_{method}_s"] for r in rs])
            rows.append([objective, label, len(rs), f"{gaps.mean():.3f}", f"{gaps.max():.3f}",
                         f"{100.0 * np.mean(gaps <= 1e-6):.1f}", f"{vs_contig.mean():+.3f}",
                         f"{1e3 * np.median(times):.1f}", f"{1e3 * times.max():.1f}"])
    head = ["objective", "method", "cases", "mean gap %", "max gap %", "at reference %", "mean vs contiguous %",
            "median time ms", "max time ms"]
    compile_s = [r["compile_s"] for r in records if r["compile_s"]]
    note = (f"Gap: to the best known objective of the case (the least of these methods, the recorded runs given and, "
            f"for labelled sets, the proven optimum). Times: scheduling only; first-call compilation of the policy's "
            f"forward pass, per bucket shape, {min(compile_s, default=0):.2f}-{max(compile_s, default=0):.2f} s, "
            f"reported apart.")
    return note + "\n\n" + markdown_table(head, rows)


def plot(records: list[dict], png: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    FigureCanvasAgg(fig)
    for ax, objective in zip(fig.subplots(1, 2), OBJECTIVES, strict=True):
        rs = [r for r in records if r["objective_name"] == objective]
        if not rs:
            continue
        x = np.arange(len(rs))
        for method, marker in (("contiguous", "s"), ("greedy", "o"), ("sampled", "x")):
            ax.scatter(x, [gap(r[method], r["reference"]) for r in rs], s=10, marker=marker, label=method)
        ax.set_title(objective)
        ax.set_xlabel("case (graph, K)")
        ax.set_ylabel("gap to best known %")
        ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)


@user_errors_exit("order_policy_models")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default=None, help="glob of graph JSON files")
    parser.add_argument("--labels", nargs="*", default=None, help="labelled set folders (their own K, hardware)")
    parser.add_argument("--label-limit", type=int, default=100)
    parser.add_argument("--stages", default="2-8")
    parser.add_argument("--objectives", nargs="+", default=list(OBJECTIVES))
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--hardware", default="coral_usb")
    parser.add_argument("--best-known", nargs="*", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    cases = cases_from_args(args)
    records = run(cases, args.samples, args.checkpoint, known_values(args.best_known))
    text = summary(records, args.samples)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "python experiments/order_policy_models.py " + " ".join(sys.argv[1:])
    out.with_suffix(".md").write_text(f"# Order policy vs contiguous\n\n`{command}`\n\n{text}\n")
    out.with_suffix(".json").write_text(json.dumps({"command": command, "machine": machine_description(),
                                                    "records": records}, indent=1))
    plot(records, out.with_suffix(".png"))
    print(text)


if __name__ == "__main__":
    main()
