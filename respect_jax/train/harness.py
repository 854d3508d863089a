"""The one training harness: train state, optimiser factory, scanned epoch and the host loop.

Every trainer (the GNN policy in :mod:`respect_jax.train.loop`, the RESPECT pointer, the real-time policy, the
ASET DQN) supplies only

* ``init_state() -> state``: a pytree with ``params`` and an integer ``step`` (usually :class:`TrainState`),
* ``run_epoch(state) -> (state, fields)``: one compiled, pure epoch (``lax.scan`` of update steps, state donated;
  :func:`scanned_epoch` builds one from a pure update step) and its metrics,
* its network document (network.json) and, optionally, ``evaluate(params) -> dict``;

and :func:`host_loop` does the rest the same way for all of them: the run folder (:mod:`respect_jax.train.run_folder`:
resume-or-refuse, network.json, config.yaml, metrics.jsonl), orbax checkpoints, resuming exactly from the latest
one, timing, progress lines, and the multi-process rule (process 0 alone writes files and logs; every process
agrees before any restores).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np
import optax

from respect_jax import pytree as struct
from respect_jax.train import run_folder
from respect_jax.train.checkpoints import Checkpointer
from respect_jax.train.config import TrainConfig

TIMING_KEYS = ("wall_s", "graphs_per_s", "episodes_per_s", "env_steps_per_s", "time_s")
#: record fields shown in progress lines (floats only, in this order)
SHOWN = (
    "loss", "accuracy", "ratio", "best_ratio", "greedy_ratio", "teacher_ratio", "entropy", "cost", "baseline",
    "bl_candidate", "return", "srt_rate", "override_rate", "finished", "success", "epsilon", "graphs_per_s",
    "episodes_per_s", "env_steps_per_s", "ratio_to_bound", "gap_mean_pct", "valid_pct",
)


@struct.dataclass
class TrainState:
    """Everything a resumed run needs: params (nnx.State), optax state, step i32[], key u32[2]."""

    params: Any
    opt_state: Any
    step: jax.Array
    key: jax.Array


# ------------------------------------------------------------------------------------------ optimiser
def make_optimizer(
    learning_rate: float | optax.Schedule, clip_norm: float, weight_decay: float = 0.0
) -> optax.GradientTransformation:
    """Global-norm clipping to ``clip_norm``, then Adam (AdamW when ``weight_decay`` > 0) at ``learning_rate``
    (a number or an optax schedule of the step)."""
    adam = optax.adamw(learning_rate, weight_decay=weight_decay) if weight_decay else optax.adam(learning_rate)
    return optax.chain(optax.clip_by_global_norm(clip_norm), adam)


def lr_schedule(
    values: Sequence[float],
    boundaries: Sequence[int] = (),
    warmup_steps: int = 0,
    decay_steps: int = 0,
    final_fraction: float = 0.1,
) -> optax.Schedule:
    """An optax schedule: ``values[i]`` from step ``boundaries[i - 1]`` on (piecewise constant), times a linear
    warm-up ``min(1, (step + 1) / warmup_steps)`` (0: none), times a cosine decay from 1 at step 0 to
    ``final_fraction`` at ``decay_steps`` (0: none)."""
    if len(values) != len(boundaries) + 1:
        raise ValueError(f"lr_schedule: {len(values)} values need {len(values) - 1} boundaries, got {len(boundaries)}")
    parts = [optax.constant_schedule(v) for v in values]
    base = optax.join_schedules(parts, list(boundaries)) if boundaries else parts[0]
    factors = []
    if warmup_steps:
        factors.append(optax.linear_schedule(1.0 / warmup_steps, 1.0, max(warmup_steps - 1, 1)))
    if decay_steps:
        factors.append(optax.cosine_decay_schedule(1.0, decay_steps, alpha=final_fraction))

    def schedule(step):
        lr = base(step)
        for factor in factors:
            lr = lr * factor(step)
        return lr

    return schedule


# ------------------------------------------------------------------------------------------ epochs
def scanned_epoch(step: Callable, length: int, **jit_options) -> Callable:
    """Jitted ``(state, data) -> (state, metrics[length])``: ``lax.scan`` of the pure update ``step(state, data)
    -> (state, metrics)`` over ``length`` steps, the state donated (``jit_options``: e.g. ``out_shardings``)."""

    def epoch(state, data):
        return jax.lax.scan(lambda s, _: step(s, data), state, None, length=length)

    return jax.jit(epoch, donate_argnums=0, **jit_options)


def state_item(state) -> dict:
    """What is checkpointed beside the parameters: every other field of a state dataclass."""
    return {f.name: getattr(state, f.name) for f in dataclasses.fields(state) if f.name != "params"}


def restore_state(ckpt: Checkpointer, like, step: int):
    """The state dataclass ``like`` restored from checkpoint ``step`` (:func:`state_item`'s fields)."""
    params, train = ckpt.restore(like.params, state_item(like), step)
    return like.replace(params=params, **train)


@dataclass(frozen=True)
class LoopConfig:
    """What the host loop needs to know of a trainer's settings.

    steps: train until the state's step reaches this; checkpoint_every / eval_every: at the epochs whose step is a
    multiple (and at the end; checkpoint_every 0: after every epoch; eval_every 0: only at the end); max_to_keep:
    checkpoints kept (None: all); items_per_step: what ``rate`` counts per step (graphs, episodes, environment
    steps); step_key: the name of the step in metrics.jsonl and progress lines (``step``, ``episode``).
    """

    steps: int
    checkpoint_every: int = 0
    eval_every: int = 0
    max_to_keep: int | None = 3
    items_per_step: int = 1
    rate: str = "graphs_per_s"
    step_key: str = "step"


def loop_config(tcfg: TrainConfig) -> LoopConfig:
    """The host loop settings of a ``train`` config (graphs per second over ``batch_size`` graphs a step)."""
    return LoopConfig(tcfg.steps, tcfg.checkpoint_every, tcfg.eval_every, tcfg.max_to_keep, tcfg.batch_size)


@dataclass
class FitResult:
    """The final state, every metrics record of the run (a resumed run's earlier ones included) and the step it
    started from (> 0: resumed)."""

    state: Any
    history: list[dict] = field(default_factory=list)
    resumed_at: int = 0


# ------------------------------------------------------------------------------------------ host loop
def host_loop(
    run_dir: str | Path | None,
    loop: LoopConfig,
    *,
    init_state: Callable[[], Any],
    run_epoch: Callable[[Any], tuple[Any, dict | list[dict]]],
    network: dict | None = None,
    evaluate: Callable[[Any], dict] | None = None,
    train_item: Callable[[Any], dict] = state_item,
    restore: Callable[[Checkpointer, Any, int], Any] = restore_state,
    ignore: Sequence[str] = (),
    hint: str = "",
    resume: bool = True,
    resolved_config: str | None = None,
    log: Callable[[str], None] | None = None,
    progress: bool = True,
    on_record: Callable[[dict], None] | None = None,
) -> FitResult:
    """Train from the latest checkpoint of ``run_dir`` (or ``init_state()``) until ``loop.steps``.

    ``run_epoch(state) -> (state, fields)``: one epoch; ``fields`` is a dict (one metrics record at the epoch's
    last step) or a list of dicts (one record per step of the epoch). The harness numbers the records
    (``loop.step_key``), adds ``wall_s`` and ``loop.rate`` (``items_per_step`` x steps / s), the evaluation
    (``eval``) every ``eval_every`` steps, appends them to metrics.jsonl and hands each to ``on_record``.
    ``network``: the network document (network.json; refused against a folder whose checkpoints are of another
    network, up to the keys in ``ignore``, see :func:`~respect_jax.train.run_folder.check_resume`).
    ``train_item`` / ``restore``: what is checkpointed beside the parameters and how a state comes back (default:
    every field of the state dataclass). ``run_dir`` None trains in memory (no files). ``resume`` false refuses a
    folder that holds checkpoints. ``log``: progress lines (default stderr); a tqdm bar when ``progress``.
    """
    main = jax.process_index() == 0  # a multi-process run: process 0 alone writes the folder's files and logs
    log = (log or (lambda msg: print(msg, file=sys.stderr))) if main else (lambda msg: None)
    bar_on = progress and main
    key = loop.step_key
    state = init_state()
    ckpt, history, latest = None, [], None
    if run_dir is not None:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        ckpt = Checkpointer(run_dir, max_to_keep=loop.max_to_keep)
        latest = ckpt.latest_step()
        error = None
        if main:
            try:
                run_folder.check_resume(run_dir, latest, resume, network or {}, ignore, hint)
                if latest is not None and latest > loop.steps:
                    raise ValueError(f"{run_dir} holds checkpoints up to {key} {latest}, more than the {loop.steps} "
                                     f"this command trains; train for more {key}s or use a new run_dir")
                if latest is not None:
                    history = run_folder.metrics_up_to(run_dir / run_folder.METRICS_FILE, latest, key=key)
            except ValueError as err:  # the folder is as it was
                error = err
        if jax.process_count() > 1 and not _all_agree(error is None):
            error = error or ValueError(f"{run_dir}: process 0 refused this run folder (its error is in its log)")
        try:
            if error is not None:
                raise error
            if latest is not None:
                state = restore(ckpt, state, latest)
        except ValueError:
            ckpt.close()
            raise
        if main:
            _start_files(run_dir, ckpt, latest, history, network, resolved_config, key, log)
        if latest is not None:
            log(f"resumed from {key} {latest} of {run_dir}")
    resumed_at = int(state.step)
    bar = _progress(loop.steps, resumed_at, bar_on)
    try:
        while int(state.step) < loop.steps:
            before = int(state.step)
            t0 = time.perf_counter()
            state, fields = run_epoch(state)
            jax.block_until_ready(state.params)
            wall = time.perf_counter() - t0
            step = int(state.step)
            timing = {"wall_s": wall, loop.rate: (step - before) * loop.items_per_step / wall}
            if isinstance(fields, dict):
                records = [{key: step, **fields, **timing}]
            else:
                records = [{key: before + i + 1, **f, **timing} for i, f in enumerate(fields)]
            if evaluate is not None and ((loop.eval_every and step % loop.eval_every == 0) or step == loop.steps):
                records[-1]["eval"] = evaluate(state.params)
            history += records
            if main and run_dir is not None:
                run_folder.append_metrics(run_dir / run_folder.METRICS_FILE, records)
            if main and on_record is not None:
                for record in records:
                    on_record(record)
            if ckpt is not None and (not loop.checkpoint_every or step % loop.checkpoint_every == 0
                                     or step == loop.steps):
                ckpt.save(step, state.params, train_item(state))
            if bar is not None:
                bar.update(step - before)
                bar.set_postfix_str(short(records[-1]))
            if bar is None or "eval" in records[-1]:
                log(progress_line(records[-1], key, loop.steps))
        if ckpt is not None:
            ckpt.wait()
    finally:
        if bar is not None:
            bar.close()
        if ckpt is not None:
            ckpt.wait()
            ckpt.close()
    return FitResult(state=state, history=history, resumed_at=resumed_at)


def _start_files(run_dir: Path, ckpt: Checkpointer, latest: int | None, history: list[dict], network: dict | None,
                 resolved_config: str | None, key: str, log: Callable[[str], None]) -> None:
    """After the checks and the restore: network.json, metrics.jsonl cut at the checkpoint, config.yaml."""
    if network is not None:
        run_folder.write_network(run_dir, network)
    metrics_path = run_dir / run_folder.METRICS_FILE
    if latest is not None:
        run_folder.write_metrics(metrics_path, history)
    else:
        if ckpt.directory.is_dir() and any(ckpt.directory.iterdir()):
            log(f"{ckpt.directory} holds no complete checkpoint; training starts from {key} 0")
        metrics_path.unlink(missing_ok=True)
    if resolved_config is not None:
        run_folder.write_config(run_dir, resolved_config, latest, log)


def _all_agree(ok: bool) -> bool:
    """Whether process 0 found ``ok`` (every process of a multi-process run gets its answer)."""
    from jax.experimental import multihost_utils

    return bool(multihost_utils.broadcast_one_to_all(np.int32(ok)))


def _progress(total: int, start: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=start, unit="step", file=sys.stderr, dynamic_ncols=True)


def short(record: dict) -> str:
    """``name=value`` of the float fields of :data:`SHOWN` in a record."""
    return " ".join(f"{k}={record[k]:.4g}" for k in SHOWN if isinstance(record.get(k), float))


def progress_line(record: dict, key: str, total: int) -> str:
    """``step 40/100 [phase] loss=... eval: ...``: the line logged after an epoch."""
    phase = f" [{record['phase']}]" if "phase" in record else ""
    line = f"{key} {record[key]}/{total}{phase} {short(record)}"
    return line + (f" eval: {short(record['eval'])}" if "eval" in record else "")


def without_timing(record: dict) -> dict:
    """A metrics record without wall-clock fields (for comparing runs)."""
    out = {}
    for k, v in record.items():
        if k in TIMING_KEYS:
            continue
        out[k] = without_timing(v) if isinstance(v, dict) else v
    return out
