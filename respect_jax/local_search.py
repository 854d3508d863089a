"""Batched hill climbing on a valid schedule: precedence-closed moves of one stage, in pure JAX.

From a valid schedule ``s`` (i32[N] by position), every step scores all moves of the neighbourhood
with the **shared evaluator** and applies the one with the lowest search score if that is lower
than the current one. The score is the objective times ``1 + TIE_BREAK * balance`` with
``balance = mean_k (x_k / max_k x_k)^4`` over the per-stage memory (``paper``) or stage times
(``latency``): a max-objective has wide plateaus (lowering the second-fullest stage does not change
it), and the tie-break lets the search walk across them towards schedules where the peak can
drop. The best objective seen is returned. The moves:

* raise node v by one stage: ``s'_w = max(s_w, s_v + 1)`` for every w in ``desc*(v)`` (v and its
  descendants), i.e. v moves to the next stage and drags along whatever would otherwise precede it;
* lower node v by one stage: ``s'_w = min(s_w, s_v - 1)`` for every w in ``anc*(v)``.

Both moves keep every edge forward, so every schedule visited is valid; when v's successors
(predecessors) already sit on later (earlier) stages the move changes v alone, so the neighbourhood
contains every valid single-node move to an adjacent stage. That is ``2 N`` candidates per step,
scored in one ``vmap`` of :func:`respect_jax.costs.evaluate`. The search stops at a local optimum
of the score (no move lowers it by more than a relative ``1e-7``) or after ``max_steps`` moves;
the result is never worse than the start.

With ``pair_escapes > 0`` a local optimum is not the end: the best of the ``(2 N)^2`` compositions
of two moves (e.g. one node up and another one down, which swaps them between adjacent stages
without passing through the worse schedule in between) is taken if it lowers the score, and the
single-move descent goes on from there, up to ``pair_escapes`` times (a variable-neighbourhood
descent). The pair neighbourhood is scored one first move at a time (``lax.map``), so its memory is
that of one single-move step.

Sparse path (graphs above ``dense_max_nodes`` padded nodes, default :data:`DENSE_MAX_NODES`): the
closure moves need the N x N reachability matrix and ``2 N`` full evaluations per step (O(N^2)
memory and time: 10 GB at 4,700 nodes), so large graphs use the **single-node** moves instead:
node v moves one stage up or down when its feasible range ``[max pred stage, min succ stage]``
(two segment reductions over the edges) allows it, which is exactly the subset of the closure moves
that change v alone. Their objectives are computed incrementally from the current per-stage totals
(a move changes v's stage, v's own tensor interval and, through ``last(u)``, its producers'),
O(N K + E) per step for all ``2 N`` candidates; the chosen move is then scored by the shared
evaluator before it is taken. Pair escapes scan the first moves one at a time as in the dense path.

Screened closure escapes (:func:`polish` with ``kind="single"``, the default polish of ``solver=policy``'s order
policy): single-node hill climbing stops where a chain of zero-parameter nodes (batch norm, activation, add) between
two stages costs communication when moved one node at a time. Out of such a local optimum, all ``2 N`` closure moves
are screened by their exact change of per-stage memory and MACs (two [N, N] x [N, 2K] products with the host-built
reachability; communication taken as unchanged), the best ``screen`` of them are evaluated exactly, the best is taken
if it lowers the score, and the single-node descent goes on; at most ``escapes`` times.

Stage-boundary re-cuts (:func:`refine_boundaries`, host NumPy + OR-tools' max flow; after the polish in
``solver=policy``'s default decoding): the moves above change one node (or one node's closure) at a time, so they cannot
turn a cut through a multi-branch cell that crosses many large tensors into one that puts some whole branches on stage k
and the others on k + 1. The re-cut takes the nodes of two adjacent stages, lists them in a topological order with stage
k first, and for bands of that order (around the current cut and the points where the two stages' load reaches 1/3, 1/2,
2/3) splits the band's nodes by a minimum s-t cut of the bytes crossing the boundary (only that crossing depends on the
split); the best candidate by the exact objective is taken if it is better.

Used after decoding the learned policy (``Decoding(local_search=...)``) and available to any
solver's output. Works on one graph; ``jax.vmap`` it for a batch (the batch runs until its slowest
graph stops).
"""

from __future__ import annotations

import functools
import itertools
import sys

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.compile_cache import cached_compile
from respect_jax.costs import Hardware, evaluate, last_stage, objective_value
from respect_jax.graphs.graph import Graph, has_unique_order
from respect_jax.graphs.padded import (
    PaddedGraph,
    neighbour_reduce,
    pad_graph,
    reachability,
    to_original_order,
    to_position_order,
)

#: Relative improvement of the search score a move must bring (guards against float-rounding cycles).
MIN_IMPROVEMENT = 1e-7
#: Weight of the balance tie-break in the search score (relative to the objective).
TIE_BREAK = 1e-3
#: Graphs padded to more nodes than this use the sparse single-node moves (module docstring).
DENSE_MAX_NODES = 1024
#: The dense path's N x N matrices and (2N, N) candidate batches exhaust memory beyond this size.
DENSE_LIMIT = 4096


def neighbours(graph: PaddedGraph, reach: jax.Array, stage: jax.Array, num_stages: int) -> jax.Array:
    """i32[2N, N] the raise-by-one (rows 0..N-1) and lower-by-one (rows N..2N-1) moves of ``stage``.

    Args: reach bool[N, N] with ``reach[u, v]``: u is v or an ancestor of v. A move of a padding
    node, or one that would leave the stages 0..K-1, returns ``stage`` itself (padding nodes reach
    only themselves, so real moves never touch them).
    """
    up_to = jnp.minimum(stage + 1, num_stages - 1)  # [v]
    down_to = jnp.maximum(stage - 1, 0)
    raised = jnp.where(reach, jnp.maximum(stage[None, :], up_to[:, None]), stage[None, :])  # row v: desc*(v)
    lowered = jnp.where(reach.T, jnp.minimum(stage[None, :], down_to[:, None]), stage[None, :])  # row v: anc*(v)
    moves = jnp.concatenate([raised, lowered], axis=0)
    real_row = jnp.concatenate([graph.node_mask, graph.node_mask])[:, None]
    return jnp.where(real_row, moves, stage[None, :])


def search_value(
    graph: PaddedGraph, stage: jax.Array, hw: Hardware, latency: bool | jax.Array, lam: float
) -> tuple[jax.Array, jax.Array]:
    """(objective f32[], search score f32[]) of the schedule i32[N] (inf for an invalid one).

    The score is ``objective * (1 + TIE_BREAK * balance)`` (module docstring): it breaks the
    objective's plateaus. ``latency``: True for the ``latency`` objective, else ``paper``.
    """
    m = evaluate(graph, stage, hw)
    obj = jnp.where(latency, objective_value(m, "latency"), objective_value(m, "paper", lam))
    obj = jnp.where(m.valid, obj, jnp.inf)
    loads = jnp.where(latency, m.time_k, m.mem_k)
    balance = jnp.mean((loads / jnp.maximum(jnp.max(loads), 1e-30)) ** 4)
    return obj, obj * (1.0 + TIE_BREAK * balance)


def best_move(
    graph: PaddedGraph, reach: jax.Array, stage: jax.Array, num_stages: int, value
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The best :func:`neighbours` move of ``stage``: (stage i32[N], objective f32[], score f32[])
    by ``value(s) -> (objective, score)`` (:func:`search_value`), the lowest score of all ``2 N``."""
    cands = neighbours(graph, reach, stage, num_stages)
    objs, scores = jax.vmap(value)(cands)
    j = jnp.argmin(scores)
    return cands[j], objs[j], scores[j]


def best_pair_move(
    graph: PaddedGraph, reach: jax.Array, stage: jax.Array, num_stages: int, value
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The best composition of two :func:`neighbours` moves of ``stage`` (as :func:`best_move`),
    the lowest score of all ``(2 N)^2``.

    The first moves are scanned one at a time (``lax.map``); each takes its :func:`best_move`.
    """
    after = lambda first: best_move(graph, reach, first, num_stages, value)
    cands, objs, scores = jax.lax.map(after, neighbours(graph, reach, stage, num_stages))
    j = jnp.argmin(scores)
    return cands[j], objs[j], scores[j]


def _score_from_loads(obj: jax.Array, loads: jax.Array) -> jax.Array:
    """The search score ``obj * (1 + TIE_BREAK * mean((loads / max loads)^4))`` (last axis = K)."""
    balance = jnp.mean((loads / jnp.maximum(jnp.max(loads, axis=-1, keepdims=True), 1e-30)) ** 4, axis=-1)
    return obj * (1.0 + TIE_BREAK * balance)


def move_range(graph: PaddedGraph, stage: jax.Array, num_stages: int) -> tuple[jax.Array, jax.Array]:
    """(low i32[N], high i32[N]): the stages node v may take with every other node fixed,
    ``[max pred stage, min succ stage]`` clipped to ``0..K-1`` (two O(E) segment reductions)."""
    low = neighbour_reduce(graph, stage, "max", "down", 0)
    high = neighbour_reduce(graph, stage, "min", "up", num_stages - 1)
    return jnp.maximum(low, 0), jnp.minimum(high, num_stages - 1)


def single_move_values(
    graph: PaddedGraph, stage: jax.Array, hw: Hardware, latency: bool | jax.Array, lam: float
) -> tuple[jax.Array, jax.Array]:
    """(objective f32[2N], score f32[2N]) of moving node v alone one stage up (rows 0..N-1) or down
    (rows N..2N-1), ``inf`` where the move is infeasible or v is padding. O(N K + E), no N x N.

    Incremental from the current totals (module docstring): moving v from s to t changes mem/macs of
    stages s and t; v's tensor interval ``(s, last(v)]`` gains (down) or loses (up) one stage; a
    producer u with ``last(u) = s`` gets ``last(u) = s + 1`` when v goes up, and ``last(u) = s - 1``
    when v goes down if v is its only consumer on stage s.
    """
    k = hw.stages
    stage = jnp.where(graph.node_mask, stage, 0).astype(jnp.int32)
    m = evaluate(graph, stage, hw)
    real = graph.node_mask
    low, high = move_range(graph, stage, k)
    up_ok = real & (stage + 1 <= high)
    down_ok = real & (stage - 1 >= low)
    n = stage.shape[0]
    last = last_stage(graph, stage, k)
    out = hw.act_bytes * jnp.where(real, graph.output_size, 0.0)
    at_last = graph.edge_mask & (stage[graph.receivers] == last[graph.senders])  # consumer on producer's last
    on_last = jax.ops.segment_sum(at_last.astype(jnp.int32), graph.senders, num_segments=n)
    lifted = jax.ops.segment_sum(jnp.where(at_last, out[graph.senders], 0.0), graph.receivers, num_segments=n)
    sole = at_last & (on_last[graph.senders] == 1)
    dropped = jax.ops.segment_sum(jnp.where(sole, out[graph.senders], 0.0), graph.receivers, num_segments=n)
    here = jax.nn.one_hot(stage, k, dtype=jnp.float32)
    above = jax.nn.one_hot(stage + 1, k, dtype=jnp.float32)
    below = jax.nn.one_hot(stage - 1, k, dtype=jnp.float32)
    p = (hw.param_bytes * jnp.where(real, graph.params, 0.0))[:, None]
    c = jnp.where(real, graph.macs, 0.0)[:, None]
    mem = jnp.concatenate([m.mem_k + p * (above - here), m.mem_k + p * (below - here)])  # [2N, K]
    macs = jnp.concatenate([m.macs_k + c * (above - here), m.macs_k + c * (below - here)])
    in_k = jnp.concatenate([m.in_k + above * (lifted - out)[:, None], m.in_k + here * (out - dropped)[:, None]])
    comm = jnp.concatenate([m.comm_bytes + lifted - out, m.comm_bytes + out - dropped])
    spill = jnp.maximum(0.0, mem - hw.sram_bytes)
    time_k = hw.stage_overhead_s + macs / hw.macs_per_s + spill / hw.host_bw + in_k / hw.link_bw
    obj = jnp.where(latency, jnp.max(time_k, axis=-1), jnp.max(mem, axis=-1) + lam * comm)
    obj = jnp.where(jnp.concatenate([up_ok, down_ok]), obj, jnp.inf)
    return obj, _score_from_loads(obj, jnp.where(latency, time_k, mem))


def apply_single_move(stage: jax.Array, j: jax.Array) -> jax.Array:
    """i32[N] ``stage`` after single move ``j`` of :func:`single_move_values` (row order)."""
    n = stage.shape[0]
    v = j % n
    return stage.at[v].add(jnp.where(j < n, 1, -1))


def best_single_move(
    graph: PaddedGraph, stage: jax.Array, hw: Hardware, latency: bool | jax.Array, lam: float
) -> tuple[jax.Array, jax.Array]:
    """(index i32[], predicted score f32[]) of the best single-node move (inf score: none)."""
    _, scores = single_move_values(graph, stage, hw, latency, lam)
    j = jnp.argmin(scores)
    return j.astype(jnp.int32), scores[j]


def best_sparse_pair_move(
    graph: PaddedGraph, stage: jax.Array, hw: Hardware, latency: bool | jax.Array, lam: float
) -> tuple[jax.Array, jax.Array]:
    """(stage i32[N], predicted score f32[]) of the best composition of two single-node moves.

    The ``2 N`` first moves are scanned one at a time (``lax.map``), each followed by its best
    single move; only (score, second move) per first move is kept (O(N) memory).
    """
    n = stage.shape[0]
    first_obj, _ = single_move_values(graph, stage, hw, latency, lam)

    def after(j):
        s1 = apply_single_move(stage, j)
        j2, score = best_single_move(graph, s1, hw, latency, lam)
        return j2, jnp.where(jnp.isfinite(first_obj[j]), score, jnp.inf)

    seconds, scores = jax.lax.map(after, jnp.arange(2 * n, dtype=jnp.int32))
    j = jnp.argmin(scores)
    return apply_single_move(apply_single_move(stage, j), seconds[j]), scores[j]


def _improve_sparse(graph, stage, value, hw, latency, lam, max_steps, pair_escapes):
    """:func:`improve` with single-node moves (module docstring); same carry semantics."""
    start, start_score = value(stage)

    def take(carry, cand, predicted):  # take the move if predicted and exact scores both improve
        return _advance(carry, cand, *value(cand), predicted < carry[1] * (1.0 - MIN_IMPROVEMENT), max_steps)

    def single(carry):
        j, predicted = best_single_move(graph, carry[0], hw, latency, lam)
        return take(carry, apply_single_move(carry[0], j), predicted)

    def descend(carry):
        return jax.lax.while_loop(lambda c: c[5] & (c[4] < max_steps), single, carry[:5] + (jnp.bool_(True),))

    carry = descend((stage, start_score, stage, start, jnp.int32(0), jnp.bool_(True)))
    if pair_escapes > 0:

        def escape(outer):
            carry, escapes, _ = outer
            carry = take(carry, *best_sparse_pair_move(graph, carry[0], hw, latency, lam))
            moved = carry[5]
            return descend(carry), escapes + moved, moved & (escapes + 1 < pair_escapes)

        carry, _, _ = jax.lax.while_loop(lambda o: o[2], escape, (carry, jnp.int32(0), jnp.bool_(True)))
    _, _, best_s, best_obj, steps, _ = carry
    return best_s, best_obj, steps


def _advance(carry, cand, obj, score, allowed, max_steps: int):
    """The hill climber's carry ``(s, s_score, best_s, best_obj, steps, moved)`` after the move ``cand``
    (objective ``obj``, search score ``score``): taken iff ``allowed`` and it lowers the score by a relative
    :data:`MIN_IMPROVEMENT` within ``max_steps`` moves; the best objective seen is kept."""
    s, s_score, best_s, best_obj, steps, _ = carry
    moved = allowed & (score < s_score * (1.0 - MIN_IMPROVEMENT)) & (steps < max_steps)
    better = moved & (obj < best_obj)
    return (
        jnp.where(moved, cand, s),
        jnp.where(moved, score, s_score),
        jnp.where(better, cand, best_s),
        jnp.where(better, obj, best_obj),
        steps + moved,
        moved,
    )


def improve(
    graph: PaddedGraph,
    stage: jax.Array,
    hw: Hardware,
    objective: str | jax.Array,
    lam: float,
    max_steps: int,
    reach: jax.Array | None = None,
    pair_escapes: int = 0,
    dense_max_nodes: int = DENSE_MAX_NODES,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Best-improvement hill climbing from a valid schedule of one graph.

    Args:
        graph: one PaddedGraph (N padded nodes).
        stage: i32[N] valid schedule by position (padding entries are ignored).
        hw, objective, lam: the problem (``hw.stages`` = K); ``objective`` may also be a traced
            bool[] (True: ``latency``) so one compilation serves both objectives.
        max_steps: at most this many moves (a Python int; 0 returns the start); a pair move counts
            as one.
        reach: optional bool[N, N] ``reachability(graph) > 0`` when the caller already has it.
        pair_escapes: at most this many pair moves out of single-move local optima (a Python int;
            0: plain hill climbing); see the module docstring.
        dense_max_nodes: graphs padded to more nodes use the sparse single-node moves (module
            docstring) unless ``reach`` is given; a Python int.

    Returns:
        (stage i32[N] with 0 on padding, objective f32[] from the shared evaluator, moves i32[] taken).
    """
    k = hw.stages
    stage = jnp.where(graph.node_mask, stage, 0).astype(jnp.int32)

    latency = objective == "latency" if isinstance(objective, str) else objective
    value = lambda s: search_value(graph, s, hw, latency, lam)
    start, start_score = value(stage)
    if max_steps <= 0 or k == 1:
        return stage, start, jnp.int32(0)
    if reach is None and stage.shape[0] > dense_max_nodes:
        return _improve_sparse(graph, stage, value, hw, latency, lam, max_steps, pair_escapes)
    if stage.shape[0] > DENSE_LIMIT:
        raise ValueError(f"local search: the dense closure moves hold N x N arrays; at most {DENSE_LIMIT} padded nodes")
    reach = reachability(graph) > 0 if reach is None else reach

    def step(carry, cand, obj, score):  # take the move (cand, obj, score) if it lowers the score
        return _advance(carry, cand, obj, score, jnp.bool_(True), max_steps)

    def single(carry):
        return step(carry, *best_move(graph, reach, carry[0], k, value))

    def descend(carry):  # single moves until a local optimum of the score (or max_steps)
        return jax.lax.while_loop(lambda c: c[5] & (c[4] < max_steps), single, carry[:5] + (jnp.bool_(True),))

    init = (stage, start_score, stage, start, jnp.int32(0), jnp.bool_(True))
    carry = descend(init)
    if pair_escapes > 0:

        def escape(outer):
            carry, escapes, _ = outer
            carry = step(carry, *best_pair_move(graph, reach, carry[0], k, value))
            moved = carry[5]
            return descend(carry), escapes + moved, moved & (escapes + 1 < pair_escapes)

        carry, _, _ = jax.lax.while_loop(lambda o: o[2], escape, (carry, jnp.int32(0), jnp.bool_(True)))
    _, _, best_s, best_obj, steps, _ = carry
    return best_s, best_obj, steps


@functools.partial(jax.jit, static_argnames=("objective", "moves"))
def _polish(graph, stage, hw: Hardware, objective: str, lam: float, moves: int):
    return improve(graph, stage, hw, objective, lam, moves)[0]


def host_reachability(graph: PaddedGraph) -> np.ndarray:
    """bool[N, N] ``R[u, v]``: u is v or an ancestor of v (NumPy, on the host: one pass over the positions in
    reverse, OR-ing the bit-packed rows of each node's successors; milliseconds at N = 1,024, where the scanned
    :func:`~respect_jax.graphs.padded.reachability` takes about a second)."""
    n = int(np.asarray(graph.params).shape[-1])
    mask = np.asarray(graph.edge_mask, bool)
    senders, receivers = np.asarray(graph.senders)[mask], np.asarray(graph.receivers)[mask]
    packed = np.packbits(np.eye(n, dtype=bool), axis=1)
    by_sender = np.argsort(senders, kind="stable")
    senders, receivers = senders[by_sender], receivers[by_sender]
    bounds = np.searchsorted(senders, np.arange(n + 1))
    for u in range(n - 1, -1, -1):  # successors sit at higher positions: their rows are complete
        lo, hi = bounds[u], bounds[u + 1]
        if hi > lo:
            packed[u] |= np.bitwise_or.reduce(packed[receivers[lo:hi]], axis=0)
    return np.unpackbits(packed, axis=1, count=n).astype(bool)


def host_reachability_many(graphs: list[PaddedGraph]) -> np.ndarray:
    """bool[G, N, N] :func:`host_reachability` of every graph of ``graphs`` (one padded shape, N nodes): the same
    matrices, the positions stepped once for all graphs (each step ORs every graph's successor rows of that position,
    gathered from a table padded with an all-zero row) instead of one Python step per graph and position."""
    count, n = len(graphs), int(np.asarray(graphs[0].params).shape[-1])
    succ = [[] for _ in range(count * n)]
    for g, graph in enumerate(graphs):
        mask = np.asarray(graph.edge_mask, bool)
        for u, v in zip(np.asarray(graph.senders)[mask].tolist(), np.asarray(graph.receivers)[mask].tolist(),
                        strict=True):
            succ[g * n + u].append(v)
    width = max(max(map(len, succ)), 1)
    table = np.full((count, n, width), n, np.int64)  # row n of every graph: all zeros
    for flat, vs in enumerate(succ):
        if vs:
            table[flat // n, flat % n, : len(vs)] = vs
    packed = np.zeros((count, n + 1, (n + 7) // 8), np.uint8)
    packed[:, :n] = np.packbits(np.eye(n, dtype=bool), axis=1)[None]
    rows = np.arange(count)[:, None]
    for u in range(n - 1, -1, -1):  # successors sit at higher positions: their rows are complete
        packed[:, u] |= np.bitwise_or.reduce(packed[rows, table[:, u]], axis=1)
    return np.unpackbits(packed[:, :n], axis=2, count=n).astype(bool)


def best_screened_closure_move(
    graph: PaddedGraph, reach: jax.Array, stage: jax.Array, hw: Hardware, value, screen: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The best of ``screen`` precedence-closed moves (:func:`neighbours`' raise / lower of node v, which drag the
    descendants / ancestors of v on v's stage along): (stage i32[N], objective f32[], score f32[]).

    All ``2 N`` closure moves are screened by their exact change of per-stage memory and MACs (the params and
    MACs per stage of every node's descendants and ancestors: two [N, N] x [N, 2K] products; the communication
    is taken as unchanged), the ``screen`` best by that prediction are evaluated exactly by ``value``
    (:func:`search_value`). O(N^2 K + screen (N K + E)) per call.
    """
    k = hw.stages
    real = graph.node_mask
    m = evaluate(graph, stage, hw)
    here = jax.nn.one_hot(stage, k, dtype=jnp.float32) * real[:, None]  # [N, K]
    p = hw.param_bytes * jnp.where(real, graph.params, 0.0)
    c = jnp.where(real, graph.macs, 0.0)
    per_stage = jnp.concatenate([here * p[:, None], here * c[:, None]], axis=1)  # [N, 2K]: (params, MACs) by stage
    reach_f = reach.astype(jnp.float32)  # a no-op for the f32 matrix of polish
    # row v, column stage(v): the params / MACs of desc*(v) (up) or anc*(v) (down) on v's stage
    desc = reach_f @ per_stage
    anc = reach_f.T @ per_stage
    own = lambda x: jnp.stack([jnp.sum(x[:, :k] * here, 1), jnp.sum(x[:, k:] * here, 1)], axis=1)  # [N, 2]
    moved_load = jnp.concatenate([own(desc), own(anc)])  # [2N, 2]
    above = jax.nn.one_hot(stage + 1, k, dtype=jnp.float32)
    below = jax.nn.one_hot(stage - 1, k, dtype=jnp.float32)
    shift = jnp.concatenate([above - here, below - here])  # [2N, K]
    mem = m.mem_k + moved_load[:, :1] * shift
    macs = m.macs_k + moved_load[:, 1:] * shift
    spill = jnp.maximum(0.0, mem - hw.sram_bytes)
    time_k = hw.stage_overhead_s + macs / hw.macs_per_s + spill / hw.host_bw + m.in_k / hw.link_bw
    latency = value.latency
    obj = jnp.where(latency, jnp.max(time_k, axis=-1), jnp.max(mem, axis=-1) + value.lam * m.comm_bytes)
    ok = jnp.concatenate([real & (stage + 1 <= k - 1), real & (stage >= 1)])
    predicted = jnp.where(ok, _score_from_loads(obj, jnp.where(latency, time_k, mem)), jnp.inf)
    _, rows = jax.lax.top_k(-predicted, screen)
    n = stage.shape[0]
    v = rows % n
    raise_ = (rows < n)[:, None]
    same = (stage[None, :] == stage[v][:, None]) & real[None, :]  # [screen, N]
    moved = (jnp.where(raise_, reach[v], reach[:, v].T) > 0) & same
    cands = stage[None, :] + jnp.where(raise_, 1, -1) * moved.astype(jnp.int32)
    objs, scores = jax.vmap(value)(cands)
    scores = jnp.where(jnp.isfinite(predicted[rows]), scores, jnp.inf)
    j = jnp.argmin(scores)
    return cands[j], objs[j], scores[j]


class _Value:
    """``value(stage) -> (objective, search score)`` of one graph (:func:`search_value`), with its ``latency`` and
    ``lam`` at hand for the move screens."""

    def __init__(self, graph: PaddedGraph, hw: Hardware, latency, lam):
        self.graph, self.hw, self.latency, self.lam = graph, hw, latency, lam

    def __call__(self, stage):
        return search_value(self.graph, stage, self.hw, self.latency, self.lam)


def _improve_mixed(graph, stage, hw, latency, lam, max_steps, reach, screen: int, escapes):
    """Hill climbing over the single-node moves (all ``2 N`` per step, incremental) until a local optimum of the
    score, then, at most ``escapes`` times (traced), the best of ``screen`` screened closure moves
    (:func:`best_screened_closure_move`) if it lowers the score, and the single-node descent again. Every move
    taken counts towards ``max_steps`` (traced). Returns (best stage i32[N], its objective f32[], moves i32[])."""
    value = _Value(graph, hw, latency, lam)
    start, start_score = value(stage)

    def single(carry):  # the best single-node move, taken if its predicted and exact scores both improve
        j, predicted = best_single_move(graph, carry[0], hw, latency, lam)
        cand = apply_single_move(carry[0], j)
        allowed = predicted < carry[1] * (1.0 - MIN_IMPROVEMENT)
        return _advance(carry, cand, *value(cand), allowed, max_steps)

    def descend(carry):
        return jax.lax.while_loop(lambda c: c[5] & (c[4] < max_steps), single, carry[:5] + (jnp.bool_(True),))

    carry = descend((stage, start_score, stage, start, jnp.int32(0), jnp.bool_(True)))
    if screen > 0:

        def escape(outer):
            carry, taken, _ = outer
            cand, obj, score = best_screened_closure_move(graph, reach, carry[0], hw, value, screen)
            carry = _advance(carry, cand, obj, score, jnp.bool_(True), max_steps)
            moved = carry[5]
            return descend(carry), taken + moved, moved & (taken + 1 < escapes)

        go = (escapes > 0) & (carry[4] < max_steps)
        carry, _, _ = jax.lax.while_loop(lambda o: o[2], escape, (carry, jnp.int32(0), go))
    _, _, best_s, best_obj, steps, _ = carry
    return best_s, best_obj, steps


def _polish_single(graph, stage, hw: Hardware, latency: jax.Array, lam: jax.Array, moves: jax.Array,
                   reach: jax.Array | None, escapes: jax.Array, *, screen: int):
    """i32[N]: at most ``moves`` (traced) moves from ``stage`` (:func:`_improve_mixed`); one compilation per
    (shape, K, screen) serves both objectives (``latency`` a traced bool), every move and escape count (compiled by
    :func:`respect_jax.compile_cache.cached_compile`: a later process loads it without tracing)."""
    stage = jnp.where(graph.node_mask, stage, 0).astype(jnp.int32)
    reach = None if reach is None else reach.astype(jnp.float32)
    return _improve_mixed(graph, stage, hw, latency, lam, moves, reach, screen, escapes)[0]


#: The neighbourhoods :func:`polish` offers.
POLISH_MOVES = ("closure", "single")


def _single_screen(padded: PaddedGraph, screen: int, escapes: int) -> int:
    """The closure moves screened per escape on ``padded`` (0: no escapes, no reachability matrix)."""
    return min(int(screen), 2 * padded.max_nodes) if padded.max_nodes <= DENSE_LIMIT and escapes > 0 else 0


def _single_args(padded: PaddedGraph, stage: np.ndarray, hw: Hardware, objective: str, lam: float, moves: int,
                 escapes: int, matrix: np.ndarray | None) -> tuple:
    """The arguments of the compiled :func:`_polish_single` (host arrays: no device op per call)."""
    return (padded, stage, jax.tree.map(np.float32, hw), np.bool_(objective == "latency"), np.float32(lam),
            np.int32(moves), matrix, np.int32(escapes))


def _single_executable(padded: PaddedGraph, stage: np.ndarray, hw: Hardware, objective: str, lam: float, moves: int,
                       screen: int, escapes: int, reach: bool) -> tuple:
    """(compiled :func:`_polish_single` for ``padded``'s shape, its arguments) from
    :func:`~respect_jax.compile_cache.cached_compile` (memory, the executable cache, or compiled now). The arguments
    are host arrays (no device op per call); ``reach=False`` puts zeros in place of the reachability (to compile
    only)."""
    screen = _single_screen(padded, screen, escapes)
    n = padded.max_nodes
    matrix = (host_reachability(padded) if reach else np.zeros((n, n), bool)) if screen > 0 else None
    args = _single_args(padded, stage, hw, objective, lam, moves, escapes, matrix)
    return _single_compiled(args, screen), args


def _single_compiled(args: tuple, screen: int):
    """The compiled :func:`_polish_single` for the shapes of ``args`` (:func:`_single_args`)."""
    return cached_compile("polish_single", functools.partial(_polish_single, screen=screen), args,
                          static_key=("polish_single/1", screen))


def compile_polish(graph: Graph, hw: Hardware, objective: str, lam: float, moves: int, kind: str = "closure",
                   screen: int = 0, escapes: int = 0) -> None:
    """Compile (or load from the executable cache) what :func:`polish` runs on ``graph``'s padded shape with these
    options, so that a later ``polish`` holds no compilation. ``single``: compiled ahead without running;
    ``closure``: one throw-away ``polish`` of the all-stage-0 schedule (jit compiles at the first call)."""
    if kind == "single" and moves > 0 and hw.stages > 1:
        padded = pad_graph(graph)
        _single_executable(padded, np.zeros(padded.max_nodes, np.int32), hw, objective, lam, moves, screen, escapes,
                           reach=False)
    else:
        polish(graph, hw, objective, lam, np.zeros(graph.num_nodes, np.int64), moves, kind, screen, escapes)


def polish(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray, moves: int,
           kind: str = "closure", screen: int = 0, escapes: int = 0) -> np.ndarray:
    """int64[N] ``assignment`` (by node id) after at most ``moves`` local-search moves (never worse).

    ``kind``: ``closure`` (:func:`improve`'s moves: the precedence-closed moves of one stage on graphs of up to
    :data:`DENSE_MAX_NODES` padded nodes, the single-node moves above) or ``single`` (the single-node moves on
    every graph: node v moves to an adjacent stage when its predecessors' and successors' stages allow it;
    O(N K + E) per move, no N x N matrix; one compilation per padded shape and K for both objectives and every
    ``moves``). ``single`` with ``screen > 0`` and ``escapes > 0``: at most ``escapes`` times, out of a local
    optimum of the single-node moves, the best of the ``screen`` most promising precedence-closed moves
    (:func:`best_screened_closure_move`) and the single-node descent again (:func:`_improve_mixed`; needs the
    N x N reachability, built on the host: at most :data:`DENSE_LIMIT` padded nodes, else no escapes).
    """
    if kind not in POLISH_MOVES:
        raise ValueError(f"local-search moves must be one of {', '.join(POLISH_MOVES)}, got {kind!r}")
    if int(screen) < 0 or int(escapes) < 0:
        raise ValueError(f"screen and escapes must be >= 0, got {screen} and {escapes}")
    if moves <= 0 or hw.stages == 1:
        return np.asarray(assignment, np.int64)
    padded = pad_graph(graph)
    stage = to_position_order(padded, np.asarray(assignment)).astype(np.int32)
    if kind == "single":
        run, args = _single_executable(padded, stage, hw, objective, lam, moves, screen, escapes, reach=True)
        out = run(*args)
    else:
        out = _polish(jax.tree.map(jnp.asarray, padded), jnp.asarray(stage), hw, objective, float(lam), int(moves))
    return to_original_order(padded, np.asarray(out)).astype(np.int64)


def polish_many(graphs: list[Graph], hw: Hardware, objective: str, lam: float, assignments: list, moves: int,
                kind: str = "closure", screen: int = 0, escapes: int = 0) -> list[np.ndarray]:
    """:func:`polish` of every ``(graph, assignment)`` pair: the same schedules (each graph's own compiled search on
    its own arguments), with ``kind="single"``'s per-graph host work shared: the compiled program looked up once per
    padded shape, the reachability matrices of one shape built together (:func:`host_reachability_many`), and every
    search of a shape dispatched before the first result is read. ``closure``: one :func:`polish` per graph."""
    if len(graphs) != len(assignments):
        raise ValueError(f"{len(graphs)} graphs but {len(assignments)} assignments")
    if kind != "single" or moves <= 0 or hw.stages == 1 or len(graphs) <= 1:
        return [polish(g, hw, objective, lam, a, moves, kind, screen, escapes)
                for g, a in zip(graphs, assignments, strict=True)]
    if int(screen) < 0 or int(escapes) < 0:
        raise ValueError(f"screen and escapes must be >= 0, got {screen} and {escapes}")
    padded = [pad_graph(g) for g in graphs]
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(padded):
        groups.setdefault(tuple(np.shape(x) for x in jax.tree.leaves(p)), []).append(i)
    out: list[np.ndarray | None] = [None] * len(graphs)
    for idx in groups.values():
        first = padded[idx[0]]
        used = _single_screen(first, screen, escapes)
        matrices = host_reachability_many([padded[i] for i in idx]) if used > 0 else [None] * len(idx)
        stages = [to_position_order(padded[i], np.asarray(assignments[i])).astype(np.int32) for i in idx]
        args = [_single_args(padded[i], st, hw, objective, lam, moves, escapes, m)
                for i, st, m in zip(idx, stages, matrices, strict=True)]
        run = _single_compiled(args[0], used)
        results = [run(*a) for a in args]  # dispatched: the searches run while the next arguments are built
        for i, r in zip(idx, results, strict=True):
            out[i] = to_original_order(padded[i], np.asarray(r)).astype(np.int64)
    return out  # type: ignore[return-value]



# ============================================================================ stage-boundary cuts (host, min cut)

#: where :func:`refine_boundaries` re-cuts a stage boundary: bands of the two stages' nodes (in a topological order
#: that lists stage k first) centred on the current cut and on these fractions of the two stages' load ...
BAND_CENTRES = (1 / 3, 1 / 2, 2 / 3)
#: ... each with these half-widths (fractions of the two stages' node count)
BAND_WIDTHS = (1 / 16, 1 / 6, 1 / 3)
#: ... and each with these prices on the load (multiples of the bytes per unit of load of the two stages' tensors)
BAND_PRICES = (0.0,)
#: rounds over all stage boundaries (fewer when a round improves nothing)
BOUNDARY_ROUNDS = 2
#: relative improvement (float64 objective) a re-cut schedule must bring to be taken
BOUNDARY_MIN_IMPROVEMENT = 1e-6
_INF_CAP = 1 << 29  # "infinite" arc capacity of the flow network (int32 arithmetic)
_FINITE_TOTAL = 1 << 26  # finite capacities are scaled so that their sum stays below this
_AFTER = 1 << 40  # the position of a node on a stage after k + 1 (never in the band, never on stage k)


def _loads_np(graph: Graph, stages: np.ndarray, hw: Hardware) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mem f64[C, K], macs f64[C, K], in f64[C, K], comm f64[C]) of the valid schedules ``stages`` (int[C, N], a stage
    per node id): the cost model's formulas in float64 (``last(u)``: the latest successor's stage, K - 1 for a sink)."""
    k = int(hw.stages)
    c, n = stages.shape
    rows = np.arange(c)[:, None]
    flat = (rows * k + stages).ravel()
    mem = float(hw.param_bytes) * np.bincount(flat, np.tile(graph.params.astype(np.float64), c), c * k).reshape(c, k)
    macs = np.bincount(flat, np.tile(graph.macs.astype(np.float64), c), c * k).reshape(c, k)
    last = np.full((c, n), -1, np.int64)
    if graph.num_edges:
        e = graph.num_edges
        np.maximum.at(last, (np.broadcast_to(rows, (c, e)), np.broadcast_to(graph.edges[:, 0], (c, e))),
                      stages[:, graph.edges[:, 1]])
    last = np.where(last < 0, k - 1, last)
    out = float(hw.act_bytes) * graph.output_size.astype(np.float64)
    comm = (out[None, :] * (last - stages)).sum(axis=1)
    delta = np.zeros((c, k + 1))  # out_u enters the stages s(u) + 1 .. last(u)
    np.add.at(delta, (np.broadcast_to(rows, (c, n)), stages + 1), np.broadcast_to(out, (c, n)))
    np.add.at(delta, (np.broadcast_to(rows, (c, n)), last + 1), -np.broadcast_to(out, (c, n)))
    return mem, macs, np.cumsum(delta, axis=1)[:, :k], comm


def objectives_np(graph: Graph, stages: np.ndarray, hw: Hardware, objective: str, lam: float) -> np.ndarray:
    """f64[C]: the ``objective`` of each valid schedule of ``stages`` (int[C, N], a stage per node id), float64."""
    mem, macs, in_k, comm = _loads_np(graph, np.asarray(stages, np.int64), hw)
    if objective == "paper":
        return mem.max(axis=1) + lam * comm
    spill = np.maximum(0.0, mem - hw.sram_bytes)
    time_k = hw.stage_overhead_s + macs / hw.macs_per_s + spill / hw.host_bw + in_k / hw.link_bw
    return time_k.max(axis=1)


class _Boundary:
    """The boundary between stages k and k + 1 of a valid schedule ``s`` (int64[N] by node id), for band cuts.

    ``U`` (the nodes on stages k and k + 1) is listed in a topological order with stage k first (``order``: node
    ids; ``cut``: how many are on stage k). A node's position ``pos`` is its index there, -1 for a node on an earlier
    stage and :data:`_AFTER` for a later one. A band ``[lo, hi)`` of positions keeps the nodes before it on stage k
    and those from ``hi`` on stage k + 1, and :meth:`band_cut` splits the band's nodes by a minimum cut.
    """

    def __init__(self, graph: Graph, s: np.ndarray, k: int, hw: Hardware):
        topo = np.empty(graph.num_nodes, np.int64)
        topo[graph.topological_order()] = np.arange(graph.num_nodes)
        nodes = np.nonzero((s == k) | (s == k + 1))[0]
        self.order = nodes[np.lexsort((topo[nodes], s[nodes]))]
        self.cut = int(np.sum(s == k))
        pos = np.where(s < k, -1, _AFTER).astype(np.int64)
        pos[self.order] = np.arange(len(self.order))
        self.pos, self.k, self.s = pos, k, s
        self.src, self.dst = graph.edges[:, 0], graph.edges[:, 1]
        self.out = float(hw.act_bytes) * graph.output_size.astype(np.float64)
        self.sink = np.ones(graph.num_nodes, bool)
        self.sink[self.src] = False
        self.max_consumer = np.full(graph.num_nodes, -2, np.int64)  # -2: no consumer
        np.maximum.at(self.max_consumer, self.src, pos[self.dst])

    def band_cut(self, lo: int, hi: int, load: np.ndarray | None = None, price: float = 0.0) -> list[np.ndarray]:
        """The schedules (int64[N]) of the band ``[lo, hi)``'s minimum cuts of the bytes crossing the boundary: the
        smallest and the largest stage-k side among them (one schedule when they agree).

        Network (source side = stage k; band nodes 0..b-1, tensor nodes b.., then s, t): an edge (u, v) inside the
        band is an infinite arc v -> u (v on stage k puts u there); a band node whose tensor crosses whenever the node
        is on stage k (a sink, or a consumer at position >= hi) has an arc u -> t of out_u; any other tensor with a
        consumer in the band, produced in the band or before it, gets a node x with arcs x -> w (infinite) to its
        consumers w in the band and u -> x (u in the band) or s -> x (u before it) of out_u: paid iff the producer
        is on stage k and some consumer is not. A ``price`` (bytes per unit of ``load``, f64[m] by position) adds
        ``price * load(band nodes on stage k)`` to the cut (arcs v -> t of ``price * load_v``; a negative price: arcs
        s -> v of ``-price * load_v``, the same cut up to a constant), which steers the cut towards balance."""
        pos, src, dst, b = self.pos, self.src, self.dst, hi - lo
        free = (pos >= lo) & (pos < hi)
        forced = free & (self.sink | (self.max_consumer >= hi))
        hyper = (pos < hi) & ~self.sink & (self.max_consumer < hi) & (self.max_consumer >= lo)
        tensors = np.nonzero(hyper)[0]
        tid = np.full(len(pos), -1, np.int64)
        tid[tensors] = b + np.arange(len(tensors))
        source, sink = b + len(tensors), b + len(tensors) + 1
        inner = free[src] & free[dst]
        fan = hyper[src] & free[dst]
        from_band = free[tensors]
        fin_rows = np.concatenate([pos[forced] - lo, pos[tensors[from_band]] - lo,
                                   np.full(int(np.sum(~from_band)), source)])
        fin_cols = np.concatenate([np.full(int(np.sum(forced)), sink), tid[tensors[from_band]],
                                   tid[tensors[~from_band]]])
        fin = np.concatenate([self.out[forced], self.out[tensors[from_band]], self.out[tensors[~from_band]]])
        if price != 0.0 and load is not None:
            band = np.arange(b)
            fin_rows = np.concatenate([fin_rows, band if price > 0 else np.full(b, source)])
            fin_cols = np.concatenate([fin_cols, np.full(b, sink) if price > 0 else band])
            fin = np.concatenate([fin, abs(price) * load[lo:hi]])
        total = float(fin.sum())
        caps = np.rint(fin * (_FINITE_TOTAL / total if total > 0 else 1.0)).astype(np.int64)
        rows = np.concatenate([pos[dst[inner]] - lo, tid[src[fan]], fin_rows]).astype(np.int32)
        cols = np.concatenate([pos[src[inner]] - lo, pos[dst[fan]] - lo, fin_cols]).astype(np.int32)
        data = np.concatenate([np.full(int(inner.sum() + fan.sum()), _INF_CAP, np.int64), caps])
        keep = data > 0
        size = source + 2
        small, large = _min_cut_sides(rows[keep], cols[keep], data[keep].astype(np.int32), size, source, sink)
        out = []
        for side in (small[:b], large[:b]):
            new = self.s.copy()
            new[self.order] = self.k + 1
            new[self.order[:lo]] = self.k
            new[self.order[lo:hi][side]] = self.k
            if not out or not np.array_equal(new, out[0]):
                out.append(new)
        return out


def load_max_flow() -> float:
    """Seconds spent importing OR-tools' maximum-flow module now (0 once imported): one-off set-up, reported apart
    from the scheduling time by the callers (:func:`_min_cut_sides` imports it at its first use otherwise)."""
    import time

    if "ortools.graph.python.max_flow" in sys.modules:
        return 0.0
    start = time.perf_counter()
    from ortools.graph.python import max_flow  # noqa: F401

    return time.perf_counter() - start


def _min_cut_sides(rows: np.ndarray, cols: np.ndarray, caps: np.ndarray, size: int, source: int,
                   sink: int) -> tuple[np.ndarray, np.ndarray]:
    """(smallest, largest) source sides (bool[size]) of the minimum s-t cuts of the network with arcs
    ``rows[i] -> cols[i]`` of capacity ``caps[i]`` (integers > 0; parallel arcs are merged): the nodes reachable from s
    in the residual network of a maximum flow, and all but those that reach t in it. Both sides are the same for
    every maximum flow. OR-tools' push-relabel maximum flow (C++). It replaced a Python Dinic and SciPy's (session
    34): on the 159 networks of the default decoding's re-cuts of five validation models (2-core CPU, thread time per
    network) 0.04 / 0.06 / 0.11 / 0.22 ms at 6-49 / 50-199 / 200-399 / 400-782 nodes against 0.12 / 0.41 (Python)
    and 0.54 / 0.94 ms (SciPy), with the same sides on all 159."""
    from ortools.graph.python import max_flow  # imported at the first use (or by :func:`load_max_flow`)

    keys, where = np.unique(rows.astype(np.int64) * size + cols, return_inverse=True)  # parallel arcs merged
    merged = np.bincount(where, caps.astype(np.int64), len(keys)).astype(np.int64)
    flow = max_flow.SimpleMaxFlow()
    flow.add_arc_with_capacity(int(sink), int(source), 0)  # OR-tools knows only nodes on arcs: s and t always exist
    flow.add_arcs_with_capacity(keys // size, keys % size, merged)
    status = flow.solve(int(source), int(sink))
    if status != flow.OPTIMAL:  # int32 capacities on fewer than 2**31 arcs cannot overflow its int64 flow
        raise RuntimeError(f"the band cut's maximum flow failed (OR-tools status {status})")
    small = np.zeros(size, bool)
    small[flow.get_source_side_min_cut()] = True
    large = np.ones(size, bool)
    large[flow.get_sink_side_min_cut()] = False
    return small, large


def _band_load(graph: Graph, hw: Hardware, objective: str, nodes: np.ndarray) -> np.ndarray:
    """f64[m]: the load whose balance places the bands' centres (parameter bytes for ``paper``, compute seconds for
    ``latency``)."""
    if objective == "paper":
        return float(hw.param_bytes) * graph.params[nodes].astype(np.float64)
    return graph.macs[nodes].astype(np.float64) / float(hw.macs_per_s)


def boundary_candidates(graph: Graph, s: np.ndarray, k: int, hw: Hardware, objective: str,
                        centres: tuple[float, ...] = BAND_CENTRES,
                        widths: tuple[float, ...] = BAND_WIDTHS, prices: tuple[float, ...] = BAND_PRICES,
                        memo: dict | None = None) -> np.ndarray:
    """int64[C, N]: schedules equal to ``s`` but for the nodes on stages k and k + 1, re-split by the band cuts of
    :class:`_Boundary` (bands centred on the current cut and on the positions where the two stages' load reaches the
    fractions ``centres``, half-widths ``widths`` x the node count). All valid; duplicates and ``s`` removed.

    ``memo`` (optional; one dict per graph and hardware): the re-splits depend only on which nodes are on stages k and
    k + 1, before k and after k + 1, so they are kept under that pattern and reused for a schedule with the same one
    (the same candidates; the other stages taken from ``s``)."""
    s = np.asarray(s, np.int64)
    key = None
    if memo is not None:
        key = (objective, int(k), tuple(centres), tuple(widths), tuple(prices),
               np.clip(s, int(k) - 1, int(k) + 2).tobytes())
        if key in memo:
            nodes, split = memo[key]
            cands = np.repeat(s[None], len(split), axis=0)
            cands[:, nodes] = split
            return cands
    cands = _boundary_candidates(graph, s, k, hw, objective, centres, widths, prices)
    if key is not None:
        nodes = np.flatnonzero((s == k) | (s == k + 1))
        memo[key] = (nodes, cands[:, nodes])
    return cands


def _boundary_candidates(graph: Graph, s: np.ndarray, k: int, hw: Hardware, objective: str,
                         centres: tuple[float, ...], widths: tuple[float, ...],
                         prices: tuple[float, ...]) -> np.ndarray:
    """:func:`boundary_candidates` computed."""
    bd = _Boundary(graph, s, k, hw)
    m = len(bd.order)
    if m < 2:
        return np.zeros((0, len(s)), np.int64)
    node_load = _band_load(graph, hw, objective, bd.order)
    load = np.cumsum(node_load)
    points = {bd.cut} | {int(np.searchsorted(load, f * load[-1])) for f in centres if load[-1] > 0}
    unit = float(bd.out[bd.order].sum()) / load[-1] if load[-1] > 0 else 0.0
    seen, cands = {s.tobytes()}, []
    for c, w, p in itertools.product(sorted(points), widths, prices):
        half = max(1, int(round(w * m)))
        for new in bd.band_cut(max(0, c - half), min(m, c + half), node_load, p * unit):
            if new.tobytes() not in seen:
                seen.add(new.tobytes())
                cands.append(new)
    return np.array(cands, np.int64).reshape(-1, len(s))


def refine_boundaries(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray,
                      rounds: int = BOUNDARY_ROUNDS, centres: tuple[float, ...] = BAND_CENTRES,
                      widths: tuple[float, ...] = BAND_WIDTHS, prices: tuple[float, ...] = BAND_PRICES,
                      stop=None, memo: dict | None = None) -> np.ndarray:
    """int64[N] ``assignment`` (a valid schedule by node id) after re-cutting its stage boundaries (never worse).

    Each round visits the boundaries k | k + 1 (k = 0..K-2) in turn: the nodes on those two stages are split anew by
    the candidates of :func:`boundary_candidates` (minimum cuts of the bytes crossing the boundary within bands of a
    topological order: they can put some of a cell's parallel branches on stage k and the others on k + 1, a cut that
    no topological order of the policy's ranks may offer) and the best candidate (float64 objective) is taken if it
    is better by a relative :data:`BOUNDARY_MIN_IMPROVEMENT` (``centres``, ``widths``, ``prices``: the bands and
    prices of :func:`boundary_candidates`). Nothing to do on a graph with a single topological order
    (:func:`has_unique_order`: chain-like models; returned as given). At most ``rounds`` rounds, fewer when one improves
    nothing. ``stop()`` (optional) is looked at before each boundary: once True, the schedule so far is returned.
    ``memo``: :func:`boundary_candidates`'."""
    s = np.asarray(assignment, np.int64).copy()
    if int(hw.stages) < 2 or rounds <= 0 or graph.num_nodes < 2 or has_unique_order(graph):
        return s
    best = float(objectives_np(graph, s[None], hw, objective, lam)[0])
    for _ in range(int(rounds)):
        improved = False
        for k in range(int(hw.stages) - 1):
            if stop is not None and stop():
                return s
            cands = boundary_candidates(graph, s, k, hw, objective, centres, widths, prices, memo)
            if not len(cands):
                continue
            values = objectives_np(graph, cands, hw, objective, lam)
            if graph.num_edges:  # a guard: every candidate is valid by construction
                values[~np.all(cands[:, graph.edges[:, 0]] <= cands[:, graph.edges[:, 1]], axis=1)] = np.inf
            j = int(np.argmin(values))
            if values[j] < best * (1.0 - BOUNDARY_MIN_IMPROVEMENT):
                s, best, improved = cands[j], float(values[j]), True
        if not improved:
            break
    return s
