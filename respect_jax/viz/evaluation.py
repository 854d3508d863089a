"""The figure of a ``respect-eval`` document: the distribution of every method's gap to the reference."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from respect_jax.viz.figures import new_figure


def method_gaps(doc: Mapping) -> dict[str, np.ndarray]:
    """method -> f64[graphs] gap to the reference in percent (``per_graph[i][method]['gap'] * 100``),
    in the order of ``doc['aggregate']``; NaN where a method has no finite objective."""
    methods = list(doc["aggregate"])
    return {m: np.array([100.0 * float(row[m]["gap"]) for row in doc["per_graph"]], dtype=np.float64) for m in methods}


def plot_gap_histogram(doc: Mapping, bins: int = 30) -> Figure:
    """Histogram of each method's per-graph gap (%) to the reference of an evaluation document.

    One step histogram per method on one axes (label ``"gaps"``), on shared bin edges spanning every
    finite gap; the legend gives each method's mean and the graphs it counts. Non-finite gaps
    (invalid or missing objectives) are left out and counted in the legend.

    Args:
        doc: the JSON document of ``respect-eval`` (``aggregate``, ``per_graph``, ``reference``...).
        bins: number of bins.
    """
    gaps = method_gaps(doc)
    finite = np.concatenate([g[np.isfinite(g)] for g in gaps.values()]) if gaps else np.zeros(0)
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
    fig = new_figure(7.5, 4.2)
    ax = fig.add_subplot(label="gaps")
    for method, g in gaps.items():
        ok = g[np.isfinite(g)]
        dropped = g.size - ok.size
        extra = f", {dropped} without a finite gap" if dropped else ""
        mean = f"mean {ok.mean():.2f}%" if ok.size else "no finite gap"
        ax.hist(ok, bins=edges, histtype="step", linewidth=1.5, label=f"{method} ({mean}, {ok.size} graphs{extra})")
    ax.set_xlabel(f"gap to the reference ({doc.get('reference', 'reference')}), %")
    ax.set_ylabel("graphs")
    k = (doc.get("hardware") or {}).get("stages", "?")
    ax.set_title(f"{doc.get('dataset', '')}: {doc.get('graphs', len(doc['per_graph']))} graphs, "
                 f"{doc.get('objective_name', '')}, K={k}", fontsize=9)  # fmt: skip
    ax.legend(fontsize=7)
    return fig
