"""Choose each training seed's checkpoint on SELECTION traces (issue 30): every parameter set that training kept
(``edge_dynamic.py --train --keep-every N``, ``respect-edge train keep_every=N``: ``s<seed>/kept``) is evaluated at
``--margin`` on traces of ``--seed`` (11 by default), ``--traces`` per (scenario, load) cell, the same traces for
every checkpoint; per seed the checkpoint with the highest average over the cells (mean of the per-cell mean success
ratios; equal averages: the earliest) is exported to ``--out-agents/s<seed>`` as a parameters-only agent folder
(loaded like the shipped agents, ``summary.json`` says which episode and why).

The selection seed is neither the evaluation traces' (2030) nor the validation report's (7, ``edge_margin.py``), so
the validation report of the chosen agents stays unbiased:

    python experiments/edge_select.py --train-dir /tmp/train --agent-seeds 0 1 2 --margin 0.25 \
        --out-agents experiments/results/edge/agents/switch_s34 --stem edge_select_s34
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edge_dynamic import SCENARIOS  # noqa: E402
from edge_validation import EVALUATION_SEED, OUT, VALIDATION_SEED, write_report  # noqa: E402

from respect_jax.edge_cluster.agent_runs import best_episode, export_kept, kept_episodes  # noqa: E402
from respect_jax.edge_cluster.evaluation import compare, mean_ci  # noqa: E402
from respect_jax.edge_cluster.policies import STATIC_POLICIES  # noqa: E402
from respect_jax.edge_cluster.scenarios import load_preset  # noqa: E402
from respect_jax.edge_cluster.switching import agent_switch_policy, kept_agent  # noqa: E402

SELECTION_SEED = 11
REFERENCE = "fastest_expected"  # the base rule, a column for scale


def refuse_seed(seed: int) -> None:
    """A ValueError for the evaluation (2030) and validation-report (7) trace seeds."""
    if seed in (EVALUATION_SEED, VALIDATION_SEED):
        raise ValueError(f"--seed {seed} is the {'evaluation' if seed == EVALUATION_SEED else 'validation report'}"
                         f" traces' seed: select on another (e.g. {SELECTION_SEED})")


def check_selection(seed: int, traces: int) -> None:
    """The selection scripts' checks of ``--seed`` (:func:`refuse_seed`) and ``--traces`` (>= 2), one-line errors."""
    refuse_seed(seed)
    if traces < 2:
        raise ValueError(f"--traces must be >= 2 (a 95 % interval needs two traces), got {traces}")


def cell_average(docs: dict, name: str) -> tuple[float, float]:
    """Policy ``name``'s average over every (scenario, load) cell of ``docs`` (trace i of every cell averaged): mean
    and 95 % half-width over the traces; the mean equals the mean of the per-cell means."""
    per_trace = np.mean([np.asarray(doc["per_trace"][name][ld]) for doc in docs.values() for ld in doc["loads"]],
                        axis=0)
    return mean_ci(per_trace)


def score_results(names: dict, scores: dict, ref: float, ref_ci: float, docs: dict) -> dict:
    """The end of a selection script's JSON: each scored checkpoint's 20-cell average (mean, 95 % half-width) under
    its name, the reference rule's, and the raw evaluation documents."""
    return {"scores": {names[k]: {"mean": m, "ci95": c} for k, (m, c) in scores.items()},
            "reference": {REFERENCE: {"mean": ref, "ci95": ref_ci}}, "docs": docs}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-dir", required=True, help="folder of s<seed> training run folders with kept parameters")
    ap.add_argument("--agent-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    ap.add_argument("--margin", default="0.25", help="decision margin the checkpoints are compared at (M or "
                    "M,rule=m,...; the margin the agents are reported at)")
    ap.add_argument("--seed", type=int, default=SELECTION_SEED, help="selection trace seed (not 2030 or 7)")
    ap.add_argument("--traces", type=int, default=4, help="traces per (scenario, load) cell")
    ap.add_argument("--out-agents", required=True, help="the chosen agents go to <this>/s<seed>")
    ap.add_argument("--stem", default="edge_select")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    check_selection(args.seed, args.traces)
    train_dir = Path(args.train_dir)
    kept = {s: kept_episodes(train_dir / f"s{s}") for s in args.agent_seeds}
    missing = [s for s, eps in kept.items() if not eps]
    if missing:
        raise ValueError(f"no kept parameters in {', '.join(str(train_dir / f's{s}') for s in missing)} (train with "
                         "--keep-every N / keep_every=N)")
    agents = {(s, e): kept_agent(train_dir / f"s{s}", e) for s, eps in kept.items() for e in eps}
    names = {k: f"s{k[0]}@{k[1]}" for k in agents}
    docs, t_start = {}, time.perf_counter()
    for scenario in args.scenarios:
        policies = {REFERENCE: STATIC_POLICIES[REFERENCE],
                    **{names[k]: agent_switch_policy(a, args.margin) for k, a in agents.items()}}
        doc = compare(load_preset(scenario), policies, key=jax.random.key(args.seed), traces=args.traces)
        docs[scenario] = {k: doc[k] for k in ("loads", "mean", "per_trace", "eval_s")}
        print(f"[{scenario}] {time.perf_counter() - t_start:.0f}s", flush=True)

    scores = {k: cell_average(docs, n) for k, n in names.items()}
    chosen = {}
    for s in args.agent_seeds:
        chosen[s] = best_episode({e: scores[(s, e)][0] for e in kept[s]})
        export_kept(train_dir / f"s{s}", chosen[s], Path(args.out_agents) / f"s{s}", agents[(s, chosen[s])].params,
                    extra={"selection": {"trace_seed": args.seed, "traces": args.traces, "margin": args.margin,
                                         "scenarios": args.scenarios, "average": scores[(s, chosen[s])][0]}})
    cells = sum(len(d["loads"]) for d in docs.values())
    episodes = sorted({e for eps in kept.values() for e in eps})
    ref, ref_ci = cell_average(docs, REFERENCE)
    lines = ["# Checkpoint choice per training seed on selection traces", "",
             f"Generated by `python experiments/edge_select.py {' '.join(sys.argv[1:] if argv is None else argv)}` "
             f"(trace seed {args.seed}, {args.traces} traces per cell, {cells} cells of "
             f"{', '.join(args.scenarios)}; margin {args.margin}; shared {os.cpu_count()}-core CPU, load average "
             f"{os.getloadavg()[0]:.1f} at the end, {time.perf_counter() - t_start:.0f} s).", "",
             f"Average over the cells (mean ± 95 % half-width over the traces); **bold**: the chosen checkpoint. "
             f"{REFERENCE} (the base rule): {ref:.4f} ± {ref_ci:.4f}.", "",
             "| seed | " + " | ".join(f"episode {e}" for e in episodes) + " | chosen |",
             "|---|" + "---|" * len(episodes) + "---|"]
    for s in args.agent_seeds:
        row = []
        for e in episodes:
            if (s, e) not in scores:
                row.append("-")
                continue
            text = f"{scores[(s, e)][0]:.4f} ± {scores[(s, e)][1]:.4f}"
            row.append(f"**{text}**" if e == chosen[s] else text)
        lines.append(f"| s{s} | " + " | ".join(row) + f" | episode {chosen[s]} |")
    lines += ["", f"Chosen agents: `{args.out_agents}/s<seed>`."]
    results = {"chosen": {f"s{s}": e for s, e in chosen.items()}, **score_results(names, scores, ref, ref_ci, docs)}
    write_report(args.out, args.stem, lines, results)
    return results


if __name__ == "__main__":
    main()
