"""Dense vs segment message passing in the order policy, on this machine's backend: inference and training.

Times the shipped order policy's forward pass (scores of every node) with N x N adjacency matmuls (``dense``)
and with O(E) gathers and segment sums (``segment``) on generated DNN architectures of several sizes, one
graph and a batch, best of ``--repeats`` after compilation; then one training step (forward, gradient, Adam
update) of a fresh network on batches of 100- and 300-node architectures: the training throughput in graphs
per second. ``respect_jax.policy.order.default_aggregation`` picks ``segment`` on CPU from these figures; both
give the same scores up to float error (reported).

    .venv/bin/python experiments/order_aggregation.py --out experiments/results/order_aggregation
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from respect_jax.benchmarks.env import best_time  # noqa: E402
from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.experiments.report import write_results  # noqa: E402
from respect_jax.graphs.architectures import generate_arch_numpy  # noqa: E402
from respect_jax.graphs.padded import bucket_shape  # noqa: E402
from respect_jax.policy.order import (  # noqa: E402
    OrderPolicyConfig,
    as_network,
    forward_executable,
    make_batch,
    score_loss,
)
from respect_jax.policy.order_model import OrderPolicy, load_order_policy  # noqa: E402
from respect_jax.reporting import markdown_table  # noqa: E402

SIZES = ((20, 30), (40, 60), (90, 120), (190, 250), (400, 500))  # node ranges of the generated architectures
TRAIN_SIZES = ((90, 110), (280, 320))  # about 100 and 300 nodes


def training_rows(hw, batch_size: int, repeats: int, rng: np.random.Generator) -> list[list]:
    """[nodes, bucket, batch, dense ms, segment ms, dense graphs/s, segment graphs/s] of one training step."""
    import optax
    from flax import nnx

    rows = []
    for lo, hi in TRAIN_SIZES:
        graphs = [generate_arch_numpy(lo, hi, rng, name=f"t{i}") for i in range(batch_size)]
        shape = bucket_shape(graphs)
        batch = make_batch(graphs, [hw] * batch_size, ["latency"] * batch_size, shape)
        targets = rng.random(batch.feats.shape[:2]).astype(np.float32)
        ms = {}
        for aggregation in ("dense", "segment"):
            model = OrderPolicy(OrderPolicyConfig(), rngs=nnx.Rngs(0))
            optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

            @nnx.jit(static_argnames="aggregation")
            def step(model, optimizer, graphs, feats, context, targets, aggregation):
                def loss_fn(m):
                    return score_loss(m(graphs, feats, context, aggregation), targets, graphs.node_mask)

                loss, grads = nnx.value_and_grad(loss_fn)(model)
                optimizer.update(model, grads)
                return loss

            def call(model=model, optimizer=optimizer, step=step, aggregation=aggregation, batch=batch,
                     targets=targets):
                return step(model, optimizer, batch.graphs, batch.feats, batch.context, targets,
                            aggregation).block_until_ready()

            call()  # compiles
            ms[aggregation] = 1e3 * best_time(call, repeats)
        rows.append([f"{lo}-{hi}", shape[0], batch_size, ms["dense"], ms["segment"],
                     1e3 * batch_size / ms["dense"], 1e3 * batch_size / ms["segment"]])
        print(f"training {lo}-{hi} nodes: dense {ms['dense']:.0f} ms, segment {ms['segment']:.0f} ms per step",
              flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "order_aggregation")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import yaml

    preset = yaml.safe_load((ROOT / "conf" / "hardware" / "coral_usb.yaml").read_text())
    hw = hardware_from_dict({**preset, "stages": 4})
    model, _ = load_order_policy(ROOT / "data" / "checkpoints" / "order_policy")
    rng = np.random.default_rng(0)
    rows = []
    for lo, hi in SIZES:
        graphs = [generate_arch_numpy(lo, hi, rng, name=f"a{i}") for i in range(args.batch)]
        shape = bucket_shape(graphs)
        for batch_size in (1, args.batch):
            batch = make_batch(graphs[:batch_size], [hw] * batch_size, ["latency"] * batch_size, shape)
            ms, scores = {}, {}
            for aggregation in ("dense", "segment"):
                network = as_network(model)
                forward = forward_executable(network, batch, aggregation)

                def call(params=network.params, forward=forward, batch=batch):
                    return forward(params, batch.graphs, batch.feats, batch.context).block_until_ready()

                call()  # compiles
                ms[aggregation] = 1e3 * best_time(call, args.repeats)
                scores[aggregation] = np.asarray(call())
            diff = float(np.abs(scores["dense"] - scores["segment"]).max())
            rows.append([f"{lo}-{hi}", shape[0], batch_size, ms["dense"], ms["segment"], ms["dense"] / ms["segment"],
                         diff])
            print(f"{lo}-{hi} nodes (bucket {shape[0]}), batch {batch_size}: dense {ms['dense']:.1f} ms, "
                  f"segment {ms['segment']:.1f} ms", flush=True)
    header = ["nodes", "bucket", "batch", "dense ms", "segment ms", "dense / segment", "max |score diff|"]
    train = training_rows(hw, args.batch, max(1, args.repeats // 2), rng)
    train_header = ["nodes", "bucket", "batch", "dense ms", "segment ms", "dense graphs/s", "segment graphs/s"]
    markdown = ("# Order policy: dense vs segment message passing\n\n"
                "## Forward pass (inference)\n\n"
                "Best of the repeats after compilation; generated DNN architectures, Coral USB preset, K = 4.\n\n"
                + markdown_table(header, rows, digits=2)
                + "\n\n## One training step (forward, gradient, Adam update)\n\n"
                + markdown_table(train_header, train, digits=1))
    doc = {"rows": [dict(zip(header, r, strict=True)) for r in rows],
           "training": [dict(zip(train_header, r, strict=True)) for r in train],
           "batch": args.batch, "repeats": args.repeats}
    for path in write_results(args.out.parent, args.out.name, doc, markdown):
        print("wrote", path)


if __name__ == "__main__":
    main()
