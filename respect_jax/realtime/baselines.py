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
* ``cpls``  critical-path slack list scheduling for DAG jobs: a sub-job's slack is ``deadline - (now + its
  time on the fastest idle accelerator + the critical path after it)`` (``Observation.cp_after_us``, the
  longest fastest-time path to the end of its job); least slack first on the fastest idle accelerator.
  SRT sub-jobs whose slack is already negative (their job cannot meet its deadline any more) are demoted
  behind every other sub-job, in EDF order: they still run, but never ahead of work that can still make it.
* ``edf_aff`` EDF with accelerator affinity: a sub-job's affine accelerators are those within
  ``AFFINITY_TOL`` of its fastest time (the dataflow that suits its layers). Sub-jobs with an idle affine
  accelerator go first, in EDF order, then the others in EDF order; always on the fastest idle accelerator.
  So an urgent sub-job waits for its fast accelerator while work that suits the idle one runs there.
* ``cpls_cert`` (safety-aware ablation, not a state-of-the-art baseline): cpls proposing only pairs the
  safety layer certifies (``Observation.certifiable``) when one exists -- what the safety-aware RL policy's
  prior decodes to before training.
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
from respect_jax.realtime.types import INF, Action, Observation, RTState


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


AFFINITY_TOL = 0.25  # edf_aff: accelerators within 25% of a sub-job's fastest time are affine
TIER = 1.0e7  # priority offset between tiers (times are < 2**24 us, so sums stay exact in float32)


def critical_path_slack(obs: Observation) -> jax.Array:
    """i32[S] ``deadline - now - fastest allowed time - cp_after`` (very negative where no pair is allowed)."""
    best = jnp.min(jnp.where(obs.pair_mask, obs.exec_us, INF), axis=1)
    return obs.deadline - obs.time - best - obs.cp_after_us


def cpls(obs: Observation, state: RTState | None = None, key: jax.Array | None = None) -> Action:
    slack = critical_path_slack(obs)
    hopeless = ~obs.is_hrt & (slack < 0)
    prio = jnp.where(hopeless, -TIER - obs.deadline.astype(jnp.float32), -slack.astype(jnp.float32))
    return Action(priority=prio, machine_pref=_fastest(obs))


def affine(exec_us: jax.Array, tol: float = AFFINITY_TOL) -> jax.Array:
    """bool[S, M] accelerators within ``tol`` of each sub-job's fastest time."""
    best = jnp.min(exec_us, axis=1, keepdims=True)
    return exec_us <= (1.0 + tol) * best


def edf_affinity(obs: Observation, state: RTState | None = None, key: jax.Array | None = None) -> Action:
    has = jnp.any(obs.pair_mask & affine(obs.exec_us), axis=1)
    prio = jnp.where(has, TIER, 0.0) - obs.deadline.astype(jnp.float32)
    return Action(priority=prio, machine_pref=_fastest(obs))


def certified_only(policy):
    """``policy`` restricted to the pairs the safety layer certifies now, when one exists."""

    def wrapped(obs: Observation, state: RTState | None = None, key: jax.Array | None = None) -> Action:
        mask = jnp.where(jnp.any(obs.certifiable), obs.certifiable, obs.pair_mask)
        act = policy(obs.replace(pair_mask=mask), state, key)
        return Action(
            priority=jnp.where(jnp.any(mask, axis=1), act.priority, -1e30),
            machine_pref=jnp.where(mask, act.machine_pref, -1e30),
        )

    return wrapped


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
    "cpls": cpls,
    "edf_aff": edf_affinity,
    "cpls_cert": certified_only(cpls),
    "random": random_policy,
    "static_random": static_random,
    "adversarial": adversarial,
    "oracle_adversary": oracle_adversary,
}
