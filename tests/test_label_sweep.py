"""Labelling on a cluster: ``respect-label shards=a:b`` jobs fill one dataset folder (a Hydra multirun,
one job per shard range, through the submitit launcher), and give the dataset a single run gives."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_hw

from respect_jax.cli.label import parse_shards
from respect_jax.graphs import GeneratorConfig
from respect_jax.labels import load_labelled_dataset, read_manifest
from respect_jax.labels.pipeline import LabelError, LabelRun, LabelSpec, label_dataset

ROOT = Path(__file__).resolve().parents[1]
SMALL = GeneratorConfig(mode="respect", min_nodes=8, max_nodes=10)


def _run(out: Path, shards=None, count: int = 10) -> dict:
    """A cheap dataset (compiler heuristic, 10 graphs in 5 shards of 2)."""
    spec = LabelSpec(generator=SMALL, count=count, seed=3, shard_size=2, solver="compiler", hw=make_hw(3))
    return label_dataset(out, spec, LabelRun(workers=1, progress=False, shards=shards))


def _records(out: Path) -> list[tuple]:
    """Everything but the measured solve time."""
    return [(it.index, tuple(it.assignment.tolist()), it.objective, it.solver) for it in load_labelled_dataset(out)]


def test_shard_ranges_fill_one_dataset_like_a_single_run(tmp_path):
    whole = tmp_path / "whole"
    _run(whole)
    parts = tmp_path / "parts"
    first = _run(parts, shards=(3, 5))
    assert sorted(p.name for p in parts.glob("shard-*")) == ["shard-00003.jsonl", "shard-00004.jsonl"]
    assert first["graphs"] == 4 and first["shards"] == [3, 5] and first["dataset_complete"] is False
    assert "summary" not in read_manifest(parts)  # an incomplete dataset gets no summary
    # a stale temp file of another job's shard is left alone; one of this job's own shards is removed
    (parts / ".shard-00004.jsonl.tmpx").write_text("partial")
    (parts / ".shard-00001.jsonl.tmpx").write_text("partial")
    second = _run(parts, shards=(0, 3))
    assert (parts / ".shard-00004.jsonl.tmpx").exists() and not (parts / ".shard-00001.jsonl.tmpx").exists()
    assert second["solved_now"] == 6 and second["dataset_complete"] is True
    manifest = read_manifest(parts)
    assert manifest["summary"]["graphs"] == 10 and manifest["runs"][-1]["shards"] == [0, 3]
    assert _records(parts) == _records(whole)
    again = _run(parts, shards=(3, 5))  # resumes: nothing left to do
    assert again["solved_now"] == 0 and again["skipped_shards"] == 2


@pytest.mark.parametrize("shards", [(0, 0), (4, 6), (-1, 2), (2, 1)])
def test_shard_ranges_outside_the_dataset_are_refused(tmp_path, shards):
    with pytest.raises(LabelError, match="0 <= first < end <= 5"):
        _run(tmp_path / "x", shards=shards)
    assert not (tmp_path / "x").exists()


def test_parse_shards():
    assert parse_shards(None) is None
    assert parse_shards(3) == (3, 4)
    assert parse_shards("2:7") == (2, 7)
    assert parse_shards("2\\:7") == (2, 7)  # as a Hydra sweep passes it on
    assert parse_shards("4") == (4, 5)
    with pytest.raises(ValueError, match="shards must be null, a shard number k or a range a:b"):
        parse_shards("a:b")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None,
                    reason="hydra-submitit-launcher is not installed")
def test_label_multirun_through_submitit_local(tmp_path):
    """`respect-label -m shards=0:3,3:5 hydra/launcher=submitit_local`: two submitit jobs, one dataset folder,
    the records of a single run; the same sweep again resumes (solves nothing)."""
    out, sweep = tmp_path / "labels", tmp_path / "sweep"
    args = [sys.executable, "-m", "respect_jax.cli.label", "-m", f"out={out}", "graphs=respect30",
            "graphs.min_nodes=8", "graphs.max_nodes=10", "count=10", "seed=3", "shard_size=2", "solver=compiler",
            "hardware.stages=3", "workers=1", "progress=true", "shards=0:3,3:5", "hydra/launcher=submitit_local",
            "hydra.launcher.timeout_min=10", f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in out.glob("shard-*")) == [f"shard-{k:05d}.jsonl" for k in range(5)]
    logs = sorted((sweep / ".submitit").rglob("*_log.err"))
    assert len(logs) == 2  # one submitit job per shard range
    job_lines = " ".join(p.read_text() for p in logs)  # each job's closing summary line names its range
    assert f"{out} shards 0:3: 6 graphs (6 solved now" in job_lines, job_lines[-2000:]
    assert f"{out} shards 3:5: 4 graphs (4 solved now" in job_lines, job_lines[-2000:]

    single = tmp_path / "single"
    proc = subprocess.run([sys.executable, "-m", "respect_jax.cli.label", f"out={single}", "graphs=respect30",
                           "graphs.min_nodes=8", "graphs.max_nodes=10", "count=10", "seed=3", "shard_size=2",
                           "solver=compiler", "hardware.stages=3", "workers=1", "progress=false"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _records(out) == _records(single)
    assert read_manifest(out)["summary"]["graphs"] == 10

    again = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    lines = " ".join(p.read_text() for p in sorted((sweep / ".submitit").rglob("*_log.err")))
    assert f"{out} shards 0:3: 6 graphs (0 solved now, 0 retried, 3 shards resumed)" in lines, lines[-2000:]
    assert json.loads((out / "manifest.json").read_text())["summary"]["graphs"] == 10
