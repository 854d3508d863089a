"""A picture of one schedule: which layers run on which stage, per-stage parameter memory against
the SRAM (spill marked), stage times with the bottleneck highlighted, and the bytes crossing each
cut; for ``solver=auto`` also its portfolio (each member's objective and time).

Every number comes from the project's one cost model,
:func:`respect_jax.costs.evaluate_assignment` (SPEC section 2); nothing is recomputed here.

Axes carry labels (``Axes.get_label()``) so code and tests can find them: ``"stages"``,
``"memory"``, ``"time"``, ``"cuts"`` and, with a portfolio, ``"portfolio_objective"`` and
``"portfolio_time"``. In ``"memory"``, ``"time"`` and ``"cuts"`` the first bar container holds one
bar per stage (per cut for ``"cuts"``); byte counts are drawn in the binary unit
(:func:`byte_unit`) named in the axis label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, MaxNLocator

from respect_jax.costs import Hardware, evaluate_assignment, hardware_from_dict
from respect_jax.graphs.graph import Graph
from respect_jax.viz.figures import new_figure

#: colours: a stage's bar, the bottleneck stage, spilled parameters, the SRAM line, the winner
BAR, HOT, SPILL, SRAM, WIN = "#4C72B0", "#C44E52", "#DD8452", "#2F2F2F", "#55A868"


def plot_schedule(
    graph: Graph,
    hw: Hardware,
    assignment: Sequence[int] | np.ndarray,
    objective: str = "paper",
    lam: float = 1.0,
    portfolio: Mapping[str, Mapping] | None = None,
    title: str | None = None,
    winner: str | None = None,
) -> Figure:
    """The schedule figure (module docstring) of ``assignment`` (int[N], stage per node id).

    Args:
        graph: the scheduled graph.
        hw: the hardware (K = ``hw.stages`` bars per stage panel).
        assignment: stage of every node, by node id.
        objective: ``paper`` or ``latency`` (shown in the title).
        lam: the paper objective's communication weight.
        portfolio: ``info['portfolio']`` of a ``solver=auto`` result (member -> {objective, time_s}
            or {skipped: reason}); None: no portfolio panels.
        title: first title line (default: the graph's name).
        winner: the portfolio member whose schedule was returned (``info['winner']``), shown in
            green; default: the first member with the lowest objective.

    Returns:
        A :class:`~matplotlib.figure.Figure` (no pyplot; display it or :func:`~respect_jax.viz.save_png` it).
    """
    assignment = np.asarray(assignment, dtype=np.int64)
    m = evaluate_assignment(graph, assignment, hw, objective, lam)
    k = hw.stages
    rows = 3 if portfolio else 2
    fig = new_figure(12.0, 3.6 * rows)
    grid = fig.add_gridspec(rows, 2)
    _stages_panel(fig.add_subplot(grid[0, 0], label="stages"), graph, assignment, k)
    _memory_panel(fig.add_subplot(grid[0, 1], label="memory"), m, hw)
    _time_panel(fig.add_subplot(grid[1, 0], label="time"), m)
    _cuts_panel(fig.add_subplot(grid[1, 1], label="cuts"), m, k)
    if portfolio:
        _portfolio_panels(
            fig.add_subplot(grid[2, 0], label="portfolio_objective"),
            fig.add_subplot(grid[2, 1], label="portfolio_time"),
            portfolio,
            objective,
            winner,
        )
    state = "" if m["valid"] else "  INVALID schedule (an edge goes backward or a stage is out of range)"
    fig.suptitle(
        f"{title or graph.name}: {graph.num_nodes} nodes on K={k} stages, {objective}={m['objective']:.6g}{state}\n"
        f"bottleneck {m['bottleneck_s'] * 1e3:.3g} ms, latency {m['latency_s'] * 1e3:.3g} ms, "
        f"peak memory {m['peak_mem_bytes'] / 2**20:.3g} MiB, communication {m['comm_bytes'] / 2**20:.3g} MiB",
        fontsize=10,
    )
    return fig


def plot_result(graph: Graph, result: Mapping) -> Figure:
    """:func:`plot_schedule` of a RESULT.json document (SPEC section 4) on its graph; the
    portfolio panels when the result has ``info['portfolio']`` (``solver=auto``)."""
    if int(result["num_nodes"]) != graph.num_nodes:
        raise ValueError(
            f"the result is for {result['num_nodes']} nodes ({result['graph']}); graph {graph.name} has "
            f"{graph.num_nodes}"
        )
    hw = hardware_from_dict(dict(result["hardware"]))
    info = result.get("info") or {}
    return plot_schedule(
        graph,
        hw,
        result["assignment"],
        result["objective_name"],
        float(result.get("lam", 1.0)),
        portfolio=info.get("portfolio"),
        title=f"{result['graph']} ({result['solver']})",
        winner=info.get("winner"),
    )


BYTE_UNITS = (("B", 1.0), ("KiB", 2.0**10), ("MiB", 2.0**20), ("GiB", 2.0**30))


def byte_unit(largest: float) -> tuple[str, float]:
    """(name, bytes per unit) of the binary unit to show byte counts up to ``largest`` in."""
    name, size = BYTE_UNITS[0]
    for name_i, size_i in BYTE_UNITS:
        if largest >= size_i:
            name, size = name_i, size_i
    return name, size


def _stage_ticks(ax, k: int, axis: str = "x") -> None:
    ticks = list(range(k)) if k <= 16 else None
    if axis == "x":
        ax.set_xlabel("stage")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if ticks is not None:
            ax.set_xticks(ticks)
    else:
        ax.set_ylabel("stage")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        if ticks is not None:
            ax.set_yticks(ticks)


def _stages_panel(ax, graph: Graph, assignment: np.ndarray, k: int) -> None:
    order = graph.topological_order()
    stage = assignment[order]
    ax.scatter(np.arange(graph.num_nodes), stage, c=stage, cmap="viridis", vmin=0, vmax=max(k - 1, 1), s=10)
    counts = np.bincount(np.clip(assignment, 0, k - 1), minlength=k)
    ax.set_title(f"which layers run on which stage (nodes per stage: {', '.join(map(str, counts.tolist()))})",
                 fontsize=9)  # fmt: skip
    ax.set_xlabel("node, in the SPEC topological order")
    _stage_ticks(ax, k, "y")
    ax.set_ylim(-0.5, k - 0.5)


def _memory_panel(ax, m: dict, hw: Hardware) -> None:
    mem, spill = np.asarray(m["mem_k"]), np.asarray(m["spill_k"])
    unit, size = byte_unit(max(float(mem.max()), hw.sram_bytes))
    stages = np.arange(len(mem))
    ax.bar(stages, (mem - spill) / size, color=BAR, label="on chip")
    ax.bar(stages, spill / size, bottom=(mem - spill) / size, color=SPILL, hatch="//",
           label="spilled (streamed from host)")  # fmt: skip
    ax.axhline(hw.sram_bytes / size, color=SRAM, linestyle="--", linewidth=1,
               label=f"SRAM {hw.sram_bytes / size:.4g} {unit}")  # fmt: skip
    ax.set_ylabel(f"parameters ({unit})")
    spilled = int(np.count_nonzero(spill > 0))
    ax.set_title(f"parameter memory per stage ({spilled} stage(s) spill, {m['spill_bytes'] / 2**20:.3g} MiB)",
                 fontsize=9)  # fmt: skip
    _stage_ticks(ax, len(mem))
    ax.legend(fontsize=7, loc="best")


def _time_panel(ax, m: dict) -> None:
    times = np.asarray(m["time_k"])
    hot = int(np.argmax(times))
    colors = [HOT if s == hot else BAR for s in range(len(times))]
    ax.bar(np.arange(len(times)), times, color=colors)
    ax.yaxis.set_major_formatter(EngFormatter(unit="s"))
    ax.set_title(f"stage time T_k (bottleneck: stage {hot}, {times[hot] * 1e3:.3g} ms, in red)", fontsize=9)
    _stage_ticks(ax, len(times))


def _cuts_panel(ax, m: dict, k: int) -> None:
    in_k = np.asarray(m["in_k"])[1:]  # bytes entering stage s from stage s-1: the tensors crossing cut s-1|s
    unit, size = byte_unit(float(in_k.max()) if len(in_k) else 0.0)
    ax.bar(np.arange(len(in_k)), in_k / size, color=BAR)
    ax.set_ylabel(f"tensors crossing ({unit})")
    ax.set_xticks(np.arange(len(in_k)), [f"{s}|{s + 1}" for s in range(len(in_k))])
    ax.set_xlabel("cut between stages")
    ax.set_title(f"bytes crossing each cut (communication {m['comm_bytes'] / 2**20:.3g} MiB in all)", fontsize=9)
    if k == 1:
        ax.text(0.5, 0.5, "one stage: no cut", ha="center", va="center", transform=ax.transAxes)


def _portfolio_panels(ax_obj, ax_time, portfolio: Mapping[str, Mapping], objective: str, winner: str | None) -> None:
    ran = [(name, e) for name, e in portfolio.items() if e.get("objective") is not None]
    skipped = [(name, e.get("skipped", "did not run")) for name, e in portfolio.items() if e.get("objective") is None]
    names = [name for name, _ in ran]
    values = np.array([float(e["objective"]) for _, e in ran])
    times = np.array([float(e.get("time_s") or 0.0) for _, e in ran])
    best = names.index(winner) if winner in names else (int(np.argmin(values)) if len(values) else -1)
    colors = [WIN if i == best else BAR for i in range(len(names))]
    y = np.arange(len(names))
    bars = ax_obj.barh(y, values, color=colors)
    ax_obj.bar_label(bars, [f"{v:.4g}" for v in values], fontsize=7, padding=2)
    ax_obj.set_yticks(y, names)
    ax_obj.invert_yaxis()
    ax_obj.set_xlabel(f"{objective} objective (lower is better; the schedule returned in green)")
    ax_obj.set_title("solver=auto portfolio: each member's schedule", fontsize=9)
    if len(values):
        ax_obj.set_xlim(0.0, float(values.max()) * 1.2 or 1.0)
    if len(times):
        ax_time.set_xlim(0.0, float(times.max()) * 1.2 or 1.0)
    bars = ax_time.barh(y, times, color=colors)
    ax_time.bar_label(bars, [f"{t:.3g} s" for t in times], fontsize=7, padding=2)
    ax_time.set_yticks(y, names)
    ax_time.invert_yaxis()
    ax_time.xaxis.set_major_formatter(EngFormatter(unit="s"))
    ax_time.set_xlabel("member's wall time")
    ax_time.set_title("time of each member", fontsize=9)
    if skipped:
        text = "\n".join(f"skipped {name}: {reason}" for name, reason in skipped)
        ax_obj.text(0.01, -0.25, text, transform=ax_obj.transAxes, fontsize=7, va="top", wrap=True)
