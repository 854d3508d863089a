"""The learned scheduler: a permutation-invariant network over sub-jobs and accelerators (flax nnx).

Per sub-job features (:func:`subjob_features`, f32[S, F_S]) are embedded by a shared MLP; a masked
mean over the ready sub-jobs gives a context vector (DeepSets). Two heads read them:

* ``priority`` logits f32[S]: which ready sub-job to start;
* ``pair`` logits f32[S, M]: on which allowed accelerator, from the sub-job embedding, the context
  and per-pair features (:func:`pair_features`, f32[S, M, F_P]: time on that accelerator, its
  slow-down over the sub-job's fastest one, accelerator one-hot).

Sampling a (sub-job, accelerator) pair = Gumbel-max over the masked logits; the policy's
:class:`~.types.Action` is then a one-hot priority and preference, and the log-probability is the
sum of the two masked log-softmaxes. Greedy decoding takes the argmaxes. The network never sees the
safety layer's reference schedule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
from flax import nnx

from respect_jax.realtime.types import Action, Observation

MS = 1000.0  # features are in milliseconds
NUM_SUBJOB_FEATURES = 12
NUM_PAIR_FEATURES = 2


@dataclass(frozen=True)
class RTPolicyConfig:
    """Network shape; ``machines`` fixes the accelerator one-hot width."""

    machines: int
    hidden: int = 64
    layers: int = 2

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict) -> RTPolicyConfig:
        return cls(**{k: int(v) for k, v in doc.items()})


def subjob_features(obs: Observation) -> jax.Array:
    """f32[S, 12] per sub-job: HRT flag, ready, slack, laxity, waiting time, fastest/mean time,
    upward rank, job remaining work, client satisfaction so far, HRT-less slack squash, valid."""
    t = obs.time
    ready = jnp.any(obs.pair_mask, axis=1)
    ex = obs.exec_us.astype(jnp.float32) / MS
    slack = (obs.deadline - t).astype(jnp.float32) / MS
    lax_ = (obs.deadline - t - obs.job_remaining_us).astype(jnp.float32) / MS
    wait = (t - obs.release).astype(jnp.float32) / MS
    rate = obs.client_met / jnp.maximum(obs.client_done, 1.0)
    client_rate = jnp.where(obs.client >= 0, rate[jnp.maximum(obs.client, 0)], 1.0)
    live = obs.valid & ~obs.dispatched & (obs.release <= t)
    feats = jnp.stack(
        [
            obs.is_hrt.astype(jnp.float32),
            ready.astype(jnp.float32),
            jnp.clip(slack, -20.0, 20.0) / 5.0,
            jnp.clip(lax_, -20.0, 20.0) / 5.0,
            jnp.clip(wait, 0.0, 20.0) / 5.0,
            jnp.min(ex, axis=1),
            jnp.mean(ex, axis=1),
            obs.rank_u / MS,
            obs.job_remaining_us.astype(jnp.float32) / MS,
            client_rate,
            jnp.tanh(lax_),
            live.astype(jnp.float32),
        ],
        axis=-1,
    )
    return jnp.where(live[:, None], feats, 0.0)


def pair_features(obs: Observation) -> jax.Array:
    """f32[S, M, 2]: time on the accelerator (ms) and slow-down over the fastest one."""
    ex = obs.exec_us.astype(jnp.float32)
    best = jnp.min(ex, axis=1, keepdims=True)
    return jnp.stack([ex / MS, ex / jnp.maximum(best, 1.0) - 1.0], axis=-1)


class RTPolicy(nnx.Module):
    """Priority and accelerator logits for one observation (vmap for a batch)."""

    def __init__(self, cfg: RTPolicyConfig, rngs: nnx.Rngs):
        self.cfg = cfg
        h = cfg.hidden
        dims = [NUM_SUBJOB_FEATURES] + [h] * cfg.layers
        self.embed = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(dims[:-1], dims[1:], strict=True)])
        self.prio1 = nnx.Linear(2 * h, h, rngs=rngs)
        self.prio2 = nnx.Linear(h, 1, rngs=rngs)
        self.pair1 = nnx.Linear(2 * h + NUM_PAIR_FEATURES + cfg.machines, h, rngs=rngs)
        self.pair2 = nnx.Linear(h, 1, rngs=rngs)

    def __call__(self, obs: Observation) -> tuple[jax.Array, jax.Array]:
        """Returns priority logits f32[S] and pair logits f32[S, M] (unmasked)."""
        x = subjob_features(obs)
        for layer in self.embed:
            x = jax.nn.relu(layer(x))
        ready = jnp.any(obs.pair_mask, axis=1)
        ctx = jnp.sum(jnp.where(ready[:, None], x, 0.0), axis=0) / jnp.maximum(jnp.sum(ready), 1)
        hc = jnp.concatenate([x, jnp.broadcast_to(ctx, x.shape)], axis=-1)
        prio = self.prio2(jax.nn.relu(self.prio1(hc)))[:, 0]
        s_n, m_n = obs.exec_us.shape
        onehot = jnp.broadcast_to(jnp.eye(m_n), (s_n, m_n, m_n))
        pf = jnp.concatenate(
            [jnp.broadcast_to(hc[:, None, :], (s_n, m_n, hc.shape[-1])), pair_features(obs), onehot], -1
        )
        pair = self.pair2(jax.nn.relu(self.pair1(pf)))[..., 0]
        return prio, pair


def masked_logits(prio: jax.Array, pair: jax.Array, pair_mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mask logits to ready sub-jobs / allowed accelerators (-1e9 elsewhere)."""
    ready = jnp.any(pair_mask, axis=1)
    return jnp.where(ready, prio, -1e9), jnp.where(pair_mask, pair, -1e9)


def choose(
    prio: jax.Array, pair: jax.Array, pair_mask: jax.Array, key: jax.Array | None
) -> tuple[Action, jax.Array, jax.Array, jax.Array]:
    """Sample (``key``) or take greedily (``key=None``) a pair; return the one-hot Action, the
    sub-job i32[], the accelerator i32[] and the log-probability f32[] of the choice."""
    prio, pair = masked_logits(prio, pair, pair_mask)
    if key is None:
        j = jnp.argmax(prio)
        m = jnp.argmax(pair[j])
    else:
        k1, k2 = jax.random.split(key)
        j = jax.random.categorical(k1, prio)
        m = jax.random.categorical(k2, pair[j])
    logp = jax.nn.log_softmax(prio)[j] + jax.nn.log_softmax(pair[j])[m]
    s_n, m_n = pair.shape
    action = Action(
        priority=(jnp.arange(s_n) == j).astype(jnp.float32),
        machine_pref=((jnp.arange(s_n)[:, None] == j) & (jnp.arange(m_n)[None, :] == m)).astype(jnp.float32),
    )
    return action, j.astype(jnp.int32), m.astype(jnp.int32), logp


def as_policy(model: RTPolicy, greedy: bool = True):
    """The network as an environment policy ``(obs, state, key) -> Action``."""

    def policy(obs: Observation, state=None, key: jax.Array | None = None) -> Action:
        prio, pair = model(obs)
        return choose(prio, pair, obs.pair_mask, None if greedy else key)[0]

    return policy
