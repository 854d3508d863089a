"""Static dispatch policies (pure JAX, integer arithmetic, ties broken by the lowest index).

Each is a :data:`~respect_jax.edge_cluster.types.Policy` ``(params, sim, query) -> action``
with ``action = site * V + variant``. "Feasible" variants are those of the app's family whose
accuracy reaches the app's minimum; "nominal" response = RTT + nominal processing time (no
queueing, no jitter); the "estimated backlog" is the dispatcher's virtual clock of the nominal
work it has sent to each site (:attr:`SimState.vclock_us`), the only load information these
policies use.

* ``closest``: the site with the smallest RTT from the query's source; the cheapest feasible variant.
* ``fastest_expected``: the feasible (site, variant) with the smallest expected response
  ``rtt + estimated backlog at arrival + proc`` (a greedy, load-aware rule).
* ``most_accurate``: the most accurate (site, variant) whose nominal response meets the deadline
  (smallest nominal response among equals); the nominally fastest feasible pair if none does.
* ``least_loaded``: the site with the smallest estimated backlog (then the smallest RTT); the
  cheapest feasible variant there.
* ``random``: uniform over the app's allowed actions, from the trace's pre-drawn ``rand``.

The Python reference (:mod:`respect_jax.edge_cluster.reference`) implements the same rules.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from respect_jax.edge_cluster.types import (
    EdgeParams,
    Policy,
    SimState,
    Trace,
    action_mask,
    backlog_estimate,
    first_argmin,
)

_BIG = 2**31 - 1  # a Python int: a jnp value made at import time would leak into the trace that imports it


def _feasible(params: EdgeParams, query: Trace) -> jax.Array:
    """bool[V] variants of the app's family accurate enough."""
    return params.variant_mask[query.app] & (params.accuracy_pm >= params.min_accuracy_pm[query.app])


def _cheapest_at(params: EdgeParams, query: Trace, site: jax.Array) -> jax.Array:
    return first_argmin(jnp.where(_feasible(params, query), params.proc_us[site], _BIG)).astype(jnp.int32)


def _flat(params: EdgeParams, site: jax.Array, variant: jax.Array) -> jax.Array:
    return (site * params.num_variants + variant).astype(jnp.int32)


def closest(params: EdgeParams, sim: SimState, query: Trace) -> jax.Array:
    site = first_argmin(params.rtt_us[query.source]).astype(jnp.int32)
    return _flat(params, site, _cheapest_at(params, query, site))


def fastest_expected(params: EdgeParams, sim: SimState, query: Trace) -> jax.Array:
    rtt = params.rtt_us[query.source]
    wait = backlog_estimate(params, sim, query.time_us + jax.lax.div(rtt, 2))
    expected = rtt[:, None] + wait[:, None] + params.proc_us
    score = jnp.where(_feasible(params, query)[None, :], expected, _BIG)
    return first_argmin(score.reshape(-1)).astype(jnp.int32)


def most_accurate(params: EdgeParams, sim: SimState, query: Trace) -> jax.Array:
    nominal = params.rtt_us[query.source][:, None] + params.proc_us  # [S, V]
    feasible = jnp.broadcast_to(_feasible(params, query)[None, :], nominal.shape)
    in_time = feasible & (nominal <= params.deadline_us[query.app])
    acc = jnp.broadcast_to(params.accuracy_pm[None, :], nominal.shape)
    best = jnp.max(jnp.where(in_time, acc, -1))
    chosen = jnp.where(jnp.any(in_time), in_time & (acc == best), feasible)
    return first_argmin(jnp.where(chosen, nominal, _BIG).reshape(-1)).astype(jnp.int32)


def least_loaded(params: EdgeParams, sim: SimState, query: Trace) -> jax.Array:
    backlog = backlog_estimate(params, sim, query.time_us)
    tied = backlog == jnp.min(backlog)
    site = first_argmin(jnp.where(tied, params.rtt_us[query.source], _BIG)).astype(jnp.int32)
    return _flat(params, site, _cheapest_at(params, query, site))


def random(params: EdgeParams, sim: SimState, query: Trace) -> jax.Array:
    allowed = action_mask(params, query) | ~query.valid  # padding: any action (ignored)
    count = jnp.maximum(jnp.sum(allowed), 1)
    k = query.rand % count
    return first_argmin(jnp.where(jnp.cumsum(allowed) > k, 0, 1))


STATIC_POLICIES: dict[str, Policy] = {
    "closest": closest,
    "fastest_expected": fastest_expected,
    "most_accurate": most_accurate,
    "least_loaded": least_loaded,
    "random": random,
}


def get_policy(name: str) -> Policy:
    if name not in STATIC_POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(STATIC_POLICIES)} (or aset)")
    return STATIC_POLICIES[name]
