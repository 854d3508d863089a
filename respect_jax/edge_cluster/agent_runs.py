"""The run-folder side of training an edge agent, shared by the double DQN (:mod:`.dqn`) and the policy-switching
agent (:mod:`.switching`): episodes of a jitted training ``run`` driven by the one host loop
(:func:`respect_jax.train.harness.host_loop`), whole-state checkpoints and their restore, summary.json, and shrinking a
finished folder to its parameters for shipping.

An agent module supplies ``make_train(scn, cfg) -> (model, init, run)``: ``init(key) -> carry`` (a struct dataclass
with a ``params`` field) and ``run(carry, n) -> (carry, metrics)`` (``n`` episodes; metrics: dict of f32[n]).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from respect_jax import pytree as struct
from respect_jax.train import run_folder
from respect_jax.train.checkpoints import Checkpointer
from respect_jax.train.harness import LoopConfig, host_loop
from respect_jax.train.run_folder import CHECKPOINT_DIR

SUMMARY_FILE = "summary.json"
KEPT_DIR = "kept"  # run_dir/kept/checkpoints/<episode>: the parameters kept every ``keep_every`` episodes


@struct.dataclass
class Episodes:
    """The training state as the host loop sees it: the carry and the episodes done (``step``)."""

    carry: Any
    step: jax.Array

    @property
    def params(self) -> Any:
        return self.carry.params


def is_key(x) -> bool:
    """Whether ``x`` is an array of typed PRNG keys."""
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def train_item(carry: Any, episode: int) -> dict:
    """Everything of the training state but the parameters (checkpointed beside them), PRNG keys as raw data; fields
    that are None (an option that is off) are left out."""
    item = {f.name: getattr(carry, f.name) for f in fields(carry)
            if f.name != "params" and getattr(carry, f.name) is not None}
    item = jax.tree.map(lambda x: jax.random.key_data(x) if is_key(x) else x, item)
    return {**item, "episode": jnp.int32(episode)}


def carry_from(params: Any, train: dict, like: Any) -> Any:
    """The training state restored from a checkpoint's ``params`` and train item (typed keys as in ``like``; fields
    that are None in ``like`` stay None)."""
    item = {f.name: getattr(like, f.name) for f in fields(like)
            if f.name != "params" and getattr(like, f.name) is not None}
    restored = jax.tree.map(
        lambda x, y: jax.random.wrap_key_data(jnp.asarray(y), impl=jax.random.key_impl(x)) if is_key(x)
        else jnp.asarray(y),
        item, {k: train[k] for k in item},
    )
    unset = {f.name: None for f in fields(like) if f.name != "params" and getattr(like, f.name) is None}
    return type(like)(params=params, **restored, **unset)


def recorded_train_time(run_dir: Path) -> float:
    """``train_time_s`` of the run's summary.json (0 if it has none)."""
    try:
        return float(json.loads((run_dir / SUMMARY_FILE).read_text()).get("train_time_s", 0.0))
    except (OSError, ValueError, AttributeError, TypeError):
        return 0.0


@dataclass
class TrainedRun:
    """What :func:`train_episodes` returns: the network's graph, the final parameters, the records, this call's
    wall time and the episode it started from (> 0: resumed; == episodes: a finished run, nothing trained)."""

    graphdef: nnx.GraphDef
    params: Any
    history: list[dict]
    train_time_s: float
    resumed_at: int


def train_episodes(
    made: tuple[nnx.Module, Callable, Callable],
    episodes: int,
    items_per_episode: int,
    seed: int,
    run_dir: str | Path | None,
    *,
    chunk: int,
    network: dict,
    ignore: tuple[str, ...],
    state_key: str,
    log: Callable[[str], None] | None,
    overwrite: bool,
    resolved_config: str | None,
    keep_every: int = 0,
) -> TrainedRun:
    """Train ``episodes`` episodes of ``made = make_train(scn, cfg)`` in jitted chunks of ``chunk``; with ``run_dir``,
    write network.json (``network``), config.yaml, metrics.jsonl and orbax checkpoints (the whole training state per
    chunk). A folder holding the same network (but the ``ignore`` keys) is resumed; another is refused unless
    ``overwrite``, which first removes that agent's files. ``state_key``: a train-item key only whole training states
    have (a parameters-only folder can be loaded but not trained on).

    ``keep_every`` > 0 (needs ``run_dir``): also keep the parameters after every ``keep_every`` episodes and after
    the last one, in ``run_dir/kept`` (:func:`kept_episodes`, :func:`export_kept`; untouched by
    :func:`keep_parameters_only`), for choosing a checkpoint on validation traces. A chunk then also ends at each
    multiple of ``keep_every``; with ``keep_every`` a multiple of ``chunk`` the chunks, and so the training, are
    those of ``keep_every`` 0."""
    if keep_every < 0:
        raise ValueError(f"keep_every must be >= 0 (0: keep the last checkpoint only), got {keep_every}")
    if keep_every and run_dir is None:
        raise ValueError("keep_every > 0 needs a run_dir to keep the checkpoints in")
    model, init, run = made
    graphdef, _ = nnx.split(model)
    kept = None
    if run_dir is not None:
        run_dir = Path(run_dir)
        if overwrite and (run_dir / CHECKPOINT_DIR).exists():
            run_folder.clear(run_dir, (SUMMARY_FILE,))
            shutil.rmtree(run_dir / KEPT_DIR, ignore_errors=True)
    run_jit = jax.jit(run, static_argnums=1, donate_argnums=0)

    def run_epoch(state: Episodes) -> tuple[Episodes, list[dict]]:
        nonlocal kept
        step = int(state.step)
        n = min(chunk, episodes - step)
        if keep_every:
            n = min(n, keep_every - step % keep_every)
        carry, metrics = run_jit(state.carry, n)
        metrics = jax.device_get(metrics)
        if keep_every and ((step + n) % keep_every == 0 or step + n == episodes):
            kept = kept or Checkpointer(run_dir / KEPT_DIR, max_to_keep=None)
            kept.save(step + n, jax.device_get(carry.params), {"episode": jnp.int32(step + n)})
            kept.wait()  # the next chunk donates these buffers
        return Episodes(carry, state.step + n), [{k: float(v[i]) for k, v in metrics.items()} for i in range(n)]

    def restore(ckpt, like: Episodes, latest: int) -> Episodes:
        carry = like.carry
        if latest == episodes:  # finished: nothing to train, the parameters are the agent
            params, _ = ckpt.restore(carry.params, None, latest)
            return Episodes(carry.replace(params=params), jnp.int32(latest))
        if state_key not in ckpt.stored_keys(latest, "train"):
            raise ValueError(f"{run_dir} holds an agent saved without its training state (keep_parameters_only), "
                             "which cannot be trained on; use a new run_dir, or overwrite=true to replace it")
        params, train = ckpt.restore(carry.params, train_item(carry, 0), latest)
        return Episodes(carry_from(params, train, carry), jnp.int32(latest))

    loop = LoopConfig(episodes, max_to_keep=2, items_per_step=items_per_episode, rate="env_steps_per_s",
                      step_key="episode")
    start = time.perf_counter()
    try:
        result = host_loop(
            run_dir, loop,
            init_state=lambda: Episodes(init(jax.random.key(seed)), jnp.int32(0)),
            run_epoch=run_epoch,
            network=network,
            train_item=lambda state: train_item(state.carry, int(state.step)),
            restore=restore,
            ignore=ignore,
            hint=", or overwrite=true to replace it",
            resolved_config=resolved_config,
            log=log or (lambda msg: None),
            progress=False,
        )
    finally:
        if kept is not None:
            kept.close()
    train_time_s = time.perf_counter() - start
    if run_dir is not None and result.resumed_at == episodes:  # a finished run again: nothing was trained
        train_time_s = recorded_train_time(run_dir)
    return TrainedRun(graphdef, jax.device_get(result.state.params), result.history, train_time_s, result.resumed_at)


def keep_parameters_only(run_dir: str | Path, params: Any) -> None:
    """Shrink a finished run folder to the last checkpoint's ``params`` (the loaded agent's): the training state,
    replay buffer included, is what makes a checkpoint large. For agents that are shipped."""
    run_dir = Path(run_dir)
    reader = Checkpointer(run_dir, max_to_keep=None, create=False)
    try:
        latest = reader.latest_step()
    finally:
        reader.close()
    shutil.rmtree(run_dir / CHECKPOINT_DIR)
    _write_parameters(run_dir, latest, params)


def _write_parameters(folder: Path, episode: int, params: Any) -> None:
    """One parameters-only orbax checkpoint of ``params`` at ``episode`` in ``folder`` (loaded like a shipped agent)."""
    ckpt = Checkpointer(folder, max_to_keep=1)
    try:
        ckpt.save(int(episode), params, {"episode": jnp.int32(episode)})
        ckpt.wait()
    finally:
        ckpt.close()


def kept_episodes(run_dir: str | Path) -> list[int]:
    """The episodes whose parameters training kept in ``run_dir/kept`` (``keep_every``), ascending (empty: none)."""
    folder = Path(run_dir) / KEPT_DIR / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.is_dir() and p.name.isdigit())


def kept_params(run_dir: str | Path, params_like: Any, episode: int) -> Any:
    """The parameters kept after ``episode`` (shaped like ``params_like``); a ValueError names the kept episodes if
    there is none for ``episode``."""
    have = kept_episodes(run_dir)
    if episode not in have:
        raise ValueError(f"{run_dir}: no parameters kept after episode {episode} (kept: "
                         f"{', '.join(map(str, have)) or 'none; train with keep_every > 0'})")
    ckpt = Checkpointer(Path(run_dir) / KEPT_DIR, max_to_keep=None, create=False)
    try:
        params, _ = ckpt.restore(params_like, None, episode)
    finally:
        ckpt.close()
    return params


def export_kept(run_dir: str | Path, episode: int, dest: str | Path, params_like: Any, extra: dict | None = None
                ) -> Path:
    """A run folder ``dest`` whose agent is ``run_dir``'s parameters kept after ``episode``: its network.json and
    config.yaml, the metrics of episodes 1-``episode``, summary.json (+ ``selected_episode``, ``selected_from`` and
    ``extra``) and one parameters-only checkpoint at ``episode`` (loaded like a shipped agent)."""
    return export_params(run_dir, episode, dest, kept_params(run_dir, params_like, episode), extra)


def export_params(run_dir: str | Path, episode: int, dest: str | Path, params: Any, extra: dict | None = None
                  ) -> Path:
    """:func:`export_kept` with the agent's parameters given (e.g. :func:`average_params` of kept ones), recorded as
    of ``episode``."""
    run_dir, dest = Path(run_dir), Path(dest)
    if (dest / CHECKPOINT_DIR).exists():
        shutil.rmtree(dest / CHECKPOINT_DIR)
    dest.mkdir(parents=True, exist_ok=True)
    for name in (run_folder.NETWORK_FILE, run_folder.CONFIG_FILE):
        if (run_dir / name).is_file():
            shutil.copyfile(run_dir / name, dest / name)
    records = run_folder.read_metrics(run_dir / run_folder.METRICS_FILE) if (
        run_dir / run_folder.METRICS_FILE).is_file() else []
    (dest / run_folder.METRICS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records
                                                         if r.get("episode", 0) <= episode))
    summary = json.loads((run_dir / SUMMARY_FILE).read_text()) if (run_dir / SUMMARY_FILE).is_file() else {}
    summary = {**summary, "selected_episode": int(episode), "selected_from": str(run_dir), **(extra or {})}
    (dest / SUMMARY_FILE).write_text(json.dumps(summary, indent=1) + "\n")
    _write_parameters(dest, episode, params)
    return dest


def best_episode(scores: dict[int, float]) -> int:
    """The kept episode with the highest selection score; among equal scores the earliest (less training)."""
    if not scores:
        raise ValueError("no kept checkpoint to choose from")
    top = max(scores.values())
    return min(e for e, v in scores.items() if v == top)


def last_kept(episodes: list[int], count: int) -> list[int]:
    """The last ``count`` of the kept ``episodes`` (ascending); a one-line ValueError unless 1 <= count <= kept."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= len(episodes):
        raise ValueError(f"average_last must be an integer in 1..{len(episodes)} (the kept checkpoints), got {count!r}")
    return sorted(episodes)[-count:]


def average_params(trees: list[Any]) -> Any:
    """The element-wise mean of parameter trees of one structure (weight averaging of checkpoints, SWA-style), in
    float32 (accumulated in float64)."""
    if not trees:
        raise ValueError("average_params needs at least one parameter tree")
    structure = jax.tree.structure(trees[0])
    for tree in trees[1:]:
        if jax.tree.structure(tree) != structure:
            raise ValueError("average_params: the parameter trees differ in structure")
    total = jax.tree.map(lambda x: np.asarray(x, dtype=np.float64), trees[0])
    for tree in trees[1:]:
        total = jax.tree.map(lambda a, x: a + np.asarray(x, dtype=np.float64), total, tree)
    return jax.tree.map(lambda a: jnp.asarray((a / len(trees)).astype(np.float32)), total)


def averaged_kept(run_dir: str | Path, params_like: Any, count: int) -> tuple[Any, list[int]]:
    """The mean of the parameters kept after the last ``count`` kept episodes of ``run_dir``, and those episodes."""
    episodes = last_kept(kept_episodes(run_dir), count)
    return average_params([kept_params(run_dir, params_like, e) for e in episodes]), episodes
