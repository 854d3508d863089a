"""Figure creation and PNG writing without pyplot (no global backend switch)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def new_figure(width: float, height: float) -> Figure:
    """A figure of ``width`` x ``height`` inches with an Agg canvas and constrained layout.

    Built with :class:`matplotlib.figure.Figure` (not ``pyplot``): it is not registered with pyplot's
    figure manager, so nothing needs closing and the current backend is not touched.
    """
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_png(fig: Figure, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Write ``fig`` as PNG at ``path`` atomically (temp file + rename); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, format="png", dpi=dpi)  # any canvas: savefig renders PNG with Agg
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
