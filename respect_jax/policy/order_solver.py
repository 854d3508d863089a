"""``solver=order_policy``: the learned order policy behind the common solver signature.

The network scores the nodes in one forward pass, the scores give a topological order and the exact
contiguous programme splits it (:mod:`respect_jax.policy.order`). ``samples > 0`` also splits that many
orders of the scores plus Gaussian noise (``noise``, in stage units 1/K) and keeps the best. The policy is
never seeded with another solver's schedule. One network serves every K, hardware and objective.

Options (conf/solver/order_policy.yaml): ``checkpoint`` (default: the shipped one), ``samples``, ``noise``,
``seed``, ``local_search`` (hill-climbing moves on the best split, 0: none; never worse), ``ls_moves`` (their
neighbourhood: ``closure`` or ``single``), ``ls_screen`` / ``ls_escapes`` (``single``: closure moves screened out of
single-move local optima; :func:`respect_jax.local_search.polish`), ``ls_boundaries`` (rounds of stage-boundary re-cuts
by minimum cuts after the polish, then the polish again where they changed the schedule:
:func:`respect_jax.local_search.refine_boundaries`; None: 2 with the ``single`` polish, 0 otherwise; never worse).
``info`` holds ``compile_s`` (the forward pass's and local search's compilations of new shapes) / ``load_s`` apart
from the scheduling time and the winning candidate (``candidate``: 0 the greedy order, i >= 1 sample i). This is also
``solver=policy``'s default (:mod:`respect_jax.policy.solver`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import inspect
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import bucket_shape
from respect_jax.local_search import (
    BOUNDARY_ROUNDS,
    POLISH_MOVES,
    compile_polish,
    load_max_flow,
    polish_many,
    refine_boundaries,
)
from respect_jax.policy.order import (
    as_network,
    decode_many,
    default_aggregation,
    forward_executable,
    forward_plan,
    forward_ready,
    is_order_checkpoint,
    load_order_network,
    make_batch,
    predict_scores,
)
from respect_jax.resources import data_path
from respect_jax.solvers.base import SolveResult, register_solver
from respect_jax.solvers.rebalance import rebalance_many
from respect_jax.solvers.stopping import Stopped
from respect_jax.solvers.window import load_cp_sat, window_needed, window_search

DEFAULT_ORDER_CHECKPOINT = data_path("checkpoints", "order_policy")
_compiled_shapes: set[tuple] = set()


def _checked(objective: str, samples: int, noise: float, local_search: int, ls_moves: str = "closure",
             ls_screen: int = 0, ls_escapes: int = 0, ls_boundaries: int | None = None,
             ls_rebalance: int | None = None) -> None:
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if int(samples) < 0:
        raise ValueError(f"samples must be >= 0, got {samples}")
    if not float(noise) >= 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    if int(local_search) < 0:
        raise ValueError(f"local_search must be >= 0, got {local_search}")
    if ls_moves not in POLISH_MOVES:
        raise ValueError(f"ls_moves must be one of {', '.join(POLISH_MOVES)}, got {ls_moves!r}")
    if int(ls_screen) < 0 or int(ls_escapes) < 0:
        raise ValueError(f"ls_screen and ls_escapes must be >= 0, got {ls_screen} and {ls_escapes}")
    if ls_boundaries is not None and int(ls_boundaries) < 0:
        raise ValueError(f"ls_boundaries must be >= 0 (or null), got {ls_boundaries}")
    if ls_rebalance is not None and int(ls_rebalance) < 0:
        raise ValueError(f"ls_rebalance must be >= 0 (or null), got {ls_rebalance}")


def _decoding_steps(objective: str, samples: int, noise: float, local_search: int, ls_moves: str, ls_screen: int,
                    ls_escapes: int, ls_boundaries: int | None, ls_rebalance: int | None,
                    ls_window_options: dict) -> tuple[int, int, WindowOptions, dict]:
    """Every decoding option checked (a one-line ValueError) and resolved: (rounds of boundary re-cuts
    (:func:`boundary_rounds`), rebalancing cycles (:func:`rebalance_cycles`), the window re-solves
    (:func:`window_options` of ``ls_window_options``), the polish's options)."""
    _checked(objective, samples, noise, local_search, ls_moves, ls_screen, ls_escapes, ls_boundaries, ls_rebalance)
    boundaries = boundary_rounds(local_search, ls_moves, ls_boundaries)
    rebalance = rebalance_cycles(objective, boundaries, ls_rebalance)
    window = window_options(objective, rebalance, **ls_window_options)
    return boundaries, rebalance, window, _polish_options(ls_moves, ls_screen, ls_escapes)


def _check_optional_int(name: str, value, least: int) -> None:
    """A one-line error unless ``value`` is None or an integer (not a bool) >= ``least``."""
    if value is not None and (isinstance(value, bool) or int(value) < least):
        raise ValueError(f"{name} must be an integer >= {least} (or null), got {value!r}")


def _check_optional_widths(name: str, widths) -> None:
    """A one-line error unless ``widths`` is None or a non-empty list of stage counts >= 2."""
    if widths is not None and (isinstance(widths, (str, int)) or not len(widths)
                               or any(isinstance(w, bool) or int(w) < 2 for w in widths)):
        raise ValueError(f"{name} must be a list of stage counts >= 2 (or null), got {widths!r}")


def boundary_rounds(local_search: int, ls_moves: str, ls_boundaries: int | None) -> int:
    """Rounds of stage-boundary re-cuts after the polish (:func:`respect_jax.local_search.refine_boundaries`):
    ``ls_boundaries``, or when None :data:`~respect_jax.local_search.BOUNDARY_ROUNDS` with the single-move polish
    (``solver=policy``'s default decoding) and 0 otherwise; always 0 without a polish (``local_search`` 0)."""
    if int(local_search) <= 0:
        return 0
    if ls_boundaries is None:
        return BOUNDARY_ROUNDS if ls_moves == "single" else 0
    return int(ls_boundaries)


#: cycles of :func:`~respect_jax.solvers.rebalance.rebalance_many` after the re-cuts by objective (``ls_rebalance``
#: None), chosen on validation graphs only (``experiments/results/latency_rebalance_val.md``)
REBALANCE_CYCLES = {"latency": 1, "paper": 0}


def rebalance_cycles(objective: str, boundaries: int, ls_rebalance: int | None) -> int:
    """Cycles of :func:`~respect_jax.solvers.rebalance.rebalance_many`: ``ls_rebalance``, or when None
    :data:`REBALANCE_CYCLES` of the objective; always 0 without the re-cuts (``boundaries`` 0)."""
    if int(boundaries) <= 0:
        return 0
    return REBALANCE_CYCLES[objective] if ls_rebalance is None else int(ls_rebalance)


#: window re-solves (:func:`respect_jax.solvers.window.window_search`) after the rebalancing (``ls_window`` None) and
#: their deterministic CP-SAT limit each (``ls_window_limit`` None), chosen on validation graphs only
#: (``experiments/results/latency_window_val.md``)
WINDOW_SOLVES = {"latency": 3, "paper": 0}
WINDOW_LIMIT = 0.2
#: re-solves of the window search's escalation (``ls_window_escalate`` None; fires only where
#: :func:`respect_jax.solvers.window.escalation_signal` holds), chosen on validation graphs only
#: (``experiments/results/latency_window_adaptive_val.md``)
WINDOW_ESCALATE = 2
#: re-solves of one graph's window search run at once (``ls_window_threads`` None; the same schedules, only the wall
#: time changes: :func:`respect_jax.solvers.window.window_search`); the many-graph form (:func:`_many`): 1 unless set.
#: 1: on the 2-core CPU, 2 threads took x1.07 the time over 66 validation cases (x0.83-0.87 where several windows of
#: one schedule fail, x1.1-1.4 where a window gains and the re-solve run ahead is wasted;
#: ``experiments/results/window_threads_val_s32.md``); a machine with spare cores may gain
WINDOW_THREADS = 1


def _widths(widths: Sequence[int] | None) -> tuple[int, ...] | None:
    """``ls_window_widths`` (a list from a config) as :func:`~respect_jax.solvers.window.window_search` takes it."""
    return None if widths is None else tuple(int(w) for w in widths)


@dataclasses.dataclass(frozen=True)
class WindowOptions:
    """The decoding's exact window re-solves under ``latency`` (:func:`respect_jax.solvers.window.window_search`),
    resolved from the ``ls_window*`` options by :func:`window_options`: ``solves`` re-solves (0: none) with CP-SAT's
    deterministic ``limit`` each; the rest are ``window_search``'s keyword arguments (None: its module's defaults):
    windows of ``widths`` stages around the bottleneck, at most ``max_nodes`` nodes, skipped below the free share
    ``free``; then up to ``escalate`` more re-solves where its signal holds (``escalate_widths``,
    ``escalate_max_nodes``, at every K >= ``escalate_stages``); CP-SAT's ``probing`` level and ``presolve`` rounds;
    ``threads``: re-solves run ahead at once (the same schedules; :func:`~respect_jax.solvers.window.window_search`)."""

    solves: int = 0
    limit: float = WINDOW_LIMIT
    free: float | None = None
    widths: tuple[int, ...] | None = None
    max_nodes: int | None = None
    escalate: int = WINDOW_ESCALATE
    escalate_widths: tuple[int, ...] | None = None
    escalate_max_nodes: int | None = None
    escalate_stages: int | None = None
    probing: int | None = None
    presolve: int | None = None
    threads: int = WINDOW_THREADS

    def search_kwargs(self) -> dict:
        """The keyword arguments of :func:`~respect_jax.solvers.window.window_search` after (graph, hw, assignment,
        solves, limit)."""
        return {"widths": self.widths, "max_nodes": self.max_nodes, "min_free": self.free,
                "escalate": self.escalate, "escalate_widths": self.escalate_widths,
                "escalate_max_nodes": self.escalate_max_nodes, "escalate_stages": self.escalate_stages,
                "probing": self.probing, "presolve": self.presolve, "threads": self.threads}


def window_options(
    objective: str,
    rebalance: int,
    *,
    ls_window: int | None = None,
    ls_window_limit: float | None = None,
    ls_window_free: float | None = None,
    ls_window_widths: Sequence[int] | None = None,
    ls_window_max_nodes: int | None = None,
    ls_window_escalate: int | None = None,
    ls_window_escalate_widths: Sequence[int] | None = None,
    ls_window_escalate_max_nodes: int | None = None,
    ls_window_escalate_stages: int | None = None,
    ls_window_probing: int | None = None,
    ls_window_presolve: int | None = None,
    ls_window_threads: int | None = None,
) -> WindowOptions:
    """The ``ls_window*`` options of ``solver=order_policy`` / ``solver=policy`` (conf/solver/order_policy.yaml;
    None: the defaults) checked (a one-line ValueError on a bad value) and resolved: ``ls_window`` re-solves, or when
    None :data:`WINDOW_SOLVES` of the objective, always 0 without the rebalancing (``rebalance`` 0) and under
    ``paper``; ``ls_window_limit`` None: :data:`WINDOW_LIMIT`; ``ls_window_escalate`` None: :data:`WINDOW_ESCALATE`;
    ``ls_window_threads`` None: :data:`WINDOW_THREADS` (the many-graph form: 1, its graphs already run in threads)."""
    _check_optional_int("ls_window", ls_window, 0)
    if ls_window is not None and int(ls_window) > 0 and objective != "latency":
        raise ValueError(f"ls_window re-solves windows of stages under the latency objective only, got {objective!r}")
    if ls_window_limit is not None and not float(ls_window_limit) > 0:
        raise ValueError(f"ls_window_limit must be > 0 (or null), got {ls_window_limit!r}")
    if ls_window_free is not None and not 0.0 <= float(ls_window_free) <= 1.0:
        raise ValueError(f"ls_window_free must be in [0, 1] (or null), got {ls_window_free!r}")
    _check_optional_widths("ls_window_widths", ls_window_widths)
    _check_optional_int("ls_window_max_nodes", ls_window_max_nodes, 2)
    _check_optional_int("ls_window_escalate", ls_window_escalate, 0)
    _check_optional_widths("ls_window_escalate_widths", ls_window_escalate_widths)
    _check_optional_int("ls_window_escalate_max_nodes", ls_window_escalate_max_nodes, 2)
    _check_optional_int("ls_window_escalate_stages", ls_window_escalate_stages, 2)
    _check_optional_int("ls_window_probing", ls_window_probing, 0)
    if ls_window_probing is not None and int(ls_window_probing) > 3:
        raise ValueError(f"ls_window_probing must be an integer in 0..3 (or null), got {ls_window_probing!r}")
    _check_optional_int("ls_window_presolve", ls_window_presolve, 0)
    if ls_window_presolve is not None and int(ls_window_presolve) > 3:
        raise ValueError(f"ls_window_presolve must be an integer in 0..3 (or null), got {ls_window_presolve!r}")
    _check_optional_int("ls_window_threads", ls_window_threads, 1)
    if int(rebalance) <= 0 or objective != "latency":
        solves = 0
    else:
        solves = WINDOW_SOLVES[objective] if ls_window is None else int(ls_window)

    def optional_int(value) -> int | None:
        return None if value is None else int(value)

    return WindowOptions(
        solves=solves, limit=WINDOW_LIMIT if ls_window_limit is None else float(ls_window_limit),
        free=None if ls_window_free is None else float(ls_window_free), widths=_widths(ls_window_widths),
        max_nodes=optional_int(ls_window_max_nodes),
        escalate=WINDOW_ESCALATE if ls_window_escalate is None else int(ls_window_escalate),
        escalate_widths=_widths(ls_window_escalate_widths),
        escalate_max_nodes=optional_int(ls_window_escalate_max_nodes),
        escalate_stages=optional_int(ls_window_escalate_stages), probing=optional_int(ls_window_probing),
        presolve=optional_int(ls_window_presolve),
        threads=WINDOW_THREADS if ls_window_threads is None else int(ls_window_threads))


#: the names of the ``ls_window*`` options (:func:`window_options`' keyword-only arguments)
WINDOW_OPTION_NAMES = tuple(name for name, p in inspect.signature(window_options).parameters.items()
                            if p.kind is inspect.Parameter.KEYWORD_ONLY)


#: the decoding's re-cuts keep their candidates per graph (:func:`respect_jax.local_search.boundary_candidates`'
#: ``memo``: the same candidates, computed once per pattern of the two stages); False: computed at every visit
BOUNDARY_MEMO = True


def _decode(graphs: Sequence[Graph], hw: Hardware, objective: str, lam: float, scores, samples: int, noise: float,
            seed: int, local_search: int, polish_options: dict, boundaries: int = 0,
            stop: Callable[[], bool] | None = None, rebalance: int = 0,
            window: WindowOptions | None = None) -> list[tuple[np.ndarray, dict]]:
    """Per graph (int64[n] assignment, info entries): the best split of its sampled orders (every graph's orders
    split together: :func:`respect_jax.policy.order.decode_many`), then ``local_search`` hill-climbing moves on it
    (:func:`respect_jax.local_search.polish_many` with ``polish_options``: kind, screen, escapes; each graph's own
    search, never worse), then ``boundaries`` rounds of stage-boundary re-cuts
    (:func:`respect_jax.local_search.refine_boundaries`, never worse) and, where they changed the schedule, the
    polish again. ``stop()`` (optional) is looked at before each of those steps (and between the re-cuts'
    boundaries): once True the steps left are skipped and ``info['stopped']`` names the first one skipped. Then
    ``rebalance`` cycles of :func:`~respect_jax.solvers.rebalance.rebalance_many` from that schedule (with the
    re-cuts only; ``info['rebalanced']``: the cycles that improved it; never worse), then under ``latency`` up to
    ``window.solves`` exact re-solves of adjacent stages around the bottleneck (:func:`respect_jax.solvers.window.
    window_search` with the options of ``window``, :class:`WindowOptions`; None: none; ``info['windowed']``: the
    re-solves kept; never worse)."""
    decoded = decode_many(graphs, hw, objective, lam, scores, int(samples), float(noise), [seed] * len(graphs))
    label = ("greedy" if int(samples) == 0 else f"sample_{int(samples)}") + ("+ls" if int(local_search) > 0 else "")
    assignments = [assignment for assignment, _, _ in decoded]
    stopped = None
    if int(local_search) > 0:
        if stop is not None and stop():
            stopped = "local_search"
        else:
            assignments = polish_many(list(graphs), hw, objective, lam, assignments, int(local_search),
                                      **polish_options)
    recut, import_s = [False] * len(graphs), 0.0
    # the re-cuts' candidates per graph, reused where a boundary's stages hold the same nodes again (the same ones)
    memos: list[dict | None] = [{} if BOUNDARY_MEMO else None for _ in graphs]
    if int(local_search) > 0 and int(boundaries) > 0 and stopped is None:
        if stop is not None and stop():
            stopped = "boundaries"
        import_s += load_max_flow()  # one-off import, reported as set-up (load_s)
        refined = [a if stopped else refine_boundaries(g, hw, objective, lam, a, int(boundaries), stop=stop,
                                                       memo=memo)
                   for g, a, memo in zip(graphs, assignments, memos, strict=True)]
        recut = [not np.array_equal(r, a) for r, a in zip(refined, assignments, strict=True)]
        changed = [i for i, c in enumerate(recut) if c]
        if changed and stop is not None and stop():
            stopped = "local_search after the re-cuts"
            for i in changed:
                assignments[i] = refined[i]
        elif changed:
            again = polish_many([graphs[i] for i in changed], hw, objective, lam, [refined[i] for i in changed],
                                int(local_search), **polish_options)
            for i, a in zip(changed, again, strict=True):
                assignments[i] = a
    cycles = [0] * len(graphs)
    more = int(rebalance)
    if int(local_search) > 0 and int(boundaries) > 0 and more > 0 and stopped is None:
        assignments, cycles = rebalance_many(graphs, hw, objective, lam, assignments, int(local_search), polish_options,
                                         int(boundaries), more, stop, memos)
    windowed = [0] * len(graphs)
    solves = 0 if window is None else window.solves  # 0 under paper and without the rebalancing
    if int(local_search) > 0 and int(boundaries) > 0 and solves > 0 and stopped is None:
        for i, g in enumerate(graphs):
            if stop is not None and stop():
                stopped = "window"
                break
            if window_needed(g, hw, assignments[i]):
                import_s += load_cp_sat()  # one-off import, reported as set-up (load_s)
                assignments[i], windowed[i] = window_search(g, hw, assignments[i], solves, window.limit,
                                                            **window.search_kwargs())
    out = []
    for assignment, (_, value, candidate), cut, cyc, win in zip(assignments, decoded, recut, cycles, windowed,
                                                                 strict=True):
        info = {"decoding": label, "samples": int(samples), "noise": float(noise), "local_search": int(local_search),
                **({f"ls_{k}": v for k, v in polish_options.items()} if int(local_search) > 0 else {}),
                **({"ls_boundaries": int(boundaries), "recut": cut} if int(boundaries) > 0 else {}),
                **({"ls_rebalance": int(rebalance), "rebalanced": cyc} if int(rebalance) > 0 and int(boundaries) > 0
                   and int(local_search) > 0 else {}),
                **({"ls_window": solves, "windowed": win} if solves > 0 and int(boundaries) > 0
                   and int(local_search) > 0 else {}),
                **({"stopped": stopped} if stopped else {}),
                **({"import_s": import_s} if import_s else {}),
                "candidate": candidate, "split_objective": value}
        out.append((assignment, info))
    return out


def _load(checkpoint: str | None):
    """(resolved checkpoint path, network, network document, seconds spent loading; 0 once cached)."""
    start = time.perf_counter()
    path = str(Path(checkpoint if checkpoint else DEFAULT_ORDER_CHECKPOINT).resolve())
    model, doc = load_order_network(path)
    return path, model, doc, time.perf_counter() - start


def _compile_forward(model, graphs: Sequence[Graph], hw: Hardware, objective: str, plan: list) -> float:
    """Seconds compiling the forward passes of ``plan`` (:func:`~respect_jax.policy.order.forward_plan`) whose (shape,
    rows) this process has not run yet: one throw-away call each (JAX caches them; the persistent cache too)."""
    fresh = {(id(model), shape, rows) for shape, rows, _ in plan} - _compiled_shapes
    if not fresh:
        return 0.0
    start = time.perf_counter()
    first = [(shape, rows, idx[:rows]) for shape, rows, idx in plan if (id(model), shape, rows) in fresh]
    predict_scores(model, list(graphs), [hw] * len(graphs), [objective] * len(graphs), len(graphs), first)
    _compiled_shapes.update(fresh)
    return time.perf_counter() - start


def _plan_shapes(graphs: Sequence[Graph], plan: list) -> list[list[int]]:
    """The padded shape (N, E, P) each graph's forward pass runs at under ``plan``."""
    shapes: list[list[int]] = [[]] * len(graphs)
    for shape, _, idx in plan:
        for i in idx:
            shapes[i] = list(shape)
    return shapes


def _scores(model, graphs: Sequence[Graph], hw: Hardware, objective: str, batch_size: int):
    """(scores per graph, padded shape per graph, seconds of first-time compilation of the forward passes seen
    now, seconds of the forward passes)."""
    plan = forward_plan(graphs, batch_size)
    compile_s = _compile_forward(model, graphs, hw, objective, plan)
    start = time.perf_counter()
    scores = predict_scores(model, list(graphs), [hw] * len(graphs), [objective] * len(graphs), batch_size, plan)
    return scores, _plan_shapes(graphs, plan), compile_s, time.perf_counter() - start


_polished_shapes: set[tuple] = set()


def _polish_options(ls_moves: str, ls_screen: int, ls_escapes: int) -> dict:
    return {"kind": ls_moves, "screen": int(ls_screen), "escapes": int(ls_escapes)}


def _warm_polish(graphs: Sequence[Graph], hw: Hardware, objective: str, lam: float, local_search: int,
                 polish_options: dict) -> float:
    """Seconds spent compiling local search for the padded shapes of ``graphs`` not seen before by this process
    (:func:`~respect_jax.local_search.compile_polish` per new (shape, K, objective, moves): ``single`` moves are
    compiled ahead, or loaded from the executable cache, without a run; ``closure`` moves run once on the
    all-stage-0 schedule, counted with the compilation), so that a graph's schedule time holds no compilation
    (``single`` moves compile once per shape and K for both objectives and every move count; the key is finer)."""
    if int(local_search) <= 0 or hw.stages == 1:
        return 0.0
    start = time.perf_counter()
    for graph in graphs:
        key = (bucket_shape([graph]), hw.stages, objective, int(local_search), tuple(sorted(polish_options.items())))
        if key not in _polished_shapes:
            compile_polish(graph, hw, objective, lam, int(local_search), **polish_options)
            _polished_shapes.add(key)
    return time.perf_counter() - start


@contextlib.contextmanager
def collection_paused():
    """Python's cyclic garbage collector off for the block, then back as it was (left off if it was off). Once JAX and
    a model are loaded, a full collection walks every object of the process (100-170 ms on the 2-core CPU), and one
    graph's decoding allocated enough to trigger one in about one call out of four (val_inception_a, K = 4, latency:
    mean 331 -> 310 ms, max 492 -> 387 ms over 10 calls each, alternating, under load). The decoding makes little
    cyclic garbage; what it makes goes at the next collection after the block. Schedules are unchanged."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@register_solver("order_policy")
def solve_order_policy(
    graph: Graph,
    hw: Hardware,
    objective: str = "paper",
    lam: float = 1.0,
    checkpoint: str | None = None,
    samples: int = 16,
    noise: float = 0.1,
    seed: int = 0,
    local_search: int = 0,
    ls_moves: str = "closure",
    ls_screen: int = 0,
    ls_escapes: int = 0,
    ls_boundaries: int | None = None,
    ls_rebalance: int | None = None,
    stop: Callable[[], bool] | None = None,
    **ls_window_options,
) -> SolveResult:
    """Schedule ``graph`` with the order policy (valid by construction; not a proof of optimality).
    ``ls_window_options``: the ``ls_window*`` options of :func:`window_options` (the exact window re-solves).

    ``stop`` (optional ``stop() -> bool``; ``solver=auto`` passes its stop signal): looked at after the forward pass
    and between the decoding's steps (:func:`_decode`); once True, the schedule so far is returned (``info['stopped']``
    names the first step skipped, the polish's compilation included); True before the forward pass raises
    :class:`~respect_jax.solvers.stopping.Stopped`. A compiled call in progress is never interrupted."""
    boundaries, rebalance, window, polish_options = _decoding_steps(
        objective, samples, noise, local_search, ls_moves, ls_screen, ls_escapes, ls_boundaries, ls_rebalance,
        ls_window_options)
    path, model, doc, load_s = _load(checkpoint)
    if stop is not None and stop():
        raise Stopped
    # compile on a first call, measured apart (the forward pass of the graph's bucket shape)
    (scores,), (shape,), compile_s, _ = _scores(model, [graph], hw, objective, 1)
    if stop is None or not stop():
        compile_s += _warm_polish([graph], hw, objective, lam, local_search, polish_options)
    with collection_paused():
        ((assignment, decoded),) = _decode([graph], hw, objective, lam, [scores], samples, noise, seed, local_search,
                                              polish_options, boundaries, stop, rebalance, window)
    load_s += decoded.pop("import_s", 0.0)
    info = {"checkpoint": path, **decoded, "load_s": load_s, "compile_s": compile_s,
            "bucket": shape, "trained": doc.get("best")}
    return SolveResult(assignment=assignment, optimal=None, gap=None, info=info)


#: worker threads of the batched form (:func:`_many`): each takes one forward batch at a time through its forward
#: pass, orders, splits and local search, so that one batch's compiled calls (which release the GIL) run beside another
#: batch's NumPy work. Never changes a schedule (every graph's decoding is its own).
MANY_THREADS = max(1, min(4, os.cpu_count() or 1))

#: graphs per compiled forward call of the batched form by default: small batches let the first batches' orders,
#: splits and local search run while later forward passes compute. On the 2-core CPU, 128 generated 100-400-node
#: architectures, greedy and default decoding: 16 or 64 rows 0.80-1.13x of 32, 256 rows (one call for all)
#: 0.74-1.08x of 32, slowest on the largest graphs (``experiments/results/bench_many_batch.md``)
MANY_BATCH_SIZE = 32


#: sampled orders decoded together at least (:func:`_decode_units`): a vectorised split pass costs about as much for
#: 32 rows as for a few hundred, so greedy decodings of many graphs are split in one pass, not one per forward batch
DECODE_ROWS = 1024


def _decode_units(pending: list, orders_per_graph: int) -> list[list]:
    """Consecutive forward calls (graph indices, scores) grouped into decoding units of at least
    :data:`DECODE_ROWS` orders (``orders_per_graph`` per graph; the last unit may hold fewer): each unit's orders are
    split together, and the units run in :data:`MANY_THREADS` threads."""
    units: list[list] = [[]]
    for chunk, scores in pending:
        if sum(len(c) for c, _ in units[-1]) * orders_per_graph >= DECODE_ROWS:
            units.append([])
        units[-1].append((chunk, scores))
    return units


def _many(
    graphs: Sequence[Graph],
    hw: Hardware,
    objective: str = "paper",
    lam: float = 1.0,
    batch_size: int = MANY_BATCH_SIZE,
    checkpoint: str | None = None,
    samples: int = 16,
    noise: float = 0.1,
    seed: int = 0,
    local_search: int = 0,
    ls_moves: str = "closure",
    ls_screen: int = 0,
    ls_escapes: int = 0,
    ls_boundaries: int | None = None,
    ls_rebalance: int | None = None,
    threads: int | None = None,
    **ls_window_options,
) -> list[SolveResult]:
    """Every graph of ``graphs``: one forward pass per batch of ``batch_size`` graphs of a size bucket (all
    dispatched first), then per decoding unit (:func:`_decode_units`, ``threads`` of them at a time; None:
    :data:`MANY_THREADS`) the orders of its graphs split together and each graph's local search. Every graph gets the
    schedule a call for it alone gives. ``info.schedule_s``: the graph's equal share of the wall time of the whole
    (compilation excluded)."""
    if not graphs:
        raise ValueError("no graphs to schedule")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    threads = MANY_THREADS if threads is None else int(threads)
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    boundaries, rebalance, window, polish_options = _decoding_steps(
        objective, samples, noise, local_search, ls_moves, ls_screen, ls_escapes, ls_boundaries, ls_rebalance,
        ls_window_options)
    if ls_window_options.get("ls_window_threads") is None:  # the graphs' decodings already run in threads
        window = dataclasses.replace(window, threads=1)
    path, model, doc, load_s = _load(checkpoint)
    plan = forward_plan(graphs, int(batch_size))
    compile_s = _compile_forward(model, graphs, hw, objective, plan)
    compile_s += _warm_polish(graphs, hw, objective, lam, local_search, polish_options)
    start = time.perf_counter()
    # every forward pass dispatched first (the compiled calls run on XLA's threads while the next batch is built and
    # while earlier graphs are decoded); its shape and rows as in the whole plan: the same program and scores
    network, forwards, pending = as_network(model), {}, []
    for shape, rows, idx in plan:
        for lo in range(0, len(idx), rows):
            chunk = idx[lo : lo + rows]
            batch = make_batch([graphs[i] for i in chunk + [chunk[-1]] * (rows - len(chunk))], [hw] * rows,
                               [objective] * rows, shape)
            if (shape, rows) not in forwards:
                forwards[shape, rows] = forward_executable(network, batch, default_aggregation(shape[0]))
            pending.append((chunk, forwards[shape, rows](network.params, batch.graphs, batch.feats, batch.context)))

    def run(unit: list) -> tuple[list[int], list]:
        idx, scores = [], []
        for chunk, batch_scores in unit:
            batch_scores = np.asarray(batch_scores)  # waits for this forward pass
            idx += chunk
            scores += [batch_scores[row, : graphs[i].num_nodes] for row, i in enumerate(chunk)]
        return idx, _decode([graphs[i] for i in idx], hw, objective, lam, scores, samples, noise, seed, local_search,
                            polish_options, boundaries, rebalance=rebalance, window=window)

    units = _decode_units(pending, int(samples) + 1)
    if threads == 1 or len(units) == 1:
        done = [run(unit) for unit in units]
    else:
        with ThreadPoolExecutor(min(threads, len(units))) as pool:
            done = list(pool.map(run, units))
    share = (time.perf_counter() - start) / len(graphs)
    decoded: list = [None] * len(graphs)
    for idx, results in done:
        for i, result in zip(idx, results, strict=True):
            decoded[i] = result
    out = []
    for shape, (assignment, info) in zip(_plan_shapes(graphs, plan), decoded, strict=True):
        info = {"checkpoint": path, **info, "load_s": load_s, "compile_s": compile_s, "schedule_s": share,
                "bucket": shape, "batch_graphs": len(graphs), "threads": threads}
        out.append(SolveResult(assignment=assignment, optimal=None, gap=None, info=info))
    return out


solve_order_policy.many = _many
# the ``ls_window*`` options it collects (``**ls_window_options``) are window_options' (the option check's names)
solve_order_policy.forwards_to = window_options


def forward_ready_for(graph: Graph, hw: Hardware, objective: str, checkpoint: str | None = None, **_) -> bool:
    """True when the order policy of ``checkpoint`` (None: the shipped one) needs no compilation of its forward pass
    for ``graph``'s bucket: compiled in this process or stored in the executable cache
    (:func:`respect_jax.policy.order.forward_ready`); False for a checkpoint of another family. The solvers' readiness
    hook (``solve.ready``): ``solver=auto`` starts a learned member early only when it is ready."""
    path = Path(checkpoint or DEFAULT_ORDER_CHECKPOINT).resolve()
    if not is_order_checkpoint(path):
        return False
    model, _ = load_order_network(str(path))
    return forward_ready(as_network(model), graph, hw, objective)


solve_order_policy.ready = forward_ready_for
