"""The one signature every non-learned scheduler implements, and the solver registry.

A solver is a function ``solve(graph, hw, objective, lam, **options) -> SolveResult`` where
``graph`` is a :class:`~respect_jax.graphs.Graph`, ``hw`` a :class:`~respect_jax.costs.Hardware`
and the assignment is indexed by original node id. Solvers never report their own objective
unchecked: :func:`run_solver` scores every assignment with the shared evaluator.
"""

from __future__ import annotations

import importlib
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import numpy as np

from respect_jax.costs import Hardware, evaluate, evaluate_assignment, metrics_document
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import bucket_shape, pad_graph, to_position_order


@dataclass
class SolveResult:
    """What a solver returns.

    Attributes:
        assignment: int64[N] stage of every node (by original id).
        optimal: True only when the solver proved optimality; None when it cannot know.
        gap: proven relative gap (0 when optimal), None when not an exact solver.
        info: solver-specific details (bounds, status, iterations, ...), JSON-serialisable.
    """

    assignment: np.ndarray
    optimal: bool | None = None
    gap: float | None = None
    info: dict = field(default_factory=dict)


#: relative tolerance of "as good as the reference": the float rounding of the shared evaluator, not a quality
#: margin. Every "% optimal" of the project counts the schedules that :func:`matches_reference` their reference.
OPTIMAL_RTOL = 1e-6


def matches_reference(objective, reference, rtol: float = OPTIMAL_RTOL):
    """Whether ``objective`` (lower is better) is as good as ``reference``: ``objective <= reference * (1 + rtol)``.

    Floats or NumPy arrays (elementwise; a NaN reference never matches). "% optimal" is the share of graphs
    whose schedule matches its reference: the oracle label (a proven optimum where the label says so, as every
    shipped label set is), else the best schedule any compared method found, or a proven lower bound.
    """
    return objective <= reference * (1.0 + rtol)


SolverFn = Callable[..., SolveResult]
_REGISTRY: dict[str, SolverFn] = {}
#: solvers known by name whose module is imported on first use (:func:`register_lazy`): naming one solver imports
#: its module only (``solver=policy`` does not import CP-SAT's, the MILP's or the portfolio's modules)
_LAZY: dict[str, str] = {}


def register_solver(name: str):
    """Decorator adding a solver function to the registry under ``name``."""

    def wrap(fn: SolverFn) -> SolverFn:
        _REGISTRY[name] = fn
        return fn

    return wrap


def register_lazy(name: str, module: str) -> None:
    """Make solver ``name`` known without importing ``module``, the module whose import registers it
    (:func:`register_solver`); :func:`get_solver` imports it on first use."""
    _LAZY.setdefault(name, module)


def available_solvers() -> list[str]:
    """The sorted names of every solver registered or known by name (:func:`register_lazy`)."""
    return sorted(set(_REGISTRY) | set(_LAZY))


def get_solver(name: str) -> SolverFn:
    """The solver function registered as ``name``, its module imported first if only its name is known;
    one-line ValueError for an unknown name."""
    if name not in _REGISTRY and name in _LAZY:
        importlib.import_module(_LAZY[name])
        if name not in _REGISTRY:
            raise ValueError(f"solver {name!r}: importing {_LAZY[name]} did not register it")
    if name not in _REGISTRY:
        raise ValueError(f"unknown solver {name!r}; available: {', '.join(available_solvers())}")
    return _REGISTRY[name]


def solver_options(name: str) -> list[str] | None:
    """The keyword options solver ``name`` takes after (graph, hw, objective, lam); None: any.

    A solver that passes ``**options`` on names the function that takes them as its ``forwards_to``
    attribute; their keyword options count as the solver's (beyond the fixed leading arguments), and so on down a
    chain of such functions.
    """
    solver = get_solver(name)
    params = list(inspect.signature(solver).parameters.values())[4:]
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = [p.name for p in params if p.kind in named]
    target = solver
    while any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        target = getattr(target, "forwards_to", None)
        if target is None:
            return None
        params = list(inspect.signature(target).parameters.values())
        names += [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in names]
    return names


def check_solver_options(name: str, options: dict) -> None:
    """Raise a one-line ValueError naming the options solver ``name`` does not take (typos)."""
    known = solver_options(name)
    unknown = [] if known is None else sorted(set(options) - set(known))
    if unknown:
        raise ValueError(
            f"solver {name}: unknown option(s) {', '.join(unknown)}; it takes {', '.join(known) or 'no options'}"
        )


#: ``info`` keys in which a solver reports one-off set-up inside its call, in seconds: ``load_s`` (reading a
#: checkpoint) and ``compile_s`` (tracing and XLA compilation, or loading the executable from JAX's persistent
#: compilation cache). Not scheduling: ``solve_time_s`` leaves them out (``info.wall_s`` has the whole call).
SETUP_KEYS = ("load_s", "compile_s")
#: what :func:`run_solver` writes as ``info.timing`` when a solver reported set-up
TIMING_NOTE = (
    "solve_time_s: scheduling only (after set-up); compile_s: tracing + XLA compilation (or loading it from the "
    "persistent cache); load_s: reading the checkpoint; wall_s: the whole solver call"
)


def run_solver(name: str, graph: Graph, hw: Hardware, objective: str = "paper", lam: float = 1.0, **options) -> dict:
    """Solve, time and score: the SPEC RESULT.json fields (minus file-level ones).

    ``solve_time_s`` is the wall time of the solver call less the set-up it reports in ``info``
    (:data:`SETUP_KEYS`). Raises ValueError if the solver returned an invalid schedule (a solver bug,
    never hidden).
    """
    solver = get_solver(name)
    check_solver_options(name, options)
    start = time.perf_counter()
    result = solver(graph, hw, objective, lam, **options)
    elapsed = time.perf_counter() - start
    setup = [float(result.info[key]) for key in SETUP_KEYS if result.info.get(key) is not None]
    if setup:
        result.info = {**result.info, "wall_s": elapsed, "timing": TIMING_NOTE}
    return result_document(name, graph, hw, objective, lam, result, max(elapsed - sum(setup), 0.0))


def run_solver_many(
    name: str,
    graphs: list[Graph],
    hw: Hardware,
    objective: str = "paper",
    lam: float = 1.0,
    batch_size: int | None = None,
    **options,
) -> list[dict]:
    """:func:`run_solver` on every graph of ``graphs``: one RESULT document per graph, in order.

    A solver with a batched form (its ``many`` attribute: ``many(graphs, hw, objective, lam,
    batch_size=..., **options) -> list[SolveResult]``, each with ``info.schedule_s``, its share of the
    batch's wall time) schedules ``batch_size`` graphs of a size bucket per call (None: the solver's own
    default), and its ``solve_time_s`` is that share (set-up excluded, reported in ``info``); the others run
    one graph at a time.
    """
    solver = get_solver(name)
    check_solver_options(name, options)
    many = getattr(solver, "many", None)
    if many is None:
        return [run_solver(name, graph, hw, objective, lam, **options) for graph in graphs]
    batching = {} if batch_size is None else {"batch_size": batch_size}
    results = many(graphs, hw, objective, lam, **batching, **options)
    metrics = evaluate_many(graphs, [r.assignment for r in results], hw, objective, lam)
    hardware = hw.to_dict()  # once: a dataclass walk per document cost ~1 ms each
    return [
        result_document(name, graph, hw, objective, lam, result, float(result.info["schedule_s"]), m, hardware)
        for graph, result, m in zip(graphs, results, metrics, strict=True)
    ]


#: schedules per compiled call of :func:`evaluate_many` (a shape's last, partial call is padded to a power of two)
SCORE_ROWS = 64
#: the shared evaluator vmapped over (padded graph, stages) rows of one padded shape
_evaluate_rows = jax.jit(jax.vmap(evaluate, in_axes=(0, 0, None)))


def _rows(count: int) -> int:
    """Rows of a call scoring ``count`` schedules: the next power of two, at most :data:`SCORE_ROWS`."""
    return min(SCORE_ROWS, 1 << max(count - 1, 0).bit_length())


def evaluate_many(graphs: list[Graph], assignments: list, hw: Hardware, objective: str = "paper",
                  lam: float = 1.0) -> list[dict]:
    """:func:`~respect_jax.costs.evaluate_assignment` of every ``(graph, assignment)`` pair (assignment int[n] by
    original node id), batched: the same shared evaluator vmapped over the schedules of graphs that share a padded
    shape (each graph padded to its own bucket, as the one-graph call pads it), one compiled call per
    :data:`SCORE_ROWS` of them. The same dicts as one call per graph, except that a float32 sum which is not exact
    (a stage's MACs above 2**24) may round differently under vmap: at most an ulp or two (relative 2e-7; tested)."""
    if len(graphs) != len(assignments):
        raise ValueError(f"{len(graphs)} graphs but {len(assignments)} assignments")
    out: list[dict | None] = [None] * len(graphs)
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i, (graph, assignment) in enumerate(zip(graphs, assignments, strict=True)):
        if np.shape(assignment) != (graph.num_nodes,):
            raise ValueError(f"assignment has shape {np.shape(assignment)}, expected ({graph.num_nodes},)")
        groups.setdefault(bucket_shape([graph]), []).append(i)
    for shape, idx in groups.items():
        for lo in range(0, len(idx), SCORE_ROWS):
            chunk = idx[lo : lo + SCORE_ROWS]
            padded = [pad_graph(graphs[i], shape) for i in chunk]
            stages = [to_position_order(p, assignments[i]) for p, i in zip(padded, chunk, strict=True)]
            rows = [j % len(chunk) for j in range(_rows(len(chunk)))]  # the last call padded with copies
            batch = jax.tree.map(lambda *xs, rows=rows: np.stack([xs[j] for j in rows]), *padded)
            stages = np.stack([stages[j] for j in rows])
            m = jax.device_get(_evaluate_rows(batch, stages, hw))
            for j, i in enumerate(chunk):
                a = np.asarray(assignments[i])
                in_range = bool(np.all((a >= 0) & (a < hw.stages)))
                out[i] = metrics_document(jax.tree.map(lambda x, j=j: x[j], m), objective, lam, in_range)
    return out  # type: ignore[return-value]


def result_document(
    name: str, graph: Graph, hw: Hardware, objective: str, lam: float, result: SolveResult, solve_time_s: float,
    metrics: dict | None = None, hardware: dict | None = None,
) -> dict:
    """The SPEC RESULT.json fields of ``result``, scored by the shared evaluator (``metrics``: its dict for this
    assignment when already computed, e.g. by :func:`evaluate_many`; None: computed here; ``hardware``:
    ``hw.to_dict()`` when already computed, copied into the document).

    Raises ValueError if the assignment is invalid (a solver bug, never hidden).
    """
    assignment = np.asarray(result.assignment, dtype=np.int64)
    metrics = dict(evaluate_assignment(graph, assignment, hw, objective, lam) if metrics is None else metrics)
    if not metrics["valid"]:
        raise ValueError(f"solver {name!r} returned an invalid schedule for graph {graph.name!r}")
    objective_val = metrics.pop("objective")
    metrics.pop("valid")
    return {
        "graph": graph.name,
        "num_nodes": graph.num_nodes,
        "solver": name,
        "objective_name": objective,
        "objective": objective_val,
        "assignment": assignment.tolist(),
        "metrics": metrics,
        "hardware": hw.to_dict() if hardware is None else dict(hardware),
        "lam": lam,
        "solve_time_s": solve_time_s,
        "optimal": result.optimal,
        "gap": result.gap,
        "info": result.info,
    }
