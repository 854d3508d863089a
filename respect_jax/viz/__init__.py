"""Figures of respect-jax (matplotlib's object-oriented API only).

Every function returns a :class:`matplotlib.figure.Figure` built without ``pyplot`` and without
``matplotlib.use``, so a notebook's backend is untouched: display the figure in a notebook, or write
it with :func:`save_png` (Agg canvas, atomic).
"""

from respect_jax.viz.evaluation import plot_gap_histogram
from respect_jax.viz.figures import new_figure, save_png
from respect_jax.viz.schedule import plot_result, plot_schedule
from respect_jax.viz.training import plot_training_curves

__all__ = ["new_figure", "plot_gap_histogram", "plot_result", "plot_schedule", "plot_training_curves", "save_png"]
