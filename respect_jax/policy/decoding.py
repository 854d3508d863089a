"""Decoding strategies (all batched): greedy, sampling with a temperature, best-of-N samples
(independent, or distinct: stochastic beam search), beam search over the policy's log-probabilities,
each optionally followed by a local search
(:mod:`respect_jax.local_search`). Their options are :class:`respect_jax.policy.config.Decoding` (re-exported here).

:func:`make_decoder` returns one jitted function ``(params, graphs, key) -> DecodeResult`` per
strategy; it compiles once per padded bucket shape. Every schedule it returns is valid by
construction (masked logits, see :mod:`respect_jax.policy.model`), and its objective comes from
the shared evaluator.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from respect_jax import pytree as struct
from respect_jax.costs import Hardware
from respect_jax.graphs.padded import PaddedGraph
from respect_jax.local_search import improve
from respect_jax.policy.config import MULTI_STRATEGIES, STRATEGIES, Decoding  # noqa: F401 (re-exported)
from respect_jax.policy.model import SchedulingPolicy, beam_search, rollout, schedule_objectives

#: message passing of the encoder pass of every decoding. Both implementations compute the same
#: embeddings (tests/test_policy.py). Without a gradient the jraph segment ops are faster from the
#: 64-node bucket up, because the dense path builds [N, N] attention scores per head; at the 32-node
#: bucket the two are close. Training keeps the network's own ``policy.aggregation`` (dense by default):
#: differentiated, dense is the faster one on the training graphs. Timings:
#: experiments/results/bench_aggregation.md.
INFERENCE_AGGREGATION = "segment"


@struct.dataclass
class DecodeResult:
    """stage: i32[B, N] chosen schedule by position; objective f32[B]; valid bool[B]."""

    stage: jax.Array
    objective: jax.Array
    valid: jax.Array


def candidates(
    model: SchedulingPolicy,
    graphs: PaddedGraph,
    h: jax.Array,
    g: jax.Array,
    hw: Hardware,
    objective: str,
    lam: float,
    key: jax.Array,
    samples: int,
    include_greedy: bool,
    temperature: float,
) -> jax.Array:
    """i32[B, S, N] ``samples`` schedules per graph: the greedy one first when ``include_greedy``,
    the rest sampled at ``temperature`` with ``key`` (embeddings h f32[B, N, d], g f32[B, d])."""
    parts = []
    if include_greedy:  # greedy decoding draws no random numbers
        parts.append(rollout(model, graphs, h, g, hw, objective, lam, key, 1, greedy=True))
    n_sampled = samples - len(parts)
    if n_sampled:
        parts.append(rollout(model, graphs, h, g, hw, objective, lam, key, n_sampled, False, temperature))
    return jnp.concatenate(parts, axis=1)


def decode_candidates(
    model: SchedulingPolicy,
    graphs: PaddedGraph,
    hw: Hardware,
    objective: str,
    lam: float,
    key: jax.Array,
    decoding: Decoding,
) -> jax.Array:
    """The candidate schedules i32[B, S, N] of ``decoding`` for every graph of the batch, before
    local search and the choice of the best (S = 1 for greedy and sample; traceable).

    The encoder runs with :data:`INFERENCE_AGGREGATION`, whatever the network was trained with.
    """
    d = decoding
    h, g = model.encode(graphs, aggregation=INFERENCE_AGGREGATION)
    if d.strategy == "greedy":
        return rollout(model, graphs, h, g, hw, objective, lam, key, 1, greedy=True)
    if d.strategy == "sample":
        return rollout(model, graphs, h, g, hw, objective, lam, key, 1, greedy=False, temperature=d.temperature)
    if d.strategy == "beam":
        return beam_search(model, graphs, h, g, hw, objective, lam, d.samples)
    if d.strategy == "sbs":
        return beam_search(model, graphs, h, g, hw, objective, lam, d.samples, key=key, temperature=d.temperature)
    return candidates(model, graphs, h, g, hw, objective, lam, key, d.samples, d.include_greedy, d.temperature)


def decode(
    model: SchedulingPolicy,
    graphs: PaddedGraph,
    hw: Hardware,
    objective: str,
    lam: float,
    key: jax.Array,
    decoding: Decoding,
) -> DecodeResult:
    """Decode one schedule per graph of the batch with ``decoding`` (traceable; see make_decoder):
    the best of :func:`decode_candidates` after ``decoding``'s local search (:func:`keep_best`)."""
    stage = decode_candidates(model, graphs, hw, objective, lam, key, decoding)
    return keep_best(graphs, stage, hw, objective, lam, decoding)


def keep_best(
    graphs: PaddedGraph, stage: jax.Array, hw: Hardware, objective: str, lam: float, decoding: Decoding
) -> DecodeResult:
    """The best of the candidates i32[B, S, N] of every graph, after ``decoding``'s local search.

    Every candidate is hill-climbed (``local_search``); with ``pair_escapes`` only the best
    ``pair_candidates`` of them then get the pair escapes (a pair neighbourhood costs 2N single ones);
    the best by the shared evaluator is kept. Shared by every decoder of schedules.
    """
    d = decoding
    obj, valid = schedule_objectives(graphs, stage, hw, objective, lam)
    if d.local_search:
        stage, obj, valid = refine(graphs, stage, hw, objective, lam, d.local_search)
    take = lambda x, idx: jnp.take_along_axis(x, idx.reshape(idx.shape + (1,) * (x.ndim - 2)), axis=1)
    if d.pair_escapes:
        top = jnp.argsort(jnp.where(valid, obj, jnp.inf), axis=1)[:, : min(d.pair_candidates, stage.shape[1])]
        polish = lambda g, s: improve(g, s, hw, objective, lam, d.local_search, pair_escapes=d.pair_escapes)[:2]
        stage, obj = jax.vmap(jax.vmap(polish, in_axes=(None, 0)))(graphs, take(stage, top))
        valid = jnp.isfinite(obj)
    best = jnp.argmin(jnp.where(valid, obj, jnp.inf), axis=1)[:, None]
    return DecodeResult(stage=take(stage, best)[:, 0], objective=take(obj, best)[:, 0], valid=take(valid, best)[:, 0])


def refine(
    graphs: PaddedGraph, stage: jax.Array, hw: Hardware, objective: str, lam: float, max_steps: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Hill-climb every candidate schedule i32[B, S, N] (valid ones) of a batch of B graphs.

    Returns (stage i32[B, S, N], objective f32[B, S] from the shared evaluator, valid bool[B, S]);
    each improved schedule is valid and never worse than its start.
    """
    per_graph = lambda g, st: jax.vmap(lambda s: improve(g, s, hw, objective, lam, max_steps)[:2])(st)
    better, obj = jax.vmap(per_graph)(graphs, stage)
    return better, obj, jnp.isfinite(obj)


def make_decoder(model: SchedulingPolicy, hw: Hardware, objective: str, lam: float, decoding: Decoding):
    """A jitted ``(params, graphs, key) -> DecodeResult`` and the model's current ``params``.

    ``params`` is the ``nnx.State`` of ``model``; pass updated params to reuse the compilation.
    """
    graphdef, params = nnx.split(model)

    @jax.jit
    def run(params, graphs: PaddedGraph, key: jax.Array) -> DecodeResult:
        return decode(nnx.merge(graphdef, params), graphs, hw, objective, lam, key, decoding)

    return run, params
