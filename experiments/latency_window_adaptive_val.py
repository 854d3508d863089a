"""Adaptive escalation of the window re-solves of ``solver=policy`` (``respect_jax/solvers/window.py``) on validation.

Per case (``--cases`` JSON lines of ``latency_rebalance_val.py oracle`` with a ``milp`` reference, and / or ``--graphs``
globs at ``--stages``): the default decoding with ``ls_window=0`` (after a warm-up call; cached as ``<cache>/*.npy``
so a re-run replays only the window step), then from that schedule

* ``default``: :func:`~respect_jax.solvers.window.window_search` with the default knobs (3 re-solves; widths 2, 3;
  300 nodes), with the signals it leaves (re-solves kept / run, windows skipped for the cap, whether it ran out of
  re-solves; the ratio of the result to the analytic lower bound; the graph's free share);
* ``more E``: from the default's result, a second ``window_search`` with ``E`` re-solves (each of ``--more``), widths
  ``--more-widths``, cap ``--more-cap`` (the escalation; never worse than the default by construction);
* ``always``: ``--always`` (``SOLVES:WIDTHS:CAP``) from the ``ls_window=0`` schedule (last session's candidate).

Gap: to the least of every column and the MILP where there is one. Refuses the bundled models (the test set). Writes
``<out>.json``.

    .venv/bin/python experiments/latency_window_adaptive_val.py \\
        --cases experiments/results/latency_rebalance_oracle.jsonl \\
        --graphs 'data/models_val/nas_generated*/*.json' data/models_val/nasnetlarge.json \\
        'data/models_val/residual_generated/*.json' --stages 2,3,4,5,6,7,8 --out /tmp/window_adaptive
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from latency_window_replay import case_problem, validation_cases  # noqa: E402

import respect_jax.policy.solver  # noqa: E402,F401  (registers solver=policy)
import respect_jax.solvers.window as window  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402
from respect_jax.solvers.bounds import latency_lower_bound  # noqa: E402
from respect_jax.solvers.rebalance import stage_times_np  # noqa: E402
from respect_jax.solvers.window import load_cp_sat, window_free_share, window_search  # noqa: E402


def _widths(text: str) -> tuple[int, ...]:
    return tuple(int(w) for w in text.split(","))


def run(args) -> None:
    cases = validation_cases(args.cases, args.graphs, args.stages)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    a_solves, a_widths, a_cap = args.always.split(":")
    records = []
    load_cp_sat()
    for case in cases:
        graph, hw = case_problem(case)
        key = hashlib.sha1(f"{case['path']}|{case['K']}|{case.get('sram')}".encode()).hexdigest()[:16]
        path = cache / f"{key}.npy"
        if path.exists():
            start = np.load(path)
        else:
            run_solver("policy", graph, hw, "latency", 1.0, ls_window=0)  # warm-up (compilation)
            start = np.asarray(run_solver("policy", graph, hw, "latency", 1.0, ls_window=0)["assignment"], np.int64)
            np.save(path, start)
        times = lambda s, graph=graph, hw=hw: stage_times_np(graph, s[None], hw)[0]  # noqa: E731
        lb = latency_lower_bound(graph, hw)
        rec = {"graph": graph.name, "path": case["path"], "K": case["K"], "sram": case.get("sram"),
               "N": graph.num_nodes, "milp": case.get("milp"), "lb": lb, "off": float(times(start).max()),
               "free": window_free_share(graph, np.zeros(graph.num_nodes, np.int64), 0, 0)}
        info: dict = {}
        t = time.perf_counter()
        base, kept = window_search(graph, hw, start, 3, 0.2, info=info)
        rec["default"], rec["default s"] = float(times(base).max()), time.perf_counter() - t
        rec.update(kept=kept, used=info["used"], capped=info["capped"], exhausted=info["exhausted"])
        for extra in args.more:  # the escalation forced on (every case): the rules are applied to it afterwards
            signal, window.escalation_signal = window.escalation_signal, lambda *_, **__: True
            t = time.perf_counter()
            s, _ = window_search(graph, hw, start, 3, 0.2, escalate=extra, escalate_widths=_widths(args.more_widths),
                                 escalate_max_nodes=args.more_cap, info=info)
            rec[f"more {extra}"], rec[f"more {extra} s"] = float(times(s).max()), time.perf_counter() - t
            rec[f"more {extra} escalated"] = info["escalated"]
            window.escalation_signal = signal
        t = time.perf_counter()
        s, _ = window_search(graph, hw, start, 3, 0.2, escalate=args.rule_extra, info=info)
        rec["rule"], rec["rule s"] = float(times(s).max()), time.perf_counter() - t
        rec["rule escalated"] = info["escalated"]
        t = time.perf_counter()
        s, _ = window_search(graph, hw, start, int(a_solves), 0.2, widths=_widths(a_widths), max_nodes=int(a_cap))
        rec["always"], rec["always s"] = float(times(s).max()), time.perf_counter() - t
        cols = ["default", "rule", "always"] + [f"more {e}" for e in args.more]
        rec["reference"] = min([rec[c] for c in cols] + ([rec["milp"]] if rec["milp"] else []))
        records.append(rec)
        print(f"{rec['graph']} K={rec['K']} N={rec['N']} kept={kept} used={info['used']} capped={info['capped']} "
              f"lb+{100 * (rec['default'] / lb - 1):.1f}% free={rec['free']:.2f}: " + " ".join(
                  f"{c} {100 * (rec[c] / rec['reference'] - 1):.2f}% ({rec[f'{c} s']:.2f}s)" for c in cols),
              flush=True)
    Path(args.out).with_suffix(".json").write_text(json.dumps(
        {"command": " ".join(sys.argv), "more_widths": args.more_widths, "more_cap": args.more_cap,
         "always": args.always, "records": records}, indent=1))


RULES = {  # signals applied to the forced-escalation columns (what each rule would have given)
    "capped or exhausted": lambda r: r["capped"] > 0 or r["exhausted"],
    "capped or exhausted or K >= 6": lambda r: r["capped"] > 0 or r["exhausted"] or r["K"] >= 6,
    "every case": lambda r: True,
}


def summary(doc: dict) -> str:
    """Markdown table of every column and of each :data:`RULES` signal on each forced-escalation column."""
    records = doc["records"]
    extras = sorted({int(key.split()[1]) for r in records for key in r if key.startswith("more ")
                     and key.endswith(" s")})
    rows = [(c, c, lambda r: True) for c in ("default", "rule", "always")]
    rows += [(f"more {e}", f"{name}, +{e} re-solves", fire) for e in extras for name, fire in RULES.items()]
    lines = ["| setting | cases | escalated | mean gap % | max gap % | cases > 1 % | better than default | "
             "window step median s | mean s | max s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for col, name, fire in rows:
        value = [r[col] if fire(r) else r["default"] for r in records]
        secs = [r[f"{col} s"] if fire(r) else r["default s"] for r in records]
        gaps = [100 * (v / r["reference"] - 1) for v, r in zip(value, records, strict=True)]
        esc = sum(1 for r in records if fire(r) and r.get(f"{col} escalated", 0) > 0)
        better = sum(v < r["default"] * (1 - 1e-9) for v, r in zip(value, records, strict=True))
        lines.append(f"| {name} | {len(records)} | {esc if col != 'default' and col != 'always' else '-'} | "
                     f"{statistics.mean(gaps):.3f} | {max(gaps):.3f} | {sum(g > 1 for g in gaps)} | {better} | "
                     f"{statistics.median(secs):.3f} | {statistics.mean(secs):.3f} | {max(secs):.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=[])
    parser.add_argument("--graphs", nargs="*", default=[])
    parser.add_argument("--stages", default="4,5,6")
    parser.add_argument("--more", nargs="+", type=int, default=[2, 4])
    parser.add_argument("--more-widths", default="2,3,4")
    parser.add_argument("--more-cap", type=int, default=450)
    parser.add_argument("--rule-extra", type=int, default=2, help="escalate= of the rule column (the code's signal)")
    parser.add_argument("--always", default="5:2,3,4:450")
    parser.add_argument("--cache", default="/tmp/latency_window_adaptive_cache")
    parser.add_argument("--summary", help="print the table of a written <out>.json and stop")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.summary:
        print(summary(json.loads(Path(args.summary).read_text())))
        return
    if not args.out:
        parser.error("--out is required")
    run(args)
    print(summary(json.loads(Path(args.out).with_suffix(".json").read_text())))


if __name__ == "__main__":
    main()
