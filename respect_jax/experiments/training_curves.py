"""Training curves of ``respect-train`` runs, from their ``metrics.jsonl`` (no re-training).

Plots, per run: the training loss (imitation) or mean objective ratio (reinforce) and the periodic
evaluation metric (gap to the labels' optimum when the run evaluated on a labelled set, else the
ratio to the objective's lower bound) against update steps and against cumulative wall time, one
pair of panels per metric (runs are labelled by folder name, or by path where names repeat).
Writes ``training_curves.{png,md,json}``.
"""

from __future__ import annotations

import json
from pathlib import Path

from respect_jax.experiments.report import markdown_table, write_results


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


def run(cfg, hw, out_dir: Path, progress: bool = True) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = dict(zip(run_names(cfg.experiment.runs), (read_metrics(Path(d)) for d in cfg.experiment.runs), strict=True))
    evals = {name: [(r, eval_value(r)) for r in metrics if eval_value(r)] for name, metrics in runs.items()}
    keys = list(dict.fromkeys(v[0] for ev in evals.values() for _, v in ev))  # one pair of panels per eval metric
    fig, axes = plt.subplots(1, 1 + 2 * len(keys), figsize=(4.6 * (1 + 2 * len(keys)), 3.8), squeeze=False)
    axes = axes[0]
    rows = []
    for name, metrics in runs.items():
        train = [r for r in metrics if "loss" in r]
        axes[0].plot([r["step"] for r in train], [r["loss"] for r in train], label=name)
        ev = evals[name]
        for r_ax, key in enumerate(keys):
            points = [(r, v) for r, (k, v) in ev if k == key]
            if points:
                axes[1 + 2 * r_ax].plot([r["step"] for r, _ in points], [v for _, v in points], marker="o", label=name)
                axes[2 + 2 * r_ax].plot([r["cum_wall_s"] / 60 for r, _ in points], [v for _, v in points], marker="o",
                                        label=name)
        last = metrics[-1]
        rows.append([name, last["step"], last["cum_wall_s"] / 60, last.get("loss"),
                     ev[-1][1][1] if ev else None, ev[-1][1][0] if ev else "-",
                     max((r.get("graphs_per_s", 0.0) for r in metrics[1:] or metrics), default=None)])
    axes[0].set(xlabel="update step", ylabel="training loss", title="loss")
    for r_ax, key in enumerate(keys):
        axes[1 + 2 * r_ax].set(xlabel="update step", ylabel=key, title=f"evaluation ({key}) vs steps")
        axes[2 + 2 * r_ax].set(xlabel="wall time (min)", ylabel=key, title=f"evaluation ({key}) vs wall time")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_dir / "training_curves.png", dpi=120)
    plt.close(fig)
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
