"""``respect-bench``: speed figures (env steps/s vs a Python loop env, generator graphs/s, the
learned scheduler's training throughput, compile time and scheduling latency, and how many graphs/s
``solver=policy`` schedules at once).

Every ratio is measured in one run on one machine; the machine description and the load average
before/after are written beside the figures in ``experiments/results/<out_name>.{md,json}``
(``bench_env`` by default).

    respect-bench                                                  # env + generator
    respect-bench benchmarks=[policy] out_name=bench_policy_speed  # the learned scheduler
    respect-bench benchmarks=[many] out_name=bench_many            # many graphs at once (solver=policy)
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import hydra
import jax
import numpy as np
from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from tqdm import tqdm

from respect_jax.cli.common import (
    CONF_DIR,
    check_counts,
    check_group_choices,
    hardware_from_cfg,
    job_path,
    machine_description,
    setup_compilation_cache,
    shipped_path,
    user_errors_exit,
)
from respect_jax.costs import Hardware
from respect_jax.env import SchedulingEnv, random_rollout
from respect_jax.graphs import GeneratorConfig, make_jax_generator, padded_to_graph, write_json_atomic
from respect_jax.reference import LoopEnv

BENCHMARKS = ("env", "generator", "policy", "many")


def best_time(fn, repeats: int) -> float:
    """Best wall time of ``fn()`` (which must block until its result is ready) over repeats."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_env(
    hw: Hardware, objective: str, batch: int, nodes: int, mode: str, repeats: int, loop_graphs: int, seed: int
) -> dict:
    """JAX env (jit + vmap + scan, random allowed actions) vs :class:`LoopEnv` on the same graphs."""
    cfg = GeneratorConfig(mode=mode, min_nodes=nodes, max_nodes=nodes)
    generate = jax.jit(jax.vmap(make_jax_generator(cfg)))
    graphs = jax.block_until_ready(generate(jax.random.split(jax.random.key(seed), batch)))
    env = SchedulingEnv(hw, objective=objective, normalise=False)

    @jax.jit
    def rollout(graphs, key):
        assignment, returns = random_rollout(env, graphs, key)
        return assignment, returns

    start = time.perf_counter()
    jax.block_until_ready(rollout(graphs, jax.random.key(seed + 1)))
    compile_s = time.perf_counter() - start
    keys = iter(jax.random.split(jax.random.key(seed + 2), repeats))
    jax_s = best_time(lambda: jax.block_until_ready(rollout(graphs, next(keys))), repeats)
    steps = batch * nodes

    loop_env = LoopEnv(hw, objective)
    rng = np.random.default_rng(seed)
    host_graphs = [padded_to_graph(jax.tree.map(lambda x, i=i: x[i], graphs)) for i in range(loop_graphs)]
    start = time.perf_counter()
    loop_steps = 0
    for graph in tqdm(host_graphs, desc="python loop env", leave=False):
        loop_env.reset(graph)
        done = False
        while not done:
            allowed = np.flatnonzero(loop_env.action_mask())
            _, _, done = loop_env.step(int(rng.choice(allowed)))
            loop_steps += 1
    loop_s = time.perf_counter() - start
    jax_rate, loop_rate = steps / jax_s, loop_steps / loop_s
    return {
        "jax_env_steps_per_s": jax_rate,
        "jax_env_batch": batch,
        "nodes": nodes,
        "stages": hw.stages,
        "mode": mode,
        "jax_rollout_s": jax_s,
        "jax_compile_s": compile_s,
        "loop_env_steps_per_s": loop_rate,
        "loop_env_graphs": loop_graphs,
        "speedup": jax_rate / loop_rate,
    }


def bench_generator(batch: int, nodes: int, modes, repeats: int, seed: int) -> dict:
    """Graphs/s of the pure-JAX generator (jit + vmap), per mode."""
    out = {}
    for mode in modes:
        generate = jax.jit(jax.vmap(make_jax_generator(GeneratorConfig(mode=mode, min_nodes=nodes, max_nodes=nodes))))
        jax.block_until_ready(generate(jax.random.split(jax.random.key(seed), batch)))
        keys = iter(jax.random.split(jax.random.key(seed + 1), repeats))
        seconds = best_time(
            lambda generate=generate, keys=keys: jax.block_until_ready(generate(jax.random.split(next(keys), batch))),
            repeats,
        )
        out[mode] = {"graphs_per_s": batch / seconds, "batch": batch, "nodes": nodes}
    return out


def to_markdown(results: dict) -> str:
    lines = ["# respect-bench", ""]
    m = results["machine"]
    load = ""
    if "load_before" in results and "load_after" in results:
        load = (
            f"; load average {results['load_before'][0]:.1f} before / {results['load_after'][0]:.1f} after "
            "(on a shared machine the figures are lower bounds)"
        )
    lines.append(f"Machine: {m['platform']}, {m['cpu_count']} CPUs, JAX {m['jax']} on {m['jax_backend']}{load}.")
    lines.append("")
    if "env" in results:
        e = results["env"]
        lines += [
            f"## Environment ({e['nodes']}-node {e['mode']} graphs, K={e['stages']}, random allowed actions)",
            "",
            "| environment | env steps/s |",
            "|---|---|",
            f"| JAX (jit+vmap+scan, {e['jax_env_batch']} graphs at once) | {e['jax_env_steps_per_s']:,.0f} |",
            f"| Python loop (one graph at a time, {e['loop_env_graphs']} graphs) | {e['loop_env_steps_per_s']:,.0f} |",
            f"| **ratio** | **{e['speedup']:,.0f}x** |",
            "",
            f"JAX compile time: {e['jax_compile_s']:.2f} s.",
            "",
        ]
    if "generator" in results:
        lines += ["## JAX graph generator", "", "| mode | nodes | graphs/s |", "|---|---|---|"]
        for mode, g in results["generator"].items():
            lines.append(f"| {mode} | {g['nodes']} | {g['graphs_per_s']:,.0f} |")
        lines.append("")
    if "policy" in results:
        lines += policy_markdown(results["policy"])
    if "many" in results:
        lines += many_markdown(results["many"])
    return "\n".join(lines)


def many_markdown(m: dict) -> list[str]:
    """The "Many graphs at once" section of :func:`to_markdown` (lines)."""
    lines = [
        f"## Many graphs at once (`solver=policy`, `{m['checkpoint']}`, {m['objective']}, K={m['stages']})",
        "",
        f"{m['graphs']} generated {m['mode']} graphs of {m['nodes']} nodes, {m['batch_size']} per compiled call; "
        f"graphs/s of the whole batched call (padding, decoding, copying back) after compilation, best of "
        f"{m['repeats']} (median beside it), and per CPU second of the process (all threads); compile time apart "
        "(first call).",
        "",
        "| decoding | graphs/s | median graphs/s | graphs per CPU s | compile s | buckets |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, r in m["rows"].items():
        buckets = ", ".join("x".join(str(v) for v in b) for b in r["buckets"])
        lines.append(
            f"| {name} ({r['decoding']}) | {r['graphs_per_s']:,.0f} | {r['graphs_per_s_median']:,.0f} | "
            f"{r.get('graphs_per_cpu_s', float('nan')):,.0f} | {r['compile_s']:.1f} | {buckets} |"
        )
    lines.append("")
    return lines


def check_many(m: DictConfig) -> None:
    """One-line user error for a bad ``many`` group (before anything is measured)."""
    check_counts(m, "many", ("graphs", "nodes", "batch_size", "repeats"))
    if not m.decodings:
        raise ValueError("many.decodings is empty: name at least one decoding to time")
    if not shipped_path(m.checkpoint).exists():
        raise FileNotFoundError(f"many.checkpoint {m.checkpoint} does not exist")
    GeneratorConfig(mode=m.mode, min_nodes=m.nodes, max_nodes=m.nodes)


def run_bench_many(m: DictConfig, hw: Hardware, objective: str) -> dict:
    """The ``many`` benchmark: ``respect_jax.train.speed.bench_many`` on the config's generated graphs."""
    from respect_jax.train.speed import bench_many

    graphs = GeneratorConfig(mode=m.mode, min_nodes=m.nodes, max_nodes=m.nodes)
    decodings = OmegaConf.to_container(m.decodings, resolve=True)

    def log(message: str) -> None:
        print(f"respect-bench: many {message}", file=sys.stderr, flush=True)

    checkpoint = shipped_path(m.checkpoint)
    rows = bench_many(checkpoint, hw, objective, 1.0, graphs, m.graphs, m.batch_size, m.repeats, 0, decodings, log)
    keys = ("checkpoint", "mode", "nodes", "graphs", "batch_size", "repeats")
    return {**{k: OmegaConf.to_container(m, resolve=True)[k] for k in keys}, "objective": objective,
            "stages": hw.stages, "rows": rows}


def policy_markdown(p: dict) -> list[str]:
    """The "Learned scheduler" section of :func:`to_markdown` (lines)."""
    label = p.get("checkpoint_label") or f"step {p['checkpoint_step']}"  # results written before the label: the step
    lines = [
        f"## Learned scheduler (`{p['checkpoint']}`, {label})",
        "",
        f"| training ({p['training_nodes']}-node graphs) | graphs/s | schedules/s | compile s | batch "
        "| schedules/graph |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in p["training"].items():
        per_graph = r["samples_per_graph"] or 1
        lines.append(
            f"| {name} | {r['graphs_per_s']:,.0f} | {r['graphs_per_s'] * per_graph:,.0f} | {r['compile_s']:.1f} | "
            f"{r['batch_size']} | {r['samples_per_graph'] or '1 (label)'} |"
        )
    c, r = p["compile_large"], p["latency"]
    lines += [
        "",
        f"Imitation update epoch compile time, {c['bucket_nodes']}-node bucket: {c['imitation_compile_s']:.1f} s.",
        "",
        f"Greedy schedule of {r['graph']} ({r['num_nodes']} nodes, bucket {r['bucket_nodes']}): "
        f"{r['greedy_ms_best']:.1f} ms best / {r['greedy_ms_median']:.1f} ms median after compilation "
        f"(compile {r['compile_s']:.1f} s).",
        "",
    ]
    return lines


def load_policy_inputs(p: DictConfig) -> dict:
    """Check the ``policy`` group and load its inputs before anything is measured.

    Raises a user error (one line) for a bad count, a missing or foreign checkpoint, a labelled set
    that is missing or made for another problem, or an unreadable graph.
    """
    from respect_jax.costs import hardware_from_dict
    from respect_jax.graphs import load_graph
    from respect_jax.policy.config import PolicyConfig
    from respect_jax.train.checkpoints import load_policy
    from respect_jax.train.data import check_manifest

    check_counts(p, "policy", ("batch", "steps", "repeats"))
    if not Path(p.checkpoint).exists():
        raise FileNotFoundError(f"policy.checkpoint {p.checkpoint} does not exist")
    model, doc = load_policy(p.checkpoint)
    hw = hardware_from_dict(doc["hardware"])
    for key in ("labels", "labels_large"):
        check_manifest(p[key], hw, "paper", 1.0)  # the training benchmarks use the paper objective, lam 1
    from respect_jax.train.speed import algorithm_configs

    if not p.algorithms:
        raise ValueError("policy.algorithms is empty: name at least one update epoch to time")
    algorithm_configs(OmegaConf.to_container(p.algorithms, resolve=True))  # a bad row is a one-line error
    graph = load_graph(p.graph)
    return {"model": model, "doc": doc, "policy": PolicyConfig.from_dict(doc["policy"]), "hw": hw, "graph": graph}


def bench_policy(p: DictConfig, inputs: dict) -> dict:
    """The learned scheduler's speed figures (see :mod:`respect_jax.train.speed`)."""
    from respect_jax.train.checkpoints import checkpoint_label
    from respect_jax.train.speed import RL_NODES, bench_compile_bucket, bench_latency, bench_training

    def log(message: str) -> None:
        print(f"respect-bench: policy {message}", file=sys.stderr, flush=True)

    policy, hw, doc = inputs["policy"], inputs["hw"], inputs["doc"]
    algorithms = OmegaConf.to_container(p.algorithms, resolve=True)
    training = bench_training(policy, hw, p.labels, p.batch, p.steps, algorithms, log=log)
    compile_large = bench_compile_bucket(policy, hw, p.labels_large, p.batch)
    log(f"compile {compile_large}")
    latency = bench_latency(inputs["model"], doc, p.graph, p.repeats)
    log(f"latency {latency}")
    return {
        "checkpoint": str(p.checkpoint),
        "checkpoint_step": doc["step"],
        "checkpoint_label": checkpoint_label(doc),
        "policy": policy.to_dict(),
        "labels": str(p.labels),
        "labels_large": str(p.labels_large),
        "training_nodes": RL_NODES,
        "training": training,
        "compile_large": compile_large,
        "latency": latency,
    }


@hydra.main(config_path=CONF_DIR, config_name="bench", version_base="1.3")
@user_errors_exit("respect-bench")
def _main(cfg: DictConfig) -> None:
    setup_compilation_cache(cfg)
    hw = hardware_from_cfg(cfg.hardware)
    unknown = set(cfg.benchmarks) - set(BENCHMARKS)
    if unknown or not cfg.benchmarks:
        raise ValueError(f"unknown or no benchmarks {sorted(unknown)}; choose from {', '.join(BENCHMARKS)}")
    if "env" in cfg.benchmarks:
        check_counts(cfg.env, "env", ("batch", "nodes", "repeats", "loop_graphs"))
    if "generator" in cfg.benchmarks:
        check_counts(cfg.generator, "generator", ("batch", "nodes", "repeats"))
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(cfg.out_name)):
        raise ValueError(f"out_name must be a file name stem (letters, digits, _ . -), got {cfg.out_name!r}")
    out = job_path(cfg, "out_dir", f"{cfg.out_name}.json").parent  # in a sweep: every job its own
    policy_inputs = load_policy_inputs(cfg.policy) if "policy" in cfg.benchmarks else None
    if "many" in cfg.benchmarks:
        check_many(cfg.many)
    results: dict = {"machine": machine_description(), "load_before": list(os.getloadavg())}
    if "env" in cfg.benchmarks:
        e = cfg.env
        results["env"] = bench_env(hw, cfg.objective, e.batch, e.nodes, e.mode, e.repeats, e.loop_graphs, cfg.seed)
    if "generator" in cfg.benchmarks:
        g = cfg.generator
        results["generator"] = bench_generator(g.batch, g.nodes, list(g.modes), g.repeats, cfg.seed)
    if policy_inputs is not None:
        results["policy"] = bench_policy(cfg.policy, policy_inputs)
    if "many" in cfg.benchmarks:
        results["many"] = run_bench_many(cfg.many, hw, cfg.objective)
    results["load_after"] = list(os.getloadavg())
    write_json_atomic(results, out / f"{cfg.out_name}.json")
    markdown = to_markdown(results)
    (out / f"{cfg.out_name}.md").write_text(markdown + "\n")
    Console().print(markdown)


def main() -> None:
    check_group_choices("respect-bench", ("hardware",), config="bench")
    _main()


if __name__ == "__main__":
    main()
