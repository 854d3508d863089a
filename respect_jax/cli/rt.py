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

import dataclasses
import sys
import time
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
    machine_description,
    user_errors_exit,
)
from respect_jax.graphs.graph import write_json_atomic

PROG = "respect-rt"
COMMANDS = ("train", "eval", "grid")
USAGE = f"usage: {PROG} {{train,eval,grid}} [key=value ...]   ({PROG} train --help: options, groups, examples)"


def preset(name: str):
    """:class:`ScenarioConfig` of ``conf/rt_scenario/<name>.yaml``."""
    from respect_jax.realtime.generator import ScenarioConfig

    path = Path(CONF_DIR) / "rt_scenario" / f"{name}.yaml"
    if not path.is_file():
        choices = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ValueError(f"unknown rt_scenario {name!r}; choose one of {', '.join(choices)}")
    return ScenarioConfig.from_dict(OmegaConf.to_container(OmegaConf.load(path), resolve=True))


def grid_presets(cfg: DictConfig) -> list:
    """The presets of the ``grid`` node: ``grid.base`` at every (utilisation, HRT share)."""
    from respect_jax.realtime.generator import grid_configs

    g = cfg.grid
    return grid_configs(preset(str(g.base)), list(g.utilisations), list(g.hrt_shares), g.max_tries)


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


def train_pool_seed(seed: int, preset_index: int) -> int:
    """Seed of the training pool's scenarios of one preset (``seed``: the top-level config value)."""
    return seed * 1000 + preset_index


EVAL_STREAM = 0x5EED  # a third SeedSequence word that no integer seed below 2**64 fills


def eval_seed(seed: int, preset_index: int) -> tuple[int, int, int]:
    """Seed of the evaluation scenarios of one preset (``seed``: ``eval.seed``). numpy pads an integer seed
    with zero words, so ``(seed, preset_index, EVAL_STREAM)`` can equal no integer seed: evaluation never
    redraws a training pool (an integer ``eval.seed + i`` equalled :func:`train_pool_seed` at ``seed=1``)."""
    return (seed, preset_index, EVAL_STREAM)


def common_sizes(presets: list, platform):
    """One :class:`Sizes` for every preset (so one compilation serves them all)."""
    from respect_jax.realtime.tasks import Sizes

    groups = {p.groups for p in presets}
    if len(groups) != 1:
        raise ValueError(f"presets {', '.join(p.name for p in presets)} mix groups {sorted(groups)}; use one value")
    return Sizes(
        hrt_jobs=max(p.max_hrt_jobs for p in presets),
        srt_jobs=max(p.max_srt_jobs for p in presets),
        groups=groups.pop(),
        machines=platform.num_machines,
        clients=max(max(p.num_clients for p in presets), 1),
    )


def train(cfg: DictConfig) -> dict:
    """Generate the training pool, train, return a summary."""
    from respect_jax.realtime.generator import generate
    from respect_jax.realtime.policy import RTPolicyConfig
    from respect_jax.realtime.tasks import pack, stack
    from respect_jax.realtime.train import RTTrainConfig, fit
    from respect_jax.train.sharding import refuse_multi_process

    refuse_multi_process("respect-rt train")
    platform = _platform(cfg)
    tcfg = OmegaConf.to_container(cfg.train, resolve=True)
    names = tcfg.pop("presets")  # a list, null or "grid"
    per = int(tcfg.pop("scenarios_per_preset"))
    presets = _presets(cfg, names)
    sizes = common_sizes(presets, platform)
    rcfg = RTTrainConfig.from_dict(tcfg)
    packed, stats = [], {}
    for i, p in enumerate(presets):
        scs, st = generate(p, platform, per, seed=train_pool_seed(int(cfg.seed), i))
        packed += [pack(s, sizes) for s in scs]
        stats[p.name] = st
    extra = {
        "platform": platform.to_dict(),
        "sizes": dataclasses.asdict(sizes),
        "presets": [p.name for p in presets],
        "pool": stats,
    }
    run_dir = job_path(cfg, "run_dir")  # in a sweep (-m): every job its own folder
    tic = time.perf_counter()
    _, logs = fit(
        stack(packed),
        RTPolicyConfig(machines=platform.num_machines, **cfg.policy_net),
        rcfg,
        run_dir,
        extra,
        log=lambda s: print(s, file=sys.stderr),
    )
    return {"run_dir": str(run_dir), "train_s": time.perf_counter() - tic, "last": logs[-1] if logs else None}


def evaluate(cfg: DictConfig) -> dict:
    """Evaluate every method on every preset; write JSON, Markdown and plots; return the document."""
    from respect_jax.realtime.evaluate import Runner, parse_method, safety_overhead_jax, safety_overhead_py, summarise
    from respect_jax.realtime.generator import generate
    from respect_jax.realtime.report import markdown_table, overhead_table, percent, plot_figures
    from respect_jax.realtime.tasks import pack, stack

    e = cfg.eval
    check_counts(e, "eval", ("scenarios", "max_steps"))
    check_counts(e, "eval", ("overhead_scenarios",), low=0)
    platform = _platform(cfg)
    presets = _presets(cfg, e.presets)
    methods = [parse_method(str(m)) for m in e.methods]
    out = job_path(cfg, "eval.out_dir")  # in a sweep: every job its own (an out_dir two jobs share: an error)
    # drawn first: an infeasible task set is reported as such, before a missing policy is
    drawn = [generate(p, platform, int(e.scenarios), seed=eval_seed(int(e.seed), i)) for i, p in enumerate(presets)]
    model, policy_doc = None, None
    if any(m.policy == "rl" for m in methods):
        from respect_jax.realtime.train import load_policy

        run = e.policy if e.policy is not None else cfg.run_dir
        if not (Path(run) / "network.json").is_file():
            raise FileNotFoundError(
                f"method rl needs a trained policy in {run}: run `{PROG} train run_dir={run}` or set eval.policy"
            )
        model, policy_doc = load_policy(run)
        if int(policy_doc["policy"]["machines"]) != platform.num_machines:
            raise ValueError(
                f"policy {run} was trained for {policy_doc['policy']['machines']} accelerators, "
                f"the platform has {platform.num_machines}"
            )
    sizes = common_sizes(presets, platform)
    runner = Runner([m.policy for m in methods], int(e.max_steps), model)
    rows, overheads = [], []
    for p, (scs, st) in zip(presets, drawn, strict=True):
        packed = [pack(s, sizes) for s in scs]
        batch = stack(packed)
        demand = [s.demand() for s in scs]
        for m in methods:
            _, metrics = runner.run(batch, m.policy, m.safety, seed=int(e.seed))
            row = {"preset": p.name, "utilisation_target": p.utilisation, "hrt_share": p.hrt_share, "method": m.name}
            row.update(summarise(metrics))
            rows.append(row)
            srt = row["srt_satisfaction"]
            srt_text = "  n/a " if srt is None else f"{percent(srt, '5.1f')}%"
            print(
                f"{p.name:15s} {m.name:20s} HRT sched {100 * row['hrt_schedulability']:5.1f}%  "
                f"SRT {srt_text}  Jain {row['jain']:.3f}  "
                f"util {100 * row['utilisation']:4.1f}%  overrides {100 * row['override_rate']:4.1f}%",
                file=sys.stderr,
            )
        n_over = min(int(e.overhead_scenarios), len(packed))
        overheads.append(
            {
                "preset": p.name,
                "py": safety_overhead_py(packed[:n_over], "edf"),
                "jax": safety_overhead_jax(batch, "edf"),
                "draws": st,
                "offered": {k: float(sum(d[k] for d in demand) / len(demand)) for k in demand[0]},
            }
        )
    doc = {
        "command": "respect-rt eval",
        "config": OmegaConf.to_container(cfg, resolve=True),
        "machine": machine_description(),
        "policy": policy_doc and {k: policy_doc[k] for k in ("policy", "step", "train") if k in policy_doc},
        "rows": rows,
        "safety_overhead": overheads,
    }
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(doc, out / "rt_eval.json")
    md = [
        "# Real-time scheduling with a safety layer (respect-rt eval)\n",
        markdown_table(rows),
        "\n## Safety-layer cost per decision\n",
        overhead_table(overheads),
    ]
    (out / "rt_eval.md").write_text("\n".join(md))
    if e.plots:
        doc["plots"] = plot_figures(rows, overheads, out)
    return doc


def _load_rl(run: str, platform) -> tuple:
    from respect_jax.realtime.train import load_policy

    if not (Path(run) / "network.json").is_file():
        raise FileNotFoundError(
            f"method rl needs a trained policy in {run}: run `{PROG} train run_dir={run}` or set the policy key"
        )
    model, doc = load_policy(run)
    if int(doc["policy"]["machines"]) != platform.num_machines:
        raise ValueError(
            f"policy {run} was trained for {doc['policy']['machines']} accelerators, the platform has "
            f"{platform.num_machines}"
        )
    return model, doc


def grid(cfg: DictConfig) -> dict:
    """Every ``grid.methods`` on every grid cell (the same ``grid.scenarios`` task sets for every method): means
    with 95% CIs, paired differences to ``grid.reference``, issue 31's targets; JSON, Markdown, one PNG per metric."""
    import numpy as np

    from respect_jax.realtime.evaluate import (
        Runner,
        grid_row,
        grid_targets,
        learner_vs_best,
        parse_method,
        per_scenario,
        summarise,
    )
    from respect_jax.realtime.generator import generate
    from respect_jax.realtime.report import grid_markdown, learner_markdown, plot_grid
    from respect_jax.realtime.tasks import pack, stack

    g = cfg.grid
    check_counts(g, "grid", ("scenarios", "max_steps"))
    platform = _platform(cfg)
    presets = grid_presets(cfg)
    methods = [parse_method(str(m)) for m in g.methods]
    reference = str(g.reference)
    if reference not in [m.name for m in methods]:
        raise ValueError(f"grid.reference={reference} is not one of grid.methods")
    out = job_path(cfg, "grid.out_dir")
    tic = time.perf_counter()
    drawn = [generate(p, platform, int(g.scenarios), seed=eval_seed(int(g.seed), i)) for i, p in enumerate(presets)]
    draw_s = time.perf_counter() - tic
    model, policy_doc = None, None
    if any(m.policy == "rl" for m in methods):
        model, policy_doc = _load_rl(g.policy if g.policy is not None else cfg.run_dir, platform)
    sizes = common_sizes(presets, platform)
    runner = Runner([m.policy for m in methods], int(g.max_steps), model)
    rows, per = [], {}
    for p, (scs, st) in zip(presets, drawn, strict=True):
        batch = stack([pack(s, sizes) for s in scs])
        raw = {}
        for m in methods:
            _, raw[m.name] = runner.run(batch, m.policy, m.safety, seed=int(g.seed))
            per[(p.name, m.name)] = per_scenario(raw[m.name])
        for m in methods:
            s = summarise(raw[m.name])
            row = {
                "preset": p.name,
                "utilisation_target": p.utilisation,
                "hrt_share": p.hrt_share,
                "method": m.name,
                "rejected_draws": st["rejected_draws"],
                **{k: s[k] for k in ("scenarios", "hrt_jobs", "hrt_missed", "unfinished", "violations")},
                **grid_row(per[(p.name, m.name)], None if m.name == reference else per[(p.name, reference)]),
            }
            rows.append(row)
        best = max(rows[-len(methods) :], key=lambda r: r["srt_satisfaction"]["mean"])
        print(f"{p.name}: {len(scs)} task sets, best SRT {best['method']}", file=sys.stderr)
    learner = next((m.name for m in methods if m.policy == "rl" and m.safety), "rl+safety")
    targets = grid_targets(rows, per, learner=learner, reference=reference)
    summary = learner_vs_best(rows, per, learner, reference)
    doc = {
        "command": "respect-rt grid",
        "config": OmegaConf.to_container(cfg, resolve=True),
        "machine": machine_description(),
        "policy": policy_doc and {k: policy_doc[k] for k in ("policy", "step", "train", "presets") if k in policy_doc},
        "wall_s": {"draw": draw_s, "total": time.perf_counter() - tic},
        "rows": rows,
        "targets": targets,
        "learner_vs_best": summary,
        "per_scenario": {
            f"{cell}|{method}": {k: [None if np.isnan(v) else float(v) for v in vals[k]] for k in vals}
            for (cell, method), vals in per.items()
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(doc, out / "rt_grid.json")
    (out / "rt_grid.md").write_text(
        "# Real-time scheduling on a utilisation x HRT-share grid (respect-rt grid)\n\n"
        f"{int(g.scenarios)} task sets per cell, the same for every method; mean ± 95% CI (Student t) over them; "
        f"Δ = paired difference to {reference} on the same task sets.\n\n"
        + (f"## {learner} vs the best other method of each cell\n\n" + learner_markdown(summary, learner, reference))
        * bool(summary)
        + "\n## Every method\n\n"
        + grid_markdown(rows, reference)
    )
    if g.plots:
        doc["plots"] = plot_grid(rows, out)
    return doc


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
    check_group_choices(PROG, ("rt_scenario",), rest, config="rt")
    only = scenario_only(cmd, rest) if cmd != "grid" else []  # the grid draws its own presets
    sys.argv = [sys.argv[0], *hydra_argv(rest, f"command={cmd}", *only)]
    _main()


if __name__ == "__main__":
    main()
