"""The paper's experiments (issue 6): each a Hydra config in ``conf/experiment/`` run by
``python experiments/paper.py experiment=<name>``; results under ``experiments/results/<name>/``.

Kinds: ``real_models`` (Tables 1 and 2, memory bars, Pareto front), ``generalisation`` (Table 3),
``warm_start`` (RL-to-ILP warm start) and ``training_curves`` (figures from respect-train runs).
"""

from __future__ import annotations

from pathlib import Path

KINDS = ("real_models", "generalisation", "warm_start", "training_curves")


def run_experiment(cfg) -> dict:
    """Run ``cfg.experiment`` (its ``kind`` picks the module); returns the result document."""
    import importlib

    from respect_jax.cli.common import hardware_from_cfg

    kind = cfg.experiment.kind
    if kind not in KINDS:
        raise ValueError(f"experiment.kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if cfg.objective not in ("paper", "latency"):
        raise ValueError(f"objective must be paper or latency, got {cfg.objective!r}")
    module = importlib.import_module(f"respect_jax.experiments.{kind}")
    return module.run(cfg, hardware_from_cfg(cfg.hardware), Path(cfg.out_dir), progress=bool(cfg.progress))
