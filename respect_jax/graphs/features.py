"""Per-node features for learning and conversion of padded batches to ``jraph.GraphsTuple``.

All functions are pure jnp on one :class:`PaddedGraph` (vmap for a batch); padding rows are 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jraph

from respect_jax.graphs.generators import depth_from_sources
from respect_jax.graphs.padded import PaddedGraph

FEATURE_NAMES = (
    "params_frac",  # params / total params
    "params_log",  # log1p(params) / log1p(max params)
    "macs_frac",
    "macs_log",
    "output_frac",  # output_size / max output_size
    "output_log",
    "depth",  # ASAP level / max level
    "height",  # distance to a sink / max level
    "in_degree",  # / pred slots
    "out_degree",  # / pred slots
    "params_prefix",  # sum of params of positions <= i (SPEC order) / total
    "macs_prefix",
    "position",  # i / (n - 1)
    "is_source",
    "is_sink",
)
NUM_FEATURES = len(FEATURE_NAMES)


def height_to_sinks(graph: PaddedGraph) -> jax.Array:
    """i32[N] longest-path distance to a sink (positions must be a topological order)."""
    n_pad = graph.params.shape[-1]

    def body(height, v):
        target = jnp.where(graph.pred_mask[v], graph.preds[v], n_pad)
        height = height.at[target].max(height[v] + 1, mode="drop")
        return height, None

    height, _ = jax.lax.scan(body, jnp.zeros(n_pad, jnp.int32), jnp.arange(n_pad - 1, -1, -1))
    return jnp.where(graph.node_mask, height, 0)


def node_features(graph: PaddedGraph) -> jax.Array:
    """f32[N, NUM_FEATURES] normalised node features (see FEATURE_NAMES); padding rows are 0."""
    mask = graph.node_mask
    fmask = mask.astype(jnp.float32)
    n = jnp.maximum(graph.num_nodes, 1).astype(jnp.float32)

    def frac_and_log(x):
        x = jnp.where(mask, x, 0.0)
        frac = x / jnp.maximum(jnp.sum(x), 1.0)
        log = jnp.log1p(x) / jnp.maximum(jnp.log1p(jnp.max(x)), 1e-6)
        return frac, log, x

    p_frac, p_log, params = frac_and_log(graph.params)
    m_frac, m_log, macs = frac_and_log(graph.macs)
    out = jnp.where(mask, graph.output_size, 0.0)
    o_frac = out / jnp.maximum(jnp.max(out), 1.0)
    o_log = jnp.log1p(out) / jnp.maximum(jnp.log1p(jnp.max(out)), 1e-6)
    depth = depth_from_sources(graph).astype(jnp.float32)
    height = height_to_sinks(graph).astype(jnp.float32)
    levels = jnp.maximum(jnp.max(jnp.where(mask, depth, 0.0)), 1.0)
    slots = float(graph.preds.shape[-1])
    edge_w = graph.edge_mask.astype(jnp.float32)
    in_deg = jax.ops.segment_sum(edge_w, graph.receivers, num_segments=graph.params.shape[-1])
    out_deg = jax.ops.segment_sum(edge_w, graph.senders, num_segments=graph.params.shape[-1])
    feats = jnp.stack(
        [
            p_frac,
            p_log,
            m_frac,
            m_log,
            o_frac,
            o_log,
            depth / levels,
            height / levels,
            in_deg / slots,
            out_deg / slots,
            jnp.cumsum(params) / jnp.maximum(jnp.sum(params), 1.0),
            jnp.cumsum(macs) / jnp.maximum(jnp.sum(macs), 1.0),
            jnp.arange(graph.params.shape[-1]) / jnp.maximum(n - 1.0, 1.0),
            (in_deg == 0).astype(jnp.float32),
            (out_deg == 0).astype(jnp.float32),
        ],
        axis=-1,
    )
    return feats * fmask[:, None]


def to_graphs_tuple(batch: PaddedGraph, nodes: jax.Array) -> jraph.GraphsTuple:
    """A disjoint ``jraph.GraphsTuple`` of a padded batch (fixed shapes: B*N nodes, B*E edges).

    Args:
        batch: PaddedGraph with leading axis B.
        nodes: f32[B, N, F] node features.

    Every graph keeps its padded size, so ``n_node = [N] * B`` and shapes never change within a
    bucket. ``edges`` is f32[B*E, 1] holding the edge mask: message functions must multiply by it
    (padding edges are self-loops on position 0 of their graph).
    """
    b, n_pad = batch.params.shape
    e_pad = batch.senders.shape[-1]
    offset = (jnp.arange(b) * n_pad)[:, None]
    return jraph.GraphsTuple(
        nodes=nodes.reshape(b * n_pad, -1),
        edges=batch.edge_mask.reshape(b * e_pad, 1).astype(jnp.float32),
        senders=(batch.senders + offset).reshape(-1),
        receivers=(batch.receivers + offset).reshape(-1),
        n_node=jnp.full((b,), n_pad, jnp.int32),
        n_edge=jnp.full((b,), e_pad, jnp.int32),
        globals=batch.num_nodes.reshape(b, 1).astype(jnp.float32),
    )
