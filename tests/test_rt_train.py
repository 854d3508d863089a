"""RL training of the real-time policy: one tiny resumable run (fast) and a learning test (slow)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from conftest import RT_TEST_PLATFORM
from flax import nnx

from respect_jax.realtime.evaluate import Runner, summarise
from respect_jax.realtime.experiment import scenario_preset as preset
from respect_jax.realtime.generator import generate
from respect_jax.realtime.platform import platform_from_dict
from respect_jax.realtime.policy import RTPolicyConfig
from respect_jax.realtime.tasks import Sizes, pack, stack
from respect_jax.realtime.train import RTTrainConfig, fit, load_policy

PLATFORM = platform_from_dict(RT_TEST_PLATFORM)
TINY = preset("tiny")
SIZES = Sizes(TINY.max_hrt_jobs, TINY.max_srt_jobs, TINY.groups, 3, TINY.num_clients)


def _pool(count: int, seed: int):
    scs, _ = generate(TINY, PLATFORM, count, seed)
    return stack([pack(s, SIZES) for s in scs])


def test_tiny_run_trains_checkpoints_and_resumes(tmp_path):
    cfg = RTTrainConfig(updates=2, updates_per_epoch=1, batch=2, samples=2, max_steps=40)
    pool = _pool(8, 0)
    model, logs = fit(pool, RTPolicyConfig(machines=3, hidden=16, layers=1), cfg, tmp_path, log=lambda s: None)
    assert [r["step"] for r in logs] == [1, 2]
    assert all(np.isfinite(r["loss"]) and np.isfinite(r["grad_norm"]) and r["finished"] == 1.0 for r in logs)
    assert all(r["hrt_missed"] == 0 for r in logs)  # trained behind the safety layer
    doc = json.loads((tmp_path / "network.json").read_text())
    assert (
        doc["policy"]
        == {"machines": 3, "hidden": 16, "layers": 1, "features": 1, "certified_only": False, "prior": 0.0}
        and doc["train"]["updates"] == 2
    )
    loaded, ldoc = load_policy(tmp_path)
    assert ldoc["step"] == 2
    for a, b in zip(jax.tree.leaves(nnx.state(model)), jax.tree.leaves(nnx.state(loaded)), strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    messages = []
    _, logs2 = fit(pool, RTPolicyConfig(machines=3, hidden=16, layers=1), cfg, tmp_path, log=messages.append)
    assert messages == [f"resumed from step 2 of {tmp_path}"] and [r["step"] for r in logs2] == [1, 2]
    # another network is refused before anything is written (the folder keeps describing its checkpoints)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    with pytest.raises(ValueError, match=r"holds checkpoints of another network \(policy differ"):
        fit(pool, RTPolicyConfig(machines=3, hidden=32, layers=1), cfg, tmp_path, log=lambda s: None)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


@pytest.mark.slow
def test_learning_beats_random_behind_the_safety_layer(tmp_path):
    cfg = RTTrainConfig(updates=60, updates_per_epoch=10, batch=8, samples=4)
    model, logs = fit(_pool(128, 1), RTPolicyConfig(machines=3), cfg, tmp_path, log=lambda s: None)
    test = _pool(128, 99)
    runner = Runner(["rl", "random"], 200, model)
    rl = summarise(runner.run(test, "rl", True)[1])
    rnd = summarise(runner.run(test, "random", True)[1])
    assert rl["hrt_missed"] == 0
    assert rl["srt_satisfaction"] > rnd["srt_satisfaction"]


def test_observation_carries_the_layers_verdicts_and_the_safety_aware_policy_only_proposes_certifiable_pairs():
    """``certifiable`` equals the plain-Python certifier on the simulator's reference, ``ref_slack_us`` and
    ``cut_in_us`` are read off that reference; the features=2 policy with ``certified_only`` samples only
    certifiable pairs when one exists (200 sampled decisions per scenario)."""
    from respect_jax.realtime.environment import RTEnv
    from respect_jax.realtime.policy import RTPolicy, choose
    from respect_jax.realtime.reference import PySim, py_certify
    from respect_jax.realtime.types import SLACK_NONE

    scs, _ = generate(TINY, PLATFORM, 6, seed=4)
    packed = [pack(s, SIZES) for s in scs]
    env = RTEnv(safety=True)
    state, ts = jax.jit(env.batch_reset)(jax.tree.map(jax.numpy.asarray, stack(packed)))
    obs = ts.observation
    model = RTPolicy(
        RTPolicyConfig(machines=3, hidden=16, layers=1, features=2, certified_only=True, prior=3.0), rngs=nnx.Rngs(0)
    )
    prio, pair = jax.vmap(model)(obs)
    mask = jax.vmap(model.mask)(obs)
    some_rejected = 0
    for i, p in enumerate(packed):
        sim = PySim(p, safety=True)
        t = int(obs.time[i])
        assert sim.t == t
        cert = np.asarray(obs.certifiable[i])
        for x, m in sim.pairs():
            assert bool(cert[x, m]) == py_certify(sim.sc, t, sim.plan, x, m), (i, x, m)
        assert cert.sum() == sum(py_certify(sim.sc, t, sim.plan, x, m) for x, m in sim.pairs())
        some_rejected += len(sim.pairs()) - int(cert.sum())
        slack = np.asarray(obs.ref_slack_us[i])
        for y in range(p.valid.shape[0]):
            assert slack[y] == (sim.plan[y][0] - t if y in sim.plan else SLACK_NONE), (i, y)
        for m in range(3):
            starts = [st for st, mm in sim.plan.values() if mm == m]
            assert int(obs.cut_in_us[i, m]) == (min(starts) - t if starts else SLACK_NONE)
        if cert.any():
            assert np.array_equal(np.asarray(mask[i]), cert)
            keys = jax.random.split(jax.random.key(i), 200)
            _, j, m, _ = jax.vmap(lambda k, i=i: choose(prio[i], pair[i], mask[i], k))(keys)
            assert cert[np.asarray(j), np.asarray(m)].all(), i
    assert some_rejected > 0  # the case is not vacuous: some ready pairs would be overridden
