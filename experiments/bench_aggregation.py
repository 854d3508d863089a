"""Dense vs segment message passing: why decoding encodes with segment ops and training with dense.

Times the encoder pass of a trained policy with both implementations (``policy.aggregation``: adjacency
matmuls or ``jax.ops.segment_*`` on the jraph GraphsTuple; the same embeddings, tests/test_policy.py)
on generated graphs of several sizes (respect mode at the training sizes, DNN mode above): forward
only (what every decoder runs), and forward + gradient on the training buckets. Then greedy decoding
of one large model graph with each encoder (the schedules must be equal). Best of ``--repeats``
after compilation, one after the other.

    .venv/bin/python experiments/bench_aggregation.py --out experiments/results/bench_aggregation
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from respect_jax.benchmarks.policy import timed  # noqa: E402
from respect_jax.cli.common import user_errors_exit  # noqa: E402
from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.experiments.report import write_results  # noqa: E402
from respect_jax.graphs import GeneratorConfig, load_graph, make_jax_generator, pad_graph  # noqa: E402
from respect_jax.policy.model import rollout  # noqa: E402
from respect_jax.train.checkpoints import load_policy  # noqa: E402

AGGREGATIONS = ("dense", "segment")
# (generator mode, nodes, batch): the training and held-out sizes in respect mode, model-like DNN graphs above
FORWARD_CASES = (
    ("respect", 30, 128),
    ("respect", 50, 256),
    ("dnn", 100, 64),
    ("dnn", 200, 32),
    ("dnn", 300, 16),
    ("dnn", 300, 1),
)
GRADIENT_CASES = (("respect", 30, 128), ("respect", 50, 64))  # the training graphs (buckets of 32, 64 nodes)


def best_ms(fn, args, repeats: int) -> float:
    """Best wall time in ms of ``fn(*args)`` over ``repeats`` calls after a compiling one."""
    timed(lambda: fn(*args))
    return 1000 * min(timed(lambda: fn(*args))[1] for _ in range(repeats))


def generated(mode: str, nodes: int, batch: int, seed: int):
    gen = make_jax_generator(GeneratorConfig(mode=mode, min_nodes=nodes, max_nodes=nodes))
    return jax.jit(jax.vmap(gen))(jax.random.split(jax.random.PRNGKey(seed), batch))


def encoder_rows(checkpoint: str, model, repeats: int) -> list[dict]:
    """One row per (case, pass): ms with each aggregation (``model`` loaded from ``checkpoint``)."""
    graphdef, params = nnx.split(model)
    encode = {
        agg: jax.jit(lambda p, g, agg=agg: nnx.merge(graphdef, p).encode(g, aggregation=agg)) for agg in AGGREGATIONS
    }
    loss = {  # a scalar of the embeddings, differentiated with respect to the parameters
        agg: jax.jit(
            jax.grad(lambda p, g, agg=agg: jnp.sum(jnp.tanh(nnx.merge(graphdef, p).encode(g, aggregation=agg)[0])))
        )
        for agg in AGGREGATIONS
    }
    rows = []
    for kind, cases, fns in (("forward", FORWARD_CASES, encode), ("forward + gradient", GRADIENT_CASES, loss)):
        for mode, nodes, batch in cases:
            graphs = generated(mode, nodes, batch, seed=nodes)
            row = {"checkpoint": checkpoint, "pass": kind, "mode": mode, "nodes": nodes}
            row["bucket"] = int(graphs.params.shape[-1])
            row["batch"] = batch
            row.update({f"{agg}_ms": best_ms(fns[agg], (params, graphs), repeats) for agg in AGGREGATIONS})
            print(row, flush=True)
            rows.append(row)
    return rows


def greedy_row(checkpoint: str, model, doc: dict, graph_path: str, repeats: int) -> dict:
    """Greedy decoding of one graph (batch of 1) after each encoder; the schedules must agree.

    ``model``, ``doc``: :func:`load_policy` of ``checkpoint``.
    """
    hw = hardware_from_dict(doc["hardware"])
    graphdef, params = nnx.split(model)
    graph = load_graph(graph_path)
    padded = jax.tree.map(lambda x: jnp.asarray(x)[None], pad_graph(graph))

    def decode(p, g, agg):
        m = nnx.merge(graphdef, p)
        h, emb = m.encode(g, aggregation=agg)
        return rollout(m, g, h, emb, hw, doc["objective"], doc["lam"], jax.random.PRNGKey(0), 1, True)

    fns = {agg: jax.jit(lambda p, g, agg=agg: decode(p, g, agg)) for agg in AGGREGATIONS}
    schedules = [np.asarray(fns[agg](params, padded)) for agg in AGGREGATIONS]
    row = {
        "checkpoint": checkpoint,
        "graph": graph.name,
        "nodes": graph.num_nodes,
        "bucket": int(padded.params.shape[-1]),
    }
    row["same_schedule"] = bool(np.array_equal(*schedules))
    row.update({f"{agg}_ms": best_ms(fns[agg], (params, padded), repeats) for agg in AGGREGATIONS})
    print(row, flush=True)
    return row


@user_errors_exit("bench_aggregation")
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--checkpoints",
        nargs="+",
        default=[
            "data/checkpoints/respect_k4_paper",
            "data/checkpoints/respect_k4_paper_si_ft",
            "data/checkpoints/respect_k4_paper_cut",
        ],
    )
    ap.add_argument("--graph", default="data/models/resnet101.json", help="greedy decoding of this graph")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default=None, help="write <out>.json and <out>.md")
    args = ap.parse_args()
    loaded = {c: load_policy(c) for c in args.checkpoints}
    enc = [r for c, (model, _) in loaded.items() for r in encoder_rows(c, model, args.repeats)]
    greedy = [greedy_row(c, model, doc, args.graph, args.repeats) for c, (model, doc) in loaded.items()]
    lines = [
        "# Dense vs segment message passing (encoder of trained policies)",
        "",
        "| checkpoint | pass | graphs | nodes | bucket | batch | dense ms | segment ms | dense / segment |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {r['checkpoint']} | {r['pass']} | {r['mode']} | {r['nodes']} | {r['bucket']} | {r['batch']} "
            f"| {r['dense_ms']:.2f} "
            f"| {r['segment_ms']:.2f} | {r['dense_ms'] / r['segment_ms']:.2f} |"
            for r in enc
        ),
        "",
        f"Greedy decoding of {greedy[0]['graph']} ({greedy[0]['nodes']} nodes, bucket {greedy[0]['bucket']}, "
        "batch of 1):",
        "",
        "| checkpoint | dense encoder ms | segment encoder ms | same schedule |",
        "|---|---:|---:|---|",
        *(
            f"| {r['checkpoint']} | {r['dense_ms']:.1f} | {r['segment_ms']:.1f} | {r['same_schedule']} |"
            for r in greedy
        ),
    ]
    print("\n".join(lines))
    if args.out:
        out = Path(args.out)
        write_results(out.parent, out.name, {"args": vars(args), "encoder": enc, "greedy": greedy}, "\n".join(lines))


if __name__ == "__main__":
    main()
