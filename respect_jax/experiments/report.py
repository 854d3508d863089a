"""Writing experiment results: Markdown tables, JSON with the machine description, summaries."""

from __future__ import annotations

import datetime as dt
import json
import math
import statistics
from pathlib import Path


def fmt(value, digits: int = 4) -> str:
    """A table cell: '-' for None/NaN, thousands separators for big numbers, fixed digits else."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 10 ** (-digits)):
            return f"{value:.3g}"
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(header: list[str], rows: list[list], digits: int = 4) -> str:
    """A GitHub Markdown table; numbers right-aligned."""
    lines = ["| " + " | ".join(header) + " |"]
    align = ["---:" if rows and isinstance(rows[0][i], (int, float)) and not isinstance(rows[0][i], bool) else "---"
             for i in range(len(header))]
    lines.append("| " + " | ".join(align) + " |")
    for row in rows:
        lines.append("| " + " | ".join(fmt(v, digits) for v in row) + " |")
    return "\n".join(lines)


def geomean(values) -> float:
    values = [v for v in values if v is not None and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")


def mean(values) -> float:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.fmean(values) if values else float("nan")


def machine_header() -> tuple[dict, str]:
    """(machine description dict, one Markdown line) for the top of every result file."""
    import os

    from respect_jax.cli.common import machine_description

    desc = machine_description()
    desc["load_average"] = list(os.getloadavg())
    desc["date"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    line = (
        f"Measured on {desc['processor']} ({desc['cpu_count']} CPUs, JAX {desc['jax']} {desc['jax_backend']}), "
        f"load average {desc['load_average'][0]:.1f} at the end, {desc['date']}."
    )
    return desc, line


def result_stem(path: str | Path) -> Path:
    """The stem of a script's ``--out`` option: the path without a trailing ``.md`` / ``.json`` / ``.png``
    (any other dot belongs to the name: ``run_v1.5`` -> ``run_v1.5.json``, not ``run_v1.json``)."""
    path = Path(path)
    return path.with_suffix("") if path.suffix in (".md", ".json", ".png") else path


def with_extension(stem: Path, extension: str) -> Path:
    """``stem`` + ``extension`` (``.json``, ``.md``, ...), keeping every dot of the stem."""
    return stem.with_name(stem.name + extension)


def write_results(out_dir: Path, stem: str, doc: dict, markdown: str) -> list[Path]:
    """Write ``<stem>.json`` (doc + machine) and ``<stem>.md`` atomically; returns the paths."""
    from respect_jax.graphs.graph import write_json_atomic

    out_dir.mkdir(parents=True, exist_ok=True)
    desc, line = machine_header()
    doc = {**doc, "machine": desc}
    json_path, md_path = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    write_json_atomic(doc, json_path)
    tmp = md_path.with_suffix(".md.tmp")
    tmp.write_text(markdown.rstrip() + "\n\n" + line + "\n")
    tmp.replace(md_path)
    return [json_path, md_path]


def load_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())
