"""Batched decoding of the pointer baseline: greedy, sampling and best-of-N (vmap over graphs).

:func:`make_decoder` mirrors :func:`respect_jax.policy.decoding.make_decoder`: a jitted
``(params, graphs, key) -> DecodeResult`` (stages by position, objective from the shared
evaluator, validity) compiled once per padded bucket, so ``respect-eval`` and the training loop's
evaluation use either network the same way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from respect_jax.costs import Hardware
from respect_jax.graphs.padded import PaddedGraph
from respect_jax.policy.decoding import DecodeResult, Decoding, keep_best
from respect_jax.respect_pointer.model import PointerNetwork, batch_features, batched_rollout
from respect_jax.respect_pointer.packing import schedule_from_order


def schedules(graphs: PaddedGraph, orders: jax.Array, num_stages: int, iters: int) -> jax.Array:
    """i32[B, N] valid stages of the permutations ``orders`` i32[B, N] (packing + repair)."""
    return jax.vmap(schedule_from_order, in_axes=(0, 0, None, None))(graphs, orders, num_stages, iters)


def decode_orders(model: PointerNetwork, graphs: PaddedGraph, key: jax.Array, decoding: Decoding) -> jax.Array:
    """i32[B, S, N] candidate permutations (S = 1 unless best_of; best_of includes the greedy one)."""
    feats = batch_features(model, graphs)
    if decoding.strategy == "greedy":
        return batched_rollout(model, graphs, key, greedy=True, feats=feats).order[:, None]
    if decoding.strategy == "sample":
        return batched_rollout(model, graphs, key, False, decoding.temperature, feats=feats).order[:, None]
    parts = []
    n_sampled = decoding.samples - 1 if decoding.include_greedy else decoding.samples
    if decoding.include_greedy:
        parts.append(batched_rollout(model, graphs, key, greedy=True, feats=feats).order[:, None])
    if n_sampled:
        keys = jax.random.split(key, n_sampled)
        sampled = jax.vmap(lambda k: batched_rollout(model, graphs, k, False, decoding.temperature, feats=feats).order)(
            keys
        )
        parts.append(jnp.swapaxes(sampled, 0, 1))
    return jnp.concatenate(parts, axis=1)


def decode(
    model: PointerNetwork,
    graphs: PaddedGraph,
    hw: Hardware,
    objective: str,
    lam: float,
    key: jax.Array,
    decoding: Decoding,
) -> DecodeResult:
    """One schedule per graph: decode permutations, pack and repair them (optionally hill-climb
    each, ``decoding.local_search``), keep the best (:func:`respect_jax.policy.decoding.keep_best`)."""
    orders = decode_orders(model, graphs, key, decoding)  # [B, S, N]
    b, s, n = orders.shape
    rep = jax.tree.map(lambda x: jnp.repeat(x, s, axis=0), graphs)
    stage = schedules(rep, orders.reshape(b * s, n), hw.stages, model.cfg.bisection_iters).reshape(b, s, n)
    return keep_best(graphs, stage, hw, objective, lam, decoding)


def make_decoder(model: PointerNetwork, hw: Hardware, objective: str, lam: float, decoding: Decoding):
    """A jitted ``(params, graphs, key) -> DecodeResult`` and the model's current ``params``."""
    if decoding.strategy in ("beam", "sbs"):
        name = decoding.strategy
        raise ValueError(f"decoding {name} is not available for the respect_pointer baseline (greedy, sample, best_of)")
    graphdef, params = nnx.split(model)

    @jax.jit
    def run(params, graphs: PaddedGraph, key: jax.Array) -> DecodeResult:
        return decode(nnx.merge(graphdef, params), graphs, hw, objective, lam, key, decoding)

    return run, params
