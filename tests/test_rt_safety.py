"""The safety layer's guarantee over thousands of random scenarios, and JAX vs plain-Python agreement.

One compiled rollout per safety setting serves every policy (``Runner`` switches on a traced
policy index), so this module compiles the environment twice.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import RT_TEST_PLATFORM

from respect_jax.realtime.evaluate import Runner, summarise
from respect_jax.realtime.generator import ScenarioConfig, generate
from respect_jax.realtime.platform import platform_from_dict
from respect_jax.realtime.reference import PY_POLICIES, PySim, static_policy, validate_schedule
from respect_jax.realtime.tasks import Sizes, pack, stack

PLATFORM = platform_from_dict(RT_TEST_PLATFORM)
SIZES = Sizes(hrt_jobs=6, srt_jobs=6, groups=3, machines=3, clients=3)
POLICIES = ["random", "adversarial", "oracle_adversary", "edf", "llf", "heft", "fcfs", "static_random"]
# utilisation x HRT share grid: light to overloaded, HRT-heavy to SRT-heavy
GRID = [(0.4, 0.3), (0.4, 0.5), (0.4, 0.75), (0.7, 0.3), (0.7, 0.5), (0.7, 0.75), (0.95, 0.3), (0.95, 0.5), (0.8, 0.6)]


def _config(u: float, h: float) -> ScenarioConfig:
    return ScenarioConfig(
        name=f"u{u}_h{h}",
        utilisation=u,
        hrt_share=h,
        num_hrt_tasks=2,
        num_clients=3,
        hrt_models=("mobilenet", "mobilenetv2", "resnet50"),
        srt_models=("mobilenet", "mobilenetv2", "resnet50"),
        groups=3,
        horizon_ms=12.0,
        qos_factor=(1.2, 2.5),
        max_hrt_jobs=SIZES.hrt_jobs,
        max_srt_jobs=SIZES.srt_jobs,
        max_tries=500,
    )


def _scenarios(per_cell: int, seed: int):
    out = []
    for k, (u, h) in enumerate(GRID):
        scs, _ = generate(_config(u, h), PLATFORM, per_cell, seed=seed + k)
        out += scs
    return out


@pytest.fixture(scope="module")
def runner() -> Runner:
    return Runner(POLICIES, max_steps=400)


@pytest.fixture(scope="module")
def many(runner):
    """2,016 certified random scenarios (224 per grid cell), packed and stacked; ``run(policy,
    safety)`` caches the rollouts on them."""
    scs = _scenarios(224, seed=0)
    batch = stack([pack(s, SIZES) for s in scs])
    cache = {}

    def run(policy: str, safety: bool):
        if (policy, safety) not in cache:
            cache[(policy, safety)] = runner.run(batch, policy, safety=safety, seed=1)
        return cache[(policy, safety)]

    return scs, run


@pytest.mark.parametrize("policy", ["random", "adversarial", "oracle_adversary"])
def test_no_hrt_miss_with_safety_layer(many, policy):
    scs, run = many
    assert len(scs) >= 2000
    state, m = run(policy, True)
    assert m["finished"].all(), "an episode ran out of decisions"
    assert not m["violation"].any(), "the safety layer's invariant broke"
    assert int(m["hrt_jobs"].sum()) > 5000
    assert int(m["hrt_missed"].sum()) == 0
    assert float(m["overrides"].sum()) > 0  # the layer did have to step in
    # the executed schedules are valid (independent checker) on a sample
    for i in range(0, len(scs), 97):
        sub = {k: np.asarray(getattr(state, k)[i]) for k in ("start", "finish", "machine")}
        assert validate_schedule(pack(scs[i], SIZES), **sub) == []


def test_misses_occur_without_safety_layer(many):
    _, run = many
    for policy in ("random", "edf"):
        _, m = run(policy, False)
        assert m["finished"].all()
        s = summarise(m)
        assert s["hrt_missed"] > 0, policy
        assert s["hrt_schedulability"] < 0.95, policy


def test_oracle_adversary_is_overridden_more_than_random(many):
    _, run = many
    adv, rnd = summarise(run("oracle_adversary", True)[1]), summarise(run("random", True)[1])
    assert adv["override_rate"] > rnd["override_rate"] > 0


def _agreement(run, scs, safety: bool, indices, names) -> None:
    """JAX rollouts of the big batch vs the Python simulator on the scenarios at ``indices``."""
    s_n, m_n = SIZES.subjobs, SIZES.machines
    seeded = static_policy(
        np.asarray(jax.random.uniform(jax.random.key(0), (s_n,))),
        np.asarray(jax.random.uniform(jax.random.key(1), (s_n, m_n))),
    )
    py_policies = {**PY_POLICIES, "static_random": seeded}
    for name in names:
        state, m = run(name, safety)
        for i in indices:
            sim = PySim(pack(scs[i], SIZES), safety=safety)
            pm = sim.run(py_policies[name])
            assert sim.start == [int(v) for v in np.asarray(state.start[i])], (name, i)
            assert sim.machine == [int(v) for v in np.asarray(state.machine[i])], (name, i)
            for key in ("decisions", "overrides", "fallbacks", "hrt_missed", "srt_met", "makespan"):
                assert pm[key] == int(m[key][i]), (name, i, key)
            assert pm["jain"] == pytest.approx(float(m["jain"][i]), rel=1e-5)
            assert pm["utilisation"] == pytest.approx(float(m["utilisation"][i]), rel=1e-5)
            assert pm["work_utilisation"] == pytest.approx(float(m["work_utilisation"][i]), rel=1e-5)


@pytest.mark.parametrize("safety", [True, False])
def test_jax_and_python_simulators_agree(many, safety):
    """Same schedule (every start and accelerator) and counters on seeded traces: two scenarios
    of every grid cell; EDF, seeded static random priorities and the adversarial policy."""
    scs, run = many
    _agreement(
        run,
        scs,
        safety,
        [224 * k + j for k in range(len(GRID)) for j in range(2)],
        ("edf", "static_random", "adversarial"),
    )


@pytest.mark.slow
@pytest.mark.parametrize("safety", [True, False])
def test_jax_and_python_simulators_agree_all_policies(many, safety):
    scs, run = many
    _agreement(run, scs, safety, range(0, len(scs), 7), ("edf", "llf", "heft", "fcfs", "adversarial", "static_random"))


def test_python_reference_guarantee_with_static_random_priorities():
    """The plain-Python safety layer alone also keeps every HRT deadline (seeded random priorities)."""
    rng = np.random.default_rng(5)
    scs = _scenarios(4, seed=300)
    for s in scs:
        p = pack(s, SIZES)
        pol = static_policy(rng.random(SIZES.subjobs), rng.random((SIZES.subjobs, SIZES.machines)))
        sim = PySim(p, safety=True)
        m = sim.run(pol)
        assert m["hrt_missed"] == 0 and not m["violation"]
        assert validate_schedule(p, sim.start, sim.finish, sim.machine) == []


@pytest.mark.parametrize("seed", [1, 2])
def test_an_adversary_redrawn_every_step_never_breaks_the_reference_invariant(seed):
    """Regression (found by fuzzing): a rejected proposal holds its accelerator idle; a dispatch on another one at
    the same instant refreshed the reference, which could start a sub-job on the held accelerator at ``t``; time
    then passed that start (invariant I lost, ``violation``). Every step here proposes a pair the layer rejects
    whenever one exists; after every decision no reference start may lie in the past."""
    import random

    from respect_jax.realtime.reference import py_certify
    from respect_jax.realtime.tasks import sizes_for

    platform = platform_from_dict({"accelerators": [
        {"name": "ws0", "dataflow": "ws", "peak_tmacs": 2.0, "mem_gbs": 25, "overhead_us": 30},
        {"name": "rs0", "dataflow": "rs", "peak_tmacs": 1.5, "mem_gbs": 20, "overhead_us": 30},
    ]})
    tight = ScenarioConfig(
        name="tight", utilisation=0.7, hrt_share=0.7, num_hrt_tasks=3, num_clients=2, groups=3, horizon_ms=12.0,
        max_hrt_jobs=8, max_srt_jobs=6, deadline_factor=(0.2, 0.5), hrt_models=("mobilenet", "mobilenetv2", "resnet50"),
        srt_models=("mobilenet", "mobilenetv2", "resnet50"), qos_factor=(1.2, 2.5), max_tries=2000,
    )
    scs, _ = generate(tight, platform, 200, seed=seed)
    rng = random.Random(0)
    for i, s in enumerate(scs):
        p = pack(s, sizes_for([s]))
        sim = PySim(p, safety=True)
        while not sim.done:
            priority = [rng.random() for _ in range(sim.sc.S)]
            pref = [[rng.random() for _ in range(sim.sc.M)] for _ in range(sim.sc.S)]
            rejected = [(x, m) for x, m in sim.pairs() if not py_certify(sim.sc, sim.t, sim.plan, x, m)]
            if rejected:
                x, m = rng.choice(rejected)
                priority[x], pref[x][m] = 10.0, 10.0
            sim.step(priority, pref)
            assert all(start >= sim.t for start, _ in sim.plan.values()), (i, sim.t, sim.plan)
        metrics = sim.metrics()
        assert not metrics["violation"] and metrics["hrt_missed"] == 0, i
        assert validate_schedule(p, sim.start, sim.finish, sim.machine) == [], i
