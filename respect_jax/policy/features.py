"""What the stage decoder sees: per-graph constants, the normalisers, and the named features.

Every feature is a named quantity; the input widths (:data:`NUM_STAGE_FEATURES`, :data:`NUM_CUT_FEATURES`,
:func:`num_context_features`) are the lengths of the name lists below, so adding a name is all it takes to
add an input (a trained network's width then no longer matches: add it under a new ``feature_version``).

Normalisers (per graph, :class:`GraphStatics`), so that the inputs of graphs of any size are O(1):

* ``mem_scale`` A (bytes): the ``paper`` objective's lower bound ``max(b_p max(P / K, max p), 1)`` (peak
  stage memory of a perfectly balanced split; P the graph's parameters, p one node's). Every byte count
  (memory, communication, spill) is divided by it.
* ``macs_scale`` (MACs): ``max(M / K, 1)``, a stage's share of the compute M. Compute is divided by it.
* ``time_scale`` (s): the ``latency`` objective's lower bound (:func:`respect_jax.costs.lower_bound_from_totals`:
  ``tau + max(M / K, max macs) / R``). Stage times are divided by it.
* ``n``: the number of real nodes (positions and node counts are divided by it).

Most per-stage loads enter as ``log1p(max(x, 0))`` of the normalised value (heavy-tailed: one node may hold
most of a graph's parameters); flags and shares enter as they are. The stage time of a hypothetical
placement is :func:`respect_jax.costs.stage_time`, the cost model's own formula.

All functions work on one graph and one step; vmap them for batches and steps.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from respect_jax import pytree as struct
from respect_jax.costs import OBJECTIVES, Hardware, lower_bound_from_totals, stage_time
from respect_jax.graphs.padded import PaddedGraph, reachability

#: per-stage loads, each entering as ``log1p(max(x, 0))``; "here": if node t is placed on stage k
STAGE_LOAD_FEATURES = (
    "mem",  # parameter bytes on stage k / A
    "mem_here",  # the same with node t on k / A
    "spill_here",  # bytes over the SRAM then (streamed from the host) / A
    "macs",  # compute on stage k / macs_scale
    "macs_here",  # the same with node t on k
    "cross",  # bytes already known to enter stage k from k-1 / A
    "open",  # bytes awaited by unplaced consumers that would newly enter k / A
    "predin",  # bytes of node t's inputs that newly enter stage k if t goes to k or later / A
    "extra_comm_here",  # communication added by placing t on k (cumsum of predin) / A
    "paper_here",  # the paper objective of the partial schedule with t on k / A
    "time",  # stage time T_k of the partial schedule / time_scale
    "time_here",  # T_k with t on k / time_scale
    "bottleneck_here",  # max(max_j T_j, T_k with t on k) / time_scale
    "mem_bound_here",  # lower bound on the final peak memory if t goes to k / A
    "paper_bound_here",  # that bound plus lam * communication so far (with t on k) / A
    "time_bound_here",  # compute-only stage time of the final bottleneck's lower bound / time_scale
    "forced_par",  # parameter bytes of unplaced nodes forced onto stage >= k by placed ancestors / A
    "pushed_par",  # those of t's descendants pushed to >= k if t goes to k / A
)
#: per-stage flags and shares, entering as they are
STAGE_FLAG_FEATURES = (
    "allowed",  # 1 if k >= the precedence bound
    "is_low",  # 1 if k is the precedence bound
    "stage_index",  # k / max(K - 1, 1)
    "node_share",  # nodes on stage k / n
    "empty",  # 1 if stage k holds no node yet
)
STAGE_FEATURES = STAGE_LOAD_FEATURES + STAGE_FLAG_FEATURES
NUM_STAGE_FEATURES = len(STAGE_FEATURES)

#: the step's context (feature version 1), followed by the objective's one-hot
CONTEXT_FEATURES = (
    "progress",  # t / max(n - 1, 1)
    "log_nodes",  # log1p(n) / LOG_NODES_SCALE
    "stages",  # K / STAGES_SCALE
    "node_params",  # log1p(parameter bytes of t / A)
    "node_output",  # log1p(output bytes of t / A)
    "node_macs",  # log1p(compute of t / macs_scale)
    "rest_params",  # fraction of the parameter bytes at positions after t
    "rest_macs",  # fraction of the compute at positions after t
    "comm",  # log1p(communication so far / A)
    "peak_mem",  # log1p(largest stage memory so far / A)
    "bottleneck",  # log1p(largest stage time so far / time_scale)
    "low",  # the precedence bound / max(K - 1, 1)
    "sram",  # log1p(SRAM bytes / A)
    "lam",  # the paper objective's communication weight
    "open_total",  # log1p(sum of open bytes / A)
) + tuple(f"objective_{name}" for name in OBJECTIVES)
NUM_CONTEXT_FEATURES = len(CONTEXT_FEATURES)

#: feature version 2 appends these: K and the hardware relative to the graph (:func:`hardware_context`)
HARDWARE_FEATURES = (
    "inv_stages",  # 1 / K
    "memory_pressure",  # log1p(P / (K C)): parameter bytes over the pipeline's SRAM
    "overhead_share",  # tau / T*: the stage overhead's share of the latency bound
    "host_stream",  # log1p((P / K) / H / T*): streaming a stage's share of parameters from the host
    "cut_time",  # log1p(mean cut bytes / L / T*): link time of a typical cut of the graph's order
    "cut_bytes",  # log1p(mean cut bytes / A): the same in the paper objective's units
    "host_over_link",  # log(H / L) / RATE_LOG_SCALE
    "act_over_param",  # log(b_a / b_p) / BYTES_LOG_SCALE
)
NUM_HARDWARE_FEATURES = len(HARDWARE_FEATURES)
FEATURE_VERSIONS = (1, 2)

#: per later position j, a cut just before j (nodes t..j-1 join the current stage)
CUT_FEATURES = (
    "par",  # parameter bytes of t..j-1 / A
    "par_sq",  # its square (lets a linear score peak at a target load)
    "macs",  # compute of t..j-1 / macs_scale
    "macs_sq",  # its square
    "cut",  # bytes crossing the cut / A
    "log_cut",  # log1p of that
    "cut_time",  # their link time / time_scale
    "span",  # (j - t) / n
)
NUM_CUT_FEATURES = len(CUT_FEATURES)

LOG_NODES_SCALE = 7.0  # log1p(n) / 7 is about 1 for the ~1,100-node graphs, the largest in data/models
STAGES_SCALE = 8.0  # K / 8: 1 at the largest K of the training sets
RATE_LOG_SCALE = 4.0  # log(H / L) / 4: within [-1, 1] for rates within a factor e^4 (~55) of each other
BYTES_LOG_SCALE = 2.0  # log(b_a / b_p) / 2: within [-1, 1] for byte widths within a factor e^2 (~7)
TINY = 1e-30  # keeps the logarithms of zero byte widths finite


def num_context_features(version: int) -> int:
    """Length of the decoder's context vector under feature ``version`` (1: 17, 2: 25)."""
    if version not in FEATURE_VERSIONS:
        raise ValueError(f"policy.feature_version must be one of {FEATURE_VERSIONS}, got {version!r}")
    return NUM_CONTEXT_FEATURES + (NUM_HARDWARE_FEATURES if version >= 2 else 0)


def stack_named(values: dict[str, jax.Array], names: tuple[str, ...], axis: int = -1) -> jax.Array:
    """``values`` stacked in the order of ``names`` (which must name exactly its keys)."""
    if set(values) != set(names) or len(values) != len(names):
        raise ValueError(f"features {sorted(set(values) ^ set(names))} are missing or unexpected")
    return jnp.stack([values[name] for name in names], axis=axis)


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
        mem_scale: f32[] A, ``max(b_p * max(P / K, max p), 1)``: the paper objective's lower bound.
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
    """The raw state of a partial schedule before placing node t (K stages; add axes for batches).

    Bytes are already multiplied by ``param_bytes`` / ``act_bytes``. ``L_t(u)`` is the largest stage among
    u's placed consumers (K-1 at once for a graph output, which leaves from the last stage).

    Attributes:
        mem: f32[K] parameter bytes placed on stage k.
        macs: f32[K] compute placed on stage k.
        count: f32[K] nodes placed on stage k.
        cross: f32[K] bytes of tensors already known to enter stage k from stage k-1: producer u placed,
            ``s(u) < k <= L_t(u)``; ``sum_k cross[k]`` is the communication so far.
        open: f32[K] bytes of placed tensors still awaited by an unplaced consumer that would newly enter
            stage k if that consumer landed on k or later (``L_t(u) < k``).
        predin: f32[K] bytes of node t's input tensors that newly enter stage k if t is placed on a stage
            ``>= k`` (``cumsum(predin)[k]`` is the extra communication of placing t on k).
        low: i32[] the smallest allowed stage, ``max(s(u) : u in pred(t))`` (the environment's rule).
        emb: f32[K, d] the sum of node embeddings placed on stage k.
        forced_par, forced_macs: f32[K] parameter bytes / compute of the unplaced nodes after t whose
            placed ancestors force them onto a stage >= k.
        pushed_par, pushed_macs: f32[K] those of t's unplaced descendants not yet forced to >= k (placing t
            on k would push them there).
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
    # the paper bound on byte totals (b_p applied per node first: the rounding the checkpoints were trained with)
    mem_scale = jnp.maximum(jnp.maximum(total_par / k, jnp.max(par_b)), 1.0)
    time_lb = lower_bound_from_totals(total_macs, jnp.max(macs), hw, "latency")
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
    """f32[NUM_HARDWARE_FEATURES] :data:`HARDWARE_FEATURES`: K and the hardware rates relative to the graph.

    Scale-free: unchanged when every byte count, or every rate and the overhead, is multiplied by the same
    factor; no dependence on the padded size. ``T*`` is the latency bound ``time_scale``, ``A`` the paper
    bound ``mem_scale``; a "cut" is one of the graph's order (:attr:`GraphStatics.cut_b`).

    Args: ``total_par`` f32[] parameter bytes; ``mem_scale``, ``time_scale`` as in
    :class:`GraphStatics`; ``cut_b`` f32[N] bytes crossing each cut; ``fmask`` f32[N] real nodes.
    """
    k = float(hw.stages)
    mean_cut = jnp.sum(cut_b) / jnp.maximum(jnp.sum(fmask), 1.0)
    values = {
        "inv_stages": jnp.asarray(1.0 / k, jnp.float32),
        "memory_pressure": jnp.log1p(total_par / jnp.maximum(k * hw.sram_bytes, 1.0)),
        "overhead_share": hw.stage_overhead_s / time_scale,
        "host_stream": jnp.log1p(total_par / k / hw.host_bw / time_scale),
        "cut_time": jnp.log1p(mean_cut / hw.link_bw / time_scale),
        "cut_bytes": jnp.log1p(mean_cut / mem_scale),
        "host_over_link": jnp.log(hw.host_bw / hw.link_bw) / RATE_LOG_SCALE,
        "act_over_param": jnp.log(jnp.maximum(hw.act_bytes, TINY) / jnp.maximum(hw.param_bytes, TINY))
        / BYTES_LOG_SCALE,
    }
    return stack_named(values, HARDWARE_FEATURES, axis=0).astype(jnp.float32)


def cut_features(st: GraphStatics, t: jax.Array, hw: Hardware) -> tuple[jax.Array, jax.Array]:
    """:data:`CUT_FEATURES`: what closing the current stage at a later position would cost, for placing node t.

    For every position j with ``t < j < n`` (a cut just before j: nodes t..j-1 join the current
    stage, the rest go later). Used by the decoder's cut attention
    (:class:`respect_jax.policy.decoder.CutAttention`); one graph, one step.

    Returns: f32[N, NUM_CUT_FEATURES] (zero rows where not valid) and valid bool[N].
    """
    idx = jnp.arange(st.par_b.shape[0])
    valid = (idx > t) & (idx < st.n)
    par = (st.par_before - st.par_before[t]) / st.mem_scale
    macs = (st.macs_before - st.macs_before[t]) / st.macs_scale
    cut = st.cut_b / st.mem_scale
    values = {
        "par": par,
        "par_sq": par * par,
        "macs": macs,
        "macs_sq": macs * macs,
        "cut": cut,
        "log_cut": jnp.log1p(cut),
        "cut_time": st.cut_b / hw.link_bw / st.time_scale,
        "span": (idx - t) / st.n,
    }
    return jnp.where(valid[:, None], stack_named(values, CUT_FEATURES), 0.0), valid


def final_load_bound(placed: jax.Array, own: jax.Array, forced: jax.Array, pushed: jax.Array) -> jax.Array:
    """f32[K] for every stage k: a lower bound on the final peak per-stage load (parameters or compute) if
    node t (load ``own``) goes to stage k.

    The larger of the heaviest stage then and, for every j, the load that must end on stages ``j..K-1``
    (placed there, forced there by placed ancestors, pushed there by t's placement) spread over them.
    Args: placed, forced, pushed f32[K] (:class:`StepQuantities`); own f32[].
    """
    k_stages = placed.shape[0]
    ks = jnp.arange(k_stages)
    here = ks[:, None] == ks[None, :]  # rows: t's stage k, cols: j
    ge = ks[:, None] >= ks[None, :]  # [k, j]: k >= j
    spread = (k_stages - ks).astype(jnp.float32)  # stages j..K-1
    loads = placed[None, :] + jnp.where(here, own, 0.0)  # [k, j]
    placed_ge = jnp.cumsum(loads[:, ::-1], axis=1)[:, ::-1]
    total_ge = placed_ge + forced[None, :] + jnp.where(ge, pushed[None, :], 0.0)
    return jnp.maximum(jnp.max(loads, axis=1), jnp.max(total_ge / spread[None, :], axis=1))


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
        stage_feats f32[K, NUM_STAGE_FEATURES] (:data:`STAGE_FEATURES`), context
        f32[num_context_features(version)] (:data:`CONTEXT_FEATURES`, then :data:`HARDWARE_FEATURES` in
        version 2) and the mask bool[K] of allowed stages (``k >= low``).
    """
    k_stages = hw.stages
    ks = jnp.arange(k_stages)
    a, m_scale, t_scale = st.mem_scale, st.macs_scale, st.time_scale
    pb, mc = st.par_b[t], st.macs[t]
    mem_here = q.mem + pb
    delta = jnp.cumsum(q.predin)
    comm_now = jnp.sum(q.cross)
    time_now = stage_time(q.mem, q.macs, q.cross, hw)
    time_here = stage_time(mem_here, q.macs + mc, q.cross + q.predin, hw)
    paper_here = jnp.maximum(jnp.max(q.mem), mem_here) + lam * (comm_now + delta)
    mem_bound = final_load_bound(q.mem, pb, q.forced_par, q.pushed_par)
    macs_bound = final_load_bound(q.macs, mc, q.forced_macs, q.pushed_macs)
    allowed = ks >= q.low
    loads = {
        "mem": q.mem / a,
        "mem_here": mem_here / a,
        "spill_here": jnp.maximum(mem_here - hw.sram_bytes, 0.0) / a,
        "macs": q.macs / m_scale,
        "macs_here": (q.macs + mc) / m_scale,
        "cross": q.cross / a,
        "open": q.open / a,
        "predin": q.predin / a,
        "extra_comm_here": delta / a,
        "paper_here": paper_here / a,
        "time": time_now / t_scale,
        "time_here": time_here / t_scale,
        "bottleneck_here": jnp.maximum(jnp.max(time_now), time_here) / t_scale,
        "mem_bound_here": mem_bound / a,
        "paper_bound_here": (mem_bound + lam * (comm_now + delta)) / a,
        "time_bound_here": stage_time(0.0, macs_bound, 0.0, hw) / t_scale,
        "forced_par": q.forced_par / a,
        "pushed_par": q.pushed_par / a,
    }
    k_den = float(max(k_stages - 1, 1))
    flags = {
        "allowed": allowed.astype(jnp.float32),
        "is_low": (ks == q.low).astype(jnp.float32),
        "stage_index": ks / k_den,
        "node_share": q.count / st.n,
        "empty": (q.count == 0).astype(jnp.float32),
    }
    stage_feats = jnp.concatenate(
        [jnp.log1p(jnp.maximum(stack_named(loads, STAGE_LOAD_FEATURES), 0.0)), stack_named(flags, STAGE_FLAG_FEATURES)],
        axis=-1,
    )
    context = {
        "progress": t / jnp.maximum(st.n - 1.0, 1.0),
        "log_nodes": jnp.log1p(st.n) / LOG_NODES_SCALE,
        "stages": k_stages / STAGES_SCALE,
        "node_params": jnp.log1p(pb / a),
        "node_output": jnp.log1p(st.out_b[t] / a),
        "node_macs": jnp.log1p(mc / m_scale),
        "rest_params": st.rem_par[t],
        "rest_macs": st.rem_macs[t],
        "comm": jnp.log1p(comm_now / a),
        "peak_mem": jnp.log1p(jnp.max(q.mem) / a),
        "bottleneck": jnp.log1p(jnp.max(time_now) / t_scale),
        "low": q.low / k_den,
        "sram": jnp.log1p(hw.sram_bytes / a),
        "lam": jnp.asarray(lam, jnp.float32),
        "open_total": jnp.log1p(jnp.sum(q.open) / a),
        **{f"objective_{name}": jnp.asarray(objective == name, jnp.float32) for name in OBJECTIVES},
    }
    parts = [stack_named(context, CONTEXT_FEATURES, axis=0)] + ([st.hw_context] if version >= 2 else [])
    return stage_feats, jnp.concatenate(parts), allowed
