"""Exact MILP oracle (cvxpy + HiGHS) for both objectives (``paper``: peak stage memory + lam * communication;
``latency``: the bottleneck stage time).

Model (K stages, ``M = K - 1`` thresholds, N nodes, E edges; see :mod:`respect_jax.solvers.common`):

* ``Z`` binary [N, M], ``Z[v, j] = [s(v) >= j + 1]`` (threshold encoding), with
  ``Z[v, j+1] <= Z[v, j]`` (monotone) and ``Z[u, j] <= Z[v, j]`` for every edge (u, v), which is
  exactly ``s(u) <= s(v)``. The stage is ``s(v) = sum_j Z[v, j]``.
* Per-stage sums of any node weight ``w`` are linear: with ``W_j = sum_v w_v Z[v, j]``,
  ``sum(w_v : s(v) = 0) = sum(w) - W_0``, ``= W_{k-1} - W_k`` for ``0 < k < K-1`` and ``= W_{M-1}``
  for ``k = K-1``. This gives ``mem_k`` (w = b_p * params) and ``macs_k`` exactly.
* Tensor crossings: ``cross[u, j] = [s(u) < j+1 <= last(u)] = max_{v in succ(u)} Z[v, j] - Z[u, j]``.
  For a producer with successors it is a continuous variable ``Y[u, j] >= Z[v, j] - Z[u, j]``
  (every successor v) and ``Y >= 0``; for a graph output (``last = K-1``) it is the expression
  ``1 - Z[u, j]``. Every objective below is non-decreasing in ``Y`` (activation sizes are
  >= 0), so some optimal solution has ``Y`` at its lower bound ``max(0, max_v Z[v,j] - Z[u,j])``,
  which for binary ``Z`` is the exact crossing indicator: the MILP optimum equals the true
  optimum. ``in_{j+1} = b_a * sum_u out_u * cross[u, j]`` and ``comm = sum_j in_{j+1}``
  (``last(u) - s(u) = sum_j cross[u, j]``).
* ``paper``: ``t >= P + lam * comm`` with ``P >= mem_k`` for all k; minimise ``t``.
* ``latency``: ``spill_k >= (mem_k - C) / H`` and ``spill_k >= 0`` (exactly
  ``max(0, mem_k - C) / H`` at an optimum, because ``T_k`` is increasing in it and the objective
  is a max of the ``T_k``), ``t >= tau + macs_k / R + spill_k + in_k / L`` for all k; minimise ``t``.
  (A non-bottleneck stage may keep slack in ``spill_k`` / ``Y``; the objective value is still
  exact and the returned assignment is re-scored by the shared evaluator.)

Numerics: everything is divided by an objective unit ``U`` (a lower bound on the objective, or a
fallback when that bound is 0), so the optimum is >= 1 in model units; HiGHS's absolute gap
(``mip_abs_gap``, 1e-6 by default) is then at most 1e-6 relative. Values are un-scaled
afterwards. The objective is a single variable ``t`` so that HiGHS's dual bound and gap are
the model's, with no constant offset hidden by cvxpy.

Warm start (``warm_start``: an assignment, ``"auto"`` (default) or None). ``"auto"`` takes the best,
under this model's exact objective, of the compiler split, RESPECT's label packing and the best
contiguous split (pure NumPy, milliseconds to a quarter of a second). The start is always kept as a
fallback: the returned schedule is never worse than it, so a run stopped by its time limit is never
worse than any of the three.
With ``highs_start=True`` the start is also handed to HiGHS as a MIP start, and HiGHS's presolve is
then switched off: with presolve on, HiGHS 1.16 declared such a MIP start optimal when it was not
on 26 of 128 brute-forced tiny instances in our checks (all correct with presolve off, and all
correct without a MIP start). cvxpy's HiGHS interface only re-uses its own previous solution, so
the MIP start goes through a subclass of cvxpy's HiGHS solver that passes a complete solution
(stages, exact crossings, exact ``spill``/``P``/``t``) to ``Highs.setSolution`` before ``run()``.

Time limit: on ``kTimeLimit`` the best incumbent is returned with ``optimal=False`` and the proven
gap ``(incumbent - bound) / incumbent`` where ``bound`` is HiGHS's ``mip_dual_bound`` (or, when HiGHS
stopped before its root LP and has no finite bound, the cheap bound of
``costs.objective_lower_bound``; ``info['bound_source']`` says which). When HiGHS
has no incumbent at all, the warm start (if any) or the compiler split is returned, with the
gap measured against the dual bound using the model's objective of that assignment.
"""

from __future__ import annotations

import functools
import os
import sys
import time
import warnings
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import cvxpy as cp
    import scipy.sparse as sp

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.solvers.base import OPTIMAL_RTOL, SolveResult, register_solver
from respect_jax.solvers.common import (
    Structure,
    check_assignment,
    crossings,
    relative_gap,
    resolve_start,
    stages_from_thresholds,
    structure,
    thresholds,
)
from respect_jax.solvers.scoring import objective_lower_bound_np

OPTIMALITY_TOL = OPTIMAL_RTOL  # relative gap under which an optimal status counts as proven (1e-6)


@functools.cache
def _warm_highs_class():
    """cvxpy's HiGHS interface with a warm start (a factory: cvxpy takes seconds to import, so it is imported
    at the first MILP solve, not when the solver registry loads)."""
    from cvxpy.reductions.solvers.conic_solvers.highs_conif import HIGHS as _CvxHighs

    class _WarmHighs(_CvxHighs):
        """cvxpy's HiGHS conic interface plus a warm start taken from the variables' ``.value``."""

        def __init__(self, warm_vars: list[cp.Variable] | None = None):
            super().__init__()
            self.warm_vars = warm_vars or []
            self.warm_start_used = False

        def name(self):
            return "RESPECT_HIGHS"

        def solve_via_data(self, data, warm_start, verbose, solver_opts, solver_cache=None):
            import highspy as hp
            from cvxpy import settings as s

            cache = None
            values = {v.id: v.value for v in self.warm_vars if v.value is not None}
            prog = data.get(s.PARAM_PROB)
            if values and prog is not None:
                n_cols = data[s.A].shape[1]
                x0 = np.zeros(n_cols)
                filled = np.zeros(n_cols, dtype=bool)
                for var in prog.variables:
                    if var.id in values:
                        col = prog.var_id_to_col[var.id]
                        flat = np.asarray(values[var.id], dtype=np.float64).flatten(order="F")
                        x0[col : col + flat.size] = flat
                        filled[col : col + flat.size] = True
                if filled.all():
                    sol = hp.HighsSolution()
                    sol.col_value = x0.tolist()
                    sol.value_valid = True
                    # the parent installs cache[name][2]["solution"] with setSolution() before run()
                    cache = {self.name(): (None, None, {"model_status": "kOptimal", "solution": sol})}
                    self.warm_start_used = True
            return super().solve_via_data(data, cache is not None, verbose, solver_opts, cache)

    return _WarmHighs


_BANNER_SILENCED = []


def _silence_highs_banner() -> None:
    """Create the process's first ``Highs`` object with fd 1 muted: HiGHS prints its banner to
    stdout once per process, which would corrupt a RESULT.json printed to stdout."""
    if _BANNER_SILENCED:
        return
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    _BANNER_SILENCED.append(True)


def _stage_sum_matrix(num_stages: int) -> sp.csr_matrix:
    """float[K, M] D with ``per_stage = e_0 * total + D @ W`` (see module docstring)."""
    import scipy.sparse as sp  # imported when a MILP is built, not when the solvers are registered

    m = num_stages - 1
    d = sp.lil_matrix((num_stages, m))
    for k in range(num_stages):
        if k < m:
            d[k, k] = -1.0
        if k >= 1:
            d[k, k - 1] = 1.0
    return d.tocsr()


def _objective_unit(graph: Graph, hw: Hardware, objective: str, lam: float) -> float:
    unit = objective_lower_bound_np(graph, hw, objective, lam)
    if unit > 0:
        return unit
    out = float(hw.act_bytes * graph.output_size.max(initial=0))
    if objective == "paper":
        unit = lam * out
    else:
        unit = max(out / hw.link_bw, float(hw.param_bytes * graph.params.max(initial=0)) / hw.host_bw)
    return unit if unit > 0 else 1.0


class _Model:
    """The cvxpy problem of the module docstring, in objective units ``unit``."""

    def __init__(self, graph: Graph, st: Structure, hw: Hardware, objective: str, lam: float):
        import cvxpy as cp
        import scipy.sparse as sp  # imported when a MILP is built, not when the solvers are registered

        n, k = graph.num_nodes, hw.stages
        m = k - 1
        self.unit = unit = _objective_unit(graph, hw, objective, lam)
        self.objective, self.hw, self.lam, self.st = objective, hw, lam, st
        self.Z = cp.Variable((n, m), boolean=True, name="Z")
        cons = []
        if m >= 2:
            cons.append(self.Z[:, 1:] <= self.Z[:, :-1])
        edges = st.edges
        if len(edges):
            inc = _incidence(edges, n)
            cons.append(inc @ self.Z <= 0)
        out = graph.output_size.astype(np.float64)
        # crossing variables for producers with successors and a non-empty tensor
        prod = np.flatnonzero((~st.sink) & (out > 0))
        self.y_nodes = prod
        self.Y = cp.Variable((len(prod), m), name="Y") if len(prod) else None
        in_terms = []  # each: expression of shape (m,) in bytes
        if len(prod):
            row = {int(u): i for i, u in enumerate(prod)}
            sel = [(row[int(u)], int(u), int(v)) for u, v in edges.tolist() if int(u) in row]
            e_idx = np.arange(len(sel))
            rows = np.array([r for r, _, _ in sel])
            us = np.array([u for _, u, _ in sel])
            vs = np.array([v for _, _, v in sel])
            sy = sp.csr_matrix((np.ones(len(sel)), (e_idx, rows)), shape=(len(sel), len(prod)))
            dz = sp.csr_matrix(
                (np.r_[np.ones(len(sel)), -np.ones(len(sel))], (np.r_[e_idx, e_idx], np.r_[vs, us])),
                shape=(len(sel), n),
            )
            cons += [sy @ self.Y >= dz @ self.Z, self.Y >= 0]
            in_terms.append(hw.act_bytes * (out[prod] @ self.Y))
        sink_out = np.where(st.sink, out, 0.0)
        if sink_out.any():
            in_terms.append(hw.act_bytes * (sink_out.sum() - sink_out @ self.Z))
        in_bytes = sum(in_terms) if in_terms else None  # shape (m,), stages 1..K-1
        dmat = _stage_sum_matrix(k)
        e0 = np.zeros(k)
        e0[0] = 1.0
        params = hw.param_bytes * graph.params.astype(np.float64)
        mem = e0 * params.sum() + dmat @ (params @ self.Z)  # (K,) bytes
        self.t = cp.Variable(name="t")
        if objective == "paper":
            self.P = cp.Variable(name="P")
            cons.append(self.P >= mem / unit)
            comm = cp.sum(in_bytes) if in_bytes is not None else 0.0
            cons.append(self.t >= self.P + (lam / unit) * comm)
            self.spill = None
        else:
            self.P = None
            self.spill = cp.Variable(k, name="spill")
            cons += [self.spill >= (mem - hw.sram_bytes) / (hw.host_bw * unit), self.spill >= 0]
            macs = graph.macs.astype(np.float64)
            time_k = hw.stage_overhead_s / unit + (e0 * macs.sum() + dmat @ (macs @ self.Z)) / (hw.macs_per_s * unit)
            time_k = time_k + self.spill
            if in_bytes is not None:
                time_k = time_k + cp.hstack([np.zeros(1), in_bytes / (hw.link_bw * unit)])
            cons.append(self.t >= time_k)
        self.problem = cp.Problem(cp.Minimize(self.t), cons)

    def exact_values(self, assignment: np.ndarray, graph: Graph) -> dict:
        """Exact values of every model variable for ``assignment`` (the warm start), model units."""
        hw, k = self.hw, self.hw.stages
        z = thresholds(assignment, k).astype(np.float64)
        cross = crossings(self.st, assignment, k).astype(np.float64)
        mem = np.bincount(assignment, weights=hw.param_bytes * graph.params.astype(np.float64), minlength=k)
        in_b = np.r_[0.0, hw.act_bytes * (graph.output_size.astype(np.float64) @ cross)]
        vals = {"Z": z, "Y": cross[self.y_nodes] if self.Y is not None else None}
        if self.objective == "paper":
            vals["P"] = mem.max() / self.unit
            vals["t"] = vals["P"] + self.lam * in_b.sum() / self.unit
        else:
            macs = np.bincount(assignment, weights=graph.macs.astype(np.float64), minlength=k)
            spill = np.maximum(mem - hw.sram_bytes, 0.0) / (hw.host_bw * self.unit)
            times = hw.stage_overhead_s / self.unit + macs / (hw.macs_per_s * self.unit) + spill
            times = times + in_b / (hw.link_bw * self.unit)
            vals["spill"], vals["t"] = spill, times.max()
        return vals

    def set_values(self, vals: dict) -> list[cp.Variable]:
        pairs = [
            (self.Z, vals["Z"]),
            (self.Y, vals["Y"]),
            (self.P, vals.get("P")),
            (self.spill, vals.get("spill")),
            (self.t, vals["t"]),
        ]
        used = []
        for var, val in pairs:
            if var is not None:
                var.value = np.reshape(np.asarray(val, dtype=np.float64), var.shape)
                used.append(var)
        return used


def _incidence(edges: np.ndarray, n: int) -> sp.csr_matrix:
    """float[E, N] with +1 at the producer and -1 at the consumer of each edge."""
    import scipy.sparse as sp  # imported when a MILP is built, not when the solvers are registered

    e = np.arange(len(edges))
    return sp.csr_matrix(
        (np.r_[np.ones(len(edges)), -np.ones(len(edges))], (np.r_[e, e], np.r_[edges[:, 0], edges[:, 1]])),
        shape=(len(edges), n),
    )


@register_solver("milp")
def solve_milp(
    graph: Graph,
    hw: Hardware,
    objective: str = "paper",
    lam: float = 1.0,
    time_limit_s: float | None = 60.0,
    rel_gap: float = 0.0,
    threads: int | None = None,
    warm_start="auto",
    highs_start: bool = False,
    verbose: bool = False,
    deadline: float | None = None,
) -> SolveResult:
    """Solve the scheduling problem exactly with a MILP (cvxpy + HiGHS).

    Args:
        graph: the graph; hw: hardware (``hw.stages`` = K); objective: ``paper`` or ``latency``;
            lam: communication weight of ``paper``.
        time_limit_s: HiGHS ``time_limit`` (None: no limit).
        rel_gap: HiGHS ``mip_rel_gap`` (0: solve to optimality).
        threads: HiGHS ``threads`` (None: HiGHS default).
        warm_start: int[N] valid assignment given to HiGHS as its first incumbent, ``"auto"``
            (the best of the compiler split, RESPECT's label packing and the best contiguous split) or
            None; the returned schedule is never worse than it.
        highs_start: also give the warm start to HiGHS as a MIP start (turns presolve off).
        verbose: HiGHS log to the console.
        deadline: a ``time.perf_counter()`` instant HiGHS must stop by (for callers with a budget, such as
            ``solver=auto``): its time limit becomes ``min(time_limit_s, deadline - now)`` once the model is built
            (cvxpy's compilation inside the solve call is not covered).

    Returns:
        SolveResult with ``optimal`` True iff HiGHS proved optimality (status optimal and gap
        <= 1e-6), ``gap`` the proven relative gap (as measured: an optimal answer may report a gap
        up to 1e-6, HiGHS's tolerance, since huge counts leave float64 a few units short), and
        ``info`` holding status, model objective and dual bound (in objective units), HiGHS's own
        ``mip_gap``, node count, build/solve times, the objective unit and whether the warm start
        was used.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    k = hw.stages
    if warm_start is not None and not isinstance(warm_start, str):
        check_assignment(graph, warm_start, k)  # reject a bad start before any work
    if k == 1:
        return SolveResult(np.zeros(graph.num_nodes, np.int64), optimal=True, gap=0.0, info={"status": "trivial (K=1)"})
    _silence_highs_banner()
    st = structure(graph)
    t0 = time.perf_counter()
    model = _Model(graph, st, hw, objective, lam)
    start, start_desc = resolve_start(
        graph, hw, objective, lam, warm_start, lambda a: model.exact_values(a, graph)["t"], "warm start"
    )
    warm_vars = model.set_values(model.exact_values(start, graph)) if start is not None and highs_start else []
    solver = _warm_highs_class()(warm_vars)
    opts: dict = {"mip_rel_gap": float(rel_gap)}
    if time_limit_s is not None:
        opts["time_limit"] = float(time_limit_s)
    if deadline is not None:
        opts["time_limit"] = min(opts.get("time_limit", np.inf), max(deadline - time.perf_counter(), 0.01))
    if threads is not None:
        opts["threads"] = int(threads)
    if warm_vars:
        opts["presolve"] = "off"  # see the module docstring (HiGHS 1.16 MIP start + presolve)
    build_s = time.perf_counter() - t0
    with warnings.catch_warnings():  # cvxpy warns "may be inaccurate" on a time limit; we report the gap
        warnings.simplefilter("ignore", UserWarning)
        model.problem.solve(solver=solver, verbose=verbose, **opts)
    solve_s = time.perf_counter() - t0 - build_s
    stats = model.problem.solver_stats.extra_stats
    status = model.problem.status
    unit = model.unit
    has_incumbent = (
        stats is not None and int(getattr(stats, "primal_solution_status", 0)) == 2 and model.Z.value is not None
    )
    # proven lower bound: HiGHS's dual bound, or the cheap bound when HiGHS stopped before the root LP
    cheap = objective_lower_bound_np(graph, hw, objective, lam)
    dual = float(stats.mip_dual_bound) * unit if stats is not None and np.isfinite(stats.mip_dual_bound) else None
    bound_source = "highs" if dual is not None and dual >= cheap else "cheap lower bound"
    dual = cheap if dual is None else max(dual, cheap)
    exact = lambda a: float(model.exact_values(a, graph)["t"]) * unit  # the model's objective of a schedule
    if has_incumbent:
        assignment, source = stages_from_thresholds(model.Z.value, st), "highs"
    elif start is not None:
        assignment, source = start, "warm start (no incumbent)"
    else:
        from respect_jax.solvers.partitioners import solve_compiler

        assignment, source = solve_compiler(graph, hw, objective, lam).assignment, "compiler (no incumbent)"
    primal = exact(assignment)
    if start is not None and source == "highs" and exact(start) < primal:  # never worse than the start
        assignment, primal, source = start, exact(start), "warm start (better than the incumbent)"
    gap = relative_gap(primal, dual)
    optimal = bool(status == "optimal" and gap <= OPTIMALITY_TOL)  # the gap itself is reported as measured
    info = {
        "status": str(status),
        "model_objective": primal,
        "dual_bound": dual,
        "bound_source": bound_source,
        "highs_mip_gap": float(stats.mip_gap) if stats is not None else None,
        "mip_nodes": int(stats.mip_node_count) if stats is not None else None,
        "objective_unit": unit,
        "build_time_s": build_s,
        "solve_time_s": solve_s,
        "assignment_source": source,
        "warm_start": start_desc,
        "highs_mip_start_used": solver.warm_start_used,
    }
    return SolveResult(np.asarray(assignment, np.int64), optimal=optimal, gap=gap, info=info)
