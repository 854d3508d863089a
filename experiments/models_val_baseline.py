"""Baseline schedules of the validation architectures (data/models_val/, issue 26 deliverable 4).

For every graph of ``--graphs``, both objectives and one stage count ``K`` (Coral USB preset), runs

* ``cpsat`` (or ``milp``): the exact oracle with ``time_limit_s`` (its other options the defaults of
  ``conf/solver/<oracle>.yaml``, so its warm start/hint is the best of the compiler split, respect_label and
  the contiguous split); its result is the proven optimum where ``optimal`` is true, else an incumbent;
* ``contiguous``: the exact best contiguous split of the SPEC order (dynamic programme);
* ``policy``: the learned policy with the defaults of ``conf/solver/policy.yaml`` (greedy decoding, default
  checkpoint, whatever objective it was trained for);
* ``policy_matched``: the same greedy policy with a checkpoint trained for the row's objective, where the default
  checkpoint was not (``--matched-checkpoint OBJECTIVE=RUN_DIR``; default: latency=respect_k4_latency_si);

and reports each method's gap to the best objective known for that (model, objective): the lowest of the methods run.
This is what ``respect-schedule graph=<g> solver=<s> hardware.stages=K objective=<o>`` returns for each (same
configs; called in-process so the policy compiles once per size bucket). Timings are wall-clock on a shared
machine: indicative only. Rows are appended to ``<out>.json`` as they finish, and a rerun skips the rows already
there and runs only the methods a row lacks (resumable); ``<out>.md`` is rewritten at the end.

``--merge A.json B.json ... --out STEM`` runs nothing: it combines result files of this script (e.g. a CP-SAT run
on every model and a longer MILP run on the models CP-SAT left unproven) into one table of the best objective
known per (model, objective), whether an oracle proved it optimal, and every method's gap to it.

    .venv/bin/python experiments/models_val_baseline.py --oracle cpsat --time-limit 30 \
        --out experiments/results/models_val_baseline
    .venv/bin/python experiments/models_val_baseline.py --oracle milp --time-limit 60 --matched-checkpoint latency= \
        --only efficientnetb4 efficientnetv2s efficientnetb5 efficientnetb6 efficientnetv2m efficientnetb7 \
        efficientnetv2l nasnetlarge --out experiments/results/models_val_baseline_milp_large
    .venv/bin/python experiments/models_val_baseline.py --merge experiments/results/models_val_baseline.json \
        experiments/results/models_val_baseline_milp_large.json --out experiments/results/models_val_baseline_best_known
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.experiments.report import machine_header, markdown_table, mean, result_stem  # noqa: E402
from respect_jax.graphs.graph import load_graph, write_json_atomic  # noqa: E402

METHODS = ("oracle", "contiguous", "policy", "policy_matched")
LABELS = {"policy": "policy default", "policy_matched": "policy matched ckpt"}
DEFAULT_MATCHED = {"latency": "data/checkpoints/respect_k4_latency_si"}
OBJECTIVES = ("paper", "latency")


def solver_defaults(name: str) -> dict:
    """The ``options`` of ``conf/solver/<name>.yaml`` (what ``respect-schedule solver=<name>`` uses)."""
    return dict(yaml.safe_load((ROOT / "conf" / "solver" / f"{name}.yaml").read_text()).get("options") or {})


def run_one(
    method: str, oracle: str, graph, hw, objective: str, time_limit_s: float, checkpoint: str | None = None
) -> dict:
    """One RESULT document (assignment dropped) of ``method`` on ``graph``; ``checkpoint`` for policy_matched."""
    from respect_jax.solvers import run_solver

    if method == "oracle":
        name, options = oracle, {**solver_defaults(oracle), "time_limit_s": time_limit_s}
    elif method in ("policy", "policy_matched"):
        import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)

        name, options = "policy", solver_defaults("policy")
        if method == "policy_matched":
            options["checkpoint"] = str(ROOT / checkpoint)
    else:
        name, options = method, solver_defaults(method)
    start = time.perf_counter()
    result = run_solver(name, graph, hw, objective, 1.0, **options)
    wall = time.perf_counter() - start
    info = result.get("info") or {}
    return {
        "solver": name,
        "objective": float(result["objective"]),
        "optimal": bool(result["optimal"]),
        "gap": None if result["gap"] is None else float(result["gap"]),
        "solve_time_s": float(result["solve_time_s"]),
        "wall_s": wall,
        "trained_on": info.get("trained_on"),
        "checkpoint": checkpoint,
        "bottleneck_s": float(result["metrics"]["bottleneck_s"]),
    }


def git_state() -> str:
    """``<commit>`` plus ``(working tree modified)`` when tracked files differ from it."""

    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + (" (working tree modified)" if dirty else "")


def summarise(rows: list[dict], oracle: str) -> str:
    """Markdown: one table per objective (objective values, gaps to the best known, times) and the means."""
    parts = []
    for objective in OBJECTIVES:
        sel = [r for r in rows if r["objective_name"] == objective]
        if not sel:
            continue
        present = [m for m in METHODS if any(r["methods"].get(m) for r in sel)]
        table = []
        for r in sel:
            best = r["best_known"]
            cells = [r["graph"], r["num_nodes"]]
            for m in present:
                res = r["methods"].get(m)
                if res is None:
                    cells += ["skipped", "-", "-"]
                    continue
                cells += [f"{res['objective']:.6g}", f"{100 * (res['objective'] / best - 1):.2f}", res["solve_time_s"]]
            o = r["methods"].get("oracle")
            status = "-" if o is None else ("optimal" if o["optimal"] else f"time limit, gap {100 * o['gap']:.0f}%")
            cells.append(status)
            table.append(cells)
        header = ["model", "nodes"]
        for m in present:
            label = oracle if m == "oracle" else LABELS.get(m, m)
            header += [label, f"{label} gap %", f"{label} s"]
        header.append(f"{oracle} status")
        lines = [f"### objective = {objective}", "", markdown_table(header, table, digits=2), ""]
        for m in present:
            gaps = [100 * (r["methods"][m]["objective"] / r["best_known"] - 1) for r in sel if r["methods"].get(m)]
            if not gaps:
                continue
            best_count = sum(g <= 1e-6 for g in gaps)
            label = oracle if m == "oracle" else LABELS.get(m, m)
            lines.append(
                f"- {label}: mean gap {mean(gaps):.2f} %, max {max(gaps):.2f} %, best known on {best_count}/{len(gaps)}"
            )
        for m in ("policy", "policy_matched"):
            trained = {r["methods"][m]["trained_on"]["objective"] for r in sel if r["methods"].get(m)}
            ckpts = {r["methods"][m].get("checkpoint") or "default" for r in sel if r["methods"].get(m)}
            if trained:
                lines.append(
                    f"- {LABELS[m]}: checkpoint {', '.join(sorted(ckpts))}, trained for objective "
                    f"{', '.join(sorted(trained))}"
                )
        proven = sum(1 for r in sel if r["methods"].get("oracle") and r["methods"]["oracle"]["optimal"])
        lines.append(f"- {oracle} proved the optimum on {proven}/{len(sel)} models")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def merge(paths: list[Path]) -> tuple[dict, str]:
    """The best-known document and Markdown of several result files (rows matched by model and objective)."""
    docs = [json.loads(Path(p).read_text()) for p in paths]
    merged: dict[tuple[str, str], dict] = {}
    for doc in docs:
        oracle = doc["oracle"]
        for r in doc["rows"]:
            entry = merged.setdefault(
                (r["graph"], r["objective_name"]),
                {"graph": r["graph"], "num_nodes": r["num_nodes"], "objective_name": r["objective_name"], "runs": {}},
            )
            for m, res in r["methods"].items():
                label = f"{oracle} {doc['time_limit_s']:g} s" if m == "oracle" else m
                entry["runs"].setdefault(label, res)
    rows = sorted(merged.values(), key=lambda e: (e["objective_name"] != "paper", e["num_nodes"], e["graph"]))
    for e in rows:
        best = min(res["objective"] for res in e["runs"].values())
        e["best_known"] = best
        at_best = {label for label, res in e["runs"].items() if res["objective"] <= best * (1 + 1e-9)}
        e["found_by"] = sorted(at_best)
        e["proven_by"] = sorted(label for label in at_best if e["runs"][label]["optimal"])
        bounds = [res["objective"] * (1 - res["gap"]) for res in e["runs"].values() if res.get("gap") is not None]
        e["proven_gap"] = 0.0 if e["proven_by"] else (max(0.0, 1 - max(bounds) / best) if bounds else None)
    methods = ("contiguous", "policy", "policy_matched")
    lines = [
        "# Validation architectures: best schedule known per model and objective, K = 4 (Coral USB preset)",
        "",
        "Merged from "
        + ", ".join(f"`{Path(p).name}`" for p in paths)
        + " (their Markdown files give the commands). Best known = the lowest objective of every run; `proven` "
        "when an oracle proved it optimal, else the gap to the best bound an oracle proved. Gaps of the other "
        "methods are to the best known.",
    ]
    for objective in OBJECTIVES:
        sel = [e for e in rows if e["objective_name"] == objective]
        table = []
        for e in sel:
            status = (
                f"proven ({', '.join(e['proven_by'])})" if e["proven_by"] else f"gap <= {100 * e['proven_gap']:.1f} %"
            )
            cells = [e["graph"], e["num_nodes"], f"{e['best_known']:.6g}", status, ", ".join(e["found_by"])]
            for m in methods:
                res = e["runs"].get(m)
                cells.append("-" if res is None else f"{100 * (res['objective'] / e['best_known'] - 1):.2f}")
            table.append(cells)
        header = ["model", "nodes", "best known", "status", "found by"]
        header += [f"{LABELS.get(m, m)} gap %" for m in methods]
        lines += ["", f"## objective = {objective}", "", markdown_table(header, table), ""]
        lines.append(f"- proven optimal: {sum(1 for e in sel if e['proven_by'])}/{len(sel)}")
        for m in methods:
            gaps = [100 * (e["runs"][m]["objective"] / e["best_known"] - 1) for e in sel if e["runs"].get(m)]
            if gaps:
                lines.append(f"- {LABELS.get(m, m)}: mean gap {mean(gaps):.2f} %, max {max(gaps):.2f} %")
    return {"sources": [str(p) for p in paths], "rows": rows}, "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=Path, default=ROOT / "data" / "models_val")
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--oracle", choices=("cpsat", "milp"), default="cpsat")
    parser.add_argument("--time-limit", type=float, default=30.0, help="oracle time limit (s)")
    parser.add_argument("--oracle-max-nodes", type=int, default=None, help="skip the oracle above this many nodes")
    parser.add_argument("--hardware", default="coral_usb", help="a preset of conf/hardware/")
    parser.add_argument("--only", nargs="*", default=None, help="graph names to run (default: all)")
    parser.add_argument(
        "--matched-checkpoint",
        nargs="*",
        default=[],
        help=f"OBJECTIVE=RUN_DIR for policy_matched (default: {DEFAULT_MATCHED}; OBJECTIVE= disables)",
    )
    parser.add_argument("--merge", nargs="*", type=Path, default=None, help="result JSON files to combine (no runs)")
    parser.add_argument("--out", default="experiments/results/models_val_baseline")
    args = parser.parse_args()

    stem = result_stem(ROOT / args.out if not Path(args.out).is_absolute() else args.out)
    json_path, md_path = stem.with_name(stem.name + ".json"), stem.with_name(stem.name + ".md")
    if args.merge:
        doc, markdown = merge(args.merge)
        write_json_atomic(doc, json_path)
        md_path.write_text(markdown)
        print(f"-> {md_path}, {json_path}", file=sys.stderr)
        return
    base = yaml.safe_load((ROOT / "conf" / "hardware" / f"{args.hardware}.yaml").read_text())
    hw = hardware_from_dict({**base, "stages": args.stages})
    doc = json.loads(json_path.read_text()) if json_path.exists() else {"rows": []}
    rows = {(r["graph"], r["objective_name"]): r for r in doc["rows"]}
    matched = dict(DEFAULT_MATCHED)
    for item in args.matched_checkpoint:
        objective, _, run_dir = item.partition("=")
        if objective not in OBJECTIVES:
            parser.error(f"--matched-checkpoint {item!r}: expected OBJECTIVE=RUN_DIR, OBJECTIVE one of {OBJECTIVES}")
        matched[objective] = run_dir or None
    paths = sorted(args.graphs.glob("*.json"), key=lambda p: load_graph(p).num_nodes)
    command = ".venv/bin/python " + " ".join(sys.argv)
    doc.setdefault("commands", [])
    if command not in doc["commands"]:
        doc["commands"].append(command)
    for path in paths:
        graph = load_graph(path)
        if args.only and graph.name not in args.only:
            continue
        for objective in OBJECTIVES:
            key = (graph.name, objective)
            if key not in rows:
                rows[key] = {
                    "graph": graph.name,
                    "num_nodes": graph.num_nodes,
                    "objective_name": objective,
                    "stages": args.stages,
                    "methods": {},
                }
                doc["rows"].append(rows[key])
            row = rows[key]
            for m in METHODS:
                if m in row["methods"]:
                    continue
                if m == "oracle" and args.oracle_max_nodes and graph.num_nodes > args.oracle_max_nodes:
                    continue
                if m == "policy_matched" and not matched.get(objective):
                    continue
                res = run_one(m, args.oracle, graph, hw, objective, args.time_limit, matched.get(objective))
                row["methods"][m] = res
                row["best_known"] = min(r["objective"] for r in row["methods"].values())
                print(f"{graph.name} {objective} {m}: {res['objective']:.6g} ({res['wall_s']:.1f} s)", file=sys.stderr)
                doc.update(
                    hardware=args.hardware,
                    stages=args.stages,
                    oracle=args.oracle,
                    time_limit_s=args.time_limit,
                    git=git_state(),
                )
                write_json_atomic(doc, json_path)
    machine, line = machine_header()
    doc["machine"] = machine
    write_json_atomic(doc, json_path)
    md = [
        f"# Validation architectures (data/models_val/): {args.oracle} vs contiguous vs policy, K = {args.stages}",
        "",
        "Commands (in order; a rerun adds only the missing methods): "
        + "; ".join(f"`{c}`" for c in doc["commands"])
        + f" (git {doc.get('git', git_state())}). Hardware preset `{args.hardware}`, "
        f"K = {args.stages}, lam = 1. {args.oracle}: `time_limit_s={args.time_limit:g}`, other options the defaults "
        f"of `conf/solver/{args.oracle}.yaml`; `contiguous` and `policy default` with their defaults (policy: "
        "greedy, default checkpoint, whatever objective it was trained for); `policy matched ckpt`: greedy with a "
        "checkpoint trained for the objective (where the default one was not). Gap = objective / best known - 1, "
        "best known = the lowest of all methods. Times (s) are the RESULT's `solve_time_s`: wall-clock, less the "
        "set-up a solver reports (the policy's checkpoint loading and compilation; the JSON has the full `wall_s` "
        "too), on a 2-core machine shared with other jobs: indicative only.",
        "",
        line,
        "",
        summarise(doc["rows"], args.oracle),
        "",
    ]
    md_path.write_text("\n".join(md))
    print(f"-> {md_path}, {json_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
