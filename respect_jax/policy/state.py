"""Per-stage decoding state of the scheduling MDP, computed two ways that agree exactly.

The decoder places the nodes of a :class:`~respect_jax.graphs.padded.PaddedGraph` in SPEC order
(positions ``0..n-1``). Before placing node ``t`` it looks at the partial schedule ``s[0..t-1]``
through these raw quantities (K stages, bytes already multiplied by ``param_bytes``/``act_bytes``):

* ``mem[k]``    parameter bytes placed on stage k;
* ``macs[k]``   compute placed on stage k;  ``count[k]`` nodes placed on stage k;
* ``cross[k]``  bytes of tensors already known to enter stage k from stage k-1: producer ``u`` placed,
  ``s(u) < k <= L_t(u)`` with ``L_t(u)`` the largest stage among u's placed consumers (K-1 at
  once for a graph output, SPEC's ``last``); ``sum_k cross[k]`` is the communication so far;
* ``open[k]``   bytes of placed tensors still awaited by an unplaced consumer that would newly enter
  stage k if that consumer landed on k or later (``L_t(u) < k``);
* ``predin[k]`` bytes of node t's input tensors that newly enter stage k if t is placed on stage
  ``>= k`` (``cumsum(predin)[k]`` is the extra communication of placing t on k);
* ``low``       the smallest allowed stage, ``max(s(u) : u in pred(t))`` (the env's mask rule);
* ``emb[k]``    the sum of node embeddings placed on stage k.

:func:`prefix_quantities` computes them for every ``t`` at once from a known schedule (teacher
forcing: exclusive cumulative sums and interval counts, no scan), :func:`step_quantities` from a
:class:`DecodeState` during autoregressive decoding. :func:`features` turns either into the
decoder's normalised inputs. All functions work on one graph; vmap them for batches.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.padded import PaddedGraph, reachability

NUM_STAGE_FEATURES = 23
NUM_CONTEXT_FEATURES = 17
NUM_CUT_FEATURES = 8
#: extra context features of ``feature_version`` 2: K and the hardware relative to the graph
#: (:func:`hardware_context`); version 1 (every checkpoint before them) has none
NUM_HARDWARE_FEATURES = 8
FEATURE_VERSIONS = (1, 2)


def num_context_features(version: int) -> int:
    """Length of the decoder's context vector under feature ``version`` (1: 17, 2: 25)."""
    if version not in FEATURE_VERSIONS:
        raise ValueError(f"policy.feature_version must be one of {FEATURE_VERSIONS}, got {version!r}")
    return NUM_CONTEXT_FEATURES + (NUM_HARDWARE_FEATURES if version >= 2 else 0)


@struct.dataclass
class GraphStatics:
    """Per-graph constants of the decoder (one graph; N padded nodes).

    Attributes:
        par_b: f32[N] parameter bytes of each node (0 on padding).
        out_b: f32[N] output tensor bytes of each node.
        macs: f32[N] compute of each node.
        is_sink: bool[N] real node without successors (its tensor leaves from stage K-1).
        maxsucc: i32[N] largest successor position (the node itself for sinks and padding).
        rem_par: f32[N] fraction of parameter bytes at positions > t.
        rem_macs: f32[N] fraction of compute at positions > t.
        mem_scale: f32[] ``max(b_p * max(P / K, max p), 1)``: the paper objective's lower bound.
        macs_scale: f32[] ``max(M / K, 1)``.
        time_scale: f32[] the latency objective's lower bound (s).
        n: f32[] number of real nodes.
        desc: bool[N, N] ``desc[u, w]``: w is reachable from u by a non-empty path.
        succ: bool[N, N] ``succ[u, w]``: the edge u -> w exists.
        par_before: f32[N] parameter bytes at positions < j; macs_before: f32[N] the same for compute.
        cut_b: f32[N] bytes of the tensors crossing a cut just before position j (producer at a
            position < j and a consumer at >= j, or a graph output: it leaves from the last stage).
        hw_context: f32[NUM_HARDWARE_FEATURES] :func:`hardware_context` (read by feature version 2 only).
    """

    par_b: jax.Array
    out_b: jax.Array
    macs: jax.Array
    is_sink: jax.Array
    maxsucc: jax.Array
    rem_par: jax.Array
    rem_macs: jax.Array
    mem_scale: jax.Array
    macs_scale: jax.Array
    time_scale: jax.Array
    n: jax.Array
    desc: jax.Array
    succ: jax.Array
    par_before: jax.Array
    macs_before: jax.Array
    cut_b: jax.Array
    hw_context: jax.Array


@struct.dataclass
class StepQuantities:
    """Raw per-step state before placing node t (see the module docstring); add axes for batches.

    Attributes: mem, macs, count, cross, open, predin, forced_par, pushed_par, forced_macs,
    pushed_macs: f32[K]; low: i32[]; emb: f32[K, d].
    """

    mem: jax.Array
    macs: jax.Array
    count: jax.Array
    cross: jax.Array
    open: jax.Array
    predin: jax.Array
    low: jax.Array
    emb: jax.Array
    forced_par: jax.Array
    pushed_par: jax.Array
    forced_macs: jax.Array
    pushed_macs: jax.Array


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


def graph_statics(graph: PaddedGraph, hw: Hardware) -> GraphStatics:
    """The per-graph constants of one padded graph under hardware ``hw``."""
    k = hw.stages
    n_pad = graph.params.shape[-1]
    mask = graph.node_mask
    fmask = mask.astype(jnp.float32)
    par_b = hw.param_bytes * graph.params * fmask
    out_b = hw.act_bytes * graph.output_size * fmask
    macs = graph.macs * fmask
    edge_w = graph.edge_mask.astype(jnp.float32)
    out_deg = jax.ops.segment_sum(edge_w, graph.senders, num_segments=n_pad)
    idx = jnp.arange(n_pad, dtype=jnp.int32)
    succ_pos = jnp.where(graph.edge_mask, graph.receivers, -1)
    maxsucc = jax.ops.segment_max(succ_pos, graph.senders, num_segments=n_pad)
    maxsucc = jnp.maximum(maxsucc, idx)
    total_par, total_macs = jnp.sum(par_b), jnp.sum(macs)
    suffix_par = jnp.cumsum(par_b[::-1])[::-1] - par_b
    suffix_macs = jnp.cumsum(macs[::-1])[::-1] - macs
    mem_scale = jnp.maximum(jnp.maximum(total_par / k, jnp.max(par_b)), 1.0)
    time_lb = hw.stage_overhead_s + jnp.maximum(total_macs / k, jnp.max(macs)) / hw.macs_per_s
    is_sink = mask & (out_deg == 0)
    last_use = jnp.where(is_sink, n_pad, maxsucc)  # a graph output crosses every later cut
    crosses = (idx[:, None] < idx[None, :]) & (idx[None, :] <= last_use[:, None])  # [u, j]
    cut_b = (out_b @ crosses.astype(jnp.float32)) * fmask
    time_scale = jnp.maximum(time_lb, 1e-9)
    return GraphStatics(
        par_b=par_b,
        out_b=out_b,
        macs=macs,
        is_sink=is_sink,
        maxsucc=maxsucc.astype(jnp.int32),
        rem_par=suffix_par / jnp.maximum(total_par, 1.0),
        rem_macs=suffix_macs / jnp.maximum(total_macs, 1.0),
        mem_scale=mem_scale,
        macs_scale=jnp.maximum(total_macs / k, 1.0),
        time_scale=time_scale,
        n=jnp.maximum(graph.num_nodes, 1).astype(jnp.float32),
        desc=(reachability(graph) > 0) & ~jnp.eye(n_pad, dtype=bool),
        succ=jnp.zeros((n_pad, n_pad), bool).at[graph.senders, graph.receivers].max(graph.edge_mask),
        par_before=jnp.cumsum(par_b) - par_b,
        macs_before=jnp.cumsum(macs) - macs,
        cut_b=cut_b,
        hw_context=hardware_context(total_par, mem_scale, time_scale, cut_b, fmask, hw),
    )


def hardware_context(
    total_par: jax.Array, mem_scale: jax.Array, time_scale: jax.Array, cut_b: jax.Array, fmask: jax.Array, hw: Hardware
) -> jax.Array:
    """f32[NUM_HARDWARE_FEATURES]: K and the hardware rates relative to the graph's totals.

    Scale-free (unchanged when every byte count, or every rate and the overhead, is multiplied by the
    same factor; no dependence on the padded size): ``1/K``; memory pressure ``log1p(P / (K C))``
    (parameter bytes over the pipeline's SRAM); the overhead's share ``tau / T*`` of the latency
    bound ``T*``; ``log1p((P / K) / H / T*)`` (streaming a stage's share of parameters from the
    host, in units of ``T*``); ``log1p(mean cut bytes / L / T*)`` (link time of a typical cut of
    the SPEC order); ``log1p(mean cut bytes / mem_scale)`` (the same in the paper objective's
    units); ``log(H / L) / 4`` and ``log(b_a / b_p) / 2``.

    Args: ``total_par`` f32[] parameter bytes; ``mem_scale``, ``time_scale`` as in
    :class:`GraphStatics`; ``cut_b`` f32[N] bytes crossing each cut; ``fmask`` f32[N] real nodes.
    """
    k = float(hw.stages)
    mean_cut = jnp.sum(cut_b) / jnp.maximum(jnp.sum(fmask), 1.0)
    tiny = 1e-30
    return jnp.stack(
        [
            jnp.asarray(1.0 / k, jnp.float32),
            jnp.log1p(total_par / jnp.maximum(k * hw.sram_bytes, 1.0)),
            hw.stage_overhead_s / time_scale,
            jnp.log1p(total_par / k / hw.host_bw / time_scale),
            jnp.log1p(mean_cut / hw.link_bw / time_scale),
            jnp.log1p(mean_cut / mem_scale),
            jnp.log(hw.host_bw / hw.link_bw) / 4.0,
            jnp.log(jnp.maximum(hw.act_bytes, tiny) / jnp.maximum(hw.param_bytes, tiny)) / 2.0,
        ]
    ).astype(jnp.float32)


def cut_features(st: GraphStatics, t: jax.Array, hw: Hardware) -> tuple[jax.Array, jax.Array]:
    """What closing the current stage at a later position would cost, for placing node t.

    For every position j with ``t < j < n`` (a cut just before j: nodes t..j-1 join the current
    stage, the rest go later) the features are, normalised by the objectives' lower bounds:
    parameter bytes of t..j-1 and their square, compute of t..j-1 and its square, the bytes
    crossing the cut (plain and log1p), their link time, and ``(j - t) / n``. The squares let a
    query-dependent linear score peak at a target load. Used by the decoder's cut attention
    (:class:`respect_jax.policy.decoder.CutAttention`); one graph, one step.

    Returns: f32[N, NUM_CUT_FEATURES] (zero rows where not valid) and valid bool[N].
    """
    idx = jnp.arange(st.par_b.shape[0])
    valid = (idx > t) & (idx < st.n)
    par = (st.par_before - st.par_before[t]) / st.mem_scale
    macs = (st.macs_before - st.macs_before[t]) / st.macs_scale
    cut = st.cut_b / st.mem_scale
    feats = jnp.stack(
        [
            par,
            par * par,
            macs,
            macs * macs,
            cut,
            jnp.log1p(cut),
            st.cut_b / hw.link_bw / st.time_scale,
            (idx - t) / st.n,
        ],
        axis=-1,
    )
    return jnp.where(valid[:, None], feats, 0.0), valid


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

    A graph output counts as consumed at its own position on stage K-1 (SPEC's ``last = K-1``).
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
            ``[t*K, u] @ [u, e]`` matmul whose left side depends on the schedule (teacher forcing: 17%
            faster imitation epochs on a 2-core CPU; also REINFORCE's replay of one schedule per graph);
            False: the constant triangular ``[t, u]`` matrix times ``[u, K*e]`` (REINFORCE's replay of S > 1
            sampled schedules sharing h: 10-20% faster POMO epochs).
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
    low = jnp.max(jnp.where(pmask, ds.stage[preds], 0), initial=0)
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
    """Place node t on stage ``action`` (raised to the precedence bound; no-op once t >= n).

    Args:
        h_t: f32[d] node t's embedding (d may be 0).
    """
    k_stages = ds.mem.shape[0]
    n_pad = ds.stage.shape[0]
    active = t < graph.num_nodes
    preds, pmask = graph.preds[t], graph.pred_mask[t]
    low = jnp.max(jnp.where(pmask, ds.stage[preds], 0), initial=0)
    a = jnp.clip(jnp.maximum(action.astype(jnp.int32), low), 0, k_stages - 1)
    stage = ds.stage.at[t].set(jnp.where(active, a, ds.stage[t]))
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


# ============================================================================ features


def features(
    q: StepQuantities,
    st: GraphStatics,
    t: jax.Array,
    hw: Hardware,
    objective: str,
    lam: float,
    version: int = 1,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Normalised decoder inputs for placing node t (one graph, one step).

    ``hw``'s fields other than ``stages`` may be traced scalars (per-graph hardware in training).
    ``version`` 2 appends :func:`hardware_context` to the context; version 1 is the input of every
    checkpoint trained before it (same numbers as then).

    Returns:
        stage_feats f32[K, NUM_STAGE_FEATURES], context f32[num_context_features(version)] and the
        mask bool[K] of allowed stages (``k >= low``).
    """
    k_stages = hw.stages
    ks = jnp.arange(k_stages)
    a, m_scale, t_scale = st.mem_scale, st.macs_scale, st.time_scale
    pb, mc = st.par_b[t], st.macs[t]
    mem_here = q.mem + pb
    delta = jnp.cumsum(q.predin)
    comm_now = jnp.sum(q.cross)

    def stage_time(mem, macs, inbytes):
        spill = jnp.maximum(mem - hw.sram_bytes, 0.0)
        return hw.stage_overhead_s + macs / hw.macs_per_s + spill / hw.host_bw + inbytes / hw.link_bw

    time_now = stage_time(q.mem, q.macs, q.cross)
    time_here = stage_time(mem_here, q.macs + mc, q.cross + q.predin)
    paper_here = jnp.maximum(jnp.max(q.mem), mem_here) + lam * (comm_now + delta)
    # lower bounds on the final peak memory / compute per stage if t goes to stage k (rows: k, cols: j)
    here = ks[:, None] == ks[None, :]
    ge = ks[:, None] >= ks[None, :]  # [k, j]: k >= j
    spread = (k_stages - ks).astype(jnp.float32)  # stages j..K-1

    def bound(placed, own, forced, pushed):
        loads = placed[None, :] + jnp.where(here, own, 0.0)  # [k, j]
        placed_ge = jnp.cumsum(loads[:, ::-1], axis=1)[:, ::-1]
        total_ge = placed_ge + forced[None, :] + jnp.where(ge, pushed[None, :], 0.0)
        return jnp.maximum(jnp.max(loads, axis=1), jnp.max(total_ge / spread[None, :], axis=1))

    mem_bound = bound(q.mem, pb, q.forced_par, q.pushed_par)
    macs_bound = bound(q.macs, mc, q.forced_macs, q.pushed_macs)
    allowed = ks >= q.low
    scaled = jnp.stack(
        [
            q.mem / a,
            mem_here / a,
            jnp.maximum(mem_here - hw.sram_bytes, 0.0) / a,
            q.macs / m_scale,
            (q.macs + mc) / m_scale,
            q.cross / a,
            q.open / a,
            q.predin / a,
            delta / a,
            paper_here / a,
            time_now / t_scale,
            time_here / t_scale,
            jnp.maximum(jnp.max(time_now), time_here) / t_scale,
            mem_bound / a,
            (mem_bound + lam * (comm_now + delta)) / a,
            (hw.stage_overhead_s + macs_bound / hw.macs_per_s) / t_scale,
            q.forced_par / a,
            q.pushed_par / a,
        ],
        axis=-1,
    )
    k_den = float(max(k_stages - 1, 1))
    flags = jnp.stack(
        [
            allowed.astype(jnp.float32),
            (ks == q.low).astype(jnp.float32),
            ks / k_den,
            q.count / st.n,
            (q.count == 0).astype(jnp.float32),
        ],
        axis=-1,
    )
    stage_feats = jnp.concatenate([jnp.log1p(jnp.maximum(scaled, 0.0)), flags], axis=-1)
    obj_onehot = jnp.asarray([objective == name for name in OBJECTIVES], jnp.float32)
    context = jnp.concatenate(
        [
            jnp.stack(
                [
                    t / jnp.maximum(st.n - 1.0, 1.0),
                    jnp.log1p(st.n) / 7.0,
                    k_stages / 8.0,
                    jnp.log1p(pb / a),
                    jnp.log1p(st.out_b[t] / a),
                    jnp.log1p(mc / m_scale),
                    st.rem_par[t],
                    st.rem_macs[t],
                    jnp.log1p(comm_now / a),
                    jnp.log1p(jnp.max(q.mem) / a),
                    jnp.log1p(jnp.max(time_now) / t_scale),
                    q.low / k_den,
                    jnp.log1p(hw.sram_bytes / a),
                    jnp.asarray(lam, jnp.float32),
                    jnp.log1p(jnp.sum(q.open) / a),
                ]
            ),
            obj_onehot,
        ]
        + ([st.hw_context] if version >= 2 else [])
    )
    return stage_feats, context, allowed
