"""The window re-solves of ``solver=policy`` (``respect_jax/solvers/window.py``) replayed on validation graphs.

Per case (``--cases`` JSON lines of ``latency_rebalance_val.py oracle`` with a ``milp`` reference, and / or ``--graphs``
globs at ``--stages``), the default decoding is run once with ``ls_window=0`` (after a warm-up call: compilation
apart); from that schedule :func:`~respect_jax.solvers.window.window_search` alone is re-run with each ``--settings``
entry ``SOLVES:WIDTHS:MAX_NODES:MIN_FREE`` (``WIDTHS`` comma-separated; ``3:2,3:300:0.5`` is the default), so the
settings differ only in the window step and are timed in one process. Gap: to the least of every setting and the
reference. Refuses the bundled models (the test set). Writes ``<out>.json`` and prints a summary table.

    .venv/bin/python experiments/latency_window_replay.py --cases experiments/results/latency_rebalance_oracle.jsonl \\
        --graphs 'data/models_val/nas_generated*/*.json' data/models_val/nasnetlarge.json --stages 2,3,4,5,6,7,8 \\
        --settings 3:2,3:300:0.5 5:2,3,4:450:0.5 --out /tmp/window_replay
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import respect_jax.policy.solver  # noqa: E402,F401  (registers solver=policy)
from respect_jax.api import hardware  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402
from respect_jax.solvers.rebalance import stage_times_np  # noqa: E402
from respect_jax.solvers.window import load_cp_sat, window_search  # noqa: E402


def _setting(spec: str) -> dict:
    solves, widths, cap, free = spec.split(":")
    return {"solves": int(solves), "widths": tuple(int(w) for w in widths.split(",")), "max_nodes": int(cap),
            "min_free": float(free)}


def validation_cases(case_files: list[str], graph_globs: list[str], stages: str) -> list[dict]:
    """The latency cases of ``case_files`` (JSON lines of ``latency_rebalance_val.py oracle``) and every graph of
    ``graph_globs`` at each K of ``stages`` (comma-separated), as ``{"path", "K", "sram", ...}``. Refuses the bundled
    models (the test set)."""
    cases = [json.loads(line) for path in case_files for line in Path(path).read_text().splitlines() if line.strip()]
    cases = [c for c in cases if c.get("objective_name", "latency") == "latency"]
    paths = list(dict.fromkeys(p for g in graph_globs for p in sorted(glob.glob(g))))
    cases += [{"path": p, "K": int(k), "sram": None} for p in paths for k in stages.split(",")]
    if any("data/models/" in c["path"] for c in cases):
        raise SystemExit("the bundled models are the test set: not for choosing")
    return cases


def case_problem(case: dict):
    """(graph, hardware) of a :func:`validation_cases` entry: the Coral USB preset at its K (and its SRAM, if set)."""
    sram = {"sram_bytes": float(case["sram"])} if case.get("sram") else {}
    return load_graph(case["path"]), hardware("coral_usb", stages=case["K"], **sram)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=[])
    parser.add_argument("--graphs", nargs="*", default=[])
    parser.add_argument("--stages", default="4,5,6")
    parser.add_argument("--settings", nargs="+", default=["3:2,3:300:0.5"])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    records = []
    load_cp_sat()  # CP-SAT's import, not timed with the first setting
    for case in validation_cases(args.cases, args.graphs, args.stages):
        graph, hw = case_problem(case)
        run_solver("policy", graph, hw, "latency", 1.0, ls_window=0)  # warm-up (compilation)
        off = run_solver("policy", graph, hw, "latency", 1.0, ls_window=0)
        start = np.asarray(off["assignment"], np.int64)
        rec = {"graph": graph.name, "path": case["path"], "K": case["K"], "sram": case.get("sram"),
               "milp": case.get("milp"), "off": float(stage_times_np(graph, start[None], hw)[0].max()),
               "decoding_s": off["solve_time_s"]}
        for spec in args.settings:
            opts = _setting(spec)
            t = time.perf_counter()
            s, kept = window_search(graph, hw, start, opts.pop("solves"), 0.2, **opts)
            rec[spec], rec[f"{spec} s"] = float(stage_times_np(graph, s[None], hw)[0].max()), time.perf_counter() - t
        rec["reference"] = min([rec[s] for s in args.settings] + ([rec["milp"]] if rec["milp"] else []))
        records.append(rec)
        print(f"{rec['graph']} K={rec['K']}: " + " ".join(
            f"{s} {100 * (rec[s] / rec['reference'] - 1):.2f} % ({rec[f'{s} s']:.2f} s)" for s in args.settings),
            flush=True)
    Path(args.out).with_suffix(".json").write_text(json.dumps({"command": " ".join(sys.argv), "records": records},
                                                              indent=1))
    print("| setting | cases | mean gap % | max gap % | window step median s | max s |\n|---|---|---|---|---|---|")
    for spec in args.settings:
        gaps = [100 * (r[spec] / r["reference"] - 1) for r in records]
        times = [r[f"{spec} s"] for r in records]
        print(f"| {spec} | {len(records)} | {statistics.mean(gaps):.3f} | {max(gaps):.3f} | "
              f"{statistics.median(times):.3f} | {max(times):.3f} |")


if __name__ == "__main__":
    main()
