"""``switch.ema`` (issue 30): an exponential moving average of the switching agent's online parameters over the
gradient updates becomes the agent (checkpointed, kept, acting at evaluation); training still learns and acts with
the online parameters."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import jax
import numpy as np
import pytest
import yaml

from respect_jax.edge_cluster.scenarios import load_preset
from respect_jax.edge_cluster.switching import (
    SwitchConfig,
    ema_step,
    load_switch_agent,
    make_train,
    train_switch,
)

# one rollout sample and one gradient update per episode from the first one on (batch_size <= num_envs)
TINY = dict(hidden=(16,), num_envs=4, episode_steps=4, stride=4, horizon=8, batch_size=4, buffer_size=64,
            updates_per_sample=1, loads=(1.0,), lr=0.01, seed=0)
DECAY = 0.5  # the warm-up decay (1 + t) / (10 + t) is below it for t < 8 and above it after: both regimes run
EPISODES = 12


def _leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x, dtype=np.float64) for x in jax.tree.leaves(tree)]


def _numpy_ema(start, onlines, decay: float) -> list[np.ndarray]:
    """The reference: a = start; after update t = 1, 2, ...: d = min(decay, (1 + t) / (10 + t)), a = d a + (1 - d) o."""
    avg = _leaves(start)
    for t, online in enumerate(onlines, start=1):
        d = min(decay, (1.0 + t) / (10.0 + t))
        avg = [d * a + (1.0 - d) * o for a, o in zip(avg, _leaves(online), strict=True)]
    return avg


def test_ema_step_follows_the_numpy_recurrence():
    """:func:`ema_step` over 12 random parameter trees equals the NumPy recurrence (warm-up, then the decay)."""
    rng = np.random.default_rng(3)
    tree = lambda: {"a": rng.normal(size=(3, 2)).astype(np.float32), "b": [rng.normal(size=4).astype(np.float32)]}  # noqa: E731
    start, onlines = tree(), [tree() for _ in range(EPISODES)]
    avg = jax.tree.map(np.asarray, start)
    for t, online in enumerate(onlines, start=1):
        avg = ema_step(avg, online, np.int32(t), DECAY)
    for a, b in zip(_leaves(avg), _numpy_ema(start, onlines, DECAY), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # two tiny trainings, mostly compilation (~20 s on this CPU)
def test_ema_is_a_numpy_recurrence_over_the_online_parameters():
    """The run without the average, one episode (= one update) at a time, gives the online parameters after each
    update; the run with ``ema``, its average started far away, learns and acts exactly as that run (same online
    parameters, same metrics) and its agent equals the NumPy recurrence over those parameters. Fails if the warm-up
    decay is dropped, or if training acts with the average (both mutations run)."""
    scn = load_preset("small_ramp")
    off = SwitchConfig(**TINY, episodes=EPISODES)
    on = replace(off, ema=DECAY)
    _, init_off, run_off = make_train(scn, off)
    _, init_on, run_on = make_train(scn, on)
    step = jax.jit(run_off, static_argnums=1)
    carry = init_off(jax.random.key(0))
    # the average starts far from the online parameters (every weight + 1: it would leave the base rule everywhere,
    # the zero-output start never), so acting with it would change the run
    start = jax.tree.map(lambda x: x + 1.0, carry.params)
    onlines, metrics_off = [], []
    for _ in range(EPISODES):
        carry, m = step(carry, 1)
        onlines.append(jax.device_get(carry.params))
        metrics_off.append({k: float(v[0]) for k, v in m.items()})
    ema_carry, m_on = jax.jit(run_on, static_argnums=1)(init_on(jax.random.key(0)).replace(params=start), EPISODES)
    assert int(ema_carry.updates) == EPISODES
    for a, b in zip(_leaves(ema_carry.online), _leaves(onlines[-1]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for i, row in enumerate(metrics_off):
        for k in ("success", "switch", "gain"):
            assert float(m_on[k][i]) == pytest.approx(row[k], rel=1e-5, abs=1e-6)
    want = _numpy_ema(start, onlines, DECAY)
    got = _leaves(ema_carry.params)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    gap = max(float(np.max(np.abs(a - b))) for a, b in zip(got, _leaves(onlines[-1]), strict=True))
    assert gap > 5e-3  # the average is not the online parameters (the check above is not vacuous)


@pytest.mark.slow  # three tiny trainings into run folders (~25 s)
def test_ema_is_the_saved_agent_and_resumes(tmp_path: Path):
    """A run folder's agent is the average; a run of 2 episodes resumed to 3 (online parameters and the update count
    restored from the checkpoint) equals a 3-episode run."""
    scn = load_preset("small_ramp")
    cfg = SwitchConfig(**TINY, episodes=3, ema=0.9)
    whole = train_switch(scn, cfg, tmp_path / "whole", chunk=3)
    train_switch(scn, replace(cfg, episodes=2), tmp_path / "resumed", chunk=2)
    resumed = train_switch(scn, cfg, tmp_path / "resumed", chunk=2)
    assert resumed.trained_from == 2
    for a, b in zip(_leaves(resumed.params), _leaves(whole.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    loaded, _ = load_switch_agent(tmp_path / "whole")
    for a, b in zip(_leaves(loaded.params), _leaves(whole.params), strict=True):
        np.testing.assert_array_equal(a, b)
    assert loaded.config.ema == 0.9


def test_ema_config_values():
    assert "ema" not in SwitchConfig().to_dict() and SwitchConfig(ema=0.99).to_dict()["ema"] == 0.99
    for bad in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"switch\.ema must be in \[0, 1\)"):
            SwitchConfig(ema=bad)
    conf = yaml.safe_load((Path(__file__).resolve().parents[1] / "conf" / "edge.yaml").read_text())
    assert conf["switch"]["ema"] == SwitchConfig().ema == 0.0
