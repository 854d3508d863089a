"""One table of a sweep's runs: every ``respect-train`` run folder under a root, the config values that differ
between them (the swept knobs, found automatically; bookkeeping keys such as ``run_dir`` left out) and each
run's final figures (steps, wall time, last training loss, peak training graphs/s, its last evaluation). The
library of ``respect-tables``."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf

from respect_jax.reporting import markdown_table
from respect_jax.train.config import flatten

IGNORED_KEYS = ("run_dir", "progress", "resume", "train.kill_after_step")


def find_runs(root: Path) -> list[Path]:
    """Folders under ``root`` (itself included) that hold a respect-train run: its config.yaml and network.json
    (a job that failed before logging has no metrics.jsonl; it is listed as such, not dropped)."""
    runs = [p.parent for p in sorted(root.rglob("config.yaml")) if (p.parent / "network.json").is_file()]
    return [r for r in runs if "checkpoints" not in r.parts]


def run_summary(run: Path) -> tuple[dict, dict]:
    """(flattened config, final figures) of one run folder. The ``policy.*`` values are the network the run
    trained (its network.json): with ``init_from`` they differ from the ignored ``policy`` group of config.yaml."""
    config = flatten(OmegaConf.to_container(OmegaConf.load(run / "config.yaml"), resolve=False))
    network = run / "network.json"
    if network.is_file() and "policy" in json.loads(network.read_text()):
        config = {k: v for k, v in config.items() if not k.startswith("policy.")}
        config.update(flatten(json.loads(network.read_text())["policy"], "policy."))
    metrics = run / "metrics.jsonl"
    lines = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()] if metrics.is_file() else []
    if not lines:
        return config, {"status": "no metrics (failed or not started)", "steps": 0}
    planned = config.get("train.steps")
    done = lines[-1]["step"]
    figures = {
        "status": "complete" if not isinstance(planned, int) or done >= planned else f"stopped at {done}/{planned}",
        "steps": done,
        "wall_min": sum(float(r.get("wall_s", 0.0)) for r in lines) / 60.0,
        "final_loss": next((r["loss"] for r in reversed(lines) if "loss" in r), None),
        "graphs_per_s": max((r.get("graphs_per_s", 0.0) for r in lines[1:] or lines), default=None),
    }
    last_eval = next((r["eval"] for r in reversed(lines) if r.get("eval")), None)
    if last_eval:
        figures.update({f"eval.{k}": v for k, v in flatten(last_eval).items()})
    return config, figures


def gather(root: Path) -> dict:
    """{'swept': [keys], 'rows': [{'run', key: value..., figures...}]} for every run under root."""
    runs = find_runs(root)
    if not runs:
        raise ValueError(f"{root}: no respect-train runs (folders with config.yaml and network.json) found")
    summaries = [(run, *run_summary(run)) for run in runs]
    keys = sorted({k for _, cfg, _ in summaries for k in cfg})
    swept = [
        k for k in keys
        if k not in IGNORED_KEYS and len({json.dumps(cfg.get(k), sort_keys=True) for _, cfg, _ in summaries}) > 1
    ]
    rows = []
    for run, cfg, figures in summaries:
        row = {"run": str(run.relative_to(root)) if run != root else "."}
        row.update({k: cfg.get(k) for k in swept})
        row.update(figures)
        rows.append(row)
    rows.sort(key=lambda r: [_order(r[k]) for k in swept] + [(1, 0.0, r["run"])])
    return {"root": str(root), "swept": swept, "rows": rows}


def _order(value) -> tuple:
    """Sort key of a swept value: numbers by value (2 before 10), then everything else as JSON text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, json.dumps(value, sort_keys=True))


def render(table: dict) -> str:
    """The Markdown page of a :func:`gather` table."""
    columns = ["run"] + table["swept"]
    for row in table["rows"]:
        columns += [k for k in row if k not in columns]
    body = [[row.get(c) if not isinstance(row.get(c), list) else str(row.get(c)) for c in columns]
            for row in table["rows"]]
    swept = ", ".join(f"`{k}`" for k in table["swept"]) or "none (the runs share one config)"
    return "\n".join([
        f"# Sweep summary: {table['root']}",
        "",
        f"{len(table['rows'])} runs; swept: {swept}.",
        "",
        markdown_table(columns, body),
    ])
