"""Figures (respect_jax.viz): contents checked against the NumPy reference evaluator, files written,
and no global matplotlib state touched."""

from __future__ import annotations

import sys

import matplotlib
import numpy as np
import pytest
from matplotlib.colors import to_hex

from respect_jax.costs import Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.reference import reference_metrics
from respect_jax.viz import plot_gap_histogram, plot_result, plot_schedule, plot_training_curves, save_png
from respect_jax.viz.schedule import HOT, SPILL, WIN

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def small_graph() -> Graph:
    """0 -> 1 -> 2 -> 3 -> 5 and 1 -> 4 -> 5 (a skip tensor from node 1 to the last stage)."""
    return Graph(
        name="toy",
        params=np.array([0, 700, 300, 900, 200, 50]),
        output_size=np.array([64, 40, 30, 20, 10, 5]),
        macs=np.array([0, 9000, 1000, 20000, 3000, 100]),
        edges=np.array([[0, 1], [1, 2], [2, 3], [3, 5], [1, 4], [4, 5]]),
    )


HW = Hardware(stages=3, sram_bytes=800.0, param_bytes=1.0, act_bytes=1.0, macs_per_s=1e6, host_bw=1e5,
              link_bw=2e4, stage_overhead_s=1e-4)  # fmt: skip
ASSIGNMENT = np.array([0, 0, 1, 1, 2, 2])


def _ax(fig, label):
    (ax,) = [a for a in fig.axes if a.get_label() == label]
    return ax


UNITS = {"B": 1.0, "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30}


def _unit(ax) -> float:
    """Bytes per unit of a byte axis, from the unit its label names in parentheses."""
    return UNITS[ax.get_ylabel().rsplit("(", 1)[1].rstrip(")")]


def _heights(container) -> list[float]:
    return [p.get_height() for p in container.patches]


def _widths(container) -> list[float]:
    return [p.get_width() for p in container.patches]


def test_schedule_figure_matches_the_reference_evaluator():
    g = small_graph()
    ref = reference_metrics(g, ASSIGNMENT, HW)
    assert ref["spill_k"][1] > 0 and ref["spill_k"][0] == 0  # the case has a spilling stage and one that fits
    fig = plot_schedule(g, HW, ASSIGNMENT, "latency")
    assert {a.get_label() for a in fig.axes} == {"stages", "memory", "time", "cuts"}

    mem = _ax(fig, "memory")
    on_chip, spill = mem.containers[0], mem.containers[1]
    assert len(on_chip.patches) == HW.stages
    unit = _unit(mem)
    assert unit == 2**10  # 900 B on stage 1 and an 800 B SRAM shown in KiB
    np.testing.assert_allclose(np.multiply(_heights(on_chip), unit), np.subtract(ref["mem_k"], ref["spill_k"]))
    np.testing.assert_allclose(np.multiply(_heights(spill), unit), ref["spill_k"])
    assert all(to_hex(p.get_facecolor()) == to_hex(SPILL) for p in spill.patches)
    assert [ln.get_ydata()[0] * unit for ln in mem.get_lines()] == [HW.sram_bytes]  # the SRAM line

    time_ax = _ax(fig, "time")
    bars = time_ax.containers[0]
    assert len(bars.patches) == HW.stages
    np.testing.assert_allclose(_heights(bars), ref["time_k"], rtol=1e-6)
    red = [i for i, p in enumerate(bars.patches) if to_hex(p.get_facecolor()) == to_hex(HOT)]
    assert red == [int(np.argmax(ref["time_k"]))]

    cuts = _ax(fig, "cuts").containers[0]
    assert len(cuts.patches) == HW.stages - 1
    np.testing.assert_allclose(np.multiply(_heights(cuts), _unit(_ax(fig, "cuts"))), ref["in_k"][1:])

    stages = _ax(fig, "stages").collections[0]
    np.testing.assert_array_equal(stages.get_offsets()[:, 1], ASSIGNMENT[g.topological_order()])


def test_bottleneck_moves_with_the_schedule():
    """Another schedule puts the bottleneck on another stage: the red bar follows it."""
    g = small_graph()
    for assignment in ([0, 0, 0, 0, 1, 2], [0, 1, 2, 2, 2, 2], [0, 0, 1, 2, 2, 2]):
        ref = reference_metrics(g, assignment, HW)
        bars = _ax(plot_schedule(g, HW, assignment, "paper"), "time").containers[0]
        red = [i for i, p in enumerate(bars.patches) if to_hex(p.get_facecolor()) == to_hex(HOT)]
        assert red == [int(np.argmax(ref["time_k"]))], assignment


def test_portfolio_panels_and_result_plot(tmp_path):
    g = small_graph()
    ref = reference_metrics(g, ASSIGNMENT, HW)
    portfolio = {
        "contiguous": {"objective": 3.0, "time_s": 0.001},
        "cpsat": {"objective": 2.0, "time_s": 1.5, "optimal": True},
        "policy": {"skipped": "the learned solvers are not registered"},
    }
    result = {
        "graph": "toy", "num_nodes": 6, "solver": "auto", "objective_name": "latency", "lam": 1.0,
        "objective": ref["bottleneck_s"], "assignment": ASSIGNMENT.tolist(), "hardware": HW.to_dict(),
        "info": {"portfolio": portfolio},
    }  # fmt: skip
    fig = plot_result(g, result)
    objective_bars = _ax(fig, "portfolio_objective").containers[0]
    assert _widths(objective_bars) == [3.0, 2.0]  # the members that ran; the skipped one is named in a text
    assert [to_hex(p.get_facecolor()) for p in objective_bars.patches].index(to_hex(WIN)) == 1
    result["info"]["winner"] = "contiguous"  # the member whose schedule auto returned is the one in green
    winner_bars = _ax(plot_result(g, result), "portfolio_objective").containers[0]
    assert [to_hex(p.get_facecolor()) == to_hex(WIN) for p in winner_bars.patches] == [True, False]
    assert _widths(_ax(fig, "portfolio_time").containers[0]) == [0.001, 1.5]
    assert any("skipped policy" in t.get_text() for t in _ax(fig, "portfolio_objective").texts)
    path = save_png(fig, tmp_path / "result.png")
    assert path.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(ValueError, match="6 nodes"):
        plot_result(Graph("other", np.ones(2), np.ones(2), np.ones(2), np.array([[0, 1]])), result)


def test_figures_leave_matplotlib_global_state_alone(tmp_path):
    backend = matplotlib.rcParams._get_backend_or_none()  # None while nothing chose one
    pyplot = sys.modules.get("matplotlib.pyplot")
    before = pyplot.get_fignums() if pyplot else []
    fig = plot_schedule(small_graph(), HW, ASSIGNMENT, "paper")
    save_png(fig, tmp_path / "s.png")
    assert matplotlib.rcParams._get_backend_or_none() == backend
    pyplot = sys.modules.get("matplotlib.pyplot")
    assert (pyplot.get_fignums() if pyplot else []) == before  # not registered with pyplot
    assert not list(tmp_path.glob(".*"))  # no temp file left


def test_gap_histogram_counts_every_finite_gap():
    doc = {
        "aggregate": {"greedy": {}, "compiler": {}},
        "per_graph": [
            {"greedy": {"gap": 0.0}, "compiler": {"gap": 0.10}},
            {"greedy": {"gap": 0.02}, "compiler": {"gap": 0.30}},
            {"greedy": {"gap": float("nan")}, "compiler": {"gap": 0.25}},
        ],
        "reference": "oracle", "graphs": 3, "objective_name": "paper", "hardware": {"stages": 4}, "dataset": "d",
    }  # fmt: skip
    ax = _ax(plot_gap_histogram(doc, bins=5), "gaps")
    totals = []
    for patch in ax.patches:  # a step histogram is one polygon per method; its steps' heights are the bin counts
        ys = patch.get_xy()[:, 1]
        totals.append(float(ys[1:-1:2].sum()))
    assert totals == [2.0, 3.0]  # the NaN gap of greedy is left out
    assert "1 without a finite gap" in ax.get_legend().get_texts()[0].get_text()


def test_training_curves_plot_every_record():
    runs = {
        "a": [{"step": 50, "loss": 1.0, "wall_s": 60},
              {"step": 100, "loss": 0.5, "wall_s": 60, "eval": {"gap_mean_pct": 4.0}}],
        "b": [{"step": 50, "loss": 2.0, "wall_s": 30, "eval": {"ratio_to_bound": 1.5}}],
    }  # fmt: skip
    fig = plot_training_curves(runs)
    labels = [a.get_label() for a in fig.axes]
    assert labels == ["loss", "eval_steps:gap_mean_pct", "eval_wall:gap_mean_pct", "eval_steps:ratio_to_bound",
                      "eval_wall:ratio_to_bound"]  # fmt: skip
    loss = _ax(fig, "loss").get_lines()
    assert [list(ln.get_ydata()) for ln in loss] == [[1.0, 0.5], [2.0]]
    (wall,) = _ax(fig, "eval_wall:gap_mean_pct").get_lines()
    assert list(wall.get_xdata()) == [2.0] and list(wall.get_ydata()) == [4.0]  # 120 s into run a


def test_respect_schedule_plot_true_writes_the_png_beside_the_json(tmp_path):
    import json
    import subprocess

    from respect_jax.graphs.graph import save_graph

    save_graph(small_graph(), tmp_path / "toy.json")
    out = tmp_path / "res" / "toy_result.json"
    proc = subprocess.run(
        [sys.executable, "-m", "respect_jax.cli.schedule", f"graph={tmp_path / 'toy.json'}", "solver=contiguous",
         "hardware.stages=3", "objective=latency", f"out={out}", "plot=true", "jax_cache=off"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["num_nodes"] == 6
    assert out.with_suffix(".png").read_bytes()[:8] == PNG_MAGIC
    assert f"and {out.with_suffix('.png')}" in proc.stderr


def test_plot_true_needs_an_output_file():
    from omegaconf import OmegaConf

    from respect_jax.cli.schedule import plot_wanted

    with pytest.raises(ValueError, match="set out=RESULT.json"):
        plot_wanted(OmegaConf.create({"plot": True}), None, "out=RESULT.json")
    with pytest.raises(ValueError, match="plot must be true or false"):
        plot_wanted(OmegaConf.create({"plot": "yes"}), None, "out=RESULT.json")
    assert plot_wanted(OmegaConf.create({"plot": False}), None, "out=RESULT.json") is False


def eval_doc() -> dict:
    """An evaluation document as respect-eval writes it (two graphs, two methods, one NaN gap)."""
    return {
        "dataset": "d", "graphs": 2, "objective_name": "paper", "lam": 1.0, "hardware": {"stages": 4},
        "reference": "oracle", "reference_proven_optimal_pct": 100.0, "checkpoint": "c", "checkpoint_step": 8,
        "machine": {"processor": "cpu", "cpu_count": 2, "jax_backend": "cpu"}, "created": "now",
        "aggregate": {
            m: {"gap_mean_pct": 1.0, "gap_median_pct": 1.0, "gap_max_pct": 2.0, "optimal_pct": 50.0,
                "valid_pct": 100.0, "time_per_graph_ms": 1.0} for m in ("greedy", "compiler")
        },
        "per_graph": [
            {"index": 0, "graph": "g0", "num_nodes": 30, "reference": 100.0, "reference_optimal": True,
             "greedy": {"objective": 101.5, "gap": 0.015, "valid": True, "time_s": 0.001},
             "compiler": {"objective": 130.0, "gap": 0.3, "valid": True, "time_s": 0.25}},
            {"index": 1, "graph": "g,1", "num_nodes": 31, "reference": 3.0, "reference_optimal": False,
             "greedy": {"objective": float("nan"), "gap": float("nan"), "valid": False, "time_s": 0.002},
             "compiler": {"objective": 3.0, "gap": 0.0, "valid": True, "time_s": 0.125}},
        ],
    }  # fmt: skip


def test_respect_eval_writes_csv_rows_equal_to_the_json_and_a_histogram(tmp_path):
    import csv
    import json
    import math

    from respect_jax.cli.eval import CSV_FIELDS, write_outputs

    out = tmp_path / "ev" / "eval.json"
    paths = write_outputs(eval_doc(), out)
    assert [p.suffix for p in paths] == [".json", ".md", ".csv", ".png"]
    doc = json.loads(out.read_text())
    with out.with_suffix(".csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_FIELDS
    assert len(rows) == len(doc["per_graph"]) * len(doc["aggregate"])
    it = iter(rows)
    for g in doc["per_graph"]:
        for method in doc["aggregate"]:
            row = next(it)
            assert (row["graph"], int(row["index"]), int(row["num_nodes"]), row["method"]) == (
                g["graph"], g["index"], g["num_nodes"], method)  # fmt: skip
            assert float(row["reference"]) == g["reference"] and row["reference_optimal"] == str(g["reference_optimal"])
            for key in ("objective", "gap", "time_s"):
                want, got = g[method][key], float(row[key])
                assert got == want or (math.isnan(want) and math.isnan(got)), (method, key)
            assert row["valid"] == str(g[method]["valid"])
    assert out.with_suffix(".png").read_bytes()[:8] == PNG_MAGIC
    assert "| greedy |" in out.with_suffix(".md").read_text()
