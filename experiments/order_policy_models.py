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

``--polish MOVES:SCREEN:ESCAPES ...`` (for choosing the local search on validation) adds one column per setting: the
sampled column's schedule after :func:`respect_jax.local_search.polish` with the single-node moves (``MOVES`` moves,
``ESCAPES`` escapes through the ``SCREEN`` best screened closure moves), re-scored by the shared evaluator; its time
is the sampled column's plus the polish's (second call: compilation apart).
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import time  # noqa: E402

import numpy as np  # noqa: E402
import yaml  # noqa: E402

import respect_jax.policy.order_solver  # noqa: E402,F401  (registers solver=order_policy)
import respect_jax.policy.solver  # noqa: E402,F401  (registers solver=policy)
import respect_jax.respect_pointer.solver  # noqa: E402,F401  (registers solver=respect_pointer)
from respect_jax.cli.common import machine_description, user_errors_exit  # noqa: E402
from respect_jax.costs import evaluate_assignment, hardware_from_dict  # noqa: E402
from respect_jax.experiments.report import markdown_table  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.labels import load_labelled_dataset, read_manifest  # noqa: E402
from respect_jax.local_search import polish  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402

OBJECTIVES = ("paper", "latency")


def stage_range(text: str) -> list[int]:
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",")]


def known_values(paths: list[str]) -> dict:
    """(graph, K, objective) -> least recorded objective (records of ``auto_models.py`` / ``respect-label``, or
    of a Table 1 run, whose objective is the document's)."""
    best: dict = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        for rec in doc.get("records", []):
            key = (rec["graph"], int(rec["stages"]), rec.get("objective_name", doc.get("objective")))
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


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def polish_settings(texts: list[str]) -> list[tuple[str, dict]]:
    """(column name, polish options) of each ``MOVES:SCREEN:ESCAPES`` text."""
    out = []
    for text in texts:
        moves, screen, escapes = (int(x) for x in text.split(":"))
        out.append((f"ls{moves}_c{screen}_e{escapes}", {"moves": moves, "kind": "single", "screen": screen,
                                                       "escapes": escapes}))
    return out


def polished(graph, hw, objective: str, assignment, options: dict) -> tuple[float, float]:
    """(objective, seconds) of ``assignment`` after :func:`polish` (timed on a second call: compilation apart)."""
    polish(graph, hw, objective, 1.0, np.asarray(assignment), **options)
    start = time.perf_counter()
    out = polish(graph, hw, objective, 1.0, np.asarray(assignment), **options)
    seconds = time.perf_counter() - start
    metrics = evaluate_assignment(graph, out, hw, objective, 1.0)
    assert metrics["valid"], "polish returned an invalid schedule"
    return float(metrics["objective"]), seconds


def run(cases: list[tuple], samples: int | None, checkpoint: str | None, known: dict, pointer: bool | dict = False,
        noise: float | None = None, polishes: list[tuple[str, dict]] = ()) -> list[dict]:
    """Per case: contiguous, the order policy greedily and sampled (``samples`` None: ``solver=policy``'s default
    decoding, whatever it is), and with ``pointer`` the RESPECT-faithful pointer (its default options; a dict:
    its recorded (objective, seconds) per (graph, K, objective), from an earlier run of this script)."""
    records = []
    options = {"checkpoint": checkpoint} if checkpoint else {}
    for i, (graph, hw, objective, optimum) in enumerate(cases):
        contiguous = run_solver("contiguous", graph, hw, objective, 1.0)
        greedy = run_solver("order_policy", graph, hw, objective, 1.0, samples=0, **options)
        if samples is None:
            sampled = run_solver("policy", graph, hw, objective, 1.0, **options)
        else:
            noise_option = {} if noise is None else {"noise": noise}
            sampled = run_solver("order_policy", graph, hw, objective, 1.0, samples=samples, **noise_option, **options)
        values = {"contiguous": contiguous["objective"], "greedy": greedy["objective"], "sampled": sampled["objective"]}
        times = {"time_contiguous_s": contiguous["solve_time_s"], "time_greedy_s": greedy["solve_time_s"],
                 "time_sampled_s": sampled["solve_time_s"]}
        for name, polish_options in polishes:
            values[name], seconds = polished(graph, hw, objective, sampled["assignment"], polish_options)
            times[f"time_{name}_s"] = sampled["solve_time_s"] + seconds
        if pointer is True:
            ptr = run_solver("respect_pointer", graph, hw, objective, 1.0)
            values["pointer"] = ptr["objective"]
            times["time_pointer_s"] = ptr["solve_time_s"]
        elif pointer:  # recorded: (graph, K, objective) -> (objective, seconds)
            values["pointer"], times["time_pointer_s"] = pointer[(graph.name, hw.stages, objective)]
        key = (graph.name, hw.stages, objective)
        reference = min([*values.values(), known.get(key, np.inf), optimum if optimum is not None else np.inf])
        records.append({
            "graph": graph.name, "num_nodes": graph.num_nodes, "stages": hw.stages, "objective_name": objective,
            **values, "reference": reference, "proven": optimum is not None,
            "recorded_best": known.get(key), **times, "sampled_decoding": sampled["info"].get("decoding"),
            "compile_s": greedy["info"].get("compile_s", 0.0), "load1": load_average(),
        })
        if (i + 1) % 20 == 0:
            print(f"  {i + 1}/{len(cases)} cases", file=sys.stderr, flush=True)
    return records


def gap(value: float, reference: float) -> float:
    return 100.0 * (value / reference - 1.0)


def method_labels(records: list[dict], samples: int | None) -> list[tuple[str, str]]:
    sampled = (f"solver=policy default ({records[0]['sampled_decoding']})" if samples is None
               else f"order_policy samples={samples}")
    labels = [("contiguous", "solver=contiguous"), ("greedy", "order_policy greedy"), ("sampled", sampled)]
    labels += [(key, f"{sampled} + {key}") for key in records[0] if key.startswith("ls") and not key.startswith("load")]
    return labels + ([("pointer", "respect_pointer (RESPECT-faithful)")] if "pointer" in records[0] else [])


def summary(records: list[dict], samples: int | None) -> str:
    rows = []
    for objective in sorted({r["objective_name"] for r in records}):
        rs = [r for r in records if r["objective_name"] == objective]
        for method, label in method_labels(records, samples):
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
    loads = [r["load1"] for r in records if "load1" in r]
    if loads:
        note += (f" Load average (1 min) during the run {min(loads):.1f}-{max(loads):.1f}, median "
                 f"{np.median(loads):.1f} (2-core CPU shared with other agents: times are pessimistic).")
    return note + "\n\n" + markdown_table(head, rows)


def pointer_table(records: list[dict]) -> str:
    """Per (graph, K): the policy's default decoding against the RESPECT-faithful pointer, both objectives."""
    if "pointer" not in records[0]:
        return ""
    rows, worse = [], []
    for r in sorted(records, key=lambda r: (r["objective_name"], r["graph"], r["stages"])):
        diff = gap(r["sampled"], r["pointer"])
        if diff > 1e-6:
            worse.append(f"{r['graph']} K={r['stages']} {r['objective_name']}")
        rows.append([r["objective_name"], r["graph"], r["num_nodes"], r["stages"],
                     f"{gap(r['sampled'], r['reference']):.3f}", f"{gap(r['pointer'], r['reference']):.3f}",
                     f"{diff:+.3f}", f"{1e3 * r['time_sampled_s']:.0f}", f"{1e3 * r['time_pointer_s']:.0f}"])
    head = ["objective", "graph", "N", "K", "policy default gap %", "pointer gap %", "policy vs pointer %",
            "policy ms", "pointer ms"]
    lead = (f"## Policy (default decoding) vs the RESPECT-faithful pointer per (model, K)\n\nThe policy is worse than "
            f"the pointer on {len(worse)} of {len(records)} (model, K, objective) cases"
            + (f": {', '.join(worse)}." if worse else ".") + "\n\n")
    return lead + markdown_table(head, rows)


def milp_proof_times(paths: list[str]) -> dict:
    """(graph, K, objective) -> recorded MILP solve time (s) and whether it proved the optimum."""
    out = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        for rec in doc.get("records", []):
            if rec.get("method") == "milp":
                out[(rec["graph"], int(rec["stages"]), doc["objective"])] = (float(rec["solve_time_s"]),
                                                                           bool(rec.get("optimal")))
    return out


def speed_table(records: list[dict], milp: dict, min_nodes: int = 300, factor: float = 20.0) -> str:
    """The policy's default decoding time against the MILP's recorded time to its proven optimum (>= 300 nodes)."""
    rows, met, total = [], 0, 0
    for r in sorted(records, key=lambda r: (r["objective_name"], r["graph"], r["stages"])):
        key = (r["graph"], r["stages"], r["objective_name"])
        if r["num_nodes"] < min_nodes or key not in milp:
            continue
        milp_s, proven = milp[key]
        ratio = milp_s / r["time_sampled_s"]
        total += 1
        met += proven and ratio >= factor
        rows.append([r["objective_name"], r["graph"], r["num_nodes"], r["stages"],
                     f"{milp_s:.2f}" + ("" if proven else " (not proven)"), f"{1e3 * r['time_sampled_s']:.0f}",
                     f"{ratio:.1f}", f"{gap(r['sampled'], r['reference']):.3f}"])
    if not rows:
        return ""
    head = ["objective", "graph", "N", "K", "MILP time to proof s (recorded)", "policy default ms", "MILP / policy",
            "policy gap %"]
    lead = (f"## Speed against the MILP on models with >= {min_nodes} nodes\n\nMILP times: the recorded Table 1 runs "
            f"(K = 4..6, its own run on the same kind of shared machine; not re-run here). The policy is >= "
            f"{factor:.0f}x faster than the MILP's proof on {met} of {total} (model, K, objective) cases with a "
            f"recorded MILP run.\n\n")
    return lead + markdown_table(head, rows)


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
        methods = (("contiguous", "s"), ("greedy", "o"), ("sampled", "x")) + ((("pointer", "."),) if "pointer" in rs[0]
                                                                            else ())
        for method, marker in methods:
            ax.scatter(x, [gap(r[method], r["reference"]) for r in rs], s=10, marker=marker, label=method)
        ax.set_title(objective)
        ax.set_xlabel("case (graph, K)")
        ax.set_ylabel("gap to best known %")
        ax.set_yscale("symlog", linthresh=1.0)
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
    parser.add_argument("--samples", type=int, default=None,
                        help="order_policy samples of the sampled column (default: solver=policy's default decoding)")
    parser.add_argument("--noise", type=float, default=None,
                        help="order_policy noise of the sampled column (with --samples)")
    parser.add_argument("--polish", nargs="*", default=[],
                        help="MOVES:SCREEN:ESCAPES polish settings after the sampled column (validation)")
    parser.add_argument("--pointer", action="store_true", help="also the RESPECT-faithful pointer (respect_pointer)")
    parser.add_argument("--pointer-from", default=None,
                        help="this script's JSON of an earlier run with --pointer: its pointer records, not re-run")
    parser.add_argument("--milp-records", nargs="*", default=[],
                        help="Table 1 JSON files whose milp records give the MILP's time to its proven optimum")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--hardware", default="coral_usb")
    parser.add_argument("--best-known", nargs="*", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    cases = cases_from_args(args)
    pointer = args.pointer
    if args.pointer_from:
        pointer = {(r["graph"], r["stages"], r["objective_name"]): (r["pointer"], r["time_pointer_s"])
                   for r in json.loads(Path(args.pointer_from).read_text())["records"]}
    records = run(cases, args.samples, args.checkpoint, known_values(args.best_known), pointer, args.noise,
                  polish_settings(args.polish))
    text = summary(records, args.samples)
    text += "\n\n" + pointer_table(records) + "\n\n" + speed_table(records, milp_proof_times(args.milp_records))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "python experiments/order_policy_models.py " + " ".join(sys.argv[1:])
    out.with_suffix(".md").write_text(f"# Order policy vs contiguous\n\n`{command}`\n\n{text}\n")
    machine = machine_description(load_average=True)
    doc = {"command": command, "machine": machine, "records": records}
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    plot(records, out.with_suffix(".png"))
    print(text)


if __name__ == "__main__":
    main()
