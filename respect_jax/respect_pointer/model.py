"""The pointer network of RESPECT (Kool et al.'s ``PointerNetwork``) in flax nnx.

Per graph (all functions take one graph; :func:`batched_rollout` vmaps them):

* embedding ``x_i = f_i W`` (no bias), an LSTM encoder over the nodes in input order (zero
  initial state) giving ``enc_i``;
* a decoder LSTM cell whose first input is a learned vector and then the embedding of the node
  chosen last; its state starts at the encoder's final state;
* ``glimpses`` attention readouts ``g = sum_i softmax(u_i) e_i`` with ``u_i = v . tanh(W_q q + e_i)``,
  ``e_i = W_r enc_i`` (masked), then the pointer scores ``C * tanh(u_i)`` of the same form;
* only already-chosen nodes are masked (no precedence mask, as in the original): the action is a
  permutation of the nodes.

Padding nodes are chosen after every real node (they are masked while real nodes remain); their
steps carry zero log-probability.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from respect_jax import pytree as struct
from respect_jax.graphs.padded import PaddedGraph
from respect_jax.respect_pointer.config import PointerConfig
from respect_jax.respect_pointer.features import num_features, respect_features

NEG = -1e9


class Attention(nnx.Module):
    """Bahdanau attention of the pointer network: ``u_i = v . tanh(W_q q + W_r ref_i)``."""

    def __init__(self, dim: int, *, rngs: nnx.Rngs):
        self.project_query = nnx.Linear(dim, dim, rngs=rngs)
        self.project_ref = nnx.Linear(dim, dim, rngs=rngs)
        bound = 1.0 / math.sqrt(dim)
        self.v = nnx.Param(jax.random.uniform(rngs.params(), (dim,), minval=-bound, maxval=bound))

    def scores(self, query: jax.Array, e: jax.Array) -> jax.Array:
        """f32[N] scores of query f32[d] against projected references e f32[N, d]."""
        return jnp.tanh(e + self.project_query(query)) @ self.v[...]


class PointerNetwork(nnx.Module):
    """LSTM encoder + LSTM decoder with glimpse and clipped pointer attention (module docstring)."""

    def __init__(self, cfg: PointerConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        f, e, h = num_features(cfg.max_preds), cfg.embedding, cfg.hidden
        std = 1.0 / math.sqrt(e)
        self.embed = nnx.Param(jax.random.uniform(rngs.params(), (f, e), minval=-std, maxval=std))
        self.decoder_in_0 = nnx.Param(jax.random.uniform(rngs.params(), (e,), minval=-std, maxval=std))
        self.encoder = nnx.LSTMCell(e, h, rngs=rngs)
        self.decoder = nnx.LSTMCell(e, h, rngs=rngs)
        self.glimpse = Attention(h, rngs=rngs)
        self.pointer = Attention(h, rngs=rngs)

    def features(self, graph: PaddedGraph) -> jax.Array:
        return respect_features(graph, self.cfg.max_preds)


@struct.dataclass
class Rollout:
    """One decoded permutation of one graph.

    order: i32[N] node position chosen at each step (real nodes in steps < num_nodes);
    log_prob: f32[] sum of the log-probabilities of the real steps (temperature 1).
    """

    order: jax.Array
    log_prob: jax.Array


def rollout(
    model: PointerNetwork,
    graph: PaddedGraph,
    key: jax.Array,
    greedy: bool,
    temperature: float = 1.0,
    input_order: jax.Array | None = None,
    feats: jax.Array | None = None,
) -> Rollout:
    """Decode one permutation of ``graph`` (greedy arg-max or a sample at ``temperature``).

    ``input_order`` (i32[N], a permutation with the real nodes first) is the order in which the
    encoder reads the nodes (default: the MDP order, by longest-path depth, ties by id). The returned order is
    in positions either way.
    ``feats``: the graph's precomputed :func:`respect_features` (f32[N, F]).
    """
    n_pad = graph.params.shape[-1]
    n = graph.num_nodes
    if input_order is None:
        input_order = jnp.arange(n_pad)
    node_mask = graph.node_mask[input_order]
    feats = model.features(graph) if feats is None else feats
    x = feats[input_order] @ model.embed[...]  # [N, E]
    hidden = model.cfg.hidden
    zeros = (jnp.zeros(hidden), jnp.zeros(hidden))

    def encode(carry, inp):
        t, xt = inp
        new, out = model.encoder(carry, xt)
        new = jax.tree.map(lambda a, b: jnp.where(t < n, a, b), new, carry)  # final state = last real node
        return new, out

    enc_state, enc = jax.lax.scan(encode, zeros, (jnp.arange(n_pad), x))
    e_glimpse = model.glimpse.project_ref(enc)
    e_pointer = model.pointer.project_ref(enc)
    clip = model.cfg.tanh_clip

    def decode(state, t):
        carry, inp, chosen = state
        carry, q = model.decoder(carry, inp)
        avail = jnp.where(t < n, node_mask, ~node_mask) & ~chosen
        for _ in range(model.cfg.glimpses):
            u = jnp.where(avail, model.glimpse.scores(q, e_glimpse), NEG)
            q = jax.nn.softmax(u) @ e_glimpse
        u = model.pointer.scores(q, e_pointer)
        logits = jnp.where(avail, clip * jnp.tanh(u) if clip else u, NEG)
        logp = jax.nn.log_softmax(logits)
        if greedy:
            idx = jnp.argmax(logits)
        else:
            idx = jax.random.categorical(jax.random.fold_in(key, t), logits / temperature)
        lp = jnp.where(t < n, logp[idx], 0.0)
        return (carry, x[idx], chosen.at[idx].set(True)), (idx, lp)

    init = (enc_state, model.decoder_in_0[...], jnp.zeros(n_pad, bool))
    _, (idx, lp) = jax.lax.scan(decode, init, jnp.arange(n_pad))
    return Rollout(order=input_order[idx].astype(jnp.int32), log_prob=jnp.sum(lp))


def shuffled_input_order(graph: PaddedGraph, key: jax.Array) -> jax.Array:
    """i32[N] a uniformly random order of the real nodes followed by the padding (in place)."""
    n_pad = graph.params.shape[-1]
    r = jax.random.uniform(key, (n_pad,))
    return jnp.argsort(jnp.where(graph.node_mask, r, 2.0 + jnp.arange(n_pad))).astype(jnp.int32)


def batched_rollout(
    model: PointerNetwork,
    graphs: PaddedGraph,
    key: jax.Array,
    greedy: bool,
    temperature: float = 1.0,
    shuffle: bool = False,
    feats: jax.Array | None = None,
) -> Rollout:
    """:func:`rollout` over a batch (leading axis B): order i32[B, N], log_prob f32[B].

    ``feats`` (f32[B, N, F], optional) lets several rollouts of one batch share the features.
    """
    keys = jax.random.split(key, graphs.params.shape[0])
    if feats is None:
        feats = batch_features(model, graphs)

    def one(graph, k, f):
        k_order, k_decode = jax.random.split(k)
        order = shuffled_input_order(graph, k_order) if shuffle else None
        return rollout(model, graph, k_decode, greedy, temperature, order, f)

    return jax.vmap(one)(graphs, keys, feats)


def batch_features(model: PointerNetwork, graphs: PaddedGraph) -> jax.Array:
    """f32[B, N, F] RESPECT features of a batch."""
    return jax.vmap(lambda g: respect_features(g, model.cfg.max_preds))(graphs)
