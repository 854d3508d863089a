"""The learned scheduler: a permutation-invariant network over sub-jobs and accelerators (flax nnx).

Per sub-job features (:func:`subjob_features`, f32[S, F_S]) are embedded by a shared MLP; a masked
mean over the ready sub-jobs gives a context vector (DeepSets). Two heads read them:

* ``priority`` logits f32[S]: which ready sub-job to start;
* ``pair`` logits f32[S, M]: on which allowed accelerator, from the sub-job embedding, the context
  and per-pair features (:func:`pair_features`, f32[S, M, F_P]: time on that accelerator, its
  slow-down over the sub-job's fastest one, accelerator one-hot).

Sampling a (sub-job, accelerator) pair = Gumbel-max over the masked logits; the policy's
:class:`~.types.Action` is then a one-hot priority and preference, and the log-probability is the
sum of the two masked log-softmaxes. Greedy decoding takes the argmaxes.

``features=1`` (the first policy): 12 sub-job features, 2 pair features, no view of the safety layer.
``features=2`` (**safety-aware**, issue 31) adds what the layer tells the policy
(:class:`~.types.Observation`): per sub-job its slack against the certified reference schedule
(``ref_slack_us``), its critical-path slack (``deadline - now - fastest time - cp_after``), whether it is a
hopeless SRT sub-job and whether any of its pairs certifies; per pair whether the layer would accept it
(``certifiable``), the time to the reference's next start on that accelerator (``cut_in_us``) and the
critical-path slack on that accelerator. Two more choices, both network-config values:

* ``certified_only``: sample only among certifiable pairs when one exists (the layer would override the
  others; a due reference pair always certifies, so an override then only happens when no ready pair
  certifies);
* ``prior``: the logits are a learned residual on top of the critical-path-slack list scheduler
  (:func:`.baselines.cpls`): ``priority = net + w_p * prior_p`` and ``pair = net + w_m * prior_m`` with
  learned scalars ``w`` (initial ``prior`` value) -- so the untrained policy, decoded greedily, is cpls restricted
  to certifiable pairs, and training moves away from it where that pays.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
from flax import nnx

from respect_jax.realtime.baselines import critical_path_slack
from respect_jax.realtime.types import SLACK_NONE, Action, Observation

MS = 1000.0  # features are in milliseconds
NUM_SUBJOB_FEATURES = 12
NUM_PAIR_FEATURES = 2
NUM_SUBJOB_FEATURES_V2 = NUM_SUBJOB_FEATURES + 6
NUM_PAIR_FEATURES_V2 = NUM_PAIR_FEATURES + 3
HOPELESS_PRIOR = -25.0  # prior priority (ms of slack) of a hopeless SRT sub-job: behind every clipped slack


@dataclass(frozen=True)
class RTPolicyConfig:
    """Network shape; ``machines`` fixes the accelerator one-hot width.

    ``features``: 1 (safety-blind, the first policy) or 2 (safety-aware, see the module docstring);
    ``certified_only``: sample among certifiable pairs only (when one exists);
    ``prior``: initial weight of the cpls prior on the logits (0 = no prior; needs ``features=2``).
    """

    machines: int
    hidden: int = 64
    layers: int = 2
    features: int = 1
    certified_only: bool = False
    prior: float = 0.0

    def __post_init__(self) -> None:
        if self.features not in (1, 2):
            raise ValueError(f"policy_net.features must be 1 or 2, got {self.features}")
        if self.features == 1 and (self.certified_only or self.prior):
            raise ValueError("policy_net.certified_only and policy_net.prior need policy_net.features=2")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict) -> RTPolicyConfig:
        kinds = {"certified_only": bool, "prior": float}
        return cls(**{k: kinds.get(k, int)(v) for k, v in doc.items()})


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


def _slack_ms(us: jax.Array) -> jax.Array:
    return jnp.clip(us.astype(jnp.float32) / MS, -20.0, 20.0)


def cp_slack_us(obs: Observation) -> jax.Array:
    """i32[S, M] critical-path slack of each pair: ``deadline - now - time on m - cp_after``."""
    return obs.deadline[:, None] - obs.time - obs.exec_us - obs.cp_after_us[:, None]


def safety_subjob_features(obs: Observation) -> jax.Array:
    """f32[S, 6]: reference slack (ms, clipped), in-reference flag, critical-path slack on the fastest allowed
    accelerator (ms, clipped), hopeless SRT flag, any certifiable pair, HRT share of the ready sub-jobs."""
    in_ref = obs.ref_slack_us < SLACK_NONE
    cps = critical_path_slack(obs)
    ready = jnp.any(obs.pair_mask, axis=1)
    hopeless = ~obs.is_hrt & (cps < 0)
    hrt_share = jnp.sum(ready & obs.is_hrt) / jnp.maximum(jnp.sum(ready), 1)
    return jnp.stack(
        [
            jnp.where(in_ref, _slack_ms(obs.ref_slack_us), 20.0) / 5.0,
            in_ref.astype(jnp.float32),
            jnp.where(ready, _slack_ms(cps), 0.0) / 5.0,
            (hopeless & ready).astype(jnp.float32),
            jnp.any(obs.certifiable, axis=1).astype(jnp.float32),
            jnp.broadcast_to(hrt_share, in_ref.shape).astype(jnp.float32),
        ],
        axis=-1,
    )


def safety_pair_features(obs: Observation) -> jax.Array:
    """f32[S, M, 3]: the layer would accept the pair, time to the reference's next start on the accelerator
    (ms, clipped), critical-path slack on that accelerator (ms, clipped)."""
    s_n = obs.exec_us.shape[0]
    cut = jnp.where(obs.cut_in_us < SLACK_NONE, _slack_ms(obs.cut_in_us), 20.0)
    return jnp.stack(
        [
            obs.certifiable.astype(jnp.float32),
            jnp.broadcast_to(cut[None, :], obs.exec_us.shape) / 5.0,
            _slack_ms(cp_slack_us(obs)) / 5.0,
        ],
        axis=-1,
    ).reshape(s_n, -1, 3)


def prior_logits(obs: Observation) -> tuple[jax.Array, jax.Array]:
    """The cpls prior: priority f32[S] = ``-slack`` in ms (clipped to [-20, 20]; hopeless SRT:
    :data:`HOPELESS_PRIOR`) and pair f32[S, M] = ``-time on the accelerator`` in ms."""
    cps = critical_path_slack(obs)
    hopeless = ~obs.is_hrt & (cps < 0)
    prio = jnp.where(hopeless, HOPELESS_PRIOR, -_slack_ms(cps))
    return prio, -obs.exec_us.astype(jnp.float32) / MS


def proposal_mask(obs: Observation, certified_only: bool) -> jax.Array:
    """bool[S, M] the pairs the policy samples from: the certifiable ones when ``certified_only`` and one
    exists, else every allowed pair."""
    if not certified_only:
        return obs.pair_mask
    return jnp.where(jnp.any(obs.certifiable), obs.certifiable, obs.pair_mask)


class RTPolicy(nnx.Module):
    """Priority and accelerator logits for one observation (vmap for a batch)."""

    def __init__(self, cfg: RTPolicyConfig, rngs: nnx.Rngs):
        self.cfg = cfg
        h = cfg.hidden
        v2 = cfg.features == 2
        dims = [NUM_SUBJOB_FEATURES_V2 if v2 else NUM_SUBJOB_FEATURES] + [h] * cfg.layers
        self.embed = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(dims[:-1], dims[1:], strict=True)])
        self.prio1 = nnx.Linear(2 * h, h, rngs=rngs)
        self.prio2 = nnx.Linear(h, 1, rngs=rngs)
        n_pair = NUM_PAIR_FEATURES_V2 if v2 else NUM_PAIR_FEATURES
        self.pair1 = nnx.Linear(2 * h + n_pair + cfg.machines, h, rngs=rngs)
        self.pair2 = nnx.Linear(h, 1, rngs=rngs)
        if cfg.prior:
            self.prior_w = nnx.Param(jnp.full((2,), cfg.prior, jnp.float32))

    def __call__(self, obs: Observation) -> tuple[jax.Array, jax.Array]:
        """Returns priority logits f32[S] and pair logits f32[S, M] (unmasked)."""
        v2 = self.cfg.features == 2
        x = subjob_features(obs)
        if v2:
            live = (obs.valid & ~obs.dispatched & (obs.release <= obs.time))[:, None]
            x = jnp.concatenate([x, jnp.where(live, safety_subjob_features(obs), 0.0)], axis=-1)
        for layer in self.embed:
            x = jax.nn.relu(layer(x))
        ready = jnp.any(obs.pair_mask, axis=1)
        ctx = jnp.sum(jnp.where(ready[:, None], x, 0.0), axis=0) / jnp.maximum(jnp.sum(ready), 1)
        hc = jnp.concatenate([x, jnp.broadcast_to(ctx, x.shape)], axis=-1)
        prio = self.prio2(jax.nn.relu(self.prio1(hc)))[:, 0]
        s_n, m_n = obs.exec_us.shape
        onehot = jnp.broadcast_to(jnp.eye(m_n), (s_n, m_n, m_n))
        pfeat = [pair_features(obs)] + ([safety_pair_features(obs)] if v2 else [])
        pf = jnp.concatenate([jnp.broadcast_to(hc[:, None, :], (s_n, m_n, hc.shape[-1])), *pfeat, onehot], -1)
        pair = self.pair2(jax.nn.relu(self.pair1(pf)))[..., 0]
        if self.cfg.prior:
            p_prio, p_pair = prior_logits(obs)
            prio = prio + self.prior_w[0] * p_prio
            pair = pair + self.prior_w[1] * p_pair
        return prio, pair

    def mask(self, obs: Observation) -> jax.Array:
        """bool[S, M] the pairs this policy samples from (:func:`proposal_mask`)."""
        return proposal_mask(obs, self.cfg.certified_only)


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
        return choose(prio, pair, model.mask(obs), None if greedy else key)[0]

    return policy
