"""Training throughput of the order policy (``respect-bench benchmarks=[order_train]``).

:func:`bench_order_train` times the order trainer's own loop (:mod:`respect_jax.train.order`): a batch drawn from
the padded pool (``Buckets.sample``) and one optimiser step (``make_train_step``: imitation of the teacher's
normalised stages, segment message passing on CPU), per graph size, on generated graphs of exactly that many nodes
(one size bucket each). The teacher's targets do not change the step's cost, so they are the cheap ones the trainer
starts from (the best contiguous split of the MDP order). Relabelling and validation are left out: they run every few
hundred steps and are timed by the solver benchmarks. Compile time (the first step of a bucket) is reported apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import optax
from flax import nnx

from respect_jax.costs import Hardware
from respect_jax.graphs import GeneratorConfig, bucket_size, generate_dataset
from respect_jax.policy.order import OrderPolicyConfig, default_aggregation
from respect_jax.policy.order_model import OrderPolicy
from respect_jax.train.harness import make_optimizer
from respect_jax.train.order import Buckets, Instance, initial_target, make_train_step


@dataclass(frozen=True)
class OrderTrainBenchConfig:
    """``respect-bench benchmarks=[order_train]``: graphs of each of ``nodes`` (generator ``mode``), ``pool`` of them
    per size, ``batch_size`` graphs per step, ``steps`` steps per timed epoch, best of ``repeats`` epochs; the
    network ``policy`` (the shipped architecture by default); ``lr`` of the optimiser (as the trainer's)."""

    nodes: tuple[int, ...]
    mode: str
    pool: int
    batch_size: int
    steps: int
    repeats: int
    lr: float
    policy: dict


def check_order_train(config: OrderTrainBenchConfig) -> None:
    """One-line user error for a bad training benchmark (before anything is measured)."""
    if not config.nodes:
        raise ValueError("order_train.nodes is empty: name at least one graph size")
    for n in config.nodes:
        GeneratorConfig(mode=config.mode, min_nodes=int(n), max_nodes=int(n))
    OrderPolicyConfig.from_dict(dict(config.policy))
    if not config.lr > 0:
        raise ValueError(f"order_train.lr must be > 0, got {config.lr}")


def training_pool(graphs: GeneratorConfig, count: int, hw: Hardware, objective: str, seed: int) -> list[Instance]:
    """``count`` generated instances for ``hw`` and ``objective`` (lam 1), each with the trainer's initial target (the
    best contiguous split of the MDP order, no samples)."""
    out = []
    for graph in generate_dataset(graphs, count, seed, prefix="bench"):
        assignment, value = initial_target(graph, hw, objective, 1.0, 0, 0.0, seed)
        out.append(Instance(graph, hw, objective, 1.0, assignment, value, fixed=False))
    return out


def _epoch(run: tuple, count: int) -> float:
    """Seconds of ``count`` trainer steps of ``run`` = (buckets, model, optimizer, step, rng, batch size)."""
    buckets, model, optimizer, step, rng, batch_size = run
    start = time.perf_counter()
    for _ in range(count):
        batch = buckets.sample(rng, batch_size)
        float(step(model, optimizer, *batch))  # the trainer reads every loss
    return time.perf_counter() - start


def bench_order_train(
    config: OrderTrainBenchConfig,
    hw: Hardware,
    objective: str,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Graphs/s of the order trainer's step at each size of ``config.nodes``.

    Returns ``{"policy": network config, "rows": {str(nodes): r}}``, each ``r`` with ``nodes``, ``bucket_nodes``
    (padded), ``aggregation``, ``batch_size``, ``steps_timed``, ``graphs_per_s`` (``steps * batch_size`` / best
    epoch: batch sampling, forward, backward and update, waiting for the loss as the trainer does),
    ``graphs_per_s_median``, ``step_ms`` (best epoch / steps) and ``compile_s`` (the first step of the bucket, less
    one timed step; tracing + XLA, or loading it from the persistent cache).
    """
    policy = OrderPolicyConfig.from_dict(dict(config.policy))
    rows = {}
    for nodes in config.nodes:
        graphs = GeneratorConfig(mode=config.mode, min_nodes=int(nodes), max_nodes=int(nodes))
        buckets = Buckets(training_pool(graphs, config.pool, hw, objective, seed))
        model = OrderPolicy(policy, rngs=nnx.Rngs(seed))
        optimizer = nnx.Optimizer(model, make_optimizer(optax.constant_schedule(config.lr), clip_norm=1.0,
                                                        weight_decay=1e-5), wrt=nnx.Param)
        step = make_train_step(optimizer)
        rng = np.random.default_rng(seed)
        run = (buckets, model, optimizer, step, rng, config.batch_size)
        first = _epoch(run, 1)
        times = [_epoch(run, config.steps) for _ in range(config.repeats)]
        best = min(times)
        padded = bucket_size(int(nodes))
        rows[str(nodes)] = {
            "nodes": int(nodes),
            "bucket_nodes": padded,
            "aggregation": default_aggregation(padded),
            "batch_size": config.batch_size,
            "steps_timed": config.steps,
            "graphs_per_s": config.steps * config.batch_size / best,
            "graphs_per_s_median": config.steps * config.batch_size / float(np.median(times)),
            "step_ms": 1000 * best / config.steps,
            "compile_s": max(first - best / config.steps, 0.0),
        }
        if log is not None:
            log(f"{nodes} nodes {rows[str(nodes)]}")
    return {"policy": policy.to_dict(), "mode": config.mode, "objective": objective, "stages": hw.stages,
            "pool": config.pool, "repeats": config.repeats, "rows": rows}


def order_train_markdown(o: dict) -> list[str]:
    """The "Order policy training" section of the results page (lines)."""
    p = o["policy"]
    lines = [
        f"## Order policy training (`respect_jax/train/order.py` step; {p['encoder']} x {p['layers']} layers, "
        f"width {p['width']}; {o['objective']}, K={o['stages']})",
        "",
        f"Generated {o['mode']} graphs of exactly the given size ({o['pool']} per size, one bucket); graphs/s of the "
        f"trainer's loop (batch drawn from the padded pool, forward, backward, update, loss read back), best of "
        f"{o['repeats']} timed epochs after the compiling step; compile time apart.",
        "",
        "| nodes | bucket | aggregation | batch | graphs/s | median graphs/s | ms/step | compile s |",
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in o["rows"].values():
        lines.append(
            f"| {r['nodes']} | {r['bucket_nodes']} | {r['aggregation']} | {r['batch_size']} | "
            f"{r['graphs_per_s']:,.1f} | {r['graphs_per_s_median']:,.1f} | {r['step_ms']:,.0f} | {r['compile_s']:.1f} |"
        )
    lines.append("")
    return lines


def nodes_tuple(values: Sequence) -> tuple[int, ...]:
    """The configured sizes as ints; a one-line error names a bad one."""
    out = []
    for v in values:
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"order_train.nodes must hold integers >= 1, got {v!r}")
        out.append(v)
    return tuple(out)
