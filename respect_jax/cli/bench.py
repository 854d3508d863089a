"""``respect-bench``: speed figures (env steps/s vs a Python loop env, generator graphs/s).

Every ratio is measured in one run on one machine; the machine description is written beside the
figures in ``experiments/results/bench_env.{md,json}``.
"""

from __future__ import annotations

import time
from pathlib import Path

import hydra
import jax
import numpy as np
from omegaconf import DictConfig
from rich.console import Console
from tqdm import tqdm

from respect_jax.cli.common import (
    CONF_DIR,
    check_group_choices,
    hardware_from_cfg,
    machine_description,
    user_errors_exit,
)
from respect_jax.costs import Hardware
from respect_jax.env import SchedulingEnv, random_rollout
from respect_jax.graphs import GeneratorConfig, make_jax_generator, padded_to_graph, write_json_atomic
from respect_jax.reference import LoopEnv


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
    lines.append(f"Machine: {m['platform']}, {m['cpu_count']} CPUs, JAX {m['jax']} on {m['jax_backend']}.")
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
    return "\n".join(lines)


@hydra.main(config_path=CONF_DIR, config_name="bench", version_base="1.3")
@user_errors_exit("respect-bench")
def _main(cfg: DictConfig) -> None:
    hw = hardware_from_cfg(cfg.hardware)
    unknown = set(cfg.benchmarks) - {"env", "generator"}
    if unknown:
        raise ValueError(f"unknown benchmarks {sorted(unknown)}; choose from env, generator")
    results: dict = {"machine": machine_description()}
    if "env" in cfg.benchmarks:
        e = cfg.env
        results["env"] = bench_env(hw, cfg.objective, e.batch, e.nodes, e.mode, e.repeats, e.loop_graphs, cfg.seed)
    if "generator" in cfg.benchmarks:
        g = cfg.generator
        results["generator"] = bench_generator(g.batch, g.nodes, list(g.modes), g.repeats, cfg.seed)
    out = Path(cfg.out_dir)
    write_json_atomic(results, out / "bench_env.json")
    markdown = to_markdown(results)
    (out / "bench_env.md").write_text(markdown + "\n")
    Console().print(markdown)


def main() -> None:
    check_group_choices("respect-bench", ("hardware",))
    _main()


if __name__ == "__main__":
    main()
