"""Checkpoints kept during training and the choice among them (issue 30): ``keep_every`` keeps the parameters every N
episodes in ``run_dir/kept``, ``export_kept`` turns one into an agent folder, ``best_episode`` and
``experiments/edge_select.py`` choose one per seed on selection traces (never the evaluation or validation seeds)."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import experiment_script
from flax import nnx

from respect_jax.edge_cluster.agent_runs import (
    KEPT_DIR,
    SUMMARY_FILE,
    best_episode,
    export_kept,
    kept_episodes,
    kept_params,
)
from respect_jax.edge_cluster.scenarios import load_preset
from respect_jax.edge_cluster.switching import (
    SwitchConfig,
    _network_doc,
    kept_agent,
    load_edge_agent,
    make_train,
    train_switch,
)
from respect_jax.train.checkpoints import Checkpointer
from respect_jax.train.run_folder import METRICS_FILE, NETWORK_FILE

TINY = dict(hidden=(16,), num_envs=4, episode_steps=16, stride=4, horizon=8, batch_size=16, loads=(1.0,), seed=0)


def _select_script():
    return experiment_script("edge_select")


def _leaves(params) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(params)]


def _assert_same(a, b) -> None:
    for x, y in zip(_leaves(a), _leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


def _save(folder: Path, episode: int, params) -> None:
    ckpt = Checkpointer(folder, max_to_keep=None)
    try:
        ckpt.save(episode, params, {"episode": jnp.int32(episode)})
        ckpt.wait()
    finally:
        ckpt.close()


def test_best_episode_is_the_highest_score_and_the_earliest_among_equals():
    assert best_episode({16: 0.80, 32: 0.85, 48: 0.85, 64: 0.84}) == 32
    assert best_episode({96: 0.9, 16: 0.1}) == 96
    with pytest.raises(ValueError, match="no kept checkpoint"):
        best_episode({})


def test_a_kept_checkpoint_exports_as_an_agent_folder(tmp_path):
    """A run folder with a final checkpoint and parameters kept after episodes 2 and 4 (written here, each
    distinct): ``kept_agent`` and the exported folder (loaded as a shipped agent) hold exactly episode 2's
    parameters, its metrics stop at episode 2, its summary says which episode; an episode not kept is a one-line
    error naming those that are."""
    scn = load_preset("small_ramp")
    cfg = SwitchConfig(**TINY, episodes=4)
    model, _, _ = make_train(scn, cfg)
    _, params = nnx.split(model)
    at = {e: jax.tree.map(lambda x, e=e: x + e, params) for e in (2, 4)}
    run = tmp_path / "run"
    run.mkdir()
    (run / NETWORK_FILE).write_text(json.dumps(_network_doc(scn, cfg)))
    (run / METRICS_FILE).write_text("".join(json.dumps({"episode": e, "success": 0.1 * e}) + "\n" for e in range(1, 5)))
    (run / SUMMARY_FILE).write_text(json.dumps({"episodes": 4, "train_time_s": 1.0}))
    _save(run, 4, at[4])
    for e in (2, 4):
        _save(run / KEPT_DIR, e, at[e])
    assert kept_episodes(run) == [2, 4] and kept_episodes(tmp_path) == []
    _assert_same(kept_agent(run, 2).params, at[2])
    _assert_same(load_edge_agent(run)[0].params, at[4])
    dest = export_kept(run, 2, tmp_path / "chosen" / "s0", params, extra={"selection": {"trace_seed": 11}})
    agent, _ = load_edge_agent(dest)
    _assert_same(agent.params, at[2])
    assert [r["episode"] for r in agent.history] == [1, 2]
    summary = json.loads((dest / SUMMARY_FILE).read_text())
    assert summary["selected_episode"] == 2 and summary["selection"] == {"trace_seed": 11}
    assert summary["train_time_s"] == 1.0
    with pytest.raises(ValueError, match=r"no parameters kept after episode 3 \(kept: 2, 4\)"):
        kept_params(run, params, 3)


@pytest.mark.parametrize("seed", [7, 2030])
def test_selection_refuses_the_validation_and_evaluation_trace_seeds(tmp_path, seed):
    with pytest.raises(ValueError, match=f"--seed {seed} is the"):
        _select_script().main(["--train-dir", str(tmp_path), "--seed", str(seed), "--out-agents", str(tmp_path)])


def test_keep_every_must_be_at_least_zero(tmp_path):
    scn = load_preset("small_ramp")
    cfg = SwitchConfig(**TINY, episodes=1)
    with pytest.raises(ValueError, match="keep_every must be >= 0"):
        train_switch(scn, cfg, tmp_path / "a", keep_every=-1)
    with pytest.raises(ValueError, match="keep_every > 0 needs a run_dir"):
        train_switch(scn, cfg, None, keep_every=2)


@pytest.mark.slow  # three short trainings (most of the time: compilation), then a selection on small_ramp
def test_kept_parameters_are_those_of_a_shorter_run_and_selection_exports_the_best(tmp_path):
    """4 episodes in chunks of 2 with ``keep_every=3``: the chunks become 2, 1, 1 and the parameters after episodes
    3 and 4 are kept. Episode 3's equal those of an independent 3-episode run, episode 4's the agent's, and the
    whole run equals one without ``keep_every`` (splitting a chunk changes nothing). ``edge_select.py`` on
    ``small_ramp`` then exports, per seed, the kept episode with the highest reported average."""
    scn = load_preset("small_ramp")
    cfg = SwitchConfig(**TINY, episodes=4)
    kept_run = train_switch(scn, cfg, tmp_path / "train" / "s0", chunk=2, keep_every=3)
    assert kept_episodes(tmp_path / "train" / "s0") == [3, 4]
    plain = train_switch(scn, cfg, tmp_path / "plain", chunk=2)
    shorter = train_switch(scn, SwitchConfig(**TINY, episodes=3), tmp_path / "shorter", chunk=2)
    _assert_same(kept_agent(tmp_path / "train" / "s0", 3).params, shorter.params)
    _assert_same(kept_agent(tmp_path / "train" / "s0", 4).params, kept_run.params)
    _assert_same(kept_run.params, plain.params)
    assert not (tmp_path / "plain" / KEPT_DIR).exists()

    results = _select_script().main(["--train-dir", str(tmp_path / "train"), "--agent-seeds", "0", "--scenarios",
                                     "small_ramp", "--traces", "2", "--margin", "0", "--out-agents",
                                     str(tmp_path / "chosen"), "--stem", "select", "--out", str(tmp_path)])
    scores = {int(k.split("@")[1]): v["mean"] for k, v in results["scores"].items()}
    assert set(scores) == {3, 4} and scores[results["chosen"]["s0"]] == max(scores.values())
    chosen, _ = load_edge_agent(tmp_path / "chosen" / "s0")
    _assert_same(chosen.params, kept_agent(tmp_path / "train" / "s0", results["chosen"]["s0"]).params)
    assert (tmp_path / "select.md").is_file() and json.loads((tmp_path / "select.json").read_text())["chosen"]


def test_joint_choice_minimises_the_cells_over_the_spread_limit():
    """Two seeds, two candidates each, three cells (hand-computed): a@1 with b@2 agree in every cell (0 over the
    limit) though a@2 has the higher average; a@2 with b@1 would be the seeds' own best averages (2 cells over)."""
    module = experiment_script("edge_select_joint")
    cells = [("x", "low"), ("x", "high"), ("y", "low")]
    at = lambda *means: dict(zip(cells, means, strict=True))  # noqa: E731
    seed_a = {"a@1": at(0.80, 0.60, 0.90), "a@2": at(0.90, 0.70, 0.90)}
    seed_b = {"b@1": at(0.95, 0.65, 0.90), "b@2": at(0.81, 0.61, 0.90)}
    best, rows = module.joint_choice([seed_a, seed_b], 0.02)
    assert best == ("a@1", "b@2")
    by = {tuple(r["combo"]): r for r in rows}
    assert by[("a@1", "b@2")]["over"] == 0 and by[("a@2", "b@1")]["over"] == 2
    assert by[("a@2", "b@2")]["over"] == 2 and by[("a@1", "b@1")]["over"] == 2
    assert by[("a@1", "b@2")]["max_spread"] == pytest.approx(0.01)
