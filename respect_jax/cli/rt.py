"""``respect-rt train|eval``: the real-time scheduler with a safety layer (issue 8).

Examples::

    respect-rt train run_dir=runs/rt train.updates=150
    respect-rt eval run_dir=runs/rt                      # every eval.presets, table + plots
    respect-rt eval rt_scenario=u70_balanced eval.methods=[edf,edf+safety]   # that scenario only
    respect-rt eval rt_scenario=infeasible_demo          # -> one-line infeasibility error

``train`` writes ``run_dir/{network.json,metrics.jsonl,checkpoints/}`` and resumes from it.
``eval`` writes ``eval.out_dir/rt_eval.{json,md}`` and ``eval.out_dir/rt_*.png``
(``experiments/rt_sweep.py`` writes the committed ones into ``experiments/results/rt``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from respect_jax.cli.common import (
    CONF_DIR,
    check_counts,
    check_group_choices,
    dump_json,
    hydra_argv,
    job_path,
    run_command,
    user_errors_exit,
)
from respect_jax.realtime import experiment

PROG = "respect-rt"
COMMANDS = ("train", "eval", "grid")
USAGE = f"usage: {PROG} {{train,eval,grid}} [key=value ...]   ({PROG} train --help: options, groups, examples)"
preset = experiment.scenario_preset  # conf/rt_scenario/<name>.yaml


def grid_presets(cfg: DictConfig) -> list:
    """The presets of the ``grid`` node: ``grid.base`` at every (utilisation, HRT share)."""
    g = cfg.grid
    return experiment.grid_presets(str(g.base), list(g.utilisations), list(g.hrt_shares), g.max_tries)


def _presets(cfg: DictConfig, names) -> list:
    from respect_jax.realtime.generator import ScenarioConfig

    if names is None:
        return [ScenarioConfig.from_dict(OmegaConf.to_container(cfg.rt_scenario, resolve=True))]
    if isinstance(names, str):
        if names != "grid":
            raise ValueError(f"presets must be a list of rt_scenario names, null or 'grid', got {names!r}")
        return grid_presets(cfg)
    return [preset(str(n)) for n in names]


def _platform(cfg: DictConfig):
    from respect_jax.realtime.platform import platform_from_dict

    return platform_from_dict(OmegaConf.to_container(cfg.platform, resolve=True))


def train(cfg: DictConfig) -> dict:
    """Generate the training pool, train, return a summary."""
    from respect_jax.realtime.train import RTTrainConfig
    from respect_jax.train.sharding import refuse_multi_process

    refuse_multi_process("respect-rt train")
    platform = _platform(cfg)
    tcfg = OmegaConf.to_container(cfg.train, resolve=True)
    names = tcfg.pop("presets")  # a list, null or "grid"
    per = int(tcfg.pop("scenarios_per_preset"))
    presets = _presets(cfg, names)
    experiment.common_sizes(presets, platform)  # presets that cannot share one compilation: an error up front
    rcfg = RTTrainConfig.from_dict(tcfg)
    run_dir = job_path(cfg, "run_dir")  # in a sweep (-m): every job its own folder
    policy_net = OmegaConf.to_container(cfg.policy_net, resolve=True)
    return experiment.train_policy(presets, platform, per, int(cfg.seed), rcfg, policy_net, run_dir,
                                   resolved_config=OmegaConf.to_yaml(cfg, resolve=True))


def evaluate(cfg: DictConfig) -> dict:
    """Evaluate every method on every preset; write JSON, Markdown and plots; return the document."""
    e = cfg.eval
    check_counts(e, "eval", ("scenarios", "max_steps"))
    check_counts(e, "eval", ("overhead_scenarios",), low=0)
    platform = _platform(cfg)
    presets = _presets(cfg, e.presets)
    out = job_path(cfg, "eval.out_dir")  # in a sweep: every job its own (an out_dir two jobs share: an error)
    spec = experiment.EvalSpec(
        methods=tuple(str(m) for m in e.methods), scenarios=int(e.scenarios), max_steps=int(e.max_steps),
        overhead_scenarios=int(e.overhead_scenarios), seed=int(e.seed),
        policy=Path(e.policy if e.policy is not None else cfg.run_dir), plots=bool(e.plots),
    )  # fmt: skip
    return experiment.evaluate(presets, platform, spec, out, OmegaConf.to_container(cfg, resolve=True))


def grid(cfg: DictConfig) -> dict:
    """Every ``grid.methods`` on every grid cell (the same ``grid.scenarios`` task sets for every method): means
    with 95% CIs, paired differences to ``grid.reference``, issue 31's targets; JSON, Markdown, one PNG per metric."""
    g = cfg.grid
    check_counts(g, "grid", ("scenarios", "max_steps"))
    platform = _platform(cfg)
    presets = grid_presets(cfg)
    out = job_path(cfg, "grid.out_dir")
    spec = experiment.GridSpec(
        methods=tuple(str(m) for m in g.methods), reference=str(g.reference), scenarios=int(g.scenarios),
        max_steps=int(g.max_steps), seed=int(g.seed), policy=Path(g.policy if g.policy is not None else cfg.run_dir),
        plots=bool(g.plots),
    )  # fmt: skip
    return experiment.evaluate_grid(presets, platform, spec, out, OmegaConf.to_container(cfg, resolve=True))


@hydra.main(config_path=CONF_DIR, config_name="rt", version_base="1.3")
@user_errors_exit(PROG)
def _main(cfg: DictConfig) -> None:
    if cfg.command == "train":
        print(dump_json(train(cfg)))
    elif cfg.command == "grid":
        doc = grid(cfg)
        print(dump_json({"targets": doc["targets"], "wall_s": doc["wall_s"], "out_dir": str(cfg.grid.out_dir)}))
    elif cfg.command == "eval":
        doc = evaluate(cfg)
        print(
            dump_json(
                {"rows": doc["rows"], "safety_overhead": doc["safety_overhead"], "out_dir": str(cfg.eval.out_dir)}
            )
        )
    else:
        raise ValueError(f"unknown command {cfg.command!r}; choose one of {', '.join(COMMANDS)}")


def scenario_only(cmd: str, overrides: list[str]) -> list[str]:
    """``<cmd>.presets=null`` when the command line chooses or edits ``rt_scenario`` without naming
    ``<cmd>.presets``: the scenario it asks for is used alone instead of being ignored for the presets."""
    names = [o.lstrip("+~").split("=", 1)[0] for o in overrides]
    chosen = any(n == "rt_scenario" or n.startswith("rt_scenario.") for n in names)
    named = any(n == f"{cmd}.presets" or n.startswith(f"{cmd}.presets.") for n in names)
    return [f"{cmd}.presets=null"] if chosen and not named else []


def main() -> None:
    argv = sys.argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        sys.exit(2 if not argv else 0)
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"{PROG}: error: unknown command {cmd!r}; choose one of {', '.join(COMMANDS)}", file=sys.stderr)
        sys.exit(2)
    check_group_choices(PROG, ("rt_scenario",), rest)  # the choices; run_command composes
    only = scenario_only(cmd, rest) if cmd != "grid" else []  # the grid draws its own presets
    sys.argv = [sys.argv[0], *hydra_argv(rest, f"command={cmd}", *only)]
    run_command(PROG, ("rt_scenario",), "rt", _main)


if __name__ == "__main__":
    main()
