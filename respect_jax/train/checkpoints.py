"""Writing the GNN policy's run folder: its network document, and checkpoint averaging. Reading one (the
:class:`Checkpointer`, :func:`load_policy`) is :mod:`respect_jax.policy.checkpoints`', re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import jax
from flax import nnx

from respect_jax.costs import Hardware
from respect_jax.policy.checkpoints import (  # noqa: F401  (re-exported: training code and callers import them here)
    CHECKPOINT_DIR,
    CONFIG_FILE,
    FORMAT,
    ITEMS,
    METRICS_FILE,
    NETWORK_FILE,
    Checkpointer,
    abstract,
    build_policy,
    checkpoint_label,
    find_run_dir,
    load_network,
    load_policy,
    read_network,
)
from respect_jax.policy.config import PolicyConfig
from respect_jax.train import run_folder


def network_doc(
    policy: PolicyConfig, hw: Hardware, objective: str, lam: float, trained_across: dict | None = None
) -> dict:
    """The policy's network.json document. ``policy.feature_version`` (2: K and hardware are inputs) is the flag
    of the decoder's inputs; a document without it is version 1. ``trained_across``: the K range and hardware
    presets of a conditioned run (``hardware`` is then its evaluation hardware)."""
    doc = {"format": FORMAT, "policy": policy.to_dict(), "hardware": hw.to_dict(), "objective": objective, "lam": lam}
    if trained_across is not None:
        doc["trained_across"] = trained_across
    return doc


def write_network(
    run_dir: str | Path,
    policy: PolicyConfig,
    hw: Hardware,
    objective: str,
    lam: float,
    trained_across: dict | None = None,
) -> dict:
    """Write the policy's network.json (:func:`network_doc`) into ``run_dir``."""
    return run_folder.write_network(run_dir, network_doc(policy, hw, objective, lam, trained_across))


NETWORK_KEYS = ("format", "policy", "hardware", "objective", "lam")


def average_checkpoints(sources: Sequence[str | Path], out_dir: str | Path) -> dict:
    """Write the uniform average of the parameters of several checkpoints of one network to a new run
    folder (weight averaging of the checkpoints of one fine-tuning run: SWA, "model soups").

    Args:
        sources: two or more run or step folders (as :func:`load_policy` takes them) whose
            network.json agree on policy, hardware, objective and lam.
        out_dir: the new run folder (must not exist or be empty): network.json (with the sources
            under ``averaged_from``) and the averaged parameters as checkpoint step 0, so
            :func:`load_policy`, ``respect-eval`` and ``init_from`` read it like any run folder.

    Returns: the written network document. Raises ValueError (nothing written) on bad input.
    """
    out = Path(out_dir)
    if len(sources) < 2:
        raise ValueError(f"average at least two checkpoints, got {len(sources)}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} already exists and is not an empty folder")
    loaded = [load_policy(source) for source in sources]
    network = {key: loaded[0][1][key] for key in NETWORK_KEYS}
    for source, (_, doc) in zip(sources, loaded, strict=True):
        if {key: doc[key] for key in NETWORK_KEYS} != network:
            raise ValueError(f"{source}: network.json differs from {sources[0]}'s (policy, hardware, objective, lam)")
    states = [nnx.split(model)[1] for model, _ in loaded]
    mean = jax.tree.map(lambda *xs: sum(xs) / len(xs), *states)
    doc = {**network, "averaged_from": [{"run_dir": d["run_dir"], "step": d["step"]} for _, d in loaded]}
    out.mkdir(parents=True, exist_ok=True)
    run_folder.write_network(out, doc)
    ckpt = Checkpointer(out, max_to_keep=None)
    try:
        ckpt.save(0, mean, {"step": 0})
        ckpt.wait()
    finally:
        ckpt.close()
    return doc

