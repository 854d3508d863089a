"""Grid evaluation with error bars: the confidence interval, the target checks, and `respect-rt grid`."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from respect_jax.cli import rt
from respect_jax.realtime.evaluate import grid_row, grid_targets, learner_vs_best, mean_ci, per_scenario
from respect_jax.realtime.generator import ScenarioConfig, grid_configs


def test_mean_ci_is_the_student_t_interval():
    x = np.array([1.0, 2.0, 3.0, 4.0, np.nan])  # NaN (no SRT job) is left out
    mean, half, n = mean_ci(x)
    # t_{0.975, 3} = 3.182446, sd = 1.290994, sqrt(4) = 2
    assert (mean, n) == (2.5, 4) and half == pytest.approx(3.182446 * 1.290994 / 2, rel=1e-5)
    assert mean_ci(np.array([0.7])) == (0.7, 0.0, 1)
    assert np.isnan(mean_ci(np.array([np.nan]))[0])


def test_per_scenario_rates():
    m = {
        "srt_jobs": np.array([4, 0]),
        "srt_met": np.array([3, 0]),
        "decisions": np.array([10, 5]),
        "overrides": np.array([2, 0]),
        "jain": np.array([0.9, 1.0]),
        "utilisation": np.array([0.5, 0.4]),
        "work_utilisation": np.array([0.45, 0.4]),
    }
    v = per_scenario(m)
    assert v["srt_satisfaction"][0] == 0.75 and np.isnan(v["srt_satisfaction"][1])
    assert v["override_rate"].tolist() == [0.2, 0.0]


def _vals(srt, ovr, jain=None):
    srt = np.asarray(srt, float)
    return {
        "srt_satisfaction": srt,
        "override_rate": np.asarray(ovr, float),
        "jain": np.asarray(jain if jain is not None else srt, float),
        "utilisation": np.full(len(srt), 0.5),
        "work_utilisation": np.full(len(srt), 0.5),
    }


def test_grid_targets_use_paired_differences():
    """Cell a: rl ties edf (noise around 0) and beats it on overrides; cell b: rl loses to cpls on every task
    set by 0.1 (a loss beyond the interval) while it beats edf; the grid-wide difference to edf is positive."""
    rng = np.random.default_rng(0)
    base = rng.uniform(0.5, 0.9, 16)
    noise = rng.normal(0, 0.01, 16)
    per = {
        ("a", "rl+safety"): _vals(base + noise, np.full(16, 0.05)),
        ("a", "edf+safety"): _vals(base, np.full(16, 0.2)),
        ("a", "cpls+safety"): _vals(base - 0.02, np.full(16, 0.2)),
        ("b", "rl+safety"): _vals(base, np.full(16, 0.3)),
        ("b", "edf+safety"): _vals(base - 0.05, np.full(16, 0.2)),
        ("b", "cpls+safety"): _vals(base + 0.1, np.full(16, 0.2)),
    }
    rows = [{"preset": c, "method": m, **grid_row(v, None)} for (c, m), v in per.items()]
    t = grid_targets(rows, per)
    assert t["baselines"]["edf+safety"]["losses"] == []
    assert t["baselines"]["cpls+safety"]["losses"] == ["b"]
    g = t["baselines"]["edf+safety"]["grid_diff"]
    assert g["n"] == 32 and g["mean"] - g["ci95"] > 0
    assert t["override_not_below"] == ["b"]
    assert t["jain_worse"] == [] and t["utilisation_worse"] == [] and t["work_utilisation_worse"] == []
    summary = {s["cell"]: s for s in learner_vs_best(rows, per, "rl+safety", "edf+safety")}
    assert (summary["a"]["best"], summary["a"]["verdict"]) == ("edf+safety", "tie")
    assert (summary["b"]["best"], summary["b"]["verdict"]) == ("cpls+safety", "loss")
    assert summary["b"]["diff"]["mean"] == pytest.approx(-0.1)
    assert (summary["a"]["learner_overrides"], summary["a"]["reference_overrides"]) == (0.05, 0.2)


def test_grid_configs_name_every_cell():
    cells = grid_configs(ScenarioConfig(name="base"), [0.3, 0.95], [0.25, 0.75], max_tries=7)
    assert [c.name for c in cells] == ["u30_h25", "u30_h75", "u95_h25", "u95_h75"]
    assert cells[3].utilisation == 0.95 and cells[3].hrt_share == 0.75 and cells[0].max_tries == 7
    with pytest.raises(ValueError, match="non-empty"):
        grid_configs(ScenarioConfig(), [], [0.5])


def test_grid_command_writes_cis_targets_and_one_png_per_metric(tmp_path, monkeypatch, capsys):
    out = tmp_path / "grid"
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "respect-rt",
            "grid",
            "grid.base=tiny",
            "grid.utilisations=[0.4,0.8]",
            "grid.hrt_shares=[0.5]",
            "grid.scenarios=6",
            "grid.methods=[edf+safety,cpls+safety,adversarial+safety]",
            f"grid.out_dir={out}",
        ],
    )
    rt.main()
    printed = json.loads(capsys.readouterr().out)
    doc = json.loads((out / "rt_grid.json").read_text())
    assert {r["preset"] for r in doc["rows"]} == {"u40_h50", "u80_h50"} and len(doc["rows"]) == 6
    for r in doc["rows"]:
        assert r["hrt_missed"] == 0 and r["violations"] == 0 and r["scenarios"] == 6
        assert r["srt_satisfaction"]["n"] >= 1 and r["srt_satisfaction"]["ci95"] >= 0
        assert ("diff" in r["override_rate"]) == (r["method"] != "edf+safety")
    # no learner among the methods: no target rows, but the reference comparison is written
    assert printed["targets"]["baselines"] == {}
    md = (out / "rt_grid.md").read_text()
    assert "| u80_h50 | 0.80 | 0.50 | adversarial+safety |" in md and "±" in md
    assert len(doc["per_scenario"]["u40_h50|cpls+safety"]["jain"]) == 6
    for key in ("srt_satisfaction", "jain", "utilisation", "work_utilisation", "override_rate"):
        assert (out / f"rt_grid_{key}.png").stat().st_size > 1000
