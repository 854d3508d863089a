"""Fixed-shape graphs for JAX: nodes in SPEC topological order, padded to size buckets.

A :class:`PaddedGraph` holds one graph (or, with a leading batch axis, many) with shapes fixed by
its bucket ``(N, E, P)`` so that every jitted function compiles once per bucket:

* nodes are **relabelled into the SPEC order** (depth from the sources, ties by id): position
  ``i`` holds original node ``node_ids[i]``. Hence every edge goes from a lower to a higher
  position, and the scheduling MDP visits positions ``0, 1, ..., num_nodes-1``;
* padding nodes have zero counts and ``node_mask`` False; padding edges point 0 -> 0 with
  ``edge_mask`` False; ``preds[i]`` lists the predecessor positions of node ``i`` (``pred_mask``).

Padding never changes a cost: padding nodes carry no parameters, compute or tensors, and the
evaluator ignores them through the masks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax import pytree as struct
from respect_jax.graphs.graph import Graph

NODE_BUCKETS = (32, 64, 128, 256, 512, 1024)
PRED_BUCKETS = (4, 8, 16, 32, 64)


@struct.dataclass
class PaddedGraph:
    """One graph with fixed shapes (add a leading axis B for a batch).

    Attributes:
        params: f32[N] parameter count per node (0 on padding).
        output_size: f32[N] output tensor elements per node.
        macs: f32[N] multiply-accumulates per node.
        node_mask: bool[N] True for real nodes (a prefix of length num_nodes).
        senders: i32[E] producer position of each edge.
        receivers: i32[E] consumer position of each edge.
        edge_mask: bool[E] True for real edges.
        preds: i32[N, P] predecessor positions of each node (0 where masked).
        pred_mask: bool[N, P].
        num_nodes: i32[] real node count.
        node_ids: i32[N] original node id at each position (-1 on padding).
    """

    params: jax.Array
    output_size: jax.Array
    macs: jax.Array
    node_mask: jax.Array
    senders: jax.Array
    receivers: jax.Array
    edge_mask: jax.Array
    preds: jax.Array
    pred_mask: jax.Array
    num_nodes: jax.Array
    node_ids: jax.Array

    @property
    def max_nodes(self) -> int:
        return self.params.shape[-1]


def bucket_size(n: int, buckets: Sequence[int] = NODE_BUCKETS) -> int:
    """Smallest bucket >= n; beyond the last bucket, the next power of two."""
    for b in buckets:
        if n <= b:
            return b
    return 1 << math.ceil(math.log2(n))


def bucket_shape(graphs: Sequence[Graph]) -> tuple[int, int, int]:
    """The (N, E, P) padding shape that fits every graph of ``graphs``.

    N comes from NODE_BUCKETS, P (max in-degree) from PRED_BUCKETS and E is N times a power of two,
    so a dataset of similar graphs shares one shape (one compilation).
    """
    n_pad = bucket_size(max(g.num_nodes for g in graphs))
    max_in = max((int(np.bincount(g.edges[:, 1]).max()) if g.num_edges else 1) for g in graphs)
    p_pad = bucket_size(max_in, PRED_BUCKETS)
    max_e = max(g.num_edges for g in graphs)
    e_pad = n_pad
    while e_pad < max_e:
        e_pad *= 2
    return n_pad, e_pad, p_pad


def pad_graph(graph: Graph, shape: tuple[int, int, int] | None = None) -> PaddedGraph:
    """Relabel ``graph`` into the SPEC order and pad it to ``shape`` = (N, E, P) (NumPy arrays)."""
    n_pad, e_pad, p_pad = shape if shape is not None else bucket_shape([graph])
    n = graph.num_nodes
    if n > n_pad or graph.num_edges > e_pad:
        raise ValueError(f"graph {graph.name!r} ({n} nodes, {graph.num_edges} edges) exceeds shape {shape}")
    order = graph.topological_order()
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)

    def padded(values, dtype):
        out = np.zeros(n_pad, dtype=dtype)
        out[:n] = np.asarray(values)[order]
        return out

    senders = np.zeros(e_pad, np.int32)
    receivers = np.zeros(e_pad, np.int32)
    edge_mask = np.zeros(e_pad, bool)
    if graph.num_edges:
        s, r = position[graph.edges[:, 0]], position[graph.edges[:, 1]]
        by_receiver = np.lexsort((s, r))
        senders[: graph.num_edges] = s[by_receiver]
        receivers[: graph.num_edges] = r[by_receiver]
        edge_mask[: graph.num_edges] = True
    preds = np.zeros((n_pad, p_pad), np.int32)
    pred_mask = np.zeros((n_pad, p_pad), bool)
    if graph.num_edges:  # edges sorted by receiver, then sender: slot = rank within the receiver's run
        r = receivers[: graph.num_edges]
        slot = np.arange(graph.num_edges) - np.searchsorted(r, r, side="left")
        if slot.max() >= p_pad:
            raise ValueError(f"graph {graph.name!r}: node in-degree exceeds pred bucket {p_pad}")
        preds[r, slot] = senders[: graph.num_edges]
        pred_mask[r, slot] = True
    node_ids = np.full(n_pad, -1, np.int32)
    node_ids[:n] = order
    return PaddedGraph(
        params=padded(graph.params, np.float32),
        output_size=padded(graph.output_size, np.float32),
        macs=padded(graph.macs, np.float32),
        node_mask=np.arange(n_pad) < n,
        senders=senders,
        receivers=receivers,
        edge_mask=edge_mask,
        preds=preds,
        pred_mask=pred_mask,
        num_nodes=np.int32(n),
        node_ids=node_ids,
    )


def stack_graphs(graphs: Sequence[Graph], shape: tuple[int, int, int] | None = None) -> PaddedGraph:
    """Pad every graph to one common bucket shape and stack them: a PaddedGraph with axis B."""
    shape = shape if shape is not None else bucket_shape(graphs)
    padded = [pad_graph(g, shape) for g in graphs]
    return jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs)), *padded)


def graph_at(batch: PaddedGraph, index: int) -> PaddedGraph:
    """Graph ``index`` of a batched PaddedGraph."""
    return jax.tree.map(lambda x: x[index], batch)


def unstack_positions(batch: PaddedGraph, assignments) -> list[np.ndarray]:
    """Per-graph assignments by original id from batched position-ordered ones (i32[B, N])."""
    assignments = np.asarray(assignments)
    return [to_original_order(graph_at(batch, i), assignments[i]) for i in range(assignments.shape[0])]


def to_original_order(graph: PaddedGraph, assignment_by_position) -> np.ndarray:
    """Map an assignment indexed by position (SPEC order) back to original node ids (NumPy)."""
    n = int(graph.num_nodes)
    ids = np.asarray(graph.node_ids)[:n]
    out = np.empty(n, dtype=np.int64)
    out[ids] = np.asarray(assignment_by_position)[:n]
    return out


def to_position_order(graph: PaddedGraph, assignment_by_id) -> np.ndarray:
    """Map an assignment indexed by original node id to positions, padded with 0 (NumPy int32)."""
    n = int(graph.num_nodes)
    out = np.zeros(graph.max_nodes, dtype=np.int32)
    out[:n] = np.asarray(assignment_by_id)[np.asarray(graph.node_ids)[:n]]
    return out


def reachability(graph: PaddedGraph) -> jax.Array:
    """f32[N, N] ``R[u, v] = 1`` iff u is an ancestor of v or u == v (one graph).

    Built column by column in SPEC order with ``lax.scan`` (predecessors have lower positions):
    ``R[:, v] = e_v OR (OR over preds p of R[:, p])``. Padding nodes only reach themselves.
    """
    n = graph.params.shape[-1]

    def body(r, v):
        cols = r[:, graph.preds[v]]  # [N, P]
        col = jnp.any(cols & graph.pred_mask[v][None, :], axis=1) | (jnp.arange(n) == v)
        return r.at[:, v].set(col), None

    r, _ = jax.lax.scan(body, jnp.zeros((n, n), bool), jnp.arange(n))
    return r.astype(jnp.float32)


# ============================================================================ sparse (O(E)) helpers
#
# The dense :func:`reachability` matrix is N x N (1 GiB of f32 at N = 16,384). The helpers below
# give the same closures with O(N + E) memory by iterating over the edges until a fixed point; on a
# DAG they converge after (longest path + 1) sweeps.


def _edge_message(graph: PaddedGraph, values: jax.Array, direction: str, fill) -> tuple[jax.Array, jax.Array]:
    """(messages [E, ...], segment ids i32[E]): ``values`` of each edge's source for its target.

    ``direction="down"`` sends from producer to consumer (aggregates over predecessors), ``"up"``
    from consumer to producer (over successors). Padding edges carry ``fill``.
    """
    src, dst = (graph.senders, graph.receivers) if direction == "down" else (graph.receivers, graph.senders)
    mask = graph.edge_mask.reshape(graph.edge_mask.shape + (1,) * (values.ndim - 1))
    return jnp.where(mask, values[src], fill), dst


def neighbour_reduce(graph: PaddedGraph, values: jax.Array, reduce: str, direction: str, fill) -> jax.Array:
    """[N, ...] the max/min of ``values`` over each node's predecessors (``"down"``) or successors
    (``"up"``); ``fill`` where a node has none (one graph, O(E) work)."""
    msg, dst = _edge_message(graph, values, direction, fill)
    n = values.shape[0]
    seg = jax.ops.segment_max if reduce == "max" else jax.ops.segment_min
    out = seg(msg, dst, num_segments=n)
    has = jnp.zeros(n, bool).at[dst].max(graph.edge_mask)
    return jnp.where(has.reshape((n,) + (1,) * (values.ndim - 1)), out, fill)


def closure_reduce(graph: PaddedGraph, values: jax.Array, reduce: str = "max", direction: str = "down") -> jax.Array:
    """[N, ...] ``y_v = reduce_{u in anc*(v)} values_u`` (``"down"``) or over ``desc*(v)`` (``"up"``).

    The sparse twin of ``reduce(R[:, v] * values)`` with :func:`reachability` ``R`` (v included):
    ``y <- reduce(y, reduce over neighbours of y)`` until nothing changes, one segment reduction
    over the E edges per sweep (longest path + 1 sweeps on a DAG). Works on one graph; extra
    trailing axes of ``values`` are reduced independently; ``jax.vmap`` it for a batch.

    Args:
        values: [N, ...] numbers per node (any trailing shape).
        reduce: ``"max"`` or ``"min"``.
        direction: ``"down"`` (ancestors) or ``"up"`` (descendants).
    """
    if reduce not in ("max", "min") or direction not in ("down", "up"):
        raise ValueError(f"closure_reduce: reduce must be max|min and direction down|up, got {reduce!r}, {direction!r}")
    info = jnp.finfo(values.dtype) if jnp.issubdtype(values.dtype, jnp.floating) else jnp.iinfo(values.dtype)
    fill = info.min if reduce == "max" else info.max
    combine = jnp.maximum if reduce == "max" else jnp.minimum

    def neighbours(y):
        if direction == "down":  # predecessor slots by gather (faster than a scatter on CPU)
            gathered = _pred_gather(graph, y, fill)
            return jnp.max(gathered, axis=1) if reduce == "max" else jnp.min(gathered, axis=1)
        return neighbour_reduce(graph, y, reduce, direction, fill)

    def sweep(state):
        y, _ = state
        new = combine(y, neighbours(y))
        return new, jnp.any(new != y)

    y, _ = jax.lax.while_loop(lambda s: s[1], sweep, (values, jnp.bool_(True)))
    return y


def _pred_gather(graph: PaddedGraph, values: jax.Array, fill) -> jax.Array:
    """[N, P, ...] ``values`` of each node's predecessor slots (``fill`` on empty slots)."""
    mask = graph.pred_mask.reshape(graph.pred_mask.shape + (1,) * (values.ndim - 1))
    return jnp.where(mask, values[graph.preds], fill)


def closure_top2(graph: PaddedGraph, keys: jax.Array, direction: str = "down") -> tuple[jax.Array, jax.Array]:
    """The two largest *distinct* ``keys`` over ``anc*(v)`` (``"down"``) or ``desc*(v)`` (``"up"``).

    ``keys`` must be unique per node (e.g. ``value * 2^s + node``) and >= 0. Sets of (largest,
    second largest) merge exactly (the second is the largest key below the merged first), so the
    sweeps of :func:`closure_reduce` give the exact pair; -1 where the closure has fewer keys.

    Args:
        keys: i32[N, ...] non-negative keys, distinct across nodes for each trailing index.

    Returns:
        (first i32[N, ...], second i32[N, ...]).
    """

    def merge_down(first, second):  # predecessor slots by gather (faster than a scatter)
        f_in, s_in = _pred_gather(graph, first, -1), _pred_gather(graph, second, -1)
        top = jnp.maximum(first, jnp.max(f_in, axis=1))
        f_below = jnp.where(f_in < jnp.expand_dims(top, 1), f_in, -1)
        nxt = jnp.maximum(jnp.where(first < top, first, -1), second)
        nxt = jnp.maximum(nxt, jnp.max(jnp.maximum(f_below, s_in), axis=1))
        return top, nxt

    def merge_up(first, second):  # successors by two segment reductions over the edges
        top = jnp.maximum(first, neighbour_reduce(graph, first, "max", "up", -1))
        msg_first, dst = _edge_message(graph, first, "up", -1)
        msg_second, _ = _edge_message(graph, second, "up", -1)
        msg = jnp.maximum(jnp.where(msg_first < top[dst], msg_first, -1), msg_second)
        nxt = jax.ops.segment_max(msg, dst, num_segments=first.shape[0])
        nxt = jnp.maximum(jnp.maximum(jnp.where(first < top, first, -1), second), nxt)
        return top, nxt

    merge = merge_down if direction == "down" else merge_up

    def sweep(state):
        first, second, _ = state
        new_first, new_second = merge(first, second)
        return new_first, new_second, jnp.any(new_first != first) | jnp.any(new_second != second)

    first, second, _ = jax.lax.while_loop(
        lambda s: s[2], sweep, (keys, jnp.full_like(keys, -1), jnp.bool_(True))
    )
    return first, second


def closure_accumulate(graph: PaddedGraph, values: jax.Array, direction: str, source_scale: jax.Array) -> jax.Array:
    """[N, ...] the linear propagation ``y_v = values_v + sum_{u -> v} scale_u y_u`` (``"down"``)
    or ``y_u = values_u + sum_{u -> w} scale_w y_w`` (``"up"``), solved by sweeps to its fixed point.

    With ``scale = 1`` it sums over *paths* (the closure sum ``R^T x`` counts an ancestor once per
    path); ``1 / degree`` splits each node's value evenly over its edges. Used for sparse
    approximate gradients of closures.

    Args:
        values: f32[N, ...].
        source_scale: f32[N] factor applied to the message a node sends.
    """
    n = values.shape[0]
    scale = source_scale.reshape((n,) + (1,) * (values.ndim - 1))

    def propagate(y):
        if direction == "down":
            return jnp.sum(_pred_gather(graph, y * scale, 0.0), axis=1)
        msg, dst = _edge_message(graph, y * scale, "up", 0.0)
        return jax.ops.segment_sum(msg, dst, num_segments=n)

    def sweep(state):
        y, _, i = state
        new = values + propagate(y)
        return new, jnp.any(new != y) & (i < n), i + 1

    y, _, _ = jax.lax.while_loop(lambda s: s[1], sweep, (values, jnp.bool_(True), jnp.int32(0)))
    return y
