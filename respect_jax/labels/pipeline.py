"""The labelling pipeline behind ``respect-label``: solve a synthetic dataset with an oracle.

Graph ``i`` of a dataset is a pure function of ``(generator config, seed, i)``
(:func:`dataset_graph` draws it with ``np.random.default_rng([seed, i])``), so a dataset can be
produced in any order, by any number of processes, and resumed without changing a graph.

Work is split into shards: shard ``k`` holds graphs ``[k * shard_size, min((k + 1) * shard_size,
count))`` and is written atomically (:func:`~respect_jax.labels.dataset.write_shard`) once all of
its graphs are solved. A restart (after a crash, Ctrl-C or SIGKILL) skips the shards already on
disk and solves the others again, so no work is duplicated in the result and none is lost beyond
the graphs of incomplete shards. ``manifest.json`` records everything that determines the labels;
restarting into a directory whose manifest differs is refused with a one-line error instead of
mixing two datasets.

A graph the oracle does not prove optimal (time limit) can be handed to a ``fallback`` oracle,
warm-started from the first schedule (e.g. CP-SAT first, then the MILP); the record names the
solver whose schedule it keeps, and its solve time is the sum of both. ``retry_unproven`` applies
the fallback to the unproven labels of shards already written (rewriting those shards atomically),
so a finished dataset can be completed later without solving it again.

Graphs are solved in ``workers`` processes started with the ``spawn`` method (JAX is not
fork-safe). Each process limits itself to one BLAS/XLA thread and, through ``solver_threads``, the
solver to that many threads (CP-SAT ``workers``, HiGHS ``threads``), so ``workers`` processes use
about ``workers`` cores. Every record's objective is the shared evaluator's value of its
assignment (:func:`~respect_jax.solvers.base.run_solver`).
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
import itertools
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware, hardware_from_dict
from respect_jax.graphs.generators import GeneratorConfig, generate_numpy
from respect_jax.graphs.graph import Graph
from respect_jax.labels.dataset import (
    LabelledGraph,
    load_labelled_dataset,
    parse_json,
    read_manifest,
    record_to_item,
    shard_name,
    shard_paths,
    write_manifest,
    write_shard,
)

FORMAT = "respect-jax-labels/1"
# manifest keys that determine the labels: a directory whose manifest differs in any is refused
IDENTITY_KEYS = ("format", "generator", "seed", "count", "shard_size", "solver", "solver_options", "hardware",
                 "objective", "lam")
# solver options that only say how many threads to use (do not change what is being solved)
THREAD_OPTIONS = {"cpsat": "workers", "milp": "threads"}
# solver option that takes a starting schedule (the fallback is warm-started from the first schedule)
WARM_START_OPTIONS = {"cpsat": "hint", "milp": "warm_start"}
EXECUTION_OPTIONS = frozenset({"workers", "threads", "verbose", "deadline", "progress"})


class LabelError(ValueError):
    """A user error of the labelling pipeline (bad argument, mismatching directory); one line."""


def dataset_graph(generator: GeneratorConfig, seed: int, index: int) -> Graph:
    """Graph ``index`` of the dataset ``(generator, seed)``: a pure function of its arguments."""
    graph = generate_numpy(generator, np.random.default_rng([seed, index]), name=f"g{index:06d}")
    return dataclasses.replace(graph, source=f"respect-label graphs(seed={seed}, index={index})")


def shard_range(shard: int, shard_size: int, count: int) -> range:
    """Graph indices of shard ``shard``."""
    return range(shard * shard_size, min((shard + 1) * shard_size, count))


def num_shards(count: int, shard_size: int) -> int:
    return -(-count // shard_size)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabelSpec:
    """What determines a dataset's labels (the manifest's identity keys).

    ``generator``, ``count``, ``seed``: the graphs (graph i is :func:`dataset_graph` ``(generator, seed, i)``);
    ``shard_size``: graphs per shard file (the unit of atomic writes and of resumption); ``solver``,
    ``solver_options``: the oracle and its keyword options (e.g. ``time_limit_s``); ``hw``, ``objective``,
    ``lam``: the scheduling problem (the cost model of :mod:`respect_jax.costs`: ``paper`` is the bottleneck
    stage time plus ``lam`` times the bytes crossing stages, ``latency`` the sum of stage times); ``hw`` is
    required. Values are checked by :func:`label_dataset` (a bad one is a one-line :class:`LabelError`).
    """

    generator: GeneratorConfig
    count: int
    hw: Hardware | None = None
    seed: int = 0
    shard_size: int = 100
    solver: str = "cpsat"
    solver_options: dict | None = None
    objective: str = "paper"
    lam: float = 1.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabelRun:
    """How one call of :func:`label_dataset` works on a dataset (not part of its identity).

    ``workers``: solver processes (1: solve in this process). ``progress``: a tqdm bar and the summary on
    stderr. ``solver_threads``: threads per solve, set as the solver's thread option (CP-SAT ``workers``,
    HiGHS ``threads``) of the oracle and the fallback, unless None. ``fallback``, ``fallback_options``: a
    second oracle for graphs the first does not prove optimal, warm-started from the first schedule (None: no
    fallback); each record names the solver whose schedule it holds. ``retry_unproven``: also apply the
    fallback to the unproven labels of shards already written. ``shards``: ``(a, b)``: only shards
    ``a .. b-1`` (one job of a cluster run; jobs with disjoint ranges may run at the same time on one shared
    ``out_dir``); None: all shards. A job writes the manifest's summary only when it finds the whole dataset
    written.
    """

    workers: int = 1
    progress: bool = True
    solver_threads: int | None = 1
    fallback: str | None = None
    fallback_options: dict | None = None
    retry_unproven: bool = False
    shards: tuple[int, int] | None = None


def build_manifest(spec: LabelSpec) -> dict:
    """The manifest of a dataset (identity keys plus thread settings kept for the record)."""
    solver_options = spec.solver_options or {}
    identity_options = {k: v for k, v in sorted(solver_options.items()) if k not in EXECUTION_OPTIONS}
    return {
        "format": FORMAT,
        "generator": dataclasses.asdict(spec.generator),
        "seed": int(spec.seed),
        "count": int(spec.count),
        "shard_size": int(spec.shard_size),
        "solver": spec.solver,
        "solver_options": identity_options,
        "execution_options": {k: v for k, v in sorted(solver_options.items()) if k in EXECUTION_OPTIONS},
        "hardware": spec.hw.to_dict(),
        "objective": spec.objective,
        "lam": float(spec.lam),
        "graph_rng": "graph i = generate_numpy(generator, numpy.random.default_rng([seed, i]))",
    }


def _with_current_defaults(existing: dict) -> dict:
    """A stored manifest with the fields added to the generator and the solver since it was written set to
    their defaults (which describe the same dataset), so an older dataset can still be resumed and checked."""
    out = dict(existing)
    try:
        out["generator"] = dataclasses.asdict(GeneratorConfig(**existing["generator"]))
    except (KeyError, TypeError, ValueError):
        return existing  # unknown fields: compared as stored (and refused)
    try:
        resolved = resolve_solver_options(existing["solver"], existing.get("solver_options") or {})
    except (KeyError, ValueError):
        return out
    out["solver_options"] = {k: v for k, v in sorted(resolved.items()) if k not in EXECUTION_OPTIONS}
    return out


def check_manifest(directory: Path, manifest: dict) -> None:
    """Raise :class:`LabelError` (one line) if ``directory`` holds a different dataset."""
    try:
        existing = read_manifest(directory)
    except ValueError as err:
        raise LabelError(f"{directory}: unreadable manifest.json ({err})") from None
    existing = _with_current_defaults(existing)
    for key in IDENTITY_KEYS:
        if existing.get(key) != manifest[key]:
            raise LabelError(
                f"{directory} holds a different dataset: {key} is {existing.get(key)!r} there, "
                f"{manifest[key]!r} here; choose another out directory"
            )


def _validate(spec: LabelSpec, workers: int) -> None:
    for name, value, low in (("count", spec.count, 1), ("shard_size", spec.shard_size, 1), ("workers", workers, 1)):
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < low:
            raise LabelError(f"{name} must be an integer >= {low}, got {value!r}")
    seed = spec.seed
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise LabelError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(spec.generator, GeneratorConfig):
        raise LabelError("generator must be a GeneratorConfig")
    if spec.objective not in OBJECTIVES:
        raise LabelError(f"objective must be one of {', '.join(OBJECTIVES)}, got {spec.objective!r}")
    if not isinstance(spec.lam, int | float) or spec.lam < 0:
        raise LabelError(f"lam must be a non-negative number, got {spec.lam!r}")
    _validate_solver(spec.solver, spec.solver_options or {}, "solver")


def _validate_solver(solver: str, options: dict, what: str) -> None:
    from respect_jax.solvers import available_solvers, get_solver

    if solver not in available_solvers():
        raise LabelError(f"unknown {what} {solver!r}; available: {', '.join(available_solvers())}")
    params = inspect.signature(get_solver(solver)).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(options) - set(list(params)[4:]))
        if unknown:
            raise LabelError(f"{what} {solver!r} has no option {', '.join(unknown)}")


def resolve_solver_options(solver: str, options: dict) -> dict:
    """``options`` completed with the solver's defaults (so equal settings compare equal)."""
    from respect_jax.solvers import get_solver

    params = list(inspect.signature(get_solver(solver)).parameters.values())[4:]
    defaults = {
        p.name: p.default
        for p in params
        if p.default is not inspect.Parameter.empty and p.kind is not inspect.Parameter.VAR_KEYWORD
    }
    return {**defaults, **options}


# ------------------------------------------------------------------------------------------ workers

_WORKER: dict = {}


def limit_threads() -> None:
    """Keep this process to one BLAS/OpenMP/XLA thread and JAX on the CPU (call before JAX runs)."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    flags = os.environ.get("XLA_FLAGS", "")
    if "intra_op_parallelism_threads" not in flags:
        flags += " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    os.environ["XLA_FLAGS"] = flags.strip()
    os.environ["JAX_PLATFORMS"] = "cpu"


def _init_worker(task: dict, in_pool: bool) -> None:
    if in_pool:
        limit_threads()
    import respect_jax.solvers  # noqa: F401  (registers the solvers)

    _WORKER.clear()
    _WORKER.update(task)
    _WORKER["generator_cfg"] = GeneratorConfig(**task["generator"])
    _WORKER["hw"] = hardware_from_dict(task["hardware"])


def _item(index: int, graph: Graph, result: dict, solve_time_s: float) -> LabelledGraph:
    return LabelledGraph(
        index=index,
        graph=graph,
        assignment=np.asarray(result["assignment"], dtype=np.int64),
        objective=float(result["objective"]),
        optimal=result["optimal"],
        gap=None if result["gap"] is None else float(result["gap"]),
        solve_time_s=float(solve_time_s),
        solver=result["solver"],
    )


def _solve_index(index: int) -> LabelledGraph:
    """Label graph ``index`` with the oracle (and the fallback if the oracle proves nothing)."""
    from respect_jax.solvers import run_solver

    w = _WORKER
    graph = dataset_graph(w["generator_cfg"], w["seed"], index)
    result = run_solver(w["solver"], graph, w["hw"], w["objective"], w["lam"], **w["solver_options"])
    item = _item(index, graph, result, result["solve_time_s"])
    if w.get("fallback") and item.optimal is not True:
        item = _improve(item)
    return item


def _improve(item: LabelledGraph) -> LabelledGraph:
    """Re-solve an unproven label with the fallback oracle, warm-started from its schedule.

    Keeps the fallback's schedule when it is better, or proven optimal and no worse; the solve
    time is the sum of both solves either way.
    """
    from respect_jax.solvers import run_solver

    w = _WORKER
    name = w["fallback"]
    options = dict(w["fallback_options"])
    if name in WARM_START_OPTIONS:
        options[WARM_START_OPTIONS[name]] = item.assignment.tolist()
    result = run_solver(name, item.graph, w["hw"], w["objective"], w["lam"], **options)
    total = item.solve_time_s + result["solve_time_s"]
    better = result["objective"] < item.objective
    proven = result["optimal"] is True and result["objective"] <= item.objective * (1 + 1e-9)
    if better or proven:
        return _item(item.index, item.graph, result, total)
    return dataclasses.replace(item, solve_time_s=total)


# ------------------------------------------------------------------------------------------ driver


def _existing_shards(directory: Path, count: int, shard_size: int, own: range | None = None) -> set[int]:
    """Shards already written (checked to hold their full index range); removes stale temp files of the
    shards in ``own`` (all shards if None: another job of a cluster run may be writing the others)."""
    for tmp in directory.glob(".shard-*.jsonl.*"):
        try:
            shard = int(tmp.name.split("-")[1].split(".")[0])
        except (IndexError, ValueError):
            continue
        if own is None or shard in own:
            tmp.unlink(missing_ok=True)  # left by a run killed while writing: never a complete shard
    total = num_shards(count, shard_size)
    done = set()
    for path in shard_paths(directory):
        try:
            shard = int(path.stem.split("-")[1])
        except (IndexError, ValueError):
            raise LabelError(f"{path}: unexpected file name in a labelled dataset") from None
        if shard >= total:
            raise LabelError(f"{path}: shard beyond the dataset's {total} shards")
        with path.open() as fh:
            lines = sum(1 for line in fh if line.strip())
        expected = len(shard_range(shard, shard_size, count))
        if lines != expected:
            raise LabelError(f"{path}: {lines} records, expected {expected}; delete the file to redo it")
        done.add(shard)
    return done


def _pending_indices(shards: list[int], shard_size: int, count: int) -> Iterator[int]:
    for shard in shards:
        yield from shard_range(shard, shard_size, count)


def summarise(items: list[LabelledGraph]) -> dict:
    """Dataset figures: graphs, fraction proven optimal, solve times, gaps."""
    times = [it.solve_time_s for it in items]
    gaps = [it.gap for it in items if it.gap is not None]
    return {
        "graphs": len(items),
        "optimal": sum(1 for it in items if it.optimal is True),
        "optimal_fraction": (sum(1 for it in items if it.optimal is True) / len(items)) if items else 0.0,
        "mean_solve_time_s": statistics.fmean(times) if times else 0.0,
        "median_solve_time_s": statistics.median(times) if times else 0.0,
        "max_solve_time_s": max(times) if times else 0.0,
        "total_solve_time_s": float(sum(times)),
        "max_gap": max(gaps) if gaps else None,
        "mean_objective": statistics.fmean(it.objective for it in items) if items else 0.0,
        "labelled_by": dict(sorted(collections.Counter(it.solver for it in items).items())),
    }


def label_dataset(out_dir: str | os.PathLike, spec: LabelSpec, run: LabelRun | None = None) -> dict:
    """Label the graphs of ``spec`` into ``out_dir`` (resuming what is there), as ``run`` says.

    Args:
        out_dir: dataset directory (created; an existing one must hold the same dataset).
        spec: the dataset (graphs, oracle, problem): :class:`LabelSpec`.
        run: workers, threads, fallback oracle, shard range of this call: :class:`LabelRun` (default: its
            defaults).

    Returns:
        The summary of the whole dataset (:func:`summarise`; with ``run.shards``, of those shards) plus
        ``solved_now`` (graphs solved by this call), ``retried`` (stored labels given to the
        fallback), ``skipped_shards``, ``wall_time_s`` and, with ``shards``, ``shards`` and
        ``dataset_complete``.

    Raises:
        LabelError: a bad argument or a directory holding another dataset; nothing is written.
    """
    run = run or LabelRun()
    count, seed, shard_size = spec.count, spec.seed, spec.shard_size
    solver, objective, lam, hw = spec.solver, spec.objective, spec.lam, spec.hw
    workers, progress, fallback, shards = run.workers, run.progress, run.fallback, run.shards
    start = time.perf_counter()
    solver_options = dict(spec.solver_options or {})
    fallback_options = dict(run.fallback_options or {})
    if hw is None:
        raise LabelError("hardware is required")
    if run.solver_threads is not None:
        for name, options in ((solver, solver_options), (fallback, fallback_options)):
            if name in THREAD_OPTIONS:
                options[THREAD_OPTIONS[name]] = int(run.solver_threads)
    _validate(dataclasses.replace(spec, solver_options=solver_options), workers)
    if fallback is not None:
        _validate_solver(fallback, fallback_options, "fallback solver")
        fallback_options = resolve_solver_options(fallback, fallback_options)
    elif run.retry_unproven:
        raise LabelError("retry_unproven needs a fallback solver")
    solver_options = resolve_solver_options(solver, solver_options)
    manifest = build_manifest(dataclasses.replace(spec, solver_options=solver_options))
    fallback_entry = None
    if fallback is not None:
        recorded = dict(fallback_options)
        if fallback in WARM_START_OPTIONS:
            recorded[WARM_START_OPTIONS[fallback]] = "the first oracle's schedule"
        fallback_entry = {"solver": fallback, "options": recorded}
    total = num_shards(count, shard_size)
    own = range(total) if shards is None else _shard_range_arg(shards, total)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise LabelError(f"{out} exists and is not a directory")
    if shards is not None:
        _wait_for_manifest(out)  # another job of the same cluster run may be writing it right now
    if (out / "manifest.json").is_file():
        check_manifest(out, manifest)
        done = _existing_shards(out, count, shard_size, None if shards is None else own)
    elif out.is_dir() and any(out.iterdir()):
        raise LabelError(f"{out} is not empty and has no manifest.json; choose an empty or new out directory")
    else:
        write_manifest(out, {**manifest, "fallback": fallback_entry})
        done = set()
    done_here = {k for k in done if k in own}

    todo = [k for k in own if k not in done]
    retry: dict[int, list[LabelledGraph]] = {}  # shard -> its stored items (to be partly re-solved)
    if run.retry_unproven:
        for shard in sorted(done_here):
            items = load_shard(out, shard)
            if any(it.optimal is not True for it in items):
                retry[shard] = items
    already = sum(len(shard_range(k, shard_size, count)) for k in done_here)
    retried = sum(1 for items in retry.values() for it in items if it.optimal is not True)
    task = {
        "generator": manifest["generator"],
        "seed": int(seed),
        "solver": solver,
        "solver_options": solver_options,
        "fallback": fallback,
        "fallback_options": fallback_options,
        "hardware": manifest["hardware"],
        "objective": objective,
        "lam": float(lam),
    }
    pending = sum(len(shard_range(k, shard_size, count)) for k in todo)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=sum(len(shard_range(k, shard_size, count)) for k in own), initial=already - retried,
                   desc=f"labelling {out.name}", unit="graph", file=sys.stderr, dynamic_ncols=True)
    try:
        if pending or retried:
            _run(out, todo, retry, shard_size, count, task, min(workers, pending + retried), bar)
    finally:
        if bar is not None:
            bar.close()
    complete = len(_existing_shards(out, count, shard_size, range(0))) == total
    if shards is None:
        items = load_labelled_dataset(out)
        summary = summarise(items)
    else:
        summary = summarise([it for k in own for it in load_shard(out, k)])
        summary.update(shards=[own.start, own.stop], dataset_complete=complete)
        items = load_labelled_dataset(out) if complete else []
    summary.update(solved_now=pending, retried=retried, skipped_shards=len(done_here),
                   wall_time_s=time.perf_counter() - start)
    if (pending or retried) and complete:  # record the dataset's figures and this run beside what produced it
        existing = read_manifest(out)
        run = {"solved": pending, "retried": retried, "workers": workers, "fallback": fallback,
               "wall_time_s": summary["wall_time_s"]}
        if shards is not None:  # the job that completed a cluster run; the other jobs record no run
            run["shards"] = [own.start, own.stop]
        updated = {**existing, "summary": summarise(items), "runs": [*existing.get("runs", []), run]}
        if fallback_entry is not None:
            updated["fallback"] = fallback_entry
        write_manifest(out, updated)
    if progress:
        print(format_summary(out, summary), file=sys.stderr)
    return summary


def _shard_range_arg(shards, total: int) -> range:
    """``(a, b)`` -> ``range(a, b)`` if ``0 <= a < b <= total``, else :class:`LabelError`."""
    try:
        a, b = (int(v) for v in shards)
    except (TypeError, ValueError):
        raise LabelError(f"shards must be a pair (first, end), got {shards!r}") from None
    if not 0 <= a < b <= total:
        raise LabelError(f"shards {a}:{b} must satisfy 0 <= first < end <= {total} (the dataset's shards)")
    return range(a, b)


def _wait_for_manifest(out: Path, timeout_s: float = 30.0) -> None:
    """Wait while ``out`` holds only the temp file of a manifest another job is writing."""
    deadline = time.monotonic() + timeout_s
    while (
        out.is_dir()
        and not (out / "manifest.json").is_file()
        and any(p.name.startswith(".manifest.json.") for p in out.iterdir())
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)


def load_shard(directory: Path, shard: int) -> list[LabelledGraph]:
    """The records of one shard file, in file order."""
    path = directory / shard_name(shard)
    with path.open() as fh:
        return [record_to_item(parse_json(line, f"{path}:{n}"), origin=f"{path}:{n}") for n, line in enumerate(fh, 1)
                if line.strip()]


def _run(out: Path, todo: list[int], retry: dict[int, list[LabelledGraph]], shard_size: int, count: int,
         task: dict, workers: int, bar) -> None:
    """Solve the graphs of shards ``todo`` and the unproven items of ``retry``; write each shard
    (atomically) as soon as all of its graphs are labelled."""
    buffers: dict[int, dict[int, LabelledGraph]] = {k: {} for k in todo}
    jobs: list[tuple] = []
    for shard, items in retry.items():
        buffers[shard] = {it.index: it for it in items if it.optimal is True}
        jobs += [(_improve, it) for it in items if it.optimal is not True]
    jobs_iter = itertools.chain(jobs, ((_solve_index, i) for i in _pending_indices(todo, shard_size, count)))

    def collect(item: LabelledGraph) -> None:
        shard = item.index // shard_size
        buffers[shard][item.index] = item
        if len(buffers[shard]) == len(shard_range(shard, shard_size, count)):
            write_shard(out, shard, [buffers[shard][i] for i in shard_range(shard, shard_size, count)])
            del buffers[shard]
        if bar is not None:
            bar.update(1)

    if workers == 1:
        _init_worker(task, in_pool=False)
        for fn, arg in jobs_iter:
            collect(fn(arg))
        return
    ctx = multiprocessing.get_context("spawn")
    window = 4 * workers  # tasks in flight: bounds memory and keeps shards completing in order
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(task, True))
    in_flight: set[Future] = set()
    try:
        for fn, arg in jobs_iter:
            in_flight.add(pool.submit(fn, arg))
            if len(in_flight) >= window:
                finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                for fut in finished:
                    collect(fut.result())
        while in_flight:
            finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
            for fut in finished:
                collect(fut.result())
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def format_summary(out: Path, s: dict) -> str:
    """The closing summary lines of a labelling run."""
    where = f"{out} shards {s['shards'][0]}:{s['shards'][1]}" if "shards" in s else str(out)
    return (
        f"{where}: {s['graphs']} graphs ({s['solved_now']} solved now, {s['retried']} retried, "
        f"{s['skipped_shards']} shards resumed), "
        f"{100.0 * s['optimal_fraction']:.1f}% proven optimal, solve time mean {s['mean_solve_time_s']:.3f}s "
        f"median {s['median_solve_time_s']:.3f}s max {s['max_solve_time_s']:.2f}s, "
        f"total solve {s['total_solve_time_s']:.1f}s, wall {s['wall_time_s']:.1f}s"
    )


__all__ = [
    "FORMAT",
    "LabelError",
    "LabelRun",
    "LabelSpec",
    "build_manifest",
    "check_manifest",
    "dataset_graph",
    "format_summary",
    "label_dataset",
    "limit_threads",
    "load_shard",
    "num_shards",
    "resolve_solver_options",
    "shard_name",
    "shard_range",
    "summarise",
]
