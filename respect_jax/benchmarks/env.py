"""Speed of the environment and the graph generator: env steps/s of the JAX environment (jit + vmap + scan)
against the Python loop environment on the same graphs, and graphs/s of the pure-JAX generator.

Every figure is wall time, the best of a few repetitions after compilation (compile time reported apart).
"""

from __future__ import annotations

import time

import jax
import numpy as np
from tqdm import tqdm

from respect_jax.costs import Hardware
from respect_jax.env import SchedulingEnv, random_rollout
from respect_jax.env.reference import LoopEnv
from respect_jax.graphs import GeneratorConfig, make_jax_generator, padded_to_graph


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
