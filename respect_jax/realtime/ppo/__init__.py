"""PPO for the real-time policy (issue 31: "PPO or the current algorithm, whichever trains better").

Same network (:class:`~respect_jax.realtime.policy.RTPolicy`), environment, scenario pool, reward and shared
per-scenario baseline as the REINFORCE trainer (:mod:`respect_jax.realtime.train`); only the update differs.
Chosen with ``train.algorithm=ppo`` (``conf/rt.yaml``); the run folder and the trained policy are the same format,
so ``respect-rt eval|grid`` load a PPO policy like any other.

One update (:func:`make_update`):

1. draw ``batch`` scenarios from the pool and roll each out ``samples`` times with the current policy (sampled
   actions, no gradient), recording every decision's observation, chosen (sub-job, accelerator) and
   log-probability;
2. advantage of an episode = its return minus the mean return of the ``samples`` rollouts of its scenario (the
   REINFORCE baseline), given to each of its decisions (episode-level credit: the reward is the episode's SRT
   satisfaction, no critic);
3. ``ppo_epochs`` passes over the episodes in ``ppo_minibatches`` random minibatches, each an Adam step on the
   clipped surrogate ``-sum_decisions min(r A, clip(r, 1 - eps, 1 + eps) A) / episodes`` with
   ``r = pi_new / pi_old`` per decision and ``eps = ppo_clip``. At ``r = 1`` its gradient equals REINFORCE's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from respect_jax.realtime.environment import episode_metrics
from respect_jax.realtime.policy import RTPolicy, choose, masked_logits
from respect_jax.realtime.types import RTParams
from respect_jax.train.harness import TrainState


def log_prob(prio: jax.Array, pair: jax.Array, mask: jax.Array, j: jax.Array, m: jax.Array) -> jax.Array:
    """f32[] log-probability of choosing sub-job ``j`` on accelerator ``m`` (as :func:`.policy.choose` samples)."""
    prio, pair = masked_logits(prio, pair, mask)
    return jax.nn.log_softmax(prio)[j] + jax.nn.log_softmax(pair[j])[m]


def collect(model: RTPolicy, env, params: RTParams, key: jax.Array, steps: int) -> dict:
    """Roll out a batch (axis B) with sampled actions, recording every decision (leading axes [T, B])."""
    b = params.valid.shape[0]
    state, ts = env.batch_reset(params)

    def body(carry, k):
        state, obs, ret = carry
        active = ~state.done
        prio, pair = jax.vmap(model)(obs)
        mask = jax.vmap(model.mask)(obs)
        action, j, m, lp = jax.vmap(choose)(prio, pair, mask, jax.random.split(k, b))
        state, ts = env.batch_step(state, action)
        return (state, ts.observation, ret + ts.reward), (obs, j, m, lp, active)

    (state, _, ret), (obs, j, m, lp, active) = jax.lax.scan(
        body, (state, ts.observation, jnp.zeros((b,), jnp.float32)), jax.random.split(key, steps)
    )
    met = jax.vmap(episode_metrics)(state)
    return {"return": ret, "done": state.done, "metrics": met, "obs": obs, "j": j, "m": m, "logp": lp,
            "active": active}  # fmt: skip


def surrogate_loss(graphdef: nnx.GraphDef, params, data: dict, eps: float) -> tuple[jax.Array, dict]:
    """Clipped surrogate of recorded decisions ``data`` (``obs``/``j``/``m``/``logp``/``active`` with axes [T, E],
    ``adv`` f32[E]): ``-sum over active decisions of min(r A, clip(r, 1 - eps, 1 + eps) A) / E``; also the clipped
    fraction and the approximate KL of the old to the new policy."""
    model = nnx.merge(graphdef, params)

    def one(o, j, m):
        prio, pair = model(o)
        return log_prob(prio, pair, model.mask(o), j, m)

    logp = jax.vmap(jax.vmap(one))(data["obs"], data["j"], data["m"])  # [T, E]
    ratio = jnp.exp(logp - data["logp"])
    adv = data["adv"][None, :]
    s = jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - eps, 1.0 + eps) * adv)
    act = data["active"]
    loss = -jnp.sum(jnp.where(act, s, 0.0)) / adv.shape[1]
    n_act = jnp.maximum(jnp.sum(act), 1)
    clipped = jnp.sum(act & (jnp.abs(ratio - 1.0) > eps)) / n_act
    kl = jnp.sum(jnp.where(act, data["logp"] - logp, 0.0)) / n_act
    return loss, {"clip_frac": clipped, "approx_kl": kl}


def make_update(graphdef: nnx.GraphDef, cfg, steps: int):
    """The pure PPO update ``(state, pool) -> (state, metrics)`` (``cfg``: an ``RTTrainConfig`` with
    ``algorithm='ppo'``)."""
    from respect_jax.realtime.train import baseline_advantage, draw_batch, make_env, rt_optimizer, update_metrics

    env = make_env(cfg)
    opt = rt_optimizer(cfg)
    b, k = cfg.batch, cfg.samples
    n_ep = b * k
    n_mb = cfg.ppo_minibatches
    mb = n_ep // n_mb
    eps = cfg.ppo_clip

    def update(state: TrainState, pool: RTParams):
        key = jax.random.fold_in(state.key, state.step)
        k_idx, k_roll, k_perm = jax.random.split(key, 3)
        batch = draw_batch(pool, k_idx, b, k)
        out = collect(nnx.merge(graphdef, state.params), env, batch, k_roll, steps)  # no gradient flows here
        ret = out["return"] + cfg.util_reward * out["metrics"]["utilisation"] if cfg.util_reward else out["return"]
        adv = baseline_advantage(ret, k)
        data = {"obs": out["obs"], "j": out["j"], "m": out["m"], "logp": out["logp"], "active": out["active"],
                "adv": adv}  # fmt: skip
        perms = jax.vmap(lambda kk: jax.random.permutation(kk, n_ep))(jax.random.split(k_perm, cfg.ppo_epochs))
        order = perms[:, : n_mb * mb].reshape(-1, mb)  # [epochs * minibatches, mb]

        def step(carry, sel):
            params, opt_state = carry
            part = jax.tree.map(lambda x: x[:, sel], {n: v for n, v in data.items() if n != "adv"})
            part["adv"] = data["adv"][sel]
            (loss, aux), grads = jax.value_and_grad(surrogate_loss, argnums=1, has_aux=True)(
                graphdef, params, part, eps
            )
            updates, opt_state = opt.update(grads, opt_state, params)
            stats = {"loss": loss, "grad_norm": optax.tree.norm(grads), **aux}
            return (optax.apply_updates(params, updates), opt_state), stats

        (params, opt_state), stats = jax.lax.scan(step, (state.params, state.opt_state), order)
        metrics = {
            "loss": stats["loss"].mean(),
            **update_metrics(out["return"], out["done"], out["metrics"]),
            "grad_norm": stats["grad_norm"].mean(),
            "clip_frac": stats["clip_frac"].mean(),
            "approx_kl": stats["approx_kl"][-1],
        }
        return state.replace(params=params, opt_state=opt_state, step=state.step + 1), metrics

    return update
