"""``respect-bench``: speed figures (env steps/s vs a Python loop env, generator graphs/s, the
learned scheduler's training throughput, compile time and scheduling latency, and how many graphs/s
``solver=policy`` schedules at once).

Every ratio is measured in one run on one machine; the machine description and the load average
before/after are written beside the figures in ``experiments/results/<out_name>.{md,json}``
(``bench_env`` by default).

    respect-bench                                                  # env + generator
    respect-bench benchmarks=[policy] out_name=bench_policy_speed  # the learned scheduler
    respect-bench benchmarks=[many] out_name=bench_many            # many graphs at once (solver=policy)
    respect-bench benchmarks=[order_train] out_name=bench_order_train   # the order policy trainer's graphs/s

The benchmarks live in :mod:`respect_jax.benchmarks`; this file reads the config and writes the results.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from respect_jax.benchmarks.env import bench_env, bench_generator
from respect_jax.benchmarks.order import OrderTrainBenchConfig, bench_order_train, check_order_train, nodes_tuple
from respect_jax.benchmarks.policy import (
    ManyBenchConfig,
    PolicyBenchConfig,
    bench_policy,
    check_many,
    load_policy_inputs,
    run_bench_many,
)
from respect_jax.benchmarks.report import to_markdown
from respect_jax.cli.common import (
    CONF_DIR,
    check_counts,
    hardware_from_cfg,
    job_path,
    run_command,
    setup_compilation_cache,
    user_errors_exit,
)
from respect_jax.graphs import write_json_atomic
from respect_jax.reporting import machine_description

BENCHMARKS = ("env", "generator", "policy", "many", "order_train")


def _log(prefix: str):
    return lambda message: print(f"respect-bench: {prefix} {message}", file=sys.stderr, flush=True)


def policy_config(p: DictConfig) -> PolicyBenchConfig:
    """The ``policy`` group as a :class:`PolicyBenchConfig` (its counts checked)."""
    check_counts(p, "policy", ("batch", "steps", "repeats"))
    return PolicyBenchConfig(
        checkpoint=p.checkpoint, labels=p.labels, labels_large=p.labels_large, graph=p.graph, batch=p.batch,
        steps=p.steps, algorithms=OmegaConf.to_container(p.algorithms, resolve=True), repeats=p.repeats,
    )  # fmt: skip


def policy_solver_options() -> dict:
    """``solver=policy``'s default options (conf/solver/policy.yaml) without ``checkpoint`` (the benchmark names it)."""
    options = OmegaConf.to_container(OmegaConf.load(Path(CONF_DIR) / "solver" / "policy.yaml").options, resolve=True)
    return {k: v for k, v in options.items() if k != "checkpoint"}


def many_config(m: DictConfig) -> ManyBenchConfig:
    """The ``many`` group as a :class:`ManyBenchConfig` (its counts checked); every row's options are
    ``solver=policy``'s defaults updated with the row's."""
    check_counts(m, "many", ("graphs", "nodes", "batch_size", "repeats"))
    defaults = policy_solver_options()
    rows = OmegaConf.to_container(m.decodings, resolve=True)
    return ManyBenchConfig(
        checkpoint=m.checkpoint, graphs=m.graphs, nodes=m.nodes, mode=m.mode, batch_size=m.batch_size,
        repeats=m.repeats, decodings={row: {**defaults, **(options or {})} for row, options in rows.items()},
    )  # fmt: skip


def order_train_config(o: DictConfig) -> OrderTrainBenchConfig:
    """The ``order_train`` group as an :class:`OrderTrainBenchConfig` (checked)."""
    check_counts(o, "order_train", ("pool", "batch_size", "steps", "repeats"))
    config = OrderTrainBenchConfig(
        nodes=nodes_tuple(list(o.nodes)), mode=o.mode, pool=o.pool, batch_size=o.batch_size, steps=o.steps,
        repeats=o.repeats, lr=float(o.lr), policy=OmegaConf.to_container(o.policy, resolve=True),
    )  # fmt: skip
    check_order_train(config)
    return config


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
    policy = policy_config(cfg.policy) if "policy" in cfg.benchmarks else None
    policy_inputs = load_policy_inputs(policy) if policy is not None else None
    many = many_config(cfg.many) if "many" in cfg.benchmarks else None
    if many is not None:
        check_many(many)
    order_train = order_train_config(cfg.order_train) if "order_train" in cfg.benchmarks else None
    results: dict = {"machine": machine_description(), "load_before": list(os.getloadavg())}
    if "env" in cfg.benchmarks:
        e = cfg.env
        results["env"] = bench_env(hw, cfg.objective, e.batch, e.nodes, e.mode, e.repeats, e.loop_graphs, cfg.seed)
    if "generator" in cfg.benchmarks:
        g = cfg.generator
        results["generator"] = bench_generator(g.batch, g.nodes, list(g.modes), g.repeats, cfg.seed)
    if policy is not None:
        results["policy"] = bench_policy(policy, policy_inputs, _log("policy"))
    if many is not None:
        results["many"] = run_bench_many(many, hw, cfg.objective, _log("many"))
    if order_train is not None:
        results["order_train"] = bench_order_train(order_train, hw, cfg.objective, cfg.seed, _log("order_train"))
    results["load_after"] = list(os.getloadavg())
    write_json_atomic(results, out / f"{cfg.out_name}.json")
    markdown = to_markdown(results)
    (out / f"{cfg.out_name}.md").write_text(markdown + "\n")
    Console().print(markdown)


def main() -> None:
    run_command("respect-bench", ("hardware",), "bench", _main)


if __name__ == "__main__":
    main()
