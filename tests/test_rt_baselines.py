"""The stronger baselines (critical-path slack list scheduling, EDF with accelerator affinity) on hand-worked
cases, their plain-Python twins, and the safety layer's guarantee for both."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import RT_TEST_PLATFORM

from respect_jax.realtime import baselines
from respect_jax.realtime.environment import RTEnv, episode_metrics
from respect_jax.realtime.generator import ScenarioConfig, generate
from respect_jax.realtime.platform import platform_from_dict
from respect_jax.realtime.reference import PY_POLICIES, PySim, validate_schedule
from respect_jax.realtime.tasks import (
    HRTTask,
    Job,
    JobTemplate,
    Scenario,
    Sizes,
    SRTClient,
    critical_path_after,
    pack,
    stack,
)

TWO = platform_from_dict(
    {
        "accelerators": [
            {"name": "a", "dataflow": "ws", "peak_tmacs": 1.0, "mem_gbs": 10, "overhead_us": 0},
            {"name": "b", "dataflow": "os", "peak_tmacs": 1.0, "mem_gbs": 10, "overhead_us": 0},
        ]
    }
)
SIZES = Sizes(hrt_jobs=2, srt_jobs=4, groups=2, machines=2, clients=1)


def _tpl(name, exec_us, preds, xfer):
    g = len(preds)
    return JobTemplate(
        name, np.array(exec_us), tuple(preds), np.array(xfer).reshape(g, g), tuple(np.arange(1) for _ in preds)
    )


LONG = _tpl("long", [[10, 10], [30, 30]], [(), (0,)], [[0, 5], [0, 0]])  # chain, 5 us transfer
SHORT = _tpl("short", [[20, 20]], [()], [[0]])
P_AFF = _tpl("p", [[10, 40]], [()], [[0]])  # affine to a only
Q_AFF = _tpl("q", [[30, 32]], [()], [[0]])  # affine to both
R_ANY = _tpl("r", [[10, 10]], [()], [[0]])
DIAMOND = _tpl("diamond", [[4, 6], [8, 5], [7, 9], [3, 3]], [(), (0,), (0,), (1, 2)], [[0] * 16])


def _srt(templates, jobs, groups=2) -> Scenario:
    """Only SRT jobs ``(template, release, deadline)`` from client 0."""
    return Scenario(
        platform=TWO,
        groups=groups,
        templates=tuple(templates),
        hrt_tasks=(HRTTask(templates[0].model, 1000, 1000),),
        clients=(SRTClient(templates[0].model, 50.0, 10, 15),),
        jobs=tuple(Job(t, r, d, False, 0) for t, r, d in jobs),
        horizon_us=100,
        hrt_template=(0,),
        client_template=(0,),
    )


# X = long chain (deadline 55), Y, W short (30, 40), H short and hopeless from the start (deadline 10)
SLACK_CASE = _srt([LONG, SHORT], [(0, 0, 55), (1, 0, 30), (1, 0, 40), (1, 0, 10)])
# A needs a (deadline 20), B suits both (50), C suits both (15)
AFF_CASE = _srt([P_AFF, Q_AFF, R_ANY], [(0, 0, 20), (1, 0, 50), (2, 0, 15)])
BATCH = stack([pack(SLACK_CASE, SIZES, certified=True), pack(AFF_CASE, SIZES, certified=True)])


_JIT: dict[bool, tuple] = {}


def _rollout(policy, safety=False, params=BATCH, steps=40):
    if safety not in _JIT:  # one compilation per safety setting and batch shape
        env = RTEnv(safety=safety)
        _JIT[safety] = (jax.jit(env.batch_reset), jax.jit(env.batch_step))
    reset, step = _JIT[safety]
    state, ts = reset(jax.tree.map(jnp.asarray, params))
    b = params.valid.shape[0]
    act = jax.jit(jax.vmap(policy))
    for k in range(steps):
        if bool(jnp.all(state.done)):
            break
        action = act(ts.observation, state, jax.random.split(jax.random.key(k), b))
        state, ts = step(state, action)
    return state


def _schedule(state, i, subjobs):
    return [(int(state.start[i, s]), int(state.machine[i, s])) for s in subjobs]


# sub-job slots: job k group g -> (2 HRT slots + k) * 2 + g
X0, X1, Y, W, H = 4, 5, 6, 8, 10
A, B, C = 4, 6, 8


def test_critical_path_after_is_the_longest_fastest_tail():
    assert critical_path_after(LONG).tolist() == [30, 0]
    # diamond 0 -> {1, 2} -> 3 at fastest times 4, 5, 7, 3: after 0 the longer branch 7 + 3
    assert critical_path_after(DIAMOND).tolist() == [10, 3, 3, 0]
    assert pack(SLACK_CASE, SIZES, certified=True).cp_after[[X0, X1, Y]].tolist() == [30, 0, 0]


def test_edf_on_the_slack_case_lets_the_long_job_miss():
    """EDF: H and Y at 0, W and X0 at 20, X1 on b at 30 -> X ends 60 > 55; H misses too: 2 of 4 met."""
    state = _rollout(baselines.edf)
    assert _schedule(state, 0, [H, Y, W, X0, X1]) == [(0, 0), (0, 1), (20, 0), (20, 1), (30, 1)]
    assert int(jax.vmap(episode_metrics)(state)["srt_met"][0]) == 2


def test_cpls_runs_least_critical_path_slack_first_and_demotes_hopeless_srt():
    """Slack at 0: Y 30-20=10, X0 55-10-30=15, W 20, H hopeless. Y on a, X0 on b at 0; at 10 on b W (slack 10)
    beats X1 (15); at 20 X1 on a (data moved by 20) ends 50 <= 55; H last at 30: 3 of 4 met."""
    state = _rollout(baselines.cpls)
    assert _schedule(state, 0, [Y, X0, W, X1, H]) == [(0, 0), (0, 1), (10, 1), (20, 0), (30, 1)]
    assert int(jax.vmap(episode_metrics)(state)["srt_met"][0]) == 3


def test_edf_affinity_waits_for_the_affine_accelerator():
    """EDF puts A (deadline 20, affine to a only) on slow b at 0 (ends 40: miss); with affinity B (affine to
    both) takes b and A runs on a at 10, ending 20: every job met."""
    edf = _rollout(baselines.edf)
    assert _schedule(edf, 1, [C, A, B]) == [(0, 0), (0, 1), (10, 0)]
    assert int(jax.vmap(episode_metrics)(edf)["srt_met"][1]) == 2
    aff = _rollout(baselines.edf_affinity)
    assert _schedule(aff, 1, [C, B, A]) == [(0, 0), (0, 1), (10, 0)]
    assert int(jax.vmap(episode_metrics)(aff)["srt_met"][1]) == 3


@pytest.mark.parametrize("name", ["cpls", "edf_aff"])
def test_python_twins_agree_on_the_hand_cases(name):
    state = _rollout(baselines.POLICIES[name])
    for i, sc in enumerate((SLACK_CASE, AFF_CASE)):
        sim = PySim(pack(sc, SIZES, certified=True), safety=False)
        sim.run(PY_POLICIES[name])
        assert sim.start == [int(v) for v in np.asarray(state.start[i])], (name, i)
        assert sim.machine == [int(v) for v in np.asarray(state.machine[i])], (name, i)


def test_both_baselines_behind_the_safety_layer_meet_every_hrt_deadline_and_match_python():
    """Random certified scenarios at high load: 0 HRT misses, valid schedules, JAX == plain Python."""
    platform = platform_from_dict(RT_TEST_PLATFORM)
    cfg = ScenarioConfig(
        utilisation=0.9,
        hrt_share=0.6,
        groups=3,
        horizon_ms=10,
        max_hrt_jobs=4,
        max_srt_jobs=4,
        hrt_models=("mobilenet", "mobilenetv2", "resnet50"),
        qos_factor=(1.2, 2.5),
        max_tries=500,
    )
    scs, _ = generate(cfg, platform, 10, seed=11)
    sizes = Sizes(4, 4, 3, 3, 3)
    packed = [pack(s, sizes) for s in scs]
    for name in ("cpls", "edf_aff"):
        for safety in (True, False):
            state = _rollout(baselines.POLICIES[name], safety=safety, params=stack(packed), steps=80)
            m = jax.vmap(episode_metrics)(state)
            assert bool(jnp.all(state.done)) and not bool(jnp.any(state.violation))
            if safety:
                assert int(m["hrt_missed"].sum()) == 0 and int(m["hrt_jobs"].sum()) > 15
            for i in (0, 5, 9):
                sim = PySim(packed[i], safety=safety)
                pm = sim.run(PY_POLICIES[name])
                assert sim.start == [int(v) for v in np.asarray(state.start[i])], (name, safety, i)
                assert pm["overrides"] == int(m["overrides"][i])
                assert validate_schedule(packed[i], state.start[i], state.finish[i], state.machine[i]) == []
