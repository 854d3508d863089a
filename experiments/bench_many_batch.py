"""Graphs per compiled forward call of ``solver=policy``'s batched form: why the order policy's default is 32.

Schedules ``--graphs`` generated architectures of each ``--nodes`` size with
:func:`~respect_jax.solvers.base.run_solver_many` (the shipped order policy, paper, K = 4) at every
``--batch-sizes`` value, greedy and with the default decoding; graphs/s of the whole call after compilation,
best of ``--repeats`` calls made in turn (batch sizes alternating, so a load change hits them alike). Every
batch size must give the same schedules.

    .venv/bin/python experiments/bench_many_batch.py --out experiments/results/bench_many_batch
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import respect_jax as rj  # noqa: E402
import respect_jax.policy.solver  # noqa: E402,F401  (registers solver=policy)
from respect_jax.experiments.report import write_results  # noqa: E402
from respect_jax.graphs import GeneratorConfig  # noqa: E402
from respect_jax.graphs.generators import generate_dataset  # noqa: E402
from respect_jax.resources import shipped_path  # noqa: E402
from respect_jax.solvers.base import run_solver_many  # noqa: E402

DECODINGS = {"greedy": {"decoding": "greedy"}, "default": {}}


def time_batch_sizes(graphs: list, batch_sizes: list[int], repeats: int, checkpoint: str) -> dict:
    """{decoding: {batch size: graphs/s (best call)}} on ``graphs``; raises if two batch sizes schedule differently."""
    hw = rj.hardware("coral_usb", stages=4)
    out = {}
    for name, options in DECODINGS.items():
        call = lambda b, options=options: run_solver_many("policy", graphs, hw, "paper", 1.0, batch_size=b,  # noqa: E731
                                                          checkpoint=checkpoint, **options)
        reference = [d["assignment"] for d in call(batch_sizes[0])]
        for b in batch_sizes[1:]:  # compiles every batch size before timing
            if [d["assignment"] for d in call(b)] != reference:
                raise RuntimeError(f"{name}: batch size {b} scheduled differently from {batch_sizes[0]}")
        best = {b: float("inf") for b in batch_sizes}
        for _ in range(repeats):
            for b in batch_sizes:
                start = time.perf_counter()
                call(b)
                best[b] = min(best[b], time.perf_counter() - start)
        out[name] = {b: len(graphs) / best[b] for b in batch_sizes}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 200, 400])
    parser.add_argument("--graphs", type=int, default=128)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 32, 64, 256])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True, help="output stem (writes .json and .md)")
    args = parser.parse_args(argv)
    checkpoint = str(shipped_path("data/checkpoints/order_policy"))
    rows = []
    for nodes in args.nodes:
        graphs = generate_dataset(GeneratorConfig(mode="arch", min_nodes=nodes, max_nodes=nodes), args.graphs, 0,
                                  prefix="bench")
        rates = time_batch_sizes(graphs, args.batch_sizes, args.repeats, checkpoint)
        for name, by_size in rates.items():
            rows.append({"nodes": nodes, "decoding": name, "graphs_per_s": by_size})
            print(nodes, name, {b: round(v, 1) for b, v in by_size.items()}, flush=True)
    sizes = args.batch_sizes
    lines = [
        "# Graphs per compiled forward call (`solver=policy`, shipped order policy, paper, K = 4)",
        "",
        f"{args.graphs} generated architectures per size; graphs/s of the whole `run_solver_many` call after "
        f"compilation, best of {args.repeats} calls in turn; in brackets: x the batch size 32 (the default). "
        f"Command: `.venv/bin/python experiments/bench_many_batch.py --out {args.out}`",
        "",
        "| nodes | decoding | " + " | ".join(f"batch {b}" for b in sizes) + " |",
        "|---:|---|" + "---:|" * len(sizes),
    ]
    for row in rows:
        base = row["graphs_per_s"].get(32)
        cells = [f"{v:.1f}" + (f" ({v / base:.2f})" if base else "") for v in row["graphs_per_s"].values()]
        lines.append(f"| {row['nodes']} | {row['decoding']} | " + " | ".join(cells) + " |")
    doc = {"graphs": args.graphs, "batch_sizes": sizes, "repeats": args.repeats, "rows": rows}
    write_results(args.out.parent, args.out.name, doc, "\n".join(lines))
    print(f"wrote {args.out}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
