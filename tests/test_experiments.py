"""Issue 6: every experiment config composes and runs end to end in a tiny setting; respect-tables
gathers a real 2-job sweep; the ablation presets compose."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import experiment_script
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from respect_jax.cli.common import CONF_DIR, experiment_from_cfg
from respect_jax.experiments import run_experiment
from respect_jax.graphs.graph import load_graph
from respect_jax.reference import reference_objective

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml"))
ABLATIONS = sorted(p.stem for p in (ROOT / "conf" / "ablation").glob("*.yaml"))


def tiny_cfg(name: str, tmp_path: Path, overrides: list[str], keep_methods: tuple[str, ...] | None = None):
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = compose("paper", overrides=[f"experiment={name}", f"out_dir={tmp_path}", "progress=false", *overrides])
    if keep_methods is not None:
        OmegaConf.set_struct(cfg, False)
        for label in list(cfg.experiment.methods):
            if label not in keep_methods:
                del cfg.experiment.methods[label]
    return cfg


def test_every_experiment_config_composes():
    assert {"real_models", "generalisation", "warm_start", "training_curves"} <= set(EXPERIMENTS)
    for name in EXPERIMENTS:
        with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
            cfg = compose("paper", overrides=[f"experiment={name}"])
        OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
        assert cfg.experiment.name == name


def test_real_models_tiny_end_to_end(tmp_path):
    cfg = tiny_cfg(
        "real_models", tmp_path,
        ["experiment.models=[vgg16]", "experiment.stages=[3]", "experiment.bar_models=[vgg16]",
         "experiment.bar_stages=3", "experiment.methods.milp.options.time_limit_s=20"],
        keep_methods=("compiler", "profiling", "policy_greedy", "milp"),
    )
    doc = run_experiment(*experiment_from_cfg(cfg))
    graph = load_graph(ROOT / "data" / "models" / "vgg16.json")
    hw = OmegaConf.to_container(cfg.hardware, resolve=True)
    from respect_jax.costs import hardware_from_dict

    hw = hardware_from_dict({**hw, "stages": 3})
    recs = {r["method"]: r for r in doc["records"]}
    assert set(recs) == {"compiler", "profiling", "policy_greedy", "milp"}
    assert recs["milp"]["optimal"] is True and recs["milp"]["gap_pct"] == 0.0
    for r in recs.values():  # every figure re-derived with the loop reference evaluator
        ref = reference_objective(graph, r["assignment"], hw, "paper")
        assert r["objective"] == pytest.approx(ref, rel=1e-5)
        assert r["gap_pct"] == pytest.approx(100 * (r["objective"] / recs["milp"]["objective"] - 1), abs=1e-9)
        assert r["gap_pct"] >= -1e-4  # nobody beats a proven optimum
        assert r["speedup"] == pytest.approx(recs["compiler"]["bottleneck_s"] / r["bottleneck_s"])
        assert r["first_call_s"] is None or r["first_call_s"] > 0
    for name in ("real_models.md", "real_models.json", "stage_memory.png", "pareto.png"):
        assert (tmp_path / name).stat().st_size > 0
    md = (tmp_path / "real_models.md").read_text()
    assert "| vgg16 | 19 | 3 | milp |" in md and "Table 2" in md
    assert json.loads((tmp_path / "real_models.json").read_text())["machine"]["cpu_count"] >= 1


def test_generalisation_tiny_end_to_end(tmp_path):
    cfg = tiny_cfg(
        "generalisation", tmp_path,
        ["experiment.families=[respect,dnn]", "experiment.sizes=[10]", "experiment.graphs_per_size=2",
         "hardware.stages=3", "experiment.methods.cpsat.options.time_limit_s=20"],
        keep_methods=("compiler", "policy_greedy", "cpsat"),
    )
    doc = run_experiment(*experiment_from_cfg(cfg))
    assert len(doc["records"]) == 2 * 2 * 3
    for graph in {r["graph"] for r in doc["records"]}:
        recs = {r["method"]: r for r in doc["records"] if r["graph"] == graph}
        assert recs["cpsat"]["optimal"] and recs["cpsat"]["gap_pct"] == 0.0  # 10 nodes: proven
        assert min(r["gap_pct"] for r in recs.values()) == 0.0
        assert all(r["reference_proven"] for r in recs.values())
    assert (tmp_path / "generalisation.png").stat().st_size > 0
    assert "| dnn | 10 | 2 (2) | cpsat |" in (tmp_path / "generalisation.md").read_text()


def test_warm_start_tiny_end_to_end(tmp_path):
    cfg = tiny_cfg(
        "warm_start", tmp_path,
        ["experiment.sizes=[10]", "experiment.graphs_per_size=1", "experiment.models=[]", "hardware.stages=3",
         "experiment.start_method.options.samples=4"],
    )
    doc = run_experiment(*experiment_from_cfg(cfg))
    recs = doc["records"]
    assert {(r["solver"], r["start"]) for r in recs} == {(s, t) for s in ("milp", "cpsat")
                                                         for t in ("none", "heuristic", "policy")}
    optimum = recs[0]["objective"]
    for r in recs:  # every run proves the same optimum, never worse than its start
        assert r["optimal"] and r["objective"] == pytest.approx(optimum, rel=1e-6)
        assert r["objective"] <= r["start_objective"] * (1 + 1e-6)
    assert "none/policy" in (tmp_path / "warm_start.md").read_text()


def test_training_curves_from_shipped_checkpoint(tmp_path):
    cfg = tiny_cfg("training_curves", tmp_path, [])
    doc = run_experiment(*experiment_from_cfg(cfg))
    assert set(doc["runs"]) == {"respect_k4_paper", "respect_pointer_k4_paper"}
    for metrics in doc["runs"].values():
        assert metrics[-1]["step"] == max(r["step"] for r in metrics)
        assert np.all(np.diff([r["cum_wall_s"] for r in metrics]) > 0)
    assert (tmp_path / "training_curves.png").stat().st_size > 0


def run_main(main, argv: list[str], monkeypatch) -> int:
    """Run a Hydra entry point in this process (no interpreter start-up); its exit status."""
    monkeypatch.setattr(sys, "argv", ["prog", *argv])
    monkeypatch.chdir(ROOT)
    try:
        main()
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


def paper_main():
    return experiment_script("paper").main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["experiment=real_models", "experiment.models=[no_such_model]"],
         "model 'no_such_model': no graph file data/models/no_such_model.json"),
        (["experiment=real_models", "experiment.models=[]"], "experiment.models is empty: nothing to run"),
        (["experiment=real_models", "+experiment.methods.gumbel.options.stepz=3"],
         "method 'gumbel': solver gumbel: unknown option(s) stepz; it takes "),
        (["experiment=generalisation", "experiment.graphs_per_size=0"], "experiment.graphs_per_size must be >= 1"),
    ],
)
def test_bad_experiment_input_is_a_one_line_error(tmp_path, monkeypatch, capsys, args, message):
    """Checked before any method runs: nothing is written."""
    assert run_main(paper_main(), [*args, f"out_dir={tmp_path / 'out'}"], monkeypatch) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"experiments/paper.py: error: {message}"), lines
    assert not (tmp_path / "out").exists()


def test_readme_and_results_record_are_generated_from_the_result_files(capsys):
    """README.md and experiments/RESULTS.md hold exactly what experiments/readme_results.py generates from
    experiments/results/ (a result file changed without regenerating them fails here)."""
    module = experiment_script("readme_results")
    assert module.main(["--check"]) == 0, capsys.readouterr().out


def test_result_stems_keep_dots_and_run_labels_stay_distinct():
    from respect_jax.experiments.report import result_stem, with_extension
    from respect_jax.experiments.training_curves import run_names

    assert with_extension(result_stem("out/run_v1.5"), ".json") == Path("out/run_v1.5.json")
    assert with_extension(result_stem("out/run.md"), ".png") == Path("out/run.png")
    assert run_names(["a/x", "b/x", "c/y"]) == ["a/x", "b/x", "y"]


@pytest.mark.parametrize("name", ABLATIONS)
def test_ablation_presets_compose_with_a_sweep(name):
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = compose("train", overrides=[f"+ablation={name}"], return_hydra_config=True)
    params = cfg.hydra.sweeper.params
    assert params and all("," in str(v) for v in params.values())  # each preset sweeps >= 2 values


def test_respect_tables_on_a_two_job_sweep(tmp_path, monkeypatch, capsys):
    """A real 2-job respect-train sweep (Hydra's basic launcher, in this process), then respect-tables."""
    from respect_jax.cli import tables, train

    runs = tmp_path / "runs"
    argv = [
        "-m", "policy=small", "policy.layers=0", "algorithm=imitation",
        "train.seed=0,1", "train.steps=2", "train.steps_per_epoch=1", "train.batch_size=4", "train.checkpoint_every=2",
        "train.eval_graphs=0", "dataset_limit=16", "progress=false",
        f"run_dir={runs}/seed_${{train.seed}}", f"hydra.sweep.dir={tmp_path / 'multirun'}",
    ]
    assert run_main(train.main, argv, monkeypatch) == 0, capsys.readouterr().err[-2000:]
    # two more folders: a run stopped before its planned steps, and a job that failed before logging
    from omegaconf import OmegaConf

    for source, name, seed, steps, metrics in (("seed_1", "seed_10", 10, 4, True), ("seed_0", "seed_2", 2, 2, False)):
        shutil.copytree(runs / source, runs / name)
        cfg = OmegaConf.load(runs / name / "config.yaml")
        cfg.train.seed, cfg.train.steps = seed, steps
        OmegaConf.save(cfg, runs / name / "config.yaml")
        if not metrics:
            (runs / name / "metrics.jsonl").unlink()
    assert run_main(tables.main, [f"runs={runs}"], monkeypatch) == 0, capsys.readouterr().err[-2000:]
    table = json.loads((runs / "summary.json").read_text())
    assert table["swept"] == ["train.seed", "train.steps"]
    assert [(r["run"], r["train.seed"], r["status"], r["steps"]) for r in table["rows"]] == [
        ("seed_0", 0, "complete", 2),
        ("seed_1", 1, "complete", 2),
        ("seed_2", 2, "no metrics (failed or not started)", 0),
        ("seed_10", 10, "stopped at 2/4", 2),  # numbers sort by value
    ]
    for row in table["rows"][:2]:
        assert row["final_loss"] > 0 and row["graphs_per_s"] > 0
    md = (runs / "summary.md").read_text()
    assert "| seed_0 | 0 | 2 | complete | 2 |" in md and "| seed_10 | 10 | 4 | stopped at 2/4 | 2 |" in md


def test_respect_tables_rejects_a_folder_without_runs(tmp_path, monkeypatch, capsys):
    from respect_jax.cli import tables

    assert run_main(tables.main, [f"runs={tmp_path}"], monkeypatch) == 2
    err = capsys.readouterr().err
    assert "no respect-train runs" in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_ablation_preset_runs_under_submitit_local(tmp_path):
    """The SLURM path without SLURM: an ablation preset through Hydra's submitit_local launcher."""
    import subprocess

    runs = tmp_path / "runs"
    cmd = [
        sys.executable, "-m", "respect_jax.cli.train", "-m", "+ablation=encoder_depth", "hydra/launcher=submitit_local",
        "policy=small", "policy.layers=0,1", "train.steps=2", "train.steps_per_epoch=1", "train.batch_size=4",
        "train.checkpoint_every=2", "train.eval_graphs=0", "eval_dataset=null", "dataset_limit=16", "progress=false",
        f"run_dir={runs}/layers_${{policy.layers}}", f"hydra.sweep.dir={tmp_path / 'multirun'}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = subprocess.run([sys.executable, "-m", "respect_jax.cli.tables", f"runs={runs}"], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = json.loads((runs / "summary.json").read_text())
    assert table["swept"] == ["policy.layers"]
    rows = [(r["run"], r["policy.layers"], r["steps"]) for r in table["rows"]]
    assert rows == [("layers_0", 0, 2), ("layers_1", 1, 2)]


@pytest.mark.parametrize("seed", range(3))
def test_best_contiguous_split_equals_brute_force_over_contiguous_valid_schedules(seed):
    """experiments/contiguous_optimum.py: every contiguous split of the SPEC order, and the best by the shared
    evaluator equals the best contiguous schedule among all valid ones scored by the NumPy reference."""
    from math import comb

    from conftest import make_hw

    from respect_jax.graphs import GeneratorConfig, generate_numpy
    from respect_jax.graphs.padded import pad_graph
    from respect_jax.reference import enumerate_valid_schedules

    script = experiment_script("contiguous_optimum")
    rng = np.random.default_rng(seed)
    graph = generate_numpy(GeneratorConfig(mode="respect" if seed % 2 == 0 else "dnn", min_nodes=6, max_nodes=8),
                           rng, name=f"c{seed}")
    hw, n, order = make_hw(3), graph.num_nodes, graph.topological_order()
    splits = script.all_splits(n, hw.stages)
    assert len(splits) == comb(n + hw.stages - 1, hw.stages - 1) == len({s.tobytes() for s in splits})
    assert np.all(np.diff(splits, axis=1) >= 0) and splits.min() == 0 and splits.max() == hw.stages - 1
    for objective in ("paper", "latency"):
        value, stage = script.best_split(pad_graph(graph), n, hw, objective, 1.0)
        schedules = enumerate_valid_schedules(graph, hw.stages)
        contiguous = [a for a in schedules if np.all(np.diff(np.asarray(a)[order]) >= 0)]
        best = min(reference_objective(graph, a, hw, objective) for a in contiguous)
        assert value == pytest.approx(best, rel=1e-5)
        assignment = np.empty(n, np.int64)
        assignment[order] = stage
        assert reference_objective(graph, assignment, hw, objective) == pytest.approx(value, rel=1e-5)
