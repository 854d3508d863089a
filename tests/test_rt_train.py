"""RL training of the real-time policy: one tiny resumable run (fast) and a learning test (slow)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from flax import nnx

from respect_jax.cli.rt import preset
from respect_jax.realtime.evaluate import Runner, summarise
from respect_jax.realtime.generator import generate
from respect_jax.realtime.platform import platform_from_dict
from respect_jax.realtime.policy import RTPolicyConfig
from respect_jax.realtime.tasks import Sizes, pack, stack
from respect_jax.realtime.train import RTTrainConfig, fit, load_policy

PLATFORM = platform_from_dict(
    {
        "accelerators": [
            {"name": "ws0", "dataflow": "ws", "peak_tmacs": 2.0, "mem_gbs": 25, "overhead_us": 30},
            {"name": "rs0", "dataflow": "rs", "peak_tmacs": 1.5, "mem_gbs": 20, "overhead_us": 30},
            {"name": "os0", "dataflow": "os", "peak_tmacs": 1.2, "mem_gbs": 20, "overhead_us": 30},
        ]
    }
)
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
    assert doc["policy"] == {"machines": 3, "hidden": 16, "layers": 1} and doc["train"]["updates"] == 2
    loaded, ldoc = load_policy(tmp_path)
    assert ldoc["step"] == 2
    for a, b in zip(jax.tree.leaves(nnx.state(model)), jax.tree.leaves(nnx.state(loaded)), strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    messages = []
    _, logs2 = fit(pool, RTPolicyConfig(machines=3, hidden=16, layers=1), cfg, tmp_path, log=messages.append)
    assert messages == ["resumed from step 2"] and [r["step"] for r in logs2] == [1, 2]


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
