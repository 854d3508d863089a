"""``respect-edge``: train and evaluate the ASET dispatcher of DNN inference queries (issue 7).

Usage::

    respect-edge train [overrides]   # DQN agent -> run_dir (network.json, orbax checkpoints, metrics.jsonl);
                                     # resumes the agent already in run_dir (overwrite=true replaces it)
    respect-edge eval [overrides]    # success ratio per policy x load level -> out_dir/<stem>.{md,png,json}

Examples::

    respect-edge train edge_scenario=small dqn.episodes=60 run_dir=runs/edge/small
    respect-edge eval edge_scenario=small run_dir=runs/edge/small eval.traces=8
    respect-edge eval edge_scenario=isp edge_scenario.pattern=diurnal eval.policies=[closest,fastest_expected]

Scenarios are the ``conf/edge_scenario/`` presets (``small``, ``isp``); every field can be
overridden (``edge_scenario.apps.0.rate=50``). Bad values print one line and exit 2.
"""

from __future__ import annotations

import sys
import time

import hydra
from omegaconf import DictConfig, OmegaConf

from respect_jax.cli.common import (
    CONF_DIR,
    dump_json,
    hydra_argv,
    job_path,
    run_command,
    user_errors_exit,
)
from respect_jax.reporting import machine_description

PROG = "respect-edge"
COMMANDS = ("train", "eval")
#: the agents `respect-edge train` trains (the ``agent`` setting)
AGENTS = ("dqn", "switch")
USAGE = f"usage: {PROG} {{train,eval}} [key=value ...]  ({PROG} train --help: options, groups, examples)"


def _scenario(cfg: DictConfig):
    from respect_jax.edge_cluster.scenarios import scenario_from_dict

    return scenario_from_dict(OmegaConf.to_container(cfg.edge_scenario, resolve=True), where="edge_scenario")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def train(cfg: DictConfig) -> dict:
    """Train the configured agent (``agent``: ``dqn``, the double DQN, or ``switch``, the policy-switching agent) on
    the configured scenario; returns a summary."""
    from respect_jax.train.sharding import refuse_multi_process

    refuse_multi_process("respect-edge train")
    kind = cfg.get("agent", "dqn")
    if kind not in AGENTS:
        raise ValueError(f"agent must be one of {', '.join(AGENTS)}, got {kind!r}")
    scn = _scenario(cfg)
    if int(cfg.chunk) < 1:
        raise ValueError(f"chunk must be >= 1, got {cfg.chunk}")
    keep_every = cfg.get("keep_every", 0)
    if isinstance(keep_every, bool) or not isinstance(keep_every, int) or keep_every < 0:
        raise ValueError(f"keep_every must be an integer >= 0 (0: keep the last checkpoint only), got {keep_every!r}")
    run_dir = job_path(cfg, "run_dir")  # in a sweep (-m): every job its own folder
    options = dict(chunk=int(cfg.chunk), log=_log if cfg.progress else None, overwrite=bool(cfg.overwrite),
                   keep_every=keep_every,
                   resolved_config=OmegaConf.to_yaml(cfg, resolve=True))
    if kind == "switch":
        from respect_jax.edge_cluster.switching import SwitchConfig, train_switch

        settings = SwitchConfig.from_dict(OmegaConf.to_container(cfg.switch, resolve=True))
        agent = train_switch(scn, settings, run_dir, **options)
    else:
        from respect_jax.edge_cluster.dqn import DQNConfig, train_dqn

        settings = DQNConfig.from_dict(OmegaConf.to_container(cfg.dqn, resolve=True))
        agent = train_dqn(scn, settings, run_dir, **options)
    # both settings have episodes, episode_steps and num_envs
    last = agent.history[-1]
    summary = {"scenario": scn.name, "run_dir": str(run_dir), "episodes": settings.episodes,
               "env_steps": settings.episodes * settings.episode_steps * settings.num_envs,
               "train_time_s": agent.train_time_s,
               "final_success": last["success"], "machine": machine_description()}
    (run_dir / "machine.json").write_text(dump_json(summary["machine"]))
    resumed = agent.trained_from
    since = f" (this run: episodes {resumed + 1}-{settings.episodes})" if resumed else ""
    if resumed == settings.episodes:
        since = f" (already trained for {resumed} episodes: nothing to do)"
    _log(f"{PROG} train: {scn.name}: {summary['env_steps']:,} dispatches{since} in {agent.train_time_s:.1f}s, "
         f"last-episode success {last['success']:.3f} -> {run_dir}")
    if cfg.eval.after_train:
        evaluate(cfg)
    return summary


def evaluate(cfg: DictConfig) -> dict:
    """Evaluate the configured policies at the configured load levels; write table, plot and JSON."""
    import jax

    from respect_jax.edge_cluster.evaluation import compare, policies_to_compare, write_report

    scn = _scenario(cfg)
    names = list(cfg.eval.policies)
    if not names:
        raise ValueError("eval.policies is empty")
    loads = list(cfg.eval.loads)
    stem = cfg.eval.stem or f"success_{scn.name}"
    out_dir = job_path(cfg, "out_dir", f"{stem}.json").parent  # in a sweep: every job its own
    for load in loads:
        scn.load_factor(load)  # unknown names fail here, in one line
    if int(cfg.eval.traces) < 1:
        raise ValueError(f"eval.traces must be >= 1, got {cfg.eval.traces}")
    margin = cfg.eval.get("margin")
    policies, header, note = policies_to_compare(scn, names, cfg.eval.checkpoint, cfg.run_dir, margin)
    if note:
        _log(f"{PROG} eval: {note}")
    t0 = time.perf_counter()
    doc = compare(scn, policies, loads, jax.random.key(int(cfg.eval.seed)), int(cfg.eval.traces))
    doc["machine"] = machine_description()
    doc["wall_s"] = time.perf_counter() - t0
    paths = write_report(doc, out_dir, stem, "\n".join(header))
    for load in loads:
        best = max(doc["policies"], key=lambda p, ld=load: doc["success"][p][ld])
        scores = "  ".join(f"{p}={doc['success'][p][load]:.3f}" for p in doc["policies"])
        _log(f"{load:>9}: {scores}  best={best}")
    _log(f"{PROG} eval: {sum(doc['queries'].values()):,} queries per policy in {doc['wall_s']:.1f}s -> {paths['md']}")
    return doc


@hydra.main(config_path=CONF_DIR, config_name="edge", version_base="1.3")
@user_errors_exit(PROG)
def _main(cfg: DictConfig) -> None:
    if cfg.command not in COMMANDS:
        raise ValueError(f"unknown command {cfg.command!r}; choose one of {', '.join(COMMANDS)}")
    {"train": train, "eval": evaluate}[cfg.command](cfg)


def main() -> None:
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(USAGE + "\n\n" + __doc__.strip(), file=sys.stderr if not args else sys.stdout)
        sys.exit(2 if not args else 0)
    if args[0] not in COMMANDS:
        print(f"{PROG}: error: unknown command {args[0]!r}; choose one of {', '.join(COMMANDS)}", file=sys.stderr)
        sys.exit(2)
    sys.argv = [sys.argv[0], *hydra_argv(args[1:], f"command={args[0]}")]
    run_command(PROG, ("edge_scenario",), "edge", _main)


if __name__ == "__main__":
    main()
