"""The pure-JAX event simulator: one ``lax.scan`` step per query, exact integer dynamics.

A query ``q`` (source ``n``, app ``a``, dispatched at ``t``) sent to site ``s`` with variant ``v``:

* round trip ``net = rtt[n,s] * f // 100 + (jitter[n,s] * f // 100) * jitter_pct_q // 100`` with the
  site's network factor ``f = net_pct_q[s]`` at the query's dispatch (100 = nominal; time-varying conditions,
  :class:`~respect_jax.edge_cluster.types.Dynamics`); ``up = net // 2`` to reach the site, ``down = net - up``
  for the answer;
* processing ``svc = max(1, (proc[s,v] * slow_pct_q[s] // 100) * service_pct_q // 100)`` on one worker (the
  site's slow-down factor at the query's dispatch, 100 = nominal);
* the site serves its queries in dispatch order (one FIFO per site; a query cannot start before
  the query dispatched before it to the same site left the queue) on the worker that frees
  first (lowest index on ties):
  ``start = max(t + up, hol[s], min_w busy[s,w])``;
* it leaves the queue unserved at ``limit = min(t + up + max_wait[s], t + deadline[a])`` if
  ``start > limit``: EXPIRED when the deadline is the binding limit, DROPPED (site overloaded)
  otherwise; no worker time is spent on it;
* otherwise it is processed to the end (no pre-emption), answered at ``start + svc + down``, and is
  LATE after ``t + deadline[a]``, LOW_ACCURACY if ``accuracy[v] < min_accuracy[a]``, else SUCCESS.

Because a site's FIFO is in dispatch order, a query's fate depends only on queries dispatched
before it, so each is resolved in its own scan step (events are processed in dispatch order; the
Python discrete-event reference, :mod:`respect_jax.edge_cluster.reference`, processes them in time
order and gets identical outcomes). Padding slots of a trace leave the state unchanged.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from respect_jax.edge_cluster.policies import STATIC_POLICIES
from respect_jax.edge_cluster.types import (
    DROPPED,
    EXPIRED,
    INVALID,
    LATE,
    LOW_ACCURACY,
    NEVER,
    OUTCOMES,
    SUCCESS,
    EdgeParams,
    Outcome,
    Policy,
    SimState,
    Trace,
    backlog_estimate,
    first_argmin,
)

BACKLOG_CAP_US = 10**8  # the dispatcher's backlog estimate saturates at 100 s (keeps int32 times bounded)


def init_sim(params: EdgeParams, ring: int = 32) -> SimState:
    """Empty cluster at time 0.

    ``ring`` = L, history kept for the agent's observation features; 0 keeps none (static
    policies do not need it, and the simulator is then several times faster).
    """
    s = params.num_sites
    a = params.num_apps
    return SimState(
        busy_us=jnp.zeros(params.slot_site.shape, jnp.int32),
        hol_us=jnp.zeros((s,), jnp.int32),
        vclock_us=jnp.zeros((s,), jnp.int32),
        ring_done_us=jnp.full((s, ring), -1, jnp.int32),
        ring_work_us=jnp.zeros((s, ring), jnp.int32),
        ring_resolve_us=jnp.full((s, ring), NEVER, jnp.int32),
        ring_queue_us=jnp.zeros((s, ring), jnp.int32),
        ring_net_pct=jnp.full((s, ring), 100, jnp.int32),
        ring_proc_pct=jnp.full((s, ring), 100, jnp.int32),
        ring_pos=jnp.zeros((s,), jnp.int32),
        app_arrival_us=jnp.full((a, ring), -NEVER, jnp.int32),
        app_resolve_us=jnp.full((a, ring), NEVER, jnp.int32),
        app_ok=jnp.zeros((a, ring), bool),
        app_slack_us=jnp.zeros((a, ring), jnp.int32),
        app_pos=jnp.zeros((a,), jnp.int32),
        counts=jnp.zeros((a, len(OUTCOMES)), jnp.int32),
        now_us=jnp.int32(0),
    )


def _pick(x: jax.Array, hot: jax.Array) -> jax.Array:
    """The entry of ``x`` where the one-hot mask ``hot`` is set (a select + sum: no gather under vmap)."""
    return jnp.sum(jnp.where(hot, x, 0), dtype=x.dtype)


def dispatch(params: EdgeParams, sim: SimState, query: Trace, action: jax.Array) -> tuple[SimState, Outcome]:
    """Send one query (a Trace of scalars) to ``action``; returns the new state and its outcome.

    A padding query (``valid`` False) changes nothing and gets code INVALID. Per-site and
    per-variant values are selected with one-hot masks rather than gathers: under ``vmap`` XLA
    CPU gathers cost far more than a select over a handful of sites.
    """
    s_count, k_count = params.num_sites, sim.busy_us.shape[0]
    a_count, ring = sim.app_arrival_us.shape
    v_count = params.num_variants
    action = jnp.clip(jnp.asarray(action, jnp.int32), 0, s_count * v_count - 1)
    site, variant = action // v_count, action % v_count
    n, app, t, valid = query.source, query.app, query.time_us, query.valid
    s_hot = jnp.arange(s_count) == site
    sv_hot = (jnp.arange(s_count * v_count) == action).reshape(s_count, v_count)
    v_hot = jnp.arange(v_count) == variant
    a_hot = jnp.arange(a_count) == app

    rtt = _pick(params.rtt_us[n], s_hot)
    net_f = _pick(query.net_pct, s_hot)  # the path's delay factor now, percent (operands below are >= 0)
    jit = jax.lax.div(_pick(params.jitter_us[n], s_hot) * net_f, 100)
    net = jax.lax.div(rtt * net_f, 100) + jax.lax.div(jit * query.jitter_pct, 100)
    up = jax.lax.div(net, 2)
    down = net - up
    t_site = t + up
    nominal = _pick(params.proc_us, sv_hot)
    slowed = jax.lax.div(nominal * _pick(query.slow_pct, s_hot), 100)
    svc = jnp.maximum(jax.lax.div(slowed * query.service_pct, 100), 1)

    busy_s = jnp.where(params.slot_site == site, sim.busy_us, NEVER)  # [K] the chosen site's workers
    worker = first_argmin(busy_s)  # the one that frees first (lowest slot on ties)
    hol_s = _pick(sim.hol_us, s_hot)
    start = jnp.maximum(jnp.maximum(t_site, hol_s), jnp.min(busy_s))
    deadline_abs = t + _pick(params.deadline_us, a_hot)
    wait_limit = t_site + _pick(params.max_wait_us, s_hot)
    limit = jnp.minimum(wait_limit, deadline_abs)
    removed = start > limit
    finish = start + svc
    response = finish + down
    accurate = _pick(params.accuracy_pm, v_hot) >= _pick(params.min_accuracy_pm, a_hot)
    served_code = jnp.where(response > deadline_abs, LATE, jnp.where(accurate, SUCCESS, LOW_ACCURACY))
    removed_code = jnp.where(deadline_abs <= wait_limit, EXPIRED, DROPPED)
    code = jnp.where(valid, jnp.where(removed, removed_code, served_code), INVALID).astype(jnp.int32)
    done = jnp.where(removed, limit, finish)
    resolve = jnp.where(removed, limit, response)

    site_hot = s_hot & valid
    worker_hot = (jnp.arange(k_count) == worker) & valid & ~removed
    hol_new = jnp.where(removed, jnp.maximum(hol_s, limit), start)
    vclock_new = jnp.maximum(_pick(sim.vclock_us, s_hot), t + jax.lax.div(rtt, 2)) + _pick(params.fluid_us, sv_hot)
    vclock_new = jnp.minimum(vclock_new, t + BACKLOG_CAP_US)
    # materialise the per-query scalars once: without the barrier XLA recomputes the whole chain
    # inside every element of the [K] / [S, L] updates below
    code, worker, start, done, resolve, hol_new, vclock_new, site_hot, removed = jax.lax.optimization_barrier(
        (code, worker, start, done, resolve, hol_new, vclock_new, site_hot, removed)
    )

    new_sim = sim.replace(
        busy_us=jnp.where(worker_hot, finish, sim.busy_us),
        hol_us=jnp.where(site_hot, hol_new, sim.hol_us),
        vclock_us=jnp.where(site_hot, vclock_new, sim.vclock_us),
        counts=sim.counts + (a_hot[:, None] & (jnp.arange(len(OUTCOMES)) == code)[None, :]).astype(jnp.int32),
        now_us=jnp.where(valid, t, sim.now_us),
    )
    if ring > 0:  # history for the agent's features (static: ring=0 skips it)
        slot = site_hot[:, None] & (jnp.arange(ring) == _pick(sim.ring_pos, s_hot))[None, :]
        app_hot = a_hot & valid
        app_slot = app_hot[:, None] & (jnp.arange(ring) == _pick(sim.app_pos, a_hot))[None, :]
        # what the source measures once the answer (or the removal notice) is back at ``resolve``: the wait
        # at the site, the round trip relative to the nominal one, the processing time relative to the nominal
        queue_wait = jnp.where(removed, limit, start) - t_site
        net_pct = jnp.minimum(jax.lax.div(net * 100, jnp.maximum(rtt, 1)), 100 * 1000)
        proc_pct = jnp.where(removed, 100, jnp.minimum(jax.lax.div(svc * 100, jnp.maximum(nominal, 1)), 100 * 1000))
        slack = jnp.where(removed, -_pick(params.deadline_us, a_hot), deadline_abs - response)
        new_sim = new_sim.replace(
            ring_done_us=jnp.where(slot, done, sim.ring_done_us),
            ring_work_us=jnp.where(slot, nominal, sim.ring_work_us),
            ring_resolve_us=jnp.where(slot, resolve, sim.ring_resolve_us),
            ring_queue_us=jnp.where(slot, queue_wait, sim.ring_queue_us),
            ring_net_pct=jnp.where(slot, net_pct, sim.ring_net_pct),
            ring_proc_pct=jnp.where(slot, proc_pct, sim.ring_proc_pct),
            ring_pos=jnp.where(site_hot, (sim.ring_pos + 1) % ring, sim.ring_pos),
            app_arrival_us=jnp.where(app_slot, t, sim.app_arrival_us),
            app_resolve_us=jnp.where(app_slot, resolve, sim.app_resolve_us),
            app_ok=jnp.where(app_slot, code == SUCCESS, sim.app_ok),
            app_slack_us=jnp.where(app_slot, slack, sim.app_slack_us),
            app_pos=jnp.where(app_hot, (sim.app_pos + 1) % ring, sim.app_pos),
        )
    outcome = Outcome(
        code=code,
        site=jnp.where(valid, site, -1).astype(jnp.int32),
        variant=jnp.where(valid, variant, -1).astype(jnp.int32),
        start_us=jnp.where(valid & ~removed, start, -1).astype(jnp.int32),
        done_us=jnp.where(valid, done, -1).astype(jnp.int32),
        resolve_us=jnp.where(valid, resolve, -1).astype(jnp.int32),
    )
    return new_sim, outcome


def simulate(params: EdgeParams, trace: Trace, policy: Policy, ring: int = 32) -> tuple[SimState, Outcome]:
    """Run a policy over a whole trace (``lax.scan`` over its Q slots).

    Args:
        params: one scenario; trace: Trace [Q]; policy: ``(params, sim, query) -> action``.
    Returns:
        the final state and the stacked :class:`Outcome` [Q]. vmap over (params, trace) for batches.
    """

    def body(sim, query):
        action = jax.lax.optimization_barrier(policy(params, sim, query))  # computed once, not per use
        return dispatch(params, sim, query, action)

    return jax.lax.scan(body, init_sim(params, ring), trace)


def replay(params: EdgeParams, trace: Trace, actions: jax.Array, ring: int = 32) -> tuple[SimState, Outcome]:
    """Like :func:`simulate` with a fixed action per slot (i32[Q])."""

    def body(sim, xs):
        query, action = xs
        return dispatch(params, sim, query, action)

    return jax.lax.scan(body, init_sim(params, ring), (trace, actions))


# ------------------------------------------------------------------------------ observation
HINT_POLICIES = ("closest", "fastest_expected", "most_accurate", "least_loaded")
"""Deterministic static rules whose choice is part of the agent's observation (one hot per rule)."""


SITE_FEATURES = 8  # per-site features (4 from the dispatcher's bookkeeping, 4 measured), see features()


def num_features(params: EdgeParams, measured: bool = True) -> int:
    """F of :func:`features` (``measured=False``: the feature set of agents saved before the measured blocks)."""
    s, v, a, n = params.num_sites, params.num_variants, params.num_apps, params.num_sources
    if not measured:
        return a + n + 4 * s + s * v + v + len(HINT_POLICIES) * s * v + 2 * a
    return a + n + SITE_FEATURES * s + 2 * s * v + v + len(HINT_POLICIES) * s * v + 3 * a


def measurements(sim: SimState, t: jax.Array) -> dict[str, jax.Array]:
    """What the dispatcher has measured by time ``t`` from answers (or removal notices) already back.

    Returns f32 arrays: ``queue_us`` [S] mean wait at each site of its last L queries known by ``t``
    (0 if none), ``net_ratio`` [S] their mean round trip over the nominal one (1 if none), ``proc_ratio`` [S]
    their mean processing time over the nominal one (1 if none), ``age_us`` [S] time since the newest of them
    came back (NEVER if none), ``app_slack_us`` [A] mean slack of each app's last L queries known by ``t``
    (deadline minus answer time, minus the deadline if removed; 0 if none), ``app_known`` [A] how many.
    """
    known = sim.ring_resolve_us <= t
    n = jnp.sum(known, axis=1)
    some = n > 0
    div = jnp.maximum(n, 1).astype(jnp.float32)

    def mean(x, default):
        return jnp.where(some, jnp.sum(jnp.where(known, x, 0).astype(jnp.float32), axis=1) / div, default)

    newest = jnp.max(jnp.where(known, sim.ring_resolve_us, -NEVER), axis=1)
    app_known = sim.app_resolve_us <= t
    app_n = jnp.sum(app_known, axis=1)
    app_slack = jnp.sum(jnp.where(app_known, sim.app_slack_us, 0).astype(jnp.float32), axis=1)
    return {
        "queue_us": mean(sim.ring_queue_us, 0.0),
        "net_ratio": mean(sim.ring_net_pct, 100.0) / 100.0,
        "proc_ratio": mean(sim.ring_proc_pct, 100.0) / 100.0,
        "age_us": jnp.where(some, (t - newest).astype(jnp.float32), float(NEVER)),
        "app_slack_us": jnp.where(app_n > 0, app_slack / jnp.maximum(app_n, 1).astype(jnp.float32), 0.0),
        "app_known": app_n,
    }


def features(params: EdgeParams, sim: SimState, query: Trace, measured: bool = True) -> jax.Array:
    """f32[F] the agent's continuous state before dispatching ``query`` (F = :func:`num_features`).

    Everything is known to a central dispatcher at time ``t`` (no future information):

    * one-hot app [A] and source [N] of the query;
    * per site [S]: estimated backlog / deadline, queue length (pending queries among the site's
      last L dispatches) per worker / 4, pending nominal work per worker / deadline, RTT from the
      query's source / deadline;
    * per action [S*V]: estimated slack ``(deadline - rtt - backlog at arrival - proc) / deadline``,
      clipped to [-2, 1];
    * per variant [V]: 1 if the variant is in the app's family and accurate enough;
    * per (rule, action) [H*S*V]: 1 where the static rule ``HINT_POLICIES[h]`` would dispatch the
      query (the rules use the same causal information, so the agent can learn when to follow
      which rule, and where to deviate from all of them);
    * per app [A]: recent arrival rate (last L arrivals) / nominal rate at load 1, and the success
      ratio of its last L queries whose outcome is already known (1 when none is);
    * measured, from answers already back (what adapting to conditions the static rules do not know about
      needs; :func:`measurements`): per site [S] the recent wait at the site / deadline, round trip and processing
      time relative to the nominal ones, age of the newest measurement / deadline; per action [S*V] the slack
      re-estimated with them ``(deadline - rtt*net_ratio - max(backlog*proc_ratio, wait) - proc*proc_ratio) /
      deadline`` clipped to [-2, 1]; per app [A] the mean measured slack of its recent queries / its deadline.
      ``measured=False`` leaves these blocks out (the observation of agents saved in format 3).
    """
    if sim.ring_done_us.shape[-1] == 0:
        raise ValueError("features() needs a history ring: simulate with ring > 0")
    t = query.time_us
    d = params.deadline_us[query.app].astype(jnp.float32)
    workers = jnp.maximum(params.workers, 1).astype(jnp.float32)
    rtt = params.rtt_us[query.source]
    backlog = backlog_estimate(params, sim, t).astype(jnp.float32)
    pending = sim.ring_done_us > t
    queue = jnp.sum(pending, axis=1).astype(jnp.float32) / workers
    work = jnp.sum(jnp.where(pending, sim.ring_work_us, 0), axis=1).astype(jnp.float32) / workers
    wait_at_site = backlog_estimate(params, sim, t + rtt // 2).astype(jnp.float32)
    est = rtt[:, None].astype(jnp.float32) + wait_at_site[:, None] + params.proc_us.astype(jnp.float32)
    slack = jnp.clip((d - est) / d, -2.0, 1.0).reshape(-1)
    ok_variant = params.variant_mask[query.app] & (params.accuracy_pm >= params.min_accuracy_pm[query.app])

    filled = sim.app_arrival_us > -NEVER
    count = jnp.sum(filled, axis=1)
    oldest = jnp.min(jnp.where(filled, sim.app_arrival_us, t), axis=1)
    span = jnp.maximum(t - oldest, 1).astype(jnp.float32)
    rate = jnp.where(count >= 2, (count - 1).astype(jnp.float32) * 1e6 / span, 0.0) / params.nominal_rate
    known = sim.app_resolve_us <= t
    n_known = jnp.sum(known, axis=1)
    success = jnp.where(n_known > 0, jnp.sum(known & sim.app_ok, axis=1) / jnp.maximum(n_known, 1), 1.0)

    hints = [jax.nn.one_hot(STATIC_POLICIES[h](params, sim, query), params.num_actions) for h in HINT_POLICIES]
    if not measured:
        parts = [jax.nn.one_hot(query.app, params.num_apps), jax.nn.one_hot(query.source, params.num_sources),
                 jnp.clip(backlog / d, 0.0, 4.0), jnp.clip(queue / 4.0, 0.0, 4.0), jnp.clip(work / d, 0.0, 4.0),
                 jnp.clip(rtt.astype(jnp.float32) / d, 0.0, 4.0), slack, ok_variant.astype(jnp.float32), *hints,
                 jnp.clip(rate, 0.0, 8.0), success.astype(jnp.float32)]
        return jnp.concatenate(parts).astype(jnp.float32)
    m = measurements(sim, t)
    net_est = rtt.astype(jnp.float32) * m["net_ratio"]
    wait_est = jnp.maximum(wait_at_site * m["proc_ratio"], m["queue_us"])
    est_m = (net_est + wait_est)[:, None] + params.proc_us.astype(jnp.float32) * m["proc_ratio"][:, None]
    slack_m = jnp.clip((d - est_m) / d, -2.0, 1.0).reshape(-1)
    app_d = params.deadline_us.astype(jnp.float32)
    parts = [
        jax.nn.one_hot(query.app, params.num_apps),
        jax.nn.one_hot(query.source, params.num_sources),
        jnp.clip(backlog / d, 0.0, 4.0),
        jnp.clip(queue / 4.0, 0.0, 4.0),
        jnp.clip(work / d, 0.0, 4.0),
        jnp.clip(rtt.astype(jnp.float32) / d, 0.0, 4.0),
        jnp.clip(m["queue_us"] / d, 0.0, 4.0),
        jnp.clip(m["net_ratio"], 0.0, 8.0) / 2.0,
        jnp.clip(m["proc_ratio"], 0.0, 8.0) / 2.0,
        jnp.clip(m["age_us"] / d, 0.0, 4.0),
        slack,
        slack_m,
        ok_variant.astype(jnp.float32),
        *hints,
        jnp.clip(rate, 0.0, 8.0),
        success.astype(jnp.float32),
        jnp.where(m["app_known"] > 0, jnp.clip(m["app_slack_us"] / app_d, -1.0, 1.0), 1.0),
    ]
    return jnp.concatenate(parts).astype(jnp.float32)


# ------------------------------------------------------------------------------ accounting
def outcome_counts(outcome: Outcome, trace: Trace, num_apps: int) -> jax.Array:
    """i32[A, 5] final outcomes per app and code (padding excluded). vmappable."""
    hot_app = jax.nn.one_hot(trace.app, num_apps, dtype=jnp.int32) * trace.valid[:, None]
    hot_code = jax.nn.one_hot(outcome.code, len(OUTCOMES), dtype=jnp.int32)
    return hot_app.T @ hot_code


def conservation_at(outcome: Outcome, trace: Trace, at_us: jax.Array) -> dict:
    """Counts at time ``at_us``: arrived, resolved per code, in flight (arrived, not yet resolved)."""
    arrived = trace.valid & (trace.time_us <= at_us)
    resolved = arrived & (outcome.resolve_us <= at_us)
    per_code = jnp.sum(jax.nn.one_hot(outcome.code, len(OUTCOMES), dtype=jnp.int32) * resolved[:, None], axis=0)
    return {
        "arrived": jnp.sum(arrived),
        "resolved": per_code,
        "in_flight": jnp.sum(arrived & ~resolved),
    }
