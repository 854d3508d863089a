"""Window re-solves under ``latency``: a large-neighbourhood step with an exact sub-solver (CP-SAT).

A schedule's stages ``first .. last`` (a window of adjacent stages) are re-solved exactly while every node outside them
keeps its stage. Under the cost model the stage times outside the window do not depend on how the window's nodes are
split among its stages (a tensor produced inside the window and read after it enters every later stage up to its last
reader whatever its stage inside; one produced before it and read inside enters the window's first stage in any case),
so minimising the largest stage time of the window is exact for the window. The sub-problem is a CP-SAT model
(thresholds ``z[u, j] = [s(u) > first + j]``, precedence inside the window, the window's stage times with their SRAM
spill and incoming tensors, minimise their maximum), warm-started from the current schedule, one worker, a
*deterministic* time limit (the same answer on a loaded machine).

:func:`window_search` applies it from a schedule (``solver=policy``'s default decoding after the latency rebalancing):
windows of two, then three adjacent stages containing the bottleneck stage (the one with the smaller sum of stage times
first), a re-solve kept when the stage times sorted in decreasing order get lexicographically smaller
(:func:`~respect_jax.solvers.rebalance.leximax_less`: never worse), up to ``solves`` re-solves; skipped where it cannot
gain (a graph with a single topological order, a schedule at the analytic lower bound, a window at its floor), on
windows of more than :data:`WINDOW_MAX_NODES` nodes (time) and on windows with little freedom of order: fewer than
:data:`WINDOW_MIN_FREE` of their nodes have a node of the window that is neither their ancestor nor their descendant
(:func:`window_free_share`; residual networks, whose orders differ only in a downsampling block's shortcut, never gained
there on validation and paid 0.1-0.7 s per graph). Chosen on validation graphs only
(``experiments/results/latency_window_val.md``, ``latency_window_free_val.md``).

Escalation (``window_search(escalate=...)``; ``solver=policy``: 2 re-solves): where the first search skipped a window
for its node cap, ran out of re-solves, or the pipeline has K >= 6 stages (:func:`escalation_signal`), up to
``escalate`` more re-solves with windows of 2-4 stages and up to 450 nodes, the windows already tried from the same
schedule skipped; on the validation NAS graphs the other cases never gained from it
(``experiments/results/latency_window_adaptive_val.md``).

Speed (session 29): the sub-problem's model is written as protobuf text from NumPy arrays and parsed in one call
(:func:`window_model`; the same model as the scalar ``cp_model`` calls before it, so the same answer), and CP-SAT runs
without probing (:data:`WINDOW_PROBING`): probing took ~3/4 of a re-solve's wall time, in presolve and at the start of
the search, and on validation no schedule got worse without it (``experiments/results/window_speed_val.md``).
Session 31: one presolve iteration without symmetry detection (:data:`WINDOW_PRESOLVE`; CP-SAT's default runs three
with it), since most re-solves start from a split that is already optimal and spent about half their wall time there.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from respect_jax.costs import Hardware
from respect_jax.graphs.graph import Graph, has_unique_order
from respect_jax.solvers.bounds import latency_lower_bound
from respect_jax.solvers.rebalance import leximax_less, stage_times_np

#: integer units per largest stage time of the start (CP-SAT takes integer coefficients; the result is re-scored in
#: float64, so rounding only decides which schedules the sub-solver prefers, never whether one is kept)
WINDOW_SCALE = 1e7
#: stages per window of :func:`window_search`, tried in this order around the bottleneck
WINDOW_WIDTHS = (2, 3)
#: windows of :func:`window_search` holding more nodes than this are skipped (CP-SAT's set-up and search time grow
#: with the window; chosen on validation graphs only)
WINDOW_MAX_NODES = 300
#: windows of :func:`window_search` where a smaller share of the nodes is free (:func:`window_free_share`) are skipped:
#: on validation every re-solve that gained had a share >= 0.81, every window of the residual-network graphs <= 0.24
WINDOW_MIN_FREE = 0.5
#: stages per window and node cap of the escalation of :func:`window_search` (chosen on validation graphs only:
#: ``experiments/results/latency_window_adaptive_val.md``)
ESCALATE_WIDTHS = (2, 3, 4)
ESCALATE_MAX_NODES = 450
#: the escalation of :func:`window_search` fires on every schedule of at least this many stages (the first search's
#: windows of <= 3 stages then cover at most half of the pipeline)
ESCALATE_STAGES = 6
#: CP-SAT's ``cp_model_probing_level`` in the window re-solves (its default: 2). Probing took ~3/4 of a re-solve's wall
#: time there (presolve and search start) for no gain on validation (``experiments/results/window_speed_val.md``)
WINDOW_PROBING = 0
#: CP-SAT's presolve in the window re-solves (``ls_window_presolve``): 0 presolve off, 1-2 that many presolve iterations
#: (``max_presolve_iterations``) without symmetry detection, 3 CP-SAT's default (3 iterations, symmetry level 2;
#: sessions 26-30). Where the start is already optimal (most re-solves) CP-SAT's presolve took about half of a
#: re-solve's wall time for no deterministic time; 1: window step x0.6-0.7, no schedule worse on validation
#: (``experiments/results/window_presolve_val_s31.md``)
WINDOW_PRESOLVE = 1
#: the presolve levels :func:`window_resolve` takes (CP-SAT's default: 3 iterations with symmetry detection)
PRESOLVE_LEVELS = (0, 1, 2, 3)


def escalation_signal(capped: int, exhausted: bool, stages: int, min_stages: int) -> bool:
    """Whether :func:`window_search` escalates after its first search, from what that search saw: ``capped`` windows
    skipped for the node cap (a larger cap may re-solve them), ``exhausted`` (it ran out of re-solves while still
    finding windows to try), or a pipeline of ``stages`` >= ``min_stages`` (windows of 4 stages and more boundaries
    moved at once; on validation the gains of that kind were all at K >= 6)."""
    return capped > 0 or bool(exhausted) or int(stages) >= int(min_stages)


def _last_stage(graph: Graph, s: np.ndarray, k: int) -> np.ndarray:
    """int64[N]: the stage of each node's latest successor under ``s`` (``k - 1`` for a sink)."""
    last = np.full(graph.num_nodes, -1, np.int64)
    if graph.num_edges:
        np.maximum.at(last, graph.edges[:, 0], s[graph.edges[:, 1]])
    return np.where(last < 0, k - 1, last)


_INT64_MAX = 9223372036854775807


def _seq_sum(values, start: float = 0.0) -> float:
    """Left-to-right float sum (the order in which the model's constants were always added: the same rounding)."""
    total = start
    for x in values:
        total += x
    return total


def _linear(coefs: np.ndarray, lower: int) -> str:
    """A ``sum(coefs[i] * x_i) >= lower`` constraint as protobuf text (variables in index order, zeros dropped: the
    canonical form ``cp_model`` writes)."""
    idx = np.flatnonzero(coefs)
    return (f"constraints {{ linear {{ vars: [{', '.join(map(str, idx.tolist()))}] "
            f"coeffs: [{', '.join(map(str, coefs[idx].tolist()))}] domain: [{lower}, {_INT64_MAX}] }} }}")


def window_model(graph: Graph, hw: Hardware, assignment: np.ndarray, first: int, last: int):
    """(CpModel, int64[n, last - first] indices of the threshold variables ``z[u, j] = [s(u) > first + j]`` of the n
    window nodes, int64[n] those nodes) of :func:`window_resolve`'s sub-problem, written as protobuf text from NumPy
    arrays and parsed in one call (no Python object per variable or term). Its variables, constraints (order
    included), coefficients and hint are those the scalar ``cp_model`` calls of sessions 26-28 built, so CP-SAT's
    answer is the same (``tests/test_window.py`` compares the two models on small and validation-like windows)."""
    from ortools.sat.python import cp_model

    s = np.asarray(assignment, np.int64)
    k, first, last = int(hw.stages), int(first), int(last)
    width = last - first + 1
    w1 = width - 1
    inside = (s >= first) & (s <= last)
    nodes = np.flatnonzero(inside)
    n = len(nodes)
    pos = np.full(graph.num_nodes, -1, np.int64)
    pos[nodes] = np.arange(n)
    zid = np.arange(n * w1, dtype=np.int64).reshape(n, w1)
    edges = graph.edges if graph.num_edges else np.zeros((0, 2), np.int64)
    order = np.argsort(edges[:, 0], kind="stable")  # the readers of each node, in edge order
    dst = edges[order, 1]
    starts = np.searchsorted(edges[order, 0], np.arange(graph.num_nodes + 1))
    out = float(hw.act_bytes) * graph.output_size.astype(np.float64)
    lst = _last_stage(graph, s, k)
    later = (starts[1:] == starts[:-1]) | (lst > last)  # a sink, or read after the window: enters every later stage
    unit = float(stage_times_np(graph, s[None], hw)[0].max()) / WINDOW_SCALE
    big = int(round(1e3 * unit * WINDOW_SCALE / unit))
    bw, rate = float(hw.link_bw), float(hw.host_bw)

    def rint(x) -> np.ndarray:  # int(round(x / unit)) elementwise (both round half to even)
        return np.rint(np.asarray(x, np.float64) / unit).astype(np.int64)

    var_text = [f'variables {{ name: "z{u}_{j}" domain: [0, 1] }}' for u in nodes.tolist() for j in range(w1)]
    imp = "constraints {{ enforcement_literal: {} bool_and {{ literals: {} }} }}".format
    cons: list[str] = []
    if width > 2:  # z[u][j + 1] -> z[u][j]
        cons += map(imp, zid[:, 1:].ravel().tolist(), zid[:, :-1].ravel().tolist())
    inner = edges[inside[edges[:, 0]] & inside[edges[:, 1]]]
    if len(inner):  # precedence inside the window: z[u][j] -> z[v][j]
        cons += map(imp, zid[pos[inner[:, 0]]].ravel().tolist(), zid[pos[inner[:, 1]]].ravel().tolist())
    # incoming tensors of window stage first + j (j >= 1) that depend on the split: (stage, variable, coefficient of
    # the variable in ``top - stage time >= ...``) and the constants of the negated literals
    terms: list[tuple[int, int, int]] = []
    not_const = [0] * width
    varying = np.zeros(graph.num_nodes, bool)
    tensor = rint(out / bw)
    pre_first: list[float] = []
    reads_inside = np.zeros(graph.num_nodes, bool)
    reads_inside[edges[inside[edges[:, 1]], 0]] = True
    pre = (out > 0) & ~inside & (s < first) & ~later & reads_inside  # read inside the window only (not after it)
    for u in np.flatnonzero((out > 0) & inside | pre).tolist():  # in node order, as the variables were created
        readers = dst[starts[u]:starts[u + 1]]
        c = int(tensor[u])
        if inside[u]:
            varying[u] = True
            for j in range(1, width):
                zu = int(zid[pos[u], j - 1])
                if later[u]:  # enters stage first + j iff s(u) < first + j: c * (1 - z[u][j-1])
                    not_const[j] += c
                    terms.append((j, zu, c))
                else:  # iff s(u) < first + j <= last(u): y >= z[v][j-1] - z[u][j-1] for each reader v
                    y = len(var_text)
                    var_text.append(f'variables {{ name: "y{u}_{j}" domain: [0, 1] }}')
                    cons += [f"constraints {{ bool_or {{ literals: [{y}, {-zv - 1}, {zu}] }} }}"
                             for zv in zid[pos[readers], j - 1].tolist()]
                    terms.append((j, y, -c))
        else:
            varying[u] = True  # enters the first window stage always, a later one iff a reader is there
            pre_first.append(float(out[u]))
            for j in range(1, width):
                y = len(var_text)
                var_text.append(f'variables {{ name: "y{u}_{j}" domain: [0, 1] }}')
                cons += [imp(zv, y) for zv in zid[pos[readers[inside[readers]]], j - 1].tolist()]
                terms.append((j, y, -c))
    in_const = np.zeros(width)
    in_const[0] = _seq_sum(pre_first)
    rest = np.flatnonzero(~varying & (out > 0))
    for j in range(width):
        sel = rest[(s[rest] < first + j) & (first + j <= lst[rest])]
        in_const[j] = _seq_sum(out[sel].tolist(), float(in_const[j]))
    macs = graph.macs.astype(np.float64)[nodes] / float(hw.macs_per_s)
    mem = float(hw.param_bytes) * graph.params.astype(np.float64)[nodes]
    mem_sum = _seq_sum(mem.tolist())
    spill_on = mem_sum > float(hw.sram_bytes)  # the window's stages may spill (the same test for each stage)
    top = len(var_text)
    var_text.append(f'variables {{ name: "t" domain: [0, {big}] }}')
    total = top + 1 + (width if spill_on else 0)
    cm, cmn, sp, spn = rint(macs), rint(-macs), rint(mem / rate), rint(-mem / rate)
    term = np.asarray(terms, np.int64).reshape(-1, 3)
    for j in range(width):
        # node u is on stage first + j iff z[u][j-1] (true for j = 0) and not z[u][j] (false for j = width - 1)
        coefs = np.zeros(total, np.int64)
        if j > 0:
            coefs[zid[:, j - 1]] -= cm
        if j < w1:
            coefs[zid[:, j]] -= cmn
        mine = term[term[:, 0] == j]
        np.add.at(coefs, mine[:, 1], mine[:, 2])
        coefs[top] = 1
        const_t = float(hw.stage_overhead_s) + in_const[j] / bw
        if j == 0:
            const_t = _seq_sum(macs.tolist(), const_t)
        if spill_on:
            spill = len(var_text)
            var_text.append(f'variables {{ name: "spill{j}" domain: [0, {big}] }}')
            sc = np.zeros(total, np.int64)
            if j > 0:
                sc[zid[:, j - 1]] -= sp
            if j < w1:
                sc[zid[:, j]] -= spn
            sc[spill] = 1
            cons.append(_linear(sc, int(rint(((mem_sum if j == 0 else 0.0) - float(hw.sram_bytes)) / rate))))
            coefs[spill] = -1
        cons.append(_linear(coefs, int(rint(const_t)) + not_const[j]))
    first_z = zid.ravel()
    hint = (s[nodes][:, None] > first + np.arange(w1)[None, :]).astype(np.int64).ravel()
    text = "\n".join(var_text + cons + [
        f"objective {{ vars: [{top}] coeffs: [1] scaling_factor: 1 }}",
        f"solution_hint {{ vars: [{', '.join(map(str, first_z.tolist()))}] "
        f"values: [{', '.join(map(str, hint.tolist()))}] }}" if len(first_z) else ""])
    model = cp_model.CpModel()
    if not model.proto.parse_text_format(text):
        raise RuntimeError("window_model: the CP-SAT model text did not parse")
    return model, zid, nodes


def window_resolve(graph: Graph, hw: Hardware, assignment: np.ndarray, first: int, last: int,
                   deterministic_limit: float = 0.2, wall_limit: float = 5.0, info: dict | None = None,
                   probing: int | None = None, presolve: int | None = None) -> np.ndarray:
    """int64[N]: ``assignment`` (a valid ``latency`` schedule by node id) with the nodes on stages ``first .. last``
    re-split among those stages by CP-SAT to minimise the largest of their stage times; the other nodes keep their
    stage. The best schedule CP-SAT finds within ``deterministic_limit`` (its deterministic time units; one worker, a
    fixed seed) or ``wall_limit`` seconds (a safety cap), started from ``assignment``; ``assignment`` itself when none
    is found or the window holds fewer than two nodes. Valid whenever ``assignment`` is; not necessarily better (the
    caller compares). ``probing``: CP-SAT's ``cp_model_probing_level`` (None: :data:`WINDOW_PROBING`); ``presolve``
    (None: :data:`WINDOW_PRESOLVE`): 0 no presolve, 1-2 that many presolve iterations without symmetry detection, 3
    CP-SAT's default presolve (3 iterations, symmetry detection). The model:
    :func:`window_model`. ``info`` (optional): gets ``optimal``, whether the returned split is proven to minimise the
    window's largest stage time (CP-SAT's status, or a window of fewer than two nodes)."""
    from ortools.sat.python import cp_model  # imported when a window is solved, not with the registry

    s = np.asarray(assignment, np.int64)
    k, first, last = int(hw.stages), int(first), int(last)
    if not 0 <= first < last < k:
        raise ValueError(f"window stages must satisfy 0 <= first < last < K = {k}, got {first}..{last}")
    inside = (s >= first) & (s <= last)
    if info is not None:
        info["optimal"] = int(inside.sum()) < 2
    if int(inside.sum()) < 2:
        return s.copy()
    m, zid, nodes = window_model(graph, hw, s, first, last)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.linearization_level = 0
    solver.parameters.cp_model_probing_level = WINDOW_PROBING if probing is None else int(probing)
    level = WINDOW_PRESOLVE if presolve is None else int(presolve)
    if level not in PRESOLVE_LEVELS:
        raise ValueError(f"presolve must be one of {PRESOLVE_LEVELS} (or None), got {presolve!r}")
    if level == 0:
        solver.parameters.cp_model_presolve = False
    elif level < 3:
        solver.parameters.max_presolve_iterations = level
        solver.parameters.symmetry_level = 0
    solver.parameters.max_deterministic_time = float(deterministic_limit)
    solver.parameters.max_time_in_seconds = float(wall_limit)
    status = solver.solve(m)
    if info is not None:
        info["optimal"] = status == cp_model.OPTIMAL
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return s.copy()
    values = np.asarray(solver.response_proto.solution, np.int64)
    new = s.copy()
    new[nodes] = first + values[zid].sum(axis=1)
    return new


def load_cp_sat() -> float:
    """Seconds spent importing CP-SAT's Python module now (0 once imported): one-off set-up, reported apart from the
    scheduling time by the callers."""
    import sys
    import time

    if "ortools.sat.python.cp_model" in sys.modules:
        return 0.0
    start = time.perf_counter()
    from ortools.sat.python import cp_model  # noqa: F401

    return time.perf_counter() - start


def window_needed(graph: Graph, hw: Hardware, assignment: np.ndarray) -> bool:
    """Whether :func:`window_search` may gain: the graph has more than one topological order (with one, the decoding's
    exact split of it is optimal already), at least two stages and nodes, and the schedule's largest stage time is
    above the analytic lower bound (:func:`~respect_jax.solvers.bounds.latency_lower_bound`)."""
    s = np.asarray(assignment, np.int64)
    if int(hw.stages) < 2 or graph.num_nodes < 2 or has_unique_order(graph):
        return False
    return float(stage_times_np(graph, s[None], hw)[0].max()) > latency_lower_bound(graph, hw) * (1.0 + 1e-9)


def window_free_share(graph: Graph, assignment: np.ndarray, first: int, last: int) -> float:
    """The share of the nodes on stages ``first .. last`` under ``assignment`` (valid: stages never decrease along an
    edge) that are *free*: some other node of the window is neither their ancestor nor their descendant, so the
    window's schedules may order them differently. 0 when the window's nodes have a single order (a chain), 1 when
    every node has a parallel one (0 for fewer than two nodes). A path between two window nodes never leaves the
    window (its stages lie between theirs), so reachability is computed on the window's sub-graph."""
    s = np.asarray(assignment, np.int64)
    nodes = np.flatnonzero((s >= int(first)) & (s <= int(last)))
    n = len(nodes)
    if n < 2:
        return 0.0
    local = np.full(graph.num_nodes, -1, np.int64)
    local[nodes] = np.arange(n)
    edges = graph.edges if graph.num_edges else np.zeros((0, 2), np.int64)
    inner = edges[(local[edges[:, 0]] >= 0) & (local[edges[:, 1]] >= 0)]
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = np.zeros(n, np.int64)
    for u, v in local[inner].tolist():
        succ[u].append(v)
        indeg[v] += 1
    order = [u for u in range(n) if indeg[u] == 0]
    for u in order:  # Kahn's order (the list grows while it is walked)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                order.append(v)
    reach = np.eye(n, dtype=bool)  # reach[u, v]: v is u or a descendant of u
    for u in reversed(order):
        for v in succ[u]:
            reach[u] |= reach[v]
    comparable = reach | reach.T
    return float(np.mean(~comparable.all(axis=1)))


def window_floor(graph: Graph, hw: Hardware, assignment: np.ndarray, first: int, last: int) -> float:
    """A lower bound on the largest stage time of stages ``first .. last`` over every re-split of their nodes among
    them (the others fixed): the largest single node's time there, and the mean of the window's stage times without
    their incoming tensors (overhead, MACs / rate, and the spill of the window's parameters beyond its SRAM)."""
    s = np.asarray(assignment, np.int64)
    inside = (s >= int(first)) & (s <= int(last))
    width = int(last) - int(first) + 1
    macs = graph.macs.astype(np.float64)[inside] / float(hw.macs_per_s)
    mem = float(hw.param_bytes) * graph.params.astype(np.float64)[inside]
    node = (macs + np.maximum(mem - float(hw.sram_bytes), 0.0) / float(hw.host_bw)).max(initial=0.0)
    mean = (macs.sum() + max(mem.sum() - width * float(hw.sram_bytes), 0.0) / float(hw.host_bw)) / width
    return float(hw.stage_overhead_s) + max(float(node), float(mean))


def window_search(graph: Graph, hw: Hardware, assignment: np.ndarray, solves: int,
                  deterministic_limit: float = 0.2, widths: tuple[int, ...] | None = None,
                  max_nodes: int | None = None, min_free: float | None = None, escalate: int = 0,
                  escalate_widths: tuple[int, ...] | None = None, escalate_max_nodes: int | None = None,
                  escalate_stages: int | None = None, probing: int | None = None,
                  presolve: int | None = None, info: dict | None = None,
                  threads: int = 1) -> tuple[np.ndarray, int]:
    """(int64[N] schedule, re-solves kept): up to ``solves`` :func:`window_resolve` calls from ``assignment`` (a valid
    ``latency`` schedule) on windows of adjacent stages that contain the current bottleneck stage: those of
    ``widths[0]`` stages first (None: :data:`WINDOW_WIDTHS`; the window with the smaller sum of stage times first),
    then those of the next width;
    a re-solve is kept when the stage times sorted in decreasing order get lexicographically smaller
    (:func:`leximax_less`), and the search moves on to the new bottleneck. Stops when every window of the bottleneck
    has been tried without gain. Skipped where it cannot gain: a schedule at the analytic lower bound
    (:func:`~respect_jax.solvers.bounds.latency_lower_bound`), a window whose largest stage time is at
    :func:`window_floor`, one holding more than ``max_nodes`` nodes (None: :data:`WINDOW_MAX_NODES`) and one whose
    :func:`window_free_share` is below ``min_free`` (None: :data:`WINDOW_MIN_FREE`; 0: never skipped for it) (none
    counted as a re-solve), and a window already re-solved from the current schedule (the same sub-problem: CP-SAT is
    deterministic here, and a kept split proven optimal cannot drop). Never worse.

    Escalation (``escalate`` > 0): when that search is done and :func:`escalation_signal` holds for it (it skipped a
    window for ``max_nodes``, ran out of re-solves, or K >= ``escalate_stages``, None: :data:`ESCALATE_STAGES`), it
    goes on from its schedule with up to
    ``escalate`` more re-solves of ``escalate_widths`` stages (None: :data:`ESCALATE_WIDTHS`) and windows of at most
    ``escalate_max_nodes`` nodes (None: :data:`ESCALATE_MAX_NODES`), the windows already tried skipped.
    ``probing`` / ``presolve``: CP-SAT's probing level and presolve in every re-solve (:func:`window_resolve`; None:
    :data:`WINDOW_PROBING` / :data:`WINDOW_PRESOLVE`).

    ``info`` (optional): gets ``used`` (re-solves run by the first search), ``capped`` (its windows skipped for
    ``max_nodes``), ``exhausted`` (whether it ended on its ``solves`` budget rather than with every window of the
    bottleneck tried) and ``escalated`` (the re-solves run by the escalation; 0 when it did not fire).

    ``threads`` > 1: the next windows of the same schedule (up to ``threads`` re-solves, within the budget) are
    re-solved at once in threads, ahead of the search (CP-SAT releases the GIL); a result is used only where the
    search reaches its window, so schedules, counts and ``info`` are those of ``threads`` 1 (each re-solve is
    deterministic: one worker, a deterministic time limit). Only the wall time changes: most re-solves do not gain, and
    the next window's re-solve then ran beside it. A re-solve made useless by a gain finishes in the background."""
    if isinstance(threads, bool) or int(threads) < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    s = np.asarray(assignment, np.int64).copy()
    if info is not None:
        info.update(used=0, capped=0, exhausted=False, escalated=0)
    if int(solves) <= 0 or not window_needed(graph, hw, s):
        return s, 0
    current = stage_times_np(graph, s[None], hw)[0]
    phases = [(int(solves), WINDOW_WIDTHS if widths is None else widths,
               WINDOW_MAX_NODES if max_nodes is None else int(max_nodes))]
    if int(escalate) > 0:
        phases.append((int(escalate), ESCALATE_WIDTHS if escalate_widths is None else escalate_widths,
                       ESCALATE_MAX_NODES if escalate_max_nodes is None else int(escalate_max_nodes)))
    threshold = WINDOW_MIN_FREE if min_free is None else float(min_free)
    pool = ThreadPoolExecutor(int(threads)) if int(threads) > 1 else None
    try:
        return _search_phases(graph, hw, s, current, phases, threshold, deterministic_limit, probing, presolve,
                              escalate_stages, info, pool, int(threads))
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _search_phases(graph: Graph, hw: Hardware, s: np.ndarray, current: np.ndarray, phases: list, threshold: float,
                   deterministic_limit: float, probing: int | None, presolve: int | None, escalate_stages: int | None,
                   info: dict | None, pool: ThreadPoolExecutor | None, threads: int) -> tuple[np.ndarray, int]:
    """:func:`window_search`'s phases (the first search, then its escalation) from schedule ``s`` (int64[N]) with
    stage times ``current`` (float64[K]): (schedule, re-solves kept). ``pool`` (None: every re-solve in this thread)
    runs up to ``threads`` re-solves of the current schedule's next windows ahead (:func:`_plan_windows`)."""
    k = int(hw.stages)
    kept = 0
    tried: set[tuple[int, int]] = set()  # windows re-solved from the current schedule (cleared when one is kept)

    def resolve(window: tuple[int, int], start: np.ndarray) -> tuple[np.ndarray, dict]:
        solved: dict = {}
        new = window_resolve(graph, hw, start, window[0], window[1], deterministic_limit, info=solved,
                             probing=probing, presolve=presolve)
        return new, solved

    for phase, (budget, phase_widths, cap) in enumerate(phases):
        used = capped = 0
        while used < budget:
            bottleneck = int(np.argmax(current))
            windows: list[tuple[int, int]] = []
            for width in dict.fromkeys(min(max(2, int(w)), k) for w in phase_widths):
                ws = [(a, a + width - 1) for a in range(max(0, bottleneck - width + 1), min(bottleneck, k - width) + 1)]
                ws.sort(key=lambda w: (float(current[w[0]:w[1] + 1].sum()), w[0]))
                windows += [w for w in ws if w not in windows]
            moved = False
            plan = _plan_windows(graph, hw, s, current, windows, tried, cap, threshold)  # lazy: one thread
            if pool is not None:  # the windows ahead are needed at once
                plan = list(plan)
                to_solve = [w for w, is_capped in plan if not is_capped]
            ahead: dict = {}  # window -> future of its re-solve from the current schedule
            for window, is_capped in plan:
                if used >= budget:
                    break
                if is_capped:
                    capped += 1
                    continue
                if pool is None:
                    new, solved = resolve(window, s)
                else:
                    at = to_solve.index(window)
                    for nxt in to_solve[at:at + min(threads, budget - used)]:
                        if nxt not in ahead:
                            ahead[nxt] = pool.submit(resolve, nxt, s)
                    new, solved = ahead.pop(window).result()
                used += 1
                times = stage_times_np(graph, new[None], hw)[0]
                if leximax_less(times, current):
                    s, current, moved = new, times, True
                    tried = {window} if solved["optimal"] else set()
                    kept += 1
                    break
                tried.add(window)
            for future in ahead.values():  # re-solves of a schedule the search has left
                future.cancel()
            if not moved:
                break
        if phase == 0:
            first_pass = {"used": used, "capped": capped, "exhausted": used >= budget}
            if info is not None:
                info.update(first_pass)
            min_stages = ESCALATE_STAGES if escalate_stages is None else int(escalate_stages)
            if not escalation_signal(capped, used >= budget, k, min_stages):
                break
        elif info is not None:
            info["escalated"] = used
    return s, kept


def _plan_windows(graph: Graph, hw: Hardware, s: np.ndarray, current: np.ndarray, windows: list, tried: set,
                  cap: int, threshold: float) -> Iterator[tuple[tuple[int, int], bool]]:
    """The windows (first, last) of ``windows``, in order, that :func:`window_search` meets from schedule ``s``
    (stage times ``current``): (window, True) for one skipped for holding more than ``cap`` nodes (counted as
    ``capped``), (window, False) for one to re-solve; windows already ``tried`` from ``s``, at :func:`window_floor` or
    with a :func:`window_free_share` below ``threshold`` left out (none of them counted). A generator: the checks of a
    window run only when the search gets to it."""
    for first, last in windows:
        if (first, last) in tried:  # the same sub-problem from the same schedule: the same answer
            continue
        if int(np.sum((s >= first) & (s <= last))) > cap:
            yield (first, last), True
            continue
        if float(current[first:last + 1].max()) <= window_floor(graph, hw, s, first, last) * (1.0 + 1e-9):
            continue
        if window_free_share(graph, s, first, last) < threshold:
            continue
        yield (first, last), False
