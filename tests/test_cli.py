"""The command-line contract of SPEC section 4 (respect-schedule, respect-bench)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from respect_jax.costs import hardware_from_dict
from respect_jax.graphs import load_graph
from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver

ROOT = Path(__file__).resolve().parents[1]
GRAPH = ROOT / "data" / "graphs" / "dnn40.json"
BIN = Path(sys.executable).parent


def run(cmd, cwd, env=None):
    env = {**(os.environ if env is None else env), "JAX_PLATFORMS": "cpu"}
    return subprocess.run([str(BIN / cmd[0]), *cmd[1:]], cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


def run_in_process(cmd, cwd, monkeypatch, capfd) -> subprocess.CompletedProcess:
    """``cmd`` run by the command's ``main()`` in this process, from ``cwd``, as :func:`run` runs its console script in
    a new one: exit status (from SystemExit) and stdout/stderr (file descriptors 1 and 2). For the user-error tests and
    the longest runs (a folder of graphs, the policy and many-graphs benchmarks): a new Python process costs seconds;
    one case per command still runs the console script (``SUBPROCESS``, test_bench_runs_small_and_writes_results).
    The command's JAX cache setting is not applied (it would re-point this worker's JAX cache; the setting has its own
    test, in processes of their own) and the error hooks a reported user error replaces are restored afterwards."""
    import threading

    from respect_jax.cli import bench, schedule

    module = {"respect-schedule": schedule, "respect-bench": bench}[cmd[0]]
    monkeypatch.setattr(module, "setup_compilation_cache", lambda cfg: None)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", list(cmd))
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    capfd.readouterr()
    try:
        module.main()
        code = 0
    except SystemExit as exc:  # as a process's exit status: None is 0, a message (printed by Python there) is 1
        code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    out = capfd.readouterr()
    return subprocess.CompletedProcess(cmd, code, out.out, out.err)


def run_error_case(cmd, cwd, monkeypatch, capfd, message):
    """:func:`run` for the case whose message is in ``SUBPROCESS``, else :func:`run_in_process`."""
    if message in SUBPROCESS:
        return run(cmd, cwd)
    return run_in_process(cmd, cwd, monkeypatch, capfd)


# the user-error cases that run the console script in a new process (one per command); the others run in this one
SUBPROCESS = ("hardware.stages must be an integer in [1, 1024], got 0", "policy.checkpoint /no/such/run does not exist")


@pytest.mark.parametrize("objective", ["paper", "latency"])
def test_schedule_writes_result_json(tmp_path, objective):
    out = tmp_path / "result.json"
    proc = run(
        [
            "respect-schedule",
            f"graph={GRAPH}",
            "solver=compiler",
            "hardware.stages=3",
            f"objective={objective}",
            f"out={out}",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    for key in (
        "graph",
        "num_nodes",
        "solver",
        "objective_name",
        "objective",
        "assignment",
        "metrics",
        "hardware",
        "solve_time_s",
        "optimal",
        "gap",
    ):
        assert key in result
    for key in ("peak_mem_bytes", "comm_bytes", "bottleneck_s", "latency_s", "spill_bytes"):
        assert key in result["metrics"]
    graph = load_graph(GRAPH)
    hw = hardware_from_dict(result["hardware"])
    assert hw.stages == 3 and result["num_nodes"] == graph.num_nodes
    assert result["objective"] == pytest.approx(
        reference_objective(graph, result["assignment"], hw, objective), rel=2e-6
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"], "nothing else written (no hydra outputs)"


@pytest.mark.parametrize(
    "args,message",
    [
        (["graph=/no/such/file.json"], "cannot read"),
        ([], "Missing mandatory value: graph"),
        ([f"graph={GRAPH}", "solver=nope"], "unknown solver 'nope'"),
        ([f"graph={GRAPH}", "hardware=nope"], "unknown hardware 'nope'"),
        ([f"graph={GRAPH}", "hardware.stages=0"], "hardware.stages must be an integer in [1, 1024], got 0"),
        ([f"graph={GRAPH}", "hardware.stages=100000"], "hardware.stages must be an integer in [1, 1024], got 100000"),
        ([f"graph={GRAPH}", "hardware.link_bw=-3"], "hardware.link_bw must be > 0"),
        ([f"graph={GRAPH}", "objective=speed"], "objective must be one of paper, latency"),
        ([f"graph={GRAPH}", "solver=cpsat", "+solver.options.time_limt=1"], "solver cpsat: unknown option(s)"),
        ([f"graph={GRAPH}", "solver=compiler", "+solver.options.samples=4"],
         "solver compiler: unknown option(s) samples; it takes no"),
        ([f"graph={GRAPH}", "solver.options.time_budget_s=0"], "solver auto: time_budget_s must be > 0"),
        ([f"graph={GRAPH}", "modell=3"], "Could not override 'modell': no such key"),
    ],
)
def test_schedule_user_errors_are_one_line_and_write_nothing(tmp_path, args, message, monkeypatch, capfd):
    out = tmp_path / "result.json"
    proc = run_error_case(["respect-schedule", *args, f"out={out}"], tmp_path, monkeypatch, capfd, message)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["-m", "policy=gat,mean", "train.steps=2"], None),  # a sweep over a group: every choice checked
        (["-m", "policy=gat,nope"], "unknown policy 'nope'; choose one of"),
        (["-m", "train.stepz=1,2"], "Could not override 'train.stepz': no such key"),  # checked at the first job
        (["train.lr=1e-3,3e-4", "-m", "train.seed=range(0,3)", "run_dir=runs/x_${hydra:job.num}"], None),
        (["-m", "+ablation=encoder_depth", "policy.layers=0,1"], None),
        (["train.stepz=5"], "Could not override 'train.stepz': no such key"),
        (["datasets=[a,"], "no viable alternative at input"),
        (["hydra/launcher=local", "train.steps=4", "+ablation=encoder_depth"], None),
    ],
)
def test_command_lines_are_checked_before_hydra_runs(capsys, argv, error):
    from respect_jax.cli.common import check_group_choices

    if error is None:
        check_group_choices("respect-train", ("policy",), argv, config="train")
        return
    with pytest.raises(SystemExit) as exc:
        check_group_choices("respect-train", ("policy",), argv, config="train")
    lines = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(lines) == 1 and lines[0].startswith("respect-train: error: ")
    assert error in lines[0], lines


def _recording_main(seen: list):
    """A ``@hydra.main`` task on conf/schedule.yaml that records its config and Hydra's state."""
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from respect_jax.cli.common import CONF_DIR

    @hydra.main(config_path=CONF_DIR, config_name="schedule", version_base="1.3")
    def task(cfg) -> None:
        hydra_cfg = HydraConfig.get()
        seen.append((OmegaConf.to_container(cfg, resolve=True), str(hydra_cfg.mode), dict(hydra_cfg.runtime.choices),
                     list(hydra_cfg.overrides.task), hydra_cfg.runtime.output_dir, os.getcwd()))

    return task


def test_a_plain_run_composes_once_and_gives_the_task_what_hydras_run_gives(monkeypatch, tmp_path):
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    from respect_jax.cli.compose import run_command

    calls = []
    load = ConfigLoaderImpl.load_configuration
    counted = lambda self, *a, **k: calls.append(1) or load(self, *a, **k)  # noqa: E731
    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counted)
    monkeypatch.chdir(tmp_path)
    argv = [f"graph={GRAPH}", "solver=policy", "objective=latency", "hardware.stages=3", "solver.options.samples=4"]
    hydras, ours = [], []
    monkeypatch.setattr(sys, "argv", ["respect-schedule", *argv])
    _recording_main(hydras)()  # Hydra's own entry point
    hydra_composes, calls[:] = len(calls), []
    run_command("respect-schedule", ("hardware", "solver"), "schedule", _recording_main(ours), argv)
    assert ours == hydras and ours[0][1] == "RunMode.RUN" and ours[0][2]["solver"] == "policy"
    assert ours[0][0]["hardware"]["stages"] == 3 and ours[0][0]["solver"]["options"]["samples"] == 4
    assert len(calls) == 1 < hydra_composes  # Hydra composes in get_mode and in run; the plain run once
    with pytest.raises(SystemExit) as exc:  # a composition error: one line, exit 2, the task never runs
        run_command("respect-schedule", ("hardware", "solver"), "schedule", _recording_main(ours),
                    [*argv, "solver.optionz.x=1"])
    assert exc.value.code == 2 and len(ours) == 1


def test_schedule_notes_a_checkpoint_trained_for_another_problem():
    from respect_jax.cli.schedule import training_mismatch

    trained = {"objective": "paper", "lam": 1.0, "hardware": {"stages": 4}}
    same = {"info": {"trained_on": trained}, "objective_name": "paper", "lam": 1.0, "hardware": {"stages": 4}}
    assert training_mismatch(same) is None
    assert training_mismatch({**same, "info": {}}) is None  # not a learned solver
    other = {**same, "objective_name": "latency", "hardware": {"stages": 6}}
    assert training_mismatch(other) == (
        "the checkpoint was trained for objective paper (here latency), K=4 (here K=6); "
        "a checkpoint trained for this problem may do better"
    )
    assert "lam 1.0 (here 2.0)" in training_mismatch({**same, "lam": 2.0})
    # a checkpoint trained across K (conditioning) is not noted inside its range, still noted outside it
    across = {**trained, "trained_across": {"stages_min": 2, "stages_max": 8, "stages_choices": [2, 4, 6, 8]}}
    conditioned = {**same, "info": {"trained_on": across}}
    assert training_mismatch({**conditioned, "hardware": {"stages": 7}}) is None
    assert "K=4 (here K=12)" in training_mismatch({**conditioned, "hardware": {"stages": 12}})


def test_bad_graph_file_names_file_and_node(tmp_path):
    bad = tmp_path / "bad.json"
    doc = json.loads(GRAPH.read_text())
    doc["nodes"][5]["params"] = -1
    bad.write_text(json.dumps(doc))
    proc = run(["respect-schedule", f"graph={bad}", f"out={tmp_path / 'r.json'}"], tmp_path)
    assert proc.returncode == 2
    assert str(bad) in proc.stderr and "node 5 has params=-1" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def write_graphs(folder: Path, count: int, seed: int) -> list[Path]:
    """``count`` small generated graphs (two size buckets) and dnn40 as SPEC JSON files in ``folder``."""
    from conftest import random_graphs

    from respect_jax.graphs import save_graph

    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "dnn40.json"]
    paths[0].write_text(GRAPH.read_text())
    for i, graph in enumerate(random_graphs(count, seed, min_nodes=10, max_nodes=50)):
        paths.append(folder / f"g{i}.json")
        save_graph(graph, paths[-1])
    return paths


def test_schedule_folder_writes_one_result_per_graph(tmp_path, monkeypatch, capfd):
    """The commands run in this process (:func:`run_in_process`: the same main(), files and stderr as the console
    script; a new Python process per command cost seconds each, and the console script has its own tests)."""
    run = lambda cmd, cwd: run_in_process(cmd, cwd, monkeypatch, capfd)  # noqa: E731
    paths = write_graphs(tmp_path / "graphs", 3, seed=5)
    out = tmp_path / "out"
    step = ROOT / "data" / "checkpoints" / "respect_k4_paper_cut"  # a step policy trained for K=4 and paper
    args = ["solver=policy", f"solver.options.checkpoint={step}", "hardware.stages=3", "objective=latency"]
    proc = run(["respect-schedule", f"graph={tmp_path / 'graphs'}", *args, f"out_dir={out}", "batch_size=2"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted([*(p.name for p in paths), "summary.jsonl"])
    summary = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert [row["file"] for row in summary] == [str(p) for p in sorted(paths)]
    for path, row in zip(sorted(paths), summary, strict=True):
        result = json.loads((out / path.name).read_text())
        graph = load_graph(path)
        hw = hardware_from_dict(result["hardware"])
        assert result["graph"] == graph.name == row["graph"] and hw.stages == 3
        assert result["objective"] == pytest.approx(reference_objective(graph, result["assignment"], hw, "latency"))
        assert row["objective"] == result["objective"] and row["compile_s"] == result["info"]["compile_s"]
        assert result["solve_time_s"] == row["solve_time_s"] > 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 2 and "note: the checkpoint was trained for" in lines[0]
    assert "policy on 4 graphs (K=3)" in lines[1] and "compile" in lines[1], proc.stderr
    # the batched schedule of a graph is the one a command for that graph alone writes (greedy)
    single = tmp_path / "single.json"
    proc = run(["respect-schedule", f"graph={paths[2]}", *args, f"out={single}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    alone = json.loads(single.read_text())
    assert alone["assignment"] == json.loads((out / paths[2].name).read_text())["assignment"]
    assert alone["info"]["compile_s"] >= 0 and "compile_s" in alone["info"]["timing"]
    # solver=policy's default (the order policy, one network for every K and objective): no note
    proc = run(["respect-schedule", f"graph={tmp_path / 'graphs'}", "solver=policy", "hardware.stages=3",
                "objective=latency", f"out_dir={tmp_path / 'out_default'}"], tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 0 and len(lines) == 1 and "policy on 4 graphs (K=3)" in lines[0], proc.stderr
    # a glob, a non-learned solver (one graph at a time)
    proc = run(["respect-schedule", f"graph={tmp_path / 'graphs' / 'g*.json'}", "solver=compiler",
                f"out_dir={tmp_path / 'out2'}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "out2").iterdir()) == ["g0.json", "g1.json", "g2.json", "summary.jsonl"]


@pytest.mark.parametrize(
    "setup,args,message",
    [
        ("empty", [], "holds no .json graph files"),
        ("broken", [], "broken.json: not valid JSON"),
        ("graphs", ["out=r.json"], "set out_dir= (one RESULT.json per graph), not out="),
        ("graphs", ["batch_size=0"], "batch_size must be an integer >= 1 or null (the solver's own), got 0"),
        ("glob", [], "matches no files"),
    ],
)
def test_schedule_folder_user_errors_are_one_line_and_write_nothing(tmp_path, setup, args, message, monkeypatch,
                                                                   capfd):
    folder = tmp_path / "in"
    folder.mkdir()
    if setup in ("broken", "graphs"):
        write_graphs(folder, 1, seed=6)
    if setup == "broken":
        (folder / "broken.json").write_text("this is not JSON")
    graph = str(folder / "*.nothing") if setup == "glob" else str(folder)
    out = tmp_path / "out"
    proc = run_in_process(["respect-schedule", f"graph={graph}", "solver=policy", f"out_dir={out}", *args], tmp_path,
                          monkeypatch, capfd)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"] and not (tmp_path / "r.json").exists()


def test_schedule_uses_the_compilation_cache_setting(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RESPECT_JAX_CACHE", "JAX_COMPILATION_CACHE_DIR")}
    env.pop("XDG_CACHE_HOME", None)
    env["HOME"] = str(tmp_path / "home")  # the default folder: ~/.cache/respect-jax/jax
    base = ["respect-schedule", f"graph={GRAPH}", "solver=compiler", "jax_cache_min_compile_s=0"]
    proc = run([*base, f"out={tmp_path / 'a.json'}"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    default = tmp_path / "home" / ".cache" / "respect-jax" / "jax"
    entries = sorted(p.name for p in default.iterdir())
    assert entries, "the evaluator's compiled program is stored"
    proc = run([*base, f"out={tmp_path / 'b.json'}"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in default.iterdir()) == entries, "a second call compiles nothing new"
    given = tmp_path / "given"
    proc = run([*base, f"jax_cache={given}", f"out={tmp_path / 'c.json'}"], tmp_path, env)
    assert proc.returncode == 0 and any(given.iterdir()), proc.stderr
    proc = run([*base, "jax_cache=off", f"out={tmp_path / 'd.json'}"], tmp_path, {**env, "HOME": str(tmp_path / "h2")})
    assert proc.returncode == 0 and not (tmp_path / "h2").exists(), proc.stderr


def test_bench_runs_small_and_writes_results(tmp_path):
    proc = run(
        [
            "respect-bench",
            "env.batch=64",
            "env.nodes=16",
            "env.loop_graphs=4",
            "env.repeats=1",
            "generator.batch=16",
            "generator.repeats=1",
            f"out_dir={tmp_path}",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "bench_env.json").read_text())
    assert result["env"]["jax_env_steps_per_s"] > 0 and result["env"]["loop_env_steps_per_s"] > 0
    assert result["machine"]["cpu_count"] >= 1
    assert "ratio" in (tmp_path / "bench_env.md").read_text()


def test_bench_many_writes_graphs_per_second_with_compile_apart(tmp_path, monkeypatch, capfd):
    """In this process (:func:`run_in_process`; test_bench_runs_small_and_writes_results runs the console script)."""
    args = ["benchmarks=[many]", "many.graphs=6", "many.nodes=20", "many.batch_size=4", "many.repeats=1",
            "~many.decodings.greedy_ls", "out_name=bench_many", f"out_dir={tmp_path}"]
    run = lambda cmd, cwd: run_in_process(cmd, cwd, monkeypatch, capfd)  # noqa: E731
    proc = run(["respect-bench", *args], tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "bench_many.json").read_text())
    assert result["machine"]["cpu_count"] >= 1 and "env" not in result
    row = result["many"]["rows"]["greedy"]
    assert row["graphs"] == 6 and row["nodes_min"] == row["nodes_max"] == 20 and row["buckets"][0][0] == 32
    assert row["graphs_per_s"] >= row["graphs_per_s_median"] > 0 and row["compile_s"] > 0
    assert row["first_call_s"] > row["compile_s"]
    assert "## Many graphs at once" in (tmp_path / "bench_many.md").read_text()
    proc = run(["respect-bench", *args, "many.batch_size=0"], tmp_path)
    assert proc.returncode == 2 and "many.batch_size must be an integer >= 1, got 0" in proc.stderr


POLICY_ARGS = [
    "benchmarks=[policy]",
    f"policy.checkpoint={ROOT / 'data' / 'checkpoints' / 'respect_k4_paper'}",
    f"policy.labels={ROOT / 'data' / 'labels' / 'respect30_k4_paper'}",
    f"policy.labels_large={ROOT / 'data' / 'labels' / 'respect50_k4_paper'}",
    f"policy.graph={ROOT / 'data' / 'models' / 'mobilenet.json'}",  # 86 nodes: a smaller compile than the default
    "policy.batch=8",
    "policy.steps=2",
    "policy.algorithms.reinforce.reinforce.samples=2",
    "~policy.algorithms.reinforce_greedy_baseline",
    "~policy.algorithms.self_improvement",
    "policy.repeats=1",
    "out_name=bench_policy_speed",
]


def test_bench_policy_writes_speed_figures(tmp_path, monkeypatch, capfd):
    """In this process (:func:`run_in_process`; test_bench_runs_small_and_writes_results runs the console script)."""
    proc = run_in_process(["respect-bench", *POLICY_ARGS, f"out_dir={tmp_path}"], tmp_path, monkeypatch, capfd)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench_policy_speed.json", "bench_policy_speed.md"]
    result = json.loads((tmp_path / "bench_policy_speed.json").read_text())
    assert "env" not in result and "generator" not in result
    assert len(result["load_before"]) == 3 and len(result["load_after"]) == 3
    p = result["policy"]
    for algo in ("imitation", "reinforce"):
        assert p["training"][algo]["graphs_per_s"] > 0 and p["training"][algo]["compile_s"] >= 0
        assert p["training"][algo]["batch_size"] == 8
    assert p["training"]["reinforce"]["samples_per_graph"] == 2
    assert p["compile_large"]["bucket_nodes"] >= 50 and p["compile_large"]["imitation_compile_s"] > 0
    graph = load_graph(ROOT / "data" / "models" / "mobilenet.json")
    lat = p["latency"]
    assert lat["graph"] == graph.name and lat["num_nodes"] == graph.num_nodes
    assert lat["bucket_nodes"] >= graph.num_nodes
    assert 0 < lat["greedy_ms_best"] <= lat["greedy_ms_median"] and lat["compile_s"] > 0
    markdown = (tmp_path / "bench_policy_speed.md").read_text()
    assert "## Learned scheduler" in markdown and "load average" in markdown
    assert sorted(p["training"]) == ["imitation", "reinforce"]
    assert "| imitation |" in markdown and "| reinforce |" in markdown and f"{graph.num_nodes} nodes" in markdown


@pytest.mark.parametrize(
    "args,message",
    [
        (["policy.checkpoint=/no/such/run"], "policy.checkpoint /no/such/run does not exist"),
        (["benchmarks=[policy,nope]"], "choose from env, generator, policy"),
        (["policy.algorithms.reinforce.name=ppo"], "algorithm.name must be one of"),
        (["benchmarks=[env]", "env.loop_graphs=0"], "env.loop_graphs must be an integer >= 1, got 0"),
        (["benchmarks=[]"], "unknown or no benchmarks"),
    ],
)
def test_bench_policy_user_errors_are_one_line_and_write_nothing(tmp_path, args, message, monkeypatch, capfd):
    out = tmp_path / "out"
    cmd = ["respect-bench", *POLICY_ARGS, *args, f"out_dir={out}"]
    proc = run_error_case(cmd, tmp_path, monkeypatch, capfd, message)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_sweeps_write_every_job_to_its_own_file_and_refuse_a_shared_one(tmp_path):
    """`-m` sweeps of the evaluation commands: an output left at its default goes to the job's folder (the jobs
    used to overwrite each other's results silently); an explicit output two jobs share stops the second job
    with one line while the sweep's other jobs still run. Run from a folder without data/: the default
    checkpoint is found in the repository."""
    dataset = ROOT / "data" / "labels" / "respect50_k4_paper_val"
    sweep = tmp_path / "sw"
    out = run(
        ["respect-eval", "-m", f"dataset={dataset}", "limit=2", "decodings=[greedy]", "baselines=[]",
         "local_search=0,2", "progress=false", f"hydra.sweep.dir={sweep}"],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    name = "eval_respect_k4_paper_cut_respect50_k4_paper_val.json"
    labels = [list(json.loads((sweep / str(job) / name).read_text())["aggregate"]) for job in (0, 1)]
    assert labels == [["greedy"], ["greedy+ls"]]
    graph = ROOT / "data" / "models" / "mobilenet.json"
    out = run(
        ["respect-schedule", "-m", f"graph={graph}", "solver=greedy,compiler,greedy", "out=r.json",
         f"hydra.sweep.dir={tmp_path / 'sw2'}"],
        tmp_path,
    )
    assert out.returncode == 1  # Hydra's code for a sweep with a failed job
    errors = [x for x in out.stderr.splitlines() if x.startswith("respect-schedule: error")]
    assert [e.split("): ", 1)[1] for e in errors] == [
        "out=r.json is already the out of job 0 of this sweep; give every job its own, e.g. "
        "out='r_${hydra:job.num}.json', or do not set out"
    ] * 2  # jobs 1 and 2 both refused, job 2 ran after job 1 failed
    assert json.loads((tmp_path / "r.json").read_text())["solver"] == "greedy"


def test_a_label_sweep_into_one_dataset_folder_is_refused_before_the_second_job_labels(tmp_path):
    out = run(
        ["respect-label", "-m", "out=lab", "graphs=respect30", "count=2", "seed=0,1", "solver=compiler",
         f"hydra.sweep.dir={tmp_path / 'sw'}"],
        tmp_path,
    )
    assert out.returncode == 1
    errors = [x for x in out.stderr.splitlines() if x.startswith("respect-label: error")]
    assert len(errors) == 1 and errors[0].endswith(
        "out=lab is already the out of job 0 of this sweep; give every job its own, "
        "e.g. out='runs/sweep_${hydra:job.num}'"  # out is mandatory: no "or do not set out"
    )
    assert json.loads((tmp_path / "lab" / "manifest.json").read_text())["seed"] == 0  # job 0's dataset, untouched


def test_a_later_sweep_into_the_same_sweep_folder_is_not_refused_by_the_earlier_ones_claims(tmp_path):
    """Claims belong to one sweep: reusing a `hydra.sweep.dir` for a sweep with other overrides used to refuse a
    file that a job of the earlier sweep had written ("already the out of job 1"), while a conflict inside the
    new sweep is still refused."""
    graph = ROOT / "data" / "models" / "mobilenet.json"
    sweep = f"hydra.sweep.dir={tmp_path / 'sw'}"
    first = run(["respect-schedule", "-m", f"graph={graph}", "solver=greedy,compiler", "out=r_${hydra:job.num}.json",
                 sweep], tmp_path)
    assert first.returncode == 0, first.stderr
    assert json.loads((tmp_path / "r_1.json").read_text())["solver"] == "compiler"
    second = run(["respect-schedule", "-m", f"graph={graph}", "solver=greedy", "out=r_1.json", sweep], tmp_path)
    assert second.returncode == 0, second.stderr
    assert json.loads((tmp_path / "r_1.json").read_text())["solver"] == "greedy"
    third = run(["respect-schedule", "-m", f"graph={graph}", "solver=compiler,greedy", "out=r_1.json", sweep], tmp_path)
    assert third.returncode == 1
    errors = [x for x in third.stderr.splitlines() if x.startswith("respect-schedule: error")]
    assert len(errors) == 1 and "out=r_1.json is already the out of job 0 of this sweep" in errors[0]
    assert json.loads((tmp_path / "r_1.json").read_text())["solver"] == "compiler"


def test_schedule_defaults_to_auto_with_a_certified_result(tmp_path):
    """No solver named: solver=auto. VGG16 (19 nodes) is a chain (one topological order), so auto proves the optimum
    at once (``portfolio.lattice``); with that programme off (``lattice_downsets=0``) CP-SAT proves it within its
    head start and the JAX members are skipped. Both equal the brute-force-checked MILP optimum and say who found it."""
    graph = load_graph(ROOT / "data" / "models" / "vgg16.json")
    results = []
    for name, extra in (("default", []), ("cpsat", ["solver.options.lattice_downsets=0"])):
        out = tmp_path / f"{name}.json"
        proc = run(["respect-schedule", f"graph={ROOT / 'data' / 'models' / 'vgg16.json'}", f"out={out}",
                    "solver.options.head_start_s=30", *extra], tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "auto [" in proc.stderr  # the live line
        result = json.loads(out.read_text())
        assert result["solver"] == "auto" and result["optimal"] is True and result["gap"] == 0.0
        assert result["info"]["lower_bound"] == pytest.approx(result["objective"], rel=1e-6)
        results.append(result)
    portfolio, portfolio_cpsat = results[0]["info"]["portfolio"], results[1]["info"]["portfolio"]
    assert portfolio["lattice"]["optimal"] is True and "lattice" not in portfolio_cpsat
    assert portfolio_cpsat["cpsat"]["optimal"] is True
    assert portfolio_cpsat["gumbel"] == {"skipped": "cpsat proved the optimum first"}
    hw = hardware_from_dict(results[0]["hardware"])
    milp = run_solver("milp", graph, hw, "paper", time_limit_s=60)
    for result in results:
        assert milp["optimal"] and result["objective"] == pytest.approx(milp["objective"], rel=1e-6)
        assert reference_objective(graph, result["assignment"], hw, "paper") == pytest.approx(result["objective"],
                                                                                             rel=2e-6)


def test_hardware_presets_named_reads_conf_hardware_and_names_the_option():
    """The trainers' preset lists (conditioning.presets, algorithm.presets) go through one helper."""
    import yaml

    from respect_jax.cli.common import hardware_presets_named
    from respect_jax.costs import hardware_from_dict

    names = ["coral_usb", "coral_pcie"]
    expected = [hardware_from_dict(yaml.safe_load((ROOT / "conf" / "hardware" / f"{n}.yaml").read_text()))
                for n in names]
    assert hardware_presets_named(names, "x") == expected
    with pytest.raises(ValueError, match=r"^algorithm.presets: no hardware preset 'nope' in conf/hardware$"):
        hardware_presets_named(["coral_usb", "nope"], "algorithm.presets")


COMPOSED_COMMANDS = [
    ("schedule", ["graph=data/models/resnet50.json", "solver=policy", "hardware=coral_pcie", "hardware.stages=6"]),
    ("train", ["policy=small", "train.seed=3"]),
    ("eval", []),
    ("rt", []),
    ("edge", []),
    ("bench", []),
]


def _composition(monkeypatch, cache, config, overrides):
    """(config composed as a plain run composes it, the composition file) with the cache folder ``cache``."""
    from respect_jax.cli.compose import composed, composition_file

    monkeypatch.setenv("RESPECT_JAX_CACHE", str(cache))
    with composed("test", config, overrides, config) as (_, cfg):
        return cfg, composition_file(config, overrides, config)


@pytest.mark.parametrize(("config", "overrides"), COMPOSED_COMMANDS)
def test_a_stored_composition_is_hydras_composition(tmp_path, monkeypatch, config, overrides):
    """A plain run's composition read back from the cache equals Hydra's own (every key, interpolations unresolved,
    the struct and read-only flags) and costs no composition."""
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigAttributeError

    from respect_jax.cli import compose

    fresh, no_file = _composition(monkeypatch, "off", config, overrides)
    assert no_file is None
    first, file = _composition(monkeypatch, tmp_path, config, overrides)
    assert file is not None and file.is_file()

    def no_composing(*_, **__):
        raise AssertionError("composed again although the composition is stored")

    monkeypatch.setattr("hydra._internal.hydra.Hydra.compose_config", no_composing)
    again, _ = _composition(monkeypatch, tmp_path, config, overrides)
    for cfg in (first, again):
        assert OmegaConf.to_yaml(cfg) == OmegaConf.to_yaml(fresh)
        assert OmegaConf.is_struct(cfg) and not OmegaConf.is_readonly(cfg.hydra)
    with pytest.raises(ConfigAttributeError):
        again.no_such_key = 1  # struct mode, as Hydra leaves it
    assert compose.read_composition(file.with_name("missing.pkl")) is None
    file.write_bytes(b"not a pickle")
    assert compose.read_composition(file) is None  # an unreadable entry is only a miss


RUN_SCHEDULE = (
    "import json, sys\n"
    "from respect_jax.cli.schedule import main\n"
    "sys.argv = ['respect-schedule', *sys.argv[1:]]\n"
    "main()\n"
    "print(json.dumps({'hydra': 'hydra' in sys.modules}))\n"
)


def test_a_repeated_schedule_command_runs_its_task_without_hydra(tmp_path):
    """The second identical ``respect-schedule`` plain run calls its task on the stored task config without
    importing Hydra and writes the same result; an unreadable stored task config, or a command with a
    ``${now:...}`` in its task config, goes through Hydra again (and stores nothing it cannot use)."""
    from respect_jax.cli.compose import task_file

    env = {**os.environ, "JAX_PLATFORMS": "cpu", "RESPECT_JAX_CACHE": str(tmp_path / "cache")}

    def run(*overrides: str) -> tuple[bool, dict]:
        out = tmp_path / "r.json"
        proc = subprocess.run([sys.executable, "-c", RUN_SCHEDULE, *overrides, f"out={out}"], capture_output=True,
                              text=True, env=env, cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(out.read_text())
        doc.pop("solve_time_s")
        return json.loads(proc.stdout.strip().splitlines()[-1])["hydra"], doc

    args = ("graph=data/models/vgg16.json", "solver=contiguous", "hardware.stages=3")
    runs = [run(*args) for _ in range(2)]
    assert [hydra for hydra, _ in runs] == [True, False]  # composed through Hydra, then read back without it
    assert runs[1][1] == runs[0][1]
    (stored,) = (tmp_path / "cache" / "compositions").glob("*.task.pkl")  # the commands' own (their source's key)
    assert stored == task_file(stored.with_name(stored.name.replace(".task.pkl", ".pkl")))
    stored.write_bytes(b"not a pickle")
    assert run(*args) == (True, runs[0][1])  # unreadable: Hydra runs it
    stamped = (*args, "+stamp=${now:%H-%M-%S}")
    assert [run(*stamped)[0] for _ in range(2)] == [True, True]  # ${now:} resolves per run: never read back


def test_only_a_plain_hydra_run_has_a_task_config_to_store(monkeypatch):
    """:func:`plain_hydra_run` is False as soon as Hydra's run would do more than call the task (a run folder
    elsewhere, a saved config, logging set up, environment variables set, a change of directory); a task config
    with ``${hydra:...}`` or ``${now:...}`` is not stored."""
    from omegaconf import OmegaConf, open_dict

    from respect_jax.cli.compose import composed, plain_hydra_run, task_config

    monkeypatch.setenv("RESPECT_JAX_CACHE", "off")
    with composed("test", "schedule", ["graph=g.json"], "schedule") as (_, cfg):
        assert plain_hydra_run(cfg)
        task = task_config(cfg)
        assert task is not None and "hydra" not in task and task.graph == "g.json"
        changes = {"hydra.run.dir": "elsewhere", "hydra.output_subdir": ".hydra", "hydra.job.chdir": True,
                   "hydra.job.env_set": {"X": "1"}, "hydra.job.env_copy": ["HOME"], "hydra.verbose": True,
                   "hydra.job_logging": {"version": 1, "root": {"level": "INFO"}}}
        for key, value in changes.items():
            changed = OmegaConf.create(OmegaConf.to_container(cfg))
            with open_dict(changed):
                OmegaConf.update(changed, key, value, merge=False)
            assert not plain_hydra_run(changed), key
    for extra in ("+stamp=${now:%H}", "+choice=${hydra:runtime.choices.solver}"):
        with composed("test", "schedule", ["graph=g.json", extra], "schedule") as (_, cfg):
            assert task_config(cfg) is None, extra


def test_a_stored_composition_follows_the_config_files_the_time_and_the_cache_setting(tmp_path, monkeypatch):
    """An edited preset is composed again; ``${now:...}`` resolves at the time of the run, not of the stored
    composition; ``jax_cache=off`` (or another folder) on the command line stores nothing in the default folder."""
    import shutil
    import time

    from respect_jax import resources

    conf = tmp_path / "conf"
    shutil.copytree(resources.conf_dir(), conf)
    monkeypatch.setattr(resources, "conf_dir", lambda: conf)
    cache = tmp_path / "cache"
    cfg, file = _composition(monkeypatch, cache, "train", [])
    assert cfg.train.seed != 12345
    text = (conf / "train.yaml").read_text()
    assert "\n  seed: " in text
    (conf / "train.yaml").write_text(text.replace("\n  seed: ", "\n  seed: 12345 # ", 1))
    edited, edited_file = _composition(monkeypatch, cache, "train", [])
    assert edited.train.seed == 12345 and edited_file != file
    stamp = ["+stamp=${now:%H-%M-%S}"]  # the format Hydra's default run.dir resolves while composing
    first = _composition(monkeypatch, cache, "train", stamp)[0].stamp
    time.sleep(1.1)
    second, stamp_file = _composition(monkeypatch, cache, "train", stamp)
    assert stamp_file.is_file() and second.stamp != first
    for setting in ("off", str(tmp_path / "elsewhere")):
        _, not_stored = _composition(monkeypatch, cache, "schedule", [f"jax_cache={setting}"])
        assert not not_stored.exists()


def test_respect_schedule_imports_with_the_collector_off_and_freezes_them(tmp_path):
    """``respect-schedule``'s main turns Python's cyclic collector off until the solvers are imported; then the
    objects made so far are frozen (``gc.get_freeze_count() > 0``) and the collector is on again, also after the
    command. ``imports_done`` with the collector on changes nothing (the API, tests, a sweep's later jobs)."""
    import gc

    from respect_jax.cli.schedule import imports_done

    script = (
        "import gc, json, sys\n"
        "import respect_jax.cli.schedule as cli\n"
        "seen, real = [], cli.imports_done\n"
        "cli.imports_done = lambda: (seen.append(gc.isenabled()), real(), seen.append(gc.isenabled()),\n"
        "                            seen.append(gc.get_freeze_count() > 0))\n"
        "sys.argv = ['respect-schedule', *sys.argv[1:]]\n"
        "cli.main()\n"
        "print(json.dumps({'seen': seen, 'after': gc.isenabled()}))\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "RESPECT_JAX_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", script, "graph=data/models/vgg16.json", "solver=contiguous",
                           "hardware.stages=3", f"out={tmp_path / 'r.json'}"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"seen": [False, True, True], "after": True}
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    imports_done()
    assert gc.isenabled() and gc.get_freeze_count() == frozen
