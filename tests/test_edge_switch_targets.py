"""Training targets of the policy-switching ASET agent (issue 30): discounted rollouts under re-drawn futures and the
spread head.

The reference is the plain-Python discrete-event simulator (``reference.py``): a rollout value of
:func:`branch_returns` must equal, on the future it was drawn on, the discounted successes of slots i..i+H of that
whole trace simulated by the reference with the base rule everywhere but slot i (taken by the branch's rule).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from respect_jax.edge_cluster.generator import make_traces
from respect_jax.edge_cluster.policies import STATIC_POLICIES
from respect_jax.edge_cluster.reference import ReferenceSimulator
from respect_jax.edge_cluster.scenarios import load_preset
from respect_jax.edge_cluster.simulator import simulate
from respect_jax.edge_cluster.switching import (
    SwitchConfig,
    agent_switch_policy,
    branch_returns,
    load_switch_agent,
    make_train,
    redraw_future,
    switch_policy,
    train_switch,
)
from respect_jax.edge_cluster.types import SUCCESS

RULES = ("closest", "fastest_expected", "most_accurate", "least_loaded")
BASE = "fastest_expected"


def _one_trace(scn, load="high", seed=3):
    rates = np.broadcast_to(scn.rate(load), (1, *scn.base_rate.shape))
    batch = make_traces(jax.random.key(seed), rates, scn.trace, scn.dynamics)
    return jax.tree.map(lambda x: x[0], batch)


def _reference_value(ref: ReferenceSimulator, trace, i: int, rule: str, horizon: int, discount: float) -> float:
    """Discounted successes of slots i..i+H: the whole trace by the reference, ``rule`` at slot i, base elsewhere."""
    first, base = ref.policies[rule], ref.policies[BASE]
    ref.policies["switch_once"] = lambda q: first(q) if q.index == i else base(q)
    codes = ref.run(trace, "switch_once")["code"]
    n = len(codes)
    return float(sum(discount ** k for k in range(horizon + 1) if i + k < n and codes[i + k] == SUCCESS))


def test_redrawn_future_is_a_bootstrap_of_the_same_window():
    """Before slot i and after the window nothing changes; inside it the (gap, source, app, rand) rows are a
    permutation of the trace's own, the noise columns permutations of their own (slot i's included), arrival times
    stay sorted and the window ends at the same time; another key gives another future."""
    scn = load_preset("small_ramp")
    trace = _one_trace(scn)
    n, i, h = int(trace.num_valid), int(trace.num_valid) // 2, 40
    new = jax.tree.map(np.asarray, redraw_future(trace, jnp.int32(i), h, jax.random.key(5)))
    old = jax.tree.map(np.asarray, trace)
    end = i + h + 1
    for name in ("time_us", "source", "app", "rand", "jitter_pct", "service_pct", "valid", "net_pct", "slow_pct"):
        np.testing.assert_array_equal(getattr(new, name)[:i], getattr(old, name)[:i], err_msg=name)
        np.testing.assert_array_equal(getattr(new, name)[end:], getattr(old, name)[end:], err_msg=name)
    for name in ("valid", "net_pct", "slow_pct"):  # positional
        np.testing.assert_array_equal(getattr(new, name), getattr(old, name), err_msg=name)
    assert new.time_us[i] == old.time_us[i] and new.time_us[end - 1] == old.time_us[end - 1]
    assert np.all(np.diff(new.time_us[:n]) >= 0)

    def rows(t):
        gaps = np.diff(t.time_us[i:end])
        return sorted(zip(gaps.tolist(), t.source[i + 1:end].tolist(), t.app[i + 1:end].tolist(),
                          t.rand[i + 1:end].tolist(), strict=True))

    assert rows(new) == rows(old)
    for name in ("jitter_pct", "service_pct"):
        assert sorted(getattr(new, name)[i:end].tolist()) == sorted(getattr(old, name)[i:end].tolist())
    assert not np.array_equal(new.app[i + 1:end], old.app[i + 1:end])
    assert not np.array_equal(new.service_pct[i:end], old.service_pct[i:end])
    other = jax.tree.map(np.asarray, redraw_future(trace, jnp.int32(i), h, jax.random.key(6)))
    assert not np.array_equal(other.app, new.app)


@pytest.mark.parametrize("load", ["medium", 3.0])  # 3.0: a multiplier past small_ramp's "high" (overload)
def test_rollout_values_equal_the_reference_on_each_future(load):
    """Every row of ``branch_returns`` (rollout 0: the trace, rollout j: ``redraw_future(fold_in(key, j))``) equals
    the reference simulator's discounted successes on that future, for every rule; the discount matters and, at
    overload, the futures give different values (the re-draw is used)."""
    scn = load_preset("small_ramp")
    p = scn.params
    trace = _one_trace(scn, load)
    n = int(trace.num_valid)
    horizon, discount, rollouts, key = 24, 0.9, 3, jax.random.key(11)
    ref = ReferenceSimulator(p)

    @jax.jit
    def state_before(i):  # the base rule over slots < i (the same on every future: they differ from slot i on)
        head = trace.replace(valid=trace.valid & (jnp.arange(trace.valid.shape[0]) < i))
        return simulate(p, head, STATIC_POLICIES[BASE], ring=scn.ring)[0]

    returns = jax.jit(lambda sim, i: branch_returns(p, trace, sim, i, RULES, BASE, horizon, discount, rollouts, key))
    undiscounted = jax.jit(lambda sim, i: branch_returns(p, trace, sim, i, RULES, BASE, horizon, 1.0, rollouts, key))
    differs, discounted = False, False
    for i in (n // 3, (2 * n) // 3):
        sim = state_before(jnp.int32(i))
        got = np.asarray(returns(sim, jnp.int32(i)))
        assert got.shape == (rollouts, len(RULES))
        for j in range(rollouts):
            future = trace if j == 0 else redraw_future(trace, jnp.int32(i), horizon, jax.random.fold_in(key, j))
            for r, rule in enumerate(RULES):
                want = _reference_value(ref, future, i, rule, horizon, discount)
                assert got[j, r] == pytest.approx(want, abs=1e-4), (i, j, rule, got[j], want)
        differs |= not np.allclose(got[1:], got[0])
        discounted |= not np.allclose(np.asarray(undiscounted(sim, jnp.int32(i))), got)
    assert discounted
    assert differs or load == "medium"  # (at medium load every future may succeed alike)


def test_one_rollout_undiscounted_is_the_old_target():
    """``rollouts=1, discount=1``: the same numbers as the session-21 recipe's integer success counts."""
    scn = load_preset("small_ramp")
    p, trace = scn.params, _one_trace(scn)
    i = int(trace.num_valid) // 2
    head = trace.replace(valid=trace.valid & (jnp.arange(trace.valid.shape[0]) < i))
    sim = simulate(p, head, STATIC_POLICIES[BASE], ring=scn.ring)[0]
    got = np.asarray(branch_returns(p, trace, sim, jnp.int32(i), RULES, BASE, 24))
    ref = ReferenceSimulator(p)
    assert got.shape == (1, 4)
    assert got[0].tolist() == [_reference_value(ref, trace, i, r, 24, 1.0) for r in RULES]


def test_spread_head_config_and_decision():
    """New knobs: checked, left out of the config document at their defaults (older run folders resume); a spread
    weight needs the head; the decision compares gain - weight * max(spread, 0) with the margin."""
    assert not {"discount", "rollouts", "spread_head", "spread_weight"} & set(SwitchConfig().to_dict())
    assert SwitchConfig(rollouts=2).to_dict()["rollouts"] == 2
    for bad in (dict(discount=0.0), dict(discount=1.5), dict(rollouts=0), dict(spread_weight=1.0),
                dict(spread_head=True, spread_weight=-1.0)):
        with pytest.raises(ValueError, match="switch."):
            SwitchConfig(**bad)
    scn = load_preset("small_ramp")
    cfg = SwitchConfig(hidden=(8,), spread_head=True)
    model, _, _ = make_train(scn, cfg)
    graphdef, params = nnx.split(model)
    params = jax.tree.map(lambda x: x + 0.3, params)  # a non-zero network
    net = nnx.merge(graphdef, params)
    x = jax.random.normal(jax.random.key(0), (16, net.layers[0].in_features))
    adv, spread = net.heads(x)
    np.testing.assert_allclose(net.score(x, 2.0), adv - 2.0 * jnp.maximum(spread, 0.0), rtol=1e-6)
    assert float(jnp.max(jnp.abs(spread))) > 0 and float(jnp.max(jnp.abs(adv[:, 1]))) == 0.0  # base: 0
    plain, _, _ = make_train(scn, SwitchConfig(hidden=(8,)))
    with pytest.raises(ValueError, match="spread_head"):
        switch_policy(*nnx.split(plain), 0.5, spread_weight=1.0)


def test_training_with_rollouts_learns_the_spread_and_reloads(tmp_path):
    """A short run with 3 rollouts, discount and the spread head: finite losses, a spread head that moved off zero,
    the run folder reloads with the same settings, and a margin spec sets the spread weight."""
    scn = load_preset("small_ramp")
    cfg = SwitchConfig(hidden=(32, 32), num_envs=8, episode_steps=64, stride=16, horizon=32, episodes=4, batch_size=32,
                       loads=(1.5,), discount=0.98, rollouts=3, spread_head=True, seed=0)
    agent = train_switch(scn, cfg, tmp_path / "run", chunk=2)
    assert all(np.isfinite(h["loss"]) for h in agent.history[1:])
    loaded, _ = load_switch_agent(tmp_path / "run")
    assert loaded.config == cfg
    assert float(jnp.max(jnp.abs(loaded.params["spread_out"]["kernel"][...]))) > 0
    policy = agent_switch_policy(loaded, "0.5,spread=1.5,closest=0.2")
    assert float(policy.params["spread_weight"]) == 1.5
    np.testing.assert_allclose(np.asarray(policy.params["margin"]), [0.2, 0.5, 0.5, 0.5])
    assert float(agent_switch_policy(loaded, "0.5").params["spread_weight"]) == 0.0  # the agent's own (0 here)
