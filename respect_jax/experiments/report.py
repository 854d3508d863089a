"""Writing experiment results: Markdown tables, JSON with the machine description, summaries.

The table builder and the machine description are :mod:`respect_jax.reporting`'s (re-exported here for the
experiment scripts)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from respect_jax.reporting import fmt, machine_description, machine_line, markdown_table  # noqa: F401


def geomean(values) -> float:
    values = [v for v in values if v is not None and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")


def mean(values) -> float:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.fmean(values) if values else float("nan")


def machine_header() -> tuple[dict, str]:
    """(machine description dict with load average and date, one Markdown line) for every result file."""
    desc = machine_description(load_average=True)
    return desc, machine_line(desc)


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
