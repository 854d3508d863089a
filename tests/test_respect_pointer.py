"""The RESPECT-faithful pointer baseline: valid schedules after repair on every bundled model, the
bisection packing, RESPECT's cosine cost against NumPy, a short learning run through the real
``respect-train policy=respect_pointer`` config, and its run folder used by the solver and respect-eval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_hw
from flax import nnx
from test_train import compose_cfg, write_tiny_dataset

from respect_jax.graphs import GeneratorConfig, generate_dataset, load_graph, stack_graphs, unstack_positions
from respect_jax.policy.decoding import Decoding
from respect_jax.reference import reference_metrics
from respect_jax.respect_pointer import PointerConfig
from respect_jax.respect_pointer.decoding import make_decoder
from respect_jax.respect_pointer.features import respect_features
from respect_jax.respect_pointer.model import PointerNetwork
from respect_jax.respect_pointer.packing import bisect_cap, next_fit
from respect_jax.respect_pointer.reward import cosine_cost

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TINY = PointerConfig(hidden=32, embedding=32)
TINY_OVERRIDES = ["policy.hidden=32", "policy.embedding=32"]


def test_schedules_after_repair_are_valid_on_every_bundled_model():
    """An untrained tiny pointer, greedy + packing + repair: valid (SPEC) on all 17 bundled models, K = 4."""
    graphs = [load_graph(p) for p in sorted((ROOT / "data" / "models").glob("*.json"))]
    assert len(graphs) >= 17
    hw = make_hw(4)
    batch = stack_graphs(graphs)  # one common bucket: one compilation
    run, params = make_decoder(PointerNetwork(TINY, rngs=nnx.Rngs(0)), hw, "paper", 1.0, Decoding("greedy"))
    for strategy in ("beam", "sbs"):
        with pytest.raises(ValueError, match=f"{strategy} is not available"):
            make_decoder(PointerNetwork(TINY, rngs=nnx.Rngs(0)), hw, "paper", 1.0, Decoding(strategy, samples=4))
    out = jax.device_get(run(params, batch, jax.random.PRNGKey(0)))
    assert np.all(out.valid)
    for g, assignment, obj in zip(graphs, unstack_positions(batch, out.stage), out.objective, strict=True):
        check = reference_metrics(g, assignment, hw)  # plain loops, independent of the jnp evaluator
        assert check["valid"], g.name
        assert check["peak_mem_bytes"] + check["comm_bytes"] == pytest.approx(float(obj), rel=1e-5), g.name


def test_loader_restores_the_concrete_builds_parameters():
    """The shipped checkpoint loaded into an abstract skeleton (``nnx.eval_shape``, no initialisers run) has every
    parameter of the concrete build's restore, bit for bit, and none is left a shape placeholder."""
    from respect_jax.policy.checkpoints import load_network
    from respect_jax.respect_pointer.checkpoints import load_pointer
    from respect_jax.respect_pointer.solver import DEFAULT_CHECKPOINT

    def concrete(doc):
        return PointerNetwork(PointerConfig.from_dict(doc["policy"]), rngs=nnx.Rngs(0))

    def read(run_dir):
        return json.loads((run_dir / "network.json").read_text())

    loaded, doc = load_pointer(DEFAULT_CHECKPOINT)
    reference, ref_doc = load_network(DEFAULT_CHECKPOINT, None, read, concrete)
    assert doc["step"] == ref_doc["step"]
    got, want = nnx.state(loaded), nnx.state(reference)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert isinstance(x, jax.Array), type(x)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    initial = jax.tree.leaves(nnx.state(concrete(doc)))  # the restore replaced the random initialisation
    pairs = zip(initial, jax.tree.leaves(got), strict=True)
    assert any(not np.array_equal(np.asarray(a), np.asarray(b)) for a, b in pairs)


def _numpy_next_fit(w: np.ndarray, cap: float) -> np.ndarray:
    stages, k, load = [], 0, 0.0
    for x in w:
        if load + x > cap and load > 0:
            k, load = k + 1, 0.0
        load += x
        stages.append(k)
    return np.asarray(stages)


def test_bisection_packing_respects_the_cap_and_is_tight():
    """Stage params <= the found cap (unless one node), <= K stages; a 0.1% smaller cap needs > K stages."""
    rng = np.random.default_rng(0)
    graphs = generate_dataset(GeneratorConfig(min_nodes=12, max_nodes=30), 16, seed=4)
    batch = stack_graphs(graphs)
    orders = np.stack([np.concatenate([rng.permutation(g.num_nodes), np.arange(g.num_nodes, 32)]) for g in graphs])
    pack = jax.jit(jax.vmap(bisect_cap, in_axes=(0, 0, None)))  # K traced: one compilation
    for k in (2, 4, 6):
        stage, cap = pack(batch, jnp.asarray(orders, jnp.int32), k)
        stage, cap = np.asarray(stage), np.asarray(cap, np.float64)
        for i, g in enumerate(graphs):
            n = g.num_nodes
            params = np.asarray(batch.params[i, :n], np.float64)
            s = stage[i, :n]
            assert s.min() >= 0 and s.max() < k
            assert np.all(np.diff(s[orders[i, :n]]) >= 0)  # stages are contiguous runs of the order
            for j in range(k):
                members = s == j
                if members.sum() > 1:
                    assert params[members].sum() <= cap[i] * (1 + 1e-5), (i, k, j)
            assert cap[i] >= max(params.sum() / k, params.max()) * (1 - 1e-5)
            w = params[orders[i, :n]]
            assert _numpy_next_fit(w, cap[i] * (1 + 1e-5)).max() < k
            assert _numpy_next_fit(w, cap[i] * (1 - 1e-3)).max() >= k  # the cap is the smallest feasible one
    # a node larger than the cap gets a stage to itself
    stages, used = next_fit(jnp.asarray([1.0, 5.0, 1.0, 1.0]), jnp.float32(2.0))
    assert np.asarray(stages).tolist() == [0, 1, 2, 2] and int(used) == 3


def test_cosine_cost_matches_numpy():
    """1 - cos(labels+1 in output order, sorted labels+1) with padding after the real nodes."""
    rng = np.random.default_rng(1)
    cost = jax.jit(cosine_cost)
    for _ in range(20):
        n_pad, n = 16, int(rng.integers(2, 16))
        labels = np.zeros(n_pad, np.int32)
        labels[:n] = rng.integers(0, 4, n)
        order = np.concatenate([rng.permutation(n), np.arange(n, n_pad)])
        mask = np.arange(n_pad) < n
        x = labels[order][:n] + 1.0
        y = np.sort(labels[:n]) + 1.0
        expected = 1.0 - x @ y / max(np.linalg.norm(x) * np.linalg.norm(y), 1e-6)
        got = float(cost(jnp.asarray(labels), jnp.asarray(order), jnp.asarray(mask)))
        assert got == pytest.approx(expected, abs=1e-6)
    sorted_order = np.concatenate([np.argsort(labels[:n], stable=True), np.arange(n, n_pad)])
    assert float(cosine_cost(jnp.asarray(labels), jnp.asarray(sorted_order), jnp.asarray(mask))) == pytest.approx(
        0.0, abs=1e-6
    )


def test_features_have_respect_layout():
    """15 columns: level, 6 pred levels, 6 pred ids, id, weight; padding rows are zero."""
    g = generate_dataset(GeneratorConfig(min_nodes=20, max_nodes=20), 1, seed=7)[0]
    padded = stack_graphs([g])
    f = np.asarray(respect_features(jax.tree.map(lambda x: x[0], padded)))
    assert f.shape == (32, 15) and np.all(f[20:] == 0)
    depth = g.depth()  # generated ids are SPEC positions
    np.testing.assert_allclose(f[:20, 0], (depth + 1) / (depth.max() + 1), rtol=1e-6)
    np.testing.assert_allclose(f[:20, 13], (np.arange(20) + 1) / 20, rtol=1e-6)
    np.testing.assert_allclose(f[:20, 14], g.params / g.params.max(), rtol=1e-6)
    preds = g.predecessors()
    for v in range(20):
        near = sorted(preds[v], reverse=True)[:6]
        np.testing.assert_allclose(f[v, 7 : 7 + len(near)], (np.asarray(near) + 1) / 20, rtol=1e-6)
        assert np.all(f[v, 7 + len(near) : 13] == 0)


# ---------------------------------------------------------------- respect-train policy=respect_pointer


def pointer_overrides(run_dir: Path, dataset: Path, steps: int = 40) -> list[str]:
    hw = make_hw(3).to_dict()
    return [
        "policy=respect_pointer",
        "algorithm=reinforce",
        f"run_dir={run_dir}",
        f"datasets=[{dataset}]",
        "progress=false",
        f"train.steps={steps}",
        "train.steps_per_epoch=10",
        "train.checkpoint_every=20",
        f"train.eval_every={steps}",
        "train.eval_graphs=0",
        "train.batch_size=24",
        "policy.lr=3e-3",
        "policy.bl_warmup_epochs=0",
        "policy.bl_eval_graphs=24",
        *TINY_OVERRIDES,
        *[f"hardware.{k}={v}" for k, v in hw.items()],
    ]


@pytest.fixture(scope="module")
def pointer_run(tmp_path_factory):
    """A 40-step respect-train run of a tiny pointer (in-process, through the Hydra config)."""
    from respect_jax.cli.train import train

    root = tmp_path_factory.mktemp("pointer")
    dataset = root / "tiny_labels"
    write_tiny_dataset(dataset, 24, seed=5)
    cfg = compose_cfg("train", pointer_overrides(root / "run", dataset))
    summary = train(cfg)
    return root, dataset, summary


def test_baseline_test_draws_keys_apart_from_every_update_step():
    """The baseline test after step s must not reuse a key of the updates around it (with partitionable
    threefry, ``split(k)[1] == fold_in(k, 1)``, which the first version of the trainer collided with)."""
    from respect_jax.respect_pointer.train import baseline_test_key, step_keys

    key = jax.random.PRNGKey(7)
    update = {tuple(np.asarray(k).tolist()) for s in range(40) for k in step_keys(key, jnp.int32(s))}
    tests = {tuple(np.asarray(baseline_test_key(key, jnp.int32(s))).tolist()) for s in range(40)}
    assert len(update) == 80 and len(tests) == 40
    assert not update & tests


def test_respect_train_dispatch_trains_and_reward_improves(pointer_run):
    """policy=respect_pointer runs its own loop; the greedy cosine cost on the training graphs drops."""
    root, _, summary = pointer_run
    run = root / "run"
    assert summary["step"] == 40
    doc = json.loads((run / "network.json").read_text())
    assert doc["kind"] == "respect_pointer" and doc["policy"]["hidden"] == 32
    assert sorted(int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit())[-1] == 40
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [10, 20, 30, 40]
    # bl_eval_graphs covers the whole set: the baseline test measures the same 24 graphs every epoch
    initial = metrics[0]["bl_value"]  # the baseline starts as the initial network
    final = metrics[-1]["bl_candidate"]
    assert final < 0.7 * initial, (initial, final)
    assert any(m["bl_replaced"] for m in metrics)


@pytest.mark.slow
def test_respect_eval_uses_the_run_folder(pointer_run, tmp_path):
    """respect-eval dispatches on network.json and rebuilds the pointer from the run folder."""
    from respect_jax.cli.eval import evaluate
    from respect_jax.respect_pointer.checkpoints import checkpoint_kind, load_pointer

    root, dataset, _ = pointer_run
    run = root / "run"
    assert checkpoint_kind(run) == "respect_pointer"
    model, doc = load_pointer(run)
    assert doc["step"] == 40 and model.cfg.hidden == 32
    cfg = compose_cfg(
        "eval",
        [f"checkpoint={run}", f"dataset={dataset}", "decodings=[greedy]", "baselines=[]", "limit=8", "progress=false"],
    )
    out = evaluate(cfg)
    agg = out["aggregate"]["greedy"]
    assert out["checkpoint_step"] == 40 and agg["valid_pct"] == 100.0 and agg["gap_mean_pct"] >= -1e-4


def test_bad_pointer_config_is_one_line_error(tmp_path):
    from respect_jax.cli.train import train

    dataset = tmp_path / "none"
    for extra, message in (
        (["algorithm=imitation"], "algorithm=reinforce only"),
        (["+policy.bogus=1"], "unknown policy option"),
        (["policy.reward=lol"], "policy.reward must be one of"),
    ):
        cfg = compose_cfg("train", [*pointer_overrides(tmp_path / "r", dataset), *extra])
        with pytest.raises(ValueError, match=message):
            train(cfg)


@pytest.mark.slow
def test_cli_schedule_and_resume(pointer_run, tmp_path):
    """respect-schedule solver=respect_pointer on a real model; a resumed run reaches the same parameters."""
    from respect_jax.respect_pointer.checkpoints import load_pointer

    root, dataset, _ = pointer_run
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    out = tmp_path / "r.json"
    cmd = [
        str(BIN / "respect-schedule"),
        "graph=data/models/vgg16.json",
        "solver=respect_pointer",
        f"solver.options.checkpoint={root / 'run'}",
        "hardware.stages=4",
        f"out={out}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["solver"] == "respect_pointer"
    assert len(result["assignment"]) == load_graph(ROOT / "data/models/vgg16.json").num_nodes
    # resume: 20 steps, then the same command with 40 steps, equals the uninterrupted run
    from respect_jax.cli.train import train

    part = tmp_path / "part"
    train(compose_cfg("train", pointer_overrides(part, dataset, steps=20)))
    train(compose_cfg("train", pointer_overrides(part, dataset, steps=40)))
    a, _ = load_pointer(root / "run")
    b, _ = load_pointer(part)
    for x, y in zip(jax.tree.leaves(nnx.state(a)), jax.tree.leaves(nnx.state(b)), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)
