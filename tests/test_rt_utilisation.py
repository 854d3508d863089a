"""The utilisation diagnosis of issue 31: busy time, makespan and idle-while-ready of executed schedules, checked
against the plain-Python simulator and a microsecond-by-microsecond count."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import RT_TEST_PLATFORM

from respect_jax.realtime.baselines import POLICIES
from respect_jax.realtime.environment import RTEnv, rollout
from respect_jax.realtime.evaluate import idle_while_ready_us, makespan_lower_bound_us, utilisation_parts
from respect_jax.realtime.generator import ScenarioConfig, generate
from respect_jax.realtime.platform import platform_from_dict
from respect_jax.realtime.reference import PY_POLICIES, PyScenario, PySim, ready_on
from respect_jax.realtime.tasks import Sizes, pack, stack
from respect_jax.realtime.types import INF

PLATFORM = platform_from_dict(RT_TEST_PLATFORM)
SIZES = Sizes(hrt_jobs=4, srt_jobs=4, groups=3, machines=3, clients=2)


def _scenarios(count: int = 6):
    cfg = ScenarioConfig(
        name="diag",
        utilisation=0.6,
        hrt_share=0.5,
        num_hrt_tasks=2,
        num_clients=2,
        hrt_models=("mobilenet", "mobilenetv2"),
        srt_models=("mobilenet", "mobilenetv2", "resnet50"),
        groups=3,
        horizon_ms=6.0,
        qos_factor=(1.2, 2.5),
        max_hrt_jobs=SIZES.hrt_jobs,
        max_srt_jobs=SIZES.srt_jobs,
        max_tries=500,
    )
    scs, _ = generate(cfg, PLATFORM, count, seed=(31, 7))
    return [pack(s, SIZES) for s in scs]


def _brute_idle_ready(p, sim: PySim) -> int:
    """Count, microsecond by microsecond, accelerator-instants with nothing running and a ready sub-job waiting
    (readiness from the plain-Python simulator's own rule, ``reference.ready_on``)."""
    sc = PyScenario(p)
    subs = [s for s in range(sc.S) if sc.valid[s]]
    makespan = max(sim.finish[s] for s in subs)
    ready = {(s, m): ready_on(sc, s, m, sim.finish, sim.machine) for s in subs for m in range(sc.M)}
    count = 0
    for t in range(makespan):
        for m in range(sc.M):
            running = any(sim.machine[s] == m and sim.start[s] <= t < sim.finish[s] for s in subs)
            waiting = any(ready[s, m] <= t < sim.start[s] for s in subs)
            count += waiting and not running
    return count


def test_idle_while_ready_on_a_hand_worked_schedule():
    """Two sub-jobs, chain 0 -> 1 with a 5 us transfer; 0 runs on a at [0, 10), 1 on b at [20, 30). Sub-job 1 waits
    for a on [10, 20) (no transfer there) and for b on [15, 20): 10 + 5 us idle while ready; sub-job 0 never waits."""
    p = SimpleNamespace(
        exec_us=np.array([[10, 12], [9, 10]]),
        valid=np.array([True, True]),
        release=np.array([0, 0]),
        preds=np.array([[0], [0]]),
        pred_mask=np.array([[False], [True]]),
        xfer_us=np.array([[0], [5]]),
    )
    assert idle_while_ready_us(p, np.array([0, 20]), np.array([10, 30]), np.array([0, 1])) == 15
    # run sub-job 1 on a right away: nothing waits any more
    assert idle_while_ready_us(p, np.array([0, 10]), np.array([10, 19]), np.array([0, 0])) == 0


@pytest.mark.parametrize("policy", ["edf", "adversarial"])
def test_idle_while_ready_equals_a_microsecond_count_on_simulated_schedules(policy):
    """Schedules executed by the plain-Python simulator behind the safety layer (an adversary idles more)."""
    packed = _scenarios(4)
    totals = []
    for p in packed:
        sim = PySim(p, safety=True)
        sim.run(PY_POLICIES[policy])
        assert all(f < INF for f, v in zip(sim.finish, PyScenario(p).valid, strict=True) if v)
        got = idle_while_ready_us(p, np.array(sim.start), np.array(sim.finish), np.array(sim.machine))
        assert got == _brute_idle_ready(p, sim)
        totals.append(got)
    assert sum(totals) > 0  # the check is not vacuous


def test_utilisation_parts_match_the_reference_simulator():
    """busy / (M * makespan) is the environment's utilisation, and busy, makespan and slow-down of the JAX rollout
    equal the plain-Python simulator's, decision for decision the same schedule."""
    packed = _scenarios(6)
    batch = jax.tree.map(jnp.asarray, stack(packed))
    state, metrics = jax.jit(lambda b: rollout(RTEnv(safety=True), b, POLICIES["edf"], jax.random.key(0), 200))(batch)
    state = jax.tree.map(np.asarray, state)
    parts = utilisation_parts(stack(packed), state)
    util = parts["busy_ms"] / (SIZES.machines * parts["makespan_ms"])
    np.testing.assert_allclose(util, np.asarray(metrics["utilisation"]), rtol=1e-5)
    for b, p in enumerate(packed):
        sim = PySim(p, safety=True)
        ref = sim.run(PY_POLICIES["edf"])
        sc = PyScenario(p)
        subs = [s for s in range(sc.S) if sc.valid[s]]
        assert parts["busy_ms"][b] == pytest.approx(sum(sim.busy) / 1e3)
        assert parts["makespan_ms"][b] == pytest.approx(ref["makespan"] / 1e3)
        slow = np.mean([sc.exec[s][sim.machine[s]] / min(sc.exec[s]) - 1.0 for s in subs])
        assert parts["slowdown"][b] == pytest.approx(slow)
        assert parts["idle_ready_ms"][b] == pytest.approx(_brute_idle_ready(p, sim) / 1e3)


def _longest_from(sc: PyScenario, s: int, memo: dict) -> int:
    """Fastest-time longest path from the start of sub-job ``s`` to the end of its job (successor lists)."""
    if s not in memo:
        memo[s] = min(sc.exec[s]) + max((_longest_from(sc, y, memo) for y, _ in sc.succs[s]), default=0)
    return memo[s]


@pytest.mark.parametrize("policy", ["edf", "cpls", "adversarial"])
def test_makespan_lower_bound_is_the_critical_path_and_no_schedule_beats_it(policy):
    packed = _scenarios(5)
    lbs = makespan_lower_bound_us(stack(packed))
    for p, lb in zip(packed, lbs, strict=True):
        sc = PyScenario(p)
        memo: dict = {}
        expect = max(sc.release[s] + _longest_from(sc, s, memo) for s in range(sc.S) if sc.valid[s])
        assert lb == expect == makespan_lower_bound_us(p)
        for safety in (True, False):
            sim = PySim(p, safety=safety)
            assert sim.run(PY_POLICIES[policy])["makespan"] >= lb
