"""Writing figures for people: one Markdown table builder and one description of the machine a figure was
measured on. Every results writer (command lines, experiment scripts, evaluation reports) uses these two."""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path


def fmt(value, digits: int = 4) -> str:
    """A table cell: '-' for None/NaN, yes/no for booleans, thousands separators for ints, ``digits`` fixed
    decimals for floats (``.3g`` for very large or very small ones); a string is kept as it is."""
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


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence], digits: int = 4) -> str:
    """A GitHub Markdown table: ``header`` (k column names), ``rows`` (lists of k cells, each formatted by
    :func:`fmt`). A column whose first-row cell is a number is right-aligned; pre-formatted string cells
    (``"0.512 ± 0.010"``, ``"**bold**"``) pass through unchanged and leave their column left-aligned.
    No trailing newline."""
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(f"markdown_table: row {i} has {len(row)} cells, the header {len(header)}")
    align = ["---:" if rows and _is_number(rows[0][i]) else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(fmt(v, digits) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _cpu_model() -> str | None:
    """The ``model name`` line of /proc/cpuinfo (None where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine_description(packages: Sequence[str] = (), load_average: bool = False) -> dict:
    """Where a figure was measured: platform, processor, CPU count, Python, JAX version/backend/devices.

    ``packages``: distribution names whose installed versions are added under ``"packages"`` (None when not
    installed); ``load_average``: add the 1/5/15-minute load average (the machine may be shared) and the UTC
    date.
    """
    import jax

    desc = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jax_backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }
    if packages:
        versions = {}
        for name in packages:
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                versions[name] = None
        desc["packages"] = versions
    if load_average:
        desc["load_average"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
        desc["date"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return desc


def machine_line(desc: dict) -> str:
    """One Markdown sentence for the foot of a results file, from a :func:`machine_description` made with
    ``load_average=True``."""
    load = desc.get("load_average")
    load_text = f", load average {load[0]:.1f} at the end" if load else ""
    return (f"Measured on {desc['processor']} ({desc['cpu_count']} CPUs, JAX {desc['jax']} {desc['jax_backend']})"
            f"{load_text}, {desc.get('date', '')}.")
