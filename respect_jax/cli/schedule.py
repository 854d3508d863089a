"""``respect-schedule``: schedule one graph with one solver and write RESULT.json (the graph, solver, objective
and its value, the stage of every node, the cost-model metrics, the hardware, lam, the schedule time, whether
the solver proved optimality and its gap, the solver's info), or many graphs (a folder or a glob) with one
RESULT.json each and a ``summary.jsonl``.

Examples::

    respect-schedule graph=data/models/resnet50.json solver=cpsat hardware.stages=4 \
        objective=paper out=result.json
    respect-schedule graph=data/models solver=policy out_dir=results/   # one RESULT per graph + summary.jsonl
    respect-schedule graph=data/models/vgg16.json out=vgg16.json plot=true   # + vgg16.png, the schedule's figure

With many graphs a learned solver schedules ``batch_size`` graphs of one size bucket per compiled call
(:func:`respect_jax.solvers.base.run_solver_many`); the others run one graph at a time. JAX's persistent
compilation cache (``jax_cache``) is on, so a later call on a graph of the same bucket does not compile again.
The scheduling is :func:`respect_jax.api.schedule` and :mod:`respect_jax.schedule_files`; this file reads the config.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from respect_jax import api
from respect_jax.cli.common import (
    dump_json,
    hardware_from_cfg,
    job_file,
    job_path,
    run_command,
    setup_compilation_cache,
    shipped_path,
    user_errors_exit,
)
from respect_jax.cli.compose import hydra_entry
from respect_jax.graphs.graph import load_graph, write_json_atomic
from respect_jax.schedule_files import graph_files, is_many, many_summary, setup_text, training_mismatch, write_many


def _problem(cfg: DictConfig):
    """(hardware, objective, lam, solver options) of the command, checked; registers the solvers (and ends
    :func:`main`'s import phase: :func:`imports_done`)."""
    api.register_solvers(learned=cfg.solver.name in api.LEARNED_SOLVERS)
    imports_done()
    api.check_objective(cfg.objective)
    hw = hardware_from_cfg(cfg.hardware)
    options = OmegaConf.to_container(cfg.solver.options, resolve=True) if cfg.solver.get("options") else {}
    return hw, cfg.objective, float(cfg.lam), options


def schedule(cfg: DictConfig) -> dict:
    """Run the configured solver on the configured graph through the Python API (:func:`respect_jax.api.schedule`);
    return the RESULT.json document."""
    hw, objective, lam, options = _problem(cfg)
    graph = api.load_graph(cfg.graph)
    return api.schedule(graph, hw, solver=cfg.solver.name, objective=objective, lam=lam, **options).to_dict()


def schedule_many(cfg: DictConfig, files: list[Path]) -> list[dict]:
    """The RESULT.json document of every graph file (in order): a learned solver in batches of
    ``batch_size`` graphs per size bucket (null: the solver's own default), any other solver one graph at a time."""
    from respect_jax.solvers.base import run_solver_many

    hw, objective, lam, options = _problem(cfg)
    batch_size = cfg.batch_size
    if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1):
        raise ValueError(f"batch_size must be an integer >= 1 or null (the solver's own), got {batch_size!r}")
    graphs = [load_graph(f) for f in files]
    return run_solver_many(cfg.solver.name, graphs, hw, objective, lam, batch_size=batch_size, **options)


def plot_wanted(cfg: DictConfig, where: Path | None, what: str) -> bool:
    """``plot=true``: a PNG beside each RESULT.json (needs ``where``, the out/out_dir), checked up front."""
    plot = cfg.get("plot", False)
    if not isinstance(plot, bool):
        raise ValueError(f"plot must be true or false, got {plot!r}")
    if plot and where is None:
        raise ValueError(f"plot=true writes a PNG beside each RESULT.json: set {what}")
    return plot


def write_plot(graph_file: str | Path, result: dict, png: Path) -> None:
    """The schedule figure (:func:`respect_jax.viz.plot_result`) of ``result`` as ``png``."""
    from respect_jax.viz import plot_result, save_png

    save_png(plot_result(api.load_graph(graph_file), result), png)  # a shipped data/... graph too


@user_errors_exit("respect-schedule")
def _task(cfg: DictConfig) -> None:
    setup_compilation_cache(cfg)
    if is_many(str(shipped_path(cfg.graph))) or cfg.get("out_dir") is not None:
        _main_many(cfg)
        return
    out = job_file(cfg, "out", None)  # in a sweep: an out two jobs would share is refused up front
    plot = plot_wanted(cfg, out, "out=RESULT.json")
    result = schedule(cfg)
    note = training_mismatch(result)
    if note:
        print(f"respect-schedule: note: {note}", file=sys.stderr)
    if out is not None:
        write_json_atomic(result, out)
        if plot:
            write_plot(cfg.graph, result, out.with_suffix(".png"))
        print(
            f"{result['solver']} on {result['graph']} ({result['num_nodes']} nodes, K={result['hardware']['stages']}): "
            f"{result['objective_name']}={result['objective']:.6g} optimal={result['optimal']} "
            f"time={result['solve_time_s']:.3f}s{setup_text(result)} -> {out}"
            f"{' and ' + str(out.with_suffix('.png')) if plot else ''}",
            file=sys.stderr,
        )
    else:
        print(dump_json(result))


def _main_many(cfg: DictConfig) -> None:
    """Many graphs (``graph=`` a folder or a glob, or ``out_dir=`` set): one RESULT per graph."""
    if cfg.get("out") is not None:
        raise ValueError("with many graphs (a folder or a glob) set out_dir= (one RESULT.json per graph), not out=")
    files = graph_files(str(shipped_path(cfg.graph)))  # data/models: the shipped folder, from any directory
    out_dir = job_path(cfg, "out_dir")
    if out_dir is not None and any(f.parent.resolve() == out_dir.resolve() for f in files):
        raise ValueError(f"out_dir={out_dir} is the folder of the graphs: the RESULT files would be read as graphs")
    plot = plot_wanted(cfg, out_dir, "out_dir=")
    results = schedule_many(cfg, files)
    notes = {n for n in (training_mismatch(r) for r in results) if n}
    for note in sorted(notes):
        print(f"respect-schedule: note: {note}", file=sys.stderr)
    write_many(results, files, out_dir)
    if plot:
        for file, result in zip(files, results, strict=True):
            write_plot(file, result, out_dir / f"{file.stem}.png")
    print(many_summary(results, out_dir), file=sys.stderr)


_main = hydra_entry(_task, "schedule")  # @hydra.main(config_name="schedule"), Hydra imported only when it runs


def imports_done() -> None:
    """The end of :func:`main`'s import phase, run once the solvers (JAX with the learned ones) are imported: the
    objects made so far (modules, functions, JAX's tables) go to the cyclic collector's permanent generation
    (``gc.freeze``) and the collector, off since :func:`main` started, is on again. Its full collections then skip
    them: importing JAX, flax and orbax with the collector on cost ~0.2 s more CPU (1.30 -> 1.11 s, 2-core CPU),
    about a tenth of a ``respect-schedule solver=policy`` call. Nothing to do when the collector is on (the Python
    API, tests, a later job of a sweep)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def main() -> None:
    gc.disable()  # until imports_done: the imports make no garbage worth a collection
    try:
        run_command("respect-schedule", ("hardware", "solver"), "schedule", _main, without_hydra=True)
    finally:
        gc.enable()


if __name__ == "__main__":
    main()
