"""Training curves of ``respect-train`` runs, from their ``metrics.jsonl`` (no re-training).

Plots (:func:`respect_jax.viz.plot_training_curves`), per run: the training loss (imitation) or
mean objective ratio (reinforce) and the periodic evaluation metric (gap to the labels' optimum
when the run evaluated on a labelled set, else the ratio to the objective's lower bound) against
update steps and against cumulative wall time, one pair of panels per metric (runs are labelled
by folder name, or by path where names repeat). Writes ``training_curves.{png,md,json}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from respect_jax.experiments.methods import Setting
from respect_jax.experiments.report import markdown_table, write_results
from respect_jax.viz import plot_training_curves, save_png


def read_metrics(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise ValueError(f"{run_dir}: no metrics.jsonl (not a respect-train run folder)")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    wall = 0.0
    for r in rows:
        wall += float(r.get("wall_s", 0.0))
        r["cum_wall_s"] = wall
    return rows


def eval_value(record: dict) -> tuple[str, float] | None:
    ev = record.get("eval")
    if not ev:
        return None
    for key in ("gap_mean_pct", "ratio_to_bound"):
        if key in ev:
            return key, float(ev[key])
    return None


def run_names(run_dirs) -> list[str]:
    """A label per run folder: its name, or its whole path where two folders share a name."""
    names = [Path(d).name for d in run_dirs]
    return [n if names.count(n) == 1 else str(d) for n, d in zip(names, run_dirs, strict=True)]


@dataclass(frozen=True)
class TrainingCurvesConfig:
    """``conf/experiment/training_curves.yaml``: the ``respect-train`` run folders to plot."""

    runs: list


def run(exp: TrainingCurvesConfig, setting: Setting) -> dict:
    """Plot and tabulate the runs' metrics; write ``training_curves.{png,md,json}``; return the doc."""
    out_dir = setting.out_dir
    runs = dict(zip(run_names(exp.runs), (read_metrics(Path(d)) for d in exp.runs), strict=True))
    evals = {name: [(r, eval_value(r)) for r in metrics if eval_value(r)] for name, metrics in runs.items()}
    rows = []
    for name, metrics in runs.items():
        ev = evals[name]
        last = metrics[-1]
        rows.append([name, last["step"], last["cum_wall_s"] / 60, last.get("loss"),
                     ev[-1][1][1] if ev else None, ev[-1][1][0] if ev else "-",
                     max((r.get("graphs_per_s", 0.0) for r in metrics[1:] or metrics), default=None)])
    save_png(plot_training_curves(runs), out_dir / "training_curves.png")
    md = "\n".join([
        "# Training curves",
        "",
        "From each run's `metrics.jsonl`; figure: `training_curves.png`.",
        "",
        markdown_table(["run", "steps", "wall min", "final loss", "final eval", "eval metric", "peak graphs/s"], rows),
    ])
    doc = {"experiment": "training_curves", "runs": {k: v for k, v in runs.items()}}
    write_results(out_dir, "training_curves", doc, md)
    return doc
