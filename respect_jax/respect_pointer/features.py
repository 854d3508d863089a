"""RESPECT's 15 node features (as its released code builds them): level, up to 6 predecessor levels and ids, id, weight.

Column layout of :func:`respect_features` (``P = max_preds``, 6 by default: 1 + 6 + 6 + 1 + 1 = 15):

=========  ===============================================================================
0          level: ``(depth + 1) / (max depth + 1)`` (longest-path level from the sources)
1..P       levels of the node's nearest P predecessors (largest positions first), 0 if none
P+1..2P    their ids ``(position + 1) / n``, 0 if none
2P+1       the node's id ``(position + 1) / n`` (position in the MDP order: by longest-path depth, ties by id)
2P+2       weight: ``params / max params`` (parameter memory, RESPECT's node weight)
=========  ===============================================================================

The original feeds raw values through a batch-normalised embedding; here they are normalised per
graph instead (so graphs of any size and weight scale share one range). Padding rows are 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from respect_jax.graphs.generators import depth_from_sources
from respect_jax.graphs.padded import PaddedGraph


def num_features(max_preds: int = 6) -> int:
    return 2 * max_preds + 3


def respect_features(graph: PaddedGraph, max_preds: int = 6) -> jax.Array:
    """f32[N, 2 * max_preds + 3] features of one padded graph (vmap for a batch)."""
    mask = graph.node_mask
    n_pad = graph.params.shape[-1]
    n = jnp.maximum(graph.num_nodes, 1).astype(jnp.float32)
    depth = jnp.where(mask, depth_from_sources(graph), 0).astype(jnp.float32)
    level = (depth + 1.0) / (jnp.max(depth) + 1.0)
    ident = (jnp.arange(n_pad, dtype=jnp.float32) + 1.0) / n
    # nearest predecessors first: sort the slots by position, descending, masked slots last
    key = jnp.where(graph.pred_mask, -graph.preds, n_pad)
    order = jnp.argsort(key, axis=-1)[:, :max_preds]
    preds = jnp.take_along_axis(graph.preds, order, axis=-1)
    pmask = jnp.take_along_axis(graph.pred_mask, order, axis=-1)
    pred_level = jnp.where(pmask, level[preds], 0.0)
    pred_id = jnp.where(pmask, ident[preds], 0.0)
    missing = max_preds - preds.shape[-1]
    if missing > 0:  # graphs whose pred bucket is smaller than max_preds
        pad = jnp.zeros((n_pad, missing), jnp.float32)
        pred_level = jnp.concatenate([pred_level, pad], axis=-1)
        pred_id = jnp.concatenate([pred_id, pad], axis=-1)
    params = jnp.where(mask, graph.params, 0.0)
    weight = params / jnp.maximum(jnp.max(params), 1.0)
    feats = jnp.concatenate([level[:, None], pred_level, pred_id, ident[:, None], weight[:, None]], axis=-1)
    return jnp.where(mask[:, None], feats, 0.0)
