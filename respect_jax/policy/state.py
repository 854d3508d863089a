"""The raw state of a partial schedule, as the decoder sees it, computed two ways that agree exactly.

The decoder places the nodes of a :class:`~respect_jax.graphs.padded.PaddedGraph` in the graph's order
(positions ``0..n-1``, producers before consumers), one per step, as the scheduling environment does
(:mod:`respect_jax.env`; an action below the precedence bound ``max(s(u) : u in pred(t))`` is raised to it).
Before placing node t it looks at the partial schedule ``s[0..t-1]`` through the quantities of
:class:`~respect_jax.policy.features.StepQuantities` (per-stage memory, compute, node counts, bytes crossing
into each stage, bytes still awaited, the precedence bound, per-stage embedding sums, look-ahead loads).

:func:`prefix_quantities` computes them for every ``t`` at once from a known schedule (teacher
forcing: exclusive cumulative sums and interval counts, no scan), :func:`step_quantities` from a
:class:`DecodeState` during autoregressive decoding, whose :func:`advance` places a node through the
environment's transition (:func:`respect_jax.env.environment.place_node`). :mod:`respect_jax.policy.features` turns
either into the decoder's normalised inputs. All functions work on one graph; vmap them for batches.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from respect_jax import pytree as struct
from respect_jax.env.environment import place_node, precedence_bound
from respect_jax.graphs.padded import PaddedGraph
from respect_jax.policy.features import GraphStatics, StepQuantities


@struct.dataclass
class DecodeState:
    """Autoregressive decoding state of one graph.

    Attributes:
        stage: i32[N] stage of placed nodes, -1 for unplaced ones.
        last: i32[N] ``L_t(u)`` of placed nodes (largest stage among placed consumers, K-1 for
            sinks, at least ``stage``), -1 for unplaced ones.
        mem, macs, count: f32[K] running per-stage sums.
        emb: f32[K, d] running per-stage sum of node embeddings.
        lb: i32[N] largest stage of each node's placed ancestors (0 if none).
    """

    stage: jax.Array
    last: jax.Array
    lb: jax.Array
    mem: jax.Array
    macs: jax.Array
    count: jax.Array
    emb: jax.Array


def lookahead(
    lb: jax.Array, future: jax.Array, desc_t: jax.Array, st: GraphStatics, k_stages: int
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """(forced_par, pushed_par, forced_macs, pushed_macs) f32[K] from stage lower bounds.

    Args: lb i32[N] stage lower bound of every node; future bool[N] unplaced real nodes after t;
    desc_t bool[N] descendants of t.
    """
    ks = jnp.arange(k_stages)
    at_or_above = (lb[:, None] >= ks[None, :]) & future[:, None]  # [N, K]
    pushed = (lb[:, None] < ks[None, :]) & (future & desc_t)[:, None]
    par, macs = st.par_b[:, None], st.macs[:, None]
    return (
        jnp.sum(jnp.where(at_or_above, par, 0.0), axis=0),
        jnp.sum(jnp.where(pushed, par, 0.0), axis=0),
        jnp.sum(jnp.where(at_or_above, macs, 0.0), axis=0),
        jnp.sum(jnp.where(pushed, macs, 0.0), axis=0),
    )


# ============================================================================ teacher forcing


def first_consumer_at_or_after(st: GraphStatics, stage: jax.Array, k_stages: int) -> jax.Array:
    """i32[N, K] ``first[u, k]``: smallest consumer position w of u with ``s(w) >= k``; N if none.

    A graph output counts as consumed at its own position on stage K-1 (its tensor leaves the pipeline
    from the last stage, as the cost model's ``last(u) = K-1`` for a node without consumers).
    Dense over ``succ`` (no scatter: faster on CPUs for padded buckets).
    """
    n_pad = stage.shape[0]
    ks = jnp.arange(k_stages)
    idx = jnp.arange(n_pad, dtype=jnp.int32)
    ok = st.succ[:, :, None] & (stage[None, :, None] >= ks[None, None, :])  # [u, w, K]
    first = jnp.min(jnp.where(ok, idx[None, :, None], n_pad), axis=1)
    return jnp.where(st.is_sink[:, None], idx[:, None], first)


def prefix_quantities(
    graph: PaddedGraph, st: GraphStatics, stage: jax.Array, h: jax.Array, k_stages: int
) -> StepQuantities:
    """The raw state before every step t of a known schedule, all at once (no scan).

    Args:
        stage: i32[N] the schedule by position (padding entries are ignored).
        h: f32[N, e] (projected) node embeddings summed per stage into ``emb`` (e may be 0).
    Returns:
        StepQuantities with a leading axis N (entry t = state before placing node t).
    """
    n_pad = stage.shape[0]
    mask = graph.node_mask
    stage = jnp.where(mask, stage, 0).astype(jnp.int32)
    ks = jnp.arange(k_stages)
    onehot = ((stage[:, None] == ks[None, :]) & mask[:, None]).astype(jnp.float32)  # [N, K]
    # exclusive prefix sums over positions as matmuls with the strictly lower triangle (fast on CPU/GPU)
    earlier = (jnp.arange(n_pad)[None, :] < jnp.arange(n_pad)[:, None]).astype(jnp.float32)  # [t, u]
    loads = jnp.einsum("tu,ukc->tkc", earlier, onehot[:, :, None] * jnp.stack([st.par_b, st.macs, mask], -1)[:, None])
    mem, macs, count = loads[..., 0], loads[..., 1], loads[..., 2]
    first = first_consumer_at_or_after(st, stage, k_stages)  # [N, K]
    below = (stage[:, None] < ks[None, :]) & mask[:, None]  # s(u) < k
    contrib = jnp.where(below, st.out_b[:, None], 0.0)  # [N, K]
    t_col = jnp.arange(n_pad)[:, None, None]  # [t, 1, 1] against [1, u, K]
    # cross[t, k] = sum_u contrib[u, k] * [first[u, k] < t]
    cross = jnp.sum(jnp.where(first[None] < t_col, contrib[None], 0.0), axis=1)
    # open[t, k] = sum_u contrib[u, k] * [u < t <= min(maxsucc[u], first[u, k])], u not a sink
    end = jnp.minimum(st.maxsucc[:, None], first)
    u_row = jnp.arange(n_pad)[None, :, None]
    awaited = (u_row < t_col) & (t_col <= end[None]) & ~st.is_sink[None, :, None]
    open_ = jnp.sum(jnp.where(awaited, contrib[None], 0.0), axis=1)
    # predin[t, k] = sum_{p in pred(t)} out_p * [s(p) < k] * [first[p, k] >= t]
    p_first = first[graph.preds]  # [N, P, K]
    p_below = below[graph.preds]
    t_idx = jnp.arange(n_pad)[:, None, None]
    p_ok = graph.pred_mask[:, :, None] & p_below & (p_first >= t_idx)
    predin = jnp.sum(jnp.where(p_ok, st.out_b[graph.preds][:, :, None], 0.0), axis=1)
    low = jnp.max(jnp.where(graph.pred_mask, stage[graph.preds], 0), axis=1, initial=0)
    emb, _ = stage_sums_before(stage, mask, h, k_stages)
    # lb_t(w) = largest stage of w's ancestors placed before t: a running max over u < t
    anc_stage = jnp.where(st.desc & mask[:, None], stage[:, None] + 1, 0)  # [u, w]
    running = jax.lax.cummax(anc_stage, axis=0)
    lb = jnp.maximum(jnp.concatenate([jnp.zeros((1, n_pad), running.dtype), running[:-1]], axis=0) - 1, 0)  # [t, w]
    idx = jnp.arange(n_pad)
    future = ((idx[None, :] > idx[:, None]) & mask[None, :]).astype(jnp.float32)  # [t, w]
    weights = jnp.stack([st.par_b, st.macs], axis=-1)  # [w, 2]
    at_or_above = (lb[:, :, None] >= ks[None, None, :]).astype(jnp.float32)  # [t, w, K]
    forced = jnp.einsum("twk,tw,wc->tkc", at_or_above, future, weights)
    pushed_from = future * st.desc.astype(jnp.float32)  # t's descendants after t
    pushed = jnp.einsum("tw,wc->tc", pushed_from, weights)[:, None, :] - jnp.einsum(
        "twk,tw,wc->tkc", at_or_above, pushed_from, weights
    )
    forced_par, forced_macs = forced[..., 0], forced[..., 1]
    pushed_par, pushed_macs = pushed[..., 0], pushed[..., 1]
    return StepQuantities(
        mem=mem,
        macs=macs,
        count=count,
        cross=cross,
        open=open_,
        predin=predin,
        low=low,
        emb=emb,
        forced_par=forced_par,
        pushed_par=pushed_par,
        forced_macs=forced_macs,
        pushed_macs=pushed_macs,
    )


def stage_sums_before(
    stage: jax.Array, mask: jax.Array, h: jax.Array, k_stages: int, *, by_stage_rows: bool = True
) -> tuple[jax.Array, jax.Array]:
    """Per-stage sums over the nodes placed before every step of a known schedule (one graph).

    Args:
        stage: i32[N] the schedule by position; mask: bool[N] real nodes; h: f32[N, e] (e may be 0).
        by_stage_rows: how the prefix sums are multiplied out (same sums). True: one
            ``[t*K, u] @ [u, e]`` matmul whose left side depends on the schedule (the faster one for teacher
            forcing and REINFORCE's replay of one schedule per graph); False: the constant triangular
            ``[t, u]`` matrix times ``[u, K*e]`` (faster for the replay of S > 1 sampled schedules sharing h).
            Timings: experiments/results/prefix_sum_layouts.md.
    Returns:
        ``emb`` f32[N, K, e] (entry [t, k]: sum of h[u] over u < t with s(u) = k) and ``count``
        f32[N, K] (how many such u).
    """
    n_pad, e = stage.shape[0], h.shape[-1]
    onehot = ((stage[:, None] == jnp.arange(k_stages)[None, :]) & mask[:, None]).astype(jnp.float32)  # [N, K]
    earlier = (jnp.arange(n_pad)[None, :] < jnp.arange(n_pad)[:, None]).astype(jnp.float32)  # [t, u]
    if by_stage_rows:
        placed_on = (earlier[:, None, :] * onehot.T[None, :, :]).reshape(n_pad * k_stages, n_pad)
        return (placed_on @ h).reshape(n_pad, k_stages, e), jnp.sum(placed_on, axis=-1).reshape(n_pad, k_stages)
    placed = (onehot[:, :, None] * h[:, None, :]).reshape(n_pad, k_stages * e)
    return (earlier @ placed).reshape(n_pad, k_stages, e), earlier @ onehot


# ============================================================================ autoregressive


def init_decode_state(n_pad: int, k_stages: int, width: int) -> DecodeState:
    """The empty partial schedule of one graph (``width`` = embedding size d, 0 allowed)."""
    return DecodeState(
        stage=jnp.full((n_pad,), -1, jnp.int32),
        last=jnp.full((n_pad,), -1, jnp.int32),
        lb=jnp.zeros((n_pad,), jnp.int32),
        mem=jnp.zeros((k_stages,), jnp.float32),
        macs=jnp.zeros((k_stages,), jnp.float32),
        count=jnp.zeros((k_stages,), jnp.float32),
        emb=jnp.zeros((k_stages, width), jnp.float32),
    )


def step_quantities(graph: PaddedGraph, st: GraphStatics, ds: DecodeState, t: jax.Array) -> StepQuantities:
    """The raw state before placing node t, from the running :class:`DecodeState`."""
    k_stages = ds.mem.shape[0]
    ks = jnp.arange(k_stages)[None, :]
    placed = (ds.stage >= 0)[:, None]
    s, last = ds.stage[:, None], ds.last[:, None]
    cross = jnp.sum(jnp.where(placed & (s < ks) & (ks <= last), st.out_b[:, None], 0.0), axis=0)
    awaited = placed & (st.maxsucc >= t)[:, None] & (last < ks)
    open_ = jnp.sum(jnp.where(awaited, st.out_b[:, None], 0.0), axis=0)
    preds, pmask = graph.preds[t], graph.pred_mask[t]
    p_new = pmask[:, None] & (ds.last[preds][:, None] < ks)
    predin = jnp.sum(jnp.where(p_new, st.out_b[preds][:, None], 0.0), axis=0)
    low = precedence_bound(graph, ds.stage, t)
    idx = jnp.arange(ds.stage.shape[0])
    future = (idx > t) & graph.node_mask
    forced_par, pushed_par, forced_macs, pushed_macs = lookahead(ds.lb, future, st.desc[t], st, k_stages)
    return StepQuantities(
        mem=ds.mem,
        macs=ds.macs,
        count=ds.count,
        cross=cross,
        open=open_,
        predin=predin,
        low=low,
        emb=ds.emb,
        forced_par=forced_par,
        pushed_par=pushed_par,
        forced_macs=forced_macs,
        pushed_macs=pushed_macs,
    )


def advance(
    graph: PaddedGraph, st: GraphStatics, ds: DecodeState, t: jax.Array, action: jax.Array, h_t: jax.Array
) -> DecodeState:
    """Place node t on stage ``action`` through the environment's transition
    (:func:`respect_jax.env.environment.place_node`: raised to the precedence bound; a no-op once t >= n), then update
    the running sums the decoder reads.

    Args:
        h_t: f32[d] node t's embedding (d may be 0).
    """
    k_stages = ds.mem.shape[0]
    n_pad = ds.stage.shape[0]
    stage, a, active = place_node(graph, ds.stage, t, action, k_stages)
    preds, pmask = graph.preds[t], graph.pred_mask[t]
    last = ds.last.at[t].set(jnp.where(active, jnp.where(st.is_sink[t], k_stages - 1, a), ds.last[t]))
    last = last.at[jnp.where(pmask & active, preds, n_pad)].max(a, mode="drop")
    onehot = ((jnp.arange(k_stages) == a) & active).astype(jnp.float32)
    lb = jnp.where(st.desc[t] & active, jnp.maximum(ds.lb, a), ds.lb)
    return DecodeState(
        stage=stage,
        last=last,
        lb=lb,
        mem=ds.mem + onehot * st.par_b[t],
        macs=ds.macs + onehot * st.macs[t],
        count=ds.count + onehot,
        emb=ds.emb + onehot[:, None] * h_t[None, :],
    )
