"""Greedy and greedy + local-search gaps of policy checkpoints on the bundled models at several K.

For information only (the 17 bundled models are the test set: never used to select a checkpoint).
For every objective and K, every model is scheduled by ``solver=contiguous`` and by each checkpoint
(greedy, then greedy + ``--local-search`` hill-climbing moves on the greedy schedule); the gap of a
method is its objective over the best objective any of these methods found for that (model, K), minus
one. All models are decoded in one padded batch per (checkpoint, K, objective): one compilation each.

    .venv/bin/python experiments/conditioned_policy_gaps.py --out experiments/results/conditioned_gaps \\
        --latency new=data/checkpoints/respect_cond_latency old=data/checkpoints/respect_k4_latency_si \\
        --paper old=data/checkpoints/respect_k4_paper_cut --stages 2 4 6 8 --local-search 300

(the recorded run read ``new`` from runs/cond_latency, the same files as the shipped folder). "best" is
the best of the compared methods, not a proven optimum.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import numpy as np
import yaml

from respect_jax.costs import evaluate_assignment, hardware_from_dict
from respect_jax.graphs.graph import load_graph
from respect_jax.graphs.padded import stack_graphs, to_original_order
from respect_jax.policy.decoding import Decoding, make_decoder, refine
from respect_jax.solvers.partitioners import solve_contiguous
from respect_jax.train.checkpoints import load_policy

ROOT = Path(__file__).resolve().parents[1]


def parse_named(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, _, path = item.partition("=")
        if not path:
            raise ValueError(f"expected name=checkpoint, got {item!r}")
        out[name] = path
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=str(ROOT / "data" / "models"))
    ap.add_argument("--hardware", default=str(ROOT / "conf" / "hardware" / "coral_usb.yaml"))
    ap.add_argument("--paper", nargs="*", default=[], help="name=checkpoint for the paper objective")
    ap.add_argument("--latency", nargs="*", default=[], help="name=checkpoint for the latency objective")
    ap.add_argument("--stages", nargs="+", type=int, default=[2, 4, 6, 8])
    ap.add_argument("--local-search", type=int, default=300)
    ap.add_argument("--only", nargs="*", default=None, help="model names (default: every *.json)")
    ap.add_argument("--out", required=True, help="output prefix (.json and .md are written)")
    args = ap.parse_args()

    paths = sorted(Path(args.models).glob("*.json"))
    if args.only:
        paths = [p for p in paths if p.stem in args.only]
    graphs = [load_graph(p) for p in paths]
    batch = stack_graphs(graphs)
    padded = [jax.tree.map(lambda x, i=i: np.asarray(x)[i], batch) for i in range(len(graphs))]
    base = yaml.safe_load(Path(args.hardware).read_text())
    ls_jit = jax.jit(refine, static_argnames=("objective", "lam", "max_steps"))
    rows = []
    for objective, named in (("latency", parse_named(args.latency)), ("paper", parse_named(args.paper))):
        models = {name: load_policy(path)[0] for name, path in named.items()}
        for k in args.stages:
            hw = hardware_from_dict({**base, "stages": k})
            res: dict[str, np.ndarray] = {}
            t0 = time.perf_counter()
            res["contiguous"] = np.asarray(
                [evaluate_assignment(g, solve_contiguous(g, hw, objective).assignment, hw, objective)["objective"]
                 for g in graphs]
            )
            times = {"contiguous": time.perf_counter() - t0}
            for name, model in models.items():
                run, params = make_decoder(model, hw, objective, 1.0, Decoding("greedy"))
                t0 = time.perf_counter()
                out = jax.device_get(run(params, batch, jax.random.PRNGKey(0)))
                times[f"{name}_greedy"] = time.perf_counter() - t0  # compilation included
                stage = np.asarray(out.stage)
                ls_stage, _, _ = jax.device_get(ls_jit(batch, stage[:, None], hw, objective, 1.0, args.local_search))
                for label, st in (("greedy", stage), ("greedy_ls", np.asarray(ls_stage)[:, 0])):
                    objs = []
                    for g, p, s in zip(graphs, padded, st, strict=True):
                        score = evaluate_assignment(g, to_original_order(p, s), hw, objective)
                        if not score["valid"]:
                            raise RuntimeError(f"{name} {label}: invalid schedule of {g.name} at K={k}")
                        objs.append(score["objective"])
                    res[f"{name}_{label}"] = np.asarray(objs)
            best = np.min(np.stack(list(res.values())), axis=0)
            for method, objs in res.items():
                gap = objs / best - 1.0
                rows.append(
                    {
                        "objective": objective,
                        "stages": k,
                        "method": method,
                        "gap_mean_pct": float(100 * gap.mean()),
                        "gap_max_pct": float(100 * gap.max()),
                        "vs_contiguous_mean_pct": float(100 * np.mean(objs / res["contiguous"] - 1.0)),
                        "per_model": {g.name: float(o) for g, o in zip(graphs, objs, strict=True)},
                        "time_s": times.get(method),
                    }
                )
                r = rows[-1]
                print(
                    f"{objective} K={k} {method:>22}: gap mean {r['gap_mean_pct']:7.2f}% max {r['gap_max_pct']:7.2f}%"
                    f"  vs contiguous {r['vs_contiguous_mean_pct']:+7.2f}%",
                    flush=True,
                )
            write(args, paths, base, rows)  # after every (objective, K): a killed run keeps what it finished


def write(args, paths: list[Path], base: dict, rows: list[dict]) -> None:
    """``<out>.json`` (every row, per-model objectives) and ``<out>.md`` (the table)."""
    doc = {
        "models": [p.stem for p in paths],
        "local_search": args.local_search,
        "hardware": base,
        "checkpoints": {"paper": args.paper, "latency": args.latency},
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_text(json.dumps(doc, indent=1))
    lines = ["| objective | K | method | gap mean % | gap max % | vs contiguous mean % |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['objective']} | {r['stages']} | {r['method']} | {r['gap_mean_pct']:.2f} |"
            f" {r['gap_max_pct']:.2f} | {r['vs_contiguous_mean_pct']:+.2f} |"
        )
    Path(f"{args.out}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
