"""Non-learned policies in the :class:`~.types.Action` form (pure JAX, one episode; vmap them).

Every policy maps ``(obs, state, key)`` to per-sub-job priorities and per-(sub-job, accelerator)
preferences; the environment starts the best allowed pair. The accelerator choice of the list
schedulers is "fastest idle accelerator for this sub-job" (its earliest finish among the idle
ones; the environment never reserves a busy accelerator).

* ``edf``   earliest absolute deadline first (HRT and SRT alike).
* ``llf``   least laxity first: ``deadline - now - remaining fastest work of the job``.
* ``heft``  HEFT-style list scheduling: highest upward rank first (mean time plus transfers to the
  end of the job), deadline-unaware, earliest-finish accelerator.
* ``fcfs``  first come first served by job release.
* ``random`` uniform random priorities and preferences (fresh each decision).
* ``static_random`` fixed pseudo-random priorities (key 0) and preferences (key 1): seeded traces
  shared with the plain-Python simulator.
* ``adversarial`` starves HRT work: SRT first (longest first), then HRT with the latest deadline,
  always on the slowest allowed accelerator.
* ``oracle_adversary`` (tests): sees the safety layer's reference and proposes a pair the
  certifier rejects whenever one exists (the strongest attempt to break the guarantee).

The plain-Python twins of the deterministic ones are :data:`.reference.PY_POLICIES`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from respect_jax.realtime.safety import certify_all
from respect_jax.realtime.types import Action, Observation, RTState


def _fastest(obs: Observation) -> jax.Array:
    return -obs.exec_us.astype(jnp.float32)


def edf(obs: Observation, state: RTState | None = None, key: jax.Array | None = None) -> Action:
    return Action(priority=-obs.deadline.astype(jnp.float32), machine_pref=_fastest(obs))


def llf(obs: Observation, state: RTState | None = None, key: jax.Array | None = None) -> Action:
    laxity = obs.deadline - obs.time - obs.job_remaining_us
    return Action(priority=-laxity.astype(jnp.float32), machine_pref=_fastest(obs))


def heft(obs: Observation, state: RTState | None = None, key: jax.Array | None = None) -> Action:
    return Action(priority=obs.rank_u.astype(jnp.float32), machine_pref=_fastest(obs))


def fcfs(obs: Observation, state: RTState | None = None, key: jax.Array | None = None) -> Action:
    return Action(priority=-obs.release.astype(jnp.float32), machine_pref=_fastest(obs))


def random_policy(obs: Observation, state: RTState | None, key: jax.Array) -> Action:
    k1, k2 = jax.random.split(key)
    return Action(
        priority=jax.random.uniform(k1, obs.deadline.shape),
        machine_pref=jax.random.uniform(k2, obs.exec_us.shape),
    )


def static_random(obs: Observation, state: RTState | None = None, key: jax.Array | None = None) -> Action:
    """Fixed pseudo-random priorities (the same every decision and scenario): seeded traces."""
    s_n, m_n = obs.exec_us.shape
    return Action(
        priority=jax.random.uniform(jax.random.key(0), (s_n,)),
        machine_pref=jax.random.uniform(jax.random.key(1), (s_n, m_n)),
    )


def adversarial(obs: Observation, state: RTState | None = None, key: jax.Array | None = None) -> Action:
    longest = jnp.max(obs.exec_us, axis=1).astype(jnp.float32)
    prio = jnp.where(obs.is_hrt, obs.deadline.astype(jnp.float32), 1e7 + longest)
    return Action(priority=prio, machine_pref=obs.exec_us.astype(jnp.float32))


def oracle_adversary(obs: Observation, state: RTState, key: jax.Array) -> Action:
    """Propose a pair the certifier rejects when one exists (else the longest pair); test tool."""
    p = state.params
    ok = certify_all(p, state.t, state.ref_start, state.ref_machine)
    bad = obs.pair_mask & ~ok
    noise = jax.random.uniform(key, obs.exec_us.shape) * 0.5
    score = jnp.where(bad, 1e6, 0.0) + obs.exec_us.astype(jnp.float32) / 1e3 + noise
    score = jnp.where(obs.pair_mask, score, -1.0)
    return Action(priority=jnp.max(score, axis=1), machine_pref=score)


POLICIES = {
    "edf": edf,
    "llf": llf,
    "heft": heft,
    "fcfs": fcfs,
    "random": random_policy,
    "static_random": static_random,
    "adversarial": adversarial,
    "oracle_adversary": oracle_adversary,
}
