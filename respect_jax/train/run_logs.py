"""Logs of a ``respect-train`` run beside its ``metrics.jsonl``: TensorBoard event files while it
trains, and ``curves.png`` at the end.

TensorBoard (``tensorboardX``, the ``logs`` extra: ``pip install 'respect-jax[logs]'``): one scalar
per numeric field of every metrics record, tagged ``train/<field>`` (``loss``, ``greedy_ratio``,
``wall_s``, ``graphs_per_s``...) and ``eval/<field>`` for the evaluation on that step (nested
dicts flattened with ``/``), at the record's ``step``. The event files go into the run folder
itself, so ``tensorboard --logdir runs/`` shows one run per folder. A resumed run writes a new
event file whose first event purges the steps from its first new record on (what a killed run
wrote after its last checkpoint), so the curves have no doubled steps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from respect_jax.viz import plot_training_curves, save_png

CURVES_FILE = "curves.png"
#: record fields that are not metrics
NOT_SCALARS = frozenset({"step", "phase", "bucket"})


def scalars(record: Mapping, prefix: str = "train/") -> dict[str, float]:
    """tag -> value of every finite numeric field of a metrics record (module docstring tags)."""
    out: dict[str, float] = {}
    for key, value in record.items():
        if key in NOT_SCALARS and prefix == "train/":
            continue
        if key == "eval" and isinstance(value, Mapping) and prefix == "train/":
            out.update(scalars(value, "eval/"))
        elif isinstance(value, Mapping):
            out.update(scalars(value, f"{prefix}{key}/"))
        elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out[f"{prefix}{key}"] = float(value)
    return out


def have_tensorboard() -> bool:
    """Whether ``tensorboardX`` can be imported."""
    try:
        import tensorboardX  # noqa: F401
    except ImportError:
        return False
    return True


def check_tensorboard_setting(value) -> bool:
    """``tensorboard`` setting -> whether to write event files: ``auto`` (when tensorboardX is
    installed), true (refused with one line when it is not), false."""
    if value == "auto":
        return have_tensorboard()
    if not isinstance(value, bool):
        raise ValueError(f"tensorboard must be auto, true or false, got {value!r}")
    if value and not have_tensorboard():
        raise ValueError("tensorboard=true needs tensorboardX: pip install 'respect-jax[logs]' (or tensorboard=auto)")
    return value


class TensorBoardLog:
    """An ``on_record`` hook for :func:`respect_jax.train.harness.host_loop` writing event files into
    ``run_dir``. The writer opens at the first record (purging that step and later ones from earlier
    event files); call :meth:`close` at the end."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self._writer = None

    def __call__(self, record: Mapping) -> None:
        step = int(record["step"])
        if self._writer is None:
            from tensorboardX import SummaryWriter

            # tensorboardX names a file by the second it opens (events.out.tfevents.<s>.<host>): a resumed run
            # opening within that second would write into the first run's file; the clock in nanoseconds (fixed
            # width, so names sort as numbers) keeps them apart and in creation order.
            suffix = f".{time.time_ns():020d}"
            self._writer = SummaryWriter(logdir=str(self.run_dir), purge_step=step, filename_suffix=suffix)
        for tag, value in scalars(record).items():
            self._writer.add_scalar(tag, value, step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def write_curves(run_dir: str | Path, history: Sequence[Mapping]) -> Path | None:
    """``run_dir/curves.png``: loss and evaluation curves of the run's records
    (:func:`respect_jax.viz.plot_training_curves`); None (nothing written) without records."""
    if not history:
        return None
    run_dir = Path(run_dir)
    return save_png(plot_training_curves({run_dir.name: list(history)}), run_dir / CURVES_FILE)


def check_curves_setting(value) -> bool:
    """``curves`` setting (write curves.png at the end): true or false, else a one-line ValueError."""
    if not isinstance(value, bool):
        raise ValueError(f"curves must be true or false, got {value!r}")
    return value


def fit_with_logs(fit: Callable, run_dir: str | Path, tensorboard: bool, curves: bool, **options) -> dict:
    """``fit(run_dir, on_record=..., **options)`` (a trainer's fit: :func:`respect_jax.train.harness.host_loop`)
    with TensorBoard event files (``tensorboard``) and ``curves.png`` at the end (``curves``), both written by
    process 0 only; returns the run's summary: run folder, final step, last record and last evaluation."""
    import jax

    main = jax.process_index() == 0
    tb_log = TensorBoardLog(run_dir) if tensorboard and main else None
    try:
        result = fit(run_dir, on_record=tb_log, **options)
    finally:
        if tb_log is not None:
            tb_log.close()
    if curves and main:
        write_curves(run_dir, result.history)
    evals = [r["eval"] for r in result.history if "eval" in r]
    last = result.history[-1] if result.history else {}
    return {"run_dir": str(run_dir), "step": int(result.state.step), "last": last, "eval": evals[-1] if evals else None}
