"""Lower bounds on the two objectives, valid for every valid schedule: cheap analytic ones (NumPy, O(N log N))
and a stronger *crossing* bound (parametric minimum cuts and small CP-SAT problems, run under a deadline).

They make a certified gap ``(objective - bound) / objective`` finite, and small, even when no exact solver proved
anything in time (``solver=auto`` reports the best of these and the exact solver's bound).

The problem. A schedule gives every node v a stage ``s(v)`` in ``0..K-1`` with ``s(u) <= s(v)`` on every edge
(u, v). With ``P_k`` the parameters on stage k, ``mem_k = b_p P_k``, ``spill_k = max(0, mem_k - C)``,
``macs_k`` the stage's MACs and ``in_k`` the activation bytes entering stage k, the stage time is
``T_k = tau + macs_k / R + spill_k / H + in_k / L``. ``latency`` is ``max_k T_k``; ``paper`` is
``max_k mem_k + lam * comm`` with ``comm = sum_k in_k``.

Boundaries. ``D_k = {v : s(v) < k}`` (k = 1..K-1) is a *downset* (closed under predecessors). A tensor u enters
stage k iff ``u`` is in ``D_k`` and u has a consumer outside ``D_k`` or is a graph output (outputs leave from the
last stage). So ``in_k = b_a cross(D_k)`` with ``cross(D) = sum(out_u : u in D, succ(u) not inside D or u an
output)``, and ``comm = b_a sum_k cross(D_k)``.

Analytic bounds (:func:`analytic_lower_bound`):

* **Groups** (:func:`group_bound`): of any m nodes, some stage holds at least ``ceil(m / K)``; so some stage
  holds at least the ``ceil(m / K)`` smallest of the m largest values of an additive per-node quantity.
* ``paper``: ``M_lb = b_p max(sum params / K, group(params))`` bounds ``max_k mem_k`` (``comm >= 0``), and the
  split bound ``min(b_p sum params, M_lb + lam b_a min_u out_u)``: either one stage holds every parameter, or the
  first stage a holding some has more after it; then ``D_{a+1}`` is a non-empty downset, a node of it without a
  successor inside (it is finite) is an output or has a later consumer, so its tensor crosses boundary a + 1.
* ``latency``: the stage holding a group S has ``T >= tau + macs(S) / R + max(0, b_p params(S) - C) / H``
  (group bounds of MACs, of parameters and of single nodes); and the average ``max_k T_k >= mean_k T_k >= tau +
  (sum macs / R + max(0, b_p sum params - K C) / H) / K`` because ``sum_k max(0, mem_k - C) >= max(0, sum_k mem_k
  - K C)`` and ``in_k >= 0``.

Crossing bounds (:func:`crossing_lower_bound`). Drop the nesting ``D_1 ⊆ D_2 ⊆ ...``: each ``D_k`` is *some*
downset whose weight lies in a window the stage capacities force, so ``cross(D_k) >= h(window_k)``, the least
crossing of any downset in the window (one CP-SAT problem: Booleans ``x_v = [v in D]`` with ``x_v -> x_u`` per
edge, ``y_u >= x_u - x_v`` per edge and ``y_u >= x_u`` for outputs, window constraints, minimise
``sum out_u y_u``; CP-SAT's proven bound is used when it stops early, infeasibility gives ``+inf``).

* ``paper``: if ``max_k mem_k <= M`` then ``params(D_k) <= k M / b_p`` and ``params(V \\ D_k) <= (K-k) M /
  b_p``, so ``objective >= M* + lam b_a F(M*)`` with ``M* = max_k mem_k`` and ``F(M) = sum_k h(window_k(M))``,
  non-increasing in M. For ``M*`` in ``[a, b]`` this is ``>= a + lam b_a F(b)``; the bound is the least of these
  over a partition of ``[M_lb, upper]`` (``upper``: any schedule's objective, so the optimum's ``M* <= upper``),
  refined best-first (split the segment with the least value) until the deadline.
* ``latency``: if ``max_k T_k <= T`` (``c = T - tau``), stage i has ``cap_i = c - in_i / L`` left for its MACs
  and spill: ``macs_i / R <= cap_i`` and ``macs_i / R + b_p P_i / H <= cap_i + C / H`` (``spill_i >= b_p P_i - C``).
  Summed over the stages before / after boundary k these give windows of ``macs(D_k)`` and of ``w(D_k)``,
  ``w_v = macs_v / R + b_p params_v / H``. Start from ``in_i >= 0``; each ``h`` proves ``in_k >= b_a h_k``, which
  shrinks the caps and so every window; repeat (``MAX_ROUNDS``). T is impossible when some ``cap_i < 0`` or
  ``sum_i cap_i < sum macs / R + max(0, b_p sum params - K C) / H`` (the average bound with the incoming tensors).
  Then no ``T' < T`` is possible either (smaller caps, narrower windows, larger ``h``), so T is a lower bound;
  a bisection between the analytic bound and ``upper`` keeps the largest such T.

Chains (:func:`_paper_chain_bound`, :func:`_latency_chain_bound`) keep the stage capacities between adjacent
boundaries. Where a stage can spill, the ``latency`` MACs chain also keeps each boundary's combined weight
(``two_weight``): :class:`DownsetEnvelope` bounds the parameters of a downset by its MACs (closures, parametric cuts,
CP-SAT on the buckets that decide), so a stage cannot use ``C / H`` of spill allowance its parameters cannot reach.

Two oracles answer ``h(window)`` (:class:`TwoLevelOracle`). The *hull* bound (:class:`HullCrossing`: a few
parametric minimum cuts, milliseconds at 1,000 nodes) is the Lagrangian relaxation of the window: the lower
convex hull of the points ``(w(D), cross(D))`` over all downsets, at the window's lower end. Every query gets it
first; CP-SAT (exact, or its proven bound when it stops early) then refines the queries that decide the bound,
each with its own time limit, until a query ends without a proof (CP-SAT does not pay on that graph) or on graphs
above :data:`EXACT_MAX_NODES` nodes not at all. On a dense 1,000-node layered graph (K = 4, ``paper``) the hull
bounds take the certified gap of the one-stage schedule from 75 % to 27 % in about a second, where one CP-SAT
query proved nothing in 10 s.

Windows are rounded outwards (a relaxation stays a relaxation), so rounding never makes a bound invalid.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.solvers.stopping import Stopped, check_stop, watching

#: Relative slack added to every window edge (float rounding of the capacities).
WINDOW_RTOL = 1e-9
#: Relative resolution of the searches (segment width / bisection interval, as a share of ``upper``): fine enough
#: that a tight relaxation (K = 2 for ``paper``: one boundary, nothing dropped) proves optimality within 1e-6.
RESOLUTION = 1e-7
#: The ``paper`` search on the hull bounds alone stops once its relaxation's least value is known within this share of
#: ``upper`` (unless it may reach ``upper``, proving the incumbent optimal): finer steps cost time the exact solver
#: could use.
SETTLED = 1e-3
#: Rounds of the latency test (each tightens every window with the crossings the last round proved).
MAX_ROUNDS = 4
#: Scale of the combined latency weight ``macs/R + b_p params/H`` as integers (its total is about this many units).
COMBINED_UNITS = 2**36


def group_bound(values: np.ndarray, stages: int) -> float:
    """Largest ``sum`` of the ``ceil(m / K)`` smallest of the m largest ``values`` over m (module docstring).

    Args:
        values: f64[N] a non-negative additive per-node quantity.
        stages: K.
    Returns:
        a value some stage of every schedule holds at least (``max(values)`` for m = 1).
    """
    v = np.sort(np.asarray(values, np.float64))[::-1]
    if v.size == 0:
        return 0.0
    prefix = np.concatenate([[0.0], np.cumsum(v)])
    m = np.arange(1, v.size + 1)
    c = -(-m // int(stages))
    return float((prefix[m] - prefix[m - c]).max())


def no_spill(graph: Graph, hw: Hardware) -> bool:
    """True when no stage of any schedule spills (``b_p sum params <= C``): every bound on the combined weight
    ``macs / R + b_p params / H`` less ``C / H`` is then at most its MACs-only counterpart, so it is skipped."""
    return hw.param_bytes * float(graph.params.sum()) <= hw.sram_bytes


def latency_lower_bound(graph: Graph, hw: Hardware) -> float:
    """f64 lower bound on the bottleneck stage time (s) of any valid schedule (group and average bounds)."""
    macs = graph.macs.astype(np.float64)
    mem = hw.param_bytes * graph.params.astype(np.float64)
    k = hw.stages
    node = (macs / hw.macs_per_s + np.maximum(mem - hw.sram_bytes, 0.0) / hw.host_bw).max(initial=0.0)
    groups = max(
        group_bound(macs, k) / hw.macs_per_s,
        max(group_bound(mem, k) - hw.sram_bytes, 0.0) / hw.host_bw,
        group_bound(macs / hw.macs_per_s + mem / hw.host_bw, k) - hw.sram_bytes / hw.host_bw,
    )
    total = macs.sum() / hw.macs_per_s + max(mem.sum() - k * hw.sram_bytes, 0.0) / hw.host_bw
    return float(hw.stage_overhead_s + max(node, groups, total / k))


def memory_lower_bound(graph: Graph, hw: Hardware) -> float:
    """f64 lower bound on ``max_k mem_k`` (bytes): the average and the group bound of the parameters."""
    params = graph.params.astype(np.float64)
    return float(hw.param_bytes * max(params.sum() / hw.stages, group_bound(params, hw.stages)))


def paper_lower_bound(graph: Graph, hw: Hardware, lam: float = 1.0) -> float:
    """f64 lower bound on ``max_k mem_k + lam * comm`` (bytes) of any valid schedule (memory and split bounds)."""
    params = graph.params.astype(np.float64)
    if hw.stages == 1:
        return float(hw.param_bytes * params.sum())
    memory = memory_lower_bound(graph, hw)
    crossing = hw.act_bytes * float(graph.output_size.min(initial=0))
    split = min(hw.param_bytes * params.sum(), memory + lam * crossing)
    return float(max(memory, split))


def analytic_lower_bound(graph: Graph, hw: Hardware, objective: str, lam: float = 1.0) -> float:
    """The analytic bound of ``objective`` (``paper`` | ``latency``); never above the optimum."""
    if objective == "latency":
        return latency_lower_bound(graph, hw)
    if objective == "paper":
        return paper_lower_bound(graph, hw, lam)
    raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")


# --- crossing bounds ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deadline:
    """When a search must end: a ``time.perf_counter()`` instant, or earlier once ``stop()`` returns True."""

    at: float
    stop: object = None

    def left(self) -> float:
        """Seconds left (0 once stopped)."""
        if self.stop is not None and self.stop():
            return 0.0
        return max(self.at - time.perf_counter(), 0.0)


def _window(lo: float, hi: float) -> tuple[int, int]:
    """Integer window containing every integer in the real ``[lo, hi]`` (widened by ``WINDOW_RTOL``)."""
    lo, hi = max(lo, -(2.0**62)), min(hi, 2.0**62)  # unbounded sides (the oracle clamps to [0, total])
    lo_i = math.ceil(lo - WINDOW_RTOL * max(1.0, abs(lo)))
    hi_i = math.floor(hi + WINDOW_RTOL * max(1.0, abs(hi)))
    return lo_i, hi_i


@dataclass
class CrossingOracle:
    """``h(windows)``: the least ``cross(D)`` (output elements) over downsets D whose weights lie in windows.

    One CP-SAT model is built at construction; each query only rewrites the window constraints' domains.

    Attributes:
        weights: int64[W, N] non-negative weight vectors; a query gives one ``(lo, hi)`` window per vector.
        workers: CP-SAT ``num_workers`` per query.
        calls: queries answered by CP-SAT (the others came from the cache).
        stop: a ``stop() -> bool`` callable or a :class:`~respect_jax.solvers.stopping.StopSignal` (None: none),
            polled while the model is built (raising :class:`~respect_jax.solvers.stopping.Stopped`); a
            ``StopSignal`` set during a query ends its search at once.
    """

    graph: Graph
    weights: np.ndarray
    workers: int = 1
    calls: int = 0
    stop: object = None
    _cache: list = field(default_factory=list)

    def __post_init__(self) -> None:
        from ortools.sat.python import cp_model  # imported at the first use: the module loads without it

        self._cp = cp_model
        graph, n = self.graph, self.graph.num_nodes
        self.weights = np.asarray(self.weights, np.int64).reshape(-1, n)
        self.totals = self.weights.sum(axis=1)
        succs = graph.successors()
        out = graph.output_size
        model = cp_model.CpModel()
        x = [model.new_bool_var(f"x{v}") for v in range(n)]
        terms = []
        for u in range(n):
            if u % 256 == 0:
                check_stop(self.stop)
            for v in succs[u]:
                model.add_implication(x[v], x[u])  # a downset: a member's producers are members
            if out[u] == 0:
                continue
            y = model.new_bool_var(f"y{u}")
            terms.append(int(out[u]) * y)
            if not succs[u]:
                model.add_implication(x[u], y)  # a graph output in D crosses every later boundary
            for v in succs[u]:
                model.add_bool_or([~x[u], x[v], y])  # u in D, a consumer outside: u crosses
        self._windows = [
            model.add_linear_constraint(sum(int(c) * x[v] for v, c in enumerate(w.tolist()) if c), 0, int(t))
            for w, t in zip(self.weights, self.totals, strict=True)
        ]
        model.minimize(sum(terms))
        self._model, self._x = model, x

    def __call__(self, windows: list[tuple[int, int]], deadline: Deadline) -> float:
        """Lower bound on ``h`` (exact when CP-SAT proved it; ``inf``: no downset fits; 0 past the deadline)."""
        return self.query(windows, deadline)[0]

    def query(self, windows: list[tuple[int, int]], deadline: Deadline, limit_s: float = math.inf
              ) -> tuple[float, bool]:
        """``(lower bound on h, proved)`` within ``min(limit_s, time left)``; ``proved``: the value is ``h``."""
        windows = [(max(int(lo), 0), min(int(hi), int(t))) for (lo, hi), t in zip(windows, self.totals, strict=True)]
        if any(lo > hi for lo, hi in windows):
            return math.inf, True
        if all(lo <= 0 for lo, _ in windows):
            return 0.0, True  # the empty downset fits and crosses nothing
        for cached, value, weight in self._cache:  # a wider window whose optimum lies inside this one
            inside = all(clo <= lo and hi <= chi for (clo, chi), (lo, hi) in zip(cached, windows, strict=True))
            if not inside:
                continue
            if value == math.inf or all(lo <= w <= hi for w, (lo, hi) in zip(weight, windows, strict=True)):
                return value, True
        left = min(deadline.left(), float(limit_s))
        if left <= 0.01:
            return 0.0, False
        for ct, (lo, hi) in zip(self._windows, windows, strict=True):
            domain = ct.proto.linear.domain
            domain[0], domain[1] = lo, hi
        solver = self._cp.CpSolver()
        solver.parameters.max_time_in_seconds = left
        solver.parameters.num_workers = int(self.workers)
        solver.parameters.presolve_inclusion_work_limit = 0  # OR-tools 9.15 wrong-optimum bug (or-tools #5293)
        with watching(self.stop, solver):
            status = solver.solve(self._model)
        self.calls += 1
        if status == self._cp.INFEASIBLE:
            self._cache.append((windows, math.inf, None))
            return math.inf, True
        if status == self._cp.OPTIMAL:
            member = np.array([solver.boolean_value(v) for v in self._x], np.int64)
            value = float(solver.objective_value)
            self._cache.append((windows, value, (self.weights @ member).tolist()))
            return value, True
        if status in (self._cp.FEASIBLE, self._cp.UNKNOWN):
            return max(float(solver.best_objective_bound), 0.0), False
        raise RuntimeError(f"CP-SAT returned {solver.status_name(status)} on the crossing problem (a model bug)")


#: Parametric min cuts per hull query at most (the breakpoint search ends far sooner on every graph measured).
HULL_MAX_CUTS = 60
#: Seconds a CP-SAT crossing query may take at most, as a share of the time left (it stops with its proven bound).
QUERY_SHARE = 0.25
#: Graphs with more nodes get the hull bounds alone: one CP-SAT crossing query on a 1,000-node layered graph did
#: not finish in 10 s (2-core CPU, issue 27), and its model takes seconds to build in Python at 10,000 nodes.
EXACT_MAX_NODES = 1500


def _hull_edge(points: set, lo: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """The edge ``(a, b)`` of the lower convex hull of ``points`` (``(w, c)`` pairs, one at w = 0 and one at the
    largest w) with ``a_w < lo <= b_w``."""
    hull: list = []
    for p in sorted(points):
        if hull and hull[-1][0] == p[0]:
            continue  # the same weight: the lower crossing came first
        while len(hull) >= 2 and ((hull[-1][1] - hull[-2][1]) * (p[0] - hull[-2][0])
                                  >= (p[1] - hull[-2][1]) * (hull[-1][0] - hull[-2][0])):
            hull.pop()  # hull[-1] lies on or above the line from hull[-2] to p
        hull.append(p)
    i = next(i for i in range(1, len(hull)) if hull[i][0] >= lo)
    return hull[i - 1], hull[i]


def ancestor_matrix(graph: Graph) -> np.ndarray:
    """bool[N, N]: ``anc[v, u]`` when u is v or one of v's ancestors (rows filled in topological order)."""
    preds = graph.predecessors()
    anc = np.zeros((graph.num_nodes, graph.num_nodes), bool)
    for v in graph.topological_order().tolist():
        anc[v, v] = True
        for u in preds[v]:
            anc[v] |= anc[u]
    return anc


def closure_cut(flow, arcs, n_infinite: int, scaled: np.ndarray, profit: np.ndarray | None,
                what: str) -> tuple[int, np.ndarray]:
    """(least value, int64[] node ids on the source side) of a minimum-cost closure solved by OR-tools' max flow
    ``flow`` (source 0, sink 1), whose ``arcs`` are, in this order: ``n_infinite`` implications (given an infinite
    capacity), one source -> node arc and one node -> sink arc per entry of ``scaled`` (int64 node costs: a negative
    cost on the first, a positive one on the second), and source -> z arcs of the int64 profits ``profit`` (None:
    none). The least value of the closure's summed costs less the profits it earns is the max flow less the negative
    costs and the profits. ``what`` names the network in the one-line error of a failed solve."""
    source, sink = np.maximum(-scaled, 0), np.maximum(scaled, 0)
    earned = np.zeros(0, np.int64) if profit is None else profit
    finite = int(source.sum() + sink.sum() + earned.sum())
    flow.set_arcs_capacity(arcs, np.concatenate([np.full(n_infinite, finite + 1, np.int64), source, sink, earned]))
    status = flow.solve(0, 1)
    if status != flow.OPTIMAL:
        raise RuntimeError(f"max flow returned status {status} on {what} (a model bug)")
    return flow.optimal_flow() - int(source.sum() + earned.sum()), np.asarray(flow.get_source_side_min_cut(), np.int64)


class HullCrossing:
    """A lower bound on ``h(windows)`` by parametric minimum cuts, no CP-SAT: the *hull* (Lagrangian) bound.

    For a multiplier ``mu >= 0`` and one weight vector w, every downset D with ``w(D) >= lo`` has
    ``cross(D) >= min_D' (cross(D') - mu w(D')) + mu lo``. The minimum over downsets is a minimum-cost *closure*
    (one max flow): a node ``x_v`` per graph node (v in D) costing ``out_v - mu w_v``, a node ``z_u`` per node u
    with successors and ``out_u > 0`` costing ``-out_u`` (z_u: every consumer of u is in D, so u does not
    cross), and the implications ``x_v -> x_u`` per edge (u, v) (a downset) and ``z_u -> x_v`` per consumer v.
    A graph output in D always crosses (its ``out`` is paid, no z). Costs are scaled to integers and rounded
    down, so the cut value stays a lower bound. The best ``mu`` is found by the breakpoint search of a concave
    piecewise-linear function: keep a downset below ``lo`` (first the empty one) and one at or above it (first
    every node), try the ``mu`` where their lines meet, stop when the cut finds nothing below both lines. The
    value is the lower convex hull of the points ``(w(D), cross(D))`` at ``lo``; an upper window never raises
    it (so it is ignored), and with several weight vectors each one's bound is valid alone (the best is taken).

    Attributes:
        weights: int64[W, N] non-negative weight vectors (as :class:`CrossingOracle`'s).
        cuts: max-flow problems solved so far.
    """

    def __init__(self, graph: Graph, weights: np.ndarray, deadline: Deadline | None = None):
        from ortools.graph.python import max_flow  # imported at the first use: the module loads without it

        n = graph.num_nodes
        self.n = n
        self.deadline = deadline
        self.weights = np.asarray(weights, np.int64).reshape(-1, n)
        self.totals = self.weights.sum(axis=1)
        self.out = graph.output_size.astype(np.int64)
        self.edges = np.asarray(graph.edges, np.int64).reshape(-1, 2)
        has_succ = np.zeros(n, bool)
        has_succ[self.edges[:, 0]] = True
        self.is_output = ~has_succ
        self.zs = np.flatnonzero(has_succ & (self.out > 0))
        z_of = np.full(n, -1, np.int64)
        z_of[self.zs] = 2 + n + np.arange(len(self.zs))  # node 0: source, 1: sink, 2 + v: x_v
        e, x = self.edges, 2 + np.arange(n)
        with_z = z_of[e[:, 0]] >= 0
        tails = [2 + e[:, 1], z_of[e[with_z, 0]], np.zeros(n, np.int64), x, np.zeros(len(self.zs), np.int64)]
        heads = [2 + e[:, 0], 2 + e[with_z, 1], x, np.ones(n, np.int64), z_of[self.zs]]
        self.n_implications = len(e) + int(with_z.sum())
        self._flow = max_flow.SimpleMaxFlow()
        tail, head = np.concatenate(tails), np.concatenate(heads)
        self._arcs = self._flow.add_arcs_with_capacity(tail, head, np.zeros(len(tail), np.int64))
        self.cuts = 0
        self._cache: dict = {}
        self._known: dict = {}

    def cross(self, member: np.ndarray) -> int:
        """``cross(D)`` of the set ``member`` (bool[N]): its nodes with a consumer outside, or graph outputs."""
        leaving = member[self.edges[:, 0]] & ~member[self.edges[:, 1]]
        crossing = member & self.is_output
        crossing[self.edges[leaving, 0]] = True
        return int(self.out[crossing].sum())

    def least_cost(self, mu: float, w: np.ndarray) -> tuple[float, np.ndarray]:
        """(a lower bound on ``min_D cross(D) - mu w(D)``, bool[N] a downset reaching it up to rounding)."""
        cost = self.out - mu * w
        total = float(self.out.sum()) + mu * float(w.sum())
        scale = 2.0 ** math.floor(math.log2(2.0**50 / max(total, 1.0)))
        scaled = np.floor(scale * cost).astype(np.int64)
        profit_z = np.ceil(scale * self.out[self.zs]).astype(np.int64)
        least, side = closure_cut(self._flow, self._arcs, self.n_implications, scaled, profit_z,
                                  "the hull crossing problem")
        self.cuts += 1
        value = least / scale
        member = np.zeros(self.n, bool)
        member[side[(side >= 2) & (side < 2 + self.n)] - 2] = True
        return value, member

    def least_crossing_above(self, j: int, lo: int) -> float:
        """A lower bound on the least ``cross(D)`` of a downset with ``weights[j](D) >= lo`` (``inf``: none).

        The breakpoint search keeps what it learns across queries (per weight vector): the downsets found (their
        points ``(w(D), cross(D))``), the hull edges proven (no downset below them) and every cut's line ``cross(D)
        >= value + mu w(D)`` (valid for every downset). A query refines only the edge of the known points' lower hull
        over ``lo`` until that edge is proven (at most :data:`HULL_MAX_CUTS` new cuts, the deadline), and returns the
        best line at ``lo``: the same value as a fresh search, so a later query at a lo of a proven edge costs no cut.
        """
        if lo <= 0:
            return 0.0
        if lo > self.totals[j]:
            return math.inf
        if (j, lo) in self._cache:
            return self._cache[j, lo]
        w = self.weights[j]
        if j not in self._known:  # points: the empty downset and every node; lines: (mu, value) of each cut
            self._known[j] = {"points": {(0.0, 0.0), (float(self.totals[j]), float(self.cross(np.ones(self.n, bool))))},
                              "proven": set(), "lines": []}
        known = self._known[j]
        proven = False
        for _ in range(HULL_MAX_CUTS):
            a, b = _hull_edge(known["points"], lo)
            if (a, b) in known["proven"]:
                proven = True
                break
            if self.deadline is not None and self.deadline.left() <= 0:
                break  # every line found so far is a valid (weaker) bound
            mu = max((b[1] - a[1]) / (b[0] - a[0]), 0.0)
            value, member = self.least_cost(mu, w)
            known["lines"].append((mu, value))
            point = (float(w[member].sum()), float(self.cross(member)))
            line = a[1] - mu * a[0]
            if point[1] - mu * point[0] >= line - 1e-9 * max(1.0, abs(line)):
                known["proven"].add((a, b))  # no downset below the edge: the hull's value at lo
                proven = True
                break
            known["points"].add(point)
        mus, values = np.array(known["lines"] or [(0.0, 0.0)]).T
        found = float((values + mus * lo).max())
        best = max(found - 1e-12 * abs(found), 0.0)  # float rounding of the last two operations
        if proven:
            self._cache[j, lo] = best
        return best

    def __call__(self, windows: list[tuple[int, int]]) -> float:
        """A lower bound on :class:`CrossingOracle`'s ``h(windows)`` (``inf`` when no downset fits)."""
        windows = [(max(int(lo), 0), min(int(hi), int(t))) for (lo, hi), t in zip(windows, self.totals, strict=True)]
        if any(lo > hi for lo, hi in windows):
            return math.inf
        return max(self.least_crossing_above(j, lo) for j, (lo, _) in enumerate(windows))


class TwoLevelOracle:
    """``h(windows)`` bounded by the hull (:class:`HullCrossing`, milliseconds) and, where it pays, by CP-SAT.

    A CP-SAT query (:class:`CrossingOracle`, built at its first use) runs for at most ``share`` of the time left
    (``QUERY_SHARE`` by default); the first one that ends without a proof before the deadline (its model is too
    large for the time) switches CP-SAT off for the rest of the search, so at scale the search runs on the hull
    alone. ``share=1``: every query may take all the time left (the latency bisection: an unproven query still
    gives a bound, and the s19 runs with all the time per query bounded the bundled models better).
    """

    def __init__(self, graph: Graph, weights: np.ndarray, exact: bool = True, share: float = QUERY_SHARE,
                 deadline: Deadline | None = None):
        self.graph, self.weights = graph, weights
        self.hull = HullCrossing(graph, weights, deadline)
        self.exact, self.share = exact, float(share)
        self._cpsat: CrossingOracle | None = None

    @property
    def calls(self) -> int:
        return 0 if self._cpsat is None else self._cpsat.calls

    def cheap(self, windows: list[tuple[int, int]]) -> float:
        return self.hull(windows)

    def __call__(self, windows: list[tuple[int, int]], deadline: Deadline) -> float:
        """The best of the hull bound and (while CP-SAT is on and time is left) CP-SAT's bound."""
        cheap = self.hull(windows)
        if not self.exact or cheap == math.inf or deadline.left() <= 0.01:
            return cheap
        if self._cpsat is None:
            try:
                self._cpsat = CrossingOracle(self.graph, self.weights, stop=deadline.stop)
            except Stopped:
                self.exact = False
                return cheap
        value, proved = self._cpsat.query(windows, deadline, self.share * deadline.left())
        if not proved and deadline.left() > 0.01:
            self.exact = False  # a query ran out of its own time: CP-SAT does not pay on this graph
        return max(cheap, value)


def _paper_crossing_bound(graph: Graph, hw: Hardware, lam: float, upper: float, deadline: Deadline,
                          exact: bool = True) -> dict:
    """Best-first partition of ``[M_lb, upper]`` (module docstring); returns ``{"bound", "points", "calls"}``.

    A new point gets the hull bound; when its segment is the least one, CP-SAT refines the point (while it pays,
    :class:`TwoLevelOracle`) before the segment is split.
    """
    k, bp = hw.stages, float(hw.param_bytes)
    weight_total = float(graph.params.sum())
    scale = lam * hw.act_bytes
    m_lb = memory_lower_bound(graph, hw)
    oracle = TwoLevelOracle(graph, graph.params[None, :], exact, deadline=deadline)

    def comm(memory: float, refine: bool) -> float:
        """``lam b_a F(memory)``: a lower bound on ``lam * comm`` of any schedule with ``max mem <= memory``."""
        total = 0.0
        for j in range(1, k):
            window = [_window(weight_total - (k - j) * memory / bp, j * memory / bp)]
            total += oracle(window, deadline) if refine else oracle.cheap(window)
            if total == math.inf:
                break
        return scale * total

    points = {m_lb: comm(m_lb, False), upper: comm(upper, False)}  # memory -> bound on lam * comm at that memory
    refined: set[float] = set()

    def segments() -> list[tuple[float, float, float]]:
        ms = sorted(points)
        return [(a + points[b], a, b) for a, b in zip(ms, ms[1:], strict=False)]

    while deadline.left() > 0:
        value, a, b = min(segments())
        if value >= upper:
            break
        if oracle.exact and b not in refined:
            points[b] = max(points[b], comm(b, True))
            refined.add(b)
            continue
        # on the hull alone, the least value of its relaxation lies in [value, ceiling]
        ceiling = math.inf if oracle.exact else min(m + f for m, f in points.items())
        if b - a <= RESOLUTION * upper or (ceiling - value <= SETTLED * upper and ceiling < upper * (1 - SETTLED)):
            break
        points[(a + b) / 2] = comm((a + b) / 2, False)
    bound = min((s[0] for s in segments()), default=upper)
    return {"bound": float(min(bound, upper)), "points": len(points), "calls": oracle.calls, "cuts": oracle.hull.cuts,
            "oracle": oracle._cpsat}


#: Weight buckets of the chain relaxation (:func:`_paper_chain_bound`) per stage boundary.
CHAIN_BUCKETS_PER_BOUNDARY = 8
#: ``paper``: a chain relaxation that settles before the deadline runs again with this many times more buckets per
#: boundary, up to :data:`CHAIN_REFINE_MAX_PER_BOUNDARY` (validation, data/models_val nas_generated/nas1_b, K = 8,
#: 8 s: 24 buckets per boundary instead of 8 took the certified gap from 21.9 to 17.5 %). The cap keeps a pass's
#: search over bucket sequences short (:func:`chain_minimum` is quadratic in the buckets: 64 calls took 0.06 s with
#: 168 buckets, 0.85 s with 504), so that the deadline is met. A cap of 72 (session 35, HC; a pass past 24 may halve
#: up to twice its first count) lifts the bound alone on no-spill
#: NAS-cell validation graphs (5 s of CPU: nas0_b K = 4 2.04 -> 0.32 % below its proven optimum, ha_nas2_2503 K = 4
#: 1.15 -> 0.21 %; 20 s: incres_2707 K = 8 1.82 -> 1.60 %), but inside ``solver=auto`` (10 s, load 7) the longer bound
#: thread took the CPU the learned member needed (ha_nas2_2806 K = 8: its 4,058,408 dropped, 4,522,784 returned), so
#: the default stays 24 (experiments/results/auto_bounds_val_s35.md). ``solver=auto`` passes 72 under its rule
#: (K >= 6, no spill, once its fast members are done: ``refine_when``; session 36, auto_bounds_val_s36.md).
CHAIN_REFINE_FACTOR = 3
CHAIN_REFINE_MAX_PER_BOUNDARY = 24
#: ``paper``: a finer chain pass starts each bucket from the coarser pass's values (:func:`inherit_buckets`) instead
#: of 0. Validation (data/models_val/nas_generated, the 10 paper cases of K = 4, 8 that auto left above 1 %, the
#: bound alone for 8 s, upper = auto's objective, load 5-8): equal or better on every case and settled sooner
#: (val_inception_a K = 8 gap 5.79 -> 1.89 % in 5.5 s instead of 8; val_nas0_a K = 8 the same 5.39 % in 3.2 s
#: instead of 7.9): the 24-bucket pass that the deadline stopped was lost before.
CHAIN_INHERIT = True
#: The chains' later passes cut the weight axis for ``max(K - 1, CHAIN_MIN_BOUNDARIES)`` boundaries (their first
#: pass, and every pass until session 33, for ``K - 1``): a bucket's least crossing stands for all of it, so at small K
#: the wide buckets let a cheap cut anywhere in them stand for the whole bucket and the chain settled below the optimum
#: (nas0_a K = 3 latency: 3.6 % below the proven optimum with 16 buckets, the optimum itself with 56). The coarse pass
#: stays first because it settles soonest: with 1 s of CPU the fine buckets from the start were worse (nas0_a K = 3
#: 8.3 -> 16.6 %). Validation: experiments/results/auto_bounds_val_s33.md (session 33, HC).
CHAIN_MIN_BOUNDARIES = 7
#: Buckets at most (the buckets of the deciding sequence are halved once all of them are queried); the opt-in finer
#: passes (``CHAIN_REFINE_MAX_PER_BOUNDARY`` above 24, ``LATENCY_REFINE_MAX_BOUNDARIES``) may halve up to twice their
#: first count instead.
CHAIN_MAX_BUCKETS = 400
#: ``latency``: once the whole search (chains, then the independent windows) ends with time left, the MACs chain runs
#: again from its bound with ``LATENCY_REFINE_FACTOR`` times ``max(K - 1, CHAIN_MIN_BOUNDARIES)`` boundaries' buckets,
#: then that times the factor, up to ``LATENCY_REFINE_MAX_BOUNDARIES`` boundaries (0, the default: no such pass, as in
#: sessions 33-34). The bisection takes a
#: T as possible after one halving of its witness's buckets, so a settled chain stays at its bucket width: session 35
#: (HC), no-spill NAS-cell validation graphs, K = 8 latency, the chain alone with 30 s of CPU: nas0_a 1.87 % below its
#: proven optimum with 7 boundaries' buckets, 0.58 % with 28, 0.23 % with 56; nas2_a 2.19 -> 0.009 % with 28. Off by
#: default: inside ``solver=auto`` (10 s, load 7) the bound thread that no longer ends early took the CPU CP-SAT needed
#: to prove optima it proved before (nas0_b, nas2_a, ha_nas1_2505 K = 4; experiments/results/auto_bounds_val_s35.md).
#: ``solver=auto`` passes 63 under the rule named at :data:`CHAIN_REFINE_MAX_PER_BOUNDARY`.
LATENCY_REFINE_FACTOR = 3
LATENCY_REFINE_MAX_BOUNDARIES = 0
#: Peak-memory grid points of the chain relaxation's search over ``[M_lb, upper]`` (then as many inside its least
#: segment).
CHAIN_GRID = 32


def chain_minimum(h: np.ndarray, lo: np.ndarray, hi: np.ndarray, boundaries: int, cap: float, total: float
                  ) -> tuple[float, list[int]]:
    """Least ``sum_k h[g_k]`` over bucket sequences ``g_1 <= ... <= g_B`` a schedule with stages of weight <= cap
    can take (:func:`_paper_chain_bound`), and the sequence (empty when none exists: the value is ``inf``).

    Args:
        h: f64[G] a lower bound on the least crossing of a downset with weight in bucket g.
        lo, hi: f64[G] the weights bucket g holds are ``[lo[g], hi[g]]`` (increasing, disjoint).
        boundaries: B = K - 1.
        cap: the most weight a stage may hold.
        total: the weight of every node.
    """
    g_count = len(h)
    order = np.arange(g_count)
    step = (lo[None, :] - hi[:, None] <= cap) & (order[:, None] <= order[None, :])  # [g, g'] stage between fits
    f = np.where(lo <= cap, h, np.inf)  # the first stage holds w(D_1)
    back = []
    for _ in range(boundaries - 1):
        cand = np.where(step, f[:, None], np.inf)
        arg = cand.argmin(axis=0)
        f = h + cand[arg, order]
        back.append(arg)
    f = np.where(hi >= total - cap, f, np.inf)  # the last stage holds the rest
    g = int(f.argmin())
    if not np.isfinite(f[g]):
        return math.inf, []
    path = [g]
    for arg in reversed(back):
        path.append(int(arg[path[-1]]))
    return float(f[g]), path[::-1]


def seed_buckets(hull: HullCrossing, lo: np.ndarray) -> np.ndarray:
    """f64[G] the hull bound (:class:`HullCrossing`, parametric min cuts, no CP-SAT) on the least crossing of a
    downset of weight at least ``lo[g]``: a valid starting value of a chain bucket ``[lo[g], hi[g]]`` before CP-SAT
    queries it, so the chain's bound rises before every bucket of a sequence is queried (0 where the deadline
    passed first)."""
    values = np.zeros(len(lo))
    for g, low in enumerate(lo):
        if hull.deadline is not None and hull.deadline.left() <= 0:
            break
        value = hull.least_crossing_above(0, int(low))
        values[g] = value if math.isfinite(value) else 0.0
    return values


def inherit_buckets(lo: np.ndarray, hi: np.ndarray, prior: tuple | None) -> np.ndarray:
    """f64[G] a lower bound on the least crossing of a downset whose weight lies in bucket ``[lo[g], hi[g]]``, from
    an earlier pass's buckets ``prior = (lo', hi', h')`` (sorted, disjoint, covering every weight; None: zeros): the
    least ``h'`` over the earlier buckets the new one meets (a downset of the new bucket lies in one of them)."""
    values = np.zeros(len(lo))
    if prior is None:
        return values
    p_lo, p_hi, p_h = (np.asarray(a, np.float64) for a in prior)
    first = np.searchsorted(p_hi, lo, side="left")  # the first earlier bucket ending at or after lo
    last = np.searchsorted(p_lo, hi, side="right") - 1  # the last one starting at or before hi
    for g in range(len(lo)):
        if first[g] <= last[g]:
            values[g] = max(float(p_h[first[g]:last[g] + 1].min()), 0.0)
    return values


def _paper_chain_bound(graph: Graph, hw: Hardware, lam: float, upper: float, deadline: Deadline,
                       oracle: CrossingOracle | None = None, seed: bool = True,
                       per_boundary: int = CHAIN_BUCKETS_PER_BOUNDARY, prior: tuple | None = None,
                       boundaries: int | None = None, max_buckets: int | None = None) -> dict:
    """The *chain* relaxation of ``paper``: keep the stage capacities between adjacent boundaries, drop the rest.

    Split the weight axis ``[0, sum params]`` into G buckets and let ``h_g`` bound the least crossing of a downset
    whose weight lies in bucket g (one CP-SAT query each, :class:`CrossingOracle`; 0 until queried). A schedule
    whose stages hold at most ``M`` bytes each has boundaries ``D_1 ⊆ ... ⊆ D_{K-1}`` whose weights rise by at most
    ``M / b_p`` per stage (and the first and last stages hold at most that too); so their buckets form a sequence
    :func:`chain_minimum` ranges over, and ``comm >= b_a * chain_minimum(M)``. Unlike the independent windows of
    :func:`_paper_crossing_bound`, two boundaries cannot both take the same cheap cut region while the stage
    between them (or the stages elsewhere) would overflow. For ``M*`` in ``[a, b]`` the objective is ``>= a + lam
    b_a chain_minimum(b)``; the bound is the least over a grid of ``[M_lb, upper]``. Refinement: query (with CP-SAT,
    a quarter of the time left each) the buckets of the sequence that decides the bound; once all are queried, halve
    them (a half starts from its parent's value) and go on, until a halving raised the bound by less than
    :data:`SETTLED` of ``upper``, :data:`CHAIN_MAX_BUCKETS` buckets or the deadline. ``seed``: every bucket starts
    from its hull bound (:func:`seed_buckets`, milliseconds) instead of 0. ``per_boundary``: the first buckets, G =
    ``per_boundary * boundaries`` (None: ``K - 1``). ``prior``: an earlier pass's ``(lo, hi, h)`` (its result's
    ``"buckets_h"``): every bucket also starts from what that pass proved (:func:`inherit_buckets`), so a finer
    pass that the deadline stops before it has queried a whole sequence still starts from the coarser pass's
    knowledge instead of 0. ``max_buckets``: buckets are halved while fewer (None: :data:`CHAIN_MAX_BUCKETS`).
    """
    k, bp = hw.stages, float(hw.param_bytes)
    params = graph.params.astype(np.int64)
    total = int(params.sum())
    scale = lam * hw.act_bytes
    m_lb = memory_lower_bound(graph, hw)
    g_count = int(per_boundary) * int(boundaries or k - 1)
    edges = np.unique(np.linspace(0, total + 1, g_count + 1).astype(np.int64))
    lo, hi = edges[:-1].astype(np.float64), (edges[1:] - 1).astype(np.float64)
    hull = HullCrossing(graph, params[None, :], deadline)
    h = seed_buckets(hull, lo) if seed else np.zeros(len(lo))
    h = np.maximum(h, inherit_buckets(lo, hi, prior))
    queried = np.zeros(len(lo), bool)
    queried[lo <= 0] = True  # the empty downset: crossing 0
    halved_at = -math.inf  # the bound when buckets were last halved
    bound, calls = -math.inf, 0

    def least_segment() -> tuple[float, list[int]]:
        """min over segments [a, b] of a grid of [M_lb, upper] of ``a + scale chain_minimum(b)``, and the deciding
        sequence: a coarse grid, then a fine one inside its least segment (the segments still cover the range)."""
        def segments(grid):
            values = [chain_minimum(h, lo, hi, k - 1, m / bp * (1 + WINDOW_RTOL), total) for m in grid[1:]]
            return [(grid[i] + scale * v, path) for i, (v, path) in enumerate(values)]

        coarse = np.linspace(m_lb, upper, CHAIN_GRID)
        seg = segments(coarse)
        i = min(range(len(seg)), key=lambda j: seg[j][0])
        fine = segments(np.linspace(coarse[i], coarse[i + 1], CHAIN_GRID))
        return min(seg[:i] + seg[i + 1:] + fine, key=lambda x: x[0])

    while True:
        value, path = least_segment()
        bound = max(bound, min(float(value), upper))
        path = sorted(set(path))
        todo = [g for g in path if not queried[g]]
        if not todo and len(lo) < (max_buckets or CHAIN_MAX_BUCKETS):  # the path's buckets are known: halve them
            wide = np.array([g for g in path if hi[g] > lo[g]], np.int64)
            if wide.size == 0 or bound - halved_at <= SETTLED * upper:
                break  # nothing left to halve, or the last halving did not pay
            halved_at = bound
            mids = np.floor((lo[wide] + hi[wide]) / 2)
            lo = np.concatenate([lo, mids + 1])
            hi = np.concatenate([hi, hi[wide]])
            hi[wide] = mids
            upper_halves = np.maximum(h[wide], seed_buckets(hull, mids + 1)) if seed else h[wide]
            h = np.concatenate([h, upper_halves])  # a half's least crossing is at least its parent's
            queried = np.concatenate([queried, np.zeros(len(wide), bool)])
            queried[wide] = False
            order = np.argsort(lo, kind="stable")
            lo, hi, h, queried = lo[order], hi[order], h[order], queried[order]
            continue
        if not todo or deadline.left() <= 0.05 or bound >= upper:
            break
        if oracle is None:
            try:
                oracle = CrossingOracle(graph, params[None, :], stop=deadline.stop)
            except Stopped:
                break
        for g in todo:
            limit = min(QUERY_SHARE * deadline.left(), CHAIN_QUERY_MAX_S)
            value, _ = oracle.query([(int(lo[g]), int(hi[g]))], deadline, limit)
            if deadline.left() <= 0.05 and value == 0.0:
                break
            h[g], queried[g] = max(h[g], value), True
            calls += 1
    return {"bound": float(bound), "calls": calls, "buckets": len(lo), "oracle": oracle, "buckets_h": (lo, hi, h)}


#: ``latency``, graphs where some stage can spill: the MACs chain also tracks each boundary's combined weight
#: (:func:`_latency_chain_bound` ``two_weight``), bounded per MACs bucket by :class:`DownsetEnvelope`.
TWO_WEIGHT_CHAIN = True
#: ``two_weight``: CP-SAT bounds the parameters of a downset of at most a bucket's MACs, for the buckets of a witness
#: sequence (False: :class:`DownsetEnvelope`'s lines alone).
TWO_WEIGHT_QUERIES = True
#: Parametric min cuts per side of a :class:`DownsetEnvelope` at most (each side's breakpoint search).
ENVELOPE_MAX_CUTS = 40


def proven_maximum(optimal: bool, value: float | None, bound: float) -> float:
    """An upper bound on a CP-SAT maximum from its response: the optimum, else its objective bound only above the
    best value found (``value``; None: none). CP-SAT reports a bound of 0 when it has none yet (stopped in presolve:
    measured on NASNetLarge with 0.02-0.1 s), which is no bound on a maximum; ``inf``: nothing proven."""
    if optimal:
        return float(value)
    if value is not None and bound > value:
        return float(bound)
    return math.inf


class DownsetEnvelope:
    """Lines bounding one weight of a downset by another: ``b(D) >= alpha + mu a(D)`` and ``b(D) <= beta + mu a(D)``
    (``mu >= 0``) for every downset D, so ``b(D) >= lower(X)`` when ``a(D) >= X`` and ``b(D) <= upper(X)`` when
    ``a(D) <= X``.

    Each line is a minimum-cost closure (one max flow): ``alpha_mu = min_D b(D) - mu a(D)`` (``x_v``: v in D, arcs
    ``x_v -> x_u`` per edge (u, v)) and ``beta_mu = -min_D (mu a(D) - b(D))``; costs are scaled to integers and
    rounded down, so every value is a lower bound on its minimum and every line valid. The ``mu`` are the breakpoint
    search's (Eisner-Severance) between the empty downset and every node, for the lower and the upper convex hull of
    the points ``(a(D), b(D))``, at most :data:`ENVELOPE_MAX_CUTS` cuts per hull or until the deadline (the lines
    found so far stay valid; ``mu = 0`` gives ``0 <= b(D) <= b(V)`` always).
    """

    def __init__(self, graph: Graph, a: np.ndarray, b: np.ndarray, deadline: Deadline | None = None,
                 max_cuts: int = ENVELOPE_MAX_CUTS):
        from ortools.graph.python import max_flow  # imported at the first use: the module loads without it

        n = graph.num_nodes
        self.n, self.deadline = n, deadline
        self.a, self.b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        e = np.asarray(graph.edges, np.int64).reshape(-1, 2)
        x = 2 + np.arange(n)  # node 0: source, 1: sink, 2 + v: v in D
        tail = np.concatenate([2 + e[:, 1], np.zeros(n, np.int64), x])
        head = np.concatenate([2 + e[:, 0], x, np.ones(n, np.int64)])
        self._flow = max_flow.SimpleMaxFlow()
        self._arcs = self._flow.add_arcs_with_capacity(tail, head, np.zeros(len(tail), np.int64))
        self._n_edges, self._edges = len(e), e
        self.cuts, self.queries, self._cp = 0, 0, None
        total_a, total_b = float(self.a.sum()), float(self.b.sum())
        # closures: a downset D holds v only with v's ancestors (a(D) >= a(ancestors of v and v)), and leaves v out
        # only with its descendants; so a(D) <= X keeps D inside {v : a_anc(v) <= X} and a(D) >= X keeps
        # {v : a_desc(v) <= a(V) - X} outside it
        anc = ancestor_matrix(graph)
        a_anc, a_desc = anc @ self.a, anc.T @ self.a
        order = np.argsort(a_anc, kind="stable")
        self._anc_keys, self._anc_b = a_anc[order], np.concatenate([[0.0], np.cumsum(self.b[order])])
        order = np.argsort(a_desc, kind="stable")
        self._desc_keys, self._desc_b = a_desc[order], np.concatenate([[0.0], np.cumsum(self.b[order])])
        self._total_a, self._total_b = total_a, total_b
        self.lower_lines = [(0.0, 0.0)]  # (mu, alpha)
        self.upper_lines = [(0.0, total_b)]  # (mu, beta)
        for sign in (1.0, -1.0):  # the lower hull (min b - mu a), then the upper one (min mu a - b)
            todo = [((0.0, 0.0), (total_a, total_b))]
            cuts = 0
            while todo and cuts < max_cuts and (deadline is None or deadline.left() > 0):
                p, q = todo.pop()
                if q[0] <= p[0]:
                    continue
                mu = (q[1] - p[1]) / (q[0] - p[0])
                if mu <= 0:
                    continue  # mu = 0 is the trivial line
                value, member = self._least(sign * self.b - sign * mu * self.a)
                cuts += 1
                if sign > 0:
                    self.lower_lines.append((mu, value))
                else:
                    self.upper_lines.append((mu, -value))
                point = (float(self.a[member].sum()), float(self.b[member].sum()))
                line = sign * (p[1] - mu * p[0])
                if sign * (point[1] - mu * point[0]) < line - 1e-9 * max(1.0, abs(line), total_b):
                    todo += [(p, point), (point, q)]  # the point lies beyond the segment: both halves again

    def _least(self, cost: np.ndarray) -> tuple[float, np.ndarray]:
        """(a lower bound on ``min_D sum_{v in D} cost_v`` over downsets D, bool[N] a downset reaching it)."""
        total = float(np.abs(cost).sum())
        if not total > 1e-200:
            return 0.0, np.zeros(self.n, bool)  # every cost is 0
        scale = 2.0 ** math.floor(math.log2(2.0**50 / total))
        scaled = np.floor(scale * cost).astype(np.int64)
        least, side = closure_cut(self._flow, self._arcs, self._n_edges, scaled, None, "the downset envelope")
        self.cuts += 1
        value = least / scale
        member = np.zeros(self.n, bool)
        member[side[(side >= 2) & (side < 2 + self.n)] - 2] = True
        return value - 1e-9 * total, member  # float rounding of the sums

    def most(self, x: int, deadline: Deadline, limit_s: float) -> float:
        """An upper bound on ``b(D)`` over downsets with ``a(D) <= x`` from CP-SAT (its proven bound within
        ``min(limit_s, time left)``; ``a``, ``b`` integers); the model is built at the first call."""
        if not self.a.any() or not self.b.any():
            return self._total_b  # every downset fits, or none holds any b
        if self._cp is None:
            from ortools.sat.python import cp_model

            model = cp_model.CpModel()
            xs = [model.new_bool_var(f"x{v}") for v in range(self.n)]
            for u, v in self._edges.tolist():
                model.add_implication(xs[v], xs[u])
            a, b = self.a.astype(np.int64).tolist(), self.b.astype(np.int64).tolist()
            self._cap = model.add_linear_constraint(sum(c * xs[v] for v, c in enumerate(a) if c), 0, sum(a))
            model.maximize(sum(c * xs[v] for v, c in enumerate(b) if c))
            self._cp = (cp_model, model)
        cp_model, model = self._cp
        left = min(deadline.left(), float(limit_s))
        if left <= 0.01:
            return math.inf
        self._cap.proto.linear.domain[1] = int(x)
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = left
        solver.parameters.num_workers = 1
        solver.parameters.presolve_inclusion_work_limit = 0  # OR-tools 9.15 wrong-optimum bug (or-tools #5293)
        with watching(deadline.stop, solver):
            status = solver.solve(model)
        self.queries += 1
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
            raise RuntimeError(f"CP-SAT returned {solver.status_name(status)} on the envelope problem (a model bug)")
        found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        return proven_maximum(status == cp_model.OPTIMAL, solver.objective_value if found else None,
                              solver.best_objective_bound)

    def lower(self, x: np.ndarray) -> np.ndarray:
        """f64[...] a lower bound on ``b(D)`` of every downset with ``a(D) >= x`` (elementwise)."""
        mus, alphas = np.array(self.lower_lines).T
        x = np.asarray(x, np.float64)
        outside = self._desc_b[np.searchsorted(self._desc_keys, self._total_a - x, side="right")]
        closure = (self._total_b - outside) * (1 - 1e-12)
        return np.maximum(np.maximum((alphas + mus * x[..., None]).max(axis=-1), closure), 0.0)

    def upper(self, x: np.ndarray) -> np.ndarray:
        """f64[...] an upper bound on ``b(D)`` of every downset with ``a(D) <= x`` (elementwise)."""
        mus, betas = np.array(self.upper_lines).T
        x = np.asarray(np.maximum(x, 0.0), np.float64)
        closure = self._anc_b[np.searchsorted(self._anc_keys, x, side="right")] * (1 + 1e-12)
        return np.minimum((betas + mus * x[..., None]).min(axis=-1), closure)


def _latency_chain_bound(graph: Graph, hw: Hardware, lower: float, upper: float, deadline: Deadline,
                         weight: str = "macs", seed: bool = True, boundaries: int | None = None,
                         two_weight: bool = False, max_buckets: int | None = None) -> dict:
    """The chain relaxation of ``latency`` (as :func:`_paper_chain_bound`'s), on the MACs (``weight="macs"``:
    ``macs_i / R <= c - b_a cross(D_i) / L``, the same as below with ``w_v = macs_v / R`` and no ``C / H``) or on
    the combined weight ``w_v = macs_v / R + b_p params_v / H`` (``"combined"``): ``max_k T_k <= T``
    (``c = T - tau``) needs boundaries whose weights
    rise by at most ``c + C / H - b_a cross(D_i) / L`` over stage i (``spill_i >= b_p P_i - C``) with ``b_a
    cross(D_i) / L <= c``, the first stage holding at most ``c + C / H`` and the last the rest. Buckets are windows
    of ``down(D) = sum floor(w_v / unit)`` (so ``w(D)`` lies in ``[lo unit, (hi + N) unit]``), ``h_g`` bounds the
    crossing of a downset in bucket g (CP-SAT, 0 until queried). The test keeps each boundary's weight itself, not
    only its bucket: boundary i in bucket g can weigh at most ``x_i(g) = min(hi_g, max_{g' <= g} x_{i-1}(g') +
    room(g'))`` (heavier is never worse), so the stage totals telescope exactly. A T no bucket sequence meets is
    impossible, and so
    is every smaller one; a bisection between ``lower`` and ``upper`` keeps the largest impossible T. A T some
    sequence meets has that sequence's unqueried buckets queried (then halved, as in the paper relaxation) before
    the bisection takes it as possible. ``seed``: every bucket starts from its hull bound (:func:`seed_buckets`).
    ``boundaries``: the first buckets are ``CHAIN_BUCKETS_PER_BOUNDARY * boundaries`` (None: ``K - 1``).
    ``max_buckets``: buckets are halved while fewer (None: :data:`CHAIN_MAX_BUCKETS`).

    ``two_weight`` (``weight="macs"`` only): each boundary also keeps the most combined weight it can have,
    ``y_i(g) = min(U(x_i(g)), max_{g'} y_{i-1}(g') + room(g') + C / H)`` over the predecessors g' that reach
    bucket g in both weights, where ``U(x) = x + b_p P_up(x R) / H`` bounds the combined weight of a downset of at
    most ``x R`` MACs and a downset of bucket g weighs at least ``lo_g + b_p P_lo(lo_g R) / H`` (``P_up``,
    ``P_lo``: :class:`DownsetEnvelope`'s lines of the parameters against the MACs); the last stage must hold the
    rest of both. A stage then cannot use the ``C / H`` of spill its own parameters cannot reach (the combined
    chain alone lets every stage hold ``c + C / H``: NASNetLarge's early stages hold almost no parameters).
    """
    k = hw.stages
    if weight == "macs":  # macs_i / R <= c - b_a cross(D_i) / L: exact integers, no slack
        down, unit, n, slack = graph.macs.astype(np.int64), 1.0 / hw.macs_per_s, 0, 0.0
        w_total = float(down.sum()) * unit
    else:
        mem = hw.param_bytes * graph.params.astype(np.float64)
        combined = graph.macs.astype(np.float64) / hw.macs_per_s + mem / hw.host_bw
        unit = max(float(combined.sum()), 1e-300) / COMBINED_UNITS
        down, n = np.floor(combined / unit).astype(np.int64), graph.num_nodes
        w_total, slack = float(combined.sum()), hw.sram_bytes / hw.host_bw
    per_element = hw.act_bytes / hw.link_bw
    g_count = CHAIN_BUCKETS_PER_BOUNDARY * int(boundaries or k - 1)
    edges = np.unique(np.linspace(0, int(down.sum()) + 1, g_count + 1).astype(np.int64))
    state = {"lo": edges[:-1].astype(np.float64), "hi": (edges[1:] - 1).astype(np.float64)}
    hull = HullCrossing(graph, down[None, :], deadline)
    state["h"] = seed_buckets(hull, state["lo"]) if seed else np.zeros(len(state["lo"]))
    state["queried"] = state["lo"] <= 0
    oracle, calls = None, 0
    envelope = None
    if two_weight and weight == "macs":
        envelope = DownsetEnvelope(graph, graph.macs.astype(np.float64), graph.params.astype(np.float64), deadline)
        per_param = hw.param_bytes / hw.host_bw
        c_total = w_total + per_param * float(graph.params.sum())
        c_slack = hw.sram_bytes / hw.host_bw
        # cap[g]: the most parameters of a downset of at most hi[g] MACs (CP-SAT refines it on a witness's buckets)
        state["cap"] = envelope.upper(state["hi"])
        state["capped"] = np.full(len(state["lo"]), not TWO_WEIGHT_QUERIES)

    def combined_up(x: np.ndarray) -> np.ndarray:
        """The most combined weight (s) of a downset of at most ``x[g]`` seconds of MACs in bucket g (-inf stays
        -inf)."""
        finite = np.isfinite(x)
        macs = np.where(finite, x, 0.0) * hw.macs_per_s * (1 + WINDOW_RTOL) + 1.0
        params = np.minimum(envelope.upper(macs), state["cap"])
        return np.where(finite, x + per_param * params, -np.inf)

    def witness2(t: float) -> list[int] | None:
        """:func:`witness` with each boundary's combined weight kept too (``two_weight``)."""
        lo, hi, h = state["lo"] * unit, state["hi"] * unit, state["h"]
        least = lo + per_param * envelope.lower(state["lo"])  # the least combined weight of a downset in bucket g
        c = t - hw.stage_overhead_s
        room = c - per_element * h * (1 + WINDOW_RTOL)
        room_c = room + c_slack
        ok = per_element * h <= c * (1 + WINDOW_RTOL)
        order = np.arange(len(lo))
        later = order[:, None] <= order[None, :]
        x = np.where(ok & (lo <= c * (1 + WINDOW_RTOL)) & (least <= (c + c_slack) * (1 + WINDOW_RTOL)),
                     np.minimum(hi, c), -np.inf)
        y = np.minimum(combined_up(x), c + c_slack)
        x = np.where(y >= least * (1 - WINDOW_RTOL), x, -np.inf)
        back = []
        for _ in range(k - 2):
            from_ = later & np.isfinite(x)[:, None]
            reach = np.where(from_, (x + room)[:, None], -np.inf)  # [g, g']
            reach_c = np.where(from_, (y + room_c)[:, None], -np.inf)
            fits = (reach >= lo * (1 - WINDOW_RTOL)) & (reach_c >= least * (1 - WINDOW_RTOL))
            reach, reach_c = np.where(fits, reach, -np.inf), np.where(fits, reach_c, -np.inf)
            arg, arg_c = reach.argmax(axis=0), reach_c.argmax(axis=0)
            best, best_c = reach[arg, order], reach_c[arg_c, order]
            x = np.where(ok & np.isfinite(best), np.minimum(hi, best), -np.inf)
            y = np.where(np.isfinite(x), np.minimum(combined_up(x), best_c), -np.inf)
            x = np.where(y >= least * (1 - WINDOW_RTOL), x, -np.inf)
            back.append((arg, arg_c))
        last = (np.isfinite(x) & (w_total - x <= room * (1 + WINDOW_RTOL))
                & (c_total - y <= room_c * (1 + WINDOW_RTOL)))
        if not last.any():
            return None
        paths = []
        for pick in (0, 1):  # the buckets of the MACs' and of the combined weight's best predecessors
            g = int(last.argmax())
            paths.append({g})
            for step in reversed(back):
                g = int(step[pick][g])
                paths[-1].add(g)
        state["second"] = sorted(paths[1])
        return sorted(paths[0])

    def witness(t: float) -> list[int] | None:
        """A bucket sequence meeting ``t`` (None: none, ``t`` is impossible under the relaxation)."""
        lo, hi, h = state["lo"] * unit, (state["hi"] + n) * unit, state["h"]
        c = t - hw.stage_overhead_s
        room = c + slack - per_element * h * (1 + WINDOW_RTOL)  # what stage i may hold after boundary in bucket g
        ok = per_element * h <= c * (1 + WINDOW_RTOL)
        order = np.arange(len(lo))
        later = order[:, None] <= order[None, :]
        # x: the heaviest weight boundary i can have in bucket g (heavier leaves less for the stages after it)
        x = np.where(ok & (lo <= (c + slack) * (1 + WINDOW_RTOL)), np.minimum(hi, c + slack), -np.inf)
        back = []
        for _ in range(k - 2):
            reach = np.where(later & np.isfinite(x)[:, None], (x + room)[:, None], -np.inf)  # [g, g']
            arg = reach.argmax(axis=0)
            best = reach[arg, order]
            x = np.where(ok & (best >= lo * (1 - WINDOW_RTOL)), np.minimum(hi, best), -np.inf)
            back.append(arg)
        last = np.isfinite(x) & (w_total - x <= room * (1 + WINDOW_RTOL))
        if not last.any():
            return None
        path = [int(last.argmax())]
        for arg in reversed(back):
            path.append(int(arg[path[-1]]))
        return path[::-1]

    def possible(t: float) -> bool:
        nonlocal oracle, calls
        halved_at = None
        while deadline.left() > 0.05:
            path = witness(t) if envelope is None else witness2(t)
            if path is None:
                return False
            todo, caps = [g for g in sorted(set(path)) if not state["queried"][g]], []
            if envelope is not None and not todo:  # the MACs path's crossings first (as without two_weight), then
                # the parameter caps of both paths' buckets, then the combined path's crossings
                path = sorted(set(path) | set(state["second"]))
                caps = [g for g in path if not state["capped"][g]]
                todo = [] if caps else [g for g in path if not state["queried"][g]]
            if not todo and not caps:
                wide = np.array([g for g in sorted(set(path)) if state["hi"][g] > state["lo"][g]], np.int64)
                if wide.size == 0 or halved_at is not None or len(state["lo"]) >= (max_buckets or CHAIN_MAX_BUCKETS):
                    return True
                halved_at = t  # halve once per test
                lo, hi = state["lo"], state["hi"]
                mids = np.floor((lo[wide] + hi[wide]) / 2)
                lo, hi = np.concatenate([lo, mids + 1]), np.concatenate([hi, hi[wide]])
                hi[wide] = mids
                upper_halves = state["h"][wide]
                if seed:
                    upper_halves = np.maximum(upper_halves, seed_buckets(hull, mids + 1))
                h = np.concatenate([state["h"], upper_halves])
                queried = np.concatenate([state["queried"], np.zeros(len(wide), bool)])
                queried[wide] = False
                order = np.argsort(lo, kind="stable")
                if envelope is not None:  # the upper half keeps its parent's hi and cap; the lower one starts anew
                    cap = np.concatenate([state["cap"], state["cap"][wide]])
                    cap[wide] = np.minimum(cap[wide], envelope.upper(mids))
                    capped = np.concatenate([state["capped"], state["capped"][wide]])
                    capped[wide] = not TWO_WEIGHT_QUERIES
                    state.update(cap=cap[order], capped=capped[order])
                state.update(lo=lo[order], hi=hi[order], h=h[order], queried=queried[order])
                continue
            if oracle is None:
                try:
                    oracle = CrossingOracle(graph, down[None, :], stop=deadline.stop)
                except Stopped:
                    return True
            for g in todo:
                value, _ = oracle.query([(int(state["lo"][g]), int(state["hi"][g]))], deadline,
                                        min(QUERY_SHARE * deadline.left(), CHAIN_QUERY_MAX_S))
                if deadline.left() <= 0.05 and value == 0.0:
                    return True
                state["h"][g], state["queried"][g] = max(state["h"][g], value), True
                calls += 1
            for g in caps:
                most = envelope.most(int(state["hi"][g]), deadline, min(QUERY_SHARE * deadline.left(),
                                                                        CHAIN_QUERY_MAX_S))
                state["cap"][g], state["capped"][g] = min(state["cap"][g], most * (1 + 1e-12)), True
        return True

    known = lo = lower
    hi = upper
    if envelope is not None:  # first on what is known without CP-SAT (numpy only, milliseconds): a floor; the
        # search below still starts from ``lower`` (its tests under the floor need no query; a start at the floor
        # left its tests where each needs many queries: NASNetLarge K = 8 with 5 s of CPU 8.6 -> 14.3 %)
        while deadline.left() > 0.05 and hi - known > RESOLUTION * upper:
            mid = (known + hi) / 2
            if witness2(mid) is None:
                known = mid
            else:
                hi = mid
        hi = upper
    while deadline.left() > 0.05 and hi - lo > RESOLUTION * upper:
        mid = (lo + hi) / 2
        if possible(mid):
            hi = mid
        else:
            lo = mid
    return {"bound": float(min(max(lo, known), upper)), "calls": calls, "buckets": len(state["lo"])}


def _latency_crossing_bound(graph: Graph, hw: Hardware, lower: float, upper: float, deadline: Deadline,
                            exact: bool = True) -> dict:
    """Bisection on the bottleneck T (module docstring); returns ``{"bound", "points", "calls"}``.

    First with the hull bounds alone (milliseconds per test), then again above that bound with CP-SAT, each query
    with all the time left (:class:`TwoLevelOracle` with ``share=1``).
    """
    k = hw.stages
    macs = graph.macs.astype(np.int64)
    mem = hw.param_bytes * graph.params.astype(np.float64)
    combined = graph.macs.astype(np.float64) / hw.macs_per_s + mem / hw.host_bw
    unit = max(float(combined.sum()), 1e-300) / COMBINED_UNITS  # seconds per integer unit
    up = np.ceil(combined / unit).astype(np.int64)  # w_up >= w: its lower window is implied by w's
    down = np.floor(combined / unit).astype(np.int64)  # w_down <= w: its upper window is implied by w's
    oracle = TwoLevelOracle(graph, np.stack([macs, up, down]), exact, share=1.0, deadline=deadline)
    spill = max(float(mem.sum()) - k * hw.sram_bytes, 0.0) / hw.host_bw
    base = float(macs.sum()) / hw.macs_per_s + spill
    slack = hw.sram_bytes / hw.host_bw  # w(stage) <= its time for MACs and spill + C / H
    w_total = float(combined.sum())

    def impossible(t: float, refine: bool) -> bool:
        """True when no schedule has ``max_k T_k <= t`` (the relaxation of the module docstring fails)."""
        c = t - hw.stage_overhead_s
        crossing = [0.0] * k  # lower bounds on in_j / L (s) of any schedule reaching t; in_0 = 0
        for _ in range(MAX_ROUNDS):
            changed = False
            for j in range(1, k):
                caps = [c - x for x in crossing]  # stage i's time left for its MACs and spill
                if min(caps) < 0 or sum(caps) < base:
                    return True
                before, after = sum(caps[:j]), sum(caps[j:])
                windows = [
                    _window(float(macs.sum()) - after * hw.macs_per_s, before * hw.macs_per_s),
                    _window((w_total - after - (k - j) * slack) / unit, math.inf),
                    _window(-math.inf, (before + j * slack) / unit),
                ]
                h = oracle(windows, deadline) if refine else oracle.cheap(windows)
                h = hw.act_bytes * h / hw.link_bw
                if h > crossing[j] * (1 + WINDOW_RTOL):
                    crossing[j], changed = h, True
            if not changed:
                break
        caps = [c - x for x in crossing]
        return min(caps) < 0 or sum(caps) < base

    lo = lower
    for refine in (False, True):
        hi = upper
        while deadline.left() > 0 and hi - lo > RESOLUTION * upper and (oracle.exact or not refine):
            mid = (lo + hi) / 2
            if impossible(mid, refine):
                lo = mid
            else:
                hi = mid
    return {"bound": float(min(lo, upper)), "calls": oracle.calls, "cuts": oracle.hull.cuts}


#: ``latency``: share of the bound's time the MACs chain gets (then the combined-weight chain 0.4 of the rest,
#: then the independent windows): inside ``solver=auto`` (bundled models, K = 8, 10 s, load ~10) the chain with
#: all the time took densenet121's gap from 43 to 0.3 %, with 35 % of it nowhere (its queries must cover a
#: sequence before the bound rises). ``paper`` runs the independent windows first and the chain with the rest.
CHAIN_SHARE = 0.75
#: Whether :func:`crossing_lower_bound` seeds the chains (its ``seed`` when None), per objective. Validation
#: (experiments/auto_bound_variants.py: data/models_val efficientnetb0, convnext_base, efficientnetb3,
#: efficientnetv2s, efficientnetb6, efficientnetv2m; solver=auto, K = 8, 10 s, load 7-9; unseeded ran first, seeded
#: second in the process): paper mean certified gap 9.8 -> 11.6 % seeded (worse on 3 of 6 although it ran second),
#: latency 23.9 -> 22.9 % (better on 3, equal on 3; within the run-order effect seen in WINDOWS_FIRST_SHARE's study,
#: so not shown to help). The seeds are nearly linear in the weight (the hull of the empty and the full downset).
SEED_CHAINS = {"paper": False, "latency": True}
#: ``latency``: share of the bound's time the independent windows (hull, then CP-SAT: session 20's search) get
#: before the chains when > 0 (0: the chains first, after the hull pass of :data:`HULL_FIRST_SHARE`). Validation
#: (experiments/auto_bound_variants.py, data/models_val, K = 4 and 8, 10 s, load ~8) could not separate 0 from 0.5:
#: whichever ran second in the process won (mean certified gap K = 8: 0.5 after 0 13.2 vs 27.6 %, 0 after 0.5
#: 20.7 vs 25.8 %), so the search of the runs reported in session 22 (0) stays.
WINDOWS_FIRST_SHARE = 0.0
#: ``latency``: share of the bound's time the independent windows on the hull alone may take before the chains
#: (they settle in far less on the bundled models; the share only caps them at scale).
HULL_FIRST_SHARE = 0.2
#: Seconds a chain relaxation's CP-SAT query may take at most (besides a quarter of the time left).
CHAIN_QUERY_MAX_S = 1.0


#: Graphs with more nodes get no cone bound (its ancestor matrix is N x N Booleans; on generated layered graphs of
#: 1,000-3,000 nodes, own seed 11, it never lifted the analytic bound and took up to 0.8 s at 3,000 nodes).
CONE_MAX_NODES = 1500


def _least_cone(succs: list, ancestors: np.ndarray, v: int, w: np.ndarray, e: np.ndarray) -> float:
    """A lower bound on ``min_X w(X) + e(entering X)`` over sets X of ``A`` = v's ancestors and v with v in X, closed
    under successors within A; ``e(entering X)``: ``e_u`` once per u in ``A \\ X`` with a consumer in X (one
    max flow; costs rounded down, so the value stays a lower bound). See :func:`cone_latency_bound`."""
    from ortools.graph.python import max_flow  # imported at the first use: the module loads without it

    members = np.flatnonzero(ancestors)
    index = np.full(len(ancestors), -1, np.int64)
    index[members] = np.arange(len(members))
    scale = 2.0 ** math.floor(math.log2(2.0**50 / max(float(w[members].sum() + e[members].sum()), 1e-300)))
    big = 2**60
    tails, heads, caps = [], [], []
    extra = 2 + len(members)  # node 0: source, 1: sink, 2 + i: member i (in X: source side), then one y per producer
    for i, u in enumerate(members.tolist()):
        tails.append(2 + i), heads.append(1), caps.append(int(math.floor(scale * w[u])))  # u in X pays w_u
        inside = [index[c] for c in succs[u] if index[c] >= 0]
        for c in inside:
            tails.append(2 + i), heads.append(2 + c), caps.append(big)  # u in X: its consumers in A too
        if inside and e[u] > 0:  # y_u on the source side when a consumer is in X; then u outside X pays e_u
            for c in inside:
                tails.append(2 + c), heads.append(extra), caps.append(big)
            tails.append(extra), heads.append(2 + i), caps.append(int(math.floor(scale * e[u])))
            extra += 1
    tails.append(0), heads.append(2 + int(index[v])), caps.append(big)  # v in X
    flow = max_flow.SimpleMaxFlow()
    flow.add_arcs_with_capacity(np.array(tails, np.int64), np.array(heads, np.int64), np.array(caps, np.int64))
    if flow.solve(0, 1) != flow.OPTIMAL:
        raise RuntimeError("max flow failed on the cone bound (a model bug)")
    return flow.optimal_flow() / scale


def cone_latency_bound(graph: Graph, hw: Hardware, lower: float, deadline: Deadline | None = None) -> float:
    """A lower bound on ``max_k T_k`` from single nodes and what must enter their stage (at least ``lower``).

    Let v lie on stage k and X be the nodes of stage k among v's ancestors and v. X holds v and, with any node, every
    node of A (v's ancestors and v) on a path from it to v (their stages lie between). Every producer in ``A \\ X``
    with a consumer in X lies on an earlier stage, so its tensor enters stage k: ``in_k >= b_a out(entering X)``.
    With ``w_v = macs_v / R`` (spill >= 0), and with ``w_v = macs_v / R + b_p params_v / H`` less ``C / H`` (spill
    >= ``b_p P_k - C``), ``T_k >= tau + w(X) + b_a out(entering X) / L``; the least such value over X is one minimum
    cut (:func:`_least_cone`). On graphs whose early tensors are large (NAS cells: a stage late in the graph must
    receive them or compute everything before) this lifts the bound where the downset windows stay at the hull.
    Nodes go best first by a cheap upper estimate (all of A on one stage, or v alone with its inputs) and stop once it
    cannot beat the bound so far or at the deadline (the bound so far is valid).
    """
    n = graph.num_nodes
    if n == 0 or hw.stages < 2 or n > CONE_MAX_NODES:
        return float(lower)
    preds, succs = graph.predecessors(), graph.successors()
    e = hw.act_bytes * graph.output_size.astype(np.float64) / hw.link_bw
    macs = graph.macs.astype(np.float64) / hw.macs_per_s
    combined = macs + hw.param_bytes * graph.params.astype(np.float64) / hw.host_bw
    slack = hw.sram_bytes / hw.host_bw
    anc = ancestor_matrix(graph)
    estimate = np.minimum(anc @ combined, combined + np.array([e[p].sum() for p in preds]))
    best = float(lower)
    for v in np.argsort(-estimate, kind="stable").tolist():
        if hw.stage_overhead_s + estimate[v] <= best or (deadline is not None and deadline.left() <= 0):
            break
        for w, less in ((macs, 0.0),) if no_spill(graph, hw) else ((macs, 0.0), (combined, slack)):
            value = hw.stage_overhead_s + _least_cone(succs, anc[v], v, w, e) - less
            best = max(best, value * (1 - 1e-12))
    return best



def _share(deadline: Deadline, share: float) -> Deadline:
    """A deadline ``share`` of the time ``deadline`` has left from now (same stop signal)."""
    return Deadline(min(deadline.at, time.perf_counter() + share * deadline.left()), deadline.stop)


#: Seconds between two looks at a finer pass's ``refine_when`` (:func:`wait_until`).
REFINE_POLL_S = 0.05


def wait_until(ready, deadline: Deadline) -> bool:
    """Wait (sleeping, no CPU) until ``ready()`` is True: True then, False when ``deadline`` (or its stop) comes first
    or less than 0.05 s are left; ``ready`` None: True at once."""
    if ready is None:
        return True
    while not ready():
        left = deadline.left()
        if left <= 0.05:
            return False
        time.sleep(min(REFINE_POLL_S, left))
    return deadline.left() > 0.05


#: ``latency``: run :func:`cone_latency_bound` first (at most :data:`CONE_SHARE` of the bound's time) and report at
#: least its value. Validation (data/models_val/nas_generated, the 9 latency cases of K = 4, 8 that auto left above
#: 1 %, upper = auto's objective, the bound alone, load 6-7): with 2 s (what the bound got inside auto under load)
#: val_nas0_b K = 8 gap 51.9 -> 21.6 %, val_nas0_a K = 8 53.9 -> 28.7 %, val_nas1_b K = 8 46.8 -> 21.2 %, val_nas2_a
#: K = 8 51.4 -> 17.1 %, the others equal; with 8 s equal on all (0.01-0.26 s per graph).
CONE = True
CONE_SHARE = 0.2


def crossing_lower_bound(
    graph: Graph, hw: Hardware, objective: str, lam: float, upper: float, time_limit_s: float, stop=None,
    exact: bool = True, chain: bool = True, seed: bool | None = None, paper_refine_max: int | None = None,
    latency_refine_max: int | None = None, refine_when=None,
) -> dict:
    """The crossing bound (module docstring), at least the analytic one, within ``time_limit_s`` seconds.

    Args:
        graph, hw, objective, lam: the problem.
        upper: the objective of some valid schedule (the search range ends there).
        time_limit_s: wall-clock limit; a bound is valid whenever the search stops.
        stop: optional ``stop() -> bool``, polled between queries: True ends the search early.
        exact: let CP-SAT refine the hull bounds (False: the hull bounds alone, no CP-SAT); graphs above
            :data:`EXACT_MAX_NODES` nodes always get the hull bounds alone.
        chain: with K >= 3 (and ``exact``), search the chain relaxation first (:func:`_paper_chain_bound`,
            :func:`_latency_chain_bound`), then the independent windows with the time left (for ``latency`` from
            the chain's bound up); the best of both is returned.
        seed: the chains' buckets start from their hull bounds (:func:`seed_buckets`) and, for ``latency``, the
            independent windows on the hull alone (milliseconds) run first, with at most :data:`HULL_FIRST_SHARE`
            of the time, so a chain that does not finish starts from them (False: session 21's search; None: the
            objective's entry of :data:`SEED_CHAINS`).
        paper_refine_max: ``paper``'s finer chain passes go up to this many buckets per boundary (None:
            :data:`CHAIN_REFINE_MAX_PER_BOUNDARY`; above it, a pass may halve up to twice its first count).
        latency_refine_max: ``latency``'s MACs chain runs again after the whole search on finer buckets, up to this
            many boundaries' buckets (None: :data:`LATENCY_REFINE_MAX_BOUNDARIES`; 0: no such pass).
        refine_when: optional ``refine_when() -> bool``: the finer passes (``paper`` past
            ``CHAIN_BUCKETS_PER_BOUNDARY * CHAIN_REFINE_FACTOR`` buckets per boundary, ``latency``'s pass above) wait
            until it returns True (:func:`wait_until`; polled every :data:`REFINE_POLL_S` s, without CPU) and are
            skipped when the deadline or ``stop`` comes first (``solver=auto``: once its other members are done).
    Returns:
        ``{"bound": float, "analytic": float, "calls": CP-SAT queries, "cuts": max-flow problems,
        "time_s": float}``, and ``"before_finer"`` (the bound when the first finer pass started) when one ran.
    """
    start = time.perf_counter()
    analytic = analytic_lower_bound(graph, hw, objective, lam)
    seed = SEED_CHAINS.get(objective, True) if seed is None else bool(seed)
    deadline = Deadline(start + float(time_limit_s), stop)
    exact = bool(exact) and graph.num_nodes <= EXACT_MAX_NODES
    if hw.stages == 1 or not upper > analytic or time_limit_s <= 0:
        return {"bound": analytic, "analytic": analytic, "calls": 0, "cuts": 0, "time_s": time.perf_counter() - start}
    if objective == "paper":
        # the independent windows first (they settle), then the chain with the time left and the same CP-SAT model:
        # inside solver=auto (bundled models, K = 8, load ~10) the chain first with half the time lost to them
        found = _paper_crossing_bound(graph, hw, lam, float(upper), deadline, exact)
        per_boundary, oracle, prior = CHAIN_BUCKETS_PER_BOUNDARY, found.get("oracle"), None
        boundaries = hw.stages - 1
        while chain and exact and hw.stages >= 3 and deadline.left() > 0.05 and found["bound"] < upper:
            # a chain that settles with time left starts again from finer buckets (the same CP-SAT model and its
            # answers, each bucket from what the last pass proved: CHAIN_INHERIT); every pass is a valid bound alone;
            # the finer passes cut the weight axis for at least CHAIN_MIN_BOUNDARIES boundaries
            finer = per_boundary > CHAIN_BUCKETS_PER_BOUNDARY * CHAIN_REFINE_FACTOR  # past session 34's two passes
            if finer and not wait_until(refine_when, deadline):
                break
            if finer:
                found.setdefault("before_finer", max(found["bound"], analytic))
            chained = _paper_chain_bound(graph, hw, lam, float(upper), deadline, oracle, seed, per_boundary,
                                         prior if CHAIN_INHERIT else None, boundaries,
                                         2 * per_boundary * boundaries if finer else None)
            boundaries = max(boundaries, CHAIN_MIN_BOUNDARIES)
            found["bound"], oracle = max(found["bound"], chained["bound"]), chained["oracle"]
            prior = chained["buckets_h"]
            per_boundary *= CHAIN_REFINE_FACTOR
            if per_boundary > (CHAIN_REFINE_MAX_PER_BOUNDARY if paper_refine_max is None else int(paper_refine_max)):
                break
    else:
        start_at, cuts, windows_first = analytic, 0, WINDOWS_FIRST_SHARE > 0 and chain and exact and hw.stages >= 3
        cone = analytic
        if CONE:  # single nodes and what enters their stage (max flows, milliseconds each); kept beside the searches,
            # not their start: the chain halves its buckets once per bisection test, so a higher start (fewer tests)
            # left it coarser (validation val_nas0_b K = 8, 8 s: gap 0.01 % from the analytic start, 1.35 % from the
            # cone's)
            cone = cone_latency_bound(graph, hw, analytic, _share(deadline, CONE_SHARE))
        if windows_first:  # session 20's search (independent windows, CP-SAT) first; the chains from its bound up
            first = _latency_crossing_bound(graph, hw, start_at, float(upper), _share(deadline, WINDOWS_FIRST_SHARE),
                                            exact)
            start_at, cuts = max(start_at, first["bound"]), first["cuts"]
        if chain and exact and hw.stages >= 3:
            if seed and not windows_first:  # the independent windows on the hull alone: the chains start from them
                cheap = _latency_crossing_bound(graph, hw, start_at, float(upper), _share(deadline, HULL_FIRST_SHARE),
                                                exact=False)
                start_at, cuts = max(start_at, cheap["bound"]), cheap["cuts"]
            # the MACs first (compute-bound stages: the bundled models), then the combined weight (spill), unless no
            # stage can spill: then its test is implied by the MACs chain's (b_p params(stage) <= C) and its time goes
            # to the independent windows
            chains = (("macs", CHAIN_SHARE),) if no_spill(graph, hw) else (("macs", CHAIN_SHARE), ("combined", 0.4))
            for weight, share in chains:
                # the K - 1 boundaries' buckets first (they settle soonest), then, with the time left, buckets for
                # CHAIN_MIN_BOUNDARIES boundaries from that bound up
                within = _share(deadline, share)
                for boundaries in sorted({hw.stages - 1, max(hw.stages - 1, CHAIN_MIN_BOUNDARIES)}):
                    if within.left() <= 0.05:
                        break
                    two = TWO_WEIGHT_CHAIN and weight == "macs" and not no_spill(graph, hw)
                    start_at = max(start_at, _latency_chain_bound(graph, hw, start_at, float(upper), within, weight,
                                                                  seed, boundaries, two)["bound"])
        found = _latency_crossing_bound(graph, hw, start_at, float(upper), deadline, exact)
        found["cuts"] += cuts
        refine = max(hw.stages - 1, CHAIN_MIN_BOUNDARIES) * LATENCY_REFINE_FACTOR
        refine_max = LATENCY_REFINE_MAX_BOUNDARIES if latency_refine_max is None else int(latency_refine_max)
        while chain and exact and hw.stages >= 3 and refine <= refine_max:
            # after everything above (its bound as it was), the MACs chain again on finer buckets with the time left
            if deadline.left() <= 0.05 or found["bound"] >= upper or not wait_until(refine_when, deadline):
                break
            found.setdefault("before_finer", max(found["bound"], min(cone, float(upper)), analytic))
            found["bound"] = max(found["bound"], _latency_chain_bound(
                graph, hw, found["bound"], float(upper), deadline, "macs", seed, refine,
                TWO_WEIGHT_CHAIN and not no_spill(graph, hw), 2 * CHAIN_BUCKETS_PER_BOUNDARY * refine)["bound"])
            refine *= LATENCY_REFINE_FACTOR
        found["bound"] = max(found["bound"], min(cone, float(upper)))
    out = {
        "bound": max(found["bound"], analytic),
        "analytic": analytic,
        "calls": found["calls"],
        "cuts": found["cuts"],
        "time_s": time.perf_counter() - start,
    }
    if "before_finer" in found:  # the finer passes ran (paper past 24 buckets per boundary, latency's refinement)
        out["before_finer"] = found["before_finer"]
    return out
