"""Training the order policy (:mod:`respect_jax.policy.order`) by imitation and expert iteration.

The pool of training instances mixes
* labelled sets (``respect-label`` output: graphs with proven-optimal schedules; targets fixed), and
* generated graphs (any ``graphs`` generator config: the ``arch`` DNN architectures by default), each with
  its own K (uniform in ``stages_min..stages_max``), hardware (a preset with its rates perturbed
  log-uniformly by up to ``perturb``) and objective. Their targets start as the best of the contiguous split of
  the MDP order (the topological order by longest-path depth from the sources, ties by id) and of ``samples``
  perturbed MDP orders, and every ``relabel_every`` steps each target is
  replaced by the best split of the current network's greedy and sampled orders when that is better
  (expert iteration: the teacher improves with the student, and never gets worse).

The loss is the squared error between a node's score and its normalised teacher stage. Model selection
uses a validation set of graphs (``data/models_val`` by default) scheduled at several K and both
objectives: the checkpoint kept is the one with the least mean ratio of its greedy schedule's objective to
the MDP order's contiguous split (a ratio needs no optimum).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import jax
import numpy as np
import optax
from flax import nnx

from respect_jax.costs import Hardware
from respect_jax.graphs.generators import GeneratorConfig, generate_numpy
from respect_jax.graphs.graph import Graph, write_json_atomic
from respect_jax.graphs.padded import bucket_shape, bucket_size
from respect_jax.policy.order import FORMAT as ORDER_FORMAT
from respect_jax.policy.order import (
    OrderPolicyConfig,
    decode_scores,
    default_aggregation,
    make_batch,
    predict_scores,
    score_loss,
    split_order,
    stage_targets,
)
from respect_jax.policy.order_model import OrderPolicy, save_order_policy
from respect_jax.train import run_folder
from respect_jax.train.harness import make_optimizer

HARDWARE_FIELDS = ("sram_bytes", "macs_per_s", "host_bw", "link_bw", "stage_overhead_s")


@dataclass(frozen=True)
class OrderTrainConfig:
    """Every knob of :func:`train_order_policy` (conf/train_order.yaml).

    Attributes:
        steps: optimiser steps; batch_size: graphs per step; lr: peak learning rate (warm-up + cosine decay);
        seed; generated: generated training graphs; generators: generator configs (mode, node range ...), used in
        turn;
        stages_min / stages_max: K range of generated instances; objectives: drawn per instance;
        perturb: hardware rates multiplied by a log-uniform factor in [1/perturb, perturb];
        samples / noise: perturbed orders per relabelling (noise in stage units 1/K);
        relabel_every: steps between relabellings (0: never); eval_every: steps between validations;
        max_nodes_train: graphs above are not trained on.
    """

    steps: int = 2000
    batch_size: int = 16
    lr: float = 1e-3
    seed: int = 0
    generated: int = 400
    generators: tuple[dict, ...] = (
        {"mode": "arch", "min_nodes": 20, "max_nodes": 300},
        {"mode": "arch", "min_nodes": 20, "max_nodes": 120},
        {"mode": "respect", "min_nodes": 30, "max_nodes": 80},
    )
    stages_min: int = 2
    stages_max: int = 8
    objectives: tuple[str, ...] = ("paper", "latency")
    perturb: float = 2.0
    samples: int = 8
    noise: float = 0.05
    relabel_every: int = 500
    eval_every: int = 500
    max_nodes_train: int = 512


@dataclass
class Instance:
    """One training graph with its setting and current target (assignment by node id, objective value)."""

    graph: Graph
    hw: Hardware
    objective: str
    lam: float
    assignment: np.ndarray
    value: float
    fixed: bool  # a proven label: never relabelled


def perturbed(hw: Hardware, stages: int, perturb: float, rng: np.random.Generator) -> Hardware:
    """``hw`` with K = ``stages`` and each rate of :data:`HARDWARE_FIELDS` scaled log-uniformly."""
    values = hw.to_dict()
    values["stages"] = int(stages)
    for name in HARDWARE_FIELDS:
        values[name] *= float(np.exp(rng.uniform(-np.log(perturb), np.log(perturb))))
    return Hardware(**values)


def initial_target(graph: Graph, hw: Hardware, objective: str, lam: float, samples: int, noise: float, seed: int):
    """Best split of the MDP order and of ``samples`` perturbed MDP orders: (assignment, value)."""
    n = graph.num_nodes
    spec_scores = np.arange(n, dtype=np.float64) / max(n - 1, 1)
    assignment, value, _ = decode_scores(graph, hw, objective, lam, spec_scores, samples, noise, seed)
    return assignment, value


def generated_instances(
    cfg: OrderTrainConfig, presets: Sequence[Hardware], lam: float, log: Callable[[str], None]
) -> list[Instance]:
    """``cfg.generated`` instances of the generator, each with a drawn K, preset, perturbation and objective."""
    gens = [GeneratorConfig(**g) for g in cfg.generators]
    out = []
    for i in range(cfg.generated):
        rng = np.random.default_rng([cfg.seed, i, 0x0D])
        graph = generate_numpy(gens[i % len(gens)], rng)
        stages = int(rng.integers(cfg.stages_min, cfg.stages_max + 1))
        hw = perturbed(presets[int(rng.integers(len(presets)))], stages, cfg.perturb, rng)
        objective = cfg.objectives[int(rng.integers(len(cfg.objectives)))]
        assignment, value = initial_target(graph, hw, objective, lam, cfg.samples, cfg.noise, i)
        out.append(Instance(graph, hw, objective, lam, assignment, value, fixed=False))
        if (i + 1) % 100 == 0:
            log(f"  generated {i + 1}/{cfg.generated} instances")
    return out


class Buckets:
    """The pool padded by size bucket: per bucket one stacked batch (PaddedGraph, feats, context) and targets."""

    def __init__(self, pool: list[Instance]):
        self.pool = pool
        groups: dict[int, list[int]] = {}
        for i, inst in enumerate(pool):
            groups.setdefault(bucket_size(inst.graph.num_nodes), []).append(i)
        self.members = groups
        self.data = {}
        for size, idx in groups.items():
            graphs = [pool[i].graph for i in idx]
            shape = bucket_shape(graphs)
            batch = make_batch(graphs, [pool[i].hw for i in idx], [pool[i].objective for i in idx], shape)
            self.data[size] = batch
        self.targets = {size: self._targets(size) for size in groups}

    def _targets(self, size: int) -> np.ndarray:
        n_pad = self.data[size].feats.shape[1]
        out = np.zeros((len(self.members[size]), n_pad), np.float32)
        for row, i in enumerate(self.members[size]):
            inst = self.pool[i]
            out[row, : inst.graph.num_nodes] = stage_targets(inst.graph, inst.assignment, inst.hw.stages)
        return out

    def refresh(self) -> None:
        self.targets = {size: self._targets(size) for size in self.members}

    def sample(self, rng: np.random.Generator, batch_size: int):
        """A batch from one bucket (drawn in proportion to its size): (graphs, feats, context, targets)."""
        sizes = sorted(self.members)
        weights = np.array([len(self.members[s]) for s in sizes], np.float64)
        size = sizes[int(rng.choice(len(sizes), p=weights / weights.sum()))]
        rows = rng.integers(0, len(self.members[size]), batch_size)
        data = self.data[size]
        graphs = jax.tree.map(lambda x: x[rows], data.graphs)
        return graphs, data.feats[rows], data.context[rows], self.targets[size][rows]


def make_train_step(optimizer: nnx.Optimizer):
    @nnx.jit
    def step(model, optimizer, graphs, feats, context, targets):
        def loss_fn(m):
            # segment message passing on CPU (8x faster at 300 nodes: experiments/results/order_aggregation.md)
            aggregation = default_aggregation(feats.shape[1])  # static: the padded size of the traced batch
            return score_loss(m(graphs, feats, context, aggregation), targets, graphs.node_mask)

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    return step


def relabel(model: OrderPolicy, pool: list[Instance], samples: int, noise: float, seed: int) -> tuple[int, float]:
    """Replace every non-fixed target by the network's best split when better; (improved count, mean gain)."""
    improved, gains = 0, []
    movable = [i for i, inst in enumerate(pool) if not inst.fixed]
    scores = predict_scores(model, [pool[i].graph for i in movable], [pool[i].hw for i in movable],
                            [pool[i].objective for i in movable])
    for i, s in zip(movable, scores, strict=True):
        inst = pool[i]
        assignment, value, _ = decode_scores(inst.graph, inst.hw, inst.objective, inst.lam, s, samples, noise, seed + i)
        if value < inst.value * (1 - 1e-9):
            gains.append(1 - value / inst.value)
            inst.assignment, inst.value = assignment, value
            improved += 1
    return improved, float(np.mean(gains)) if gains else 0.0


@dataclass(frozen=True)
class ValInstance:
    """A validation case: a graph in a setting and the reference objective its ratio is taken to."""

    group: str
    graph: Graph
    hw: Hardware
    objective: str
    reference: float


def contiguous_cases(group: str, graphs: Sequence[Graph], base_hw: Hardware, stages: Sequence[int],
                     objectives: Sequence[str], lam: float) -> list[ValInstance]:
    """Every (graph, K, objective) with the MDP order's best contiguous split as the reference."""
    out = []
    for objective in objectives:
        for k in stages:
            hw = Hardware(**{**base_hw.to_dict(), "stages": int(k)})
            for graph in graphs:
                ref = split_order(graph, hw, objective, lam, graph.topological_order())[1]
                out.append(ValInstance(group, graph, hw, objective, ref))
    return out


def validate(model: OrderPolicy, cases: Sequence[ValInstance], lam: float) -> dict:
    """Mean and max ratio of the greedy decoding's objective to each case's reference, per group and
    objective (``{group}_{objective}_mean`` / ``_max``), and ``val_ratio``: the mean of the per-group means."""
    scores = predict_scores(model, [c.graph for c in cases], [c.hw for c in cases], [c.objective for c in cases])
    ratios: dict[tuple[str, str], list[float]] = {}
    for case, s in zip(cases, scores, strict=True):
        _, value, _ = decode_scores(case.graph, case.hw, case.objective, lam, s, 0)
        ratios.setdefault((case.group, case.objective), []).append(value / case.reference)
    out = {}
    for (group, objective), r in sorted(ratios.items()):
        out[f"{group}_{objective}_mean"] = float(np.mean(r))
        out[f"{group}_{objective}_max"] = float(np.max(r))
    out["val_ratio"] = float(np.mean([np.mean(r) for r in ratios.values()]))
    return out


def train_order_policy(
    cfg: OrderTrainConfig,
    policy: OrderPolicyConfig,
    presets: Sequence[Hardware],
    labelled: list[Instance],
    val_cases: Sequence[ValInstance],
    out_dir: str | Path,
    lam: float = 1.0,
    log: Callable[[str], None] = print,
    resolved_config: str | None = None,
) -> dict:
    """Train, validate every ``eval_every`` steps, keep the best network by validation ratio in ``out_dir``.

    Returns the summary (best step, its validation figures, wall times). ``metrics.jsonl`` gets one line
    per validation; ``config.yaml`` the command's ``resolved_config``. The run folder's files are the shared
    ones (:mod:`respect_jax.train.run_folder`); a folder that holds another network is refused before anything
    is written (this trainer does not resume: the same network in the same folder is trained afresh).
    """
    out_dir = Path(out_dir)
    network = {"format": ORDER_FORMAT, "policy": policy.to_dict()}
    held = (out_dir / run_folder.NETWORK_FILE).is_file()
    run_folder.check_resume(out_dir, 0 if held else None, True, network, ignore=("trained", "best"))
    out_dir.mkdir(parents=True, exist_ok=True)
    if resolved_config is not None:
        run_folder.write_config(out_dir, resolved_config, None, log)
    t0 = time.perf_counter()
    log(f"building {cfg.generated} generated instances + {len(labelled)} labelled ...")
    pool = [inst for inst in labelled if inst.graph.num_nodes <= cfg.max_nodes_train]
    pool += generated_instances(cfg, presets, lam, log)
    buckets = Buckets(pool)
    log(f"pool: {len(pool)} instances in buckets {sorted(buckets.members)} ({time.perf_counter() - t0:.0f} s)")
    model = OrderPolicy(policy, rngs=nnx.Rngs(cfg.seed))
    schedule = optax.warmup_cosine_decay_schedule(0.0, cfg.lr, min(200, cfg.steps // 10 + 1), cfg.steps, cfg.lr * 0.05)
    optimizer = nnx.Optimizer(model, make_optimizer(schedule, clip_norm=1.0, weight_decay=1e-5), wrt=nnx.Param)
    step_fn = make_train_step(optimizer)
    rng = np.random.default_rng(cfg.seed)
    best = {"val_ratio": np.inf}
    metrics_path = out_dir / run_folder.METRICS_FILE
    run_folder.write_metrics(metrics_path, [])
    losses = []
    t_train = time.perf_counter()
    for step in range(1, cfg.steps + 1):
        graphs, feats, context, targets = buckets.sample(rng, cfg.batch_size)
        losses.append(float(step_fn(model, optimizer, graphs, feats, context, targets)))
        if step % 100 == 0:
            elapsed = time.perf_counter() - t_train
            log(f"  step {step}/{cfg.steps}: loss {np.mean(losses[-100:]):.4f} ({step / elapsed:.1f} steps/s)")
        if cfg.relabel_every and step % cfg.relabel_every == 0 and step < cfg.steps:
            improved, gain = relabel(model, pool, cfg.samples, cfg.noise, cfg.seed + step)
            buckets.refresh()
            log(f"  step {step}: relabelled, {improved} targets improved (mean gain {gain:.2%})")
        if step % cfg.eval_every == 0 or step == cfg.steps:
            val = validate(model, val_cases, lam)
            row = {"step": step, "loss": float(np.mean(losses[-cfg.eval_every:])), **val,
                   "wall_s": time.perf_counter() - t_train}
            run_folder.append_metrics(metrics_path, [row])
            log(f"  step {step}: loss {row['loss']:.4f}, val ratio to contiguous {val['val_ratio']:.4f} "
                + " ".join(f"{k}={v:.4f}" for k, v in val.items() if k != "val_ratio"))
            if val["val_ratio"] < best["val_ratio"]:
                best = {"step": step, **val}
                save_order_policy(out_dir, model, {"trained": asdict(cfg), "best": best})
    summary = {"best": best, "wall_s": time.perf_counter() - t0, "train_s": time.perf_counter() - t_train,
               "pool": len(pool)}
    write_json_atomic(summary, out_dir / "summary.json")
    return summary
