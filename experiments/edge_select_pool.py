"""Checkpoint choice on MORE selection traces (issue 30, seed spread): pool ``edge_select.py`` runs of the same kept
checkpoints on different selection trace seeds (no simulation), so each (scenario, load) cell's mean is over all their
traces (e.g. 4 traces of seed 11 + 4 of seed 13 = 8). The validation (7) and evaluation (2030) trace seeds are refused.

Two choices from the pooled cell means, each exported when its ``--out-*`` is given:
- ``--out-own``: per training seed, the checkpoint with the highest average over the cells (earliest among equals);
- ``--out-joint``: one checkpoint per seed jointly, the fewest cells whose seed spread exceeds ``--limit``
  (``edge_select_joint.joint_choice``: then the smallest largest spread, then the highest mean average).

    python experiments/edge_select_pool.py edge_select_s34_s0.json edge_select_s34_s1.json \
        edge_select_s34_s2.json edge_select_s35_t13.json --train-dir /tmp/train \
        --out-own /tmp/own8 --out-joint /tmp/joint8 --stem edge_select_pool_s35
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edge_select import refuse_seed  # noqa: E402
from edge_select_joint import joint_choice  # noqa: E402
from edge_validation import OUT, write_report  # noqa: E402

from respect_jax.edge_cluster.agent_runs import best_episode  # noqa: E402


def _arg(doc: dict, flag: str, default: str) -> str:
    argv = doc.get("argv", [])
    return argv[argv.index(flag) + 1] if flag in argv else default


def pool(docs: list[dict]) -> tuple[dict[str, dict[tuple[str, str], list[float]]], list[int]]:
    """Per checkpoint name (``s<seed>@<episode>``) and (scenario, load) cell: the per-trace success ratios of every
    run, concatenated; and the trace seeds pooled. A checkpoint must be in runs of every trace seed, once each."""
    traces: dict[str, dict[tuple[str, str], dict[int, list[float]]]] = {}
    seeds = set()
    for doc in docs:
        seed = int(_arg(doc, "--seed", "11"))
        refuse_seed(seed)
        seeds.add(seed)
        for name in doc["scores"]:
            for sc, d in doc["docs"].items():
                for ld in d["loads"]:
                    by_seed = traces.setdefault(name, {}).setdefault((sc, ld), {})
                    if seed in by_seed:
                        raise ValueError(f"{name} is in two runs of trace seed {seed}")
                    by_seed[seed] = list(d["per_trace"][name][ld])
    out = {}
    for name, cells in traces.items():
        for cell, by_seed in cells.items():
            if set(by_seed) != seeds:
                raise ValueError(f"{name} {cell}: runs of trace seeds {sorted(by_seed)}, not of all {sorted(seeds)}")
        out[name] = {cell: [x for s in sorted(seeds) for x in by_seed[s]] for cell, by_seed in cells.items()}
    return out, sorted(seeds)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="edge_select.py JSONs (relative to --out or a path)")
    ap.add_argument("--limit", type=float, default=0.02, help="spread target per cell (the joint choice)")
    ap.add_argument("--train-dir", default=None, help="the training folder (with --out-own / --out-joint)")
    ap.add_argument("--out-own", default=None, help="export each seed's best pooled average to <this>/s<seed>")
    ap.add_argument("--out-joint", default=None, help="export the joint choice to <this>/s<seed>")
    ap.add_argument("--stem", default="edge_select_pool")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if (args.out_own or args.out_joint) and args.train_dir is None:
        raise ValueError("--out-own / --out-joint need --train-dir")
    if not args.limit > 0:
        raise ValueError(f"--limit must be > 0, got {args.limit}")
    docs = [json.loads((Path(f) if Path(f).is_file() else Path(args.out) / f).read_text()) for f in args.files]
    traces, trace_seeds = pool(docs)
    means = {n: {c: float(np.mean(v)) for c, v in cells.items()} for n, cells in traces.items()}
    by_seed: dict[str, dict[str, dict]] = {}
    for name, cells in means.items():
        by_seed.setdefault(name.split("@")[0], {})[name] = cells
    seeds = sorted(by_seed)
    average = {n: float(np.mean(list(c.values()))) for n, c in means.items()}
    own = tuple(f"{s}@{best_episode({int(n.split('@')[1]): average[n] for n in by_seed[s]})}" for s in seeds)
    joint, rows = joint_choice([by_seed[s] for s in seeds], args.limit)
    row_of = {tuple(r["combo"]): r for r in rows}
    if args.out_own or args.out_joint:
        from respect_jax.edge_cluster.agent_runs import export_kept
        from respect_jax.edge_cluster.switching import load_switch_agent

        for dest, combo in ((args.out_own, own), (args.out_joint, joint)):
            if not dest:
                continue
            for name in combo:
                seed, episode = name.split("@")
                run = Path(args.train_dir) / seed
                agent, _ = load_switch_agent(run)
                export_kept(run, int(episode), Path(dest) / seed, agent.params,
                            extra={"selection": {"pooled": list(combo), "trace_seeds": trace_seeds,
                                                 "files": args.files, "limit": args.limit}})
    n_traces = len(next(iter(next(iter(traces.values())).values())))
    command = " ".join(sys.argv[1:] if argv is None else argv)
    episodes = sorted({int(n.split("@")[1]) for n in means})
    lines = ["# Checkpoint choice on pooled selection traces (no simulation)", "",
             f"Generated by `python experiments/edge_select_pool.py {command}` (trace seeds "
             f"{', '.join(map(str, trace_seeds))}: {n_traces} traces per cell; spread limit {args.limit}).", "",
             "Average over the cells per kept episode:", "",
             "| seed | " + " | ".join(f"episode {e}" for e in episodes) + " |", "|---|" + "---|" * len(episodes)]
    for s in seeds:
        lines.append(f"| {s} | " + " | ".join(f"{average[f'{s}@{e}']:.4f}" if f"{s}@{e}" in average else "-"
                                             for e in episodes) + " |")
    lines += ["", "| choice | checkpoints | cells with spread > limit | largest spread | mean of the seeds' averages |",
              "|---|---|---|---|---|"]
    for label, combo in (("each seed's best average", own), ("joint, for the spread", joint)):
        r = row_of[combo]
        lines.append(f"| {label} | {', '.join(combo)} | {r['over']} | {r['max_spread']:.3f} | {r['average']:.4f} |")
    results = {"trace_seeds": trace_seeds, "own": list(own), "joint": list(joint), "average": average,
               "rows": rows[:20] + [row_of[own]]}
    write_report(args.out, args.stem, lines, results)
    return results


if __name__ == "__main__":
    main()
