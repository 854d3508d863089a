"""The JAX environment on hand-made scenarios with hand-computed schedules, and its API contract."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from respect_jax.realtime import baselines
from respect_jax.realtime.environment import RTEnv, episode_metrics
from respect_jax.realtime.platform import platform_from_dict
from respect_jax.realtime.reference import (
    PY_POLICIES,
    PyScenario,
    PySim,
    py_certify,
    py_reference_schedule,
    validate_schedule,
)
from respect_jax.realtime.safety import certify_all, reference_schedule
from respect_jax.realtime.tasks import HRTTask, Job, JobTemplate, Scenario, Sizes, SRTClient, pack, stack
from respect_jax.realtime.types import INF, LAST

PLATFORM = platform_from_dict(
    {
        "accelerators": [
            {"name": "a", "dataflow": "ws", "peak_tmacs": 1.0, "mem_gbs": 10, "overhead_us": 0},
            {"name": "b", "dataflow": "os", "peak_tmacs": 1.0, "mem_gbs": 10, "overhead_us": 0},
        ]
    }
)
SIZES = Sizes(hrt_jobs=2, srt_jobs=2, groups=4, machines=2, clients=1)


def _tpl(name, exec_us, preds, xfer):
    g = len(preds)
    return JobTemplate(
        name, np.array(exec_us), tuple(preds), np.array(xfer).reshape(g, g), tuple(np.arange(1) for _ in preds)
    )


CHAIN = _tpl("chain", [[10, 20], [10, 20]], [(), (0,)], [[0, 5], [0, 0]])
SINGLE = _tpl("single", [[15, 15]], [()], [[0]])
DIAMOND = _tpl(
    "diamond",
    [[4, 6], [8, 5], [7, 9], [3, 3]],
    [(), (0,), (0,), (1, 2)],
    [[0, 2, 3, 0], [0, 0, 0, 4], [0, 0, 0, 1], [0, 0, 0, 0]],
)


def _scenario(templates, jobs, groups=4):
    return Scenario(
        platform=PLATFORM,
        groups=groups,
        templates=tuple(templates),
        hrt_tasks=(HRTTask("chain", 100, 30),),
        clients=(SRTClient("single", 50.0, 10, 15),),
        jobs=tuple(jobs),
        horizon_us=100,
        hrt_template=(0,),
        client_template=(1,),
    )


TOY = _scenario([CHAIN, SINGLE], [Job(0, 0, 30, True, 0), Job(1, 0, 15, False, 0)])
DAG = _scenario(
    [DIAMOND, SINGLE],
    [Job(0, 0, 40, True, 0), Job(0, 5, 45, True, 0), Job(1, 0, 12, False, 0), Job(1, 2, 30, False, 0)],
)


BATCH = stack([pack(TOY, SIZES), pack(DAG, SIZES)])  # every test runs this batch: one compile per env
TRACES = {True: 0, False: 0}


class _Jitted:
    """Jitted batch reset/step of one env; counts how often step is traced."""

    def __init__(self, safety: bool):
        self.env = RTEnv(safety=safety)

        def counted(state, action):
            TRACES[safety] += 1
            return self.env.batch_step(state, action)

        self.reset = jax.jit(self.env.batch_reset)
        self.step = jax.jit(counted)


@pytest.fixture(scope="module")
def envs():
    return {True: _Jitted(True), False: _Jitted(False)}


def _run(env: _Jitted, policy, max_steps=50):
    """Drive BATCH with the jitted reset/step from Python; returns the final state and timesteps."""
    state, ts = env.reset(jax.tree.map(jnp.asarray, BATCH))
    steps = [ts]
    for _ in range(max_steps):
        if bool(jnp.all(state.done)):
            break
        obs = ts.observation
        action = jax.vmap(policy)(obs, state, jax.random.split(jax.random.key(len(steps)), obs.time.shape[0]))
        state, ts = env.step(state, action)
        steps.append(ts)
    return state, steps


def test_hand_computed_edf_without_safety_misses(envs):
    """EDF runs the tight SRT job first on a, the HRT chain lands on slow b: finishes at 40 > 30."""
    state, steps = _run(envs[False], baselines.edf)
    assert np.asarray(state.start[0, [0, 1, 8]]).tolist() == [0, 20, 0]
    assert np.asarray(state.machine[0, [0, 1, 8]]).tolist() == [1, 1, 0]
    ended = [ts for ts in steps[1:] if int(ts.step_type[0]) == LAST and int(ts.extras["decisions"][0]) > 0]
    assert len(ended) == 1  # metrics are reported once, on the step that ends the episode
    assert int(ended[0].extras["hrt_missed"][0]) == 1 and int(ended[0].extras["srt_met"][0]) == 1
    assert jax.vmap(episode_metrics)(state)["hrt_missed"].tolist() == [1, 0]


def test_hand_computed_edf_with_safety_layer(envs):
    """The proposal (SRT on a) would delay the reference's HRT start on a: rejected, the reference
    prefix (HRT sub-job 0 on a) runs; SRT then goes to b; everything meets its deadline."""
    state, steps = _run(envs[True], baselines.edf)
    assert np.asarray(state.start[0, [0, 1, 8]]).tolist() == [0, 10, 0]
    assert np.asarray(state.machine[0, [0, 1, 8]]).tolist() == [0, 0, 1]
    first = steps[1]
    assert np.asarray(first.extras["proposed"][0]).tolist() == [8, 0]
    assert np.asarray(first.extras["dispatched"][0]).tolist() == [0, 0]
    assert bool(first.extras["override"][0]) and not bool(first.extras["accepted"][0])
    last = jax.vmap(episode_metrics)(state)
    assert int(last["hrt_missed"][0]) == 0 and int(last["srt_met"][0]) == 1
    assert int(last["overrides"][0]) == 1 and int(last["fallbacks"][0]) == 1 and int(last["decisions"][0]) == 3


@pytest.mark.parametrize("safety", [True, False])
def test_dag_jobs_match_python_and_are_valid(envs, safety):
    p = pack(DAG, SIZES)
    for name in ("edf", "heft", "adversarial"):
        state, _ = _run(envs[safety], getattr(baselines, name))
        sim = PySim(p, safety=safety)
        sim.run(PY_POLICIES[name])
        assert sim.start == [int(v) for v in np.asarray(state.start[1])], name
        assert sim.machine == [int(v) for v in np.asarray(state.machine[1])], name
        assert validate_schedule(p, state.start[1], state.finish[1], state.machine[1]) == []
        # the join waits for both branches and their transfers
        s3, m3 = int(state.start[1, 3]), int(state.machine[1, 3])
        for q, d in ((1, 4), (2, 1)):
            assert s3 >= int(state.finish[1, q]) + (d if int(state.machine[1, q]) != m3 else 0)


def test_step_compiles_once_and_random_rollout_is_finite(envs):
    env = envs[True]
    state, ts = env.reset(jax.tree.map(jnp.asarray, BATCH))
    assert int(ts.step_type[0]) == 0
    total = jnp.zeros(2)
    for k in range(30):
        action = jax.vmap(baselines.random_policy)(ts.observation, state, jax.random.split(jax.random.key(k), 2))
        state, ts = env.step(state, action)
        total = total + ts.reward
        for leaf in jax.tree.leaves(ts):
            if jnp.issubdtype(leaf.dtype, jnp.floating):
                assert bool(jnp.all(jnp.isfinite(leaf)))
    assert TRACES[True] == 1
    assert bool(jnp.all(state.done)) and not bool(jnp.any(state.violation))
    assert bool(jnp.all(ts.reward == 0)) and bool(jnp.all(ts.discount == 0))  # no-op after the end
    assert bool(jnp.all((total >= -4.0) & (total <= 1.0)))


def test_certify_cases_match_python():
    """(C1) an SRT sub-job on the accelerator the reference needs now is rejected, elsewhere it
    passes; (C2) moving the HRT head to the slow accelerator delays its successor's data: rejected."""
    p = pack(TOY, SIZES)
    pj = jax.tree.map(jnp.asarray, p)
    s_n, m_n = p.exec_us.shape
    r_start, r_mach, ok = reference_schedule(
        pj, jnp.int32(0), jnp.zeros(m_n, jnp.int32), jnp.full(s_n, INF, jnp.int32), jnp.full(s_n, -1, jnp.int32)
    )
    assert bool(ok)
    assert [int(r_start[0]), int(r_start[1])] == [0, 10] and [int(r_mach[0]), int(r_mach[1])] == [0, 0]
    table = np.asarray(certify_all(pj, jnp.int32(0), r_start, r_mach))
    assert not table[8, 0] and table[8, 1]  # C1
    assert table[0, 0] and not table[0, 1]  # C2: 20 + transfer 5 > reference start 10
    sc = PyScenario(p)
    plan = {s: (int(r_start[s]), int(r_mach[s])) for s in range(s_n) if int(r_mach[s]) >= 0}
    assert plan == py_reference_schedule(sc, 0, [0] * m_n, [INF] * s_n, [-1] * s_n)[0]
    for x in range(s_n):
        if p.valid[x]:
            for m in range(m_n):
                assert bool(table[x, m]) == py_certify(sc, 0, plan, x, m), (x, m)


def test_env_interface_reset_takes_the_packed_scenario():
    """reset(key, params) starts the episode of reset_scenario(params) (nothing is drawn); observations and
    actions have the shapes of the specs."""
    import chex
    from env_interface import check_interface

    env = RTEnv(safety=True)
    params = jax.tree.map(jnp.asarray, pack(TOY, SIZES))
    check_interface(env, params, jax.random.key(0))
    spec = env.action_spec(params)
    assert spec.priority.shape == (SIZES.subjobs,) and spec.machine_pref.shape == (SIZES.subjobs, SIZES.machines)
    chex.assert_trees_all_equal(env.reset(jax.random.key(1), params), env.reset_scenario(params))
    with pytest.raises(ValueError, match="packed scenario"):
        env.reset(jax.random.key(0))
