"""The labelling pipeline (``respect-label``): records, resumption after SIGKILL, errors, round trip."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import make_hw

from respect_jax.costs import evaluate_assignment
from respect_jax.graphs import GeneratorConfig
from respect_jax.labels import load_labelled_dataset, read_manifest
from respect_jax.labels.dataset import LabelledGraph, write_shard
from respect_jax.labels.pipeline import (
    LabelError,
    LabelRun,
    LabelSpec,
    build_manifest,
    check_manifest,
    dataset_graph,
    label_dataset,
    resolve_solver_options,
)
from respect_jax.solvers import available_solvers, run_solver

REPO = Path(__file__).resolve().parents[1]
ORACLE = "cpsat" if "cpsat" in available_solvers() else "milp"
SMALL = GeneratorConfig(mode="respect", min_nodes=8, max_nodes=10)
OPTIONS = {"time_limit_s": 20.0}
HW = make_hw(3)
COUNT = 48  # graphs of the reference run


SPEC_FIELDS = {f.name for f in dataclasses.fields(LabelSpec)}


def small_run(out: Path, workers: int = 1, count: int = 24, seed: int = 0, **kw) -> dict:
    """``label_dataset`` of a small dataset; ``kw`` overrides fields of its LabelSpec or LabelRun."""
    args = dict(
        generator=SMALL, count=count, seed=seed, shard_size=4, solver=ORACLE, solver_options=OPTIONS,
        hw=HW, objective="paper", lam=1.0, workers=workers, progress=False,
    )
    args.update(kw)
    spec = LabelSpec(**{k: v for k, v in args.items() if k in SPEC_FIELDS})
    return label_dataset(out, spec, LabelRun(**{k: v for k, v in args.items() if k not in SPEC_FIELDS}))


def key(item: LabelledGraph) -> tuple:
    """What must be identical between two runs (everything but the measured solve time)."""
    return (item.index, json.dumps(item.graph.to_dict()), tuple(item.assignment.tolist()), item.objective,
            item.optimal, item.gap, item.solver)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, list[LabelledGraph]]:
    """An uninterrupted run (in this process): 48 graphs of 8-10 nodes, 12 shards of 4."""
    out = tmp_path_factory.mktemp("labels") / "ref"
    summary = small_run(out, count=COUNT)
    assert summary["graphs"] == COUNT and summary["solved_now"] == COUNT
    return out, load_labelled_dataset(out)


def test_small_run_records_are_valid(reference):
    out, items = reference
    assert [it.index for it in items] == list(range(COUNT))
    assert sorted(p.name for p in out.glob("shard-*.jsonl")) == [f"shard-{k:05d}.jsonl" for k in range(COUNT // 4)]
    manifest = read_manifest(out)
    assert manifest["count"] == COUNT and manifest["solver"] == ORACLE and manifest["seed"] == 0
    assert manifest["summary"]["graphs"] == COUNT and manifest["summary"]["labelled_by"] == {ORACLE: COUNT}
    assert [(r["solved"], r["retried"], r["workers"]) for r in manifest["runs"]] == [(COUNT, 0, 1)]
    for it in items:
        # the graph is the deterministic graph (seed, index) and the objective the shared evaluator's
        assert it.graph.to_dict() == dataset_graph(SMALL, 0, it.index).to_dict()
        metrics = evaluate_assignment(it.graph, it.assignment, HW, "paper", 1.0)
        assert metrics["valid"]
        assert metrics["objective"] == pytest.approx(it.objective, rel=1e-12)
        assert it.optimal is True and it.gap == pytest.approx(0.0, abs=1e-6)
        assert it.solve_time_s >= 0 and it.solver == ORACLE
    # a proven optimum is never worse than a baseline
    for it in items[:6]:
        compiler = run_solver("compiler", it.graph, HW, "paper", 1.0)
        assert it.objective <= compiler["objective"] * (1 + 1e-9)


def test_resume_skips_existing_shards(reference, tmp_path):
    out, items = reference
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "shard-00002.jsonl").unlink()
    (copy / ".shard-00003.jsonl.tmp123").write_text("partial")  # left by a killed writer
    before = {p.name: p.stat().st_mtime_ns for p in copy.glob("shard-*.jsonl")}
    summary = small_run(copy, count=COUNT)
    assert summary["solved_now"] == 4 and summary["skipped_shards"] == COUNT // 4 - 1
    assert not list(copy.glob(".shard-*"))
    after = {p.name: p.stat().st_mtime_ns for p in copy.glob("shard-*.jsonl")}
    assert all(after[name] == t for name, t in before.items())
    assert [key(it) for it in load_labelled_dataset(copy)] == [key(it) for it in items]
    # a complete dataset: nothing to do
    assert small_run(copy, count=COUNT)["solved_now"] == 0


def test_sigkill_then_restart_equals_uninterrupted_run(reference, tmp_path):
    """Kill the whole CLI process group (driver + 2 workers) once a shard exists, then restart.

    The resumed dataset must equal the uninterrupted serial run record for record (graphs,
    assignments, objectives, flags), which also checks that parallel and serial runs agree.
    """
    _, items = reference
    out = tmp_path / "killed"
    count = COUNT  # enough that the run cannot finish between the first shard and the kill
    cmd = [
        sys.executable, "-m", "respect_jax.cli.label", f"out={out}", f"count={count}", "shard_size=4",
        "workers=2", f"solver={ORACLE}", "solver.options.time_limit_s=20.0", "graphs.min_nodes=8",
        "graphs.max_nodes=10", "hardware.stages=3", *[f"hardware.{k}={v}" for k, v in _hw_overrides().items()],
        "objective=paper", "progress=false",
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    try:
        while not list(out.glob("shard-*.jsonl")):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no shard written in time"
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    written = len(list(out.glob("shard-*.jsonl")))
    assert 1 <= written < count // 4, "the kill came too late to test resumption"
    summary = small_run(out, count=count)  # restart (in this process)
    assert summary["skipped_shards"] == written and summary["graphs"] == count
    resumed = load_labelled_dataset(out)
    assert [it.index for it in resumed] == list(range(count))
    assert [key(it) for it in resumed] == [key(it) for it in items]


def _hw_overrides() -> dict:
    d = HW.to_dict()
    d.pop("stages")
    return d


def test_fallback_labels_what_the_first_solver_does_not_prove(reference, tmp_path):
    """A heuristic first (never proves anything), the exact oracle as fallback: proven labels."""
    _, items = reference
    summary = small_run(tmp_path / "fb", count=8, solver="greedy", solver_options={}, fallback=ORACLE,
                        fallback_options=OPTIONS)
    assert summary["optimal_fraction"] == 1.0 and summary["labelled_by"] == {ORACLE: 8}
    for it, ref in zip(load_labelled_dataset(tmp_path / "fb"), items[:8], strict=True):
        assert it.solver == ORACLE and it.optimal is True
        assert it.objective == pytest.approx(ref.objective, rel=1e-9)
    assert read_manifest(tmp_path / "fb")["fallback"]["solver"] == ORACLE


def test_retry_unproven_completes_a_finished_dataset(reference, tmp_path):
    _, items = reference
    out = tmp_path / "retry"
    first = small_run(out, count=8, solver="greedy", solver_options={})
    assert first["optimal"] == 0 and first["labelled_by"] == {"greedy": 8}
    greedy = {it.index: it for it in load_labelled_dataset(out)}
    with pytest.raises(LabelError, match="fallback"):
        small_run(out, count=8, solver="greedy", solver_options={}, retry_unproven=True)
    # without retry_unproven a fallback does not touch finished shards
    assert small_run(out, count=8, solver="greedy", solver_options={}, fallback=ORACLE)["retried"] == 0
    summary = small_run(out, count=8, solver="greedy", solver_options={}, fallback=ORACLE, fallback_options=OPTIONS,
                        retry_unproven=True)
    assert summary["retried"] == 8 and summary["solved_now"] == 0 and summary["optimal_fraction"] == 1.0
    for it, ref in zip(load_labelled_dataset(out), items[:8], strict=True):
        assert it.graph.to_dict() == ref.graph.to_dict()
        assert it.optimal is True and it.solver == ORACLE
        assert it.objective == pytest.approx(ref.objective, rel=1e-9)
        assert it.objective <= greedy[it.index].objective * (1 + 1e-9)
        assert it.solve_time_s >= greedy[it.index].solve_time_s
    assert small_run(out, count=8, solver="greedy", solver_options={}, fallback=ORACLE,
                     retry_unproven=True)["retried"] == 0
    manifest = read_manifest(out)
    assert [(r["solved"], r["retried"], r["fallback"]) for r in manifest["runs"]] == [(8, 0, None), (0, 8, ORACLE)]
    assert manifest["fallback"]["solver"] == ORACLE and manifest["summary"]["labelled_by"] == {ORACLE: 8}


def test_manifest_mismatch_is_refused(reference, tmp_path):
    out, _ = reference
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    before = sorted((p.name, p.read_bytes()) for p in copy.iterdir())
    for kw, word in (({"seed": 1}, "seed"), ({"objective": "latency"}, "objective"), ({"count": COUNT + 1}, "count"),
                     ({"hw": make_hw(4)}, "hardware"), ({"solver_options": {"time_limit_s": 5.0}}, "solver_options")):
        with pytest.raises(LabelError, match=word) as err:
            small_run(copy, **{"count": COUNT, **kw})
        assert "\n" not in str(err.value)
    with pytest.raises(LabelError, match="generator"):
        small_run(copy, count=COUNT, generator=GeneratorConfig(mode="respect", min_nodes=8, max_nodes=11))
    assert sorted((p.name, p.read_bytes()) for p in copy.iterdir()) == before
    # a non-empty directory that is not a dataset is not touched either
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    with pytest.raises(LabelError, match="no manifest"):
        small_run(other)
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


def test_bad_arguments_write_nothing(tmp_path):
    out = tmp_path / "bad"
    for kw in ({"count": 0}, {"shard_size": 0}, {"workers": 0}, {"seed": -1}, {"objective": "speed"},
               {"solver": "nosuch"}, {"solver_options": {"no_such_option": 1}}, {"lam": -1.0},
               {"fallback": "nosuch"}, {"fallback": ORACLE, "fallback_options": {"bogus": 1}},
               {"retry_unproven": True}):
        with pytest.raises(LabelError):
            small_run(out, **kw)
        assert not out.exists()


def test_cli_bad_argument_exit_2_subprocess(tmp_path):
    out = tmp_path / "bad"
    res = subprocess.run([sys.executable, "-m", "respect_jax.cli.label", f"out={out}", "count=0"], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == ["respect-label: error: count must be an integer >= 1, got 0"]
    assert not out.exists()


@pytest.mark.parametrize(
    "args, words",
    [
        (("graphs.mode=tree",), "graphs.mode"),
        (("solver=nosuch",), "unknown solver"),
        (("graphs=nosuch",), "unknown graphs"),
        (("no_such_key=1",), "no_such_key"),
        (("graphs.no_such_field=3",), "no_such_field"),
        (("solver.options.time_limit_s=1", "+solver.options.bogus=1"), "bogus"),
        (("objective=speed",), "objective"),
        (("workers=two",), "workers"),
        (("shard_size=0",), "shard_size"),
        (("fallback.solver=nosuch",), "fallback"),
        (("retry_unproven=true",), "fallback"),
    ],
)
def test_cli_bad_arguments_one_line_exit_2(tmp_path, monkeypatch, capsys, args, words):
    from respect_jax.cli import label as label_cli

    out = tmp_path / "bad"
    monkeypatch.setattr(sys, "argv", ["respect-label", f"out={out}", *args])
    with pytest.raises(SystemExit) as exit_info:
        label_cli.main()
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("respect-label: error:") and words in lines[0], lines
    assert not out.exists()


SHIPPED = sorted(p.parent for p in (REPO / "data" / "labels").glob("*/manifest.json"))


@pytest.mark.parametrize("directory", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_datasets(directory):
    """The labelled sets in data/labels: complete, proven optimal, and re-checkable (a sample)."""
    from respect_jax.costs import hardware_from_dict

    manifest = read_manifest(directory)
    items = load_labelled_dataset(directory)
    assert [it.index for it in items] == list(range(manifest["count"]))
    assert all(it.optimal is True for it in items) and manifest["summary"]["optimal_fraction"] == 1.0
    cfg, hw = GeneratorConfig(**manifest["generator"]), hardware_from_dict(manifest["hardware"])
    for it in items[:: max(1, len(items) // 10)]:
        assert it.graph.to_dict() == dataset_graph(cfg, manifest["seed"], it.index).to_dict()
        metrics = evaluate_assignment(it.graph, it.assignment, hw, manifest["objective"], manifest["lam"])
        # the shared evaluator computes in float32: another XLA compilation (the suite's optimisation
        # level, a GPU) may round the last bit differently, so equality is up to float32 rounding
        assert metrics["valid"] and metrics["objective"] == pytest.approx(it.objective, rel=1e-6)
    # rerunning its command resumes it (README): the manifest the current code builds for the same settings is
    # accepted, although GeneratorConfig and the oracle gained fields (at their defaults) since it was written
    options = resolve_solver_options(manifest["solver"], dict(manifest["solver_options"]))
    current = build_manifest(
        LabelSpec(generator=cfg, count=manifest["count"], seed=manifest["seed"], shard_size=manifest["shard_size"],
                  solver=manifest["solver"], solver_options=options, hw=hw, objective=manifest["objective"],
                  lam=manifest["lam"])
    )
    check_manifest(directory, current)
    with pytest.raises(LabelError, match="different dataset"):
        check_manifest(directory, {**current, "generator": {**current["generator"], "edges_per_node": 1.0}})


def test_round_trip(reference, tmp_path):
    _, items = reference
    write_shard(tmp_path, 0, items[:5])
    (tmp_path / "manifest.json").write_text("{}")
    back = load_labelled_dataset(tmp_path)
    assert [key(it) for it in back] == [key(it) for it in items[:5]]
    assert all(np.array_equal(a.assignment, b.assignment) for a, b in zip(back, items[:5], strict=True))
    assert len(load_labelled_dataset(tmp_path, limit=2)) == 2


def _corrupt_copy(tmp_path: Path, edit) -> Path:
    """A copy of the shipped 50-node set whose first shard's first record went through ``edit(record)``."""
    copy = tmp_path / "set"
    shutil.copytree(REPO / "data" / "labels" / "respect50_k4_paper", copy)
    shard = sorted(copy.glob("shard-*.jsonl"))[0]
    lines = shard.read_text().splitlines()
    edited = edit(json.loads(lines[0]))
    shard.write_text("\n".join(([json.dumps(edited)] if edited is not None else []) + lines[1:]) + "\n")
    return copy


def _with(record: dict, **changes) -> dict:
    return {**record, **changes}


def _backwards(record: dict) -> dict:
    """The first edge's consumer moved to an earlier stage than its producer."""
    stage = list(record["assignment"])
    producer, consumer = record["graph"]["edges"][0][:2]
    ids = [node["id"] for node in record["graph"]["nodes"]]
    stage[ids.index(producer)], stage[ids.index(consumer)] = 3, 0
    return _with(record, assignment=stage)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: _with(r, assignment=[9] + r["assignment"][1:]), "assignment stages must be in [0, 4), got 0..9"),
        (lambda r: _with(r, assignment=[-1] + r["assignment"][1:]), "assignment stages must be in [0, 4)"),
        (_backwards, "assignment puts a consumer on an earlier stage than its producer"),
        (lambda r: _with(r, objective=0), "objective must be a positive finite number, got 0"),
        (lambda r: None, "499 records in the shards, the manifest's summary says 500"),
        (lambda r: [r], "expected a JSON object, got list"),
    ],
)
def test_corrupted_labels_are_refused_with_the_record_named(tmp_path, edit, message):
    """Training imitates these schedules and evaluation measures gaps against them: a record that is not a valid
    schedule of its graph, or a set with records missing, is an error naming where, not a silent wrong result."""
    copy = _corrupt_copy(tmp_path, edit)
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        load_labelled_dataset(copy)
    assert str(copy) in str(err.value)
    (copy / "manifest.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="manifest.json: expected a JSON object, got list"):
        read_manifest(copy)


def test_generator_config_from_plain_values():
    """The graphs node's values -> GeneratorConfig: whole floats taken as integers, one-line errors naming the
    field (and the mapping as ``what``)."""
    from respect_jax.graphs.generator_values import generator_config_from_values

    cfg = generator_config_from_values({"mode": "respect", "min_nodes": 8.0, "max_nodes": 10, "p_skip": 0.1})
    assert cfg == GeneratorConfig(mode="respect", min_nodes=8, max_nodes=10, p_skip=0.1)
    assert isinstance(cfg.min_nodes, int)
    bad = [({"bogus": 1}, "graphs has no field bogus"), ({"min_nodes": 8.5}, "graphs.min_nodes must be an integer"),
           ({"p_skip": "x"}, "graphs.p_skip must be a number"), ({"max_preds": True}, "must be a number")]
    for values, message in bad:
        with pytest.raises(ValueError, match=re.escape(message)):
            generator_config_from_values(values)
    with pytest.raises(ValueError, match=r"^extra\.min_nodes must be an integer"):
        generator_config_from_values({"min_nodes": 8.5}, what="extra")
