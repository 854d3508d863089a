"""ASET environment and workload generator: API contract, compile-once, random rollouts, arrival statistics."""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from respect_jax.edge_cluster.dqn import Layout
from respect_jax.edge_cluster.environment import EdgeEnv, episode_success
from respect_jax.edge_cluster.generator import generate_trace, make_traces
from respect_jax.edge_cluster.scenarios import load_preset
from respect_jax.edge_cluster.simulator import features, init_sim, num_features, replay
from respect_jax.edge_cluster.types import FIRST, INVALID, LAST, MID, SUCCESS, Trace


@functools.cache
def small(horizon: float = 0.3):
    return load_preset("small", horizon_s=horizon)


@pytest.mark.parametrize("pattern", ["mmpp", pytest.param("diurnal", marks=pytest.mark.slow)])
def test_trace_statistics(pattern):
    """Valid queries first and sorted; the mean number of arrivals matches the configured rate."""
    scn = load_preset("small", pattern=pattern, horizon_s=2.0, mmpp={"burst_factor": 4.0, "mean_burst_s": 0.2,
                                                                   "mean_calm_s": 0.6}, diurnal={"period_s": 1.0})
    rates = np.broadcast_to(scn.rate("medium"), (8, *scn.base_rate.shape))
    traces = jax.device_get(make_traces(jax.random.key(0), rates, scn.trace, scn.dynamics))
    expected = float(scn.rate("medium").sum()) * scn.trace.horizon_s
    counts = traces.valid.sum(axis=1)
    assert abs(counts.mean() - expected) < 0.1 * expected, (counts.mean(), expected)
    for b in range(4):
        n = counts[b]
        assert traces.valid[b, :n].all() and not traces.valid[b, n:].any()
        t = traces.time_us[b, :n]
        assert np.all(np.diff(t) >= 0) and t[0] >= 0 and t[-1] < scn.trace.horizon_s * 1e6
        assert np.all((traces.jitter_pct[b] >= 0) & (traces.jitter_pct[b] <= 1000))
        assert np.all((traces.service_pct[b] >= 10) & (traces.service_pct[b] <= 1000))
    share = np.bincount(traces.app[traces.valid], minlength=2) / traces.valid.sum()
    np.testing.assert_allclose(share, scn.base_rate.sum(0) / scn.base_rate.sum(), atol=0.03)
    # bursty and diurnal traces are over-dispersed (counts per 100 ms window)
    windows = np.stack([np.bincount(traces.time_us[b][traces.valid[b]] // 100_000, minlength=20) for b in range(8)])
    assert windows.var() > 1.5 * windows.mean()




def test_trace_covers_horizon_and_zero_rates():
    """Poisson arrivals: about rate x horizon queries (within 4 sigma), Q large enough; zero rates: no query."""
    scn = small(2.0)
    gen = jax.jit(lambda r: generate_trace(jax.random.key(1), r, scn.trace, scn.dynamics, return_covered=True))
    trace, covered = gen(jnp.asarray(scn.rate("overload")))
    expected = float(scn.rate("overload").sum()) * scn.trace.horizon_s
    assert bool(covered) and abs(int(trace.num_valid) - expected) < 4 * np.sqrt(expected)
    empty, _ = gen(jnp.zeros_like(scn.base_rate))
    assert int(empty.num_valid) == 0


def test_microsecond_arrival_times_keep_the_rate_of_a_fast_source():
    """Gaps rounded to whole microseconds keep the mean rate: at 200,000 queries/s (mean gap 5 us) flooring
    every gap made 11% more arrivals; rounding to the nearest us leaves 1/(2 sinh(rate/2e6)) us, -0.17%."""
    from respect_jax.edge_cluster.scenarios import TraceConfig

    horizon_s, rate = 0.05, 200_000.0
    expected = rate * horizon_s  # 10,000 arrivals per trace
    cfg = TraceConfig(horizon_s=horizon_s, max_queries=12_000)
    rates = np.full((16, 1, 1), rate, np.float32)
    from respect_jax.edge_cluster.scenarios import neutral_dynamics

    traces, covered = jax.device_get(make_traces(jax.random.key(5), rates, cfg, neutral_dynamics(1, 1),
                                                 return_covered=True))
    total = traces.valid.sum()
    assert covered.all()  # Q is 20 sigma above the expected count: every trace reached its horizon
    assert abs(total - 16 * expected) < 4 * np.sqrt(16 * expected), (total, 16 * expected)


def test_reset_step_compile_once_and_random_rollout_is_finite():
    scn = small()
    env = EdgeEnv(scn.trace, scn.ring)
    reset = jax.jit(chex.assert_max_traces(env.reset, n=1))
    step = jax.jit(chex.assert_max_traces(env.step, n=1))
    state, ts = reset(jax.random.key(0), scn.params, scn.rate("high"), scn.dynamics)
    assert int(ts.step_type) == FIRST and int(ts.extras["code"]) == INVALID
    n = int(state.trace.num_valid)
    assert ts.observation.features.shape == (num_features(scn.params),)
    rng = np.random.default_rng(0)
    rewards, actions = [], []
    for i in range(n + 2):
        mask = np.asarray(ts.observation.action_mask)
        assert np.all(np.isfinite(np.asarray(ts.observation.features)))
        if i < n:
            assert mask.any()
        else:
            assert not mask.any()
        a = int(rng.choice(np.flatnonzero(mask))) if mask.any() else 0
        actions.append(a)
        state, ts = step(state, jnp.int32(a))
        rewards.append(float(ts.reward))
        assert int(ts.step_type) == (MID if i < n - 1 else LAST)
        assert float(ts.discount) == (1.0 if i < n - 1 else 0.0)
    assert rewards[n:] == [0.0, 0.0], "steps after the end are no-ops"
    assert int(state.index) == n
    counts = np.asarray(ts.extras["counts"])
    assert counts.sum() == n and counts[:, SUCCESS].sum() == sum(rewards)
    assert float(episode_success(jnp.asarray(counts))) == pytest.approx(sum(rewards) / n)
    # the environment is the simulator: replaying the same actions gives the same outcomes
    _, out = replay(scn.params, state.trace, jnp.asarray(actions[: state.trace.valid.shape[0]]
                                                         + [0] * max(0, state.trace.valid.shape[0] - len(actions))))
    assert int(np.sum(np.asarray(out.code) == SUCCESS)) == sum(rewards)


@pytest.mark.slow  # batch_step is also exercised by every DQN training step (test_edge_dqn.py)
def test_batched_random_rollout_over_load_levels_is_bounded():
    """``batch_step`` over four load levels at once; observations stay finite and in range."""
    scn = small()
    env = EdgeEnv(scn.trace, scn.ring)
    keys = jax.random.split(jax.random.key(3), 4)
    params = jax.tree.map(lambda x: jnp.broadcast_to(x, (4, *x.shape)), scn.params)
    rates = jnp.stack([scn.rate(x) for x in ("low", "medium", "high", "overload")])

    def rollout(keys, params, rates, key):
        dyn = jax.tree.map(lambda x: jnp.broadcast_to(x, (4, *x.shape)), scn.dynamics)
        state, ts = env.batch_reset(keys, params, rates, dyn)

        def body(carry, k):
            state, ts = carry
            mask = ts.observation.action_mask
            action = jnp.where(jnp.any(mask, -1), jax.random.categorical(k, jnp.where(mask, 0.0, -1e9)), 0)
            state, ts = env.batch_step(state, action)
            return (state, ts), (ts.observation.features, ts.reward, ts.extras["code"])

        return jax.lax.scan(body, (state, ts), jax.random.split(key, 48))

    (state, ts), (feats, rewards, codes) = jax.jit(rollout)(keys, params, rates, jax.random.key(4))
    feats = np.asarray(feats)
    assert np.all(np.isfinite(feats)) and feats.min() >= -2.0 and feats.max() <= 8.0
    np.testing.assert_array_equal(np.asarray(rewards) == 1.0, np.asarray(codes) == SUCCESS)
    np.testing.assert_array_equal(np.asarray(ts.extras["counts"]).sum(axis=(1, 2)), np.asarray(state.index))


def test_features_are_causal():
    """Outcomes not yet known at t (resolve > t) do not move the success-rate features."""
    scn = small()
    s = scn.params.num_sites
    q0 = Trace(*(jnp.int32(v) for v in (1000, 0, 0, 100, 100, 7)), valid=jnp.bool_(True),
               net_pct=jnp.full((s,), 100, jnp.int32), slow_pct=jnp.full((s,), 100, jnp.int32))
    sim = init_sim(scn.params, scn.ring)
    feat = jax.jit(features)
    f_empty = feat(scn.params, sim, q0)
    late = sim.replace(app_resolve_us=sim.app_resolve_us.at[:, 0].set(q0.time_us + 1),
                       app_ok=sim.app_ok.at[:, 0].set(False))
    split = Layout.of(scn.params).split
    np.testing.assert_array_equal(np.asarray(feat(scn.params, late, q0)), np.asarray(f_empty))
    known = late.replace(app_resolve_us=late.app_resolve_us.at[:, 0].set(q0.time_us))
    assert np.all(np.asarray(split(feat(scn.params, known, q0))["success"]) == 0.0)
    # measured site features: a slow answer still in flight at t changes nothing; once back it shows
    slow = sim.replace(ring_resolve_us=sim.ring_resolve_us.at[0, 0].set(q0.time_us + 1),
                       ring_queue_us=sim.ring_queue_us.at[0, 0].set(30_000),
                       ring_net_pct=sim.ring_net_pct.at[0, 0].set(400),
                       ring_proc_pct=sim.ring_proc_pct.at[0, 0].set(300))
    np.testing.assert_array_equal(np.asarray(feat(scn.params, slow, q0)), np.asarray(f_empty))
    back = split(feat(scn.params, slow.replace(ring_resolve_us=slow.ring_resolve_us.at[0, 0].set(900)), q0))
    empty = split(f_empty)
    d = int(scn.params.deadline_us[0])
    assert float(back["m_queue"][0]) == pytest.approx(30_000 / d) and float(empty["m_queue"][0]) == 0.0
    assert float(back["m_net"][0]) == pytest.approx(2.0) and float(empty["m_net"][0]) == pytest.approx(0.5)
    assert float(back["m_proc"][0]) == pytest.approx(1.5) and float(back["m_age"][0]) == pytest.approx(100 / d)
    assert np.all(np.asarray(back["m_slack"]).reshape(2, -1)[0] < np.asarray(empty["m_slack"]).reshape(2, -1)[0])
    np.testing.assert_array_equal(np.asarray(back["m_queue"])[1:], np.asarray(empty["m_queue"])[1:])


def test_rules_only_mask_is_the_union_of_the_static_rules_choices():
    """``Layout.rule_mask``: exactly the actions the deterministic static rules would take for the query (after a
    run of dispatches to the edge, so the load-aware rules disagree with ``closest``)."""
    from respect_jax.edge_cluster.policies import STATIC_POLICIES
    from respect_jax.edge_cluster.simulator import HINT_POLICIES, dispatch

    scn = small()
    tr = jax.tree.map(lambda x: x[0], make_traces(jax.random.key(2), scn.rate("high")[None], scn.trace, scn.dynamics))
    step = jax.jit(lambda s, q: dispatch(scn.params, s, q, jnp.int32(0))[0])
    sim, layout, sizes = init_sim(scn.params, scn.ring), Layout.of(scn.params), set()
    for i in range(40):
        sim = step(sim, jax.tree.map(lambda x, i=i: x[i], tr))
        nxt = jax.tree.map(lambda x, i=i: x[i + 1], tr)
        mask = np.asarray(layout.rule_mask(features(scn.params, sim, nxt)))
        want = np.zeros(scn.params.num_actions, bool)
        for h in HINT_POLICIES:
            want[int(STATIC_POLICIES[h](scn.params, sim, nxt))] = True
        np.testing.assert_array_equal(mask, want)
        sizes.add(int(mask.sum()))
    assert max(sizes) >= 2, "the rules disagreed at least once"
    assert not layout.rules_only


def test_env_interface_reset_draws_a_trace_with_the_environment_defaults():
    """reset(key, params) draws its trace at the environment's default rates and conditions, the same episode as
    reset(key, params, rate, dyn); observations and actions have the shapes of the specs."""
    from env_interface import check_interface

    scn = small()
    rate = jnp.asarray(scn.rate("high"))
    env = EdgeEnv(scn.trace, scn.ring, rate=rate, dyn=scn.dynamics)
    key = jax.random.key(2)
    check_interface(env, scn.params, key)
    assert env.action_spec(scn.params).num_values == scn.params.num_actions
    chex.assert_trees_all_equal(env.reset(key, scn.params), EdgeEnv(scn.trace, scn.ring).reset(key, scn.params, rate,
                                                                                              scn.dynamics))
    with pytest.raises(ValueError, match="arrival rates and dynamics"):
        EdgeEnv(scn.trace, scn.ring).reset(key, scn.params)
