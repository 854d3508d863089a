"""Exact CP-SAT oracle (OR-tools) for both objectives (``paper``: peak stage memory + lam * communication;
``latency``: the bottleneck stage time).

Model (K stages, ``M = K - 1``; notation of :mod:`respect_jax.solvers.common`):

* Booleans ``z[v, j] = [s(v) >= j + 1]`` with implications ``z[v, j+1] -> z[v, j]`` (monotone)
  and ``z[u, j] -> z[v, j]`` for every edge (u, v) (precedence). ``s(v) = sum_j z[v, j]``.
* Per-stage sums (memory, MACs) are linear in ``z`` exactly as in the MILP:
  ``sum(w_v : s(v) = k) = W_{k-1} - W_k`` with ``W_j = sum_v w_v z[v, j]``, ``W_{-1} = sum(w)``,
  ``W_M = 0``.
* Crossings ``cross[u, j] = [s(u) < j+1 <= last(u)]``: for a graph output it is ``not z[u, j]``;
  for a producer with successors a Boolean ``y[u, j]`` fixed *exactly* by clauses:
  ``z[v, j] and not z[u, j] -> y[u, j]`` for every successor v, ``y[u, j] -> not z[u, j]`` and
  ``y[u, j] -> OR_v z[v, j]``. Hence ``y = max_v z[v, j] - z[u, j]``.
* ``paper``: ``P >= mem_k``; minimise ``P + lam * comm``.
* ``latency``: ``spill_k >= mem_k - C`` and ``>= 0``; ``B >= T_k - tau`` for every k;
  minimise ``B`` (``tau`` is common to every stage, so it is added back afterwards).

Integer scaling (CP-SAT needs integer coefficients). Every objective term is an integer count
(params, MACs, output elements) times a hardware constant, so the model multiplies the constants
by one integer ``D``:

* ``paper``: ``D`` = the least common denominator of ``b_p`` and ``lam * b_a`` (as exact binary
  fractions of the given floats); with the defaults (``b_p = b_a = lam = 1``) ``D = 1`` and the
  objective is in bytes.
* ``latency``: the time unit is ``1 / D`` seconds with ``D`` the least common denominator of
  ``1/R``, ``b_p/H``, ``C/H`` and ``b_a/L``. With integral rates and sizes (e.g. ``R = 2e12``,
  ``H = L = 3.2e8``, ``C = 8 MiB``) ``D`` is a few times 1e12, i.e. sub-picosecond, and every
  coefficient is an exact integer: the CP-SAT optimum *is* the true optimum.

If ``D`` times the largest possible objective would exceed 2**46 (e.g. ``lam = 0.3`` or rates with
awkward binary expansions), the model falls back to a *rounded* scaling: ``D`` is set so that the
largest possible objective is about 2**36 units and each coefficient is rounded to the nearest
integer. Each stage sum then differs from the true value by at most ``0.5 * (#terms)`` units, so
the returned schedule is optimal up to ``info['rounding_error_bound']`` (in objective units), about
1e-8 relative for 1000 nodes. (Coefficients are kept well below 2**53 because CP-SAT's LP
relaxation works in floating point.) ``info['integer_scaling']`` says ``exact`` or ``rounded``. Whatever the
scaling, the assignment is re-scored by the shared evaluator.

Solver bug workaround: OR-tools 9.15's presolve can certify a wrong optimum (google/or-tools issue
#5293: the ``ProcessAtMostOneAndLinear`` inclusion step). On our brute-forced tiny instances it did
so once in 128 runs (a chain graph, latency objective, large integer coefficients); setting
``presolve_inclusion_work_limit = 0``, the workaround given in that issue, fixed it and is always
set here.

``gap`` is CP-SAT's proven relative gap ``(objective - best bound) / objective`` (0 when it proved
optimality) plus, for a rounded model, the relative rounding bound. ``optimal`` is True iff CP-SAT
reports OPTIMAL and that gap is <= 1e-6 (the MILP's tolerance): always for an exact scaling,
and for a rounded one whenever the rounding bound is that small. A positive ``rel_gap`` can
therefore give ``optimal=False`` with the proven gap. On a time limit the best
solution is returned with the gap ``(objective - best bound) / objective``; with no solution at all,
the hint (if any) or the compiler split is returned with the gap against CP-SAT's bound (or
the cheap lower bound of ``costs.objective_lower_bound`` if that is larger). The hint (``hint``:
an assignment, ``"auto"`` (default) or None) is returned instead of CP-SAT's solution if it is
better; ``"auto"`` is the best, under this model, of the compiler split, RESPECT's label
packing and the best contiguous split (pure NumPy, milliseconds to a quarter of a second), so a
timed-out run is never worse than any of them.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.solvers.base import OPTIMAL_RTOL, SolveResult, register_solver
from respect_jax.solvers.common import (
    check_assignment,
    crossings,
    relative_gap,
    resolve_start,
    stages_from_thresholds,
    structure,
    thresholds,
)
from respect_jax.solvers.scoring import objective_lower_bound_np
from respect_jax.solvers.stopping import Stopped, check_stop, watching

EXACT_LIMIT = 2**46  # largest objective (in integer units) accepted for exact scaling
ROUNDED_TARGET = 2**36  # objective magnitude aimed at by the rounded fallback
OPTIMALITY_TOL = OPTIMAL_RTOL  # relative gap under which an optimal status counts as proven (1e-6)


def _lcd(values: list[Fraction]) -> int:
    """Least common denominator of exact fractions."""
    d = 1
    for v in values:
        d = math.lcm(d, v.denominator)
    return d


def _scaled(counts: np.ndarray, factor: Fraction | float) -> list[int]:
    """Integer coefficients ``round(counts * factor)`` (exact when ``factor`` is a Fraction)."""
    if isinstance(factor, Fraction):
        return [int(round(int(c) * factor)) for c in counts.tolist()]
    return [int(round(float(c) * factor)) for c in counts.tolist()]


class _Scaling:
    """Integer coefficients of the model and ``unit``, the objective value of one integer unit.

    Attributes (integer lists indexed by node): ``mem`` (parameter memory, in both objectives),
    ``comm`` (paper), ``macs`` and ``inb`` (latency), plus the integer ``sram`` (latency).
    """

    def __init__(self, graph: Graph, hw: Hardware, objective: str, lam: float):
        k = hw.stages
        params, macs, out = graph.params, graph.macs, graph.output_size
        frac = Fraction  # exact binary fractions of the given floats
        if objective == "paper":
            consts = {"mem": frac(hw.param_bytes), "comm": frac(lam) * frac(hw.act_bytes)}
            upper = float(consts["mem"]) * float(params.sum()) + float(consts["comm"]) * float(out.sum()) * (k - 1)
        else:
            consts = {
                "macs": 1 / frac(hw.macs_per_s),
                "mem": frac(hw.param_bytes) / frac(hw.host_bw),
                "sram": frac(hw.sram_bytes) / frac(hw.host_bw),
                "in": frac(hw.act_bytes) / frac(hw.link_bw),
            }
            upper = float(consts["macs"]) * float(macs.sum()) + float(consts["mem"]) * float(params.sum())
            upper += float(consts["in"]) * float(out.sum())
        upper = max(upper, 1e-300)
        d = _lcd(list(consts.values()))
        self.exact = d * upper <= EXACT_LIMIT
        factors: dict[str, Fraction | float]
        if self.exact:
            factors = {key: c * d for key, c in consts.items()}
            self.unit = 1.0 / d
        else:
            scale = ROUNDED_TARGET / upper
            factors = {key: float(c) * scale for key, c in consts.items()}
            self.unit = 1.0 / scale
        self.mem = _scaled(params, factors["mem"])
        if objective == "paper":
            self.comm = _scaled(out, factors["comm"])
        else:
            self.macs = _scaled(macs, factors["macs"])
            # spill = max(0, stage memory - sram): an sram above all the memory never binds, so clamping it there
            # is exact and keeps the coefficient in int64 (tiny graphs with huge rates made it overflow)
            self.sram = min(int(round(factors["sram"])), int(sum(self.mem)) + 1)
            self.inb = _scaled(out, factors["in"])
        # rounding error: every coefficient is off by <= 0.5 unit; a stage sum has at most N terms
        # per quantity (memory, MACs, tensors), and spill's C adds one more
        terms = graph.num_nodes * (2 if objective == "paper" else 3) + 1
        self.error_bound = 0.0 if self.exact else 0.5 * terms * self.unit


@dataclass
class _Model:
    """The CP-SAT model of one problem and the variable indices the hint and the answer need.

    Attributes:
        model: the ``CpModel``; zid: int64[N, K-1], the index of ``z[v, j] = [s(v) >= j + 1]``; producers: int64[P],
        the producers with successors and a nonzero output, in node order; yid: int64[P, K-1], the index of their
        crossing Booleans ``y[u, j]``; aux: the indices of ``{"P": peak}`` (paper) or ``{"spill": [...], "B":
        bottleneck}`` (latency); num_vars: the number of variables.
    """

    model: object
    zid: np.ndarray
    producers: np.ndarray
    yid: np.ndarray
    aux: dict
    num_vars: int


#: Producers the model builder writes between two looks at its stop signal.
CHECK_EVERY = 256
_INT64_MAX = 2**63 - 1


def _ints(values) -> str:
    return ", ".join(map(str, values))


def _linear(coefs: np.ndarray, lower: int) -> str:
    """``sum(coefs[i] * x_i) >= lower`` as protobuf text (variables in index order, zeros dropped: the canonical form
    ``cp_model`` writes)."""
    idx = np.flatnonzero(coefs)
    return (f"constraints {{ linear {{ vars: [{_ints(idx.tolist())}] coeffs: [{_ints(coefs[idx].tolist())}] "
            f"domain: [{int(lower)}, {_INT64_MAX}] }} }}")


def _stage_sum(zid: np.ndarray, coef: np.ndarray, kk: int, num_vars: int) -> tuple[np.ndarray, int]:
    """(coefficients over the variables, constant) of ``sum(coef_v : s(v) = kk)`` in the thresholds:
    ``W_{kk-1} - W_kk`` with ``W_j = sum_v coef_v z[v, j]``, ``W_{-1} = sum(coef)``, ``W_{K-1} = 0``."""
    m = zid.shape[1]
    vec = np.zeros(num_vars, np.int64)
    const = int(coef.sum()) if kk == 0 else 0
    if kk > 0:
        vec[zid[:, kk - 1]] += coef
    if kk < m:
        vec[zid[:, kk]] -= coef
    return vec, const


def _build_model(graph: Graph, st, sc: _Scaling, objective: str, k: int, stop=None) -> _Model:
    """The threshold model of the module docstring, with the objective of ``objective``, written as protobuf text from
    NumPy arrays and parsed in one call (no Python object per variable or constraint: at 10,000 nodes the scalar
    ``cp_model`` calls took 1.4-2.3 s on a quiet 2-core CPU, several seconds beside auto's line). Its variables,
    constraints (order included), coefficients and objective are those the scalar calls of sessions 10-31 built, so
    CP-SAT's answer is the same (``tests/test_cpsat_text_model.py`` compares the two models).

    ``stop`` (a ``stop() -> bool`` callable or None) is polled every :data:`CHECK_EVERY` producers: the build raises
    :class:`~respect_jax.solvers.stopping.Stopped` once it returns True."""
    from ortools.sat.python import cp_model  # imported at the first solve: the registry loads without it

    check_stop(stop)
    n, m = graph.num_nodes, k - 1
    zid = np.arange(n * m, dtype=np.int64).reshape(n, m)
    out = np.asarray(graph.output_size)
    producers = np.flatnonzero((out != 0) & ~st.sink).astype(np.int64)
    yid = n * m + np.arange(len(producers) * m, dtype=np.int64).reshape(len(producers), m)
    var_text = [f'variables {{ name: "z{v}_{j}" domain: [0, 1] }}' for v in range(n) for j in range(m)]
    var_text += [f'variables {{ name: "y{u}_{j}" domain: [0, 1] }}' for u in producers.tolist() for j in range(m)]
    imp = "constraints {{ enforcement_literal: {} bool_and {{ literals: {} }} }}".format
    cons: list[str] = []
    if m > 1:  # z[v][j + 1] -> z[v][j]
        cons += map(imp, zid[:, 1:].ravel().tolist(), zid[:, :-1].ravel().tolist())
    edges = st.edges
    if len(edges):  # precedence: z[u][j] -> z[v][j]
        cons += map(imp, zid[edges[:, 0]].ravel().tolist(), zid[edges[:, 1]].ravel().tolist())
    for i, u in enumerate(producers.tolist()):  # y[u, j] = max_v z[v, j] - z[u, j]
        if i % CHECK_EVERY == 0:
            check_stop(stop)
        succ = st.succs[u]
        for j in range(m):
            zu, y = u * m + j, int(yid[i, j])
            cons += [f"constraints {{ bool_or {{ literals: [{-(v * m + j) - 1}, {zu}, {y}] }} }}" for v in succ]
            cons.append(imp(y, -zu - 1))
            cons.append(f"constraints {{ bool_or {{ literals: [{-y - 1}, {_ints(v * m + j for v in succ)}] }} }}")
    check_stop(stop)
    nv = n * m + len(producers) * m
    mem = np.asarray(sc.mem, np.int64)
    mem_total = int(mem.sum())
    sinks = np.flatnonzero((out != 0) & st.sink)  # their crossing literal is not z[u, j]

    def crossing_terms(coef: list, j: int, num_vars: int) -> tuple[np.ndarray, int]:
        """(coefficients, constant) of ``sum_u coef_u cross[u, j]``."""
        c = np.asarray(coef, np.int64)
        vec = np.zeros(num_vars, np.int64)
        vec[yid[:, j]] += c[producers]
        vec[zid[sinks, j]] -= c[sinks]  # coef_u (1 - z[u, j])
        return vec, int(c[sinks].sum())

    if objective == "paper":
        peak = nv
        var_text.append(f'variables {{ name: "P" domain: [0, {max(mem_total, 0)}] }}')
        nv += 1
        for kk in range(k):  # P >= mem_kk
            vec, const = _stage_sum(zid, mem, kk, nv)
            coefs = -vec
            coefs[peak] += 1
            cons.append(_linear(coefs, const))
        obj = np.zeros(nv, np.int64)
        obj[peak] = 1
        offset = 0
        for j in range(m):
            vec, const = crossing_terms(sc.comm, j, nv)
            obj += vec
            offset += const
        idx = np.flatnonzero(obj)
        objective_text = (f"objective {{ vars: [{_ints(idx.tolist())}] coeffs: [{_ints(obj[idx].tolist())}] "
                          f"offset: {offset} scaling_factor: 1 }}")
        aux = {"P": peak}
    else:
        spill_ub = max(mem_total - sc.sram, 0)
        spill = list(range(nv, nv + k))
        var_text += [f'variables {{ name: "spill{kk}" domain: [0, {spill_ub}] }}' for kk in range(k)]
        b_ub = int(sum(sc.macs)) + spill_ub + int(sum(sc.inb))
        bott = nv + k
        var_text.append(f'variables {{ name: "B" domain: [0, {max(b_ub, 0)}] }}')
        nv += k + 1
        for kk in range(k):  # spill_kk >= mem_kk - sram
            vec, const = _stage_sum(zid, mem, kk, nv)
            coefs = -vec
            coefs[spill[kk]] += 1
            cons.append(_linear(coefs, const - sc.sram))
        macs = np.asarray(sc.macs, np.int64)
        for kk in range(k):  # B >= macs_kk + spill_kk + in_kk
            vec, const = _stage_sum(zid, macs, kk, nv)
            coefs = -vec
            if kk > 0:
                inb, in_const = crossing_terms(sc.inb, kk - 1, nv)
                coefs -= inb
                const += in_const
            coefs[spill[kk]] -= 1
            coefs[bott] += 1
            cons.append(_linear(coefs, const))
        objective_text = f"objective {{ vars: [{bott}] coeffs: [1] scaling_factor: 1 }}"
        aux = {"spill": spill, "B": bott}
    model = cp_model.CpModel()
    if not model.proto.parse_text_format("\n".join(var_text + cons + [objective_text])):
        raise RuntimeError("cpsat: the CP-SAT model text did not parse")
    return _Model(model, zid, producers, yid, aux, nv)


def _exact_values(st, sc: _Scaling, objective: str, k: int, a: np.ndarray) -> dict:
    """Integer values of every model variable (and the objective) for a valid assignment."""
    n, m = st.num_nodes, k - 1
    zz, cc = thresholds(a, k), crossings(st, a, k)
    mem_h = [sum(sc.mem[v] for v in range(n) if a[v] == kk) for kk in range(k)]
    vals = {"z": zz, "cross": cc}
    if objective == "paper":
        comm_h = sum(sc.comm[u] * int(cc[u].sum()) for u in range(n))
        vals["P"] = max(mem_h)
        vals["objective"] = vals["P"] + comm_h
    else:
        vals["spill"] = [max(x - sc.sram, 0) for x in mem_h]
        macs_h = [sum(sc.macs[v] for v in range(n) if a[v] == kk) for kk in range(k)]
        in_h = [0] + [sum(sc.inb[u] for u in range(n) if cc[u, j]) for j in range(m)]
        vals["B"] = max(macs_h[kk] + vals["spill"][kk] + in_h[kk] for kk in range(k))
        vals["objective"] = vals["B"]
    return vals


def _add_hint(mdl: _Model, values: dict, objective: str, k: int) -> None:
    """A complete solution hint: every variable (index order: the thresholds, the crossings, then the auxiliary
    variables), with the exact auxiliary values of ``values``."""
    zz = (np.asarray(values["z"]) != 0).astype(np.int64).ravel()
    yy = (np.asarray(values["cross"])[mdl.producers] != 0).astype(np.int64).ravel()
    aux = [values["P"]] if objective == "paper" else [*values["spill"], values["B"]]
    hint = [*zz.tolist(), *yy.tolist(), *(int(x) for x in aux)]
    text = f"solution_hint {{ vars: [{_ints(range(mdl.num_vars))}] values: [{_ints(hint)}] }}"
    if len(hint) != mdl.num_vars or not mdl.model.proto.merge_text_format(text):
        raise RuntimeError("cpsat: the solution hint text did not parse")


def _configure(params, time_limit_s, deterministic_time, workers, rel_gap, random_seed, verbose, deadline) -> None:
    """Set the CP-SAT parameters of :func:`solve_cpsat`'s arguments on ``params``."""
    if time_limit_s is not None:
        params.max_time_in_seconds = float(time_limit_s)
    if deterministic_time is not None:
        if not deterministic_time > 0:
            raise ValueError(f"deterministic_time must be > 0, got {deterministic_time}")
        params.max_deterministic_time = float(deterministic_time)
    params.num_workers = int(workers)
    params.relative_gap_limit = float(rel_gap)
    params.random_seed = int(random_seed)
    params.log_search_progress = bool(verbose)
    params.presolve_inclusion_work_limit = 0  # OR-tools 9.15 bug workaround, see the module docstring
    if deadline is not None:
        left = max(deadline - time.perf_counter(), 0.01)
        params.max_time_in_seconds = min(float(params.max_time_in_seconds), left)


@dataclass(frozen=True)
class Incumbent:
    """An improving CP-SAT solution as :func:`solve_cpsat`'s ``on_solution`` gets it, during the search.

    ``objective``: CP-SAT's integer model's value in objective units, at least the schedule's exact objective up to
    the scaling's rounding (a solution found on the way may leave its max variable slack); ``bound``: CP-SAT's lower
    bound then, less the scaling's rounding error (a lower bound on the exact objective); ``z``: int8[N, K - 1], the
    threshold variables' values. :meth:`assignment` decodes the schedule (a Python loop over the nodes: done when
    needed, not in the search's callback)."""

    objective: float
    bound: float
    z: np.ndarray
    structure: object

    def assignment(self) -> np.ndarray:
        """int64[N]: the solution's stage per node."""
        return np.asarray(stages_from_thresholds(self.z.astype(np.float64), self.structure), np.int64)


def _solution_callback(progress, to_spec, on_solution, mdl: _Model, st, error_bound: float):
    """A solution callback (None: none needed) calling, at every improving solution, ``progress(objective, bound)``
    in objective units and ``on_solution(incumbent)`` with an :class:`Incumbent`."""
    if progress is None and on_solution is None:
        return None
    from ortools.sat.python import cp_model

    class _OnSolution(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self):
            objective, bound = to_spec(self.objective_value), to_spec(self.best_objective_bound)
            if progress is not None:
                progress(objective, bound)
            if on_solution is not None:
                z = np.asarray(self.response_proto.solution, np.int64)[mdl.zid].astype(np.int8)
                on_solution(Incumbent(objective, max(bound - error_bound, 0.0), z, st))

    return _OnSolution()


def _answer(graph, hw, objective, lam, solver, status, mdl: _Model, st, start) -> tuple[np.ndarray, str]:
    """The assignment to return and where it came from (CP-SAT's solution, the hint or the compiler split)."""
    from ortools.sat.python import cp_model

    n, m = graph.num_nodes, hw.stages - 1
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        zval = np.asarray(solver.response_proto.solution, np.int64)[mdl.zid].astype(np.float64)
        return stages_from_thresholds(zval.reshape(n, m), st), "cpsat"
    if status == cp_model.UNKNOWN:
        if start is not None:
            return start, "hint (no solution)"
        from respect_jax.solvers.partitioners import solve_compiler

        return solve_compiler(graph, hw, objective, lam).assignment, "compiler (no solution)"
    raise RuntimeError(f"CP-SAT returned {solver.status_name(status)} for graph {graph.name!r} (a model bug)")


def _stopped(graph: Graph, hw: Hardware, objective: str, lam: float, hint, build_s: float) -> SolveResult:
    """The result of a call stopped before its search: the hint (an assignment) or the compiler split."""
    from respect_jax.solvers.numpy_eval import objective_np
    from respect_jax.solvers.partitioners import solve_compiler

    fallback = hint is not None and not isinstance(hint, str)
    assignment = np.asarray(hint if fallback else solve_compiler(graph, hw, objective, lam).assignment, np.int64)
    bound = objective_lower_bound_np(graph, hw, objective, lam)
    gap = relative_gap(objective_np(graph, assignment, hw, objective, lam), bound)
    info = {"status": "STOPPED", "best_bound": bound, "build_time_s": build_s, "rounding_error_bound": 0.0,
            "assignment_source": "hint (stopped)" if fallback else "compiler (stopped)"}
    return SolveResult(assignment, optimal=False, gap=gap, info=info)


@register_solver("cpsat")
def solve_cpsat(
    graph: Graph,
    hw: Hardware,
    objective: str = "paper",
    lam: float = 1.0,
    time_limit_s: float | None = 60.0,
    workers: int = 2,
    rel_gap: float = 0.0,
    hint="auto",
    random_seed: int = 0,
    verbose: bool = False,
    deterministic_time: float | None = None,
    deadline: float | None = None,
    progress=None,
    stop=None,
    presolve: bool = True,
    on_solution=None,
) -> SolveResult:
    """Solve the scheduling problem exactly with OR-tools CP-SAT.

    Args:
        graph, hw, objective, lam: the problem (``hw.stages`` = K).
        time_limit_s: ``max_time_in_seconds`` (None: no limit).
        workers: ``num_workers`` (parallel portfolio size).
        rel_gap: ``relative_gap_limit`` (0: prove optimality).
        hint: int[N] valid assignment passed as a complete solution hint (``AddHint`` on every
            variable, with exact auxiliary values), ``"auto"`` (the best, under this model, of
            the compiler split, RESPECT's label packing and the best contiguous split) or None.
        random_seed: CP-SAT ``random_seed``.
        verbose: ``log_search_progress``.
        deterministic_time: ``max_deterministic_time`` (None: no limit), a limit in CP-SAT's own work units.
            A run stopped by it repeats exactly with ``workers=1`` (or ``interleave_search``), unlike one stopped
            by the wall-clock ``time_limit_s``, whose schedule, bound and ``optimal`` flag depend on the load.
        deadline: a ``time.perf_counter()`` instant the search must end by (for callers with a budget, such
            as ``solver=auto``): the search gets ``min(time_limit_s, deadline - now)`` once the model is built.
        progress: ``progress(objective, bound)`` is called, in objective units, at every improving solution
            (for a live line); None: no callback.
        on_solution: ``on_solution(incumbent)`` is called from the search's thread at every improving solution with
            an :class:`Incumbent` (its objective, CP-SAT's bound then, its assignment on demand), so that a caller
            that abandons a call still running at its deadline keeps the best schedule found (``solver=auto``);
            None: none.
        stop: a cooperative stop (a :class:`~respect_jax.solvers.stopping.StopSignal`, or any ``stop() -> bool``
            callable; None: none), polled while the model is built and just before the search; a ``StopSignal``
            set during the search ends it at once. Stopped before the search, the call returns the hint (or the
            compiler split) with status ``STOPPED`` and the cheap lower bound.
        presolve: ``cp_model_presolve``. Off, a 1,000-node layered graph (K = 4, latency, 2 workers, load ~7) had
            its first solution after 3.6 s instead of 14 s and a better one at 20 s (``solver=auto`` turns it off
            on large graphs: its ``cpsat_presolve_max_nodes``).

    Returns:
        SolveResult; ``info`` has the CP-SAT status, objective and best bound in objective units, the
        integer scaling (``exact``/``rounded``, unit, rounding bound), wall time and branches.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    k = hw.stages
    if hint is not None and not isinstance(hint, str):
        check_assignment(graph, hint, k, "hint")  # reject a bad hint before any work
    if k == 1:
        return SolveResult(np.zeros(graph.num_nodes, np.int64), optimal=True, gap=0.0, info={"status": "trivial (K=1)"})
    from ortools.sat.python import cp_model  # imported at the first solve: the registry loads without it

    t0 = time.perf_counter()
    st = structure(graph)
    sc = _Scaling(graph, hw, objective, lam)
    values = functools.partial(_exact_values, st, sc, objective, k)
    try:
        mdl = _build_model(graph, st, sc, objective, k, stop)
        start, start_desc = resolve_start(graph, hw, objective, lam, hint, lambda a: values(a)["objective"], "hint")
        if start is not None:
            _add_hint(mdl, values(start), objective, k)
        check_stop(stop)
    except Stopped:
        return _stopped(graph, hw, objective, lam, hint, time.perf_counter() - t0)
    solver = cp_model.CpSolver()
    _configure(solver.parameters, time_limit_s, deterministic_time, workers, rel_gap, random_seed, verbose, deadline)
    solver.parameters.cp_model_presolve = bool(presolve)
    build_s = time.perf_counter() - t0
    offset = hw.stage_overhead_s if objective == "latency" else 0.0

    def to_spec(x: float) -> float:
        return offset + float(x) * sc.unit

    with watching(stop, solver):
        status = solver.solve(mdl.model, _solution_callback(progress, to_spec, on_solution, mdl, st, sc.error_bound))
    solve_s = time.perf_counter() - t0 - build_s
    bound = max(to_spec(solver.best_objective_bound), objective_lower_bound_np(graph, hw, objective, lam))
    assignment, source = _answer(graph, hw, objective, lam, solver, status, mdl, st, start)
    primal = to_spec(values(assignment)["objective"])
    if start is not None and source == "cpsat" and to_spec(values(start)["objective"]) < primal:
        assignment, source = start, "hint (better than the solution)"
        primal = to_spec(values(start)["objective"])
    gap = relative_gap(primal, bound)
    if status == cp_model.OPTIMAL and solver.best_objective_bound >= solver.objective_value:
        gap = 0.0
    if not sc.exact and primal:  # a rounded model's optimum is proven only up to the rounding
        gap += sc.error_bound / abs(primal)
    optimal = bool(status == cp_model.OPTIMAL and gap <= OPTIMALITY_TOL)
    info = {
        "status": solver.status_name(status),
        "model_objective": primal,
        "best_bound": bound,
        "integer_scaling": "exact" if sc.exact else "rounded",
        "unit": sc.unit,
        "rounding_error_bound": sc.error_bound,
        "build_time_s": build_s,
        "solve_time_s": solve_s,
        "wall_time_s": solver.wall_time,
        "branches": int(solver.num_branches),
        "assignment_source": source,
        "hint": start_desc,
    }
    return SolveResult(np.asarray(assignment, np.int64), optimal=optimal, gap=gap, info=info)
