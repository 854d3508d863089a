"""Figures of the learned scheduler: quality gaps, training throughput, scheduling latency, compile time.

Writes ``experiments/results/bench_policy.{md,json}`` with the machine description and the load
average before and after (the figures depend on how busy the machine was).

    .venv/bin/python experiments/bench_policy.py                       # everything
    .venv/bin/python experiments/bench_policy.py --skip-quality        # speed figures only
    .venv/bin/python experiments/bench_policy.py --quality-limit 100 --samples 64
    .venv/bin/python experiments/bench_policy.py --skip-training --beam 64   # also beam-search rows
    .venv/bin/python experiments/bench_policy.py --skip-training --sbs 64    # also stochastic-beam-search rows

* training throughput (graphs/s, after compilation) of one imitation and one REINFORCE update
  epoch on 30-node graphs (bucket 32), and the compile time of each update epoch per bucket;
* time to schedule one 350-node graph (ResNet-101, 345 nodes) with greedy decoding, after
  compilation, and the compile time of that bucket;
* quality: greedy, best-of-N (with ``--beam`` beam-search, with ``--sbs`` the best of distinct samples)
  gaps of a checkpoint on the held-out 50-node labelled set (gap to the proven optimum) and on generated
  300-node DNN-like graphs (gap to the best schedule found by any of: the policy, the compiler
  partitioner, the best contiguous split, the greedy solver, the batched Gumbel solver).

The speed figures come from :mod:`respect_jax.benchmarks.policy` (``respect-bench benchmarks=[policy]``
measures the same ones).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from respect_jax.benchmarks.policy import bench_compile_bucket, bench_latency, bench_training  # noqa: E402
from respect_jax.cli.common import machine_description, user_errors_exit  # noqa: E402
from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.experiments.report import result_stem, with_extension  # noqa: E402
from respect_jax.graphs import GeneratorConfig, generate_dataset  # noqa: E402
from respect_jax.graphs.graph import write_json_atomic  # noqa: E402
from respect_jax.policy.config import PolicyConfig  # noqa: E402
from respect_jax.policy.decoding import Decoding  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402
from respect_jax.solvers.gumbel import solve_batch  # noqa: E402
from respect_jax.train.checkpoints import load_policy  # noqa: E402
from respect_jax.train.data import check_manifest, load_labelled_batches, make_batches  # noqa: E402
from respect_jax.train.evaluation import decode_set, summarise  # noqa: E402

RESULTS = ROOT / "experiments" / "results"


def bench_quality(
    model,
    doc,
    labels50: str,
    limit: int,
    samples: int,
    dnn_graphs: int,
    batch: int,
    gumbel_steps: int = 200,
    local_search: int = 0,
    pair_escapes: int = 0,
    pair_candidates: int = 1,
    beam: int = 0,
    sbs: int = 0,
) -> dict:
    """Greedy / best-of-N (with ``beam`` > 0 beam-search, with ``sbs`` > 0 stochastic beam search) gaps,
    and with ``local_search`` > 0 the same followed by hill climbing, and with ``pair_escapes`` > 0 also
    by hill climbing with pair moves (on the 50-node graphs).

    On the 300-node graphs the local search runs after greedy decoding only (hill-climbing all N
    candidates of 300-node graphs costs N times as much) and without pair moves (``(2 N)^2`` pairs).
    """
    hw = hardware_from_dict(doc["hardware"])
    obj, lam = doc["objective"], doc["lam"]
    out = {}
    data = load_labelled_batches([labels50], hw, obj, lam, limit=limit)
    multi = [("best_of", samples)] + ([("beam", beam)] if beam else []) + ([("sbs", sbs)] if sbs else [])
    small = [Decoding("greedy")] + [Decoding(s, samples=n) for s, n in multi]
    if local_search:
        small += [Decoding("greedy", local_search=local_search)]
        small += [Decoding(s, samples=n, local_search=local_search) for s, n in multi]
        if pair_escapes:
            small += [Decoding("greedy", local_search=local_search, pair_escapes=pair_escapes)]
            small += [
                Decoding(
                    s, samples=n, local_search=local_search, pair_escapes=pair_escapes, pair_candidates=pair_candidates
                )
                for s, n in multi
            ]
    for dec in small:
        decoded = [decode_set(model, d, hw, obj, lam, dec, batch, jax.random.PRNGKey(0)) for d in data]
        out[f"respect50_{dec.label}"] = summarise(decoded)
        print(dec.label, out[f"respect50_{dec.label}"], flush=True)
    if dnn_graphs:
        graphs = generate_dataset(GeneratorConfig(mode="dnn", min_nodes=300, max_nodes=300), dnn_graphs, seed=300)
        batches = make_batches(graphs)
        per_method = {}
        large = [Decoding("greedy")] + [Decoding(s, samples=n) for s, n in multi]
        if local_search:
            large.append(Decoding("greedy", local_search=local_search))
        for dec in large:
            vals = np.zeros(len(graphs))
            for b, idx in batches:
                d = decode_set(model, b, hw, obj, lam, dec, max(1, batch // 4), jax.random.PRNGKey(1))
                vals[idx] = d.objective
            per_method[dec.label] = vals
        for solver in ("compiler", "contiguous", "greedy"):
            per_method[f"solver_{solver}"] = np.array(
                [run_solver(solver, g, hw, obj, lam)["objective"] for g in graphs]
            )
        if gumbel_steps:  # the batched Gumbel solver, 8 graphs per call: a strong best-known reference
            vals = np.zeros(len(graphs))
            for b, idx in batches:
                for lo in range(0, len(idx), 8):
                    sub = jax.tree.map(lambda x, lo=lo: x[lo : lo + 8], b.graphs)
                    _, best_obj = solve_batch(sub, hw, obj, lam, jax.random.PRNGKey(lo), steps=gumbel_steps, samples=64)
                    vals[idx[lo : lo + 8]] = np.asarray(best_obj)
            per_method["solver_gumbel"] = vals
        best = np.min(np.stack(list(per_method.values())), axis=0)
        out["dnn300"] = {
            m: {
                "gap_mean_pct": float(100 * np.mean(v / best - 1)),
                "best_pct": float(100 * np.mean(v <= best * 1.000001)),
            }
            for m, v in per_method.items()
        }
        out["dnn300"]["graphs"] = len(graphs)
        out["dnn300"]["reference"] = "best of the listed methods"
        print("dnn300", out["dnn300"], flush=True)
    return out


def markdown(doc: dict) -> str:
    m = doc["machine"]
    lines = [
        "# Learned scheduler: speed and quality",
        "",
        f"Machine: {m['processor']}, {m['cpu_count']} CPUs, JAX {m['jax']} ({m['jax_backend']}); "
        f"load average {doc['load_before'][0]:.1f} before / {doc['load_after'][0]:.1f} after "
        "(the machine was shared with other jobs: speed figures are lower bounds).",
        f"Policy: `{doc['policy']}`.",
        "",
    ]
    if "training" in doc:
        lines += [
            "| training (30-node graphs) | graphs/s | compile s | batch | samples/graph |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, r in doc["training"].items():
            lines.append(
                f"| {name} | {r['graphs_per_s']:.0f} | {r['compile_s']:.1f} | {r['batch_size']} | "
                f"{r['samples_per_graph'] or '-'} |"
            )
        lines.append("")
    if "compile_64" in doc:
        c = doc["compile_64"]
        lines += [
            f"Imitation update epoch compile time, {c['bucket_nodes']}-node bucket: {c['imitation_compile_s']:.1f} s.",
            "",
        ]
    if "latency" in doc:
        r = doc["latency"]
        lines += [
            f"Greedy schedule of {r['graph']} ({r['num_nodes']} nodes, bucket {r['bucket_nodes']}): "
            f"{r['greedy_ms_best']:.1f} ms best / {r['greedy_ms_median']:.1f} ms median after compilation "
            f"(compile {r['compile_s']:.1f} s).",
            "",
        ]
    if "quality" in doc:
        q = doc["quality"]
        lines += [
            "| held-out set | decoding | mean gap % | max gap % | optimal % | valid % | decode s (all graphs) |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for key, r in q.items():
            if key.startswith("respect50_"):
                lines.append(
                    f"| respect50 ({r['graphs']} graphs, vs proven optimum) | {key[10:]} | {r['gap_mean_pct']:.2f} | "
                    f"{r['gap_max_pct']:.2f} | {r['optimal_pct']:.1f} | {r['valid_pct']:.1f} | {r['time_s']:.1f} |"
                )
        if "dnn300" in q:
            lines += [
                "",
                f"300-node DNN-like graphs ({q['dnn300']['graphs']}), gap to the best of the methods below:",
                "",
            ]
            lines += ["| method | mean gap % | best found % |", "|---|---:|---:|"]
            for key, r in q["dnn300"].items():
                if isinstance(r, dict):
                    lines.append(f"| {key} | {r['gap_mean_pct']:.2f} | {r['best_pct']:.1f} |")
        lines.append("")
    return "\n".join(lines)


@user_errors_exit("bench_policy")
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "data" / "checkpoints" / "respect_k4_paper"))
    ap.add_argument("--labels30", default=str(ROOT / "data" / "labels" / "respect30_k4_paper"))
    ap.add_argument("--labels50", default=str(ROOT / "data" / "labels" / "respect50_k4_paper"))
    ap.add_argument("--graph350", default=str(ROOT / "data" / "models" / "resnet101.json"))
    ap.add_argument("--batch", type=int, default=128, help="graphs per training step of the training rows")
    ap.add_argument("--decode-batch", type=int, default=64, help="graphs per decoding call of the quality rows")
    ap.add_argument("--steps", type=int, default=10, help="update steps per timed epoch")
    ap.add_argument("--rl-samples", type=int, default=8)
    ap.add_argument("--samples", type=int, default=64, help="best-of-N candidates")
    ap.add_argument("--quality-limit", type=int, default=500)
    ap.add_argument("--dnn-graphs", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument(
        "--gumbel-steps", type=int, default=200, help="Gumbel solver steps (64 samples a graph), 300-node reference"
    )
    ap.add_argument("--local-search", type=int, default=300, help="max hill-climbing moves of the +ls rows (0: none)")
    ap.add_argument(
        "--pair-escapes", type=int, default=0, help="pair moves of the +ls+pairs rows (50-node graphs; 0: no such rows)"
    )
    ap.add_argument("--pair-candidates", type=int, default=1, help="best-of-N candidates that get the pair moves")
    ap.add_argument("--beam", type=int, default=0, help="beam width of the beam rows (0: no beam rows)")
    ap.add_argument("--sbs", type=int, default=0, help="distinct samples of the sbs rows (0: no sbs rows)")
    ap.add_argument("--objective", default=None, help="score under this objective (default: the checkpoint's)")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--out", default=str(RESULTS / "bench_policy"))
    args = ap.parse_args()

    for name in ("batch", "decode_batch", "samples", "repeats", "steps"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    model, doc_ckpt = load_policy(args.checkpoint)
    policy = PolicyConfig.from_dict(doc_ckpt["policy"])
    hw = hardware_from_dict(doc_ckpt["hardware"])
    if not args.skip_quality:  # before the slow parts: labels of another problem fail now, not after them
        check_manifest(args.labels50, hw, args.objective or doc_ckpt["objective"], doc_ckpt["lam"])
    doc = {
        "machine": machine_description(),
        "load_before": list(os.getloadavg()),
        "policy": policy.to_dict(),
        "checkpoint": args.checkpoint,
        "checkpoint_step": doc_ckpt["step"],
        "args": vars(args),
    }
    if not args.skip_training:
        algorithms = {
            "imitation": {"name": "imitation"},
            "reinforce": {"name": "reinforce", "reinforce": {"samples": args.rl_samples}},
        }
        doc["training"] = bench_training(
            policy, hw, args.labels30, args.batch, args.steps, algorithms, log=lambda m: print(m, flush=True)
        )
        doc["compile_64"] = bench_compile_bucket(policy, hw, args.labels50, args.batch)
    doc["latency"] = bench_latency(model, doc_ckpt, Path(args.graph350), args.repeats)
    print("latency", doc["latency"], flush=True)
    if not args.skip_quality:
        scored = {**doc_ckpt, "objective": args.objective or doc_ckpt["objective"]}
        doc["objective"] = scored["objective"]
        doc["quality"] = bench_quality(
            model,
            scored,
            args.labels50,
            args.quality_limit,
            args.samples,
            args.dnn_graphs,
            args.decode_batch,
            args.gumbel_steps,
            args.local_search,
            args.pair_escapes,
            args.pair_candidates,
            args.beam,
            args.sbs,
        )
    doc["load_after"] = list(os.getloadavg())
    out = result_stem(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(doc, with_extension(out, ".json"))
    with_extension(out, ".md").write_text(markdown(doc))
    print(markdown(doc))


if __name__ == "__main__":
    main()
