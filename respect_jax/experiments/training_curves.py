"""Training curves of ``respect-train`` runs, from their ``metrics.jsonl`` (no re-training).

Plots, per run: the training loss (imitation) or mean objective ratio (reinforce) and the periodic
evaluation metric (gap to the labels' optimum when the run evaluated on a labelled set, else the
ratio to the objective's lower bound) against update steps and against cumulative wall time.
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


def run(cfg, hw, out_dir: Path, progress: bool = True) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {str(Path(d).name): read_metrics(Path(d)) for d in cfg.experiment.runs}
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    rows = []
    for name, metrics in runs.items():
        train = [r for r in metrics if "loss" in r]
        axes[0].plot([r["step"] for r in train], [r["loss"] for r in train], label=name)
        evals = [(r, eval_value(r)) for r in metrics if eval_value(r)]
        if evals:
            key = evals[0][1][0]
            axes[1].plot([r["step"] for r, _ in evals], [v for _, (_, v) in evals], marker="o", label=f"{name} ({key})")
            axes[2].plot([r["cum_wall_s"] / 60 for r, _ in evals], [v for _, (_, v) in evals], marker="o", label=name)
        last = metrics[-1]
        rows.append([name, last["step"], last["cum_wall_s"] / 60, last.get("loss"),
                     evals[-1][1][1] if evals else None, evals[-1][1][0] if evals else "-",
                     max((r.get("graphs_per_s", 0.0) for r in metrics[1:] or metrics), default=None)])
    axes[0].set(xlabel="update step", ylabel="training loss", title="loss")
    axes[1].set(xlabel="update step", ylabel="evaluation metric", title="evaluation vs steps")
    axes[2].set(xlabel="wall time (min)", ylabel="evaluation metric", title="evaluation vs wall time")
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
