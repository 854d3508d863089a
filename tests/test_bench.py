"""respect-bench's many-graphs and order-training benchmarks (respect_jax/benchmarks), in tiny settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_hw

import respect_jax.benchmarks.order as order_bench
import respect_jax.policy.solver
from respect_jax.benchmarks.order import OrderTrainBenchConfig, bench_order_train
from respect_jax.benchmarks.policy import bench_many
from respect_jax.graphs import GeneratorConfig
from respect_jax.policy.order_solver import DEFAULT_ORDER_CHECKPOINT

BIN = Path(sys.executable).parent
TINY_NET = {"encoder": "gat", "layers": 1, "width": 8, "heads": 2, "head_layers": 1}


def run(args, cwd):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([str(BIN / "respect-bench"), *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=300)


def test_order_train_times_the_trainer_step_per_size(monkeypatch):
    """graphs/s comes from the trainer's own step: one compiling step, then steps x repeats timed ones per size,
    each on a batch of the size's bucket; graphs/s = steps x batch / best epoch."""
    calls = []
    make_step = order_bench.make_train_step

    def counting(optimizer):
        step = make_step(optimizer)

        def wrapped(model, opt, graphs, feats, context, targets):
            calls.append(feats.shape)
            return step(model, opt, graphs, feats, context, targets)

        return wrapped

    monkeypatch.setattr(order_bench, "make_train_step", counting)
    config = OrderTrainBenchConfig(nodes=(24, 40), mode="arch", pool=3, batch_size=2, steps=2, repeats=2, lr=1e-3,
                                   policy=TINY_NET)
    out = bench_order_train(config, make_hw(3), "latency")
    assert [shape[:2] for shape in calls] == [(2, 32)] * 5 + [(2, 64)] * 5
    assert out["policy"] == TINY_NET and out["stages"] == 3 and out["objective"] == "latency"
    for nodes, bucket in (("24", 32), ("40", 64)):
        r = out["rows"][nodes]
        assert r["nodes"] == int(nodes) and r["bucket_nodes"] == bucket and r["batch_size"] == 2
        assert r["graphs_per_s"] >= r["graphs_per_s_median"] > 0 and r["compile_s"] >= 0
        assert r["graphs_per_s"] == pytest.approx(2 * 1000 / r["step_ms"])


def test_bench_many_rows_are_the_shipped_order_policy_greedy_and_default():
    """Each row schedules the generated graphs with run_solver_many (the shipped order policy), deterministic
    across calls; the default row is solver=policy's default decoding (its sampled orders, polished)."""
    graphs = GeneratorConfig(mode="arch", min_nodes=24, max_nodes=24)
    rows = bench_many(DEFAULT_ORDER_CHECKPOINT, make_hw(4), "paper", 1.0, graphs, 3, 2, 1,
                      decodings={"greedy": {"decoding": "greedy"}, "default": {}})
    samples = respect_jax.policy.solver.ORDER_DEFAULT_SAMPLES
    polished = "+ls" if respect_jax.policy.solver.ORDER_DEFAULT_LOCAL_SEARCH else ""  # it polishes its best split
    assert rows["greedy"]["decoding"] == "greedy" and rows["default"]["decoding"] == f"sample_{samples}{polished}"
    for r in rows.values():
        assert r["graphs"] == 3 and r["nodes_min"] == r["nodes_max"] == 24 and r["buckets"][0][0] == 32
        assert r["graphs_per_s"] >= r["graphs_per_s_median"] > 0 and r["schedule_ms_mean"] > 0
        assert r["first_call_s"] >= r["compile_s"] >= 0 and r["threads"] >= 1
    assert rows["default"]["mean_objective"] <= rows["greedy"]["mean_objective"] * (1 + 1e-6)


def test_respect_bench_order_train_writes_its_section(tmp_path):
    args = ["benchmarks=[order_train]", "order_train.nodes=[24]", "order_train.pool=2", "order_train.batch_size=2",
            "order_train.steps=1", "order_train.repeats=1", "order_train.policy.layers=1", "order_train.policy.width=8",
            "order_train.policy.heads=2", "out_name=bench_order_train"]
    proc = run([*args, f"out_dir={tmp_path}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "bench_order_train.json").read_text())
    assert "many" not in result and len(result["load_before"]) == 3
    row = result["order_train"]["rows"]["24"]
    assert row["bucket_nodes"] == 32 and row["graphs_per_s"] > 0 and row["compile_s"] >= 0
    markdown = (tmp_path / "bench_order_train.md").read_text()
    assert "## Order policy training" in markdown and "| 24 | 32 |" in markdown
    proc = run([*args, "order_train.nodes=[24,0]", f"out_dir={tmp_path / 'bad'}"], tmp_path)
    assert proc.returncode != 0 and "order_train.nodes must hold integers >= 1, got 0" in proc.stderr, proc.stderr
    assert not (tmp_path / "bad").exists()
