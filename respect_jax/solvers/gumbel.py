"""Batched differentiable scheduler: straight-through Gumbel-softmax over stage logits.

The ICML'24 idea ("Differentiable Combinatorial Scheduling at Scale", Liu et al., ICML 2024) in JAX: every
graph of a batch gets its own logits, each optimisation step draws ``samples`` hard schedules per
graph with precedence-respecting samplers, scores a differentiable surrogate of the objective
whose forward value on a hard sample is the exact cost, and takes one optax Adam step on the
mean surrogate. The surrogate's forward value on a hard sample is its exact objective, so it
picks each step's best sample; that one is scored with the **shared evaluator**
:func:`respect_jax.costs.evaluate`, which decides whether it replaces the best schedule so far
(the reported value is always the evaluator's). One jitted call, :func:`solve_batch`, solves a
whole batch (``vmap`` over graphs) on one device; it compiles once per padded shape, K and static
option set (steps, samples, sampler, init, restart_every, particles, local_search); the objective,
lam and the float hyper-parameters are traced values, so changing them does not recompile.
Optionally (``local_search``) each graph's best schedule is then hill-climbed by
:func:`respect_jax.local_search.improve` inside the same call.

Parameters per graph: node logits ``theta[N, K]`` and cut logits ``phi[K-1, N+1]``.

Samplers. All only ever produce valid schedules; each is a hard straight-through Gumbel-softmax
(forward: exact one-hots from Gumbel-max; gradient: ``softmax((logits + g) / tau)``, ``tau``
annealed geometrically from ``tau_start`` to ``tau_end``). The first sample of every group is
noise-free (the current mode).

* ``"raise"`` (node logits): draw ``a_v`` independently per node, then
  ``s_v = max(a_v, max_{u in pred(v)} s_u)`` -- the environment's rule of raising an action below
  the precedence mask to the bound. In closed form ``s_v = max_{u in anc*(v)} a_u`` (``anc*``:
  ancestors and v), so with the dense reachability matrix ``R`` the whole sample is one matmul:
  ``Z_v(k) = sum_u R[u, v] [a_u > k]`` counts "violating" ancestors and ``[s_v <= k] = [Z_v(k) = 0]``.
  The relaxation keeps that exact forward value and uses the gradient of the product
  ``prod_u [a_u <= k]`` (slope 1 while the count is <= 1), so the gradient sees that lifting a node
  lifts its descendants. This is our "constrained Gumbel" formulation. Every valid schedule is
  reachable (``a = s``); moving a stage boundary *earlier* is a single flip.
* ``"lower"``: the mirror image, ``s_v = min_{w in desc*(v)} a_w`` (a node dropped to an earlier
  stage drags its ancestors along); moving a boundary *later* is a single flip.
* ``"masked"``: the literal sequential sampler: visit positions ``0..N-1`` with ``lax.scan`` and
  draw node v's stage from its logits masked to ``k >= max(stage of preds)`` (the environment's
  action mask). Its straight-through gradient is local (effects on later masks are not
  differentiated) and a masked-out favourite stage leaves a near-uniform choice, so with one-hot
  initial logits it explores badly; kept for ablations.
* ``"cuts"`` (cut logits): draw K-1 ordered cut positions of the canonical order (cut k masked to
  ``>= cut k-1``); node v gets ``#{k: c_k <= v}``. These are the contiguous splits (the space the
  compiler searches); one sample moves every boundary at once, by any distance.
* ``"both"`` = half raise, half lower; ``"mixed"`` (default) = a third each of raise, lower, cuts.

Large graphs (padded to more than ``dense_max_nodes`` nodes, default 1024): the matrix ``R`` is
N x N (1 GiB of f32 at 16k padded nodes, and the einsums are O(S N^2 K) per step), so the raise and
lower samplers, the decode and the warm-start repair use sparse closures instead
(:func:`_closure_stages_sparse`, :func:`respect_jax.graphs.padded.closure_top2`: segment
reductions over the edges swept to their fixed point, O(E) memory): the hard samples and the
``count <= 1`` gate are exactly the dense ones; only the gradient's closure sum is replaced by an
even split along the edges (a random walk), and the local search uses its sparse single-node moves.

Surrogate (:func:`surrogate_objective`, from relaxed cumulative stages ``C_v(k) = [s_v <= k]``):
``mem_k`` and ``macs_k`` are linear in the one-hots; ``[last(u) >= k]`` is a soft OR over u's
consumers of ``1 - C_v(k-1)`` (capped sum ``x - relu(x - 1)``, exact on 0/1 values); the crossing
indicator ``[s(u) < k <= last(u)]`` is ``C_u(k-1) * OR_u(k)``; ``comm = sum_k in_k``;
``spill = relu(mem - C)``; the max over stages is a straight-through smooth max (forward: exact
max; gradient: ``beta * logsumexp(x / beta)``, ``beta`` relative to the initial objective). On a
hard sample the surrogate's forward value equals the shared evaluator up to float rounding.

Search control: the loss is divided by the initial schedule's objective (scale-free step sizes).
Every ``restart_every`` steps the logits restart from the best schedule so far (node logits
``scale * onehot(best)``, cut logits ``-cut_alpha * log(1 + |v - c_k|)`` around its boundaries)
with a fresh Adam state: without this the logits drift away from good schedules. ``particles``
independent runs per graph (own keys) and the best wins.

Initial schedule: the compiler's parameter-count split (``init="compiler"``, the rule of
:mod:`respect_jax.solvers.partitioners`), a ``warm_start`` (an invalid one is repaired by the raise
rule) or all-zero node logits with everything on stage 0 as the initial schedule
(``init="uniform"``). The initial schedule is scored too, so the result is never worse than it.
``init_scale <= 0`` means ``log(2 K n)`` for an ``n``-node graph: then about one node per two
samples deviates from the mode.

Ablations behind these choices (8 DNN-mode 300-node graphs, K = 4, Coral USB hardware, 100 steps x
32 samples, mean ratio to the MILP optimum; CPU): the literal ``masked`` sampler and ``raise`` alone
stay near the compiler split; ``both`` plus restarts reached ~1.04 (paper) / ~1.09 (latency);
adding ``cuts`` (``mixed``) reached ~1.005 / ~1.02-1.07 depending on the seed. A score-function
(REINFORCE) term on top of the straight-through gradient changed nothing and was dropped.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, fields, replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware, evaluate, objective_lower_bound, objective_value
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import (
    PaddedGraph,
    bucket_shape,
    closure_accumulate,
    closure_reduce,
    closure_top2,
    pad_graph,
    reachability,
    to_original_order,
    to_position_order,
)
from respect_jax.local_search import DENSE_LIMIT, DENSE_MAX_NODES, improve
from respect_jax.solvers.base import SolveResult, register_solver
from respect_jax.solvers.stopping import StopSignal

SAMPLERS = ("mixed", "both", "raise", "lower", "masked", "cuts")
INITS = ("compiler", "uniform")
#: Initial schedules :func:`solve_gumbel` takes: :data:`INITS`, ``contiguous`` (the exact best contiguous split,
#: :func:`respect_jax.solvers.partitioners.solve_contiguous`, as a warm start) and ``auto`` (``contiguous`` for
#: graphs of more than :data:`AUTO_CONTIGUOUS_MIN_NODES` nodes, ``compiler`` below).
ENTRY_INITS = (*INITS, "contiguous", "auto")
#: ``init="auto"`` starts larger graphs from the contiguous split. On two 1,000-node layered validation graphs
#: (``experiments/bench_scale.graph_config``, dense and sparse, seeds 1000077 / 1000078, K = 4, defaults) it gave the
#: same schedule as the compiler start under ``paper`` and 1.5-1.7 % lower latency; at 5,000-10,000 nodes 100 steps from
#: the compiler split end far above the contiguous split (3.2x at 10k after 25 steps). Smaller graphs keep the
#: compiler start their recorded figures were measured with.
AUTO_CONTIGUOUS_MIN_NODES = 512
#: Steps per compiled call when a ``time_limit_s`` run is chunked (:func:`solve_gumbel`).
LIMITED_CHUNK_STEPS = 10
#: A ``time_limit_s`` run is chunked when the estimate of its steps and local search (:func:`estimated_seconds`,
#: compilation left out, so that the choice, and the schedule, do not depend on the cache or the load) exceeds this
#: share of the limit: the rest is left for compilation (15-40 s cold at 1,000-10,000 nodes) and a shared CPU.
LIMITED_SHARE = 0.25

#: Number of times each jitted function was traced (a test checks one compilation per shape).
TRACE_COUNTER: Counter = Counter()


# ============================================================================ graph helpers


def compiler_split(graph: PaddedGraph, num_stages: int) -> jax.Array:
    """i32[N] the compiler's parameter-count split in canonical order (jnp twin of partitioners.py).

    Target ``total / K`` parameters per stage; each of the first K-1 stages is cut just before the
    node that would make it exceed the target. Padding positions get stage 0.
    """
    params = jnp.where(graph.node_mask, graph.params, 0.0)
    target = jnp.sum(params) / num_stages

    def body(carry, p):
        stage, acc = carry
        cut = (stage < num_stages - 1) & (acc > 0) & (acc + p > target)
        stage = stage + cut.astype(jnp.int32)
        acc = jnp.where(cut, 0.0, acc) + p
        return (stage, acc), stage

    _, stages = jax.lax.scan(body, (jnp.int32(0), jnp.float32(0.0)), params)
    return jnp.where(graph.node_mask, stages, 0).astype(jnp.int32)


def masked_decode(graph: PaddedGraph, scores: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Sequential masked argmax: ``s_v = argmax_{k >= max pred stage} scores[v, k]`` (one graph).

    Args:
        graph: one PaddedGraph with N nodes.
        scores: f32[N, K] (perturbed) logits.

    Returns:
        (stage i32[N], low i32[N]) the sampled stages and each node's lower bound (mask start).
    """
    n, k = scores.shape
    ks = jnp.arange(k)

    def body(stage, v):
        pred_stage = jnp.where(graph.pred_mask[v], stage[graph.preds[v]], 0)
        low = jnp.max(pred_stage, initial=0)
        choice = jnp.argmax(jnp.where(ks >= low, scores[v], -jnp.inf)).astype(jnp.int32)
        return stage.at[v].set(choice), low

    stage, low = jax.lax.scan(body, jnp.zeros(n, jnp.int32), jnp.arange(n))
    return stage, low


# ============================================================================ surrogate


def _st_max(x: jax.Array, beta: jax.Array) -> jax.Array:
    """Straight-through smooth max of f32[K]: forward ``max(x)``, gradient of ``beta*lse(x/beta)``."""
    return jnp.max(x) + _zero_with_grad(beta * jax.nn.logsumexp(x / beta))


def surrogate_objective(
    graph: PaddedGraph,
    cum: jax.Array,
    hw: Hardware,
    objective: str | jax.Array,
    lam: jax.Array,
    beta: jax.Array,
) -> jax.Array:
    """Differentiable objective of one relaxed schedule (one graph, unnormalised).

    Args:
        graph: one PaddedGraph (N nodes, E edges).
        cum: f32[N, K] relaxed cumulative stage indicators ``C_v(k) ~ [s_v <= k]`` (``C_v(K-1) = 1``).
            On exact 0/1 values of a valid schedule the result equals the shared evaluator.
        hw: hardware (``hw.stages == K``).
        objective: ``"paper"`` or ``"latency"``, or a traced bool[] (True: latency) so one
            compilation serves both objectives.
        lam: weight of communication in ``paper``.
        beta: smooth-max temperature in the units of the objective.

    Returns:
        f32[] surrogate objective (forward value exact on hard samples, see module docstring).
    """
    k = hw.stages
    mask = graph.node_mask.astype(cum.dtype)
    onehot = (cum - jnp.pad(cum[:, :-1], ((0, 0), (1, 0)))) * mask[:, None]  # [N, K]
    mem_k = hw.param_bytes * (graph.params @ onehot)
    macs_k = graph.macs @ onehot
    out = jnp.where(graph.node_mask, graph.output_size, 0.0)
    if k > 1:
        later = 1.0 - cum[:, :-1]  # [N, K-1]: [s_v >= k] for k = 1..K-1
        emask = graph.edge_mask.astype(cum.dtype)[:, None]
        total = jnp.zeros_like(later).at[graph.senders].add(later[graph.receivers] * emask)
        has_succ = jnp.zeros(cum.shape[0], bool).at[graph.senders].max(graph.edge_mask)
        soft_or = jnp.where(has_succ[:, None], total - jax.nn.relu(total - 1.0), 1.0)  # [last(u) >= k]
        crossing = cum[:, :-1] * soft_or  # [s(u) < k <= last(u)], k = 1..K-1
        in_tail = hw.act_bytes * (out @ crossing)
        in_k = jnp.concatenate([jnp.zeros(1, cum.dtype), in_tail])
    else:
        in_k = jnp.zeros(1, cum.dtype)
    comm = jnp.sum(in_k)
    if isinstance(objective, str) and objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    paper = _st_max(mem_k, beta) + lam * comm
    spill_k = jax.nn.relu(mem_k - hw.sram_bytes)
    time_k = hw.stage_overhead_s + macs_k / hw.macs_per_s + spill_k / hw.host_bw + in_k / hw.link_bw
    latency = _st_max(time_k, beta)
    if isinstance(objective, str):
        return latency if objective == "latency" else paper
    return jnp.where(objective, latency, paper)


# ============================================================================ samplers


def _zero_with_grad(x: jax.Array) -> jax.Array:
    """Exactly 0 in the forward pass with the gradient of ``x`` (``x - stop_gradient(x)``).

    Adding this to a hard value keeps the hard value bit-exact; ``hard + x - sg(x)`` evaluated left
    to right would not (``(1 + 0.3) - 0.3 != 1`` in floating point).
    """
    return x - jax.lax.stop_gradient(x)


def _relaxed_sample(theta, noise, tau):
    """Independent straight-through Gumbel-softmax per node: (a i32[S, N], cum_a f32[S, N, K])."""
    k = theta.shape[-1]
    perturbed = theta[None] + noise  # [S, N, K]
    a = jnp.argmax(perturbed, axis=-1).astype(jnp.int32)
    p = jax.nn.softmax(perturbed / tau, axis=-1)
    y = jax.nn.one_hot(a, k, dtype=p.dtype) + _zero_with_grad(p)
    return a, jnp.cumsum(y, axis=-1)


def _closure_stages(reach, cum_a, direction):
    """Propagate independent draws ``a`` along the DAG (one graph, S samples).

    ``direction="raise"``: ``s_v = max_{u in anc*(v)} a_u``; ``"lower"``: ``s_v = min_{w in desc*(v)} a_w``.
    Both are valid schedules and equal ``a`` when ``a`` is valid. With ``R`` the reachability
    matrix, ``[s_v <= k]`` is ``[#{u in anc*(v): a_u > k} = 0]`` (raise) or
    ``[#{w in desc*(v): a_w <= k} >= 1]`` (lower); the relaxation keeps the exact forward value and
    gives the gradient of the product form (slope 1 while the count is <= 1, else 0).

    Args:
        reach: f32[N, N] reachability ``R[u, v]`` (u ancestor-or-self of v).
        cum_a: f32[S, N, K] straight-through cumulative one-hots of the draws.
        direction: ``"raise"`` or ``"lower"``.

    Returns:
        (stage i32[S, N], cum f32[S, N, K]) hard stages and their relaxed cumulative indicators.
    """
    if direction == "raise":
        z = jnp.einsum("uv,suk->svk", reach, 1.0 - cum_a[..., :-1])  # violating ancestors
        count = jnp.round(jax.lax.stop_gradient(z))
        cum_s = (count == 0).astype(z.dtype) - jnp.where(count <= 1, 1.0, 0.0) * _zero_with_grad(z)
        stage = jnp.sum(count > 0, axis=-1)
    else:
        z = jnp.einsum("vw,swk->svk", reach, cum_a[..., :-1])  # descendants already at <= k
        count = jnp.round(jax.lax.stop_gradient(z))
        cum_s = (count >= 1).astype(z.dtype) + jnp.where(count <= 1, 1.0, 0.0) * _zero_with_grad(z)
        stage = jnp.sum(count == 0, axis=-1)
    cum = jnp.concatenate([cum_s, jnp.ones_like(cum_s[..., :1])], axis=-1)
    return stage.astype(jnp.int32), cum


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def _closure_identity(x, graph, direction_up):
    """Straight-through carrier of the sparse closure gradient: returns ``x`` unchanged.

    Its gradient is an O(E)-per-sweep stand-in for the dense closure's transpose: for the raise
    closure (aggregating over ancestors) a node collects the cotangents of its descendants, for the
    lower closure (``direction_up``: over descendants) those of its ancestors, each node's share
    split evenly over its in- (resp. out-) edges, i.e. the expected gradient along a random walk
    instead of the sum over the closure set (which needs N x N). Only used inside
    ``zwg(_closure_identity(x))``, whose forward value is exactly 0.

    Args:
        x: f32[N, ...] values per node; graph: one PaddedGraph; direction_up: (static) bool.
    """
    return x


def _closure_identity_fwd(x, graph, direction_up):
    return x, graph


def _closure_identity_bwd(direction_up, graph, g):
    n = g.shape[0]
    ones = graph.edge_mask.astype(g.dtype)
    if direction_up:  # lower: w collects from its predecessors v, v's share split over its out-edges
        outdeg = jax.ops.segment_sum(ones, graph.senders, num_segments=n)
        grad = closure_accumulate(graph, g, "down", 1.0 / jnp.maximum(outdeg, 1.0))
    else:  # raise: u collects from its successors w, w's share split over its in-edges
        indeg = jax.ops.segment_sum(ones, graph.receivers, num_segments=n)
        grad = closure_accumulate(graph, g, "up", 1.0 / jnp.maximum(indeg, 1.0))
    return grad, None


_closure_identity.defvjp(_closure_identity_fwd, _closure_identity_bwd)

#: Bits of a node position in the keys of :func:`_closure_stages_sparse` (positions < 2^KEY_BITS).
KEY_BITS = 20


def _closure_stages_sparse(graph, cum_a, direction):
    """:func:`_closure_stages` without the N x N matrix (one graph, S samples), O(E) per sweep.

    Forward values are identical to the dense form. ``count_v(k)`` (violators of threshold k in
    the closure: ``a_u > k`` among ancestors for raise, ``a_w <= k`` among descendants for lower)
    is 0 iff the closure's extreme draw is on the right side of k, and <= 1 iff its *second*
    extreme draw (over distinct nodes) is; both come from one :func:`closure_top2` of the keys
    ``draw * 2^KEY_BITS + node``. The gradient of the count is carried by
    :func:`_closure_identity` (an even split along edges instead of the closure sum).

    Args:
        graph: one PaddedGraph (N nodes, N < 2^KEY_BITS).
        cum_a: f32[S, N, K] straight-through cumulative one-hots of the draws.
        direction: ``"raise"`` or ``"lower"``.

    Returns:
        (stage i32[S, N], cum f32[S, N, K]) as :func:`_closure_stages`.
    """
    n, k = cum_a.shape[1], cum_a.shape[2]
    a = k - jnp.round(jnp.sum(jax.lax.stop_gradient(cum_a), axis=-1)).astype(jnp.int32)  # [S, N] the draws
    raise_ = direction == "raise"
    value = a if raise_ else (k - 1) - a  # larger value = more extreme draw
    keys = (value << KEY_BITS) + jnp.arange(n, dtype=jnp.int32)[None, :]
    first, second = closure_top2(graph, keys.T, "down" if raise_ else "up")  # [N, S]
    extreme = (first >> KEY_BITS).T  # [S, N]
    runner_up = jnp.where(second >= 0, second >> KEY_BITS, -1).T
    ks = jnp.arange(k - 1)[None, None, :]
    if raise_:  # s = max draw; count(k) <= 1 iff the second largest draw is <= k
        stage = extreme
        gate = ks >= runner_up[..., None]
    else:  # s = min draw; count(k) <= 1 iff the second smallest draw is > k
        stage = (k - 1) - extreme
        gate = (runner_up[..., None] < 0) | (ks < (k - 1) - runner_up[..., None])
    hard = (stage[..., None] <= ks).astype(cum_a.dtype)
    carried = jnp.moveaxis(_closure_identity(jnp.moveaxis(cum_a[..., :-1], 1, 0), graph, not raise_), 0, 1)
    cum_s = hard + gate.astype(cum_a.dtype) * _zero_with_grad(carried)
    cum = jnp.concatenate([cum_s, jnp.ones_like(cum_s[..., :1])], axis=-1)
    return stage.astype(jnp.int32), cum


def _sample_masked(graph, theta, noise, tau):
    """Masked sequential sampler for one graph: (hard stage i32[S, N], relaxed cum f32[S, N, K])."""
    k = theta.shape[-1]
    perturbed = theta[None] + noise  # [S, N, K]
    stage, low = jax.vmap(lambda sc: masked_decode(graph, jax.lax.stop_gradient(sc)))(perturbed)
    allowed = jnp.arange(k)[None, None, :] >= low[..., None]
    p = jax.nn.softmax(jnp.where(allowed, perturbed / tau, -jnp.inf), axis=-1)
    y = jax.nn.one_hot(stage, k, dtype=p.dtype) + _zero_with_grad(p)
    return stage, jnp.cumsum(y, axis=-1)


def _sample_nodes(graph, reach, theta, noise, tau, kind):
    """Per-node samplers (``raise``, ``lower``, ``masked``): (stage i32[S, N], cum f32[S, N, K]).

    ``reach`` None: the sparse closures (:func:`_closure_stages_sparse`)."""
    if kind == "masked":
        return _sample_masked(graph, theta, noise, tau)
    _, cum_a = _relaxed_sample(theta, noise, tau)
    if reach is None:
        return _closure_stages_sparse(graph, cum_a, kind)
    return _closure_stages(reach, cum_a, kind)


def _cut_allowed(n_real, num_pos):
    """bool[N+1] admissible cut positions ``0..n`` (a cut at n leaves the later stages empty)."""
    return jnp.arange(num_pos) <= n_real


def _sample_cuts(graph, phi, noise, tau):
    """Contiguous sampler: K-1 ordered cut positions of the canonical order (one graph, S samples).

    Cut ``k`` (k = 1..K-1) is drawn from ``phi[k-1]`` (logits over positions ``0..N``) masked to
    ``c_k >= c_{k-1}``; node v gets stage ``#{k: c_k <= v}``, a valid schedule (stages never
    decrease along the topological order). ``[s_v <= j] = 1 - H_{j+1}(v)`` with ``H_k`` the
    straight-through cumulative one-hot of ``c_k``, so the forward value is exact.

    Args:
        phi: f32[K-1, N+1] cut logits.
        noise: f32[S, K-1, N+1] Gumbel noise.

    Returns:
        (stage i32[S, N], cum f32[S, N, K]).
    """
    m, num_pos = phi.shape
    n = num_pos - 1
    allowed0 = _cut_allowed(graph.num_nodes, num_pos)

    def one(g):
        low = jnp.int32(0)
        hs = []
        stage = jnp.zeros(n, jnp.int32)
        for j in range(m):
            allowed = allowed0 & (jnp.arange(num_pos) >= low)
            pert = phi[j] + g[j]
            c = jnp.argmax(jnp.where(allowed, jax.lax.stop_gradient(pert), -jnp.inf)).astype(jnp.int32)
            p = jax.nn.softmax(jnp.where(allowed, pert / tau, -jnp.inf))
            y = jax.nn.one_hot(c, num_pos, dtype=p.dtype) + _zero_with_grad(p)
            hs.append(jnp.cumsum(y)[:n])  # H_{j+1}(v) = [c_{j+1} <= v]
            stage = stage + (jnp.arange(n) >= c).astype(jnp.int32)
            low = c
        cum = jnp.stack([1.0 - h for h in hs] + [jnp.ones(n, phi.dtype)], axis=-1)  # [N, K]
        return stage, cum

    return jax.vmap(one)(noise)


def _decode_cuts(graph, phi):
    """Noise-free contiguous decode of cut logits phi[K-1, N+1] (i32[N])."""
    stage, _ = _sample_cuts(graph, phi, jnp.zeros((1,) + phi.shape, phi.dtype), 1.0)
    return stage[0]


def _raise_closure(graph, reach, a):
    """i32[N] ``s_v = max_{u in anc*(v)} a_u`` (dense with ``reach``, sparse when it is None)."""
    if reach is None:
        return closure_reduce(graph, a.astype(jnp.int32), "max", "down")
    return jnp.max(reach * a[:, None].astype(jnp.float32), axis=0).astype(jnp.int32)


def _node_decode(graph, reach, theta):
    """Noise-free ``raise`` decode of node logits theta[N, K] (i32[N])."""
    return _raise_closure(graph, reach, jnp.argmax(theta, axis=-1))


def sample_groups(sampler: str, samples: int, num_stages: int) -> list[tuple[str, int]]:
    """How the ``samples`` of a step are split between sampler kinds (static)."""
    if num_stages == 1:
        return [("raise", samples)]
    if sampler == "both":
        half = samples - samples // 2
        return [(kind, c) for kind, c in (("raise", half), ("lower", samples - half)) if c > 0]
    if sampler == "mixed":
        cuts = samples // 3
        rest = samples - cuts
        half = rest - rest // 2
        groups = (("raise", half), ("lower", rest - half), ("cuts", cuts))
        return [(kind, c) for kind, c in groups if c > 0]
    return [(sampler, samples)]


# ============================================================================ solver


def _solve_one(graph, reach, key, stage0, theta0, hw, lam, latency, hp, *, steps, samples, sampler, restart_every):
    """Optimise the logits of one graph; returns (best stage i32[N], best objective f32[]).

    Args:
        graph: one PaddedGraph (N nodes).
        reach: f32[N, N] its reachability matrix (:func:`respect_jax.graphs.padded.reachability`), or
            None for the sparse closures (graphs above ``dense_max_nodes``).
        key: PRNG key of this graph.
        stage0: i32[N] initial schedule (sets the cut logits; node logits are ``theta0``).
        theta0: f32[N, K] initial node logits.
        latency: bool[] traced objective selector (True: ``latency``, False: ``paper``).
        hp: traced hyper-parameters (lr, tau_start, tau_end, beta, scale, cut_alpha).
    """
    n, k = theta0.shape
    groups = sample_groups(sampler, samples, k)
    kinds = {kind for kind, _ in groups}
    real = graph.node_mask

    def score(stage):  # the shared evaluator; inf for an invalid schedule (never expected)
        stage = jnp.where(real, stage, 0)
        m = evaluate(graph, stage, hw)
        value = jnp.where(latency, objective_value(m, "latency"), objective_value(m, "paper", lam))
        return jnp.where(m.valid, value, jnp.inf), stage

    def cut_logits(stage):
        if k == 1:
            return jnp.zeros((0, n + 1), jnp.float32)
        pos = jnp.arange(n + 1)
        st = jnp.where(real, stage, -1)
        st = jnp.concatenate([st, jnp.full(1, k, st.dtype)])  # sentinel after the last position
        st = jnp.where(pos >= graph.num_nodes, k, st)
        at_least = st[None, :] >= jnp.arange(1, k)[:, None]  # [K-1, N+1]
        cuts = jnp.argmax(at_least, axis=1)
        phi = -hp["cut_alpha"] * jnp.log1p(jnp.abs(pos[None, :] - cuts[:, None]).astype(jnp.float32))
        return jnp.where(_cut_allowed(graph.num_nodes, n + 1)[None, :], phi, -1e9)

    def decode(params):
        cands = []
        if kinds & {"raise", "lower"}:
            cands.append(_node_decode(graph, reach, params["node"]))
        if "masked" in kinds:
            cands.append(masked_decode(graph, params["node"])[0])
        if "cuts" in kinds:
            cands.append(_decode_cuts(graph, params["cut"]))
        objs, stages = jax.vmap(score)(jnp.stack(cands))
        i = jnp.argmin(objs)
        return objs[i], stages[i]

    params0 = {"node": theta0, "cut": cut_logits(stage0)}
    best_obj, best_stage = decode(params0)
    init_obj, init_stage = score(stage0)  # the initial schedule itself (valid by construction)
    take = init_obj < best_obj
    best_obj, best_stage = jnp.where(take, init_obj, best_obj), jnp.where(take, init_stage, best_stage)
    if steps == 0 or k == 1:
        return best_stage, best_obj
    # scale of the objective: the initial schedule's value (floored by the cheap lower bound)
    bound = jnp.where(latency, objective_lower_bound(graph, hw, "latency"), objective_lower_bound(graph, hw, "paper"))
    norm = jnp.maximum(jnp.where(jnp.isfinite(best_obj), best_obj, 0.0), bound)

    def draw(params, step_key, tau):
        stages, cums = [], []
        for (kind, count), gkey in zip(groups, jax.random.split(step_key, len(groups)), strict=True):
            shape = (count,) + (params["cut"].shape if kind == "cuts" else params["node"].shape)
            noise = jax.random.gumbel(gkey, shape).at[0].set(0.0)  # first of a group: the mode
            if kind == "cuts":
                st, cum = _sample_cuts(graph, params["cut"], noise, tau)
            else:
                st, cum = _sample_nodes(graph, reach, params["node"], noise, tau, kind)
            stages.append(st)
            cums.append(cum)
        return jnp.concatenate(stages), jnp.concatenate(cums)

    def loss_fn(params, step_key, tau):
        stage, cum = draw(params, step_key, tau)
        surr = jax.vmap(lambda c: surrogate_objective(graph, c, hw, latency, lam, hp["beta"] * norm))(cum)
        return jnp.mean(surr) / norm, (stage, surr)

    import optax  # only when a Gumbel member runs: a command that never runs it does not import it

    opt = optax.adam(hp["lr"])
    t = jnp.arange(steps)
    taus = hp["tau_start"] * (hp["tau_end"] / hp["tau_start"]) ** (t / max(steps - 1, 1))
    restarts = (t % restart_every == restart_every - 1) if restart_every > 0 else jnp.zeros(steps, bool)
    keys = jax.random.split(key, steps)

    def step(carry, xs):
        params, opt_state, best_obj, best_stage = carry
        step_key, tau, restart = xs
        (_, (stage, surr)), grad = jax.value_and_grad(loss_fn, has_aux=True)(params, step_key, tau)
        # the surrogate's forward value is the exact objective of each hard sample (up to float
        # rounding): it picks the step's best sample, which the shared evaluator then scores
        obj_i, stage_i = score(stage[jnp.argmin(surr)])
        better = obj_i < best_obj
        best_obj = jnp.where(better, obj_i, best_obj)
        best_stage = jnp.where(better, stage_i, best_stage)
        updates, opt_state = opt.update(grad, opt_state, params)
        params = optax.apply_updates(params, updates)
        # restart: logits back to the best schedule found so far, fresh optimiser state
        fresh = {"node": hp["scale"] * jax.nn.one_hot(best_stage, k, dtype=theta0.dtype), "cut": cut_logits(best_stage)}
        pick = lambda new, old: jnp.where(restart, new, old)
        params = jax.tree.map(pick, fresh, params)
        opt_state = jax.tree.map(pick, opt.init(fresh), opt_state)
        return (params, opt_state, best_obj, best_stage), None

    carry = (params0, opt.init(params0), best_obj, best_stage)
    (_, _, best_obj, best_stage), _ = jax.lax.scan(step, carry, (keys, taus, restarts))
    return best_stage, best_obj


def _initial_schedule(graph, hw, init, warm_start):
    """i32[N] initial schedule of one graph: warm start (made valid), compiler split or all zeros."""
    k = hw.stages
    if warm_start is not None:
        return jnp.clip(warm_start.astype(jnp.int32), 0, k - 1)
    if init == "compiler":
        return compiler_split(graph, k)
    return jnp.zeros(graph.params.shape[-1], jnp.int32)


def _solve_batch_impl(
    batch, hw, lam, latency, keys, warm_start, hp, *, steps, samples, init, sampler, restart_every, particles,
    local_search, dense_max_nodes,
):  # fmt: skip
    TRACE_COUNTER["solve_batch"] += 1  # runs only while tracing
    k = hw.stages
    sparse = batch.params.shape[-1] > dense_max_nodes

    def one(g, key, w):
        n_real = jnp.maximum(g.num_nodes, 1).astype(jnp.float32)
        scale = jnp.where(hp["init_scale"] > 0, hp["init_scale"], jnp.log(2.0 * k * n_real))
        stage0 = _initial_schedule(g, hw, init, w)
        if warm_start is None and init == "uniform":
            theta0 = jnp.zeros((g.params.shape[-1], k), jnp.float32)
        else:
            theta0 = scale * jax.nn.one_hot(stage0, k, dtype=jnp.float32)
        # computed once per graph, shared by the particles and the local search (dense path only)
        reach = None if sparse else reachability(g)
        stage0 = _raise_closure(g, reach, stage0)  # an invalid warm start is repaired by the raise rule
        run = lambda pkey: _solve_one(
            g, reach, pkey, stage0, theta0, hw, lam, latency, dict(hp, scale=scale),
            steps=steps, samples=samples, sampler=sampler, restart_every=restart_every,
        )  # fmt: skip
        stages, objs = jax.vmap(run)(jax.random.split(key, particles))  # independent runs
        i = jnp.argmin(objs)
        if local_search > 0:  # hill-climb the best schedule (never worse; evaluator's value)
            dense = {} if sparse else {"reach": reach > 0}
            return improve(g, stages[i], hw, latency, lam, local_search, dense_max_nodes=dense_max_nodes, **dense)[:2]
        return stages[i], objs[i]

    return jax.vmap(one)(batch, keys, warm_start)


STATIC_OPTIONS = (
    "steps",
    "samples",
    "init",
    "sampler",
    "restart_every",
    "particles",
    "local_search",
    "dense_max_nodes",
)
_solve_batch_jit = jax.jit(
    _solve_batch_impl,
    static_argnames=STATIC_OPTIONS,
)


@dataclass(frozen=True, kw_only=True)
class GumbelConfig:
    """Options of :func:`solve_batch` (module docstring for the method).

    Attributes:
        steps: Adam steps (0: return the initial schedule or its decode, whichever is better).
        samples: hard samples per graph per step (the first of each sampler group is noise-free).
        lr: Adam learning rate on the logits.
        tau_start, tau_end: Gumbel-softmax temperature, annealed geometrically over the steps.
        beta: smooth-max temperature relative to the initial schedule's objective.
        init: ``"compiler"`` or ``"uniform"`` (ignored when a warm start is given).
        init_scale: logit of the initial stage; ``<= 0`` means ``log(2 K n)``.
        sampler: ``"mixed"``, ``"both"``, ``"raise"``, ``"lower"``, ``"masked"`` or ``"cuts"``.
        restart_every: every this many steps the logits restart from the best schedule (0: never).
        cut_alpha: sharpness of the cut logits around the current cuts (``cuts`` sampler).
        particles: independent optimisation runs per graph (own keys and logits); the best wins.
        local_search: at most this many hill-climbing moves on each graph's best schedule
            (:func:`respect_jax.local_search.improve`; 0: none).
        dense_max_nodes: batches padded to more nodes use the sparse O(E) closures and local
            search moves instead of the N x N reachability matrix (module docstring).
    """

    steps: int = 100
    samples: int = 64
    lr: float = 0.1
    tau_start: float = 2.0
    tau_end: float = 0.5
    beta: float = 0.2
    init: str = "compiler"
    init_scale: float = 0.0
    sampler: str = "mixed"
    restart_every: int = 10
    cut_alpha: float = 1.5
    particles: int = 1
    local_search: int = 300
    dense_max_nodes: int = DENSE_MAX_NODES

    def check(self) -> None:
        """Raise a one-line ValueError for a value out of range."""
        if self.sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.sampler!r}; choose one of {', '.join(SAMPLERS)}")
        if self.init not in INITS:
            raise ValueError(f"unknown init {self.init!r}; choose one of {', '.join(INITS)}")
        if self.particles < 1:
            raise ValueError(f"need particles >= 1, got {self.particles}")
        if self.local_search < 0:
            raise ValueError(f"need local_search >= 0, got {self.local_search}")
        if self.steps < 0 or self.samples < 1 or self.restart_every < 0:
            raise ValueError(
                "need steps >= 0, samples >= 1, restart_every >= 0; "
                f"got {self.steps}, {self.samples}, {self.restart_every}"
            )
        if not (self.tau_start > 0 and self.tau_end > 0 and self.beta > 0 and self.cut_alpha > 0):
            raise ValueError("tau_start, tau_end, beta and cut_alpha must be > 0")

    def hyper_parameters(self) -> dict:
        """The float options as traced f32 scalars (changing them does not recompile)."""
        names = ("lr", "tau_start", "tau_end", "beta", "init_scale", "cut_alpha")
        return {name: jnp.float32(getattr(self, name)) for name in names}

    def static(self) -> dict:
        """The options that fix the compiled programme (``STATIC_OPTIONS``)."""
        return {name: (getattr(self, name) if name in ("init", "sampler") else int(getattr(self, name)))
                for name in STATIC_OPTIONS}


def _batch_keys(key: jax.Array, size: int) -> jax.Array:
    """B per-graph keys: ``key`` split B ways, or ``key`` itself when it already is a batch of B keys."""
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    single = key.ndim == (0 if typed else 1)
    keys = jax.random.split(key, size) if single else key
    if keys.shape[0] != size:
        raise ValueError(f"got {keys.shape[0]} keys for a batch of {size} graphs")
    return keys


def _check_size(n_pad: int, dense_max_nodes: int) -> None:
    """Refuse, in one line, a padded size the chosen path cannot hold."""
    if n_pad <= dense_max_nodes and n_pad > DENSE_LIMIT:
        raise ValueError(
            f"gumbel: the dense path (dense_max_nodes={dense_max_nodes}) holds N x N arrays; "
            f"at most {DENSE_LIMIT} padded nodes, got {n_pad}"
        )
    if n_pad >= 1 << KEY_BITS:
        raise ValueError(f"gumbel: at most {(1 << KEY_BITS) - 1} padded nodes, got {n_pad}")


def solve_batch(
    batch: PaddedGraph,
    hw: Hardware,
    objective: str,
    lam: float,
    key: jax.Array,
    config: GumbelConfig | None = None,
    *,
    warm_start: jax.Array | None = None,
    **options,
) -> tuple[jax.Array, jax.Array]:
    """Solve a batch of graphs in one jitted call (see the module docstring for the method).

    Args:
        batch: PaddedGraph with a leading axis B (e.g. from ``stack_graphs``), N padded nodes.
        hw: hardware; ``hw.stages`` = K.
        objective: ``"paper"`` or ``"latency"``.
        lam: communication weight of ``paper``.
        key: one PRNG key (split into B per-graph keys) or a batch of B keys (graph b uses key b,
            so solving graph b alone with key b gives the same result).
        config: the method's options (:class:`GumbelConfig`; None: its defaults).
        warm_start: optional i32[B, N] initial assignment by position (canonical order: topological, by
            depth, ties by id).
        **options: fields of :class:`GumbelConfig` overriding ``config``'s (e.g. ``steps=50``).

    Returns:
        (best_assignment i32[B, N] by position, 0 on padding; best_objective f32[B]) where the
        objective is the shared evaluator's value of that assignment.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    unknown = sorted(set(options) - {f.name for f in fields(GumbelConfig)})
    if unknown:
        raise ValueError(f"gumbel: unknown option(s) {', '.join(unknown)}")
    config = replace(config or GumbelConfig(), **options)
    config.check()
    _check_size(batch.params.shape[-1], config.dense_max_nodes)
    keys = _batch_keys(key, batch.num_nodes.shape[0])
    if warm_start is not None:
        warm_start = jnp.asarray(warm_start, jnp.int32)
        if warm_start.shape != batch.params.shape:
            raise ValueError(f"warm_start has shape {warm_start.shape}, expected {batch.params.shape}")
    latency = jnp.bool_(objective == "latency")
    return _solve_batch_jit(
        batch, hw, jnp.float32(lam), latency, keys, warm_start, config.hyper_parameters(), **config.static()
    )


# ============================================================================ cost estimate, chunked runs

#: Seconds per (sample x padded node^2 x stage) of one optimisation step on the dense path, and per (move x padded
#: node^2 x stage) of the final local search. Measured alone on validation models (data/models_val:
#: mobilenetv3small 175, efficientnetb3 384, efficientnetb6 666 nodes; K = 8, 64 samples; 2-core CPU at load 1-5):
#: 10 steps took 0.11 / 0.55 / 1.6 s, 200 moves 0.05 / 0.8-1.2 / 2.8 s once compiled.
STEP_S_PER_UNIT = 4e-10
MOVE_S_PER_UNIT = 2e-9
#: The same per (sample x padded node x stage) and (move x padded node x stage) on the sparse path (more than
#: ``dense_max_nodes`` padded nodes: O(E) closures, linear in the size). Measured on layered graphs
#: (``tests/scale_graphs.layered_graph``, 2,000 / 5,000 / 10,000 nodes padded to 2,048 / 8,192 / 16,384, K = 4,
#: 64 samples; CPU seconds at load ~4, 2-core CPU): 10 steps 0.68 / 2.7 / 5.2 s, 300 moves 0.15 / 0.43 / 0.74 s.
STEP_S_PER_UNIT_SPARSE = 1.3e-7
MOVE_S_PER_UNIT_SPARSE = 4e-8
#: Seconds to trace and compile (or load from JAX's persistent compilation cache) the programmes of one padded
#: shape and static option set not yet run in this process: efficientnetb3 (384 nodes, K = 8), a 10-step chunk and
#: the 200-move local search: 37 + 12 s cold (load ~5), 7 + 2 s from the persistent cache; cold 14-31 s for one
#: chunk at 175-666 nodes (load 1-3).
START_S_COLD = 30.0
START_S_CACHED = 9.0

#: Static option sets already run in this process (no compilation left): :func:`compiled_before`.
_COMPILED: set = set()


def _program_key(batch: PaddedGraph, stages: int, static: dict, warm: bool) -> tuple:
    shapes = tuple(tuple(x.shape) for x in jax.tree.leaves(batch))
    return shapes, int(stages), tuple(sorted(static.items())), bool(warm)


def persistent_cache_on() -> bool:
    """True when JAX's persistent compilation cache is enabled (a programme compiled by an earlier process loads)."""
    return bool(jax.config.jax_enable_compilation_cache and jax.config.jax_compilation_cache_dir)


def _program_start_s() -> float:
    """Seconds to compile (or load from the persistent cache) one programme not yet run in this process: half of
    :data:`START_S_COLD` / :data:`START_S_CACHED` (measured for the chunk and local-search programmes together)."""
    return (START_S_CACHED if persistent_cache_on() else START_S_COLD) / 2


def estimated_seconds(graph: Graph, stages: int, steps: int, samples: int, local_search: int,
                      chunk_steps: int = 0, dense_max_nodes: int = DENSE_MAX_NODES) -> dict:
    """What a :func:`solve_gumbel` run of ``graph`` is expected to cost on this CPU, alone (seconds).

    Returns ``{"start": compile/trace time of the programmes not yet run in this process (:data:`START_S_COLD`, or
    :data:`START_S_CACHED` with the persistent cache on), "chunk": one chunk of ``chunk_steps`` steps (all
    ``steps`` when 0), "steps": all the steps, "local_search": the final local search}``.
    """
    n_pad = bucket_shape([graph])[0]
    step_s, move_s, unit = _unit_costs(n_pad, stages, dense_max_nodes)
    chunk = int(chunk_steps) if chunk_steps and chunk_steps > 0 else int(steps)
    padded = pad_graph(graph)
    config = replace(GumbelConfig(), steps=chunk, samples=int(samples), local_search=0)
    batch = jax.tree.map(lambda x: np.asarray(x)[None], padded)
    key = _program_key(batch, stages, config.static(), chunk_steps > 0)
    ls_key = _program_key(batch, stages, replace(config, steps=0, local_search=int(local_search)).static(), True)
    missing = (key not in _COMPILED) + (local_search > 0 and ls_key not in _COMPILED)
    per_program = _program_start_s()
    return {
        "start": missing * per_program,
        "chunk": step_s * samples * unit * chunk,
        "steps": step_s * samples * unit * steps,
        "local_search": move_s * local_search * unit,
    }


def _unit_costs(n_pad: int, stages: int, dense_max_nodes: int) -> tuple[float, float, float]:
    """(seconds per step and sample per unit, per local-search move per unit, the unit) of a batch padded to
    ``n_pad`` nodes: the dense path's unit is ``n_pad ** 2 * stages``, the sparse path's ``n_pad * stages``."""
    if n_pad > dense_max_nodes:
        return STEP_S_PER_UNIT_SPARSE, MOVE_S_PER_UNIT_SPARSE, float(n_pad) * int(stages)
    return STEP_S_PER_UNIT, MOVE_S_PER_UNIT, float(n_pad) ** 2 * int(stages)


def _seconds_left(stop) -> float:
    """Seconds ``stop`` has left: its ``left()`` (a :class:`~respect_jax.solvers.stopping.StopSignal`), 0 once it
    is set, infinite without a deadline."""
    if stop is None:
        return math.inf
    if stop():
        return 0.0
    left = getattr(stop, "left", None)
    return float(left()) if left is not None else math.inf


class _Earliest:
    """A ``stop() -> bool`` set when either of two is; ``left()`` the fewer seconds of the two (``_seconds_left``)."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    def __call__(self) -> bool:
        return bool(self.first()) or bool(self.second())

    def left(self) -> float:
        return min(_seconds_left(self.first), _seconds_left(self.second))


def _solve_chunked(batch, hw, objective, lam, key, config, chunks, warm, stop) -> tuple[jax.Array, jax.Array, dict]:
    """:func:`solve_batch` in ``chunks`` calls of ``config.steps`` steps, then the local search in a call of its own,
    each warm-started from the best schedule so far (as a restart of the logits: fresh Adam state, the temperature
    annealed again), so that ``stop`` (a ``stop() -> bool``, optionally with ``left()`` seconds) is looked at
    between calls. A chunk starts only while the last one's measured time (after the first, which may be mostly
    compilation: the smaller of its time and the estimate) and the local search's estimate (its compilation
    included when not yet run in this process) fit in ``left()``; the local search only while it fits.
    Returns (assignment i32[B, N], objective f32[B], info)."""
    n_pad, k = batch.params.shape[-1], hw.stages
    local_search = config.local_search
    chunk_cfg = replace(config, local_search=0)
    ls_cfg = replace(config, steps=0)
    step_s, move_s, unit = _unit_costs(n_pad, k, config.dense_max_nodes)
    ls_est = move_s * local_search * unit
    if local_search > 0 and _program_key(batch, k, ls_cfg.static(), True) not in _COMPILED:
        ls_est += _program_start_s()  # its compilation
    step_est = step_s * config.samples * unit * config.steps
    best, value, ran, last_s, slow = warm, None, 0, 0.0, 1.0
    for i in range(chunks):
        # the next chunk's time: the last one's, but the first one's may be mostly compilation
        next_s = last_s if ran > 1 else min(last_s, step_est)
        if ran and (stop is not None and stop() or next_s + slow * ls_est > _seconds_left(stop)):
            break
        t0 = time.perf_counter()
        best, value = solve_batch(batch, hw, objective, lam, jax.random.fold_in(key, i), chunk_cfg, warm_start=best)
        jax.block_until_ready(value)
        _COMPILED.add(_program_key(batch, k, chunk_cfg.static(), True))
        last_s = time.perf_counter() - t0
        ran += 1
        if ran > 1:  # the first includes compilation: later ones say how loaded the CPU is
            slow = max(1.0, last_s / max(step_est, 1e-9))
    polished = False
    if local_search > 0 and not (stop is not None and stop()) and slow * ls_est <= _seconds_left(stop):
        best, value = solve_batch(batch, hw, objective, lam, jax.random.fold_in(key, chunks), ls_cfg, warm_start=best)
        _COMPILED.add(_program_key(batch, k, ls_cfg.static(), True))
        polished = True
    return best, value, {"chunks_run": ran, "chunks": chunks, "local_search_run": polished}


# ============================================================================ registry entry


@register_solver("gumbel")
def solve_gumbel(
    graph: Graph,
    hw: Hardware,
    objective: str = "paper",
    lam: float = 1.0,
    *,
    steps: int = 100,
    samples: int = 64,
    lr: float = 0.1,
    seed: int = 0,
    init: str = "auto",
    local_search: int = 300,
    warm_start=None,
    max_nodes: int | None = None,
    chunk_steps: int = 0,
    stop=None,
    time_limit_s: float | None = 60.0,
    **options,
) -> SolveResult:
    """Single-graph entry of :func:`solve_batch` (B = 1); ``warm_start`` is indexed by node id.

    A graph of more than ``max_nodes`` nodes (None: no limit) is refused with a one-line ValueError.

    ``chunk_steps > 0`` runs the steps in ``ceil(steps / chunk_steps)`` calls of ``chunk_steps`` steps and the
    local search in a call of its own, each warm-started from the best schedule so far (:func:`_solve_chunked`);
    ``stop`` (a ``stop() -> bool``, e.g. a :class:`~respect_jax.solvers.stopping.StopSignal` whose ``left()``
    gives the seconds to its deadline) is looked at between calls, so a stopped run returns its best schedule after
    the call in progress. ``info["chunks_run"]`` says how many chunks ran. ``chunk_steps=0``: one call (``stop``
    unused).

    ``init``: one of :data:`ENTRY_INITS` (ignored with a ``warm_start``). ``time_limit_s`` (None: no limit): the run
    stops at its next look at the clock past that many seconds from the call and returns its best schedule so far;
    when :func:`estimated_seconds` puts its steps and local search above :data:`LIMITED_SHARE` of the limit, it runs
    in chunks of :data:`LIMITED_CHUNK_STEPS` steps (any other run is one call, as without a limit: the same schedule,
    and it may overrun on a loaded machine). The local search runs only if its estimate fits in the time left.
    ``info["time_limited"]``: the run was chunked for the limit.

    Extra ``options`` (fields of :class:`GumbelConfig`: ``tau_start``, ``tau_end``, ``beta``, ``init_scale``,
    ``sampler``, ``restart_every``, ``cut_alpha``, ``particles``) pass through. The result is a
    heuristic: ``optimal`` and ``gap`` are None.
    """
    if max_nodes is not None and graph.num_nodes > max_nodes:
        raise ValueError(
            f"gumbel: {graph.num_nodes} nodes > max_nodes {max_nodes}; raise max_nodes (or set it to null) to run it"
        )
    started = time.perf_counter()
    if init not in ENTRY_INITS:
        raise ValueError(f"gumbel: unknown init {init!r}; choose one of {', '.join(ENTRY_INITS)}")
    if time_limit_s is not None and not float(time_limit_s) > 0:
        raise ValueError(f"gumbel: need time_limit_s > 0 or null, got {time_limit_s}")
    if chunk_steps < 0:
        raise ValueError(f"gumbel: need chunk_steps >= 0, got {chunk_steps}")
    padded = pad_graph(graph)
    batch = jax.tree.map(lambda x: jnp.asarray(x)[None], padded)
    dense_max_nodes = int(options.get("dense_max_nodes", DENSE_MAX_NODES))
    if init == "auto":
        init = "contiguous" if graph.num_nodes > AUTO_CONTIGUOUS_MIN_NODES else "compiler"
    warm = None
    if warm_start is not None:
        warm_arr = np.asarray(warm_start)
        if warm_arr.shape != (graph.num_nodes,):
            raise ValueError(f"warm_start has shape {warm_arr.shape}, expected ({graph.num_nodes},)")
        warm = to_position_order(padded, warm_arr)[None]
    elif init == "contiguous":
        from respect_jax.solvers.partitioners import solve_contiguous

        warm = to_position_order(padded, solve_contiguous(graph, hw, objective, lam).assignment)[None]
    time_limited = False
    if time_limit_s is not None:
        limit = StopSignal(started + float(time_limit_s))
        stop = limit if stop is None else _Earliest(stop, limit)
        if chunk_steps == 0 and steps > 0:
            est = estimated_seconds(graph, hw.stages, steps, samples, local_search, 0, dense_max_nodes)
            if est["steps"] + est["local_search"] > LIMITED_SHARE * float(time_limit_s):
                chunk_steps, time_limited = min(LIMITED_CHUNK_STEPS, int(steps)), True
    chunked = {}
    if chunk_steps > 0 and steps > 0:
        config = replace(GumbelConfig(), steps=int(chunk_steps), samples=samples, lr=lr,
                         init="uniform" if init == "uniform" else "compiler", local_search=local_search, **options)
        config.check()
        if warm is None:  # the first chunk starts from the initial schedule as the later ones from the best
            warm = _initial_schedule(jax.tree.map(lambda x: x[0], batch), hw, init, None)[None]
            if init == "uniform":
                warm = None
        assignment, objective_val, chunked = _solve_chunked(batch, hw, objective, lam, jax.random.PRNGKey(seed),
                                                            config, -(-int(steps) // int(chunk_steps)), warm, stop)
    else:
        assignment, objective_val = solve_batch(
            batch, hw, objective, lam, jax.random.PRNGKey(seed), steps=steps, samples=samples, lr=lr,
            init="uniform" if init == "uniform" else "compiler", local_search=local_search, warm_start=warm,
            **options,
        )  # fmt: skip
    result = to_original_order(padded, np.asarray(assignment[0]))
    info = {
        "objective_reported": float(objective_val[0]),
        "steps": steps,
        "samples": samples,
        "lr": lr,
        "init": init if warm_start is None else "warm_start",
        "local_search": local_search,
        "time_limit_s": time_limit_s,
        "time_limited": time_limited,
        **chunked,
    }
    if not math.isfinite(info["objective_reported"]):
        raise RuntimeError(f"gumbel solver found no valid schedule for graph {graph.name!r}")
    return SolveResult(result, optimal=None, gap=None, info=info)


solve_gumbel.forwards_to = GumbelConfig  # its **options are GumbelConfig's fields (checked by run_solver)
