"""``respect-schedule``: schedule one graph with one solver and write RESULT.json (SPEC section 4), or many
graphs (a folder or a glob) with one RESULT.json each.

Examples::

    respect-schedule graph=data/models/resnet50.json solver=cpsat hardware.stages=4 \
        objective=paper out=result.json
    respect-schedule graph=data/models solver=policy out_dir=results/   # one RESULT per graph + summary.jsonl
    respect-schedule graph=data/models/vgg16.json out=vgg16.json plot=true   # + vgg16.png, the schedule's figure

With many graphs a learned solver schedules ``batch_size`` graphs of one size bucket per compiled call
(:func:`respect_jax.solvers.base.run_solver_many`); the others run one graph at a time. JAX's persistent
compilation cache (``jax_cache``) is on, so a later call on a graph of the same bucket does not compile again.
"""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from respect_jax import api
from respect_jax.cli.common import (
    CONF_DIR,
    check_group_choices,
    dump_json,
    hardware_from_cfg,
    job_file,
    job_path,
    setup_compilation_cache,
    shipped_path,
    user_errors_exit,
)
from respect_jax.graphs.graph import load_graph, write_json_atomic, write_text_atomic

#: characters that make ``graph=`` a glob pattern
GLOB_CHARS = "*?["
#: file name of the per-graph summary written beside the RESULT files of many graphs
SUMMARY_NAME = "summary.jsonl"


def _problem(cfg: DictConfig):
    """(hardware, objective, lam, solver options) of the command, checked; registers the solvers."""
    api.register_solvers(learned=cfg.solver.name in api.LEARNED_SOLVERS)
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


def is_many(graph: str) -> bool:
    """Whether ``graph=`` names many graphs: a folder or a glob pattern."""
    return Path(graph).is_dir() or any(c in graph for c in GLOB_CHARS)


def graph_files(graph: str) -> list[Path]:
    """The graph files ``graph=`` names, sorted: a file, the ``*.json`` files of a folder, or a glob's matches.

    One-line ValueError when there are none or two share a file name (their RESULT files would collide).
    """
    path = Path(graph)
    if path.is_dir():
        files = sorted(p for p in path.glob("*.json") if p.is_file())
        if not files:
            raise ValueError(f"graph folder {graph} holds no .json graph files")
    elif any(c in graph for c in GLOB_CHARS):
        files = sorted(Path(p) for p in glob.glob(graph) if Path(p).is_file())
        if not files:
            raise ValueError(f"graph pattern {graph} matches no files")
    else:
        files = [path]
    stems: dict[str, Path] = {}
    for f in files:
        if f.stem in stems:
            raise ValueError(f"two graph files are named {f.name} ({stems[f.stem].parent}, {f.parent}): their "
                             "RESULT files would collide")
        stems[f.stem] = f
    return files


def schedule_many(cfg: DictConfig, files: list[Path]) -> list[dict]:
    """The RESULT.json document of every graph file (in order): a learned solver in batches of
    ``batch_size`` graphs per size bucket, any other solver one graph at a time."""
    from respect_jax.solvers.base import run_solver_many

    hw, objective, lam, options = _problem(cfg)
    if not isinstance(cfg.batch_size, int) or isinstance(cfg.batch_size, bool) or cfg.batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {cfg.batch_size!r}")
    graphs = [load_graph(f) for f in files]
    return run_solver_many(cfg.solver.name, graphs, hw, objective, lam, batch_size=cfg.batch_size, **options)


def summary_row(file: Path, result: dict) -> dict:
    """One line of ``summary.jsonl``: which file, the objective, and the times of its RESULT."""
    info = result.get("info") or {}
    return {
        "file": str(file),
        "result": f"{file.stem}.json",
        "graph": result["graph"],
        "num_nodes": result["num_nodes"],
        "solver": result["solver"],
        "objective_name": result["objective_name"],
        "objective": result["objective"],
        "optimal": result["optimal"],
        "solve_time_s": result["solve_time_s"],
        "compile_s": info.get("compile_s"),
    }


def write_many(results: list[dict], files: list[Path], out_dir: Path | None) -> None:
    """``out_dir/<graph file stem>.json`` per graph and ``out_dir/summary.jsonl``; without ``out_dir``,
    every RESULT document as one JSON line on stdout."""
    if out_dir is None:
        for result in results:
            print(json.dumps(result))
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    for file, result in zip(files, results, strict=True):
        write_json_atomic(result, out_dir / f"{file.stem}.json")
    lines = [json.dumps(summary_row(f, r)) for f, r in zip(files, results, strict=True)]
    write_text_atomic("\n".join(lines) + "\n", out_dir / SUMMARY_NAME)


def many_summary(results: list[dict], out_dir: Path | None) -> str:
    """One line for stderr: how many graphs, the scheduling and the set-up time."""
    solve = sum(r["solve_time_s"] for r in results)
    compiles = {}
    for r in results:  # a bucket's compile time is shared by its graphs: count it once per bucket
        info = r.get("info") or {}
        if info.get("compile_s") is not None:
            compiles[tuple(info.get("bucket") or ())] = float(info["compile_s"])
    compile_part = f", compile {sum(compiles.values()):.2f}s ({len(compiles)} bucket(s))" if compiles else ""
    where = f" -> {out_dir}" if out_dir is not None else ""
    return (
        f"{results[0]['solver']} on {len(results)} graphs (K={results[0]['hardware']['stages']}): schedule "
        f"{solve:.3f}s ({1000 * solve / len(results):.2f} ms/graph, {len(results) / max(solve, 1e-12):.0f} graphs/s)"
        f"{compile_part}{where}"
    )


def _within_trained_k(trained: dict, result: dict) -> bool:
    """The checkpoint was trained across stage counts (``trained_across``) spanning the K scheduled for."""
    across = trained.get("trained_across") or {}
    ks = across.get("stages_choices") or [across.get("stages_min"), across.get("stages_max")]
    ks = [int(k) for k in ks if k is not None]
    return bool(ks) and min(ks) <= int(result["hardware"]["stages"]) <= max(ks)


def training_mismatch(result: dict) -> str | None:
    """A learned solver's checkpoint trained for another objective, lam or stage count than it scheduled for
    (it still schedules, validly; the results of such transfers are usually worse): one line, else None."""
    trained = (result.get("info") or {}).get("trained_on")
    if not trained:
        return None
    differ = []
    if trained["objective"] != result["objective_name"]:
        differ.append(f"objective {trained['objective']} (here {result['objective_name']})")
    if result["objective_name"] == "paper" and float(trained["lam"]) != float(result["lam"]):
        differ.append(f"lam {trained['lam']} (here {result['lam']})")
    k_here = int(result["hardware"]["stages"])
    if int(trained["hardware"]["stages"]) != k_here and not _within_trained_k(trained, result):
        differ.append(f"K={trained['hardware']['stages']} (here K={result['hardware']['stages']})")
    if not differ:
        return None
    return f"the checkpoint was trained for {', '.join(differ)}; a checkpoint trained for this problem may do better"


def _setup_text(result: dict) -> str:
    """`` (compile 1.23s, not in time)`` when the solver reported compilation (not in ``solve_time_s``), else empty."""
    compile_s = (result.get("info") or {}).get("compile_s")
    return f" (compile {compile_s:.2f}s, not in time)" if compile_s is not None else ""


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


@hydra.main(config_path=CONF_DIR, config_name="schedule", version_base="1.3")
@user_errors_exit("respect-schedule")
def _main(cfg: DictConfig) -> None:
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
            f"time={result['solve_time_s']:.3f}s{_setup_text(result)} -> {out}"
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


def main() -> None:
    check_group_choices("respect-schedule", ("hardware", "solver"), config="schedule")
    _main()


if __name__ == "__main__":
    main()
