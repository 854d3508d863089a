"""Which default decoding for ``solver=policy`` (the order policy): a sweep on validation graphs only.

For every graph of ``--graphs`` (validation: ``data/models_val``), K of ``--stages`` and both objectives it
scores the nodes once, splits the greedy order, then for every noise level of ``--noises`` the first
``--max-samples`` noisy orders exactly as :func:`respect_jax.policy.order.decode_scores` draws them (seeded
``default_rng(seed)``, one ``standard_normal(n)`` per sample), recording every split's objective and wall time
and whether the noisy order repeats one already split (a repeat is not split again here: its objective is the
first split's, its time the order's plus the first split's, what ``decode_scores`` spends today). Any decoding
"greedy + S samples at noise sigma" is then a prefix minimum of these records (the numbers ``decode_scores``
returns), its time the forward pass plus the greedy and first S splits. ``--local-search`` hill-climbing moves
(:func:`respect_jax.local_search.improve`, as ``polish``) run from the greedy split and from the best of
``--ls-from`` samples at the K of ``--ls-stages``, timed after compiling (compile time recorded apart). Writes one
JSON line per case to ``<out>.jsonl`` (resumable: finished cases are skipped);
``experiments/order_policy_decoding_report.py`` makes the table and figure.

    nice -n 5 .venv/bin/python experiments/order_policy_decoding.py --graphs 'data/models_val/*.json' \
        --stages 2-8 --first nasnetlarge --out experiments/results/order_policy_decoding_val
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

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402

from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.graphs.padded import pad_graph, to_original_order, to_position_order  # noqa: E402
from respect_jax.local_search import DENSE_MAX_NODES, improve  # noqa: E402
from respect_jax.policy.order import (  # noqa: E402
    order_from_scores,
    predict_scores,
    split_order,
)
from respect_jax.policy.order_model import load_order_policy  # noqa: E402
from respect_jax.policy.order_solver import DEFAULT_ORDER_CHECKPOINT  # noqa: E402
from respect_jax.reference import reference_objective  # noqa: E402

OBJECTIVES = ("latency", "paper")


def stage_range(text: str) -> list[int]:
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",")]


def timed_split(graph, hw, objective, scores) -> tuple[np.ndarray, float, float, bytes]:
    """(assignment, objective, seconds for order + split, order bytes) of the order of ``scores``."""
    start = time.perf_counter()
    order = order_from_scores(graph, scores)
    assignment, value = split_order(graph, hw, objective, 1.0, order)
    return assignment, value, time.perf_counter() - start, order.tobytes()


_improve = jax.jit(lambda g, s, hw, obj, moves, dense: improve(g, s, hw, obj, 1.0, moves, dense_max_nodes=dense)[::2],
                   static_argnames=("obj", "moves", "dense"))


_compiled: dict = {}


def local_search(graph, hw, objective, assignment, moves: int, dense_max_nodes: int = DENSE_MAX_NODES
                 ) -> tuple[float, float, float, int]:
    """(objective after at most ``moves`` hill-climbing moves, seconds, compile seconds, moves taken).
    ``dense_max_nodes``: graphs padded to more nodes take the sparse single-node moves (0: always)."""
    padded = jax.tree.map(jnp.asarray, pad_graph(graph))
    stage = jnp.asarray(to_position_order(pad_graph(graph), np.asarray(assignment)), jnp.int32)
    key = (tuple(x.shape for x in jax.tree.leaves(padded)), hw, objective, moves, dense_max_nodes)
    start = time.perf_counter()
    if key not in _compiled:
        _compiled[key] = _improve.lower(padded, stage, hw, objective, moves, dense_max_nodes).compile()
    compiled = _compiled[key]
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    out, steps = jax.device_get(compiled(padded, stage, hw))
    seconds = time.perf_counter() - start
    final = to_original_order(pad_graph(graph), np.asarray(out)).astype(np.int64)
    return reference_objective(graph, final, hw, objective, 1.0), seconds, compile_s, int(steps)


def run_case(model, graph, hw, objective, noises, max_samples, seed, moves, ls_from, ls_stages, ls_sigma=0.1,
             ls_dense=DENSE_MAX_NODES) -> dict:
    predict_scores(model, [graph], [hw], [objective], 1)  # compile / warm
    fwd = []
    for _ in range(2):
        start = time.perf_counter()
        (scores,) = predict_scores(model, [graph], [hw], [objective], 1)
        fwd.append(time.perf_counter() - start)
    greedy_a, greedy_v, greedy_t, greedy_o = timed_split(graph, hw, objective, scores)
    rec = {"graph": graph.name, "num_nodes": graph.num_nodes, "num_edges": int(graph.num_edges),
           "stages": hw.stages, "objective_name": objective, "forward_s": min(fwd), "greedy": greedy_v,
           "greedy_s": greedy_t, "noise": {}}
    ls_start = {}
    for sigma in noises:
        rng = np.random.default_rng(seed)
        seen = {greedy_o: (greedy_a, greedy_v, greedy_t)}
        values, seconds, repeats = [], [], []
        best_a, best_v = greedy_a, greedy_v
        for i in range(1, max_samples + 1):
            noisy = np.asarray(scores[: graph.num_nodes], np.float64) + sigma * rng.standard_normal(graph.num_nodes)
            start = time.perf_counter()
            o = order_from_scores(graph, noisy).tobytes()
            order_s = time.perf_counter() - start
            repeat = o in seen
            if repeat:  # the same order splits the same way: reuse it, its time estimated by its first split
                a, v, split_s = seen[o]
                t = order_s + split_s
            else:
                a, v, t, _ = timed_split(graph, hw, objective, noisy)
                seen[o] = (a, v, t - order_s)
            values.append(v)
            seconds.append(t)
            repeats.append(repeat)
            if v < best_v:
                best_a, best_v = a, v
            if i == min(ls_from, max_samples):
                ls_start[sigma] = best_a
        rec["noise"][str(sigma)] = {"values": values, "seconds": seconds, "repeats": repeats}
    if moves > 0 and hw.stages in ls_stages:
        sigma = ls_sigma if ls_sigma in noises else noises[0]
        rec["ls_moves"] = moves
        rec["ls_from_sigma"] = sigma
        rec["ls_dense_max_nodes"] = ls_dense
        for label, start_a in (("greedy", greedy_a), (f"sample{ls_from}", ls_start[sigma])):
            value, seconds, compile_s, steps = local_search(graph, hw, objective, start_a, moves, ls_dense)
            rec[f"ls_{label}"] = {"value": value, "seconds": seconds, "compile_s": compile_s, "steps": steps}
    return rec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", required=True)
    parser.add_argument("--stages", default="2-8")
    parser.add_argument("--objectives", nargs="+", default=list(OBJECTIVES))
    parser.add_argument("--noises", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.3])
    parser.add_argument("--max-samples", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--local-search", type=int, default=50)
    parser.add_argument("--ls-from", type=int, default=16)
    parser.add_argument("--ls-dense-max-nodes", type=int, default=DENSE_MAX_NODES,
                        help="local search: graphs padded to more nodes take the sparse single-node moves (0: always)")
    parser.add_argument("--ls-sigma", type=float, default=0.1, help="noise of the samples the local search starts from")
    parser.add_argument("--ls-stages", default="4,8", help="K at which the local search runs (its compilation is slow)")
    parser.add_argument("--hardware", default="coral_usb")
    parser.add_argument("--checkpoint", default=str(DEFAULT_ORDER_CHECKPOINT))
    parser.add_argument("--first", nargs="*", default=[], help="graph names to run first")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    base = yaml.safe_load((ROOT / "conf" / "hardware" / f"{args.hardware}.yaml").read_text())
    paths = sorted(glob.glob(args.graphs), key=lambda p: (Path(p).stem not in args.first, p))
    if not paths:
        raise SystemExit(f"--graphs {args.graphs!r} matches no file")
    out = Path(args.out).with_suffix(".jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            r = json.loads(line)
            done.add((r["graph"], r["stages"], r["objective_name"]))
    model, _ = load_order_policy(args.checkpoint)
    for path in paths:
        graph = load_graph(path)
        for k in stage_range(args.stages):
            hw = hardware_from_dict({**base, "stages": k})
            for objective in args.objectives:
                if (graph.name, k, objective) in done:
                    continue
                start = time.perf_counter()
                rec = run_case(model, graph, hw, objective, args.noises, args.max_samples, args.seed,
                               args.local_search, args.ls_from, stage_range(args.ls_stages), args.ls_sigma,
                               args.ls_dense_max_nodes)
                rec["load1"] = float(Path("/proc/loadavg").read_text().split()[0])
                with out.open("a") as fh:
                    fh.write(json.dumps(rec) + "\n")
                print(f"{graph.name} K={k} {objective}: {time.perf_counter() - start:.1f} s (load {rec['load1']})",
                      file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
