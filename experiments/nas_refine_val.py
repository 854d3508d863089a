"""Choosing the stage-boundary re-cuts (:func:`respect_jax.local_search.refine_boundaries`) on validation graphs only.

For every graph of ``--graphs``, K of ``--stages`` and both objectives: ``solver=policy``'s default decoding without
re-cuts (``ls_boundaries=0``: the sampled orders' best split and the polish), then for each variant (``--variants``,
``NAME=ROUNDS:CENTRES:WIDTHS:PRICES``, lists comma-separated) the re-cuts of that schedule and, where they changed it,
the polish again (what the decoding does with ``ls_boundaries > 0``). Gaps are to the least of every column and the
records of ``--best-known`` (``experiments/nas_val.py oracle``). Times: the default's ``solve_time_s``, a variant's
extra seconds (re-cuts + polish). Writes ``<out>.json`` and ``<out>.md``. Never run on the bundled models (test set).

    .venv/bin/python experiments/nas_refine_val.py --graphs 'data/models_val/nas_generated/*.json' \\
        data/models_val/nasnetlarge.json --stages 2-8 --best-known experiments/results/nas_val_best_known.json \\
        --out experiments/results/nas_refine_val
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

import numpy as np  # noqa: E402

import respect_jax.policy.order_solver  # noqa: E402,F401  (registers solver=order_policy)
from respect_jax.api import hardware  # noqa: E402
from respect_jax.cli.common import machine_description  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.local_search import polish, refine_boundaries  # noqa: E402
from respect_jax.policy import solver as policy_solver  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402

sys.path.insert(0, str(ROOT / "experiments"))
from order_policy_models import known_values, stage_range  # noqa: E402  (the test-set script's readers)

DEFAULT = {"samples": policy_solver.ORDER_DEFAULT_SAMPLES, "noise": policy_solver.ORDER_DEFAULT_NOISE,
           "local_search": policy_solver.ORDER_DEFAULT_LOCAL_SEARCH, "ls_moves": policy_solver.ORDER_DEFAULT_LS_MOVES,
           "ls_screen": policy_solver.ORDER_DEFAULT_LS_SCREEN, "ls_escapes": policy_solver.ORDER_DEFAULT_LS_ESCAPES}


def parse_variant(text: str) -> tuple[str, dict]:
    name, spec = text.split("=")
    rounds, centres, widths, prices = spec.split(":")
    floats = lambda x: tuple(float(eval(v)) for v in x.split(",")) if x else ()  # noqa: E731,S307 (fractions)
    return name, {"rounds": int(rounds), "centres": floats(centres), "widths": floats(widths), "prices": floats(prices)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", required=True)
    parser.add_argument("--stages", default="2-8")
    parser.add_argument("--variants", nargs="*", default=["r2=2:0.5:1/16,1/6,1/3:0"])
    parser.add_argument("--best-known", nargs="*", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    paths = list(dict.fromkeys(p for g in args.graphs for p in sorted(glob.glob(g))))  # in the order given
    if any("data/models/" in p for p in paths):
        raise SystemExit("the bundled models are the test set: not for choosing")
    variants = [parse_variant(v) for v in args.variants]
    known = known_values(args.best_known)
    records = []
    for path in paths:
        graph = load_graph(path)
        for k in stage_range(args.stages):
            hw = hardware("coral_usb", stages=k)
            for objective in ("paper", "latency"):
                base = run_solver("order_policy", graph, hw, objective, 1.0, **DEFAULT, ls_boundaries=0)
                start = np.asarray(base["assignment"])
                rec = {"graph": graph.name, "num_nodes": graph.num_nodes, "stages": k, "objective_name": objective,
                       "default": base["objective"], "time_default_s": base["solve_time_s"]}
                for name, options in variants:
                    t0 = time.perf_counter()
                    out = refine_boundaries(graph, hw, objective, 1.0, start, **options)
                    if not np.array_equal(out, start):
                        out = polish(graph, hw, objective, 1.0, out, DEFAULT["local_search"], "single",
                                     DEFAULT["ls_screen"], DEFAULT["ls_escapes"])
                    rec[f"time_{name}_s"] = time.perf_counter() - t0
                    rec[name] = float(run_solver_value(graph, out, hw, objective))
                values = [rec["default"]] + [rec[name] for name, _ in variants]
                rec["reference"] = min(values + [known.get((graph.name, k, objective), np.inf)])
                records.append(rec)
                print(f"{graph.name} K={k} {objective}: default {100 * (rec['default'] / rec['reference'] - 1):.2f} % "
                      + " ".join(f"{n} {100 * (rec[n] / rec['reference'] - 1):.2f} % ({rec[f'time_{n}_s']:.3f} s)"
                                 for n, _ in variants), flush=True)
    out = Path(args.out)
    command = "python experiments/nas_refine_val.py " + " ".join(sys.argv[1:])
    doc = {"command": command, "machine": machine_description(load_average=True), "records": records}
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    text = summary(records, variants)
    out.with_suffix(".md").write_text(f"# Boundary re-cuts on validation\n\n`{command}`\n\n{text}")
    print(summary(records, variants))


def run_solver_value(graph, assignment, hw, objective: str) -> float:
    """The shared evaluator's objective of a valid schedule (float64 NumPy twin; asserted valid)."""
    from respect_jax.costs import evaluate_assignment

    metrics = evaluate_assignment(graph, assignment, hw, objective, 1.0)
    assert metrics["valid"], "invalid schedule"
    return metrics["objective"]


def summary(records: list[dict], variants: list) -> str:
    lines = ["| objective | method | cases | mean gap % | max gap % | cases > 5 % | worse than default | "
             "median extra s | max extra s |", "|---" * 9 + "|"]
    for objective in ("paper", "latency"):
        rs = [r for r in records if r["objective_name"] == objective]
        if not rs:
            continue
        for name in ["default"] + [n for n, _ in variants]:
            gaps = np.array([100 * (r[name] / r["reference"] - 1) for r in rs])
            worse = sum(r[name] > r["default"] * (1 + 1e-6) for r in rs)
            t = np.array([r[f"time_{name}_s"] for r in rs])
            lines.append(f"| {objective} | {name} | {len(rs)} | {gaps.mean():.3f} | {gaps.max():.3f} | "
                         f"{int(np.sum(gaps > 5))} | {worse} | {np.median(t):.3f} | {t.max():.3f} |")
    worst = sorted(records, key=lambda r: -(r["default"] / r["reference"]))[:12]
    lines += ["", "Largest default gaps: " + ", ".join(
        f"{r['graph']} K={r['stages']} {r['objective_name']} {100 * (r['default'] / r['reference'] - 1):.2f} %"
        for r in worst)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
