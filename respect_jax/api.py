"""The Python API: load a graph, pick the hardware, schedule, read a typed result.

Example (runs from any directory; ``data/models/...`` names a shipped graph)::

    import respect_jax as rj

    g = rj.load_graph("data/models/resnet50.json")        # or rj.from_keras(model), rj.from_tflite(path)
    hw = rj.hardware("coral_usb", stages=4)                 # a preset of conf/hardware/, fields overridable
    res = rj.schedule(g, hw, solver="cpsat", objective="latency", time_limit_s=10)
    print(res.objective, res.optimal, res.gap, res.metrics.bottleneck_s)
    res.to_json()                                           # the RESULT.json document of respect-schedule
    rj.solvers()                                            # every solver name, the learned ones included

``respect-schedule`` runs the same code for one graph (:func:`schedule`). Heavy modules (JAX, the
solvers, the learned policies, TensorFlow) are imported inside the functions, so ``import respect_jax``
stays fast; the solver registry is filled on first use, whatever was imported before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from respect_jax.costs import Hardware
    from respect_jax.graphs.graph import Graph

#: solvers registered by modules outside :mod:`respect_jax.solvers` (the learned schedulers) or that run
#: them (``auto`` runs ``policy`` in its portfolio when it is registered)
LEARNED_SOLVERS = ("policy", "respect_pointer", "order_policy", "auto")
#: the module whose import registers each learned solver (``respect_jax.solvers`` never imports them)
LEARNED_MODULES = {
    "policy": "respect_jax.policy.solver",
    "respect_pointer": "respect_jax.respect_pointer.solver",
    "order_policy": "respect_jax.policy.order_solver",
}


def register_solvers(learned: bool = True) -> list[str]:
    """Make every solver known by name (the learned ones too unless ``learned=False``; a solver's module is
    imported when it is first used); returns the sorted names."""
    from respect_jax.solvers import available_solvers, register_lazy

    if learned:
        for name, module in LEARNED_MODULES.items():
            register_lazy(name, module)
    return available_solvers()


def solvers() -> list[str]:
    """The sorted names of every solver :func:`schedule` accepts, the learned ones (``policy``,
    ``respect_pointer``, ``order_policy``) and the portfolio ``auto`` included."""
    return register_solvers(learned=True)


def check_objective(objective: str) -> None:
    """One-line ValueError unless ``objective`` is ``paper`` (the largest stage's parameter bytes plus lam times
    the activation bytes crossing stage boundaries) or ``latency`` (the bottleneck stage time)."""
    from respect_jax.costs import OBJECTIVES

    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")


def load_graph(path: str | os.PathLike) -> Graph:
    """The graph JSON file at ``path`` (nodes with parameter bytes, MACs and output size; edges; validated: a
    DAG). A relative ``data/...`` path that is not in the working directory names the shipped file
    (``data/models/resnet50.json`` works from anywhere, installed too).

    Raises :class:`~respect_jax.graphs.graph.GraphError` (a ValueError) with one line on a bad file.
    """
    from respect_jax.graphs.graph import load_graph as _load
    from respect_jax.resources import shipped_path

    return _load(shipped_path(path))


def from_keras(model, name: str | None = None) -> Graph:
    """The :class:`Graph` of a functional Keras model (needs the ``coral`` extra: TensorFlow)."""
    from respect_jax.coral._deps import import_keras

    import_keras()  # a one-line CoralDependencyError (an ImportError) when TensorFlow is missing
    from respect_jax.coral.keras_export import graph_from_keras

    return graph_from_keras(model, name=name)


def from_tflite(path: str | os.PathLike, name: str | None = None) -> Graph:
    """The :class:`Graph` of a ``.tflite`` model's operators (needs the ``coral`` extra: the ``tflite`` parser)."""
    from respect_jax.coral.tflite_import import import_tflite

    return import_tflite(path, name=name)


def from_onnx(path: str | os.PathLike, name: str | None = None) -> Graph:
    """The :class:`Graph` of an ONNX model (needs the ``onnx`` extra): parameters from its initializers, output sizes
    from ONNX shape inference (:func:`respect_jax.graphs.onnx_import.graph_from_onnx`)."""
    from respect_jax.graphs.onnx_import import graph_from_onnx

    return graph_from_onnx(path, name=name)


def hardware_presets() -> list[str]:
    """The names of the shipped hardware presets (``conf/hardware/<name>.yaml``)."""
    from respect_jax.resources import conf_path

    return sorted(p.stem for p in conf_path("hardware").glob("*.yaml"))


def hardware(preset: str = "coral_usb", **overrides) -> Hardware:
    """The :class:`~respect_jax.costs.Hardware` of a shipped preset with ``overrides`` applied, e.g.
    ``hardware("coral_usb", stages=6, link_bw=1e8)``. One-line ValueError on an unknown preset or field or a
    value out of range (the checks of ``respect-schedule hardware.<field>=...``)."""
    from dataclasses import fields as dc_fields

    from omegaconf import OmegaConf

    from respect_jax.costs import Hardware, hardware_from_dict
    from respect_jax.resources import conf_path

    path = conf_path("hardware", f"{preset}.yaml")
    if not isinstance(preset, str) or "/" in preset or not path.is_file():
        raise ValueError(f"unknown hardware preset {preset!r}; choose one of {', '.join(hardware_presets())}")
    names = [f.name for f in dc_fields(Hardware)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ValueError(f"unknown hardware field(s) {', '.join(unknown)}; the fields are {', '.join(names)}")
    values = OmegaConf.to_container(OmegaConf.load(path), resolve=True)  # as the CLI reads it
    return hardware_from_dict({**values, **overrides})


@dataclass(frozen=True)
class ScheduleMetrics:
    """Every cost-model quantity of a schedule (:mod:`respect_jax.costs`; K stages; units: bytes, MACs, seconds).

    Attributes:
        peak_mem_bytes: max_k mem_k.
        comm_bytes: bytes forwarded across all stage boundaries.
        bottleneck_s: max_k T_k (the pipeline's period).
        latency_s: sum_k T_k.
        throughput_per_s: 1 / bottleneck_s (None when nothing takes time).
        spill_bytes: sum_k spill_k (parameters streamed from the host per inference).
        mem_k, in_k, spill_k, macs_k, time_k: per-stage values, K each.
    """

    peak_mem_bytes: float
    comm_bytes: float
    bottleneck_s: float
    latency_s: float
    throughput_per_s: float | None
    spill_bytes: float
    mem_k: tuple[float, ...]
    in_k: tuple[float, ...]
    spill_k: tuple[float, ...]
    macs_k: tuple[float, ...]
    time_k: tuple[float, ...]

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ScheduleMetrics:
        """From the ``metrics`` of a RESULT document (every field required; extra keys are an error)."""
        names = [f.name for f in fields(cls)]
        if set(doc) != set(names):
            raise ValueError(f"metrics must have exactly the keys {', '.join(names)}, got {', '.join(doc)}")
        per_stage = ("mem_k", "in_k", "spill_k", "macs_k", "time_k")
        return cls(**{k: tuple(doc[k]) if k in per_stage else doc[k] for k in names})

    def to_dict(self) -> dict:
        """The ``metrics`` of the RESULT document (per-stage values as lists)."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}


@dataclass(frozen=True)
class ScheduleResult:
    """One graph's schedule, scored by the shared evaluator (``respect_jax.costs``).

    Attributes:
        graph: the graph's name; num_nodes: N.
        solver: the solver's name.
        objective_name: ``paper`` or ``latency``; objective: its value (lower is better).
        assignment: N stages, of node 0, 1, ... (original node ids).
        metrics: every cost-model quantity of the schedule.
        hardware: the hardware scheduled for (K = ``hardware.stages``).
        lam: weight of communication in the ``paper`` objective.
        solve_time_s: scheduling time (set-up such as compilation excluded; see ``info``).
        optimal: True only when the solver proved optimality; None when it cannot know.
        gap: the proven relative gap, (objective - lower_bound) / objective; None when unknown.
        lower_bound: the proven lower bound on the objective, where the solver reports one, else None.
        info: the solver's own details (status, bounds, portfolio, timings), JSON-serialisable.
        scheduled_graph: the :class:`~respect_jax.graphs.graph.Graph` itself when :func:`schedule` made the
            result (None when read from a document); not part of the document, not compared.
    """

    graph: str
    num_nodes: int
    solver: str
    objective_name: str
    objective: float
    assignment: tuple[int, ...]
    metrics: ScheduleMetrics
    hardware: Hardware
    lam: float
    solve_time_s: float
    optimal: bool | None
    gap: float | None
    lower_bound: float | None
    info: dict
    scheduled_graph: Graph | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], graph: Graph | None = None) -> ScheduleResult:
        """From a RESULT document (``respect-schedule``'s RESULT.json, or :meth:`to_dict`); ``graph``: the graph
        it schedules, if at hand (for :meth:`plot`)."""
        from respect_jax.costs import hardware_from_dict

        info = dict(doc.get("info") or {})
        return cls(
            graph=doc["graph"],
            num_nodes=int(doc["num_nodes"]),
            solver=doc["solver"],
            objective_name=doc["objective_name"],
            objective=float(doc["objective"]),
            assignment=tuple(int(s) for s in doc["assignment"]),
            metrics=ScheduleMetrics.from_dict(doc["metrics"]),
            hardware=hardware_from_dict(doc["hardware"]),
            lam=float(doc["lam"]),
            solve_time_s=float(doc["solve_time_s"]),
            optimal=doc["optimal"],
            gap=doc["gap"],
            lower_bound=lower_bound_of(info),
            info=info,
            scheduled_graph=graph,
        )

    def to_dict(self) -> dict:
        """The RESULT document (what ``respect-schedule`` writes: the fields above but ``lower_bound``, which is
        in ``info``, where the solver put it, and the graph)."""
        return {
            "graph": self.graph,
            "num_nodes": self.num_nodes,
            "solver": self.solver,
            "objective_name": self.objective_name,
            "objective": self.objective,
            "assignment": list(self.assignment),
            "metrics": self.metrics.to_dict(),
            "hardware": self.hardware.to_dict(),
            "lam": self.lam,
            "solve_time_s": self.solve_time_s,
            "optimal": self.optimal,
            "gap": self.gap,
            "info": self.info,
        }

    def to_json(self, indent: int | None = 1) -> str:
        """:meth:`to_dict` as JSON text (``respect-schedule``'s format)."""
        return json.dumps(self.to_dict(), indent=indent)

    def plot(self, png: str | os.PathLike | None = None, graph: Graph | None = None) -> Figure:
        """The schedule's figure (:func:`respect_jax.viz.plot_result`: per-stage memory against SRAM, stage times
        with the bottleneck, bytes crossing each cut; the portfolio of ``auto``), also written to ``png`` if
        given. ``graph``: needed only when the result was read from a document."""
        from respect_jax.viz import plot_result, save_png

        graph = graph if graph is not None else self.scheduled_graph
        if graph is None:
            raise ValueError("this result was read from a document: pass the graph it schedules, plot(graph=g)")
        fig = plot_result(graph, self.to_dict())
        if png is not None:
            save_png(fig, png)
        return fig

    def assignment_array(self):
        """int64[N] the assignment as a NumPy array."""
        import numpy as np

        return np.asarray(self.assignment, np.int64)


def lower_bound_of(info: Mapping[str, Any]) -> float | None:
    """The proven lower bound on the objective in a solver's ``info``, in objective units: ``auto``'s
    ``lower_bound``, CP-SAT's ``best_bound`` less its rounding error bound, the MILP's ``dual_bound``;
    None for a solver that proves no bound."""
    if info.get("lower_bound") is not None:
        return float(info["lower_bound"])
    if info.get("best_bound") is not None:
        return float(info["best_bound"]) - float(info.get("rounding_error_bound") or 0.0)
    if info.get("dual_bound") is not None:
        return float(info["dual_bound"])
    return None


def schedule(
    graph: Graph,
    hw: Hardware,
    solver: str = "auto",
    objective: str = "paper",
    lam: float = 1.0,
    **options,
) -> ScheduleResult:
    """Schedule ``graph`` onto the K = ``hw.stages`` pipeline with ``solver`` and score the result.

    ``options`` are the solver's own (those of ``conf/solver/<solver>.yaml``: ``time_limit_s`` for
    ``cpsat``, ``time_budget_s`` for ``auto``, ``checkpoint``/``decoding`` for ``policy``, ...). One-line
    ValueError on an unknown solver, objective or option, or on a graph or hardware of the wrong type.
    """
    from respect_jax.costs import Hardware
    from respect_jax.graphs.graph import Graph
    from respect_jax.solvers.base import run_solver

    if not isinstance(graph, Graph):
        raise ValueError(f"graph must be a Graph (rj.load_graph(path)), got {type(graph).__name__}")
    if not isinstance(hw, Hardware):
        raise ValueError(f"hw must be a Hardware (rj.hardware('coral_usb', stages=4)), got {type(hw).__name__}")
    if not isinstance(solver, str):
        raise ValueError(f"solver must be a solver name, got {solver!r}")
    check_objective(objective)
    register_solvers(learned=solver in LEARNED_SOLVERS or solver not in register_solvers(learned=False))
    return ScheduleResult.from_dict(run_solver(solver, graph, hw, objective, float(lam), **options), graph)
