"""Issue 31's second utilisation reading (session 32): ``work_utilisation`` = the task set's work in mean
accelerator time / (M x makespan). Checked against the scenario's own sub-job times and the plain-Python simulator;
unlike busy / makespan it does not move when the same jobs run on slower accelerators unless the makespan moves."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import RT_TEST_PLATFORM

from respect_jax.realtime.baselines import edf
from respect_jax.realtime.environment import RTEnv, rollout
from respect_jax.realtime.generator import ScenarioConfig, generate
from respect_jax.realtime.platform import platform_from_dict
from respect_jax.realtime.reference import PY_POLICIES, PySim
from respect_jax.realtime.tasks import Sizes, pack, stack
from respect_jax.realtime.types import Action

PLATFORM = platform_from_dict(RT_TEST_PLATFORM)
SIZES = Sizes(hrt_jobs=4, srt_jobs=4, groups=3, machines=3, clients=2)


def edf_slowest(obs, state=None, key=None) -> Action:
    """EDF priorities on the slowest allowed accelerator: the same jobs, more accelerator time."""
    return Action(priority=-obs.deadline.astype(jnp.float32), machine_pref=obs.exec_us.astype(jnp.float32))


def test_work_utilisation_is_the_scenarios_mean_time_work_over_m_makespan_and_ignores_slow_placements():
    cfg = ScenarioConfig(
        name="wu", utilisation=0.4, hrt_share=0.5, num_hrt_tasks=2, num_clients=2, groups=3, horizon_ms=6.0,
        hrt_models=("mobilenet", "mobilenetv2"), srt_models=("mobilenet", "resnet50"),
        max_hrt_jobs=SIZES.hrt_jobs, max_srt_jobs=SIZES.srt_jobs, max_tries=500,
    )  # fmt: skip
    scs, _ = generate(cfg, PLATFORM, 6, seed=(32, 3))
    packed = [pack(s, SIZES) for s in scs]
    batch = jax.tree.map(jnp.asarray, stack(packed))
    env = RTEnv(safety=True)
    def run(p, idx):  # one compilation for both policies
        pol = lambda o, st, k: jax.lax.switch(idx, [edf, edf_slowest], o, st, k)  # noqa: E731
        return rollout(env, p, pol, jax.random.key(0), 200)

    run = jax.jit(run)
    out = {name: run(batch, jnp.int32(i)) for i, name in enumerate(("edf", "slow"))}
    busy_ratio = []
    for i, sc in enumerate(scs):
        # W from the scenario's jobs (not the packed params): each job's mean-time work, the generator's unit
        work = sum(sc.templates[job.template].mean_work_us for job in sc.jobs)
        for state, m in out.values():
            makespan = int(m["makespan"][i])
            assert float(m["work_utilisation"][i]) == pytest.approx(work / (3 * makespan), rel=1e-5)
            busy = float(np.asarray(state.busy_us[i]).sum())
            assert float(m["utilisation"][i]) == pytest.approx(busy / (3 * makespan), rel=1e-5)
        # the same work W for both schedules; busy time grows with the slow placements
        wu_mk = [float(out[n][1]["work_utilisation"][i]) * int(out[n][1]["makespan"][i]) for n in ("edf", "slow")]
        assert wu_mk[0] == pytest.approx(wu_mk[1], rel=1e-5)
        busy = [float(np.asarray(out[n][0].busy_us[i]).sum()) for n in ("edf", "slow")]
        busy_ratio.append(busy[1] / busy[0])
        # the plain-Python simulator reports the same figure for EDF
        pm = PySim(packed[i], safety=True).run(PY_POLICIES["edf"])
        assert pm["work_utilisation"] == pytest.approx(float(out["edf"][1]["work_utilisation"][i]), rel=1e-5)
    # not vacuous: the slow placements spend more accelerator time on some task sets (17 % more on one here)
    assert max(busy_ratio) > 1.1
