"""Weight averaging of each training seed's last M kept checkpoints (SWA-style), M chosen on SELECTION traces
(issue 30, seed spread).

For every ``--average-last`` value M, each seed's agent is the element-wise mean of the parameters training kept
after its last M kept episodes (``edge_dynamic.py --train --keep-every N``: ``s<seed>/kept``). All of them are
evaluated at ``--margin`` on traces of ``--seed`` (11 by default; 7 and 2030 are refused), ``--traces`` per
(scenario, load) cell, the same traces for every agent. One M is chosen for every seed: the fewest cells whose spread
across the seeds (largest minus smallest per-cell mean) exceeds ``--spread-limit``; equal counts: the higher mean of
the seeds' averages over the cells, then the smaller M. The chosen averaged agents are exported to
``--out-agents/s<seed>`` as parameters-only agent folders (``summary.json``: ``averaged_episodes``, the selection).

    python experiments/edge_average.py --train-dir /tmp/train --agent-seeds 0 1 2 --average-last 2 3 4 6 \
        --margin 0.25 --out-agents experiments/results/edge/agents/switch_s35_avg --stem edge_average_s35
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edge_dynamic import SCENARIOS  # noqa: E402
from edge_select import (  # noqa: E402
    REFERENCE,
    SELECTION_SEED,
    cell_average,
    check_selection,
    refuse_seed,
    score_results,
)
from edge_validation import OUT, write_report  # noqa: E402

from respect_jax.edge_cluster.agent_runs import averaged_kept, export_params, kept_episodes, last_kept  # noqa: E402
from respect_jax.edge_cluster.evaluation import compare  # noqa: E402
from respect_jax.edge_cluster.policies import STATIC_POLICIES  # noqa: E402
from respect_jax.edge_cluster.scenarios import load_preset  # noqa: E402
from respect_jax.edge_cluster.switching import agent_switch_policy, load_switch_agent  # noqa: E402


def spread_rows(cell_means: dict[int, dict[int, dict]], limit: float) -> dict[int, dict]:
    """Per M (``cell_means[M][seed][cell]``: a seed's mean success in a cell): the cells whose spread over the seeds
    exceeds ``limit``, the largest spread and the mean of the seeds' averages over the cells."""
    rows = {}
    for m, by_seed in cell_means.items():
        cells = list(next(iter(by_seed.values())))
        spreads = {c: max(s[c] for s in by_seed.values()) - min(s[c] for s in by_seed.values()) for c in cells}
        rows[m] = {"over": sum(v > limit for v in spreads.values()), "max_spread": max(spreads.values()),
                   "mean": float(np.mean([np.mean(list(s.values())) for s in by_seed.values()])),
                   "spreads": spreads}
    return rows


def choose_average(rows: dict[int, dict]) -> int:
    """The M with the fewest cells over the limit; equal counts: the higher mean average, then the smaller M."""
    return min(rows, key=lambda m: (rows[m]["over"], -rows[m]["mean"], m))


def pool_docs(results: list[dict], names: list[str]) -> tuple[dict, list[int]]:
    """The ``docs`` of several ``edge_average.py`` results on different selection trace seeds merged: per scenario,
    load and policy the per-trace ratios of every result (in trace-seed order) and their mean; and the trace seeds.
    Each result must hold every name of ``names`` and the same cells; 7, 2030 and a repeated seed are refused."""
    seeds = [int(r["argv"][r["argv"].index("--seed") + 1]) if "--seed" in r["argv"] else SELECTION_SEED
             for r in results]
    for seed in seeds:
        refuse_seed(seed)
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--pooled: results of the same trace seed twice ({seeds})")
    order = sorted(range(len(results)), key=lambda i: seeds[i])
    first = results[order[0]]["docs"]
    docs = {}
    for sc, d in first.items():
        per_trace = {}
        for name in [REFERENCE, *names]:
            for i in order:
                doc = results[i]["docs"].get(sc)
                if doc is None or name not in doc["per_trace"] or doc["loads"] != d["loads"]:
                    raise ValueError(f"--pooled: trace seed {seeds[i]} has no {name} in {sc} with loads {d['loads']}")
            per_trace[name] = {ld: [x for i in order for x in results[i]["docs"][sc]["per_trace"][name][ld]]
                               for ld in d["loads"]}
        docs[sc] = {"loads": d["loads"], "per_trace": per_trace,
                    "mean": {n: {ld: float(np.mean(v)) for ld, v in by.items()} for n, by in per_trace.items()}}
    return docs, sorted(seeds)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-dir", required=True, help="folder of s<seed> training run folders with kept parameters")
    ap.add_argument("--agent-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--average-last", type=int, nargs="+", default=[2, 3, 4, 6],
                    help="candidate M: average the last M kept checkpoints of each seed")
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    ap.add_argument("--margin", default="0.25", help="decision margin the agents are compared at")
    ap.add_argument("--seed", type=int, default=SELECTION_SEED, help="selection trace seed (not 2030 or 7)")
    ap.add_argument("--traces", type=int, default=4, help="traces per (scenario, load) cell")
    ap.add_argument("--spread-limit", type=float, default=0.02, help="a cell's seed spread target")
    ap.add_argument("--out-agents", required=True, help="the chosen averaged agents go to <this>/s<seed>")
    ap.add_argument("--pooled", nargs="+", default=None, metavar="JSON",
                    help="no simulation: choose M on the traces of these edge_average.py results (other selection "
                    "trace seeds, the same --average-last), pooled per cell")
    ap.add_argument("--stem", default="edge_average")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    check_selection(args.seed, args.traces)
    if not args.spread_limit > 0:
        raise ValueError(f"--spread-limit must be > 0, got {args.spread_limit}")
    if len(args.agent_seeds) < 2:
        raise ValueError("--agent-seeds: the spread needs at least two seeds")
    train_dir = Path(args.train_dir)
    runs = {s: train_dir / f"s{s}" for s in args.agent_seeds}
    for run in runs.values():
        for m in args.average_last:
            last_kept(kept_episodes(run), m)  # one-line error for an M out of range, before any evaluation
    agents, episodes = {}, {}
    for s, run in runs.items():
        base, _ = load_switch_agent(run)
        for m in args.average_last:
            params, episodes[(s, m)] = averaged_kept(run, base.params, m)
            agents[(s, m)] = replace(base, params=params)
    names = {k: f"s{k[0]}@avg{k[1]}" for k in agents}
    docs, t_start = {}, time.perf_counter()
    trace_seeds = [args.seed]
    if args.pooled:
        docs, trace_seeds = pool_docs([json.loads(Path(f).read_text()) for f in args.pooled], list(names.values()))
        args.scenarios = list(docs)
    for scenario in [] if args.pooled else args.scenarios:
        policies = {REFERENCE: STATIC_POLICIES[REFERENCE],
                    **{names[k]: agent_switch_policy(a, args.margin) for k, a in agents.items()}}
        doc = compare(load_preset(scenario), policies, key=jax.random.key(args.seed), traces=args.traces)
        docs[scenario] = {k: doc[k] for k in ("loads", "mean", "per_trace", "eval_s")}
        print(f"[{scenario}] {time.perf_counter() - t_start:.0f}s", flush=True)

    cell_means = {m: {s: {f"{sc}:{ld}": float(doc["mean"][names[(s, m)]][ld]) for sc, doc in docs.items()
                          for ld in doc["loads"]} for s in args.agent_seeds} for m in args.average_last}
    if args.pooled:
        args.traces = len(next(iter(next(iter(docs.values()))["per_trace"][REFERENCE].values())))
    rows = spread_rows(cell_means, args.spread_limit)
    chosen = choose_average(rows)
    scores = {k: cell_average(docs, n) for k, n in names.items()}
    for s in args.agent_seeds:
        eps = episodes[(s, chosen)]
        export_params(runs[s], eps[-1], Path(args.out_agents) / f"s{s}", agents[(s, chosen)].params,
                      extra={"averaged_episodes": eps,
                             "selection": {"trace_seeds": trace_seeds, "traces": args.traces, "margin": args.margin,
                                           "scenarios": args.scenarios, "average_last": chosen,
                                           "average": scores[(s, chosen)][0]}})
    ref, ref_ci = cell_average(docs, REFERENCE)
    n_cells = sum(len(d["loads"]) for d in docs.values())
    lines = ["# Weight averaging of the last M kept checkpoints, M chosen on selection traces", "",
             f"Generated by `python experiments/edge_average.py {' '.join(sys.argv[1:] if argv is None else argv)}` "
             f"(trace seeds {', '.join(map(str, trace_seeds))}, {args.traces} traces per cell, {n_cells} cells of "
             f"{', '.join(args.scenarios)}; margin {args.margin}; shared "
             f"{os.cpu_count()}-core CPU, load average {os.getloadavg()[0]:.1f} at the end, "
             f"{time.perf_counter() - t_start:.0f} s).", "",
             f"Per seed: average over the cells (mean ± 95 % half-width over the traces). Cells over: seed spread > "
             f"{args.spread_limit}. {REFERENCE} (the base rule): {ref:.4f} ± {ref_ci:.4f}. **Bold**: chosen.", "",
             "| M | episodes (s" + str(args.agent_seeds[0]) + ") | " + " | ".join(f"s{s}" for s in args.agent_seeds)
             + " | mean | cells over | largest spread |", "|---|---|" + "---|" * len(args.agent_seeds) + "---|---|---|"]
    for m in args.average_last:
        r = rows[m]
        row = [f"M={m}", ", ".join(map(str, episodes[(args.agent_seeds[0], m)])),
               *[f"{scores[(s, m)][0]:.4f} ± {scores[(s, m)][1]:.4f}" for s in args.agent_seeds],
               f"{r['mean']:.4f}", str(r["over"]), f"{r['max_spread']:.3f}"]
        if m == chosen:
            row = [f"**{x}**" for x in row]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Cells over the limit per M: " + "; ".join(
        f"M={m}: " + (", ".join(f"{c} {v:.3f}" for c, v in rows[m]["spreads"].items() if v > args.spread_limit)
                      or "none") for m in args.average_last),
              "", f"Chosen: M={chosen}; agents in `{args.out_agents}/s<seed>`."]
    results = {"chosen": chosen, "episodes": {names[k]: v for k, v in episodes.items()},
               "rows": {str(m): r for m, r in rows.items()}, **score_results(names, scores, ref, ref_ci, docs)}
    write_report(args.out, args.stem, lines, results)
    return results


if __name__ == "__main__":
    main()
