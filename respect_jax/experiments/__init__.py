"""The paper's experiments (issue 6): each a config in ``conf/experiment/`` run by
``python experiments/paper.py experiment=<name>``; results under ``experiments/results/<name>/``.

Kinds: ``real_models`` (Tables 1 and 2, memory bars, Pareto front), ``generalisation`` (Table 3),
``warm_start`` (RL-to-ILP warm start) and ``training_curves`` (figures from respect-train runs). Each module
has a config dataclass and ``run(config, setting)``; :func:`experiment_config` builds the config of a kind from
the plain mapping of its YAML file.
"""

from __future__ import annotations

import importlib

from respect_jax.experiments.methods import Setting, config_from_dict

KINDS = ("real_models", "generalisation", "warm_start", "training_curves")
CONFIGS = {"real_models": "RealModelsConfig", "generalisation": "GeneralisationConfig",
           "warm_start": "WarmStartConfig", "training_curves": "TrainingCurvesConfig"}  # fmt: skip


def experiment_config(doc: dict):
    """The typed config of the experiment ``doc`` (a plain mapping with ``kind``, as in ``conf/experiment/``)."""
    kind = doc.get("kind")
    if kind not in KINDS:
        raise ValueError(f"experiment.kind must be one of {', '.join(KINDS)}, got {kind!r}")
    module = importlib.import_module(f"respect_jax.experiments.{kind}")
    return config_from_dict(getattr(module, CONFIGS[kind]), doc)


def run_experiment(config, setting: Setting) -> dict:
    """Run the experiment ``config`` (one of the kinds' config dataclasses) for ``setting``; returns its document."""
    if setting.objective not in ("paper", "latency"):
        raise ValueError(f"objective must be paper or latency, got {setting.objective!r}")
    module = type(config).__module__
    if module.rpartition(".")[2] not in KINDS or type(config).__name__ not in CONFIGS.values():
        raise ValueError(f"not an experiment config: {type(config).__name__}")
    return importlib.import_module(module).run(config, setting)
