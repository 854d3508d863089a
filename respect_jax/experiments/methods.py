"""Run one scheduling *method* (a solver name plus options) on one graph, timed and scored.

A method is a mapping ``{solver: <registered name>, options: {...}, warmup: bool}``; the
experiments' configs (``conf/experiment/*.yaml``) list them by label, e.g.::

    policy_best_of_64: {solver: policy, options: {decoding: best_of, samples: 64}, warmup: true}

``warmup: true`` runs the method once untimed first, so the reported time of a JAX method is
its schedule time after compilation (the compile time is reported separately). Every schedule
is re-scored by the shared evaluator (:func:`respect_jax.solvers.run_solver`); none reports its
own objective unchecked.
"""

from __future__ import annotations

import time
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from respect_jax.costs import Hardware
from respect_jax.graphs.graph import Graph


@dataclass(frozen=True)
class Method:
    """A labelled solver configuration.

    Attributes:
        label: the name in tables (``policy_best_of_64``).
        solver: registered solver name (``respect_jax.solvers.available_solvers()``).
        options: keyword options passed to the solver.
        warmup: run once untimed before the timed run (JAX methods: exclude compilation).
    """

    label: str
    solver: str
    options: dict = field(default_factory=dict)
    warmup: bool = False


@dataclass(frozen=True)
class Setting:
    """What every experiment shares: the hardware, the objective (``paper`` or ``latency``) and its ``lam``, the
    folder the results go to, and whether to show progress bars."""

    hw: Hardware
    objective: str
    lam: float
    out_dir: Path
    progress: bool = True


def config_from_dict(cls, doc: dict):
    """The dataclass ``cls`` (an experiment's config) from the mapping of ``conf/experiment/<name>.yaml``: its
    fields, keys it does not have (``kind``) left out; a missing field is a one-line ValueError."""
    values = {}
    for f in fields(cls):
        if f.name in doc:
            values[f.name] = doc[f.name]
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ValueError(f"experiment.{f.name} is missing")
    return cls(**values)


def methods_from_dict(node) -> list[Method]:
    """``{label: {solver, options, warmup}}`` (a plain mapping) -> [Method]."""
    methods = []
    for label, spec in (node or {}).items():
        if not isinstance(spec, dict) or "solver" not in spec:
            raise ValueError(f"method {label!r} needs a 'solver' entry, got {spec!r}")
        unknown = set(spec) - {"solver", "options", "warmup"}
        if unknown:
            raise ValueError(f"method {label!r}: unknown keys {sorted(unknown)} (allowed: solver, options, warmup)")
        methods.append(Method(label, str(spec["solver"]), dict(spec.get("options") or {}), bool(spec.get("warmup"))))
    if not methods:
        raise ValueError("an experiment needs at least one method")
    return methods


def require_items(exp, lists: tuple[str, ...] = (), counts: tuple[str, ...] = ()) -> None:
    """One-line ValueError unless every ``experiment.<list>`` is non-empty and every ``experiment.<count>`` >= 1
    (``exp``: an experiment's config)."""
    for key in lists:
        if not getattr(exp, key):
            raise ValueError(f"experiment.{key} is empty: nothing to run")
    for key in counts:
        if int(getattr(exp, key)) < 1:
            raise ValueError(f"experiment.{key} must be >= 1, got {getattr(exp, key)}")


def ensure_registered(methods: list[Method]) -> None:
    """Import the learned solvers' modules when used; raise a one-line error for unknown names."""
    import respect_jax.solvers  # noqa: F401  (registers the non-learned solvers)
    from respect_jax.solvers.base import available_solvers, check_solver_options

    solvers = {m.solver for m in methods}
    if "policy" in solvers:
        import respect_jax.policy.solver  # noqa: F401  (the learned solvers register on import)
    if "respect_pointer" in solvers:
        import respect_jax.respect_pointer.solver  # noqa: F401
    missing = sorted(solvers - set(available_solvers()))
    if missing:
        raise ValueError(f"unknown solver(s) {', '.join(missing)}; available: {', '.join(available_solvers())}")
    for method in methods:  # typos in options fail before any method runs
        try:
            check_solver_options(method.solver, method.options)
        except ValueError as err:
            raise ValueError(f"method {method.label!r}: {err}") from None


def run_method(method: Method, graph: Graph, hw: Hardware, objective: str, lam: float) -> dict:
    """Solve ``graph`` with ``method``; a flat record with objective, metrics and times.

    ``solve_time_s`` excludes compilation when ``method.warmup``; ``first_call_s`` is the time
    of the untimed warm-up call (compilation included), else None.
    """
    from respect_jax.solvers.base import run_solver

    first = None
    if method.warmup:
        start = time.perf_counter()
        run_solver(method.solver, graph, hw, objective, lam, **method.options)
        first = time.perf_counter() - start
    rec = run_solver(method.solver, graph, hw, objective, lam, **method.options)
    m = rec["metrics"]
    return {
        "graph": graph.name,
        "num_nodes": graph.num_nodes,
        "stages": hw.stages,
        "method": method.label,
        "solver": method.solver,
        "objective": rec["objective"],
        "bottleneck_s": m["bottleneck_s"],
        "latency_s": m["latency_s"],
        "throughput_per_s": m["throughput_per_s"],
        "spill_bytes": m["spill_bytes"],
        "comm_bytes": m["comm_bytes"],
        "mem_k": m["mem_k"],
        "time_k": m["time_k"],
        "solve_time_s": rec["solve_time_s"],
        "first_call_s": first,
        "optimal": rec["optimal"],
        "gap": rec["gap"],
        "assignment": rec["assignment"],
    }
