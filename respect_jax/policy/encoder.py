"""GNN encoder: message passing over both edge directions of a batch of padded DAGs.

Every layer aggregates messages from predecessors (forward edges) and from successors (backward
edges) with separate weights:

* ``gat``: attention-weighted aggregation (GAT-style scores ``LeakyReLU(a_src . W h_u + a_dst . W h_v)``,
  softmax over each node's incoming edges, per head);
* ``mean``: mean of the messages; ``sum``: their sum.

The update is ``h <- LayerNorm(h + MLP([h, agg_fwd, agg_bwd]))``.

Two interchangeable implementations of the aggregation (same parameters, same numbers; tested):

* ``segment``: on the disjoint ``jraph.GraphsTuple`` of the batch with ``jax.ops.segment_*`` over
  the flat node axis (``graphs_tuple.edges`` holds the edge mask, so padding edges never count);
* ``dense``: with a per-graph 0/1 adjacency matrix ``A[u, v]`` and batched matmuls. Scatter is slow
  on CPUs and small padded graphs make ``N x N`` cheap, so this is the default; ``segment`` scales
  to graphs far larger than their bucket of neighbours.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jraph
from flax import nnx

from respect_jax.graphs.features import NUM_FEATURES, to_graphs_tuple
from respect_jax.graphs.padded import PaddedGraph

AGGREGATIONS = ("dense", "segment")


class ShapeOnlyRngs:
    """Stands in for ``nnx.Rngs`` to build a module skeleton: every parameter becomes a ``jax.ShapeDtypeStruct``
    (what ``nnx.eval_shape`` of the construction leaves) without drawing or tracing anything, so that a checkpoint's
    parameters can be restored into it cheaply (``nnx.eval_shape`` traces every initialiser: ~0.5 s in a fresh
    process). The modules of this file pass :func:`shape_only` initialisers when given one."""

    def params(self) -> None:
        return None


def shape_only(key, shape, dtype=jnp.float32) -> jax.ShapeDtypeStruct:
    """An initialiser that allocates nothing: the parameter's shape and dtype."""
    return jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype))


def initialisers(rngs, *names: str) -> dict:
    """``{name: shape_only}`` for every initialiser keyword in ``names`` when ``rngs`` is a :class:`ShapeOnlyRngs`,
    else ``{}`` (the layers' own initialisers)."""
    return dict.fromkeys(names, shape_only) if isinstance(rngs, ShapeOnlyRngs) else {}


def linear(in_features: int, out_features: int, rngs) -> nnx.Linear:
    """``nnx.Linear(in_features, out_features)`` with its default initialisers, or a skeleton of one
    (:class:`ShapeOnlyRngs`)."""
    return nnx.Linear(in_features, out_features, rngs=rngs, **initialisers(rngs, "kernel_init", "bias_init"))


def adjacency(graph: PaddedGraph) -> jax.Array:
    """f32[N, N] ``A[u, v] = 1`` for every real edge u -> v of one padded graph."""
    n = graph.params.shape[-1]
    return jnp.zeros((n, n), jnp.float32).at[graph.senders, graph.receivers].max(graph.edge_mask.astype(jnp.float32))


class DirectedAggregation(nnx.Module):
    """Aggregate transformed neighbour embeddings along one edge direction."""

    def __init__(self, width: int, kind: str, heads: int, *, rngs: nnx.Rngs):
        self.kind, self.heads = kind, heads
        self.message = linear(width, width, rngs)
        if kind == "gat":
            init = shape_only if isinstance(rngs, ShapeOnlyRngs) else nnx.initializers.lecun_normal()
            self.att_src = nnx.Param(init(rngs.params(), (heads, width // heads)))
            self.att_dst = nnx.Param(init(rngs.params(), (heads, width // heads)))

    def segment(self, h: jax.Array, src: jax.Array, dst: jax.Array, weight: jax.Array) -> jax.Array:
        """Args: h f32[M, d] (M = all nodes of the batch), src/dst i32[E'], weight f32[E'] (0/1).

        Returns f32[M, d]: the aggregated messages arriving at every node.
        """
        m_nodes, width = h.shape
        msg = self.message(h)
        if self.kind != "gat":
            agg = jax.ops.segment_sum(msg[src] * weight[:, None], dst, num_segments=m_nodes)
            if self.kind == "mean":
                deg = jax.ops.segment_sum(weight, dst, num_segments=m_nodes)
                agg = agg / jnp.maximum(deg, 1.0)[:, None]
            return agg
        heads = msg.reshape(m_nodes, self.heads, width // self.heads)
        s_src = jnp.sum(heads * self.att_src[...], axis=-1)  # [M, H]
        s_dst = jnp.sum(heads * self.att_dst[...], axis=-1)
        score = jax.nn.leaky_relu(s_src[src] + s_dst[dst], negative_slope=0.2)  # [E', H]
        live = weight[:, None] > 0
        score = jnp.where(live, score, -1e9)
        top = jax.ops.segment_max(score, dst, num_segments=m_nodes)
        top = jnp.where(jnp.isfinite(top), top, 0.0)
        w = jnp.where(live, jnp.exp(score - top[dst]), 0.0)
        denom = jax.ops.segment_sum(w, dst, num_segments=m_nodes)
        alpha = w / jnp.maximum(denom[dst], 1e-9)
        agg = jax.ops.segment_sum(alpha[:, :, None] * heads[src], dst, num_segments=m_nodes)
        return agg.reshape(m_nodes, width)

    def dense(self, h: jax.Array, adj: jax.Array) -> jax.Array:
        """Args: h f32[B, N, d]; adj f32[B, N, N] with ``adj[b, u, v] = 1`` for a message u -> v.

        Returns f32[B, N, d]: the aggregated messages arriving at every node.
        """
        b, n, width = h.shape
        msg = self.message(h.reshape(b * n, width)).reshape(b, n, width)
        if self.kind != "gat":
            agg = jnp.einsum("buv,bud->bvd", adj, msg)
            if self.kind == "mean":
                agg = agg / jnp.maximum(jnp.sum(adj, axis=1), 1.0)[..., None]
            return agg
        hd = width // self.heads
        heads = msg.reshape(b, n, self.heads, hd)
        s_src = jnp.sum(heads * self.att_src[...], axis=-1)  # [B, N, H]
        s_dst = jnp.sum(heads * self.att_dst[...], axis=-1)
        # heads folded into the batch axis ([B*H, u, v]): one batch dimension per matmul, whose
        # gradient XLA's CPU backend computes much faster than that of a (b, h)-batched einsum
        fold = lambda x: jnp.swapaxes(x, 1, 2).reshape(b * self.heads, n, -1)  # [B, N, H, .] -> [B*H, N, .]
        src, dst = fold(s_src[..., None])[..., 0], fold(s_dst[..., None])[..., 0]  # [B*H, N]
        score = jax.nn.leaky_relu(src[:, :, None] + dst[:, None, :], negative_slope=0.2)  # [B*H, u, v]
        live = jnp.repeat(adj, self.heads, axis=0) > 0
        score = jnp.where(live, score, -1e9)
        # the softmax does not depend on the shift: no gradient through the max (cheaper backward)
        top = jax.lax.stop_gradient(jnp.max(score, axis=1, keepdims=True))
        w = jnp.where(live, jnp.exp(score - top), 0.0)
        alpha = w / jnp.maximum(jnp.sum(w, axis=1, keepdims=True), 1e-9)
        agg = jnp.einsum("xuv,xud->xvd", alpha, fold(heads))  # [B*H, v, hd]
        agg = jnp.swapaxes(agg.reshape(b, self.heads, n, hd), 1, 2)
        return agg.reshape(b, n, width)


class MessagePassingLayer(nnx.Module):
    """One bidirectional message-passing layer with a residual MLP update and LayerNorm."""

    def __init__(self, width: int, kind: str, heads: int, *, rngs: nnx.Rngs):
        self.forward_agg = DirectedAggregation(width, kind, heads, rngs=rngs)
        self.backward_agg = DirectedAggregation(width, kind, heads, rngs=rngs)
        self.update1 = linear(3 * width, width, rngs)
        self.update2 = linear(width, width, rngs)
        self.norm = nnx.LayerNorm(width, rngs=rngs, **initialisers(rngs, "scale_init", "bias_init"))

    def __call__(self, h: jax.Array, graph: jraph.GraphsTuple | None, adj: jax.Array | None) -> jax.Array:
        """h f32[B, N, d] -> f32[B, N, d]; pass ``graph`` (segment) or ``adj`` f32[B, N, N] (dense)."""
        if adj is not None:
            fwd = self.forward_agg.dense(h, adj)
            bwd = self.backward_agg.dense(h, jnp.swapaxes(adj, 1, 2))
        else:
            flat = h.reshape(-1, h.shape[-1])
            weight = graph.edges[:, 0]
            fwd = self.forward_agg.segment(flat, graph.senders, graph.receivers, weight).reshape(h.shape)
            bwd = self.backward_agg.segment(flat, graph.receivers, graph.senders, weight).reshape(h.shape)
        b, n, d = h.shape
        x = jnp.concatenate([h, fwd, bwd], axis=-1).reshape(b * n, 3 * d)  # 2-D: fast matmul gradients on CPU
        upd = self.update2(jax.nn.relu(self.update1(x)))
        return self.norm(h.reshape(b * n, d) + upd).reshape(b, n, d)


class GraphEncoder(nnx.Module):
    """Node features -> node embeddings f32[B, N, d] and a graph embedding f32[B, d]."""

    def __init__(
        self, width: int, layers: int, kind: str, heads: int, aggregation: str, *, rngs: nnx.Rngs,
        in_features: int = NUM_FEATURES,
    ):
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"policy.aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}")
        self.aggregation = aggregation
        self.embed1 = linear(in_features, width, rngs)
        self.embed2 = linear(width, width, rngs)
        self.layers = nnx.List([MessagePassingLayer(width, kind, heads, rngs=rngs) for _ in range(layers)])
        self.readout = linear(2 * width, width, rngs)

    def __call__(
        self, graphs: PaddedGraph, feats: jax.Array, aggregation: str | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """Args: graphs: B padded graphs; feats f32[B, N, in_features]; aggregation overrides the config.

        Returns (h f32[B, N, d], g f32[B, d]); padding rows of h are 0.
        """
        aggregation = aggregation or self.aggregation
        node_mask = graphs.node_mask
        fmask = node_mask[:, :, None].astype(jnp.float32)
        b, n, f = feats.shape
        h = self.embed2(jax.nn.relu(self.embed1(feats.reshape(b * n, f)))).reshape(b, n, -1) * fmask
        graph_tuple = adj = None
        if len(self.layers):
            if aggregation == "dense":
                adj = jax.vmap(adjacency)(graphs)
            else:
                graph_tuple = to_graphs_tuple(graphs, feats)
        for layer in self.layers:
            h = layer(h, graph_tuple, adj) * fmask
        count = jnp.maximum(jnp.sum(fmask, axis=1), 1.0)
        mean = jnp.sum(h, axis=1) / count
        top = jnp.max(jnp.where(fmask > 0, h, -1e9), axis=1)
        top = jnp.where(jnp.any(node_mask, axis=1)[:, None], top, 0.0)
        g = self.readout(jnp.concatenate([mean, top], axis=-1))
        return h, g
