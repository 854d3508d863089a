"""Run folders of the pointer baseline: the same layout as the policy's (orbax + network.json).

``network.json`` has ``format: respect-jax-pointer/1`` and ``kind: respect_pointer`` so that
``respect-eval`` and the solvers can tell the two networks apart (:func:`checkpoint_kind`).
"""

from __future__ import annotations

import json
from pathlib import Path

from flax import nnx

from respect_jax.costs import Hardware
from respect_jax.graphs.graph import write_json_atomic
from respect_jax.respect_pointer.config import PointerConfig
from respect_jax.respect_pointer.model import PointerNetwork
from respect_jax.train.checkpoints import CHECKPOINT_DIR, NETWORK_FILE, Checkpointer, find_run_dir

FORMAT = "respect-jax-pointer/1"
KIND = "respect_pointer"


def write_network(run_dir: str | Path, cfg: PointerConfig, hw: Hardware, objective: str, lam: float) -> dict:
    doc = {"format": FORMAT, "kind": KIND, "policy": cfg.to_dict(), "hardware": hw.to_dict()}
    doc.update(objective=objective, lam=lam)
    write_json_atomic(doc, Path(run_dir) / NETWORK_FILE)
    return doc


def checkpoint_kind(path: str | Path) -> str:
    """``respect_pointer`` or ``policy``: which network a run folder holds (FileNotFoundError if none)."""
    doc = json.loads((find_run_dir(path) / NETWORK_FILE).read_text())
    return KIND if doc.get("format") == FORMAT else "policy"


def load_pointer(path: str | Path, step: int | None = None) -> tuple[PointerNetwork, dict]:
    """The trained pointer network of a run folder (or its checkpoints folder or one step folder)."""
    path = Path(path)
    run_dir = find_run_dir(path)
    if step is None and path.name.isdigit() and path.parent.name == CHECKPOINT_DIR:
        step = int(path.name)
    doc = json.loads((run_dir / NETWORK_FILE).read_text())
    if doc.get("format") != FORMAT:
        raise ValueError(f"{run_dir}/{NETWORK_FILE}: not a respect_pointer checkpoint (format {doc.get('format')!r})")
    model = PointerNetwork(PointerConfig.from_dict(doc["policy"]), rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model)
    ckpt = Checkpointer(run_dir, max_to_keep=None)
    try:
        step = ckpt.latest_step() if step is None else step
        params, _ = ckpt.restore(params, None, step)
    finally:
        ckpt.close()
    return nnx.merge(graphdef, params), {**doc, "step": step, "run_dir": str(run_dir)}
