"""``respect-train``: train the scheduling policy (imitation, REINFORCE, self-improvement, or imitation
then one of the other two); ``init_from=<run folder>`` fine-tunes a trained policy.

Example::

    respect-train run_dir=runs/k4 algorithm=imitation datasets=[data/labels/respect30_k4_paper] \
        train.steps=2000 train.batch_size=128

Writes ``run_dir/{network.json, config.yaml, metrics.jsonl, checkpoints/<step>/}``, TensorBoard event files
(``tensorboard``: auto when tensorboardX is installed) and ``curves.png`` at the end (``curves``,
:mod:`respect_jax.train.run_logs`); the same command after a kill resumes from the latest checkpoint and ends
exactly where an uninterrupted run would. In a sweep (``-m``) every job trains in its own folder: ``run_dir``
left out means ``<hydra.sweep.dir>/<job number>``, and a ``run_dir`` another job of the sweep trains in is
refused (:func:`respect_jax.cli.common.job_path`). Trains data-parallel over every visible device
(``jax.distributed.initialize()`` first when launched as several SLURM tasks). Bad arguments exit 2
with one line on stderr.

``policy=respect_pointer algorithm=reinforce`` trains the RESPECT-faithful pointer baseline instead
(:mod:`respect_jax.respect_pointer.train`, same run-folder layout and resume).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from respect_jax.cli.common import (
    CONF_DIR,
    hardware_from_cfg,
    hardware_presets_named,
    job_path,
    run_command,
    shipped_path,
    user_errors_exit,
)

PROG = "respect-train"
GROUPS = ("hardware", "policy", "algorithm", "graphs")


def _generators(cfg: DictConfig) -> list:
    from respect_jax.graphs.generator_values import generator_config_from_values

    nodes = [cfg.graphs]
    for name in cfg.get("extra_graphs") or []:
        path = Path(CONF_DIR) / "graphs" / f"{name}.yaml"
        if not path.is_file():
            raise ValueError(f"extra_graphs: no graph preset {name!r} in conf/graphs")
        nodes.append(OmegaConf.load(path))
    return [generator_config_from_values(OmegaConf.to_container(node, resolve=True)) for node in nodes]


def _problem(cfg: DictConfig) -> tuple:
    """(hardware, lam, TrainConfig, eval sets) of a ``train`` config; the objective checked."""
    from respect_jax.costs import OBJECTIVES
    from respect_jax.train.config import TrainConfig

    if cfg.objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {cfg.objective!r}")
    hw, lam = hardware_from_cfg(cfg.hardware), float(cfg.lam)
    tcfg = TrainConfig.from_dict(OmegaConf.to_container(cfg.train, resolve=True))
    evals = _labelled(cfg, [cfg.eval_dataset], hw, lam, cfg.eval_limit) if cfg.eval_dataset else []
    return hw, lam, tcfg, evals


def _labelled(cfg: DictConfig, dirs, hw, lam: float, limit) -> list:
    from respect_jax.train.data import load_labelled_batches

    return load_labelled_batches([shipped_path(d) for d in dirs], hw, cfg.objective, lam, limit)


def _init_from(cfg: DictConfig, policy):
    """(policy config, initial parameters or None): ``init_from`` fine-tunes a trained policy, optionally grown
    (``init_decoder_layers``, ``init_cut_heads``) or given K and hardware inputs (``init_feature_version=2``)."""
    layers, cut_heads, version = (cfg.get(k) for k in ("init_decoder_layers", "init_cut_heads", "init_feature_version"))
    if not cfg.get("init_from"):
        if version is not None:
            raise ValueError("init_feature_version converts the network of init_from; set init_from=<run folder>")
        if layers is not None or cut_heads is not None:
            raise ValueError(
                "init_decoder_layers / init_cut_heads grow the network of init_from; set init_from=<run folder>"
            )
        return policy, None
    from flax import nnx

    from respect_jax.policy.model import grow_decoder, with_hardware_inputs
    from respect_jax.train.checkpoints import load_policy

    model, _ = load_policy(shipped_path(cfg.init_from))  # the architecture and parameters come from that folder
    seed = int(cfg.train.seed)
    if layers is not None or cut_heads is not None:  # a larger decoder, starting as the same function
        model = grow_decoder(model, None if layers is None else int(layers), seed,
                             None if cut_heads is None else int(cut_heads))
    if version is not None:  # K and hardware as inputs, starting as the same function
        if int(version) != 2:
            raise ValueError(f"init_feature_version must be 2 (or null), got {version!r}")
        model = with_hardware_inputs(model, seed)
    return model.cfg, nnx.split(model)[1]


def build_trainer(cfg: DictConfig):
    """A :class:`~respect_jax.train.loop.Trainer` from a composed ``train`` config."""
    from respect_jax.policy.config import PolicyConfig
    from respect_jax.train.config import AlgorithmConfig
    from respect_jax.train.loop import Trainer

    hw, lam, tcfg, eval_sets = _problem(cfg)
    policy, init_params = _init_from(cfg, PolicyConfig.from_dict(OmegaConf.to_container(cfg.policy, resolve=True)))
    algo = AlgorithmConfig.from_dict(OmegaConf.to_container(cfg.algorithm, resolve=True))
    datasets = []
    if algo.needs_labels:
        if not cfg.datasets:
            raise ValueError(f"algorithm {algo.name} needs datasets=[labelled dataset dirs]")
        datasets = _labelled(cfg, cfg.datasets, hw, lam, cfg.dataset_limit)
    gens = _generators(cfg) if algo.needs_generator else []
    conditioning, presets = _conditioning(cfg)
    return Trainer(policy, hw, cfg.objective, lam, algo, tcfg, generators=gens, datasets=datasets,
                   eval_sets=eval_sets, init_params=init_params, conditioning=conditioning, presets=presets)


def build_pointer_trainer(cfg: DictConfig):
    """``policy=respect_pointer algorithm=reinforce``: the RESPECT pointer's trainer of a composed config."""
    from respect_jax.respect_pointer.config import PointerConfig
    from respect_jax.respect_pointer.train import PointerTrainer

    if cfg.algorithm.name != "reinforce":
        raise ValueError(
            f"policy=respect_pointer trains with algorithm=reinforce only, got algorithm {cfg.algorithm.name}"
        )
    if cfg.get("init_from"):
        raise ValueError("init_from fine-tunes the GNN policy only; the respect_pointer trainer starts fresh")
    hw, lam, tcfg, eval_sets = _problem(cfg)
    pcfg = PointerConfig.from_dict(OmegaConf.to_container(cfg.policy, resolve=True))
    if not cfg.datasets:
        raise ValueError("policy=respect_pointer needs datasets=[labelled dataset dirs] (oracle labels / graphs)")
    datasets = _labelled(cfg, cfg.datasets, hw, lam, cfg.dataset_limit)
    return PointerTrainer(pcfg, hw, cfg.objective, lam, tcfg, datasets, eval_sets)


def _conditioning(cfg: DictConfig) -> tuple:
    """The ``conditioning`` node: (ConditioningConfig, preset Hardware list from conf/hardware)."""
    from respect_jax.train.config import ConditioningConfig

    node = OmegaConf.to_container(cfg.get("conditioning") or {}, resolve=True)
    names = node.pop("presets", None) or []
    conditioning = ConditioningConfig.from_dict(node)
    return conditioning, hardware_presets_named(names if conditioning.enabled else [], "conditioning.presets")


def train(cfg: DictConfig) -> dict:
    """Build and fit; returns a summary (last metrics, last evaluation, run folder)."""
    from respect_jax.train.run_logs import check_curves_setting, check_tensorboard_setting, fit_with_logs
    from respect_jax.train.sharding import maybe_initialize_distributed, refuse_multi_process

    tensorboard = check_tensorboard_setting(cfg.get("tensorboard", "auto"))
    curves = check_curves_setting(cfg.get("curves", True))
    if cfg.policy.get("name") == "order":  # the order policy has its own trainer (respect_jax/cli/train_order.py)
        refuse_multi_process("policy=order")
        from respect_jax.cli.train_order import train_order

        return train_order(cfg)
    if cfg.policy.get("name") == "respect_pointer":  # the RESPECT-faithful baseline has its own trainer
        refuse_multi_process("policy=respect_pointer")
        trainer = build_pointer_trainer(cfg)
    else:
        maybe_initialize_distributed()
        trainer = build_trainer(cfg)
    run_dir = job_path(cfg, "run_dir")  # after every check: a bad command line leaves no folder behind
    return fit_with_logs(trainer.fit, run_dir, tensorboard, curves, resume=bool(cfg.resume),
                         resolved_config=OmegaConf.to_yaml(cfg, resolve=True), progress=cfg.progress)


@hydra.main(config_path=CONF_DIR, config_name="train", version_base="1.3")
@user_errors_exit(PROG)
def _main(cfg: DictConfig) -> None:
    from respect_jax.train.sharding import is_main_process

    summary = train(cfg)
    if is_main_process():  # a multi-process run reports once
        print(json.dumps(summary, indent=1))
        print(f"{PROG}: done, step {summary['step']} -> {summary['run_dir']}", file=sys.stderr)


def main() -> None:
    run_command(PROG, GROUPS, "train", _main)


if __name__ == "__main__":
    main()
