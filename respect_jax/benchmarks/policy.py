"""Speed figures of the learned scheduler: training throughput, compile time, scheduling latency, many graphs.

Used by ``respect-bench benchmarks=[policy]`` / ``benchmarks=[many]`` and ``experiments/bench_policy.py``.
Every figure is wall time on the default JAX device, measured after compilation unless it is a compile
time; the machine (and how busy it was) belongs beside the figures, which the callers write.

* :func:`bench_training`: graphs/s of update epochs (imitation on a labelled set's first size
  bucket, 30-node graphs: bucket 32; REINFORCE variants and self-improvement on generated 30-node
  graphs), and the compile time of each epoch;
* :func:`bench_compile_bucket`: compile time of the imitation update epoch on a labelled set's
  first bucket (50-node graphs: bucket 64);
* :func:`bench_latency`: greedy scheduling time of one graph (a batch of 1), and its compile time;
* :func:`bench_many`: graphs/s of ``solver=policy``'s batched form on many generated graphs (one
  compiled forward call per batch of a size bucket, batched re-scoring), per decoding, and the compile time apart.

The order policy's training throughput is :mod:`respect_jax.benchmarks.order`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.costs import Hardware, hardware_from_dict
from respect_jax.graphs import GeneratorConfig, generate_dataset, load_graph, pad_graph
from respect_jax.policy.config import PolicyConfig
from respect_jax.policy.decoding import Decoding, make_decoder
from respect_jax.policy.model import SchedulingPolicy
from respect_jax.train.config import AlgorithmConfig, TrainConfig
from respect_jax.train.data import load_labelled_batches
from respect_jax.train.loop import Trainer

RL_NODES = 30  # nodes of the generated graphs of the REINFORCE throughput epochs


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``(fn(), seconds)``: the result of ``fn()`` and its wall time, waiting for device arrays."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0


#: the update epochs :func:`bench_training` times by default: row name -> algorithm config (conf/algorithm)
DEFAULT_ALGORITHMS = {
    "imitation": {"name": "imitation"},
    "reinforce": {"name": "reinforce", "reinforce": {"samples": 8, "baseline": "pomo"}},
}


def algorithm_configs(algorithms: dict[str, dict] | None) -> dict[str, AlgorithmConfig]:
    """Row name -> :class:`AlgorithmConfig` (one phase each); a ValueError names a bad row."""
    configs = {}
    for row, values in (algorithms or DEFAULT_ALGORITHMS).items():
        algo = AlgorithmConfig.from_dict(dict(values))
        if algo.two_phase:
            raise ValueError(f"bench algorithm {row}: time one phase at a time, not {algo.name}")
        configs[row] = algo
    return configs


def samples_per_graph(algo: AlgorithmConfig) -> int | None:
    """Schedules decoded per graph by an update step of ``algo`` (None: imitation decodes none)."""
    if algo.name == "reinforce":
        return algo.reinforce.samples + (algo.reinforce.baseline == "greedy")
    if algo.name == "self_improvement":
        return algo.self_improvement.samples
    return None


def bench_training(
    policy: PolicyConfig,
    hw: Hardware,
    labels: str | Path,
    batch: int,
    steps: int,
    algorithms: dict[str, dict] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Update epochs on 30-node graphs, one per algorithm: compile time and graphs/s.

    Args:
        policy: architecture of the (freshly initialised) policy being trained.
        hw: the hardware of the problem (objective ``paper``, lam 1).
        labels: labelled dataset folder (its first 1024 graphs; the first size bucket is used for
            imitation, ``RL_NODES``-node generated graphs for the other algorithms).
        batch: graphs per update step.
        steps: update steps per timed epoch (one jitted ``lax.scan``).
        algorithms: row name -> algorithm config dict (``name`` one of ``imitation``,
            ``reinforce``, ``self_improvement``, with its options as in conf/algorithm); None:
            :data:`DEFAULT_ALGORITHMS`.
        log: called with one line (``"<row> <figures dict>"``) after each algorithm (None: silent).

    Returns:
        ``{row: r}``, each ``r`` with ``algorithm`` (its config), ``bucket_nodes`` (padded nodes of
        the labelled bucket), ``batch_size``, ``samples_per_graph`` (schedules decoded per graph:
        sampled ones plus a greedy baseline rollout; None for imitation), ``steps_timed``,
        ``graphs_per_s`` (``steps * batch`` / best of two epochs after the first, in seconds) and
        ``compile_s`` (first epoch minus best epoch, s, >= 0).
    """
    out = {}
    data = load_labelled_batches([labels], hw, "paper", 1.0, limit=1024)
    for row, algo in algorithm_configs(algorithms).items():
        tcfg = TrainConfig(
            steps=steps * 3,
            batch_size=batch,
            steps_per_epoch=steps,
            checkpoint_every=steps * 3,
            eval_every=steps * 3,
            eval_graphs=0,
        )
        gens = [GeneratorConfig(min_nodes=RL_NODES, max_nodes=RL_NODES)]
        trainer = Trainer(policy, hw, "paper", 1.0, algo, tcfg, generators=gens, datasets=data[:1])
        state = trainer.init_state()
        (state, *_), first = timed(lambda state=state, trainer=trainer: trainer.run_epoch(state))
        runs = []
        for _ in range(2):
            (state, *_), t = timed(lambda state=state, trainer=trainer: trainer.run_epoch(state))
            runs.append(t)
        best = min(runs)
        out[row] = {
            "algorithm": algo.to_dict(),
            "bucket_nodes": int(data[0].graphs.params.shape[-1]),
            "batch_size": batch,
            "samples_per_graph": samples_per_graph(algo),
            "steps_timed": steps,
            "graphs_per_s": steps * batch / best,
            "compile_s": max(first - best, 0.0),
        }
        if log is not None:
            log(f"{row} {out[row]}")
    return out


def bench_compile_bucket(policy: PolicyConfig, hw: Hardware, labels: str | Path, batch: int) -> dict:
    """Compile time of the imitation update epoch (2 steps) on a labelled set's first bucket.

    Args:
        policy: architecture of the policy.
        hw: the hardware of the problem (objective ``paper``, lam 1).
        labels: labelled dataset folder (its first 256 graphs; 50-node graphs: the 64-node bucket).
        batch: graphs per update step.

    Returns:
        ``{"bucket_nodes": padded nodes of the bucket, "imitation_compile_s": lower + compile, s}``.
    """
    data = load_labelled_batches([labels], hw, "paper", 1.0, limit=256)
    tcfg = TrainConfig(steps=2, batch_size=batch, steps_per_epoch=2, checkpoint_every=2, eval_every=2, eval_graphs=0)
    trainer = Trainer(policy, hw, "paper", 1.0, AlgorithmConfig("imitation"), tcfg, datasets=data[:1])
    state = trainer.init_state()
    fn = trainer.epoch_fn("imitation", 0)
    t0 = time.perf_counter()
    fn.lower(state, trainer.datasets[0]).compile()
    return {"bucket_nodes": int(data[0].graphs.params.shape[-1]), "imitation_compile_s": time.perf_counter() - t0}


def bench_latency(model: SchedulingPolicy, doc: dict, graph_path: str | Path, repeats: int) -> dict:
    """Greedy scheduling of one large graph (batch of 1) after compilation.

    Args:
        model: the trained policy.
        doc: its checkpoint document (``hardware``, ``objective``, ``lam``), as :func:`load_policy`
            returns it.
        graph_path: graph JSON file (padded to its own size bucket, batch of 1).
        repeats: timed decodings after the first (compiling) one, each with a fresh key.

    Returns:
        ``graph`` (name), ``num_nodes``, ``bucket_nodes`` (padded), ``greedy_ms_best`` and
        ``greedy_ms_median`` (ms per decoding of the one graph) and ``compile_s`` (first call, s).
    """
    hw = hardware_from_dict(doc["hardware"])
    graph = load_graph(graph_path)
    padded = jax.tree.map(lambda x: jnp.asarray(x)[None], pad_graph(graph))
    run, params = make_decoder(model, hw, doc["objective"], doc["lam"], Decoding("greedy"))
    _, compile_s = timed(lambda: run(params, padded, jax.random.PRNGKey(0)))
    times = [timed(lambda i=i: run(params, padded, jax.random.PRNGKey(i)))[1] for i in range(repeats)]
    return {
        "graph": graph.name,
        "num_nodes": graph.num_nodes,
        "bucket_nodes": int(padded.params.shape[-1]),
        "greedy_ms_best": 1000 * min(times),
        "greedy_ms_median": 1000 * float(np.median(times)),
        "compile_s": compile_s,
    }


#: the decodings :func:`bench_many` times by default: row name -> ``solver=policy`` options (``default``: none, i.e.
#: solver=policy's defaults; the command passes conf/solver/policy.yaml's options under every row)
DEFAULT_MANY_DECODINGS = {"greedy": {"decoding": "greedy"}, "default": {}}


def bench_many(
    checkpoint: str | Path,
    hw: Hardware,
    objective: str,
    lam: float,
    graphs: GeneratorConfig,
    count: int,
    batch_size: int,
    repeats: int,
    seed: int = 0,
    decodings: dict[str, dict] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Graphs/s of ``solver=policy``'s batched form: :func:`~respect_jax.solvers.base.run_solver_many` (one forward
    pass per ``batch_size`` graphs of a size bucket, each graph's orders and splits, then the shared evaluator's
    batched re-scoring into one result document per graph).

    Args:
        checkpoint: the policy's run folder.
        hw, objective, lam: the problem every graph is scheduled for.
        graphs: generator of the ``count`` graphs (NumPy twin, ``seed``).
        count: graphs scheduled per timed call.
        batch_size: graphs per compiled forward call (the call's graphs share a size bucket when ``graphs`` draws
            one node count).
        repeats: timed calls after the first (compiling) one, per decoding.
        decodings: row name -> ``solver=policy`` options (decoding, samples, local_search, ...); None:
            :data:`DEFAULT_MANY_DECODINGS`.
        log: called with one line per decoding (None: silent).

    Returns:
        ``{row: r}``, each ``r`` with ``options``, ``decoding`` (the label the solver reports), ``graphs``,
        ``nodes_min``/``nodes_max``, ``batch_size``, ``buckets`` (padded shapes), ``graphs_per_s`` (``count`` / best
        timed call: the whole call after compilation), ``graphs_per_s_median``, ``graphs_per_cpu_s`` (``count`` / the
        process's CPU seconds of its cheapest timed call, all threads: the figure a busy machine changes least),
        ``schedule_ms_mean`` (mean ``solve_time_s`` per graph: its share of the solver's call without compilation,
        without the re-scoring), ``compile_s`` (compiling the forward pass of every bucket in the first
        call, s; from the persistent cache when it has them), ``first_call_s`` (the whole first call, s; the
        evaluator's compilation included), ``mean_objective`` (of the documents) and ``threads`` (the solver's worker
        threads, None when it reports none).
    """
    import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
    from respect_jax.solvers.base import run_solver_many

    dataset = generate_dataset(graphs, count, seed, prefix="bench")
    out = {}
    for row, options in (decodings or DEFAULT_MANY_DECODINGS).items():
        many = lambda options=options: run_solver_many(  # noqa: E731
            "policy", dataset, hw, objective, lam, batch_size=batch_size, **{**options, "checkpoint": str(checkpoint)}
        )
        first, first_s = timed(many)
        compiles = {tuple(r["info"]["bucket"]): r["info"]["compile_s"] for r in first}
        times, cpu = [], []
        for _ in range(repeats):
            cpu_start = time.process_time()
            docs, seconds = timed(many)
            times.append(seconds)
            cpu.append(time.process_time() - cpu_start)
            if [d["assignment"] for d in docs] != [d["assignment"] for d in first]:
                raise RuntimeError(f"bench many {row}: a repeated call scheduled differently (not deterministic)")
        out[row] = {
            "options": dict(options),
            "decoding": first[0]["info"]["decoding"],
            "graphs": count,
            "nodes_min": min(g.num_nodes for g in dataset),
            "nodes_max": max(g.num_nodes for g in dataset),
            "batch_size": batch_size,
            "buckets": [list(b) for b in compiles],
            "graphs_per_s": count / min(times),
            "graphs_per_s_median": count / float(np.median(times)),
            "graphs_per_cpu_s": count / min(cpu),
            "schedule_ms_mean": 1000 * float(np.mean([d["solve_time_s"] for d in docs])),
            "compile_s": float(sum(compiles.values())),
            "first_call_s": first_s,
            "mean_objective": float(np.mean([d["objective"] for d in docs])),
            "threads": first[0]["info"].get("threads"),
        }
        if log is not None:
            log(f"{row} {out[row]}")
    return out


@dataclass(frozen=True)
class PolicyBenchConfig:
    """``respect-bench benchmarks=[policy]``: the checkpoint (run folder) whose policy is timed, the labelled sets
    of the training epochs (``labels``: throughput; ``labels_large``: the compile time of a larger bucket), the
    graph of the latency figure, graphs per update step, update steps per timed epoch, the update epochs timed
    (row name -> algorithm config) and the timed greedy decodings of the graph."""

    checkpoint: str
    labels: str
    labels_large: str
    graph: str
    batch: int
    steps: int
    algorithms: dict
    repeats: int


def load_policy_inputs(config: PolicyBenchConfig) -> dict:
    """Check the policy benchmark's inputs and load them before anything is measured.

    Raises a user error (one line) for a missing or foreign checkpoint, a labelled set that is missing or made
    for another problem, a bad algorithm row, or an unreadable graph.
    """
    from respect_jax.train.checkpoints import load_policy
    from respect_jax.train.data import check_manifest

    if not Path(config.checkpoint).exists():
        raise FileNotFoundError(f"policy.checkpoint {config.checkpoint} does not exist")
    model, doc = load_policy(config.checkpoint)
    hw = hardware_from_dict(doc["hardware"])
    for labels in (config.labels, config.labels_large):
        check_manifest(labels, hw, "paper", 1.0)  # the training benchmarks use the paper objective, lam 1
    if not config.algorithms:
        raise ValueError("policy.algorithms is empty: name at least one update epoch to time")
    algorithm_configs(config.algorithms)  # a bad row is a one-line error
    graph = load_graph(config.graph)
    return {"model": model, "doc": doc, "policy": PolicyConfig.from_dict(doc["policy"]), "hw": hw, "graph": graph}


def bench_policy(config: PolicyBenchConfig, inputs: dict, log: Callable[[str], None]) -> dict:
    """The learned scheduler's speed figures (:func:`bench_training`, :func:`bench_compile_bucket`,
    :func:`bench_latency`) on the inputs :func:`load_policy_inputs` loaded."""
    from respect_jax.train.checkpoints import checkpoint_label

    policy, hw, doc = inputs["policy"], inputs["hw"], inputs["doc"]
    training = bench_training(policy, hw, config.labels, config.batch, config.steps, config.algorithms, log=log)
    compile_large = bench_compile_bucket(policy, hw, config.labels_large, config.batch)
    log(f"compile {compile_large}")
    latency = bench_latency(inputs["model"], doc, config.graph, config.repeats)
    log(f"latency {latency}")
    return {
        "checkpoint": str(config.checkpoint),
        "checkpoint_step": doc["step"],
        "checkpoint_label": checkpoint_label(doc),
        "policy": policy.to_dict(),
        "labels": str(config.labels),
        "labels_large": str(config.labels_large),
        "training_nodes": RL_NODES,
        "training": training,
        "compile_large": compile_large,
        "latency": latency,
    }


@dataclass(frozen=True)
class ManyBenchConfig:
    """``respect-bench benchmarks=[many]``: ``graphs`` generated graphs of ``nodes`` nodes (generator ``mode``)
    scheduled by ``solver=policy`` with the checkpoint (the shipped order policy by default), ``batch_size`` per
    compiled forward call, ``repeats`` timed calls per decoding (row name -> ``solver=policy`` options)."""

    checkpoint: str
    graphs: int
    nodes: int
    mode: str
    batch_size: int
    repeats: int
    decodings: dict


def check_many(config: ManyBenchConfig) -> None:
    """One-line user error for a bad many-graphs benchmark (before anything is measured)."""
    from respect_jax.resources import shipped_path

    if not config.decodings:
        raise ValueError("many.decodings is empty: name at least one decoding to time")
    if not shipped_path(config.checkpoint).exists():
        raise FileNotFoundError(f"many.checkpoint {config.checkpoint} does not exist")
    GeneratorConfig(mode=config.mode, min_nodes=config.nodes, max_nodes=config.nodes)


def run_bench_many(config: ManyBenchConfig, hw: Hardware, objective: str, log: Callable[[str], None]) -> dict:
    """:func:`bench_many` on the config's generated graphs (lam 1, seed 0), with the config beside the rows."""
    from respect_jax.resources import shipped_path

    graphs = GeneratorConfig(mode=config.mode, min_nodes=config.nodes, max_nodes=config.nodes)
    rows = bench_many(shipped_path(config.checkpoint), hw, objective, 1.0, graphs, config.graphs, config.batch_size,
                      config.repeats, 0, config.decodings, log)  # fmt: skip
    keys = ("checkpoint", "mode", "nodes", "graphs", "batch_size", "repeats")
    return {**{k: getattr(config, k) for k in keys}, "objective": objective, "stages": hw.stages, "rows": rows}
