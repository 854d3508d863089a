"""PPO for the real-time policy (issue 31): its surrogate against REINFORCE, clipping, a tiny resumable run."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import RT_TEST_PLATFORM
from flax import nnx

from respect_jax.realtime.experiment import scenario_preset as preset
from respect_jax.realtime.generator import generate
from respect_jax.realtime.platform import platform_from_dict
from respect_jax.realtime.policy import RTPolicy, RTPolicyConfig
from respect_jax.realtime.ppo import collect, surrogate_loss
from respect_jax.realtime.tasks import Sizes, pack, stack
from respect_jax.realtime.train import RTTrainConfig, fit, load_policy, make_env, sampled_returns

PLATFORM = platform_from_dict(RT_TEST_PLATFORM)
TINY = preset("tiny")
SIZES = Sizes(TINY.max_hrt_jobs, TINY.max_srt_jobs, TINY.groups, 3, TINY.num_clients)
NET = RTPolicyConfig(machines=3, hidden=16, layers=1, features=2, certified_only=True, prior=3.0)


def _pool(count: int, seed: int):
    scs, _ = generate(TINY, PLATFORM, count, seed)
    return jax.tree.map(jnp.asarray, stack([pack(s, SIZES) for s in scs]))


@pytest.mark.slow  # 20-55 s here: compiles a rollout, REINFORCE's gradient through it and the surrogate
def test_ppo_surrogate_gradient_equals_reinforce_at_the_old_policy_and_clipping_stops_it():
    """At the policy that collected the rollouts (ratio 1) the clipped surrogate's gradient is REINFORCE's
    (``-mean(adv * sum of log-probabilities)`` through :func:`.train.sampled_returns`, the same key draws the same
    rollouts); the recorded log-probabilities equal REINFORCE's; once every ratio is pushed outside the clip range
    in the advantage's direction the gradient is zero."""
    cfg = RTTrainConfig(updates=1, updates_per_epoch=1, batch=3, samples=2, max_steps=40)
    pool = _pool(3, 5)
    batch = jax.tree.map(lambda x: jnp.repeat(x, 2, axis=0), pool)
    model = RTPolicy(NET, rngs=nnx.Rngs(1))
    graphdef, params = nnx.split(model)
    env, key = make_env(cfg), jax.random.key(7)
    out = jax.jit(lambda p: collect(nnx.merge(graphdef, p), env, batch, key, 40))(params)
    ret = out["return"].reshape(3, 2)
    adv = (ret - ret.mean(axis=1, keepdims=True)).reshape(-1)
    assert float(jnp.abs(adv).sum()) > 0  # rollouts of a scenario differ: a non-vacuous gradient

    def reinforce(p):
        o = sampled_returns(nnx.merge(graphdef, p), env, batch, key, 40)
        return -jnp.mean(adv * o["logp"]), o

    g_ref, ref_out = jax.jit(jax.grad(reinforce, has_aux=True))(params)
    # train.util_reward adds util_reward x the episode's busy / (M x makespan) to REINFORCE's return
    bonus = jax.jit(lambda p: sampled_returns(nnx.merge(graphdef, p), env, batch, key, 40, 2.0)["return"])(params)
    np.testing.assert_allclose(
        np.asarray(bonus), np.asarray(out["return"] + 2.0 * out["metrics"]["utilisation"]), rtol=1e-6
    )
    assert float(jnp.min(out["metrics"]["utilisation"])) > 0
    np.testing.assert_array_equal(np.asarray(ref_out["return"]), np.asarray(out["return"]))
    np.testing.assert_allclose(
        np.asarray(jnp.sum(jnp.where(out["active"], out["logp"], 0.0), axis=0)), np.asarray(ref_out["logp"]), 1e-5
    )
    data = {n: out[n] for n in ("obs", "j", "m", "logp", "active")} | {"adv": adv}
    grad = jax.jit(jax.grad(surrogate_loss, argnums=1, has_aux=True), static_argnums=(0, 3))
    g_ppo, aux = grad(graphdef, params, data, 0.2)
    assert float(aux["clip_frac"]) == 0.0 and abs(float(aux["approx_kl"])) < 1e-6
    for a, b in zip(jax.tree.leaves(g_ref), jax.tree.leaves(g_ppo), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=2e-4, atol=1e-7)
    # old log-probabilities moved so that every ratio is 1.5 (A > 0) or 0.5 (A < 0): min() takes the clipped,
    # constant branch everywhere, so no gradient flows
    shift = jnp.where(adv > 0, jnp.log(1.5), jnp.log(0.5))[None, :]
    moved = data | {"logp": data["logp"] - shift}
    g_clip, aux = grad(graphdef, params, moved, 0.2)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree.leaves(g_clip))
    assert float(aux["clip_frac"]) > 0.5


def test_bad_ppo_knobs_are_one_line_errors():
    with pytest.raises(ValueError, match="train.algorithm must be reinforce or ppo"):
        RTTrainConfig(algorithm="a2c")
    with pytest.raises(ValueError, match="train.ppo_minibatches >= 1 dividing batch"):
        RTTrainConfig(batch=3, samples=2, algorithm="ppo", ppo_minibatches=4)
    with pytest.raises(ValueError, match=r"train.ppo_clip must be in \(0, 1\)"):
        RTTrainConfig(ppo_clip=1.5)
    with pytest.raises(ValueError, match="train.util_reward must be >= 0"):
        RTTrainConfig(util_reward=-1.0)


@pytest.mark.slow  # ~20 s: compiles the whole PPO epoch
def test_tiny_ppo_run_trains_checkpoints_and_loads(tmp_path):
    cfg = RTTrainConfig(updates=2, updates_per_epoch=1, batch=2, samples=2, max_steps=40, algorithm="ppo",
                        ppo_epochs=2, ppo_minibatches=2)  # fmt: skip
    model, logs = fit(_pool(6, 0), NET, cfg, tmp_path, log=lambda s: None)
    assert [r["step"] for r in logs] == [1, 2]
    assert all(np.isfinite(r["loss"]) and r["finished"] == 1.0 and r["hrt_missed"] == 0 for r in logs)
    assert all(0.0 <= r["clip_frac"] <= 1.0 for r in logs)
    doc = json.loads((tmp_path / "network.json").read_text())
    assert doc["train"]["algorithm"] == "ppo"
    loaded, ldoc = load_policy(tmp_path)
    assert ldoc["step"] == 2
    init = RTPolicy(NET, rngs=nnx.Rngs(cfg.seed))  # the update moved the parameters
    assert any(
        not np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(jax.tree.leaves(nnx.state(init)), jax.tree.leaves(nnx.state(loaded)), strict=True)
    )
