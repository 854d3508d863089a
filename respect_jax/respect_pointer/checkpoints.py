"""Run folders of the pointer baseline: the same layout as the policy's (orbax + network.json).

``network.json`` has ``format: respect-jax-pointer/1`` and ``kind: respect_pointer`` so that
``respect-eval`` and the solvers can tell the two networks apart (:func:`checkpoint_kind`).
"""

from __future__ import annotations

import json
from pathlib import Path

from flax import nnx

from respect_jax.costs import Hardware
from respect_jax.policy.checkpoints import NETWORK_FILE, find_run_dir, load_network
from respect_jax.respect_pointer.config import PointerConfig
from respect_jax.respect_pointer.model import PointerNetwork

FORMAT = "respect-jax-pointer/1"
KIND = "respect_pointer"


def network_doc(cfg: PointerConfig, hw: Hardware, objective: str, lam: float) -> dict:
    """The pointer's network.json document (written by the shared host loop)."""
    doc = {"format": FORMAT, "kind": KIND, "policy": cfg.to_dict(), "hardware": hw.to_dict()}
    doc.update(objective=objective, lam=lam)
    return doc


def checkpoint_kind(path: str | Path) -> str:
    """``respect_pointer`` or ``policy``: which network a run folder holds (FileNotFoundError if none)."""
    doc = json.loads((find_run_dir(path) / NETWORK_FILE).read_text())
    return KIND if doc.get("format") == FORMAT else "policy"


def load_pointer(path: str | Path, step: int | None = None) -> tuple[PointerNetwork, dict]:
    """The trained pointer network of a run folder (or its checkpoints folder or one step folder).

    The untrained network the parameters are restored into is built abstractly (``nnx.eval_shape``: shapes only, as
    the step policy's loader does), so loading draws no random initialisation: building it concretely compiled ~20
    jitted initialisers, about 3 s of a command's start on this CPU. Every parameter is then restored from the
    checkpoint."""

    def read_doc(run_dir: Path) -> dict:
        doc = json.loads((run_dir / NETWORK_FILE).read_text())
        if doc.get("format") != FORMAT:
            fmt = doc.get("format")
            raise ValueError(f"{run_dir}/{NETWORK_FILE}: not a respect_pointer checkpoint (format {fmt!r})")
        return doc

    def build(doc: dict) -> PointerNetwork:
        return nnx.eval_shape(lambda: PointerNetwork(PointerConfig.from_dict(doc["policy"]), rngs=nnx.Rngs(0)))

    return load_network(path, step, read_doc, build)
