"""``respect-rt train|eval``: one-line user errors, the eval table/plots, and train -> eval (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from respect_jax.cli import rt

BIN = Path(sys.executable).parent


def _main(monkeypatch, capsys, *args) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["respect-rt", *args])
    with pytest.raises(SystemExit) as exc:
        rt.main()
    return exc.value.code, capsys.readouterr().err.strip()


@pytest.mark.parametrize(
    "extra",
    [["eval.presets=null", "eval.methods=[edf]"], ["eval.methods=[edf]"], ["run_dir=/nonexistent/rt"]],
    ids=["presets_null", "implied_by_rt_scenario", "before_the_missing_policy"],
)
def test_infeasible_task_set_is_one_line_error(monkeypatch, capsys, extra):
    """Also: choosing rt_scenario on the command line evaluates it, not the default eval.presets, and the
    infeasibility is reported before the default methods' missing RL policy."""
    code, err = _main(monkeypatch, capsys, "eval", "rt_scenario=infeasible_demo", *extra)
    assert code == 2
    assert err.count("\n") == 0
    assert err.startswith("respect-rt: error: scenario infeasible_demo: HRT task 0 (resnet50): deadline 3.000 ms")
    assert "best-case latency" in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("frobnicate",), "unknown command 'frobnicate'; choose one of train, eval"),
        (("eval", "rt_scenario=nope"), "unknown rt_scenario 'nope'; choose one of"),
        (("eval", "eval.presets=[nope]", "eval.methods=[edf]"), "unknown rt_scenario 'nope'"),
        (("eval", "eval.methods=[edf+magic]"), "the only suffix is '+safety'"),
        (
            ("eval", "eval.methods=[rl]", "eval.presets=null", "run_dir=/nonexistent/rt"),
            "method rl needs a trained policy",
        ),
        (("train", "train.samples=1"), "train.samples must be >= 2"),
    ],
)
def test_user_errors_are_one_line(monkeypatch, capsys, args, needle):
    code, err = _main(monkeypatch, capsys, *args)
    assert code == 2 and err.count("\n") == 0 and needle in err, err


def test_choosing_rt_scenario_replaces_the_presets_of_that_command_only():
    assert rt.scenario_only("eval", ["rt_scenario=u70_balanced", "eval.scenarios=5"]) == ["eval.presets=null"]
    assert rt.scenario_only("train", ["rt_scenario.hrt_tasks=3"]) == ["train.presets=null"]
    assert rt.scenario_only("eval", ["rt_scenario=tiny", "eval.presets=[tiny,u50_balanced]"]) == []
    assert rt.scenario_only("eval", ["train.presets=null", "run_dir=x"]) == []


def test_evaluation_never_redraws_a_training_pool():
    """Regression: with seed=1 the training pool of preset i was drawn from seed 1000 + i, the same random stream
    as the evaluation scenarios of eval.seed=1000 (the default). The scenario generator draws everything from
    ``numpy.random.default_rng(seed)``, so distinct streams are what keeps the two sets apart."""
    import numpy as np

    from respect_jax.realtime.experiment import eval_seed, train_pool_seed

    def stream(seed):
        return tuple(np.random.default_rng(seed).integers(0, 2**62, 4))

    train = {stream(train_pool_seed(seed, i)) for seed in range(4) for i in range(8)}
    evals = {stream(eval_seed(seed, i)) for seed in (0, 1, 1000, 1001, 2000) for i in range(8)}
    assert len(train) == 32 and len(evals) == 40 and not train & evals


def test_usage_without_command(monkeypatch, capsys):
    code, err = _main(monkeypatch, capsys)
    assert code == 2 and "usage: respect-rt {train,eval,grid}" in err


def _run(args, cwd):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [str(BIN / "respect-rt"), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=900
    )


def test_train_sweep_refuses_a_run_dir_its_jobs_would_share(tmp_path):
    """``respect-rt train -m``: Hydra's flags reach Hydra, and a run_dir shared by two jobs stops the second."""
    shared = tmp_path / "shared"
    # the jobs differ by their seed: one compiled update step serves both (a learning rate is a constant of it)
    args = [
        "train", "-m", "rt_scenario=tiny", "train.presets=[tiny]", "train.scenarios_per_preset=4", "train.updates=2",
        "train.updates_per_epoch=2", "train.batch=2", "train.samples=2", "train.seed=0,1", f"run_dir={shared}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]
    proc = _run(args, tmp_path)
    assert proc.returncode == 1  # Hydra's code for a sweep with a failed job
    assert (shared / "network.json").is_file() and len((shared / "metrics.jsonl").read_text().splitlines()) == 1
    errors = [x for x in proc.stderr.splitlines() if x.startswith("respect-rt: error")]
    assert len(errors) == 1 and errors[0].startswith("respect-rt: error in job 1 (")
    assert errors[0].endswith(f"): run_dir={shared} is already the run_dir of job 0 of this sweep; give every job "
                              "its own, e.g. run_dir='runs/sweep_${hydra:job.num}', or do not set run_dir")
    # Hydra's flags may also follow the overrides
    flag_last = [a for a in args if a != "-m"] + ["-m"]
    flag_last[flag_last.index(f"run_dir={shared}")] = f"run_dir={tmp_path / 'own'}_${{hydra:job.num}}"
    flag_last[-2] = f"hydra.sweep.dir={tmp_path / 'sweep2'}"
    proc = _run(flag_last, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "own_0" / "network.json").is_file() and (tmp_path / "own_1" / "network.json").is_file()


def test_eval_writes_table_json_and_plots(tmp_path, monkeypatch, capsys):
    """In-process (no second interpreter start); the console script itself is checked to exist."""
    assert (BIN / "respect-rt").is_file()
    out = tmp_path / "res"
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "respect-rt",
            "eval",
            "rt_scenario=tiny",
            "eval.presets=[tiny]",
            "eval.methods=[edf+safety,adversarial+safety]",  # one compiled rollout (safety off: test_rt_safety)
            "eval.scenarios=24",
            "eval.overhead_scenarios=2",
            f"eval.out_dir={out}",
        ],
    )
    rt.main()
    printed = json.loads(capsys.readouterr().out)
    assert printed["out_dir"] == str(out)
    doc = json.loads((out / "rt_eval.json").read_text())
    rows = {r["method"]: r for r in doc["rows"]}
    assert set(rows) == {"edf+safety", "adversarial+safety"}
    for name in ("edf+safety", "adversarial+safety"):
        assert rows[name]["hrt_schedulability"] == 1.0 and rows[name]["hrt_missed"] == 0
    assert rows["adversarial+safety"]["override_rate"] > rows["edf+safety"]["override_rate"] > 0
    assert all(r["unfinished"] == 0 and r["violations"] == 0 for r in doc["rows"])
    over = doc["safety_overhead"][0]
    assert over["py"]["decisions"] > 0 and over["py"]["p50_us"] > 0 and over["jax"]["us_per_decision"] > 0
    assert doc["machine"]["cpu_count"] >= 1
    md = (out / "rt_eval.md").read_text()
    assert "| tiny | 0.70 | 0.50 | edf+safety | 100.0 |" in md
    for name in ("hrt_schedulability", "srt_satisfaction", "jain", "utilisation", "override_rate", "safety_overhead"):
        assert (out / f"rt_{name}.png").stat().st_size > 1000


@pytest.mark.slow
def test_train_then_eval_rl(tmp_path):
    run_dir, out = tmp_path / "run", tmp_path / "res"
    common = ["rt_scenario=tiny", f"run_dir={run_dir}"]
    train = [
        "train", *common, "train.presets=[tiny]", "train.scenarios_per_preset=16", "train.updates=4",
        "train.updates_per_epoch=2", "train.batch=2", "train.samples=2",
    ]
    proc = _run(train, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (run_dir / "network.json").is_file() and len((run_dir / "metrics.jsonl").read_text().splitlines()) == 2
    written = yaml.safe_load((run_dir / "config.yaml").read_text())  # by the training harness, resolved
    assert written["train"]["updates"] == 4 and written["run_dir"] == str(run_dir)
    # resuming a finished run trains nothing more
    proc = _run(train, tmp_path)
    assert proc.returncode == 0 and "resumed from step 4" in proc.stderr
    proc = _run(
        [
            "eval",
            *common,
            "eval.presets=[tiny]",
            "eval.methods=[rl,rl+safety]",
            "eval.scenarios=16",
            "eval.overhead_scenarios=2",
            "eval.plots=false",
            f"eval.out_dir={out}",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r["method"]: r for r in json.loads((out / "rt_eval.json").read_text())["rows"]}
    assert rows["rl+safety"]["hrt_schedulability"] == 1.0
