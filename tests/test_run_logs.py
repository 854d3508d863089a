"""respect-train's logs (respect_jax.train.run_logs): TensorBoard event files written through the training
loop's on_record hook, read back with a plain TFRecord reader, and curves.png."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from types import SimpleNamespace

import jax.numpy as jnp
import pytest
from flax import struct as fstruct
from tensorboardX.proto.event_pb2 import Event, SessionLog

from respect_jax.train import run_logs
from respect_jax.train.harness import LoopConfig, host_loop
from respect_jax.train.run_logs import TensorBoardLog, check_tensorboard_setting, scalars, write_curves


@fstruct.dataclass
class FakeState:
    params: dict
    step: jnp.ndarray


def read_events(run_dir: Path) -> list[list[Event]]:
    """Every event file of ``run_dir`` (in name order, i.e. creation time) as its list of events.

    TFRecord framing: u64 length, u32 masked CRC of the length, the bytes, u32 masked CRC of the bytes.
    """
    files = []
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        data, pos, events = path.read_bytes(), 0, []
        while pos < len(data):
            (length,) = struct.unpack("<Q", data[pos : pos + 8])
            events.append(Event.FromString(data[pos + 12 : pos + 12 + length]))
            pos += 12 + length + 4
        files.append(events)
    return files


def scalar_points(events: list[Event]) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for ev in events:
        for v in ev.summary.value:
            out.setdefault(v.tag, []).append((ev.step, v.simple_value))
    return out


def test_scalars_flatten_numeric_fields_and_the_evaluation():
    record = {"step": 50, "phase": "imitation", "bucket": 0, "loss": 0.25, "valid": 1.0, "stages": 4, "flag": True,
              "nan": float("nan"), "eval": {"gap_mean_pct": 3.5, "k4": {"ratio": 1.25}}}  # fmt: skip
    assert scalars(record) == {
        "train/loss": 0.25, "train/valid": 1.0, "train/stages": 4.0, "eval/gap_mean_pct": 3.5, "eval/k4/ratio": 1.25,
    }  # fmt: skip


def fit_fake(run_dir: Path, steps: int, on_record, resume: bool = True) -> list[dict]:
    """host_loop on a fake trainer whose epoch adds 1 to a counter: loss = 1 / (1 + step)."""
    loop = LoopConfig(steps, checkpoint_every=2, eval_every=4)

    def run_epoch(state):
        step = state.step + 2
        return FakeState({"w": state.params["w"] + 1}, step), {"phase": "fake", "loss": 1.0 / (1 + int(step))}

    result = host_loop(
        run_dir,
        loop,
        init_state=lambda: FakeState({"w": jnp.zeros(3)}, jnp.asarray(0)),
        run_epoch=run_epoch,
        network={"format": "fake"},
        evaluate=lambda params: {"gap_mean_pct": float(params["w"][0])},
        resume=resume,
        progress=False,
        on_record=on_record,
    )
    return result.history


def test_event_files_hold_every_metrics_record_and_a_resume_purges_the_rewritten_steps(tmp_path, monkeypatch):
    # tensorboardX names a file by the second it opens: both writers open "in the same second" here (on a fast
    # machine they did, and the resumed run wrote into the first run's file)
    import tensorboardX.event_file_writer as efw

    monkeypatch.setattr(efw, "time", SimpleNamespace(time=lambda: 1_800_000_000.25))
    # and our clock crosses a second between the two writers (the suffix must still sort in creation order)
    clock = iter([1_800_000_000_999_999_999, 1_800_000_001_000_000_001])
    monkeypatch.setattr(run_logs, "time", SimpleNamespace(time_ns=lambda: next(clock)))
    run = tmp_path / "run"
    log = TensorBoardLog(run)
    fit_fake(run, 4, log)
    log.close()
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (events,) = read_events(run)
    points = scalar_points(events)
    assert points["train/loss"] == [(r["step"], pytest.approx(r["loss"])) for r in metrics] == [(2, 1 / 3), (4, 1 / 5)]
    assert points["eval/gap_mean_pct"] == [(4, 2.0)]  # evaluated at step 4: w was incremented twice
    assert "train/phase" not in points and "train/step" not in points
    # resumed from the step-4 checkpoint up to step 8: a second file that starts by purging steps >= 6
    log = TensorBoardLog(run)
    fit_fake(run, 8, log)
    log.close()
    first, second = read_events(run)
    purge = [ev for ev in second if ev.HasField("session_log")]
    assert [(ev.session_log.status, ev.step) for ev in purge] == [(SessionLog.START, 6)]
    assert [s for s, _ in scalar_points(second)["train/loss"]] == [6, 8]


def test_curves_png_and_settings(tmp_path):
    history = [{"step": 2, "loss": 0.5, "wall_s": 1.0}, {"step": 4, "loss": 0.25, "wall_s": 1.0,
                                                        "eval": {"gap_mean_pct": 2.0}}]  # fmt: skip
    path = write_curves(tmp_path, history)
    assert path == tmp_path / "curves.png" and path.read_bytes()[:4] == b"\x89PNG"
    assert write_curves(tmp_path / "empty", []) is None and not (tmp_path / "empty").exists()
    assert check_tensorboard_setting("auto") is True  # tensorboardX is in the test extra
    assert check_tensorboard_setting(False) is False
    with pytest.raises(ValueError, match="tensorboard must be auto, true or false"):
        check_tensorboard_setting("yes")
