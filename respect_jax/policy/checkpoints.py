"""Reading a trained GNN policy from its run folder: the orbax :class:`Checkpointer`, the network document
(network.json: policy config, hardware, objective, lam) and :func:`load_policy`.

A run folder holds ``network.json``, ``config.yaml``, ``metrics.jsonl`` and ``checkpoints/<step>/{params,train}/``
(orbax items: the parameters; the rest of the training state). :func:`load_policy` takes a run folder (or its
``checkpoints`` folder, or a step folder) and returns the network with its trained parameters: this is what
``respect-eval`` and ``solver=policy`` use. Writing run folders (training) is :mod:`respect_jax.train`'s.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import jax
import orbax.checkpoint as ocp
from flax import nnx

from respect_jax.costs import OBJECTIVES, hardware_from_dict
from respect_jax.policy.config import PolicyConfig
from respect_jax.policy.model import SchedulingPolicy

NETWORK_FILE = "network.json"
CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoints"
FORMAT = "respect-jax-policy/1"
ITEMS = ("params", "train")  # the two orbax items of a checkpoint step

# orbax logs every save/restore at INFO and warns about missing sharding on CPU restores
logging.getLogger("absl").setLevel(logging.ERROR)


def find_run_dir(path: str | Path) -> Path:
    """The run folder of ``path`` (itself, or a parent holding network.json)."""
    path = Path(path)
    for candidate in (path, path.parent, path.parent.parent):
        if (candidate / NETWORK_FILE).is_file():
            return candidate
    raise FileNotFoundError(f"{path}: not a policy checkpoint (no {NETWORK_FILE} in it or its parents)")


def read_network(run_dir: str | Path) -> dict:
    """The network document of a run folder, checked (one-line ValueError naming the file when it is not one)."""
    path = Path(run_dir) / NETWORK_FILE
    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise ValueError(f"{path}: unknown format {doc.get('format')!r} (expected {FORMAT})")
    missing = [key for key in ("policy", "hardware", "objective", "lam") if key not in doc]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}")
    if doc["objective"] not in OBJECTIVES:
        raise ValueError(f"{path}: objective must be one of {', '.join(OBJECTIVES)}, got {doc['objective']!r}")
    try:
        hardware_from_dict(doc["hardware"])
    except (ValueError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: {err}") from None
    return doc


def abstract(tree):
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)


def _shapes(tree) -> dict[str, tuple[int, ...]]:
    """``{dotted path: shape}`` of the arrays of a tree (nnx.State, dict, or orbax metadata alike)."""
    out = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        names = [str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path]
        if names and names[-1] == "value":
            names = names[:-1]
        out[".".join(names)] = tuple(getattr(leaf, "shape", ()))
    return out


class Checkpointer:
    """Orbax checkpoint manager of one run folder (params and train state as two items)."""

    def __init__(self, run_dir: str | Path, max_to_keep: int | None = 3, create: bool = True):
        self.directory = (Path(run_dir) / CHECKPOINT_DIR).resolve()
        if not create and not self.directory.is_dir():  # reading: never leave an empty folder behind
            raise FileNotFoundError(f"{self.directory}: no checkpoint to restore")
        options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=create)
        handlers = {name: ocp.StandardCheckpointHandler() for name in ITEMS}  # item_metadata reads shapes
        self.manager = ocp.CheckpointManager(self.directory, options=options, item_handlers=handlers)

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, params, train: dict) -> None:
        """Save ``params`` (nnx.State) and ``train`` (opt_state, step, key, ...) at ``step`` (async)."""
        args = ocp.args.Composite(params=ocp.args.StandardSave(params), train=ocp.args.StandardSave(train))
        self.manager.save(step, args=args, force=True)

    def restore(self, params_like, train_like: dict | None, step: int | None = None):
        """Restore (params, train) shaped like the given trees (train None: parameters only)."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"{self.directory}: no checkpoint to restore")
        likes = {"params": params_like} if train_like is None else {"params": params_like, "train": train_like}
        for name, like in likes.items():
            self._check_shapes(step, name, like)
        items = {name: ocp.args.StandardRestore(abstract(like)) for name, like in likes.items()}
        try:
            out = self.manager.restore(step, args=ocp.args.Composite(**items))
        except Exception as err:  # noqa: BLE001  (orbax raises bare Exceptions for missing or truncated files)
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            first = first.split(" See full TensorStore details")[0]  # then a repr of the store's spec
            raise ValueError(f"{self.directory}/{step}: cannot restore this checkpoint ({first})") from None
        return out.params, (out.train if train_like is not None else None)

    def stored_keys(self, step: int, name: str) -> set[str]:
        """The top-level keys of item ``name`` of checkpoint ``step`` (empty if it has none or is unreadable)."""
        stored = self._stored(step, name)
        return set(stored.keys()) if hasattr(stored, "keys") else set()

    def _stored(self, step: int, name: str):
        """Orbax's metadata tree of item ``name`` of checkpoint ``step`` (None if it has none or is unreadable)."""
        try:
            return self.manager.item_metadata(step)[name]
        except Exception:  # noqa: BLE001  (no readable metadata: a restore itself reports the problem)
            return None

    def _check_shapes(self, step: int, name: str, like) -> None:
        """Compare the stored arrays of item ``name`` with the tree to restore, before orbax starts a
        restore that would fail (and leave its asynchronous workers printing tracebacks at exit)."""
        stored = self._stored(step, name)
        if stored is None:
            return
        want, have = _shapes(like), _shapes(stored)
        where = f"{self.directory}/{step}: the checkpoint's {name} do not match the network of network.json"
        if want.keys() != have.keys():
            extra, missing = sorted(have.keys() - want.keys()), sorted(want.keys() - have.keys())
            detail = "; ".join(
                f"{label} {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
                for label, keys in (("stored but not in the network:", extra), ("missing:", missing))
                if keys
            )
            raise ValueError(f"{where} ({detail})")
        for key in sorted(want):
            if want[key] != have[key]:
                raise ValueError(f"{where} ({key}: stored shape {have[key]}, the network's {want[key]})")

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.close()


def build_policy(doc: dict, seed: int = 0) -> SchedulingPolicy:
    return SchedulingPolicy(PolicyConfig.from_dict(doc["policy"]), rngs=nnx.Rngs(seed))


def load_policy(path: str | Path, step: int | None = None) -> tuple[SchedulingPolicy, dict]:
    """The trained policy of a run folder and its network document (hardware, objective, lam, step).

    ``path`` may be the run folder, its ``checkpoints`` folder or one step folder of it (that step
    is then loaded). The untrained network the parameters are restored into is built abstractly (``nnx.eval_shape``:
    shapes only), so loading runs no random initialisation (one small compilation per parameter shape in a fresh
    process), what ``solver=policy``'s step-policy checkpoints load through.
    """
    return load_network(path, step, read_network, lambda doc: nnx.eval_shape(lambda: build_policy(doc)))


def load_network(
    path: str | Path, step: int | None, read_doc: Callable[[Path], dict], build: Callable[[dict], nnx.Module]
) -> tuple[nnx.Module, dict]:
    """Any trained network of a run folder: ``read_doc(run_dir)`` reads (and checks) its network
    document, ``build(doc)`` makes an untrained module of that architecture, whose parameters are then
    restored from ``step`` (the latest when None, or the step folder ``path`` names)."""
    path = Path(path)
    run_dir = find_run_dir(path)
    if step is None and path.name.isdigit() and path.parent.name == CHECKPOINT_DIR:
        step = int(path.name)
    doc = read_doc(run_dir)
    graphdef, params = nnx.split(build(doc))
    ckpt = Checkpointer(run_dir, max_to_keep=None, create=False)
    try:
        step = ckpt.latest_step() if step is None else step
        params, _ = ckpt.restore(params, None, step)
    finally:
        ckpt.close()
    return nnx.merge(graphdef, params), {**doc, "step": step, "run_dir": str(run_dir)}


def checkpoint_label(doc: dict) -> str:
    """``step N`` of a trained checkpoint's document (:func:`load_policy`), or what an averaged one
    (:func:`respect_jax.train.checkpoints.average_checkpoints`, saved as step 0) is the average of."""
    averaged = doc.get("averaged_from")
    if averaged:
        steps = ", ".join(f"{Path(a['run_dir']).name} {a['step']}" for a in averaged)
        return f"the average of {len(averaged)} checkpoints: {steps}"
    return f"step {doc['step']}"
