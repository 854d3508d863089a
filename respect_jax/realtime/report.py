"""Markdown tables and PNG plots of real-time evaluation rows (host side; matplotlib's object-oriented API, no
global backend switch)."""

from __future__ import annotations

from pathlib import Path

from respect_jax.reporting import markdown_table as table

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
    header = ["preset", "U", "HRT share", "method", "HRT sched. %", "HRT missed / jobs", "SRT sat. %", "Jain",
              "util. %", "overrides %", "decisions", "unfinished"]
    body = [
        [r["preset"], f"{r['utilisation_target']:.2f}", f"{r['hrt_share']:.2f}", r["method"],
         f"{100 * r['hrt_schedulability']:.1f}", f"{r['hrt_missed']} / {r['hrt_jobs']}",
         percent(r["srt_satisfaction"]), f"{r['jain']:.3f}", f"{100 * r['utilisation']:.1f}",
         f"{100 * r['override_rate']:.1f}", str(r["decisions"]), str(r["unfinished"])]
        for r in rows
    ]
    return table(header, body) + "\n"


def overhead_table(overheads: list[dict]) -> str:
    """Safety-layer cost per decision, per preset."""
    header = ["preset", "Python decisions timed", "Python p50 us", "Python mean us", "Python p99 us", "JAX batch",
              "JAX us per decision (batched)"]
    body = [
        [o["preset"], str(o["py"]["decisions"]), f"{o['py']['p50_us']:.1f}", f"{o['py']['mean_us']:.1f}",
         f"{o['py']['p99_us']:.1f}", str(o["jax"]["batch"]), f"{o['jax']['us_per_decision']:.2f}"]
        for o in overheads
    ]
    return table(header, body) + "\n"


def plot_figures(rows: list[dict], overheads: list[dict], out_dir: str | Path, prefix: str = "rt") -> list[str]:
    """Grouped bar charts (x: preset, bars: methods), one PNG per figure; returns the paths."""
    import numpy as np
    from matplotlib.figure import Figure

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    index = {(r["preset"], r["method"]): r for r in rows}
    paths = []
    width = 0.8 / max(len(methods), 1)
    for key, label, scale in FIGURES:
        fig = Figure(figsize=(max(7.0, 1.3 * len(presets) + 3), 3.6))
        ax = fig.subplots()
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
        paths.append(str(path))
    if overheads:
        fig = Figure(figsize=(max(6.0, 1.3 * len(overheads) + 2), 3.4))
        ax = fig.subplots()
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
        paths.append(str(path))
    return paths


GRID_FIGURES = (
    ("srt_satisfaction", "SRT deadline satisfaction (%)", 100.0),
    ("jain", "Jain fairness over clients", 1.0),
    ("utilisation", "accelerator utilisation (%)", 100.0),
    ("work_utilisation", "work utilisation: mean-time work / (M x makespan) (%)", 100.0),
    ("override_rate", "override rate (% decisions)", 100.0),
)


def _cell(stat: dict, scale: float) -> str:
    return f"{scale * stat['mean']:.1f} ± {scale * stat['ci95']:.1f}" if stat["n"] else "n/a"


def grid_markdown(rows: list[dict], reference: str) -> str:
    """Per cell and method: mean ± 95% CI of every grid metric, and the paired difference to ``reference``."""
    header = ["cell", "U", "HRT share", "method", "SRT sat. %", "Jain x100", "util. %", "work-util. %", "overrides %",
              f"ΔSRT vs {reference}", f"Δutil. vs {reference}", f"Δwork-util. vs {reference}",
              f"Δoverrides vs {reference}", "HRT missed"]
    body = []
    for r in rows:
        d = {k: r[k].get("diff") for k in ("srt_satisfaction", "utilisation", "work_utilisation", "override_rate")}
        body.append([
            r["preset"], f"{r['utilisation_target']:.2f}", f"{r['hrt_share']:.2f}", r["method"],
            _cell(r["srt_satisfaction"], 100), _cell(r["jain"], 100), _cell(r["utilisation"], 100),
            _cell(r["work_utilisation"], 100), _cell(r["override_rate"], 100),
            *(_cell(v, 100) if v else "-" for v in d.values()),
            str(r["hrt_missed"]),
        ])
    return table(header, body) + "\n"


def plot_grid(rows: list[dict], out_dir: str | Path, prefix: str = "rt_grid") -> list[str]:
    """One PNG per grid metric: a panel per HRT share, utilisation on x, a line per method with 95% CI bars."""
    import numpy as np
    from matplotlib.figure import Figure

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shares = sorted({r["hrt_share"] for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    paths = []
    for key, label, scale in GRID_FIGURES:
        fig = Figure(figsize=(4.2 * len(shares) + 1.5, 3.6))
        axes = np.atleast_1d(fig.subplots(1, len(shares), sharey=True))
        for ax, h in zip(axes, shares, strict=True):
            for k, method in enumerate(methods):
                pts = sorted(
                    (r["utilisation_target"], r[key]) for r in rows if r["method"] == method and r["hrt_share"] == h
                )
                x = np.array([u for u, _ in pts]) + (k - (len(methods) - 1) / 2) * 0.004
                y = np.array([scale * st["mean"] for _, st in pts])
                e = np.array([scale * st["ci95"] for _, st in pts])
                ax.errorbar(
                    x, y, yerr=e, marker="o", ms=3, lw=1.2 if method.startswith("rl") else 0.8, capsize=2, label=method
                )
            ax.set_title(f"HRT share {h:g}", fontsize=9)
            ax.set_xlabel("offered utilisation U", fontsize=8)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel(label + " (mean, 95% CI)", fontsize=8)
        axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        path = out_dir / f"{prefix}_{key}.png"
        fig.savefig(path, dpi=110)
        paths.append(str(path))
    return paths


def learner_markdown(summary: list[dict], learner: str, reference: str) -> str:
    """:func:`.evaluate.learner_vs_best` as a table (percent)."""
    header = ["cell", f"{learner} SRT %", "best other method", "its SRT %", "Δ paired (95% CI)", "verdict",
              f"overrides % {learner}", f"overrides % {reference}"]
    body = [
        [s["cell"], _cell(s["learner_srt"], 100), s["best"], _cell(s["best_srt"], 100),
         f"{100 * s['diff']['mean']:+.1f} ± {100 * s['diff']['ci95']:.1f}", s["verdict"],
         f"{100 * s['learner_overrides']:.1f}",
         "-" if s["reference_overrides"] is None else format(100 * s["reference_overrides"], ".1f")]
        for s in summary
    ]
    return table(header, body) + "\n"
