"""From a node permutation to a valid K-stage schedule, as RESPECT deploys its pointer's output.

1. :func:`next_fit`: walk the permutation and fill stage 0, 1, ... in turn; a node that does not
   fit in the current stage's remaining capacity ``cap`` opens the next stage (a node larger than
   ``cap`` on its own gets a stage to itself).
2. :func:`bisect_cap`: bisection of ``cap`` (on params normalised by the graph total) for the
   smallest cap whose packing uses at most K stages. Next-fit's stage count never grows with the
   cap, so the search is exact up to ``2^-iters``; the cap is always ``>= max(total / K, largest)``.
3. :func:`repair`: the pointer has no precedence mask, so an edge ``u -> v`` may come out with
   ``s(u) > s(v)``. Visiting nodes in the MDP's topological order (by longest-path depth, ties by id),
   each node moves to the latest stage of its predecessors when that is later:
   ``s'(v) = max(s(v), max_u s'(u))``. The result is valid (``s(u) <= s(v)`` on every edge) and stays
   within 0..K-1; repaired stages may exceed the cap.

All functions take one padded graph (vmap for a batch) and return stages by position.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from respect_jax.graphs.padded import PaddedGraph


def next_fit(weights: jax.Array, cap: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Stage of each element of the sequence ``weights`` (f32[N]) and the number of stages used."""

    def body(carry, w):
        k, load = carry
        new = (load + w > cap) & (load > 0)
        k = k + new.astype(jnp.int32)
        load = jnp.where(new, w, load + w)
        return (k, load), k

    (k, _), stages = jax.lax.scan(body, (jnp.int32(0), jnp.float32(0.0)), weights)
    return stages, k + 1


def bisect_cap(graph: PaddedGraph, order: jax.Array, num_stages: int, iters: int = 30) -> tuple[jax.Array, jax.Array]:
    """Next-fit packing of ``order`` under the smallest feasible cap.

    Args:
        graph: one padded graph; order: i32[N] positions in decoding order (real nodes first).
    Returns:
        (stage i32[N] by position before repair, cap f32[] in params).
    """
    w = jnp.where(graph.node_mask, graph.params, 0.0)
    total = jnp.maximum(jnp.sum(w), 1.0)
    seq = w[order] / total
    lo = jnp.maximum(1.0 / num_stages, jnp.max(seq)) * (1.0 - 1e-6)
    hi = jnp.float32(1.0 + 1e-5)  # one stage holds everything

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        feasible = next_fit(seq, mid)[1] <= num_stages
        return jnp.where(feasible, lo, mid), jnp.where(feasible, mid, hi)

    _, hi = jax.lax.fori_loop(0, iters, body, (lo, hi))
    seq_stage, _ = next_fit(seq, hi)
    stage = jnp.zeros_like(order).at[order].set(seq_stage.astype(order.dtype))
    return jnp.where(graph.node_mask, stage, 0), hi * total


def repair(graph: PaddedGraph, stage: jax.Array) -> jax.Array:
    """Push every node to at least the stage of its predecessors (positions are topological)."""

    def body(s, v):
        pred_stage = jnp.where(graph.pred_mask[v], s[graph.preds[v]], 0)
        return s.at[v].max(jnp.max(pred_stage)), None

    stage, _ = jax.lax.scan(body, stage, jnp.arange(stage.shape[-1]))
    return jnp.where(graph.node_mask, stage, 0)


def schedule_from_order(graph: PaddedGraph, order: jax.Array, num_stages: int, iters: int = 30) -> jax.Array:
    """i32[N] valid stages by position: bisection packing of ``order`` then the repair pass."""
    stage, _ = bisect_cap(graph, order, num_stages, iters)
    return repair(graph, stage.astype(jnp.int32))
