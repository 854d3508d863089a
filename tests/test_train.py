"""Training machinery: one compilation per bucket, data-parallel = single device, exact resume after
SIGKILL, the respect-train / respect-eval command lines and the launcher presets."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from conftest import make_hw, random_valid_schedule
from flax import nnx
from hydra import compose, initialize_config_dir
from test_train_learning import exact_paper_schedule

from respect_jax.cli.common import CONF_DIR
from respect_jax.graphs import GeneratorConfig, generate_dataset
from respect_jax.labels.dataset import LabelledGraph, write_manifest, write_shard
from respect_jax.policy.config import PolicyConfig
from respect_jax.train.checkpoints import average_checkpoints, checkpoint_label, load_policy
from respect_jax.train.config import AlgorithmConfig, TrainConfig
from respect_jax.train.data import make_batches
from respect_jax.train.harness import without_timing
from respect_jax.train.loop import Trainer

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TINY = PolicyConfig(width=16, decoder_width=16, layers=1, decoder_layers=1, heads=2)
TINY_OVERRIDES = [
    "policy.width=16",
    "policy.decoder_width=16",
    "policy.layers=1",
    "policy.decoder_layers=1",
    "policy.heads=2",
]


def labelled_batches(sizes, count, seed, stages=3):
    """Random valid labels on generated graphs, grouped per size bucket."""
    rng = np.random.default_rng(seed)
    graphs = []
    for i, (lo, hi) in enumerate(sizes):
        graphs += generate_dataset(GeneratorConfig(min_nodes=lo, max_nodes=hi), count, seed=seed + i)
    labels = [random_valid_schedule(g, stages, rng) for g in graphs]
    return [b for b, _ in make_batches(graphs, labels, [1.0] * len(graphs))]


def test_update_step_compiles_once_per_bucket():
    """Two size buckets visited alternately: the update step is traced exactly once for each."""
    hw = make_hw(3)
    buckets = labelled_batches([(8, 20), (40, 50)], 12, seed=0)
    assert [b.graphs.params.shape[-1] for b in buckets] == [32, 64]
    tcfg = TrainConfig(steps=10, batch_size=8, steps_per_epoch=2, checkpoint_every=10, eval_every=10, eval_graphs=0)
    trainer = Trainer(TINY, hw, "paper", 1.0, AlgorithmConfig("imitation"), tcfg, datasets=buckets)
    state = trainer.init_state()
    visited = []
    for _ in range(5):
        state, metrics, phase, bucket = trainer.run_epoch(state)
        visited.append(bucket)
        assert np.isfinite(metrics["loss"])
    assert visited == [0, 1, 0, 1, 0]
    assert dict(trainer.trace_counts) == {("imitation", 0): 1, ("imitation", 1): 1}


def test_resuming_a_run_folder_with_another_network_is_refused(tmp_path):
    """A run folder resumes only with the network that wrote its checkpoints (a sweep sharing one run_dir, a
    changed width): one clear error, and network.json keeps describing the checkpoints."""
    hw = make_hw(3)
    # the first bucket and the update epoch of test_update_step_compiles_once_per_bucket: the same compiled program
    buckets = labelled_batches([(8, 20)], 12, seed=0)
    tcfg = TrainConfig(steps=2, batch_size=8, steps_per_epoch=2, checkpoint_every=2, eval_every=2, eval_graphs=0)
    Trainer(TINY, hw, "paper", 1.0, AlgorithmConfig("imitation"), tcfg, datasets=buckets).fit(
        tmp_path, progress=False, log=lambda _: None
    )
    before = (tmp_path / "network.json").read_text()
    wider = PolicyConfig(width=32, decoder_width=16, layers=1, decoder_layers=1, heads=2)
    longer = TrainConfig(steps=4, batch_size=8, steps_per_epoch=2, checkpoint_every=2, eval_every=4, eval_graphs=0)
    with pytest.raises(ValueError, match="holds checkpoints of another network \\(policy differ"):
        Trainer(wider, hw, "paper", 1.0, AlgorithmConfig("imitation"), longer, datasets=buckets).fit(
            tmp_path, progress=False, log=lambda _: None
        )
    assert (tmp_path / "network.json").read_text() == before
    # a damaged metrics line is named, and the folder (config.yaml, metrics.jsonl) is left as it was
    metrics = tmp_path / "metrics.jsonl"
    good = metrics.read_text()
    metrics.write_text(good + '{"step": 4, "loss": \n')
    snapshot = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    same = Trainer(TINY, hw, "paper", 1.0, AlgorithmConfig("imitation"), longer, datasets=buckets)
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2: not a JSON metrics record"):
        same.fit(tmp_path, progress=False, log=lambda _: None, resolved_config="changed: true\n")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == snapshot
    metrics.write_text(good + '{"step": 4, "lo')  # a write cut by a kill: dropped, the run resumes
    resumed = same.fit(tmp_path, progress=False, log=lambda _: None, resolved_config="train:\n  lr: 0.001\n")
    assert int(resumed.state.step) == 4
    assert [json.loads(x)["step"] for x in metrics.read_text().splitlines()] == [2, 4]
    # resuming (here: a finished run) with another config keeps the run's config.yaml and says so
    notes = []
    same.fit(tmp_path, progress=False, log=notes.append, resolved_config="train:\n  lr: 0.05\n")
    assert (tmp_path / "config.yaml").read_text() == "train:\n  lr: 0.001\n"
    assert (tmp_path / "config.resumed_4.yaml").read_text() == "train:\n  lr: 0.05\n"
    assert any("differs in train.lr; config.yaml keeps the run's" in n for n in notes), notes


SHARDING_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax, numpy as np
    sys.path.insert(0, {tests!r})
    from conftest import make_hw
    from test_train import TINY, labelled_batches
    from respect_jax.graphs import GeneratorConfig
    from respect_jax.train.config import AlgorithmConfig, TrainConfig
    from respect_jax.train.loop import Trainer
    from respect_jax.train.sharding import make_mesh

    assert len(jax.devices()) == 2, jax.devices()
    hw = make_hw(3)
    data = labelled_batches([(8, 20)], 16, seed=1)
    algo = AlgorithmConfig.from_dict(
        {{"name": "imitation_then_reinforce", "imitation_steps": 2, "reinforce": {{"samples": 2}}}}
    )
    tcfg = TrainConfig(steps=4, batch_size=8, steps_per_epoch=2, checkpoint_every=4, eval_every=4, eval_graphs=0)
    out = {{}}
    for name, devices in (("one", jax.devices()[:1]), ("two", jax.devices())):
        trainer = Trainer(TINY, hw, "paper", 1.0, algo, tcfg, generators=[GeneratorConfig(min_nodes=8, max_nodes=14)],
                          datasets=data, mesh=make_mesh(devices))
        state = trainer.init_state()
        metrics = []
        while int(state.step) < tcfg.steps:
            state, m, phase, _ = trainer.run_epoch(state)
            metrics.append(m)
        shardings = {{str(x.sharding) for x in jax.tree.leaves(state.params)}}
        out[name] = {{"params": [np.asarray(x).ravel().tolist() for x in jax.tree.leaves(state.params)],
                     "metrics": metrics, "devices": len(trainer.mesh.devices.ravel())}}
    print("RESULT" + json.dumps(out))
    """
)


def test_two_device_data_parallel_matches_one_device(tmp_path):
    """imitation + REINFORCE steps on a 2-device CPU mesh give the 1-device parameters (float tolerance)."""
    script = tmp_path / "shard.py"
    script.write_text(SHARDING_SCRIPT.format(tests=str(ROOT / "tests")))
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2",
    }
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert out["one"]["devices"] == 1 and out["two"]["devices"] == 2
    for a, b in zip(out["one"]["params"], out["two"]["params"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for m1, m2 in zip(out["one"]["metrics"], out["two"]["metrics"], strict=True):
        for key in m1:
            assert m1[key] == pytest.approx(m2[key], rel=1e-4, abs=1e-5), key


# ---------------------------------------------------------------- run folders: kill, resume, eval


def write_tiny_dataset(directory: Path, count: int, seed: int, nodes=(8, 10)) -> None:
    """A labelled dataset (exact optimal labels, brute force) in the respect-label format."""
    hw = make_hw(3)
    graphs = generate_dataset(GeneratorConfig(min_nodes=nodes[0], max_nodes=nodes[1]), count, seed=seed)
    items = []
    for i, g in enumerate(graphs):
        assignment, objective = exact_paper_schedule(g, hw)
        items.append(LabelledGraph(i, g, assignment, objective, True, 0.0, 0.0, "brute_force"))
    write_shard(directory, 0, items)
    write_manifest(directory, {"hardware": hw.to_dict(), "objective": "paper", "lam": 1.0, "count": count})


def train_overrides(run_dir: Path, dataset: Path) -> list[str]:
    hw = make_hw(3).to_dict()
    return [
        f"run_dir={run_dir}",
        f"datasets=[{dataset}]",
        "algorithm=imitation",
        "progress=false",
        "train.steps=8",
        "train.steps_per_epoch=2",
        "train.checkpoint_every=2",
        "train.eval_every=8",
        "train.batch_size=8",
        "train.max_to_keep=10",
        f"eval_dataset={dataset}",
        *TINY_OVERRIDES,
        *[f"hardware.{k}={v}" for k, v in hw.items()],
    ]


def compose_cfg(config_name: str, overrides: list[str], **kw):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name=config_name, overrides=overrides, **kw)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """An uninterrupted 8-step run (in-process) and its Trainer (compiled epochs reused by resume)."""
    from omegaconf import OmegaConf

    from respect_jax.cli.train import build_trainer

    root = tmp_path_factory.mktemp("runs")
    dataset = root / "tiny_labels"
    write_tiny_dataset(dataset, 24, seed=5)
    cfg = compose_cfg("train", train_overrides(root / "full", dataset))
    trainer = build_trainer(cfg)
    result = trainer.fit(root / "full", resolved_config=OmegaConf.to_yaml(cfg), progress=False)
    return root, dataset, trainer, result


def read_metrics(run_dir: Path) -> list[dict]:
    return [without_timing(json.loads(x)) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def kill_when_checkpointed(cmd: list[str], env: dict, cwd: Path, checkpoint: Path, timeout: float = 900) -> int:
    """Run ``cmd`` and SIGKILL it from outside as soon as the (committed) checkpoint folder ``checkpoint``
    exists; returns the exit status (-9 when killed)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and not checkpoint.is_dir() and time.monotonic() < deadline:
            time.sleep(0.005)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_killed_run_resumes_to_identical_parameters_and_metrics(trained_run):
    """respect-train SIGKILLed from outside once its step-4 checkpoint is written (before the end: the step-8
    evaluation compiles for seconds), then resumed: the same end state as the uninterrupted run."""
    root, dataset, trainer, full = trained_run
    killed = root / "killed"
    cmd = [str(BIN / "respect-train"), *train_overrides(killed, dataset)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    assert kill_when_checkpointed(cmd, env, root, killed / "checkpoints" / "4") == -signal.SIGKILL
    steps = sorted(int(p.name) for p in (killed / "checkpoints").iterdir() if p.name.isdigit())
    assert steps[:2] == [2, 4] and max(steps) < 8, steps  # killed mid-run
    assert (killed / "network.json").is_file() and (killed / "config.yaml").is_file()
    resumed = trainer.fit(killed, resume=True, progress=False)
    assert int(resumed.state.step) == 8
    for a, b in zip(jax.tree.leaves(full.state.params), jax.tree.leaves(resumed.state.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
    for a, b in zip(jax.tree.leaves(full.state.opt_state), jax.tree.leaves(resumed.state.opt_state), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
    full_metrics, resumed_metrics = read_metrics(root / "full"), read_metrics(killed)
    assert [m["step"] for m in resumed_metrics] == [2, 4, 6, 8]
    assert len(full_metrics) == len(resumed_metrics)
    for a, b in zip(full_metrics, resumed_metrics, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], float):
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-6), key
    # a finished run folder is not overwritten by a fresh (resume=false) run
    with pytest.raises(ValueError, match="already holds checkpoints"):
        trainer.fit(killed, resume=False, progress=False)


def test_eval_rebuilds_policy_from_run_folder(trained_run, tmp_path):
    """respect-eval: per-graph + aggregate objective, gap to the oracle, % optimal, 100% valid, JSON + Markdown."""
    from respect_jax.cli.eval import evaluate, markdown

    root, dataset, _, _ = trained_run
    cfg = compose_cfg(
        "eval",
        [f"checkpoint={root / 'full'}", f"dataset={dataset}", "samples=4", "batch_size=8", "progress=false"]
        + ["decodings=[greedy,best_of,beam,sbs]", "baselines=[compiler,greedy]"],
    )
    doc = evaluate(cfg)
    assert doc["graphs"] == 24 and doc["reference"] == "oracle" and doc["checkpoint_step"] == 8
    # the greedy solver keeps its own row beside the policy's greedy decoding
    assert set(doc["aggregate"]) == {"greedy", "best_of_4", "beam_4", "sbs_4", "compiler", "solver_greedy"}
    assert "compile_s" in doc["aggregate"]["greedy"] and "compile_s" not in doc["aggregate"]["solver_greedy"]
    for method, agg in doc["aggregate"].items():
        assert agg["valid_pct"] == 100.0, method
        assert agg["gap_mean_pct"] >= -1e-4, method  # nothing beats a proven optimum
    assert doc["aggregate"]["best_of_4"]["gap_mean_pct"] <= doc["aggregate"]["greedy"]["gap_mean_pct"] + 1e-4
    row = doc["per_graph"][0]
    assert row["reference_optimal"] and {"objective", "gap", "valid", "time_s"} <= set(row["greedy"])
    assert "| greedy |" in markdown(doc) and "(step 8)" in markdown(doc)


def test_init_from_starts_from_the_trained_parameters_and_architecture(trained_run):
    """``init_from=<run folder>``: the new run's step-0 parameters are the folder's latest ones and its
    architecture comes from the folder's network.json (the policy group is ignored)."""
    from respect_jax.cli.train import build_trainer

    root, _, _, _ = trained_run
    source, doc = load_policy(root / "full")
    wider = [o.replace("policy.width=16", "policy.width=32") for o in TINY_OVERRIDES]
    cfg = compose_cfg(
        "train",
        [f"run_dir={root / 'fine'}", f"init_from={root / 'full'}", "algorithm=self_improvement", *wider]
        + [f"hardware.{k}={v}" for k, v in make_hw(3).to_dict().items()],
    )
    trainer = build_trainer(cfg)
    assert trainer.policy_cfg.to_dict() == doc["policy"] and trainer.policy_cfg.width == TINY.width
    state = trainer.init_state()
    want = jax.tree.leaves(nnx.split(source)[1])
    got = jax.tree.leaves(state.params)
    assert len(want) == len(got)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert int(state.step) == 0


def test_average_checkpoints_writes_the_mean_parameters(trained_run, tmp_path):
    """Weight averaging: the new run folder loads as a policy whose parameters are the leaf-wise mean of
    the sources'; bad input (one source, a used folder, another network) is an error that writes nothing."""
    root, _, _, _ = trained_run
    steps = sorted(int(p.name) for p in (root / "full" / "checkpoints").iterdir() if p.name.isdigit())[-2:]
    sources = [root / "full" / "checkpoints" / str(s) for s in steps]
    doc = average_checkpoints(sources, tmp_path / "soup")
    assert [a["step"] for a in doc["averaged_from"]] == steps
    soup, soup_doc = load_policy(tmp_path / "soup")
    assert soup_doc["step"] == 0 and soup_doc["policy"] == load_policy(sources[0])[1]["policy"]
    assert checkpoint_label(soup_doc) == f"the average of 2 checkpoints: full {steps[0]}, full {steps[1]}"
    assert checkpoint_label(load_policy(sources[0])[1]) == f"step {steps[0]}"
    leaves = [jax.tree.leaves(nnx.split(load_policy(s)[0])[1]) for s in sources]
    got = jax.tree.leaves(nnx.split(soup)[1])
    assert any(not np.array_equal(a, b) for a, b in zip(*leaves, strict=True))  # the sources differ
    for g, a, b in zip(got, *leaves, strict=True):
        np.testing.assert_allclose(np.asarray(g), (np.asarray(a) + np.asarray(b)) / 2, rtol=1e-6, atol=1e-7)
    other = tmp_path / "other"
    shutil.copytree(root / "full", other)
    net = json.loads((other / "network.json").read_text())
    net["lam"] = 2.0
    (other / "network.json").write_text(json.dumps(net))
    with pytest.raises(ValueError, match="differs"):
        average_checkpoints([sources[0], other], tmp_path / "bad")
    with pytest.raises(ValueError, match="at least two"):
        average_checkpoints(sources[:1], tmp_path / "bad")
    with pytest.raises(ValueError, match="not an empty folder"):
        average_checkpoints(sources, tmp_path / "soup")
    assert not (tmp_path / "bad").exists()


def run_cli(args, cwd):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], capture_output=True, text=True, env=env, timeout=300, cwd=cwd
    )


def run_cli_in_process(args, cwd, monkeypatch, capfd):
    """``args`` run by the command's ``main()`` in this process (as its console script would, from ``cwd``):
    (exit status, stderr). The error hooks a reported user error replaces are restored afterwards."""
    from respect_jax.cli import eval as eval_cli
    from respect_jax.cli import train as train_cli

    main = {"respect-train": train_cli.main, "respect-eval": eval_cli.main}[args[0]]
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", list(args))
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    capfd.readouterr()
    with pytest.raises(SystemExit) as exc:
        main()
    code = exc.value.code  # as a process's exit status: None is 0, a message (printed by Python there) is 1
    return (0 if code is None else code if isinstance(code, int) else 1), capfd.readouterr().err


# One error runs the console script in a fresh process (nothing else, e.g. JAX's start-up, prints to stderr there);
# the others run main() in this process, whose stderr (file descriptor 2 included) is read the same way.
IN_A_PROCESS = "needs datasets"


@pytest.mark.parametrize(
    "args, message",
    [
        (["respect-train", "policy=nope"], "unknown policy 'nope'"),
        (["respect-train", "algorithm=imitation", "datasets=[]"], IN_A_PROCESS),
        (["respect-train", "train.steps=7", "train.steps_per_epoch=5"], "multiple of train.steps_per_epoch"),
        (["respect-train", "init_from=/nonexistent", "algorithm=self_improvement"], "not a policy checkpoint"),
        (
            ["respect-train", "policy=respect_pointer", "algorithm=reinforce", "init_from=data/checkpoints/x"],
            "fine-tunes the GNN policy only",
        ),
        (["respect-train", "init_decoder_layers=4"], "set init_from"),
        (["respect-train", "init_cut_heads=4"], "set init_from"),
        (["respect-eval"], "dataset"),
        (["respect-eval", "checkpoint=/nonexistent", "dataset=data/graphs/dnn40.json"], "not a policy checkpoint"),
    ],
)
def test_cli_user_errors_are_one_line(tmp_path, args, message, monkeypatch, capfd):
    if message == IN_A_PROCESS:
        proc = run_cli(args, ROOT)
        code, stderr = proc.returncode, proc.stderr
    else:
        code, stderr = run_cli_in_process(args, ROOT, monkeypatch, capfd)
    assert code != 0
    lines = [x for x in stderr.strip().splitlines() if not x.startswith("WARNING")]
    assert len(lines) == 1 and message in lines[0], stderr


@pytest.mark.parametrize("launcher, target", [("slurm", "SlurmLauncher"), ("local", "JoblibLauncher")])
def test_launcher_presets_compose(launcher, target):
    cfg = compose_cfg("train", [f"hydra/launcher={launcher}"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_.endswith(target)


def test_sweep_jobs_never_share_a_run_folder(trained_run, tmp_path):
    """`respect-train -m`: without run_dir every job trains in <sweep dir>/<job number>; a literal run_dir
    shared by the jobs (the later jobs would silently resume the first one's finished checkpoints) stops
    the second job with one line, leaving the first job's folder as it was."""
    _, dataset, _, _ = trained_run
    skip = ("run_dir=", "train.steps=")
    common = [o for o in train_overrides(tmp_path / "unused", dataset) if not o.startswith(skip)]
    # the jobs differ by their seed: the same compiled update step for every job (an lr is a constant of it)
    sweep = [str(BIN / "respect-train"), "-m", "train.seed=0,1", "train.steps=2", *common]
    out = subprocess.run([*sweep, f"hydra.sweep.dir={tmp_path / 'sweep'}"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    for job in (0, 1):
        folder = tmp_path / "sweep" / str(job)
        assert [r["step"] for r in read_metrics(folder)] == [2]
        config = (folder / "config.yaml").read_text()
        assert yaml.safe_load(config)["train"]["seed"] == job and f"run_dir: {folder}" in config
    assert "resumed" not in out.stderr
    shared = tmp_path / "shared"
    out = subprocess.run([*sweep, f"run_dir={shared}", f"hydra.sweep.dir={tmp_path / 'sweep2'}"], capture_output=True,
                         text=True, cwd=tmp_path, timeout=600)
    assert out.returncode == 1  # Hydra's code for a sweep with a failed job
    errors = [x for x in out.stderr.splitlines() if x.startswith("respect-train: error")]
    assert len(errors) == 1 and errors[0].startswith("respect-train: error in job 1 (")
    assert errors[0].endswith(f"): run_dir={shared} is already the run_dir of job 0 of this sweep; give every job "
                              "its own, e.g. run_dir='runs/sweep_${hydra:job.num}', or do not set run_dir")
    assert yaml.safe_load((shared / "config.yaml").read_text())["train"]["seed"] == 0
    assert [r["step"] for r in read_metrics(shared)] == [2]
    # a preset's per-job run_dir (conf/ablation) is kept
    ablation = [*sweep[:2], *sweep[3:], "+ablation=encoder_depth", "policy.layers=0,1", f"hydra.sweep.dir={tmp_path}/3"]
    out = subprocess.run(ablation, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    folders = sorted(p.name for p in (tmp_path / "runs" / "ablation" / "encoder_depth").iterdir())
    assert folders == ["layers_0", "layers_1"]


def test_multi_process_launch_detection():
    """Multi-process only in an srun step of several tasks (or with all three explicit JAX variables); one task
    per node uses every device of its node (JAX's own SLURM detection would limit it to SLURM_LOCALID's GPU)."""
    from respect_jax.train.sharding import Launch, first_host, multi_process_launch

    step = {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "gpu[007-009,012],cpu1", "SLURM_STEP_NUM_TASKS": "2",
            "SLURM_STEP_NUM_NODES": "2", "SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2"}
    port = 4242 % 4096 + 61440
    assert multi_process_launch(step) == Launch(f"gpu007:{port}", 2, 1, None)
    per_gpu = {**step, "SLURM_STEP_NUM_TASKS": "16", "SLURM_PROCID": "11", "SLURM_LOCALID": "3"}
    assert multi_process_launch({**per_gpu, "JAX_COORDINATOR_PORT": "1234"}) == Launch("gpu007:1234", 16, 11, (3,))
    assert multi_process_launch({}) is None
    salloc = {"SLURM_JOB_ID": "777", "SLURM_NTASKS": "2", "SLURM_NODELIST": "localhost"}  # no srun step: one process
    assert multi_process_launch(salloc) is None
    assert multi_process_launch({**step, "SLURM_STEP_NUM_TASKS": "1"}) is None
    with pytest.raises(ValueError, match="without SLURM_PROCID"):
        multi_process_launch({k: v for k, v in step.items() if k != "SLURM_PROCID"})
    with pytest.raises(ValueError, match="JAX_NUM_PROCESSES and JAX_PROCESS_ID not"):
        multi_process_launch({"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234"})
    explicit = {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "2"}
    assert multi_process_launch(explicit) == Launch("10.0.0.1:1234", 4, 2, None)
    names = ["node001", "node001,host2", "node[001-015],host2", "node[001,007-015],host2", "node[003]"]
    assert [first_host(n) for n in names] == ["node001", "node001", "node001", "node001", "node003"]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


@pytest.mark.slow  # about 280 s on 2 cores (two processes compiling): the default suite keeps the two-device test
def test_two_processes_train_like_one_process_with_two_devices(tmp_path):
    """A 2-task srun step (simulated: the step variables on localhost, one CPU device per process) trains on the
    global 2-device mesh like one process with 2 devices, also across a resume; process 0 alone writes metrics
    (they were written twice) and reports; policy=respect_pointer, which has no mesh, is refused in one line."""
    dataset = tmp_path / "data"
    write_tiny_dataset(dataset, 16, seed=5)
    base = {**os.environ, "JAX_PLATFORMS": "cpu"}
    one = subprocess.run(
        [str(BIN / "respect-train"), *train_overrides(tmp_path / "one", dataset), "train.steps=4"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env={**base, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"},
    )
    assert one.returncode == 0, one.stderr[-2000:]
    step = {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_NUM_TASKS": "2",
            "SLURM_STEP_NUM_NODES": "2", "SLURM_LOCALID": "0", "JAX_COORDINATOR_PORT": str(_free_port()),
            "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    for steps in (2, 4):  # the second launch resumes the first one's checkpoint
        step["JAX_COORDINATOR_PORT"] = str(_free_port())
        procs = [
            subprocess.Popen(
                [str(BIN / "respect-train"), *train_overrides(tmp_path / "two", dataset), f"train.steps={steps}"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                env={**base, **step, "SLURM_PROCID": str(i)},
            )
            for i in range(2)
        ]
        outs = [p.communicate(timeout=600) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
        # process 0 alone reports (Gloo talks too) and logs
        assert f'"step": {steps}' in outs[0][0] and '"run_dir"' not in outs[1][0] and outs[1][1] == ""
    assert "resumed from" in outs[0][1]
    records = [[json.loads(x) for x in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
               for run in ("one", "two")]
    assert [r["step"] for r in records[1]] == [2, 4]
    for a, b in zip(*records, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
    (p1, _), (p2, _) = load_policy(tmp_path / "one"), load_policy(tmp_path / "two")
    for a, b in zip(jax.tree.leaves(nnx.state(p1)), jax.tree.leaves(nnx.state(p2)), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    pointer = subprocess.run(
        [str(BIN / "respect-train"), "policy=respect_pointer", f"run_dir={tmp_path / 'pointer'}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600, env={**base, **step, "SLURM_PROCID": "1"},
    )
    assert pointer.returncode == 2 and pointer.stderr.strip().splitlines() == [
        "respect-train: error: policy=respect_pointer trains in one process, but this is process 1 of 2; "
        "launch one task (hydra.launcher.nodes=1 tasks_per_node=1)"
    ]
    assert not (tmp_path / "pointer").exists()


@pytest.mark.parametrize("baseline, leader_weight", [("pomo", 1.0), ("pomo", 4.0), ("none", 0.0)])
def test_reinforce_loss_matches_a_numpy_reference(baseline, leader_weight):
    """The REINFORCE loss from the NumPy evaluator's rewards and teacher-forced log-probabilities of
    the same samples; ``leader_weight`` scales the advantage of each graph's best sample only."""
    from scipy.special import log_softmax

    from respect_jax.costs import evaluate_assignment
    from respect_jax.policy.model import SchedulingPolicy, rollout_recorded
    from respect_jax.solvers.scoring import objective_lower_bound_np
    from respect_jax.train.algorithms import frozen_copy, reinforce_loss
    from respect_jax.train.config import ReinforceConfig

    hw = make_hw(3)
    graphs = generate_dataset(GeneratorConfig(min_nodes=7, max_nodes=9), 6, seed=21)
    batch = make_batches(graphs)[0][0].graphs
    model = SchedulingPolicy(TINY, rngs=nnx.Rngs(5))
    frozen = frozen_copy(*nnx.split(model))
    cfg = ReinforceConfig(samples=5, baseline=baseline, entropy=0.0, leader_weight=leader_weight)
    key = jax.random.PRNGKey(9)
    loss, metrics = reinforce_loss(model, frozen, batch, key, hw, "paper", 1.0, cfg)

    h, g = model.encode(batch)
    stage, _ = rollout_recorded(frozen, batch, h, g, hw, "paper", 1.0, jax.random.split(key)[0], 5, False)
    logits = np.asarray(model.teacher_logits(batch, h, g, stage, hw, "paper", 1.0), np.float64)
    logp_all = log_softmax(logits, axis=-1)
    stage = np.asarray(stage)
    ref = 0.0
    for i, graph in enumerate(graphs):
        n = graph.num_nodes
        bound = objective_lower_bound_np(graph, hw, "paper")
        reward = np.array([-evaluate_assignment(graph, s[:n], hw, "paper", 1.0)["objective"] / bound for s in stage[i]])
        adv = reward - reward.mean() if baseline == "pomo" else reward.copy()
        adv[np.argmax(reward)] *= leader_weight
        logp = np.array([logp_all[i, j, np.arange(n), stage[i, j, :n]].sum() for j in range(5)])
        ref -= np.sum(adv * logp)
    np.testing.assert_allclose(float(loss), ref / (len(graphs) * 5), rtol=2e-4, atol=1e-6)
    assert float(metrics["valid"]) == 1.0


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: (d / "network.json").write_text("[1]"), "network.json: expected a JSON object, got list"),
        (lambda d: (d / "network.json").write_text("{nope"), "network.json: not JSON"),
        (lambda d: _edit_network(d, objective="speed"), "objective must be one of paper, latency, got 'speed'"),
        (lambda d: _edit_network(d, hardware={**_network(d)["hardware"], "stages": 0}),
         "hardware.stages must be an integer in [1, 1024], got 0"),
        (lambda d: _edit_network(d, policy={**_network(d)["policy"], "width": 64}),
         "the checkpoint's params do not match the network of network.json (decoder.graph_query.kernel: stored shape"),
        (lambda d: _edit_network(d, policy={**_network(d)["policy"], "decoder_layers": 2}),
         "params do not match the network of network.json (missing: decoder.blocks.1"),
        (lambda d: _truncate_params(d), "cannot restore this checkpoint"),
        (lambda d: shutil.rmtree(d / "checkpoints"), "no checkpoint to restore"),
    ],
)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # see the end of the test
def test_a_damaged_checkpoint_is_a_one_line_error_that_writes_nothing(tmp_path, damage, message):
    import gc
    import time

    copy = tmp_path / "ckpt"
    shutil.copytree(ROOT / "data" / "checkpoints" / "respect_k4_paper", copy)
    damage(copy)
    before = sorted(str(p.relative_to(copy)) for p in copy.rglob("*"))
    with pytest.raises((ValueError, FileNotFoundError), match=re.escape(message)) as err:  # both: user errors
        load_policy(copy)
    assert len(str(err.value).splitlines()) == 1
    # orbax's other reads of the damaged files end after its event loop closed ("Event loop is closed"); let
    # them end, and collect them, here rather than as warnings attributed to whichever test runs next
    time.sleep(0.5)
    gc.collect()
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*")) == before  # no empty checkpoints/ made


def test_a_checkpoint_of_another_shape_is_one_line_on_stderr(tmp_path):
    """The command line prints the one-line error only: the shapes are compared before orbax starts a restore
    (a failed orbax restore used to leave its asyncio workers printing 'Event loop is closed' tracebacks), and
    what a restore of damaged files still raises in the background after the error is dropped."""
    copy = tmp_path / "ckpt"
    shutil.copytree(ROOT / "data" / "checkpoints" / "respect_k4_paper", copy)
    _edit_network(copy, policy={**_network(copy)["policy"], "width": 64})
    cmd = [
        str(BIN / "respect-schedule"), f"graph={ROOT / 'data' / 'models' / 'mobilenet.json'}", "solver=policy",
        f"solver.options.checkpoint={copy}", "hardware.stages=4",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "params do not match the network" in out.stderr, out.stderr
    # damaged data files: orbax fails inside the restore, its workers then raised on a closed event loop
    shutil.rmtree(copy)
    shutil.copytree(ROOT / "data" / "checkpoints" / "respect_k4_paper", copy)
    _truncate_params(copy)
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "cannot restore this checkpoint" in out.stderr, out.stderr
    assert "TensorStore" not in out.stderr


def test_a_reported_user_error_drops_the_asyncio_records_of_unawaited_background_reads(monkeypatch, capfd):
    """What orbax's failed background reads leave behind when the CLI exits on a damaged checkpoint: a task whose
    exception nobody retrieved is logged by asyncio ("Task exception was never retrieved") when it is destroyed, at a
    time that depends on the garbage collector (the intermittent extra lines of the test above). Once the one-line
    error is reported, that record is dropped; before it, it reaches stderr (the check that the test can fail)."""
    import asyncio
    import gc
    import logging

    from respect_jax.cli import common

    def leave_an_unretrieved_task_error() -> None:
        async def read():
            raise RuntimeError("a background read of a damaged file")

        loop = asyncio.new_event_loop()
        task = loop.create_task(read())
        loop.run_until_complete(asyncio.sleep(0.01))
        assert task.done()
        loop.close()
        del task
        gc.collect()

    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # restored after the test
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.setattr(logging.getLogger("asyncio"), "disabled", False)
    monkeypatch.setattr(logging.getLogger("asyncio"), "propagate", False)  # straight to stderr, not to pytest
    monkeypatch.setattr(logging.getLogger("asyncio"), "handlers", [logging.StreamHandler(sys.stderr)])
    leave_an_unretrieved_task_error()
    assert "Task exception was never retrieved" in capfd.readouterr().err
    common._silence_background_errors()
    leave_an_unretrieved_task_error()
    assert capfd.readouterr().err == ""


def test_commands_drop_the_closed_loop_reports_of_background_reads_and_no_other(monkeypatch, capfd):
    """A command's process drops asyncio's "Event loop is closed" raised where nobody can catch it (what the reads in
    flight of a failed orbax restore raise from TensorStore's threads, possibly before the one-line error is printed:
    the intermittent extra lines of the test above), through every hook such a report takes, and passes every other
    report to the hook installed before."""
    from types import SimpleNamespace

    from respect_jax.cli import common

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda report: seen.append(("unraisable", str(report.exc_value))))
    monkeypatch.setattr(threading, "excepthook", lambda report: seen.append(("thread", str(report.exc_value))))
    monkeypatch.setattr(sys, "excepthook", lambda kind, value, tb: seen.append(("uncaught", str(value))))
    common._drop_closed_loop_reports()
    common._drop_closed_loop_reports()  # a second command in the same process wraps the hooks once
    for exc in (RuntimeError("Event loop is closed"), RuntimeError("a real bug"), ValueError("Event loop is closed")):
        sys.unraisablehook(SimpleNamespace(exc_value=exc))
        threading.excepthook(SimpleNamespace(exc_value=exc))
        sys.excepthook(type(exc), exc, None)
    assert seen == [(hook, msg) for msg in ("a real bug", "Event loop is closed") for hook in
                    ("unraisable", "thread", "uncaught")]

    def closed_loop_in_a_thread():
        raise RuntimeError("Event loop is closed")

    monkeypatch.setattr(threading, "excepthook", threading.__excepthook__)
    monkeypatch.setattr(sys.unraisablehook, "drops_closed_loop", False, raising=False)
    common._drop_closed_loop_reports()
    worker = threading.Thread(target=closed_loop_in_a_thread)
    worker.start()
    worker.join()
    assert capfd.readouterr().err == ""


def _network(run_dir: Path) -> dict:
    return json.loads((run_dir / "network.json").read_text())


def _edit_network(run_dir: Path, **changes) -> None:
    (run_dir / "network.json").write_text(json.dumps({**_network(run_dir), **changes}))


def _truncate_params(run_dir: Path) -> None:
    biggest = max((p for p in (run_dir / "checkpoints").rglob("*") if p.is_file() and "params" in p.parts),
                  key=lambda p: p.stat().st_size)
    biggest.write_bytes(biggest.read_bytes()[:16])


# ============================================================================ training across K and hardware


def _generated(count, seed, lo, hi):
    from respect_jax.graphs import make_jax_generator

    gen = make_jax_generator(GeneratorConfig(mode="dnn", min_nodes=lo, max_nodes=hi))
    return jax.vmap(gen)(jax.random.split(jax.random.PRNGKey(seed), count))


def test_sampled_hardware_stays_within_the_perturbation_of_its_presets():
    """Every graph's hardware is one preset with each perturbed field within [1/f, f] of it, the
    other fields exact; every preset is drawn; K draws are in range, cover it, and repeat per seed."""
    from respect_jax.train.config import ConditioningConfig
    from respect_jax.train.hardware import sample_hardware, stack_presets, stages_of_epoch

    presets = [make_hw(3), make_hw(3, sram_bytes=7e6, macs_per_s=3e9, host_bw=1e9, link_bw=2e8, param_bytes=4.0)]
    cfg = ConditioningConfig(enabled=True, perturb=2.0, perturb_fields=("sram_bytes", "link_bw"))
    table = stack_presets(presets)
    hw = jax.device_get(sample_hardware(jax.random.PRNGKey(0), table, 5, 256, cfg))
    assert hw.stages == 5 and hw.sram_bytes.shape == (256,)
    which = (hw.macs_per_s == table["macs_per_s"][1]).astype(int)  # not perturbed: identifies the preset
    assert set(which.tolist()) == {0, 1}
    for name in ("sram_bytes", "link_bw"):
        ratio = getattr(hw, name) / table[name][which]
        assert ratio.min() >= 0.5 * (1 - 1e-6) and ratio.max() <= 2.0 * (1 + 1e-6)
        assert ratio.min() < 0.6 and ratio.max() > 1.7  # spread over the range
    for name in ("param_bytes", "host_bw", "stage_overhead_s"):
        np.testing.assert_array_equal(getattr(hw, name), table[name][which])
    draws = [stages_of_epoch(ConditioningConfig(enabled=True), 3, e) for e in range(200)]
    assert set(draws) == set(range(2, 9))
    assert draws == [stages_of_epoch(ConditioningConfig(enabled=True), 3, e) for e in range(200)]
    picks = {stages_of_epoch(ConditioningConfig(enabled=True, stages_choices=[2, 5]), 0, e) for e in range(50)}
    assert picks == {2, 5}


def test_per_graph_hardware_in_training_equals_the_numpy_reference():
    """Self-improvement targets on a batch whose graphs each have their own hardware: the teacher's
    objective of every graph (sampled, then local search under that graph's hardware) equals the NumPy
    reference evaluator's objective of the target schedule under that hardware, and the best sample's
    too; so do schedule_objectives of random valid schedules."""
    from respect_jax.graphs.generators import padded_to_graph
    from respect_jax.policy.model import SchedulingPolicy, schedule_objectives
    from respect_jax.reference import reference_objective
    from respect_jax.train.algorithms import self_improvement_targets
    from respect_jax.train.config import ConditioningConfig, SelfImprovementConfig
    from respect_jax.train.hardware import sample_hardware, stack_presets

    presets = [make_hw(3), make_hw(3, sram_bytes=1e4, link_bw=7e4, stage_overhead_s=3e-4, act_bytes=2.0)]
    cfg = ConditioningConfig(enabled=True, perturb=3.0)
    b_count = 6
    graphs = _generated(b_count, 9, 8, 16)
    hw = sample_hardware(jax.random.PRNGKey(1), stack_presets(presets), 3, b_count, cfg)
    one = lambda tree, b: jax.tree.map(lambda x: x[b], tree)
    as_graph = [padded_to_graph(one(graphs, b)) for b in range(b_count)]
    hw_of = [jax.tree.map(lambda x, b=b: float(x[b]), hw) for b in range(b_count)]
    assert len({h.sram_bytes for h in hw_of}) == b_count  # really per graph
    rng = np.random.default_rng(0)
    stage = np.zeros((b_count, 2, graphs.params.shape[-1]), np.int32)
    for b, g in enumerate(as_graph):
        for s in range(2):
            stage[b, s, : g.num_nodes] = random_valid_schedule(g, 3, rng)
    for objective in ("paper", "latency"):  # compiled programs, not op by op (hundreds of small compilations)
        obj, valid = jax.jit(lambda gr, st, h, o=objective: schedule_objectives(gr, st, h, o, 0.5))(
            graphs, jnp.asarray(stage), hw
        )
        assert bool(np.all(valid))
        for b, g in enumerate(as_graph):
            for s in range(2):
                want = reference_objective(g, stage[b, s, : g.num_nodes], hw_of[b], objective, 0.5)
                np.testing.assert_allclose(float(obj[b, s]), want, rtol=2e-5)
        model = SchedulingPolicy(dataclasses.replace(TINY, feature_version=2), rngs=nnx.Rngs(0))
        si = SelfImprovementConfig(samples=4, local_search=10)
        targets = nnx.jit(
            lambda m, gr, k, h, o=objective, si=si: self_improvement_targets(m, gr, *m.encode(gr), k, h, o, 0.5, si)
        )
        out = jax.device_get(targets(model, graphs, jax.random.PRNGKey(2), hw))
        for b, g in enumerate(as_graph):
            target = out["target"][b, : g.num_nodes]
            want = reference_objective(g, target, hw_of[b], objective, 0.5)
            np.testing.assert_allclose(float(out["teacher"][b]), want, rtol=2e-5)
            assert out["teacher"][b] <= out["sample"][b] * (1 + 1e-6)


def test_conditioned_trainer_compiles_once_per_k_and_refuses_version_1():
    """A conditioned self-improvement run: epochs draw K from stages_choices (one trace per K, the
    recorded K of every epoch), the loss is finite, evaluation reports every eval K; a version-1
    policy is refused with a clear error."""
    from respect_jax.train.config import ConditioningConfig

    cond = ConditioningConfig(enabled=True, stages_choices=(2, 5), eval_stages=(2, 5), perturb=2.0)
    algo = AlgorithmConfig.from_dict(
        {"name": "self_improvement", "self_improvement": {"samples": 2, "local_search": 0}}
    )
    tcfg = TrainConfig(steps=8, batch_size=4, steps_per_epoch=1, checkpoint_every=8, eval_every=8, eval_graphs=4)
    gen = GeneratorConfig(mode="dnn", min_nodes=6, max_nodes=10)
    presets = [make_hw(3), make_hw(3, sram_bytes=1e4, link_bw=7e4)]
    with pytest.raises(ValueError, match="feature_version=2"):
        Trainer(TINY, make_hw(3), "latency", 1.0, algo, tcfg, generators=[gen], conditioning=cond, presets=presets)
    policy = dataclasses.replace(TINY, feature_version=2)
    trainer = Trainer(
        policy, make_hw(3), "latency", 1.0, algo, tcfg, generators=[gen], conditioning=cond, presets=presets
    )
    state = trainer.init_state()
    seen = []
    for _ in range(6):
        state, metrics, _, _ = trainer.run_epoch(state)
        seen.append(metrics["stages"])
        assert np.isfinite(metrics["loss"]) and metrics["valid"] == 1.0
    assert set(seen) == {2, 5}
    assert dict(trainer.trace_counts) == {("self_improvement", 0): 2}  # one trace per K, not per epoch
    ev = trainer.evaluate(state.params)
    assert ev["k2_valid_pct"] == ev["k5_valid_pct"] == 100.0
    np.testing.assert_allclose(ev["ratio_to_bound"], (ev["k2_ratio_to_bound"] + ev["k5_ratio_to_bound"]) / 2)
