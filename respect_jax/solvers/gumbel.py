"""Batched differentiable scheduler: straight-through Gumbel-softmax over per-node stage logits.

The ICML'24 idea ("Differentiable Combinatorial Scheduling at Scale", NOTES.md) in JAX: every
graph of a batch gets its own logits ``theta[N, K]``; each optimisation step draws ``samples`` hard
schedules per graph with a precedence-respecting sampler, scores a differentiable surrogate of the
SPEC objective whose forward value on a hard sample is the exact cost, and takes one optax Adam
step. Every hard sample is also scored with the **shared evaluator**
:func:`respect_jax.costs.evaluate`; the best one per graph is returned. One jitted call
(:func:`solve_batch`) solves a whole batch (``vmap`` over graphs) on one device.

Samplers (both only ever produce valid schedules and can reach every valid one):

* ``"raise"`` (default): draw ``a_v ~ Categorical(softmax(theta_v))`` for every node independently
  (Gumbel-max), then ``s_v = max(a_v, max_{u in pred(v)} s_u)`` -- the environment's rule of
  raising an action below the precedence bound to the bound. In closed form
  ``s_v = max_{u in anc*(v)} a_u`` (``anc*`` = ancestors and v itself), so with the dense
  reachability matrix ``R[u, v]`` it is a matmul instead of a sequential scan: the number of
  "violating" ancestors ``Z_v(k) = sum_u R[u, v] (1 - [a_u <= k])`` gives the cumulative
  ``[s_v <= k] = [Z_v(k) = 0]``, relaxed as ``1 - Z + relu(Z - 1)`` (exact on integers, and its
  gradient equals that of the product ``prod_u [a_u <= k]`` at hard points). This is our
  "constrained Gumbel" formulation: the gradient sees that lifting a node lifts its descendants.
* ``"masked"``: visit positions ``0..N-1`` in order with ``lax.scan`` and sample node ``v``'s stage
  from its logits masked to ``k >= max(stage of preds)`` (the environment's action mask). The
  straight-through gradient is local: ``onehot(s_v) + p_v - stop_gradient(p_v)`` with ``p_v`` the
  masked softmax; the effect of ``s_v`` on later masks is not differentiated.

Both use the hard straight-through Gumbel-softmax: forward values are exact one-hots, gradients come
from ``softmax((theta + g) / tau)`` with a temperature ``tau`` annealed geometrically from
``tau_start`` to ``tau_end``. Sample 0 of every step is noise-free (the current mode of the logits).

Surrogate (:func:`surrogate_objective`, from the relaxed cumulative stages ``C_v(k) = [s_v <= k]``):
``mem_k`` and ``macs_k`` are linear in the one-hots; ``[last(u) >= k]`` is a soft OR over u's
consumers of ``1 - C_v(k-1)`` (capped sum ``x - relu(x - 1)``, exact on 0/1 values); the crossing
indicator ``[s(u) < k <= last(u)]`` is ``C_u(k-1) * OR_u(k)``; ``comm = sum_k in_k``;
``spill = relu(mem - C)``; the max over stages is a straight-through smooth max (forward exact max,
gradient of ``beta * logsumexp(x / beta)``). Objectives are divided by
:func:`~respect_jax.costs.objective_lower_bound` so step sizes do not depend on a graph's scale.
On a hard sample the surrogate's forward value equals the shared evaluator's objective up to float
rounding (checked by the tests); the *reported* value is always the evaluator's.

Initial logits: ``init_scale * onehot(stage0)`` where ``stage0`` is the compiler's parameter-count
split (``init="compiler"``, the same rule as :mod:`respect_jax.solvers.partitioners`), a given
``warm_start`` assignment, or zeros (``init="uniform"``). The noise-free decode of the initial
logits is scored too, so with a compiler or warm start the result is never worse than it.
``init_scale <= 0`` means "auto": ``log(2 K n)`` for a graph of ``n`` nodes, which makes an
upward jump of some node (that cascades to its descendants) happen about once per two samples.
"""

from __future__ import annotations

import math
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import optax

from respect_jax.costs import OBJECTIVES, Hardware, evaluate, objective_lower_bound, objective_value
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import PaddedGraph, pad_graph, to_original_order, to_position_order
from respect_jax.solvers.base import SolveResult, register_solver

SAMPLERS = ("raise", "lower", "both", "masked")
INITS = ("compiler", "uniform")

#: Number of times each jitted function was traced (a test checks one compilation per shape).
TRACE_COUNTER: Counter = Counter()


# ============================================================================ graph helpers


def reachability(graph: PaddedGraph) -> jax.Array:
    """f32[N, N] ``R[u, v] = 1`` iff u is an ancestor of v or u == v (one graph).

    Built column by column in SPEC order with ``lax.scan`` (predecessors have lower positions):
    ``R[:, v] = e_v OR (OR over preds p of R[:, p])``. Padding nodes only reach themselves.
    """
    n = graph.params.shape[-1]

    def body(r, v):
        cols = r[:, graph.preds[v]]  # [N, P]
        col = jnp.any(cols & graph.pred_mask[v][None, :], axis=1) | (jnp.arange(n) == v)
        return r.at[:, v].set(col), None

    r, _ = jax.lax.scan(body, jnp.zeros((n, n), bool), jnp.arange(n))
    return r.astype(jnp.float32)


def compiler_split(graph: PaddedGraph, num_stages: int) -> jax.Array:
    """i32[N] the compiler's parameter-count split in SPEC order (jnp twin of partitioners.py).

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
    objective: str,
    lam: jax.Array,
    beta: jax.Array,
) -> jax.Array:
    """Differentiable SPEC objective of one relaxed schedule (one graph, unnormalised).

    Args:
        graph: one PaddedGraph (N nodes, E edges).
        cum: f32[N, K] relaxed cumulative stage indicators ``C_v(k) ~ [s_v <= k]`` (``C_v(K-1) = 1``).
            On exact 0/1 values of a valid schedule the result equals the shared evaluator.
        hw: hardware (``hw.stages == K``).
        objective: ``"paper"`` or ``"latency"``.
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
    if objective == "paper":
        return _st_max(mem_k, beta) + lam * comm
    if objective == "latency":
        spill_k = jax.nn.relu(mem_k - hw.sram_bytes)
        time_k = hw.stage_overhead_s + macs_k / hw.macs_per_s + spill_k / hw.host_bw + in_k / hw.link_bw
        return _st_max(time_k, beta)
    raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")


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


def _sample_closure(graph, reach, theta, noise, tau, sampler):
    """Closure samplers for one graph: (hard stage i32[S, N], relaxed cum f32[S, N, K]).

    ``"both"`` uses ``raise`` for the first half of the samples and ``lower`` for the rest.
    """
    _, cum_a = _relaxed_sample(theta, noise, tau)
    if sampler != "both":
        return _closure_stages(reach, cum_a, sampler)
    half = noise.shape[0] - noise.shape[0] // 2
    st_r, cum_r = _closure_stages(reach, cum_a[:half], "raise")
    st_l, cum_l = _closure_stages(reach, cum_a[half:], "lower")
    return jnp.concatenate([st_r, st_l]), jnp.concatenate([cum_r, cum_l])


def _sample_masked(graph, theta, noise, tau):
    """Masked sequential sampler for one graph: (hard stage i32[S, N], relaxed cum f32[S, N, K])."""
    k = theta.shape[-1]
    perturbed = theta[None] + noise  # [S, N, K]
    stage, low = jax.vmap(lambda sc: masked_decode(graph, jax.lax.stop_gradient(sc)))(perturbed)
    allowed = jnp.arange(k)[None, None, :] >= low[..., None]
    p = jax.nn.softmax(jnp.where(allowed, perturbed / tau, -jnp.inf), axis=-1)
    y = jax.nn.one_hot(stage, k, dtype=p.dtype) + _zero_with_grad(p)
    return stage, jnp.cumsum(y, axis=-1)


def _sample(graph, reach, theta, noise, tau, sampler):
    """Dispatch to the named sampler (see module docstring)."""
    if sampler == "masked":
        return _sample_masked(graph, theta, noise, tau)
    return _sample_closure(graph, reach, theta, noise, tau, sampler)


def _decode(graph, reach, theta, sampler):
    """Noise-free hard decode of logits theta[N, K] (i32[N]); ``both`` decodes with ``raise``."""
    if sampler == "masked":
        return masked_decode(graph, theta)[0]
    a = jnp.argmax(theta, axis=-1).astype(jnp.float32)
    if sampler == "lower":
        return jnp.min(jnp.where(reach > 0, a[None, :], jnp.inf), axis=1).astype(jnp.int32)
    return jnp.max(reach * a[:, None], axis=0).astype(jnp.int32)


# ============================================================================ solver


def _solve_one(graph, key, theta0, hw, lam, lr, tau_start, tau_end, beta, *, objective, steps, samples, sampler):
    """Optimise the logits of one graph; returns (best stage i32[N], best objective f32[])."""
    n, k = theta0.shape
    reach = jnp.zeros((1, 1), jnp.float32) if sampler == "masked" else reachability(graph)
    norm = objective_lower_bound(graph, hw, objective)
    real = graph.node_mask

    def score(stage):  # the shared evaluator; inf for an invalid schedule (never expected)
        stage = jnp.where(real, stage, 0)
        m = evaluate(graph, stage, hw)
        return jnp.where(m.valid, objective_value(m, objective, lam), jnp.inf), stage

    def loss_fn(theta, noise, tau):
        stage, cum = _sample(graph, reach, theta, noise, tau, sampler)
        surr = jax.vmap(lambda c: surrogate_objective(graph, c, hw, objective, lam, beta * norm))(cum)
        return jnp.mean(surr) / norm, stage

    opt = optax.adam(lr)
    best_obj, best_stage = score(_decode(graph, reach, theta0, sampler))
    if steps == 0:
        return best_stage, best_obj
    ratio = tau_end / tau_start
    taus = tau_start * ratio ** (jnp.arange(steps) / max(steps - 1, 1))
    keys = jax.random.split(key, steps)

    def step(carry, xs):
        theta, opt_state, best_obj, best_stage = carry
        step_key, tau = xs
        noise = jax.random.gumbel(step_key, (samples, n, k))
        noise = noise.at[0].set(0.0).at[samples // 2].set(0.0)  # noise-free: the current mode
        (_, stage), grad = jax.value_and_grad(loss_fn, has_aux=True)(theta, noise, tau)
        objs, stages = jax.vmap(score)(stage)
        i = jnp.argmin(objs)
        better = objs[i] < best_obj
        best_obj = jnp.where(better, objs[i], best_obj)
        best_stage = jnp.where(better, stages[i], best_stage)
        updates, opt_state = opt.update(grad, opt_state, theta)
        theta = optax.apply_updates(theta, updates)
        return (theta, opt_state, best_obj, best_stage), None

    carry = (theta0, opt.init(theta0), best_obj, best_stage)
    (_, _, best_obj, best_stage), _ = jax.lax.scan(step, carry, (keys, taus))
    return best_stage, best_obj


def _initial_logits(graph, hw, init, init_scale, warm_start):
    """f32[N, K] initial logits of one graph (see module docstring)."""
    k = hw.stages
    n_real = jnp.maximum(graph.num_nodes, 1).astype(jnp.float32)
    scale = jnp.where(init_scale > 0, init_scale, jnp.log(2.0 * k * n_real))
    if warm_start is not None:
        stage0 = jnp.clip(warm_start.astype(jnp.int32), 0, k - 1)
    elif init == "compiler":
        stage0 = compiler_split(graph, k)
    else:
        return jnp.zeros((graph.params.shape[-1], k), jnp.float32)
    return scale * jax.nn.one_hot(stage0, k, dtype=jnp.float32)


def _solve_batch_impl(
    batch, hw, lam, keys, warm_start, lr, tau_start, tau_end, beta, init_scale, *, objective, steps, samples, init, sampler
):
    TRACE_COUNTER["solve_batch"] += 1  # runs only while tracing
    theta0 = jax.vmap(lambda g, w: _initial_logits(g, hw, init, init_scale, w))(batch, warm_start)
    solve = lambda g, key, th: _solve_one(
        g, key, th, hw, lam, lr, tau_start, tau_end, beta,
        objective=objective, steps=steps, samples=samples, sampler=sampler,
    )  # fmt: skip
    return jax.vmap(solve)(batch, keys, theta0)


_solve_batch_jit = jax.jit(_solve_batch_impl, static_argnames=("objective", "steps", "samples", "init", "sampler"))


def solve_batch(
    batch: PaddedGraph,
    hw: Hardware,
    objective: str,
    lam: float,
    key: jax.Array,
    *,
    steps: int = 200,
    samples: int = 64,
    lr: float = 0.1,
    tau_start: float = 2.0,
    tau_end: float = 0.5,
    beta: float = 0.02,
    init: str = "compiler",
    init_scale: float = 0.0,
    sampler: str = "raise",
    warm_start: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Solve a batch of graphs in one jitted call (compiled once per shape and static options).

    Args:
        batch: PaddedGraph with a leading axis B (e.g. from ``stack_graphs``), N padded nodes.
        hw: hardware; ``hw.stages`` = K.
        objective: ``"paper"`` or ``"latency"``.
        lam: communication weight of ``paper``.
        key: one PRNG key (split into B per-graph keys) or a batch of B keys (graph b uses key b,
            so solving graph b alone with key b gives the same result).
        steps: Adam steps. samples: hard samples per graph per step (sample 0 is noise-free).
        lr: Adam learning rate on the logits.
        tau_start, tau_end: Gumbel-softmax temperature, annealed geometrically over the steps.
        beta: smooth-max temperature relative to the objective's lower bound.
        init: ``"compiler"`` or ``"uniform"`` (ignored when ``warm_start`` is given).
        init_scale: logit of the initial stage; ``<= 0`` means ``log(2 K n)``.
        sampler: ``"raise"`` or ``"masked"`` (see module docstring).
        warm_start: optional i32[B, N] initial assignment by position (SPEC order).

    Returns:
        (best_assignment i32[B, N] by position, 0 on padding; best_objective f32[B]) where the
        objective is the shared evaluator's value of that assignment.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}")
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; choose one of {', '.join(INITS)}")
    if steps < 0 or samples < 1:
        raise ValueError(f"need steps >= 0 and samples >= 1, got {steps}, {samples}")
    if not (tau_start > 0 and tau_end > 0 and beta > 0):
        raise ValueError("tau_start, tau_end and beta must be > 0")
    size = batch.num_nodes.shape[0]
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    single = key.ndim == (0 if typed else 1)
    keys = jax.random.split(key, size) if single else key
    if keys.shape[0] != size:
        raise ValueError(f"got {keys.shape[0]} keys for a batch of {size} graphs")
    if warm_start is not None:
        warm_start = jnp.asarray(warm_start, jnp.int32)
    return _solve_batch_jit(
        batch, hw, jnp.float32(lam), keys, warm_start,
        jnp.float32(lr), jnp.float32(tau_start), jnp.float32(tau_end), jnp.float32(beta), jnp.float32(init_scale),
        objective=objective, steps=int(steps), samples=int(samples), init=init, sampler=sampler,
    )  # fmt: skip


# ============================================================================ registry entry


@register_solver("gumbel")
def solve_gumbel(
    graph: Graph,
    hw: Hardware,
    objective: str = "paper",
    lam: float = 1.0,
    *,
    steps: int = 200,
    samples: int = 64,
    lr: float = 0.1,
    seed: int = 0,
    init: str = "compiler",
    warm_start=None,
    **options,
) -> SolveResult:
    """Single-graph entry of :func:`solve_batch` (B = 1); ``warm_start`` is indexed by node id.

    Extra ``options`` (``tau_start``, ``tau_end``, ``beta``, ``init_scale``, ``sampler``) pass through.
    """
    padded = pad_graph(graph)
    batch = jax.tree.map(lambda x: jnp.asarray(x)[None], padded)
    warm = None
    if warm_start is not None:
        warm_arr = np.asarray(warm_start)
        if warm_arr.shape != (graph.num_nodes,):
            raise ValueError(f"warm_start has shape {warm_arr.shape}, expected ({graph.num_nodes},)")
        warm = to_position_order(padded, warm_arr)[None]
    assignment, objective_val = solve_batch(
        batch, hw, objective, lam, jax.random.PRNGKey(seed),
        steps=steps, samples=samples, lr=lr, init=init, warm_start=warm, **options,
    )  # fmt: skip
    result = to_original_order(padded, np.asarray(assignment[0]))
    info = {"objective_reported": float(objective_val[0]), "steps": steps, "samples": samples, "lr": lr, "init": init}
    if not math.isfinite(info["objective_reported"]):
        raise RuntimeError(f"gumbel solver found no valid schedule for graph {graph.name!r}")
    return SolveResult(result, optimal=None, gap=None, info=info)
