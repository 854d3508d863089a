"""Training curves of ``respect-train`` runs from their ``metrics.jsonl`` records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from respect_jax.viz.figures import new_figure

#: evaluation keys plotted, first present wins: the gap to labelled optima, else the ratio to the bound
EVAL_KEYS = ("gap_mean_pct", "ratio_to_bound")


def eval_value(record: Mapping) -> tuple[str, float] | None:
    """(key, value) of a record's evaluation metric (:data:`EVAL_KEYS`), or None without one."""
    ev = record.get("eval")
    if not ev:
        return None
    for key in EVAL_KEYS:
        if key in ev and ev[key] is not None:
            return key, float(ev[key])
    return None


def cumulative_wall(records: Sequence[Mapping]) -> list[float]:
    """Cumulative ``wall_s`` of the records (seconds since the run's first epoch started)."""
    out, wall = [], 0.0
    for r in records:
        wall += float(r.get("wall_s", 0.0))
        out.append(wall)
    return out


def plot_training_curves(runs: Mapping[str, Sequence[Mapping]]) -> Figure:
    """Loss against update steps, and each evaluation metric against steps and wall time.

    Args:
        runs: run label -> its ``metrics.jsonl`` records (dicts with ``step``, ``loss``, ``wall_s``,
            and ``eval`` on evaluation steps).

    Returns:
        A figure with ``1 + 2 * E`` axes (E: the evaluation metrics present), labelled ``"loss"``,
        ``"eval_steps:<key>"`` and ``"eval_wall:<key>"``; one line per run on each.
    """
    keys = list(dict.fromkeys(v[0] for recs in runs.values() for r in recs if (v := eval_value(r))))
    cols = 1 + 2 * len(keys)
    fig = new_figure(4.6 * cols, 3.8)
    grid = fig.add_gridspec(1, cols)
    ax_loss = fig.add_subplot(grid[0, 0], label="loss")
    ax_steps, ax_wall = {}, {}
    for i, k in enumerate(keys):  # a pair of panels per metric, left to right
        ax_steps[k] = fig.add_subplot(grid[0, 1 + 2 * i], label=f"eval_steps:{k}")
        ax_wall[k] = fig.add_subplot(grid[0, 2 + 2 * i], label=f"eval_wall:{k}")
    for name, records in runs.items():
        wall = cumulative_wall(records)
        train = [r for r in records if r.get("loss") is not None]
        ax_loss.plot([r["step"] for r in train], [float(r["loss"]) for r in train], label=name)
        for key in keys:
            points = [(r["step"], w, v[1]) for r, w in zip(records, wall, strict=True)
                      if (v := eval_value(r)) and v[0] == key]  # fmt: skip
            if points:
                steps, walls, values = zip(*points, strict=True)
                ax_steps[key].plot(steps, values, marker="o", label=name)
                ax_wall[key].plot([w / 60 for w in walls], values, marker="o", label=name)
    ax_loss.set(xlabel="update step", ylabel="training loss", title="loss")
    for key in keys:
        ax_steps[key].set(xlabel="update step", ylabel=key, title=f"evaluation ({key}) vs steps")
        ax_wall[key].set(xlabel="wall time (min)", ylabel=key, title=f"evaluation ({key}) vs wall time")
    for ax in fig.axes:
        if ax.get_lines():
            ax.legend(fontsize=7)
    return fig
