"""Training pools, evaluations and the utilisation x HRT-share grid of the real-time scheduler (the library of
``respect-rt train|eval|grid`` and ``experiments/rt_sweep.py``).

Seed rules: the training pool of preset ``i`` is drawn with the integer seed ``seed * 1000 + i``
(:func:`train_pool_seed`); evaluation and grid task sets with the SeedSequence words ``(seed, i, EVAL_STREAM)``
(:func:`eval_seed`), which no integer seed can equal, so an evaluation never redraws a training pool. Every
preset of one run is packed to one :class:`~respect_jax.realtime.tasks.Sizes` (:func:`common_sizes`), so one
compilation serves them all.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from respect_jax.graphs.graph import write_json_atomic
from respect_jax.realtime.generator import ScenarioConfig, generate, grid_configs
from respect_jax.realtime.platform import Platform
from respect_jax.realtime.tasks import Sizes, pack, stack

EVAL_STREAM = 0x5EED  # a third SeedSequence word that no integer seed below 2**64 fills


def scenario_preset(name: str) -> ScenarioConfig:
    """:class:`ScenarioConfig` of the shipped preset ``conf/rt_scenario/<name>.yaml`` (one-line ValueError naming
    the presets for an unknown one)."""
    from omegaconf import OmegaConf

    from respect_jax.resources import conf_path

    path = conf_path("rt_scenario", f"{name}.yaml")
    if not path.is_file():
        choices = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ValueError(f"unknown rt_scenario {name!r}; choose one of {', '.join(choices)}")
    return ScenarioConfig.from_dict(OmegaConf.to_container(OmegaConf.load(path), resolve=True))


def grid_presets(base: str, utilisations: list[float], hrt_shares: list[float], max_tries: int) -> list:
    """The grid's presets: the preset ``base`` at every (utilisation, HRT share)."""
    return grid_configs(scenario_preset(base), list(utilisations), list(hrt_shares), max_tries)


def train_pool_seed(seed: int, preset_index: int) -> int:
    """Seed of the training pool's scenarios of one preset (``seed``: the top-level config value)."""
    return seed * 1000 + preset_index


def eval_seed(seed: int, preset_index: int) -> tuple[int, int, int]:
    """Seed of the evaluation scenarios of one preset (``seed``: ``eval.seed``). numpy pads an integer seed
    with zero words, so ``(seed, preset_index, EVAL_STREAM)`` can equal no integer seed: evaluation never
    redraws a training pool (an integer ``eval.seed + i`` equalled :func:`train_pool_seed` at ``seed=1``)."""
    return (seed, preset_index, EVAL_STREAM)


def common_sizes(presets: list, platform: Platform) -> Sizes:
    """One :class:`Sizes` for every preset (so one compilation serves them all)."""
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


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def train_policy(
    presets: list,
    platform: Platform,
    scenarios_per_preset: int,
    seed: int,
    train_config,
    policy_net: dict,
    run_dir: Path,
    log: Callable[[str], None] = _stderr,
    resolved_config: str | None = None,
) -> dict:
    """Draw the training pool (``scenarios_per_preset`` of every preset), train the policy into ``run_dir``
    (:func:`respect_jax.realtime.train.fit` with ``train_config``, an ``RTTrainConfig``; ``policy_net``: the
    ``RTPolicyConfig`` fields other than ``machines``); returns a summary. ``resolved_config``: the command's
    resolved config, which the harness writes to the run's ``config.yaml``."""
    from respect_jax.realtime.policy import RTPolicyConfig
    from respect_jax.realtime.train import fit

    sizes = common_sizes(presets, platform)
    packed, stats = [], {}
    for i, p in enumerate(presets):
        scs, st = generate(p, platform, scenarios_per_preset, seed=train_pool_seed(seed, i))
        packed += [pack(s, sizes) for s in scs]
        stats[p.name] = st
    extra = {
        "platform": platform.to_dict(),
        "sizes": dataclasses.asdict(sizes),
        "presets": [p.name for p in presets],
        "pool": stats,
    }
    tic = time.perf_counter()
    _, logs = fit(
        stack(packed), RTPolicyConfig(machines=platform.num_machines, **policy_net), train_config, run_dir, extra,
        log=log, resolved_config=resolved_config,
    )
    return {"run_dir": str(run_dir), "train_s": time.perf_counter() - tic, "last": logs[-1] if logs else None}


def load_rl(run: str | Path, platform: Platform, hint: str = "set eval.policy") -> tuple:
    """(model, document) of the trained policy in ``run``, checked against the platform; ``hint``: how else to
    name a policy, for the one-line error when there is none."""
    from respect_jax.realtime.train import load_policy

    if not (Path(run) / "network.json").is_file():
        raise FileNotFoundError(f"method rl needs a trained policy in {run}: run `respect-rt train run_dir={run}` "
                                f"or {hint}")
    model, doc = load_policy(run)
    if int(doc["policy"]["machines"]) != platform.num_machines:
        raise ValueError(
            f"policy {run} was trained for {doc['policy']['machines']} accelerators, the platform has "
            f"{platform.num_machines}"
        )
    return model, doc


@dataclass(frozen=True)
class EvalSpec:
    """``respect-rt eval``: every method (``edf``, ``rl+safety``, ...) on ``scenarios`` task sets of every preset
    (seed ``seed``, at most ``max_steps`` decisions each), the plain-Python safety layer timed on
    ``overhead_scenarios`` of them; ``policy``: run folder of the trained policy (methods ``rl``); ``plots``:
    write the PNGs too."""

    methods: tuple[str, ...]
    scenarios: int
    max_steps: int
    overhead_scenarios: int
    seed: int
    policy: Path
    plots: bool = True


def evaluate(presets: list, platform: Platform, spec: EvalSpec, out: Path, config: dict) -> dict:
    """Evaluate every method on every preset; write ``out/rt_eval.{json,md}`` (and plots); return the document
    (``config``: the run's whole config, recorded in it)."""
    from respect_jax.realtime.evaluate import Runner, parse_method, safety_overhead_jax, safety_overhead_py, summarise
    from respect_jax.realtime.report import markdown_table, overhead_table, percent, plot_figures
    from respect_jax.reporting import machine_description

    methods = [parse_method(str(m)) for m in spec.methods]
    # drawn first: an infeasible task set is reported as such, before a missing policy is
    drawn = [generate(p, platform, spec.scenarios, seed=eval_seed(spec.seed, i)) for i, p in enumerate(presets)]
    model, policy_doc = None, None
    if any(m.policy == "rl" for m in methods):
        model, policy_doc = load_rl(spec.policy, platform)
    sizes = common_sizes(presets, platform)
    runner = Runner([m.policy for m in methods], spec.max_steps, model)
    rows, overheads = [], []
    for p, (scs, st) in zip(presets, drawn, strict=True):
        packed = [pack(s, sizes) for s in scs]
        batch = stack(packed)
        demand = [s.demand() for s in scs]
        for m in methods:
            _, metrics = runner.run(batch, m.policy, m.safety, seed=spec.seed)
            row = {"preset": p.name, "utilisation_target": p.utilisation, "hrt_share": p.hrt_share, "method": m.name}
            row.update(summarise(metrics))
            rows.append(row)
            srt = row["srt_satisfaction"]
            srt_text = "  n/a " if srt is None else f"{percent(srt, '5.1f')}%"
            _stderr(
                f"{p.name:15s} {m.name:20s} HRT sched {100 * row['hrt_schedulability']:5.1f}%  "
                f"SRT {srt_text}  Jain {row['jain']:.3f}  "
                f"util {100 * row['utilisation']:4.1f}%  overrides {100 * row['override_rate']:4.1f}%"
            )
        n_over = min(spec.overhead_scenarios, len(packed))
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
        "config": config,
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
    if spec.plots:
        doc["plots"] = plot_figures(rows, overheads, out)
    return doc


@dataclass(frozen=True)
class GridSpec:
    """``respect-rt grid``: every method on ``scenarios`` task sets of every grid cell (the same for every method,
    seed ``seed``, at most ``max_steps`` decisions), paired differences to the method ``reference``; ``policy``:
    run folder of the trained policy (methods ``rl``); ``plots``: one PNG per metric."""

    methods: tuple[str, ...]
    reference: str
    scenarios: int
    max_steps: int
    seed: int
    policy: Path
    plots: bool = True


def evaluate_grid(presets: list, platform: Platform, spec: GridSpec, out: Path, config: dict) -> dict:
    """Every method on every grid cell: means with 95% CIs, paired differences to ``spec.reference``, issue 31's
    targets; writes ``out/rt_grid.{json,md}`` and the PNGs; returns the document (``config`` recorded in it)."""
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
    from respect_jax.realtime.report import grid_markdown, learner_markdown, plot_grid
    from respect_jax.reporting import machine_description

    methods = [parse_method(str(m)) for m in spec.methods]
    reference = spec.reference
    if reference not in [m.name for m in methods]:
        raise ValueError(f"grid.reference={reference} is not one of grid.methods")
    tic = time.perf_counter()
    drawn = [generate(p, platform, spec.scenarios, seed=eval_seed(spec.seed, i)) for i, p in enumerate(presets)]
    draw_s = time.perf_counter() - tic
    model, policy_doc = None, None
    if any(m.policy == "rl" for m in methods):
        model, policy_doc = load_rl(spec.policy, platform, hint="set the policy key")
    sizes = common_sizes(presets, platform)
    runner = Runner([m.policy for m in methods], spec.max_steps, model)
    rows, per = [], {}
    for p, (scs, st) in zip(presets, drawn, strict=True):
        batch = stack([pack(s, sizes) for s in scs])
        raw = {}
        for m in methods:
            _, raw[m.name] = runner.run(batch, m.policy, m.safety, seed=spec.seed)
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
        _stderr(f"{p.name}: {len(scs)} task sets, best SRT {best['method']}")
    learner = next((m.name for m in methods if m.policy == "rl" and m.safety), "rl+safety")
    targets = grid_targets(rows, per, learner=learner, reference=reference)
    summary = learner_vs_best(rows, per, learner, reference)
    doc = {
        "command": "respect-rt grid",
        "config": config,
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
        f"{spec.scenarios} task sets per cell, the same for every method; mean ± 95% CI (Student t) over them; "
        f"Δ = paired difference to {reference} on the same task sets.\n\n"
        + (f"## {learner} vs the best other method of each cell\n\n" + learner_markdown(summary, learner, reference))
        * bool(summary)
        + "\n## Every method\n\n"
        + grid_markdown(rows, reference)
    )
    if spec.plots:
        doc["plots"] = plot_grid(rows, out)
    return doc
