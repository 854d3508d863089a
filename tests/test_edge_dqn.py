"""The ASET agent: it learns a load-dependent dispatch that beats every static policy; checkpoints round-trip.

Scenario ``small_ramp`` (default learning test): within one trace the load ramps up while the cloud's paths recover,
so ``closest`` is best in the first half and ``fastest_expected`` in the second; the agent must do both. Scenario
``small`` (slow test): AR queries (25 ms) only fit on the edge site, video queries (60 ms) fit on both edge and
cloud; under load the edge must be kept for AR and video sent to the cloud, which no static rule does. The default
run trains a tiny agent for a few seconds (deterministic from its seed); the longer training and the end-to-end CLI
run are ``slow``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import yaml
from conftest import assert_beats_small_ramp_phase_winners
from flax import nnx

from respect_jax.edge_cluster.dqn import DQNConfig, keep_parameters_only, load_agent, n_step_target, train_dqn
from respect_jax.edge_cluster.evaluation import best_static, compare
from respect_jax.edge_cluster.policies import STATIC_POLICIES
from respect_jax.edge_cluster.scenarios import load_preset

BIN = Path(sys.executable).parent
FAST = dict(hidden=(32, 32), action_width=16, num_envs=8, episode_steps=64, episodes=12, batch_size=64,
            learning_starts=256, target_period=50, seed=0, loads=(1.0,))
LONG = dict(hidden=(64, 64), num_envs=8, episode_steps=128, episodes=24, batch_size=64, learning_starts=512,
            target_period=100, seed=0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    scn = load_preset("small_ramp")
    run_dir = tmp_path_factory.mktemp("edge_agent")
    agent = train_dqn(scn, DQNConfig(**FAST), run_dir, chunk=FAST["episodes"])
    return scn, agent, run_dir


def test_agent_beats_both_phase_winners_within_one_episode(trained):
    """Short deterministic learning test (~6k transitions) on ``small_ramp``: in the first half of every trace
    (low load, slow cloud paths) ``closest`` is the best static policy and ``fastest_expected`` loses video
    queries to the slow cloud; in the second half (x2.5 load, cloud recovered) ``fastest_expected`` is best and
    ``closest`` drowns the edge. The greedy agent, on fresh traces, is at least as good as the best of each half
    and beats both over the whole episode."""
    scn, agent, _ = trained
    doc = assert_beats_small_ramp_phase_winners(scn, agent.policy)
    overall = doc["mean"]
    assert overall["aset"]["medium"] > max(overall["closest"]["medium"], overall["fastest_expected"]["medium"]) + 0.01
    assert all(np.isfinite(h["loss"]) for h in agent.history[1:])


def test_n_step_target_matches_a_loop():
    rng = np.random.default_rng(0)
    for n in (1, 3, 5):
        reward = rng.random((6, n)).astype(np.float32)
        ongoing = (rng.random((6, n)) > 0.3).astype(np.float32)
        ret, discount = n_step_target(jax.numpy.asarray(reward), jax.numpy.asarray(ongoing), 0.9)
        for i in range(6):
            g, alive, want = 1.0, 1.0, 0.0
            for k in range(n):
                want += g * alive * reward[i, k]
                alive *= ongoing[i, k]
                g *= 0.9
            assert float(ret[i]) == pytest.approx(want, rel=1e-6)
            assert float(discount[i]) == pytest.approx(0.9**n * alive, rel=1e-6)


def test_checkpoint_round_trip(trained):
    scn, agent, run_dir = trained
    loaded, trained_on = load_agent(run_dir)
    assert trained_on.doc == scn.doc and loaded.config == agent.config
    assert loaded.train_time_s == pytest.approx(agent.train_time_s)
    assert json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])["episode"] == FAST["episodes"]
    leaves, loaded_leaves = jax.tree.leaves(agent.params), jax.tree.leaves(loaded.params)
    assert len(leaves) == len(loaded_leaves) > 0
    for x, y in zip(leaves, loaded_leaves, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_parameters_only_agent_loads_the_same_and_is_not_trained_on(trained, tmp_path):
    """`keep_parameters_only` (the shipped agents) drops the training state; the agent loads unchanged, training
    into the folder again to the same episode count trains nothing, and more episodes are refused."""
    scn, agent, run_dir = trained
    shipped = tmp_path / "shipped"
    shutil.copytree(run_dir, shipped)
    keep_parameters_only(shipped)
    size = sum(p.stat().st_size for p in (shipped / "checkpoints").rglob("*") if p.is_file())
    assert size < sum(p.stat().st_size for p in (run_dir / "checkpoints").rglob("*") if p.is_file()) / 4
    assert sorted(p.name for p in (shipped / "checkpoints").iterdir()) == [str(FAST["episodes"])]
    loaded, _ = load_agent(shipped)
    again = train_dqn(scn, DQNConfig(**FAST), shipped, chunk=FAST["episodes"])  # finished: nothing to train
    assert len(again.history) == FAST["episodes"] and again.train_time_s == pytest.approx(agent.train_time_s)
    for x, y, z in zip(*(jax.tree.leaves(a.params) for a in (agent, loaded, again)), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        np.testing.assert_array_equal(np.asarray(x), np.asarray(z))
    with pytest.raises(ValueError, match="saved without its training state"):
        train_dqn(scn, DQNConfig(**{**FAST, "episodes": FAST["episodes"] + 2}), shipped, chunk=2)


TRAIN_IN_CHUNKS = """
import dataclasses, json, pathlib, sys
import numpy as np
import jax
from flax import nnx
from respect_jax.edge_cluster.dqn import DQNConfig, train_dqn
from respect_jax.edge_cluster.scenarios import load_preset
# the static policies are imported with the simulator, before any trace (no lazy import left that could leak a
# constant into a compiled chunk, the regression below)
assert "respect_jax.edge_cluster.policies" in sys.modules
cfg = DQNConfig(hidden=(16, 16), action_width=8, num_envs=4, episode_steps=32, episodes=4, batch_size=32,
                learning_starts=64, target_period=20, seed=0)
scn, root = load_preset("small", horizon_s=0.5), pathlib.Path(sys.argv[1])
first = train_dqn(scn, cfg, root / "whole", chunk=2)

class Killed(Exception):
    pass

def kill_after_two(msg):
    if msg.startswith("episode 2/"):
        raise Killed
try:  # killed after its first chunk (checkpoint of episode 2 written)
    train_dqn(scn, cfg, root / "killed", chunk=2, log=kill_after_two)
    raise SystemExit("not killed")
except Killed:
    pass
assert len((root / "killed" / "metrics.jsonl").read_text().splitlines()) == 2
messages = []
resumed = train_dqn(scn, cfg, root / "killed", chunk=2, log=messages.append)
assert messages[0] == f"resumed from episode 2 of {root / 'killed'}", messages
assert [h["loss"] for h in resumed.history] == [h["loss"] for h in first.history]
for x, y in zip(jax.tree.leaves(first.params), jax.tree.leaves(resumed.params), strict=True):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
lines = (root / "killed" / "metrics.jsonl").read_text().splitlines()
assert [json.loads(x)["episode"] for x in lines] == [1, 2, 3, 4]

before = {p: p.stat().st_mtime_ns for p in (root / "whole").rglob("*")}
try:
    train_dqn(scn, dataclasses.replace(cfg, lr=3e-4), root / "whole", chunk=2)
    raise SystemExit("other settings were not refused")
except ValueError as err:
    assert str(err) == (f"{root / 'whole'} holds checkpoints of another network (dqn.lr differ from this command's); "
                        "use a new run_dir, or overwrite=true to replace it"), err
assert before == {p: p.stat().st_mtime_ns for p in (root / "whole").rglob("*")}  # nothing changed on disk
again = train_dqn(scn, cfg, root / "whole", chunk=2, overwrite=True)  # same seed: the same agent again
assert [h["loss"] for h in again.history] == [h["loss"] for h in first.history]
print(len(again.history))
"""


def test_training_runs_past_its_first_chunk_and_a_killed_run_resumes_exactly(tmp_path):
    """Regression: the first trace of a chunk imported the static policies lazily, and a jnp constant created at
    that import leaked into the compiled program, so every later chunk failed with "Execution supplied 101
    arguments but compiled program expected 115" (`respect-edge train` with more episodes than `chunk`).
    A run killed after its first checkpoint and trained again into the same folder resumes (replay buffer,
    environments, target network and key included) and ends with the parameters and losses of an uninterrupted
    run; other settings are refused before anything changes on disk unless ``overwrite``."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", TRAIN_IN_CHUNKS, str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] == "4"


@pytest.mark.slow
def test_longer_training_beats_every_static_policy_at_every_load():
    scn = load_preset("small", horizon_s=2.0)
    agent = train_dqn(scn, DQNConfig(**LONG), chunk=12)
    loads = ["low", "medium", "high", "overload"]
    doc = compare(scn, {**STATIC_POLICIES, "aset": agent.policy}, loads, jax.random.key(99), traces=4)
    aset = doc["success"]["aset"]
    for load in loads:
        assert aset[load] >= best_static(doc, load)[1] - 0.01, (load, doc["success"])
    assert aset["overload"] > best_static(doc, "overload")[1] + 0.03, doc["success"]


@pytest.mark.slow
def test_training_is_reproducible_from_the_seed():
    scn = load_preset("small", horizon_s=1.0)
    cfg = DQNConfig(**{**FAST, "episodes": 3, "learning_starts": 128})
    first, second = train_dqn(scn, cfg), train_dqn(scn, cfg)
    assert [h["success"] for h in first.history] == [h["success"] for h in second.history]
    assert [h["loss"] for h in first.history][1:] == [h["loss"] for h in second.history][1:]


@pytest.mark.slow
def test_cli_train_then_eval(tmp_path):
    """``respect-edge train`` then ``respect-edge eval`` through the console script (Hydra)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    common = ["edge_scenario.horizon_s=1.0", f"run_dir={tmp_path / 'agent'}", f"out_dir={tmp_path / 'out'}"]
    dqn = ["agent=dqn", "dqn.hidden=[32,32]", "dqn.action_width=16", "dqn.num_envs=8", "dqn.episode_steps=64",
           "dqn.episodes=4", "dqn.learning_starts=256", "dqn.batch_size=64", "chunk=2"]
    for args in (["train", *common, *dqn], ["eval", *common, "eval.traces=2", "eval.loads=[low,overload]"]):
        proc = subprocess.run([str(BIN / "respect-edge"), *args], cwd=tmp_path, capture_output=True, text=True,
                              env=env, timeout=900)
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "agent" / "network.json").is_file()
    written = yaml.safe_load((tmp_path / "agent" / "config.yaml").read_text())  # by the training harness, resolved
    assert written["dqn"]["episodes"] == 4 and written["run_dir"] == str(tmp_path / "agent")
    doc = json.loads((tmp_path / "out" / "success_small.json").read_text())
    assert doc["policies"][-1] == "aset" and set(doc["success"]["aset"]) == {"low", "overload"}


def test_agents_saved_before_the_measured_features_still_load_and_dispatch():
    """The shipped agents of format 3 (observation without the measured blocks) load with ``Layout.measured``
    False and still dispatch well: the ``small`` agent keeps its recorded success at low load on fresh traces."""
    from respect_jax.edge_cluster.dqn import FORMAT_V3
    from respect_jax.edge_cluster.evaluation import evaluate_policy
    from respect_jax.edge_cluster.simulator import num_features

    run_dir = Path(__file__).resolve().parents[1] / "experiments" / "results" / "edge" / "agents" / "small"
    if json.loads((run_dir / "network.json").read_text())["format"] != FORMAT_V3:
        pytest.skip("the shipped small agent was retrained in the current format")
    agent, scn = load_agent(run_dir)
    model = nnx.merge(agent.graphdef, agent.params)
    assert not model.layout.measured
    assert json.loads((run_dir / "network.json").read_text())["obs_size"] == num_features(scn.params, measured=False)
    scn = load_preset("small", horizon_s=1.0)
    result = evaluate_policy(scn, agent.policy, "medium", jax.random.key(5), traces=2)
    assert float(np.mean(result["success"])) > 0.98, result["success"]
