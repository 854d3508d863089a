"""``respect-train policy=order algorithm=order_expert_iteration``: the order policy's trainer from a composed
``train`` config (:func:`respect_jax.train.order.train_order_policy`). Called by :mod:`respect_jax.cli.train`."""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from respect_jax.cli.common import hardware_from_cfg, hardware_presets_named, job_path, shipped_path

VAL_KEYS = ("val_models", "val_stages", "val_max_nodes", "val_labels", "val_label_limit")


def train_order(cfg: DictConfig) -> dict:
    """Train the order policy; returns the summary (run folder, best validation step and figures, wall times)."""
    from respect_jax.costs import hardware_from_dict
    from respect_jax.graphs.graph import load_graph
    from respect_jax.labels import load_labelled_dataset, read_manifest
    from respect_jax.policy.order import OrderPolicyConfig
    from respect_jax.train.order import Instance, OrderTrainConfig, ValInstance, contiguous_cases, train_order_policy

    algo = OmegaConf.to_container(cfg.algorithm, resolve=True)
    if algo.pop("name", None) != "order_expert_iteration":
        raise ValueError("policy=order trains with algorithm=order_expert_iteration")
    if cfg.get("init_from") or cfg.get("init_feature_version") is not None:
        raise ValueError("policy=order starts fresh (init_from and init_feature_version are for the GNN policy)")
    policy = OrderPolicyConfig.from_dict({k: v for k, v in OmegaConf.to_container(cfg.policy).items() if k != "name"})
    presets = hardware_presets_named(algo.pop("presets"), "algorithm.presets")
    limit = algo.pop("dataset_limit")
    val = {key: algo.pop(key) for key in VAL_KEYS}
    algo["generators"] = tuple(algo["generators"])
    algo["objectives"] = tuple(algo["objectives"])
    tcfg = OrderTrainConfig(**algo)
    lam = float(cfg.lam)
    labelled = []
    for directory in [shipped_path(d) for d in cfg.datasets or []]:
        manifest = read_manifest(directory)
        hw = hardware_from_dict(manifest["hardware"])
        labelled += [
            Instance(item.graph, hw, manifest["objective"], float(manifest.get("lam", lam)), item.assignment,
                     item.objective, True)
            for item in load_labelled_dataset(directory)[:limit]
        ]
    cases = []
    if val["val_models"]:
        folder = Path(shipped_path(val["val_models"]))
        graphs = [g for g in map(load_graph, sorted(folder.glob("*.json"))) if g.num_nodes <= val["val_max_nodes"]]
        if not graphs:
            raise ValueError(f"algorithm.val_models: no graph JSON of at most {val['val_max_nodes']} nodes in {folder}")
        cases += contiguous_cases("models_val", graphs, hardware_from_cfg(cfg.hardware), val["val_stages"],
                                  tcfg.objectives, lam)
    if val["val_labels"]:
        directory = shipped_path(val["val_labels"])
        manifest = read_manifest(directory)
        hw = hardware_from_dict(manifest["hardware"])
        cases += [ValInstance("labels_val", item.graph, hw, manifest["objective"], item.objective)
                  for item in load_labelled_dataset(directory)[: val["val_label_limit"]]]
    if not cases:
        raise ValueError("policy=order needs a validation set: algorithm.val_models and/or algorithm.val_labels")
    run_dir = job_path(cfg, "run_dir")
    summary = train_order_policy(tcfg, policy, presets, labelled, cases, run_dir, lam,
                                 log=lambda line: print(line, file=sys.stderr, flush=True),
                                 resolved_config=OmegaConf.to_yaml(cfg, resolve=True))
    return {"run_dir": str(run_dir), "step": tcfg.steps, **summary}
