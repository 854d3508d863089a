"""``respect-train``: train the scheduling policy (imitation, REINFORCE, self-improvement, or imitation
then one of the other two); ``init_from=<run folder>`` fine-tunes a trained policy.

Example::

    respect-train run_dir=runs/k4 algorithm=imitation datasets=[data/labels/respect30_k4_paper] \
        train.steps=2000 train.batch_size=128

Writes ``run_dir/{network.json, config.yaml, metrics.jsonl, checkpoints/<step>/}``, TensorBoard event files
(``tensorboard``: auto when tensorboardX is installed) and ``curves.png`` at the end (``curves``,
:mod:`respect_jax.train.run_logs`); the same
command after a kill resumes from the latest checkpoint and ends exactly where an uninterrupted
run would. In a sweep (``-m``) every job trains in its own folder: ``run_dir`` left out means
``<hydra.sweep.dir>/<job number>``, and a ``run_dir`` another job of the sweep trains in is refused
(:func:`respect_jax.cli.common.job_path`). Trains data-parallel over every visible device
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
    check_group_choices,
    hardware_from_cfg,
    hardware_presets_named,
    job_path,
    shipped_path,
    user_errors_exit,
)

PROG = "respect-train"
GROUPS = ("hardware", "policy", "algorithm", "graphs")


def _generators(cfg: DictConfig) -> list:
    from respect_jax.cli.label import generator_from_cfg

    gens = [generator_from_cfg(cfg.graphs)]
    for name in cfg.get("extra_graphs") or []:
        path = Path(CONF_DIR) / "graphs" / f"{name}.yaml"
        if not path.is_file():
            raise ValueError(f"extra_graphs: no graph preset {name!r} in conf/graphs")
        gens.append(generator_from_cfg(OmegaConf.load(path)))
    return gens


def build_trainer(cfg: DictConfig):
    """A :class:`~respect_jax.train.loop.Trainer` from a composed ``train`` config."""
    from respect_jax.costs import OBJECTIVES
    from respect_jax.policy.config import PolicyConfig
    from respect_jax.train.config import AlgorithmConfig, TrainConfig
    from respect_jax.train.data import load_labelled_batches
    from respect_jax.train.loop import Trainer

    if cfg.objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {cfg.objective!r}")
    hw = hardware_from_cfg(cfg.hardware)
    lam = float(cfg.lam)
    policy = PolicyConfig.from_dict(OmegaConf.to_container(cfg.policy, resolve=True))
    init_params = None
    if cfg.get("init_from"):  # fine-tuning: the architecture and parameters come from that run folder
        from flax import nnx

        from respect_jax.policy.model import grow_decoder
        from respect_jax.train.checkpoints import load_policy

        model, doc = load_policy(shipped_path(cfg.init_from))
        layers, cut_heads = cfg.get("init_decoder_layers"), cfg.get("init_cut_heads")
        if layers is not None or cut_heads is not None:  # a larger decoder, starting as the same function
            model = grow_decoder(
                model,
                None if layers is None else int(layers),
                int(cfg.train.seed),
                None if cut_heads is None else int(cut_heads),
            )
        if cfg.get("init_feature_version") is not None:  # K and hardware as inputs, starting as the same function
            from respect_jax.policy.model import with_hardware_inputs

            if int(cfg.init_feature_version) != 2:
                raise ValueError(f"init_feature_version must be 2 (or null), got {cfg.init_feature_version!r}")
            model = with_hardware_inputs(model, int(cfg.train.seed))
        policy = model.cfg
        init_params = nnx.split(model)[1]
    elif cfg.get("init_feature_version") is not None:
        raise ValueError("init_feature_version converts the network of init_from; set init_from=<run folder>")
    elif cfg.get("init_decoder_layers") is not None or cfg.get("init_cut_heads") is not None:
        raise ValueError(
            "init_decoder_layers / init_cut_heads grow the network of init_from; set init_from=<run folder>"
        )
    algo = AlgorithmConfig.from_dict(OmegaConf.to_container(cfg.algorithm, resolve=True))
    tcfg = TrainConfig.from_dict(OmegaConf.to_container(cfg.train, resolve=True))
    datasets = []
    if algo.needs_labels:
        dirs = [shipped_path(d) for d in cfg.datasets or []]
        if not dirs:
            raise ValueError(f"algorithm {algo.name} needs datasets=[labelled dataset dirs]")
        datasets = load_labelled_batches(dirs, hw, cfg.objective, lam, cfg.dataset_limit)
    eval_sets = []
    if cfg.eval_dataset:
        eval_sets = load_labelled_batches([shipped_path(cfg.eval_dataset)], hw, cfg.objective, lam, cfg.eval_limit)
    gens = _generators(cfg) if algo.needs_generator else []
    conditioning, presets = _conditioning(cfg)
    return Trainer(
        policy,
        hw,
        cfg.objective,
        lam,
        algo,
        tcfg,
        generators=gens,
        datasets=datasets,
        eval_sets=eval_sets,
        init_params=init_params,
        conditioning=conditioning,
        presets=presets,
    )


def _conditioning(cfg: DictConfig) -> tuple:
    """The ``conditioning`` node: (ConditioningConfig, preset Hardware list from conf/hardware)."""
    from respect_jax.train.config import ConditioningConfig

    node = OmegaConf.to_container(cfg.get("conditioning") or {}, resolve=True)
    names = node.pop("presets", None) or []
    conditioning = ConditioningConfig.from_dict(node)
    return conditioning, hardware_presets_named(names if conditioning.enabled else [], "conditioning.presets")


def train(cfg: DictConfig) -> dict:
    """Build and fit; returns a summary (last metrics, last evaluation, run folder)."""
    from respect_jax.train.run_logs import TensorBoardLog, check_tensorboard_setting, write_curves
    from respect_jax.train.sharding import is_main_process, maybe_initialize_distributed, refuse_multi_process

    tensorboard = check_tensorboard_setting(cfg.get("tensorboard", "auto"))
    curves = cfg.get("curves", True)
    if not isinstance(curves, bool):
        raise ValueError(f"curves must be true or false, got {curves!r}")
    if cfg.policy.get("name") == "order":  # the order policy has its own trainer (respect_jax/cli/train_order.py)
        refuse_multi_process("policy=order")
        from respect_jax.cli.train_order import train_order

        return train_order(cfg)
    if cfg.policy.get("name") == "respect_pointer":  # the RESPECT-faithful baseline has its own trainer
        refuse_multi_process("policy=respect_pointer")
        if cfg.get("init_from"):
            raise ValueError("init_from fine-tunes the GNN policy only; the respect_pointer trainer starts fresh")
        from respect_jax.respect_pointer.train import build_pointer_trainer

        trainer = build_pointer_trainer(cfg)
    else:
        maybe_initialize_distributed()
        trainer = build_trainer(cfg)
    run_dir = job_path(cfg, "run_dir")  # after every check: a bad command line leaves no folder behind
    tb_log = TensorBoardLog(run_dir) if tensorboard and is_main_process() else None
    try:
        result = trainer.fit(
            run_dir,
            resume=bool(cfg.resume),
            resolved_config=OmegaConf.to_yaml(cfg, resolve=True),
            progress=cfg.progress,
            on_record=tb_log,
        )
    finally:
        if tb_log is not None:
            tb_log.close()
    if curves and is_main_process():
        write_curves(run_dir, result.history)
    last = result.history[-1] if result.history else {}
    evals = [r["eval"] for r in result.history if "eval" in r]
    return {
        "run_dir": str(run_dir),
        "step": int(result.state.step),
        "last": last,
        "eval": evals[-1] if evals else None,
    }


@hydra.main(config_path=CONF_DIR, config_name="train", version_base="1.3")
@user_errors_exit(PROG)
def _main(cfg: DictConfig) -> None:
    from respect_jax.train.sharding import is_main_process

    summary = train(cfg)
    if is_main_process():  # a multi-process run reports once
        print(json.dumps(summary, indent=1))
        print(f"{PROG}: done, step {summary['step']} -> {summary['run_dir']}", file=sys.stderr)


def main() -> None:
    check_group_choices(PROG, GROUPS, config="train")
    _main()


if __name__ == "__main__":
    main()
