"""Stage decoder: K masked logits for the current node from its context and per-stage tokens.

Inputs have arbitrary leading axes ``...`` (batch, samples, steps). For node t:

* query ``q = MLP(W_h h_t + W_g g + W_c context)`` from node t's embedding, the graph embedding and
  the context features of :func:`respect_jax.policy.features.features`;
* one token per stage ``z_k = relu(W_f stage_feats_k + E_k + W_q q)``, where ``E_k`` is the mean of
  ``W_e h_u`` over the nodes u already placed on stage k (so the decoder attends to the node
  embeddings per stage).

Everything linear in a node embedding (``W_h h``, ``W_e h``) is projected once per node by
:meth:`StageDecoder.project_nodes`, not once per step and stage: per stage token only the small
feature projection and the token blocks run.

``mlp`` adds pooled cross-stage context ``W_m mean_k z + W_x max_k z`` to every token, applies
residual blocks and scores each token; ``attention`` lets the K tokens self-attend, then scores
``(W_1 q) . (W_2 z_k) / sqrt(d)``. Logits are clipped with ``clip * tanh(. / clip)`` and masked to
the allowed stages.

With ``cut_heads`` > 0 the query first attends over the later positions j of the graph
(:class:`CutAttention`): where the current stage could be closed, at what load and at what
communication cost (:func:`respect_jax.policy.features.cut_features`), so a decision sees the whole
rest of the graph, not only the GNN's neighbourhood of node t.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from respect_jax import pytree as struct
from respect_jax.policy.features import NUM_CUT_FEATURES, NUM_STAGE_FEATURES, num_context_features

NEG_INF = -1e9


@struct.dataclass
class CutInputs:
    """Inputs of the cut attention for G graphs and T steps of each.

    Attributes:
        keys: f32[G, H, N, d'/H] and values: f32[G, H, d'/H, N] per-node projections
            (:meth:`CutAttention.project`, in the layouts of the attention's matmuls).
        pair: f32[G, T, N, NUM_CUT_FEATURES] :func:`~respect_jax.policy.features.cut_features` of step t
            and position j; valid: bool[G, T, N] (positions after t).
    """

    keys: jax.Array
    values: jax.Array
    pair: jax.Array
    valid: jax.Array


class CutAttention(nnx.Module):
    """Multi-head attention of the decoder query over the later positions of the graph.

    The score of position j for head h is ``(W_q q)_h . (W_k h_j)_h / sqrt(d'/H) + w_h(q) . c_tj``
    with ``c_tj`` the cut features (the query chooses how to weigh load, load squared and cut
    bytes, so a head can peak where the current stage would reach a target load at a cheap cut);
    the output ``W_o [sum_j a_j W_v h_j ; sum_j a_j c_tj]`` is added to the query. Costs O(N)
    per step: pair terms are linear in the query-dependent weights.
    """

    def __init__(self, width: int, d: int, heads: int, *, rngs: nnx.Rngs):
        self.heads = heads
        self.node_key = nnx.Linear(width, d, use_bias=False, rngs=rngs)
        self.node_value = nnx.Linear(width, d, use_bias=False, rngs=rngs)
        self.query = nnx.Linear(d, d, use_bias=False, rngs=rngs)
        self.pair_weights = nnx.Linear(d, heads * NUM_CUT_FEATURES, rngs=rngs)
        self.out = nnx.Linear(d + heads * NUM_CUT_FEATURES, d, rngs=rngs)

    def project(self, h: jax.Array) -> tuple[jax.Array, jax.Array]:
        """keys f32[B, H, N, d'/H] and values f32[B, H, d'/H, N] of node embeddings h f32[B, N, d].

        Computed once per graph, already in the layouts the score and output matmuls read on CPUs
        (contracted axis last; a step-by-step decoder would otherwise transpose them at every step:
        greedy decoding of a 345-node graph took 61 instead of 53 ms on a 2-core CPU).
        """
        split = lambda x: x.reshape(x.shape[:-1] + (self.heads, -1))
        keys = jnp.transpose(split(self.node_key(h)), (0, 2, 1, 3))
        values = jnp.transpose(split(self.node_value(h)), (0, 2, 3, 1))
        return keys, values

    def __call__(self, q: jax.Array, cut: CutInputs) -> jax.Array:
        """f32[G, S, T, d'] attention outputs for queries q f32[G, S, T, d'] (S rows per graph and step)."""
        g, s, t, d = q.shape
        h = self.heads
        qh = self.query(q.reshape(-1, d)).reshape(g, s, t, h, -1)
        w = self.pair_weights(q.reshape(-1, d)).reshape(g, s, t, h, NUM_CUT_FEATURES)
        score = jnp.einsum("gsthe,ghje->gstjh", qh, cut.keys) / jnp.sqrt(float(qh.shape[-1]))
        score = score + jnp.einsum("gsthf,gtjf->gstjh", w, cut.pair)
        valid = cut.valid[:, None, :, :, None]
        attn = jax.nn.softmax(jnp.where(valid, score, NEG_INF), axis=3) * valid  # none valid: all 0
        node_out = jnp.einsum("gstjh,ghej->gsthe", attn, cut.values).reshape(g * s * t, -1)
        pair_out = jnp.einsum("gstjh,gtjf->gsthf", attn, cut.pair).reshape(g * s * t, -1)
        return self.out(jnp.concatenate([node_out, pair_out], axis=-1)).reshape(g, s, t, d)


class ResidualBlock(nnx.Module):
    def __init__(self, width: int, *, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(width, rngs=rngs)
        self.lin1 = nnx.Linear(width, width, rngs=rngs)
        self.lin2 = nnx.Linear(width, width, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return x + self.lin2(jax.nn.relu(self.lin1(self.norm(x))))


class StageDecoder(nnx.Module):
    """Scores the K stages for the node being placed."""

    def __init__(
        self,
        width: int,
        dec_width: int,
        kind: str,
        layers: int,
        heads: int,
        logit_clip: float | None,
        stage_embeddings: bool,
        cut_heads: int = 0,
        feature_version: int = 1,
        *,
        rngs: nnx.Rngs,
    ):
        self.kind, self.logit_clip, self.stage_embeddings = kind, logit_clip, stage_embeddings
        d = dec_width
        self.node_query = nnx.Linear(width, d, rngs=rngs)
        self.graph_query = nnx.Linear(width, d, use_bias=False, rngs=rngs)
        self.context_query = nnx.Linear(num_context_features(feature_version), d, use_bias=False, rngs=rngs)
        self.query = nnx.Linear(d, d, rngs=rngs)
        self.stage_emb = nnx.Linear(width, d, use_bias=False, rngs=rngs) if stage_embeddings else None
        self.stage_feat = nnx.Linear(NUM_STAGE_FEATURES, d, rngs=rngs)
        self.query_token = nnx.Linear(d, d, use_bias=False, rngs=rngs)
        self.cut_attn = CutAttention(width, d, cut_heads, rngs=rngs) if cut_heads else None
        self.blocks = nnx.List([ResidualBlock(d, rngs=rngs) for _ in range(layers)])
        if kind == "mlp":
            self.pool_mean = nnx.Linear(d, d, use_bias=False, rngs=rngs)
            self.pool_max = nnx.Linear(d, d, use_bias=False, rngs=rngs)
            self.norm = nnx.LayerNorm(d, rngs=rngs)
            self.out = nnx.Linear(d, 1, rngs=rngs)
        else:
            heads = heads if d % heads == 0 else 1
            self.attn = nnx.List(
                [
                    nnx.MultiHeadAttention(num_heads=heads, in_features=d, qkv_features=d, decode=False, rngs=rngs)
                    for _ in range(layers)
                ]
            )
            self.attn_norms = nnx.List([nnx.LayerNorm(d, rngs=rngs) for _ in range(layers)])
            self.w_q = nnx.Linear(d, d, rngs=rngs)
            self.w_k = nnx.Linear(d, d, rngs=rngs)

    @property
    def emb_width(self) -> int:
        """Width of the per-stage embedding sums the decoding state carries (0 without them)."""
        return self.stage_emb.out_features if self.stage_emb is not None else 0

    def project_nodes(self, h: jax.Array, g: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Per-node/per-graph projections, computed once per graph.

        Args: h f32[..., N, d] node embeddings; g f32[..., d] graph embedding.
        Returns: node query part f32[..., N, d'], node stage-embedding part f32[..., N, e] (e = 0
        without stage embeddings) and graph query part f32[..., d'].
        """
        hq = self.node_query(h)
        he = self.stage_emb(h) if self.stage_emb is not None else jnp.zeros(h.shape[:-1] + (0,), h.dtype)
        return hq, he, self.graph_query(g)

    def __call__(
        self,
        hq_t: jax.Array,
        gq: jax.Array,
        context: jax.Array,
        stage_feats: jax.Array,
        stage_emb: jax.Array,
        allowed: jax.Array,
        cut: CutInputs | None = None,
    ) -> jax.Array:
        """Masked stage logits f32[..., K].

        Args:
            hq_t: f32[..., d'] node t's query part; gq: f32[..., d'] graph query part (project_nodes).
            context: f32[..., C] (C = num_context_features(feature_version));
            stage_feats: f32[..., K, NUM_STAGE_FEATURES].
            stage_emb: f32[..., K, e] mean projected embedding of the nodes on each stage.
            allowed: bool[..., K] stages allowed by precedence.
            cut: the cut attention's inputs (needed with ``cut_heads`` > 0); the leading axes ``...``
                are then [G, S, T] or [G, S] for T = 1 (G, T as in ``cut.pair``).
        """
        lead, k = stage_feats.shape[:-2], stage_feats.shape[-2]
        # dense layers run on 2-D [rows, features] arrays: XLA's CPU backend differentiates
        # matmuls with one contracting batch dimension much faster than with several
        m = int(np.prod(lead))
        hq_t, gq = hq_t.reshape(m, -1), gq.reshape(m, -1)
        q = self.query(jax.nn.relu(hq_t + gq + self.context_query(context.reshape(m, -1))))
        if self.cut_attn is not None:
            g_rows, t_rows = cut.pair.shape[:2]
            q_rows = q.reshape(g_rows, m // (g_rows * t_rows), t_rows, -1)
            q = q + self.cut_attn(q_rows, cut).reshape(m, -1)
        a = self.stage_feat(stage_feats.reshape(m * k, -1)).reshape(m, k, -1) + self.query_token(q)[:, None, :]
        if self.stage_embeddings:
            a = a + stage_emb.reshape(m, k, -1)
        z = jax.nn.relu(a)
        d = z.shape[-1]
        if self.kind == "mlp":
            pooled = self.pool_mean(jnp.mean(z, axis=1)) + self.pool_max(jnp.max(z, axis=1))
            u = (z + pooled[:, None, :]).reshape(m * k, d)
            for block in self.blocks:
                u = block(u)
            logits = self.out(jax.nn.relu(self.norm(u))).reshape(m, k)
        else:
            u = z
            for attn, norm, block in zip(self.attn, self.attn_norms, self.blocks, strict=True):
                x = norm(u)
                u = block((u + attn(x, x, x)).reshape(m * k, d)).reshape(m, k, d)
            keys = self.w_k(u.reshape(m * k, d)).reshape(m, k, d)
            logits = jnp.sum(self.w_q(q)[:, None, :] * keys, axis=-1) / jnp.sqrt(float(d))
        if self.logit_clip:
            logits = self.logit_clip * jnp.tanh(logits / self.logit_clip)
        return jnp.where(allowed, logits.reshape(*lead, k), NEG_INF)
