"""The policy-switching ASET agent (issue 30): rollout values, the untrained agent is the base rule, learning test.

Learning test on ``small_ramp``: within one trace the load ramps up while the cloud's paths recover, so ``closest``
is best in the first half and ``fastest_expected`` in the second; the agent, switching between the static rules per
query, must beat both over the trace (seeded, deterministic; slow: most of its time is compilation).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_beats_small_ramp_phase_winners
from flax import nnx

from respect_jax.edge_cluster.dqn import draw_mixture, fresh_environments, training_trace_config
from respect_jax.edge_cluster.environment import EdgeEnv
from respect_jax.edge_cluster.generator import make_traces
from respect_jax.edge_cluster.policies import STATIC_POLICIES
from respect_jax.edge_cluster.scenarios import load_preset
from respect_jax.edge_cluster.simulator import num_features, simulate
from respect_jax.edge_cluster.switching import (
    SwitchConfig,
    branch_values,
    greedy_rule,
    learning_rate,
    load_edge_agent,
    make_train,
    switch_policy,
    train_switch,
)
from respect_jax.edge_cluster.types import SUCCESS

FAST = dict(hidden=(32, 32), num_envs=8, episode_steps=64, stride=4, horizon=32, episodes=10, batch_size=64,
            loads=(1.0,), seed=0)


def _one_trace(scn, load="medium", seed=3):
    rates = np.broadcast_to(scn.rate(load), (1, *scn.base_rate.shape))
    batch = make_traces(jax.random.key(seed), rates, scn.trace, scn.dynamics)
    return jax.tree.map(lambda x: x[0], batch)


def test_branch_values_equal_a_full_simulation_that_switches_once():
    """A branch's value = the successes, in slots i..i+H, of the whole trace simulated from the start with the base
    rule everywhere except slot i (taken by the branch's rule); the branch starts from the state after slot i - 1
    and runs without the history ring."""
    scn = load_preset("small_ramp")
    p = scn.params
    trace = _one_trace(scn)
    n = int(trace.num_valid)
    times = np.asarray(trace.time_us)
    rules, base, horizon = ("closest", "fastest_expected", "most_accurate", "least_loaded"), "fastest_expected", 24
    fe = STATIC_POLICIES[base]
    branches = [STATIC_POLICIES[r] for r in rules]

    @jax.jit
    def state_before(i):  # the base rule over slots < i (later slots are padding: they change nothing)
        head = trace.replace(valid=trace.valid & (jnp.arange(trace.valid.shape[0]) < i))
        return simulate(p, head, fe, ring=scn.ring)[0]

    @jax.jit
    def switched_codes(r, t_i):  # the whole trace, the base rule everywhere but rule r at the query dispatched at t_i
        def policy(params, sim, query):
            return jnp.where(query.time_us == t_i, jax.lax.switch(r, branches, params, sim, query),
                             fe(params, sim, query))

        return simulate(p, trace, policy, ring=0)[1].code

    values = jax.jit(lambda sim, i: branch_values(p, trace, sim, i, rules, base, horizon))
    checked, distinct = 0, set()
    for i in (n // 3, n // 2, (2 * n) // 3):
        if np.sum(times == times[i]) != 1:
            continue
        got = np.asarray(values(state_before(jnp.int32(i)), jnp.int32(i)))
        for r, name in enumerate(rules):
            codes = np.asarray(switched_codes(jnp.int32(r), jnp.int32(times[i])))
            want = int(np.sum(codes[i:i + horizon + 1] == SUCCESS))
            assert got[r] == want, (i, name, got, want)
        checked += 1
        distinct |= {tuple(got.tolist())}
    assert checked >= 2 and len(distinct) >= 2, distinct


def test_untrained_agent_is_the_base_rule():
    """The output layer starts at zero: the agent dispatches every query exactly like ``fastest_expected``."""
    scn = load_preset("small_ramp")
    model, _, _ = make_train(scn, SwitchConfig(**FAST))
    graphdef, params = nnx.split(model)
    trace = _one_trace(scn, "high")
    _, a = simulate(scn.params, trace, switch_policy(graphdef, params), ring=scn.ring)
    _, b = simulate(scn.params, trace, STATIC_POLICIES["fastest_expected"], ring=0)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_config_errors_are_one_line():
    with pytest.raises(ValueError, match="switch.base"):
        SwitchConfig(rules=("closest", "least_loaded"), base="fastest_expected")
    with pytest.raises(ValueError, match="switch.episode_steps"):
        SwitchConfig(episode_steps=10, stride=4)


def test_greedy_rule_with_per_rule_margins():
    """One margin for every rule is the old rule (the best predicted advantage if above the margin, else the base);
    per-rule margins take the rule furthest above its own margin; the config's ``rule_margins`` are checked and give
    the margins in the order of the rules."""
    adv = jnp.asarray([[0.3, 0.0, 0.6, 0.2], [0.05, 0.0, -1.0, 0.04], [-0.2, 0.0, -0.1, -0.3]])
    assert np.asarray(greedy_rule(adv, 1, 0.5)).tolist() == [2, 1, 1]
    assert np.asarray(greedy_rule(adv, 1, jnp.asarray([0.1, 0.0, 0.5, 0.5]))).tolist() == [0, 1, 1]
    assert np.asarray(greedy_rule(adv, 1, jnp.asarray([0.01, 0.0, 0.5, 0.5]))).tolist() == [0, 0, 1]
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(500, 4)), jnp.float32).at[:, 1].set(0.0)
    for m in (0.0, 0.25, 1.0):  # the old single-margin rule
        old = jnp.where(jnp.max(x, -1) > m, jnp.argmax(x, -1), 1)
        np.testing.assert_array_equal(np.asarray(greedy_rule(x, 1, m)), np.asarray(old))
        np.testing.assert_array_equal(np.asarray(greedy_rule(x, 1, jnp.full((4,), m))), np.asarray(old))
    cfg = SwitchConfig(margin=0.5, rule_margins={"closest": 0.1})
    assert cfg.margins() == (0.1, 0.5, 0.5, 0.5)
    assert SwitchConfig.from_dict(cfg.to_dict()) == cfg
    assert "rule_margins" not in SwitchConfig().to_dict()  # run folders written before the knob still resume
    none = {"closest": None, "most_accurate": None, "least_loaded": None}  # conf/edge.yaml's default
    assert SwitchConfig(rule_margins=none) == SwitchConfig() and SwitchConfig(rule_margins=none).margins() == (0.0,) * 4
    for bad in ({"fastest_expected": 0.1}, {"random": 0.1}, {"closest": -0.1}):
        with pytest.raises(ValueError, match="switch.rule_margins"):
            SwitchConfig(rule_margins=bad)


def test_learning_rate_decays_to_its_final_fraction_and_defaults_stay_constant():
    """``lr_final`` < 1: a cosine from ``lr`` at the first update to ``lr * lr_final`` at the last of the
    ``episodes * episode_steps / stride * updates_per_sample`` updates; 1 (the default): the constant ``lr``, and the
    config document is the one written before the knob (old run folders resume)."""
    assert learning_rate(SwitchConfig(lr=0.002)) == 0.002
    assert "lr_final" not in SwitchConfig().to_dict() and "mixture_weights" not in SwitchConfig().to_dict()
    cfg = SwitchConfig(lr=0.002, lr_final=0.1, episodes=3, episode_steps=64, stride=8, updates_per_sample=2)
    sched = learning_rate(cfg)
    updates = 3 * 8 * 2
    assert float(sched(0)) == pytest.approx(0.002)
    assert float(sched(updates // 2)) == pytest.approx(0.002 * (0.1 + 0.9 * 0.5), rel=1e-5)  # cosine midpoint
    assert float(sched(updates)) == pytest.approx(0.0002, rel=1e-5)
    assert SwitchConfig.from_dict(cfg.to_dict()) == cfg
    for bad in (dict(lr_final=1.5), dict(lr_final=-0.1)):
        with pytest.raises(ValueError, match="switch.lr_final"):
            SwitchConfig(**bad)


def test_mixture_draw_follows_its_weights():
    """Empty weights: exactly the uniform draw of earlier recipes; weights: frequencies in proportion to them (a
    zero weight never drawn)."""
    key = jax.random.key(11)
    np.testing.assert_array_equal(np.asarray(draw_mixture(key, 64, 4)),
                                  np.asarray(jax.random.randint(key, (64,), 0, 4)))
    which = np.asarray(draw_mixture(key, 20000, 4, (1.0, 2.0, 0.0, 1.0)))
    np.testing.assert_allclose(np.bincount(which, minlength=4) / which.size, [0.25, 0.5, 0.0, 0.25], atol=0.015)
    with pytest.raises(ValueError, match="mixture_weights"):
        draw_mixture(key, 8, 4, (1.0, 1.0))


@pytest.mark.slow  # ~15 s alone, ~50 s under load (isp trace generation)
def test_mixture_weights_draw_the_presets_they_weight():
    """Weight only on a mixture preset: every environment gets exactly the trace that preset alone would give
    (same keys); empty weights keep the uniform draw; bad weights are refused in one line."""
    main, other = load_preset("isp_diurnal"), load_preset("isp_failure")
    cfg = SwitchConfig(num_envs=8, episode_steps=64, stride=8, loads=(1.0,), mixture=("isp_failure",),
                       mixture_weights=(0.0, 1.0), trace_horizon_s=0.2)
    env = EdgeEnv(training_trace_config(main, cfg), main.ring)
    key = jax.random.key(5)
    state, _, _ = fresh_environments(env, main, cfg)(key)
    alone, _, _ = fresh_environments(env, other, replace(cfg, mixture=(), mixture_weights=()))(key)
    for x, y in zip(jax.tree.leaves(state.trace), jax.tree.leaves(alone.trace), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    uniform, _, _ = fresh_environments(env, main, replace(cfg, mixture_weights=()))(key)
    assert not all(np.array_equal(np.asarray(x), np.asarray(y))
                   for x, y in zip(jax.tree.leaves(uniform.trace), jax.tree.leaves(alone.trace), strict=True))
    for bad in (dict(mixture_weights=(1.0,)), dict(mixture_weights=(0.0, 0.0)), dict(mixture_weights=(1.0, -1.0))):
        with pytest.raises(ValueError, match="switch.mixture_weights"):
            replace(cfg, **bad)


@pytest.mark.slow  # ~140 s on the shared CPU at load 10 (compilation of training and of the evaluation)
def test_switching_agent_beats_both_phase_winners_within_one_episode(tmp_path):
    """Short deterministic learning test on ``small_ramp``: ``closest`` is best in the first half of every trace and
    ``fastest_expected`` in the second; the greedy switching agent, on fresh traces, is at least about as good as the
    best rule of each half and beats both over the trace (paired 95 % interval above 0). The run folder
    round-trips."""
    scn = load_preset("small_ramp")
    agent = train_switch(scn, SwitchConfig(**FAST), tmp_path / "agent", chunk=FAST["episodes"])
    assert_beats_small_ramp_phase_winners(scn, agent.policy)
    loaded, _ = load_edge_agent(tmp_path / "agent")
    x = jnp.asarray(np.random.default_rng(0).random((3, num_features(scn.params))), jnp.float32)
    np.testing.assert_allclose(np.asarray(nnx.merge(loaded.graphdef, loaded.params)(x)),
                               np.asarray(nnx.merge(agent.graphdef, agent.params)(x)), rtol=1e-6)


@pytest.mark.slow
def test_cli_trains_and_evaluates_the_switching_agent(tmp_path):
    """``respect-edge train agent=switch`` (the default agent) then ``respect-edge eval`` through the console script."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    common = ["edge_scenario.horizon_s=1.0", f"run_dir={tmp_path / 'agent'}", f"out_dir={tmp_path / 'out'}"]
    small = ["switch.hidden=[16]", "switch.num_envs=4", "switch.episode_steps=16", "switch.stride=4",
             "switch.horizon=8", "switch.episodes=2", "switch.batch_size=16", "chunk=1"]
    for args in (["train", *common, *small], ["eval", *common, "eval.traces=2", "eval.loads=[low]"]):
        proc = subprocess.run([str(Path(sys.executable).parent / "respect-edge"), *args], cwd=tmp_path,
                              capture_output=True, text=True, env=env, timeout=900)
        assert proc.returncode == 0, proc.stderr
    network = json.loads((tmp_path / "agent" / "network.json").read_text())
    assert network["format"] == "respect-jax-edge-switch/1" and network["switch"]["episodes"] == 2
    doc = json.loads((tmp_path / "out" / "success_small.json").read_text())
    assert doc["policies"][-1] == "aset" and set(doc["success"]["aset"]) == {"low"}


def test_eval_margin_overrides_the_shipped_agents_own(tmp_path):
    """``respect-edge eval eval.margin=M`` (policies_to_compare's ``margin``): the shipped agents were trained at margin
    0 and reported at 0.5; None keeps the agent's own; an unreachable margin makes the agent ``fastest_expected``
    exactly; a negative one is a one-line error."""
    from respect_jax.edge_cluster.evaluation import policies_to_compare
    from respect_jax.edge_cluster.switching import load_edge_agent

    ckpt = Path(__file__).resolve().parents[1] / "experiments/results/edge/agents/switch/s0"
    agent, scn = load_edge_agent(ckpt)
    assert agent.config.margin == 0.0
    _, header, _ = policies_to_compare(scn, ["aset"], ckpt, tmp_path)
    assert header[-1] == "Decision margin: 0"
    policies, header, _ = policies_to_compare(scn, ["aset"], ckpt, tmp_path, margin=1e9)
    assert header[-1] == "Decision margin: 1e+09"
    trace = _one_trace(scn, "high")
    _, a = simulate(scn.params, trace, policies["aset"], ring=scn.ring)
    _, b = simulate(scn.params, trace, STATIC_POLICIES["fastest_expected"], ring=0)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    _, c = simulate(scn.params, trace, policies_to_compare(scn, ["aset"], ckpt, tmp_path)[0]["aset"], ring=scn.ring)
    pairs = zip(jax.tree.leaves(c), jax.tree.leaves(b), strict=True)
    assert not all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in pairs)  # at margin 0 it switches
    with pytest.raises(ValueError, match="eval.margin must be >= 0"):
        policies_to_compare(scn, ["aset"], ckpt, tmp_path, margin=-1.0)
    _, header, _ = policies_to_compare(scn, ["aset"], ckpt, tmp_path, margin="0.5,closest=0.1")
    assert header[-1] == "Decision margin: 0.5, closest 0.1"
    with pytest.raises(ValueError, match="expected a number M or M,rule=m"):
        policies_to_compare(scn, ["aset"], ckpt, tmp_path, margin="0.5,closest")
    with pytest.raises(ValueError, match="not among the agent's rules"):
        policies_to_compare(scn, ["aset"], ckpt, tmp_path, margin="0.5,random=0.1")
