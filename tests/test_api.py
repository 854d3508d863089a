"""The Python API (respect_jax.api, re-exported by ``import respect_jax as rj``): the README example, the solver
list, the result fields against the NumPy reference evaluator, and one-line ValueErrors on bad input."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import respect_jax as rj
from respect_jax.api import ScheduleResult
from respect_jax.reference import enumerate_valid_schedules, reference_metrics, reference_objective
from respect_jax.solvers import run_solver

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "data" / "graphs" / "dnn40.json"
REL = 2e-6  # the shared evaluator runs in float32; the reference in float64 / exact integers


def readme_example() -> str:
    """The Python code block of the README's "Python API" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python API", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README: no python block under '## Python API'"
    return match.group(1)


def check_against_reference(res: ScheduleResult, graph, hw) -> None:
    """Every figure of ``res`` equals the NumPy reference evaluator's for its assignment."""
    assert len(res.assignment) == graph.num_nodes == res.num_nodes
    ref = reference_metrics(graph, res.assignment, hw)
    assert ref["valid"]
    expect = reference_objective(graph, res.assignment, hw, res.objective_name, res.lam)
    assert res.objective == pytest.approx(expect, rel=REL)
    m = res.metrics
    for key in ("peak_mem_bytes", "comm_bytes", "bottleneck_s", "latency_s", "spill_bytes"):
        assert getattr(m, key) == pytest.approx(ref[key], rel=REL, abs=1e-9), key
    for key in ("mem_k", "in_k", "spill_k", "macs_k", "time_k"):
        assert len(getattr(m, key)) == hw.stages
        assert list(getattr(m, key)) == pytest.approx(ref[key], rel=REL, abs=1e-9), key
    assert m.throughput_per_s == pytest.approx(1.0 / ref["bottleneck_s"], rel=REL)


def test_readme_example_runs_from_any_folder_and_is_the_proven_optimum(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # data/models/vgg16.json is found as a shipped file, not in the working directory
    scope: dict = {}
    exec(compile(readme_example(), "README.md", "exec"), scope)
    res, g, hw = scope["res"], scope["g"], scope["hw"]
    assert isinstance(res, rj.ScheduleResult) and res.solver == "cpsat" and res.objective_name == "latency"
    check_against_reference(res, g, hw)
    # VGG16 is a 19-layer chain: every valid K=4 schedule can be scored (1,540 of them)
    best = min(reference_objective(g, s, hw, "latency") for s in enumerate_valid_schedules(g, hw.stages))
    assert res.optimal is True and res.gap == pytest.approx(0.0, abs=1e-6)
    assert res.objective == pytest.approx(best, rel=REL)
    assert res.lower_bound is not None and res.lower_bound <= res.objective * (1 + REL)
    assert res.lower_bound == pytest.approx(best, rel=1e-5)
    written = json.loads((tmp_path / "result.json").read_text())
    assert ScheduleResult.from_dict(written) == res
    assert (tmp_path / "result.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="pass the graph"):
        ScheduleResult.from_dict(written).plot()  # read from a document: no graph at hand
    assert written["assignment"] == list(res.assignment) and written["hardware"] == hw.to_dict()


def test_result_document_is_the_solvers_and_round_trips():
    g = rj.load_graph(SMALL)
    hw = rj.hardware("coral_pcie", stages=3)
    res = rj.schedule(g, hw, solver="compiler", objective="paper", lam=0.5)
    doc = run_solver("compiler", g, hw, "paper", 0.5)  # what respect-schedule wrote before the API existed
    got = res.to_dict()
    assert list(got) == list(doc)  # the RESULT.json keys, in order
    got.pop("solve_time_s"), doc.pop("solve_time_s")
    assert got == doc
    check_against_reference(res, g, hw)
    assert res.optimal is None and res.gap is None and res.lower_bound is None  # a heuristic proves nothing
    assert ScheduleResult.from_dict(json.loads(res.to_json())) == res
    with pytest.raises(AttributeError):
        res.objective = 0.0  # frozen


def test_solvers_lists_every_solver_in_a_fresh_process_and_import_is_light():
    """``import respect_jax`` imports no JAX; registering every solver (what each command does first) imports no
    flax, optax or jraph: a trained policy schedules from stored executables without them."""
    code = (
        "import sys, json, respect_jax as rj\n"
        "light = not any(m == 'jax' or m.startswith('jax.') for m in sys.modules)\n"
        "names = rj.solvers()\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'flax', 'optax', 'jraph', 'scipy', 'cvxpy'})\n"
        "prefixes = ('respect_jax.solvers.', 'respect_jax.policy.', 'respect_jax.respect_pointer.')\n"
        "solver_modules = lambda: sorted(m.rsplit('.', 1)[-1] for m in sys.modules if m.startswith(prefixes))\n"
        "named = solver_modules()\n"
        "g = rj.load_graph('data/models/vgg16.json')\n"
        "value = rj.schedule(g, rj.hardware('coral_usb', stages=4), solver='contiguous').objective\n"
        "print(json.dumps({'light': light, 'solvers': names, 'heavy': heavy, 'named': named,\n"
        "                  'contiguous': solver_modules(), 'value': value}))\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["light"], "import respect_jax imported JAX"
    assert out["heavy"] == [], f"registering the solvers imported {out['heavy']}"
    presets = sorted(p.stem for p in (ROOT / "conf" / "solver").glob("*.yaml"))  # every solver= of the CLI
    assert out["solvers"] == presets
    assert {"policy", "respect_pointer", "order_policy", "auto", "cpsat", "milp"} <= set(out["solvers"])
    assert rj.solvers() == presets  # here, after other imports: the same list (the package stays callable)
    # naming the solvers imports none of their modules; running one imports its own (and what it uses) only
    assert out["named"] == ["base"], out["named"]
    imported = set(out["contiguous"])
    assert "partitioners" in imported, imported
    assert not imported & {"auto", "cpsat", "milp", "gumbel", "greedy", "solver"}, imported
    g = rj.load_graph("data/models/vgg16.json")
    assert out["value"] == rj.schedule(g, rj.hardware("coral_usb", stages=4), solver="contiguous").objective


def test_hardware_presets_with_overrides_equal_the_yaml():
    assert rj.hardware_presets() == sorted(p.stem for p in (ROOT / "conf" / "hardware").glob("*.yaml"))
    for name in rj.hardware_presets():
        values = yaml.safe_load((ROOT / "conf" / "hardware" / f"{name}.yaml").read_text())
        expect = {k: (int(v) if k == "stages" else float(v)) for k, v in values.items()}
        assert rj.hardware(name).to_dict() == expect
        assert rj.hardware(name, stages=6, link_bw=1e8).to_dict() == {**expect, "stages": 6, "link_bw": 1e8}


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda g, hw: rj.hardware("nope"), "unknown hardware preset 'nope'; choose one of coral_pcie"),
        (lambda g, hw: rj.hardware("coral_usb", stages=0), "hardware.stages must be an integer in [1, 1024]"),
        (lambda g, hw: rj.hardware("coral_usb", sram=1), "unknown hardware field(s) sram"),
        (lambda g, hw: rj.hardware("coral_usb", link_bw=-1), "hardware.link_bw must be > 0"),
        (lambda g, hw: rj.schedule(g, hw, solver="nope"), "unknown solver 'nope'; available: auto"),
        (lambda g, hw: rj.schedule(g, hw, solver="greedy", objective="speed"), "objective must be one of paper"),
        (lambda g, hw: rj.schedule(g, hw, solver="cpsat", time_limt_s=1), "unknown option(s) time_limt_s"),
        (lambda g, hw: rj.schedule(str(SMALL), hw, solver="greedy"), "graph must be a Graph"),
        (lambda g, hw: rj.schedule(g, hw.to_dict(), solver="greedy"), "hw must be a Hardware"),
        (lambda g, hw: rj.load_graph("/no/such/graph.json"), "cannot read"),
        (lambda g, hw: rj.load_graph(ROOT / "pyproject.toml"), "not valid JSON"),
    ],
)
def test_bad_input_is_a_one_line_value_error(call, message):
    g, hw = rj.load_graph(SMALL), rj.hardware("coral_usb", stages=3)
    with pytest.raises(ValueError) as err:
        call(g, hw)
    text = str(err.value)
    assert message in text and "\n" not in text.strip(), text


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) for m in ("tflite", "tensorflow")), reason="the coral extra is installed"
)
def test_model_importers_without_the_coral_extra_say_what_to_install(tmp_path):
    for call in (lambda: rj.from_tflite(tmp_path / "model.tflite"), lambda: rj.from_keras(object())):
        with pytest.raises(ImportError) as err:
            call()
        text = str(err.value)
        assert "coral extra" in text and "\n" not in text, text


def test_the_default_checkpoints_and_models_are_package_data():
    """What the code defaults to is in the wheel (pyproject's package-data; tests/test_wheel.py installs it)."""
    import tomllib

    from omegaconf import OmegaConf

    from respect_jax.policy.solver import DEFAULT_CHECKPOINT
    from respect_jax.resources import data_dir
    from respect_jax.respect_pointer.solver import DEFAULT_CHECKPOINT as POINTER_CHECKPOINT

    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert shipped["respect_jax.conf"] == ["**/*.yaml"]
    from respect_jax.policy.order_solver import DEFAULT_ORDER_CHECKPOINT

    eval_default = Path(OmegaConf.load(ROOT / "conf" / "eval.yaml").checkpoint)
    defaults = [DEFAULT_CHECKPOINT, POINTER_CHECKPOINT, ROOT / eval_default]
    defaults += [DEFAULT_ORDER_CHECKPOINT] if Path(DEFAULT_ORDER_CHECKPOINT).exists() else []  # once it ships
    for folder in defaults:
        rel = Path(folder).resolve().relative_to(data_dir())
        assert (data_dir() / rel / "network.json").is_file(), rel
        assert f"{rel.as_posix()}/**/*" in shipped["respect_jax.data"], f"{rel} is not package data"
    assert "models/*.json" in shipped["respect_jax.data"]


STEP_CHECKPOINT = ROOT / "data" / "checkpoints" / "respect_k4_paper_cut"


def test_policy_threads_option_spreads_many_graphs_and_changes_no_schedule():
    """``solver=policy`` passes ``threads`` to the order policy's many-graph decoding (the same schedules as one
    thread); a step-policy checkpoint refuses it in one line."""
    from conftest import random_graphs

    from respect_jax.solvers.base import run_solver_many, solver_options

    assert "policy" in rj.solvers()  # the learned solvers known by name (imported on first use)
    graphs = random_graphs(3, seed=5, min_nodes=14, max_nodes=20)
    hw = rj.hardware("coral_usb", stages=3)
    one = run_solver_many("policy", graphs, hw, "latency", 1.0, batch_size=2, threads=1, local_search=0)
    two = run_solver_many("policy", graphs, hw, "latency", 1.0, batch_size=2, threads=2, local_search=0)
    assert [r["info"]["threads"] for r in one + two] == [1] * 3 + [2] * 3
    assert [r["assignment"] for r in one] == [r["assignment"] for r in two]
    assert "threads" in solver_options("policy")  # a one-graph call takes it too (and has nothing to spread)
    with pytest.raises(ValueError, match="threads must be an integer >= 1 or null, got 0"):
        run_solver_many("policy", graphs, hw, "latency", 1.0, threads=0)
    with pytest.raises(ValueError, match="need an order-policy checkpoint"):
        run_solver("policy", graphs[0], hw, "latency", 1.0, threads=2, checkpoint=str(STEP_CHECKPOINT))
