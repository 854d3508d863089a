"""Weight averaging of kept checkpoints (issue 30, seed spread): ``average_params`` is the element-wise mean of the
parameter trees, ``averaged_kept`` averages the last M kept episodes, and ``experiments/edge_average.py`` chooses one
M for every seed by the cells whose seed spread exceeds the limit."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import experiment_script
from flax import nnx
from test_edge_kept import TINY

from respect_jax.edge_cluster.agent_runs import (
    KEPT_DIR,
    SUMMARY_FILE,
    average_params,
    averaged_kept,
    export_params,
    last_kept,
)
from respect_jax.edge_cluster.scenarios import load_preset
from respect_jax.edge_cluster.switching import SwitchConfig, _network_doc, load_edge_agent, make_train
from respect_jax.train.checkpoints import Checkpointer
from respect_jax.train.run_folder import METRICS_FILE, NETWORK_FILE


def _script():
    return experiment_script("edge_average")


def _random_like(params, seed: int):
    leaves, treedef = jax.tree.flatten(params)
    rng = np.random.default_rng(seed)
    return jax.tree.unflatten(treedef, [rng.normal(size=np.shape(x)).astype(np.float32) for x in leaves])


def _tiny_params():
    model, _, _ = make_train(load_preset("small_ramp"), SwitchConfig(**TINY, episodes=4))
    return nnx.split(model)[1]


def _run_with_kept(folder: Path, episodes: dict[int, object]) -> None:
    scn = load_preset("small_ramp")
    cfg = SwitchConfig(**TINY, episodes=max(episodes))
    folder.mkdir(parents=True)
    (folder / NETWORK_FILE).write_text(json.dumps(_network_doc(scn, cfg)))
    (folder / METRICS_FILE).write_text("".join(json.dumps({"episode": e, "success": 0.1}) + "\n"
                                               for e in range(1, max(episodes) + 1)))
    (folder / SUMMARY_FILE).write_text(json.dumps({"episodes": max(episodes)}))
    for target in (folder, folder / KEPT_DIR):
        ckpt = Checkpointer(target, max_to_keep=None)
        try:
            for e, p in sorted(episodes.items()):
                if target == folder and e != max(episodes):
                    continue
                ckpt.save(e, p, {"episode": np.int32(e)})
                ckpt.wait()
        finally:
            ckpt.close()


def test_average_params_is_the_numpy_mean_of_the_trees():
    params = _tiny_params()
    trees = [_random_like(params, s) for s in range(3)]
    mean = average_params(trees)
    assert jax.tree.structure(mean) == jax.tree.structure(params)
    for got, *xs in zip(jax.tree.leaves(mean), *[jax.tree.leaves(t) for t in trees], strict=True):
        np.testing.assert_allclose(np.asarray(got), np.mean(np.stack(xs), axis=0), rtol=1e-6, atol=1e-7)
        assert np.asarray(got).dtype == np.float32
    with pytest.raises(ValueError, match="at least one"):
        average_params([])


def test_last_kept_and_its_one_line_error():
    assert last_kept([48, 16, 32, 64], 2) == [48, 64]
    assert last_kept([16, 32], 2) == [16, 32]
    for bad in (0, 3, True):
        with pytest.raises(ValueError, match=r"average_last must be an integer in 1\.\.2"):
            last_kept([16, 32], bad)


def test_averaged_kept_averages_the_last_m_episodes_and_exports(tmp_path):
    params = _tiny_params()
    at = {e: _random_like(params, e) for e in (2, 4, 6)}
    run = tmp_path / "s0"
    _run_with_kept(run, at)
    mean, eps = averaged_kept(run, params, 2)
    assert eps == [4, 6]
    for got, a, b in zip(jax.tree.leaves(mean), jax.tree.leaves(at[4]), jax.tree.leaves(at[6]), strict=True):
        np.testing.assert_allclose(np.asarray(got), (a + b) / 2, rtol=1e-6, atol=1e-7)
    dest = export_params(run, 6, tmp_path / "out" / "s0", mean, extra={"averaged_episodes": eps})
    agent, _ = load_edge_agent(dest)
    for got, want in zip(jax.tree.leaves(agent.params), jax.tree.leaves(mean), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert json.loads((dest / SUMMARY_FILE).read_text())["averaged_episodes"] == [4, 6]


def test_the_choice_of_m_minimises_the_cells_over_the_limit_then_maximises_the_mean():
    module = _script()
    cm = {2: {0: {"a": 0.90, "b": 0.80}, 1: {"a": 0.85, "b": 0.80}},   # a over (0.05): 1 cell, mean 0.8375
          3: {0: {"a": 0.80, "b": 0.70}, 1: {"a": 0.81, "b": 0.70}},   # 0 cells, mean 0.7525
          4: {0: {"a": 0.82, "b": 0.72}, 1: {"a": 0.81, "b": 0.73}}}   # 0 cells, mean 0.77
    rows = module.spread_rows(cm, 0.02)
    assert [rows[m]["over"] for m in (2, 3, 4)] == [1, 0, 0]
    assert rows[2]["max_spread"] == pytest.approx(0.05) and rows[4]["mean"] == pytest.approx(0.77)
    assert module.choose_average(rows) == 4


@pytest.mark.parametrize("seed", [7, 2030])
def test_the_script_refuses_the_validation_and_evaluation_trace_seeds(tmp_path, seed):
    with pytest.raises(ValueError, match=f"--seed {seed} is the"):
        _script().main(["--train-dir", str(tmp_path), "--seed", str(seed), "--out-agents", str(tmp_path)])


@pytest.mark.slow  # a selection run on small_ramp (most of the time: compilation)
def test_the_script_exports_the_chosen_average_for_every_seed(tmp_path):
    """Two seeds with three kept (random) parameter sets each, M in {1, 3} on small_ramp: the exported agent of each
    seed holds that seed's mean of its last M kept sets for the M the report chose."""
    params = _tiny_params()
    at = {s: {e: _random_like(params, 10 * s + e) for e in (2, 4, 6)} for s in (0, 1)}
    for s in (0, 1):
        _run_with_kept(tmp_path / "train" / f"s{s}", at[s])
    results = _script().main(["--train-dir", str(tmp_path / "train"), "--agent-seeds", "0", "1", "--average-last",
                              "1", "3", "--scenarios", "small_ramp", "--traces", "2", "--margin", "0",
                              "--out-agents", str(tmp_path / "avg"), "--stem", "avg", "--out", str(tmp_path)])
    m = results["chosen"]
    assert m in (1, 3) and m == min((1, 3), key=lambda k: (results["rows"][str(k)]["over"],
                                                            -results["rows"][str(k)]["mean"], k))
    for s in (0, 1):
        agent, _ = load_edge_agent(tmp_path / "avg" / f"s{s}")
        want = average_params([at[s][e] for e in (2, 4, 6)[-m:]])
        for got, w in zip(jax.tree.leaves(agent.params), jax.tree.leaves(want), strict=True):
            np.testing.assert_allclose(np.asarray(got), np.asarray(w), rtol=1e-6, atol=1e-7)
    assert (tmp_path / "avg.md").is_file()
    # the same result as if of trace seed 13 too, pooled (no simulation): the cell means are unchanged, 4 traces each
    doc = json.loads((tmp_path / "avg.json").read_text())
    (tmp_path / "avg13.json").write_text(json.dumps({**doc, "argv": ["--seed", "13"]}))
    (tmp_path / "avg.json").write_text(json.dumps({**doc, "argv": ["--seed", "11"]}))
    pooled = _script().main(["--train-dir", str(tmp_path / "train"), "--agent-seeds", "0", "1", "--average-last",
                             "1", "3", "--pooled", str(tmp_path / "avg.json"), str(tmp_path / "avg13.json"),
                             "--out-agents", str(tmp_path / "pooled"), "--stem", "pooled", "--out", str(tmp_path)])
    assert pooled["chosen"] == m and pooled["rows"][str(m)]["mean"] == pytest.approx(results["rows"][str(m)]["mean"])
    sc = next(iter(pooled["docs"]))
    assert all(len(v) == 4 for v in pooled["docs"][sc]["per_trace"]["s0@avg1"].values())
    with pytest.raises(ValueError, match=r"average_last must be an integer in 1\.\.3"):
        _script().main(["--train-dir", str(tmp_path / "train"), "--agent-seeds", "0", "1", "--average-last", "4",
                        "--out-agents", str(tmp_path / "x")])


def _pool_script():
    return experiment_script("edge_select_pool")


def _select_doc(seed: int, per_trace: dict[str, list[float]]) -> dict:
    """An edge_select.py result of one cell (x, low) with the given per-trace ratios per checkpoint name."""
    return {"argv": ["--seed", str(seed)], "scores": {n: {} for n in per_trace},
            "docs": {"x": {"loads": ["low"], "per_trace": {n: {"low": v} for n, v in per_trace.items()}}}}


def test_pooling_concatenates_the_traces_of_every_selection_seed_and_chooses_on_them(tmp_path):
    """On seed 11 alone s0@2 leads s0@4 (1.0 vs 0.75); seed 13's traces reverse it (pooled 0.625 vs 0.75). The
    pooled per-trace lists are seed 11's then seed 13's. Own choice: s0@4, s1@2 (0.875), spread 0.125; the joint
    choice is s0@2 with s1@4 (both 0.625, spread 0). A seed run twice, a checkpoint missing from a seed and the
    validation seed are one-line errors."""
    module = _pool_script()
    a = _select_doc(11, {"s0@2": [1.0, 1.0], "s0@4": [0.75, 0.75], "s1@2": [0.75, 0.75], "s1@4": [0.75, 0.75]})
    b = _select_doc(13, {"s0@2": [0.25, 0.25], "s0@4": [0.75, 0.75], "s1@2": [1.0, 1.0], "s1@4": [0.5, 0.5]})
    traces, seeds = module.pool([a, b])
    assert seeds == [11, 13] and traces["s0@2"][("x", "low")] == [1.0, 1.0, 0.25, 0.25]
    files = []
    for i, d in enumerate((a, b)):
        files.append(tmp_path / f"{i}.json")
        files[-1].write_text(json.dumps(d))
    res = module.main([str(f) for f in files] + ["--stem", "pool", "--out", str(tmp_path)])
    assert res["own"] == ["s0@4", "s1@2"] and res["joint"] == ["s0@2", "s1@4"]
    assert res["average"]["s1@2"] == 0.875
    with pytest.raises(ValueError, match="two runs of trace seed 11"):
        module.pool([a, a])
    with pytest.raises(ValueError, match="not of all"):
        module.pool([a, _select_doc(13, {"s0@2": [0.5, 0.5]})])
    with pytest.raises(ValueError, match="--seed 7 is the"):
        module.pool([_select_doc(7, {"s0@2": [0.5, 0.5]})])


def test_pooled_average_results_concatenate_the_traces_of_each_seed():
    """Two edge_average.py results (trace seeds 13 and 11, given in that order): the pooled per-trace lists are seed
    11's then 13's and the cell mean is over all four; the same seed twice and the validation seed are refused."""
    module = _script()

    def result(seed, ref, agent):
        return {"argv": ["--seed", str(seed)], "docs": {"x": {"loads": ["low"], "per_trace": {
            "fastest_expected": {"low": ref}, "s0@avg2": {"low": agent}}}}}

    docs, seeds = module.pool_docs([result(13, [0.5, 0.5], [0.25, 0.25]), result(11, [1.0, 1.0], [1.0, 0.5])],
                                   ["s0@avg2"])
    assert seeds == [11, 13]
    assert docs["x"]["per_trace"]["s0@avg2"]["low"] == [1.0, 0.5, 0.25, 0.25]
    assert docs["x"]["mean"]["s0@avg2"]["low"] == 0.5 and docs["x"]["mean"]["fastest_expected"]["low"] == 0.75
    with pytest.raises(ValueError, match="same trace seed twice"):
        module.pool_docs([result(13, [0.5], [0.5]), result(13, [0.5], [0.5])], ["s0@avg2"])
    with pytest.raises(ValueError, match="--seed 7 is the"):
        module.pool_docs([result(7, [0.5], [0.5])], ["s0@avg2"])
    with pytest.raises(ValueError, match="has no s1@avg2"):
        module.pool_docs([result(11, [0.5], [0.5])], ["s1@avg2"])
