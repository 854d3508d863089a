"""Markdown table and PNG plots of real-time evaluation rows (host side, matplotlib Agg)."""

from __future__ import annotations

from pathlib import Path

FIGURES = (
    ("hrt_schedulability", "HRT schedulability (% scenarios, no HRT miss)", 100.0),
    ("srt_satisfaction", "SRT deadline satisfaction (%)", 100.0),
    ("jain", "Jain fairness of per-client SRT satisfaction", 1.0),
    ("utilisation", "accelerator utilisation (% of makespan)", 100.0),
    ("override_rate", "safety-layer override rate (% decisions)", 100.0),
)


def percent(value: float | None, spec: str = ".1f") -> str:
    """``100 * value`` formatted by ``spec``; ``n/a`` for None (a rate with no event to count)."""
    return "n/a" if value is None else format(100 * value, spec)


def markdown_table(rows: list[dict]) -> str:
    """One row per (preset, method)."""
    head = (
        "| preset | U | HRT share | method | HRT sched. % | HRT missed / jobs | SRT sat. % | Jain | util. % "
        "| overrides % | decisions | unfinished |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        lines.append(
            f"| {r['preset']} | {r['utilisation_target']:.2f} | {r['hrt_share']:.2f} | {r['method']} "
            f"| {100 * r['hrt_schedulability']:.1f} | {r['hrt_missed']} / {r['hrt_jobs']} "
            f"| {percent(r['srt_satisfaction'])} | {r['jain']:.3f} | {100 * r['utilisation']:.1f} "
            f"| {100 * r['override_rate']:.1f} | {r['decisions']} | {r['unfinished']} |"
        )
    return head + "\n".join(lines) + "\n"


def overhead_table(overheads: list[dict]) -> str:
    """Safety-layer cost per decision, per preset."""
    head = (
        "| preset | Python decisions timed | Python p50 us | Python mean us | Python p99 us "
        "| JAX batch | JAX us per decision (batched) |\n"
        "|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {o['preset']} | {o['py']['decisions']} | {o['py']['p50_us']:.1f} | {o['py']['mean_us']:.1f} "
        f"| {o['py']['p99_us']:.1f} | {o['jax']['batch']} | {o['jax']['us_per_decision']:.2f} |"
        for o in overheads
    ]
    return head + "\n".join(lines) + "\n"


def plot_figures(rows: list[dict], overheads: list[dict], out_dir: str | Path, prefix: str = "rt") -> list[str]:
    """Grouped bar charts (x: preset, bars: methods), one PNG per figure; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    index = {(r["preset"], r["method"]): r for r in rows}
    paths = []
    width = 0.8 / max(len(methods), 1)
    for key, label, scale in FIGURES:
        fig, ax = plt.subplots(figsize=(max(7.0, 1.3 * len(presets) + 3), 3.6))
        for k, method in enumerate(methods):
            vals = [index.get((p, method), {}).get(key) for p in presets]
            vals = [np.nan if v is None else scale * v for v in vals]
            ax.bar(np.arange(len(presets)) + (k - (len(methods) - 1) / 2) * width, vals, width, label=method)
        ax.set_xticks(np.arange(len(presets)), presets, rotation=15, fontsize=8)
        ax.set_ylabel(label, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        path = out_dir / f"{prefix}_{key}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(str(path))
    if overheads:
        fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(overheads) + 2), 3.4))
        x = np.arange(len(overheads))
        ax.bar(x - 0.2, [o["py"]["p50_us"] for o in overheads], 0.4, label="plain Python, median")
        ax.bar(x + 0.2, [o["jax"]["us_per_decision"] for o in overheads], 0.4, label="JAX, batched, per decision")
        ax.set_xticks(x, [o["preset"] for o in overheads], rotation=15, fontsize=8)
        ax.set_ylabel("safety layer us per decision", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"{prefix}_safety_overhead.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(str(path))
    return paths
