"""``solver=order_policy``: the learned order policy behind the common solver signature.

The network scores the nodes in one forward pass, the scores give a topological order and the exact
contiguous programme splits it (:mod:`respect_jax.policy.order`). ``samples > 0`` also splits that many
orders of the scores plus Gaussian noise (``noise``, in stage units 1/K) and keeps the best. The policy is
never seeded with another solver's schedule. One network serves every K, hardware and objective.

Options (conf/solver/order_policy.yaml): ``checkpoint`` (default: the shipped one), ``samples``, ``noise``,
``seed``, ``local_search`` (hill-climbing moves on the best split, 0: none; never worse), ``ls_moves`` (their
neighbourhood: ``closure`` or ``single``), ``ls_screen`` / ``ls_escapes`` (``single``: closure moves screened out of
single-move local optima; :func:`respect_jax.local_search.polish`). ``info`` holds
``compile_s`` (the forward pass's and local search's compilations of new shapes) / ``load_s`` apart from the
scheduling time and the winning candidate (``candidate``: 0 the
greedy order, i >= 1 sample i). This is also ``solver=policy``'s default (:mod:`respect_jax.policy.solver`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import bucket_shape
from respect_jax.local_search import POLISH_MOVES, compile_polish, polish
from respect_jax.policy.order import decode_many, forward_plan, load_order_network, predict_scores
from respect_jax.resources import data_path
from respect_jax.solvers.base import SolveResult, register_solver

DEFAULT_ORDER_CHECKPOINT = data_path("checkpoints", "order_policy")
_compiled_shapes: set[tuple] = set()


def _checked(objective: str, samples: int, noise: float, local_search: int, ls_moves: str = "closure",
             ls_screen: int = 0, ls_escapes: int = 0) -> None:
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


def _decode(graphs: Sequence[Graph], hw: Hardware, objective: str, lam: float, scores, samples: int, noise: float,
            seed: int, local_search: int, polish_options: dict) -> list[tuple[np.ndarray, dict, float]]:
    """Per graph (int64[n] assignment, info entries, seconds of its own local search): the best split of its sampled
    orders (every graph's orders split together: :func:`respect_jax.policy.order.decode_many`), then ``local_search``
    hill-climbing moves on it (:func:`respect_jax.local_search.polish` with ``polish_options``: kind, screen,
    escapes; never worse)."""
    decoded = decode_many(graphs, hw, objective, lam, scores, int(samples), float(noise), [seed] * len(graphs))
    label = ("greedy" if int(samples) == 0 else f"sample_{int(samples)}") + ("+ls" if int(local_search) > 0 else "")
    out = []
    for graph, (assignment, value, candidate) in zip(graphs, decoded, strict=True):
        start = time.perf_counter()
        if int(local_search) > 0:
            assignment = polish(graph, hw, objective, lam, assignment, int(local_search), **polish_options)
        info = {"decoding": label, "samples": int(samples), "noise": float(noise), "local_search": int(local_search),
                **({f"ls_{k}": v for k, v in polish_options.items()} if int(local_search) > 0 else {}),
                "candidate": candidate, "split_objective": value}
        out.append((assignment, info, time.perf_counter() - start))
    return out


def _load(checkpoint: str | None):
    """(resolved checkpoint path, network, network document, seconds spent loading; 0 once cached)."""
    start = time.perf_counter()
    path = str(Path(checkpoint if checkpoint else DEFAULT_ORDER_CHECKPOINT).resolve())
    model, doc = load_order_network(path)
    return path, model, doc, time.perf_counter() - start


def _scores(model, graphs: Sequence[Graph], hw: Hardware, objective: str, batch_size: int):
    """(scores per graph, padded shape per graph, seconds of first-time compilation of the forward passes seen
    now, seconds of the forward passes). Compilation runs on a throw-away call of the shapes not seen before by
    this process (JAX caches them; the persistent cache too)."""
    plan = forward_plan(graphs, batch_size)
    shapes: list[list[int]] = [[]] * len(graphs)
    for shape, _, idx in plan:
        for i in idx:
            shapes[i] = list(shape)
    fresh = {(id(model), shape, rows) for shape, rows, _ in plan} - _compiled_shapes
    compile_s = 0.0
    if fresh:
        start = time.perf_counter()
        first = [(shape, rows, idx[:rows]) for shape, rows, idx in plan if (id(model), shape, rows) in fresh]
        predict_scores(model, list(graphs), [hw] * len(graphs), [objective] * len(graphs), batch_size, first)
        compile_s = time.perf_counter() - start
        _compiled_shapes.update(fresh)
    start = time.perf_counter()
    scores = predict_scores(model, list(graphs), [hw] * len(graphs), [objective] * len(graphs), batch_size, plan)
    return scores, shapes, compile_s, time.perf_counter() - start


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
) -> SolveResult:
    """Schedule ``graph`` with the order policy (valid by construction; not a proof of optimality)."""
    _checked(objective, samples, noise, local_search, ls_moves, ls_screen, ls_escapes)
    polish_options = _polish_options(ls_moves, ls_screen, ls_escapes)
    path, model, doc, load_s = _load(checkpoint)
    # compile on a first call, measured apart (the forward pass of the graph's bucket shape)
    (scores,), (shape,), compile_s, _ = _scores(model, [graph], hw, objective, 1)
    compile_s += _warm_polish([graph], hw, objective, lam, local_search, polish_options)
    ((assignment, decoded, _),) = _decode([graph], hw, objective, lam, [scores], samples, noise, seed, local_search,
                                          polish_options)
    info = {"checkpoint": path, **decoded, "load_s": load_s, "compile_s": compile_s,
            "bucket": shape, "trained": doc.get("best")}
    return SolveResult(assignment=assignment, optimal=None, gap=None, info=info)


def _many(
    graphs: Sequence[Graph],
    hw: Hardware,
    objective: str = "paper",
    lam: float = 1.0,
    batch_size: int = 256,
    checkpoint: str | None = None,
    samples: int = 16,
    noise: float = 0.1,
    seed: int = 0,
    local_search: int = 0,
    ls_moves: str = "closure",
    ls_screen: int = 0,
    ls_escapes: int = 0,
) -> list[SolveResult]:
    """Every graph of ``graphs``: one forward pass per batch of a size bucket, then every graph's orders split
    together. ``info.schedule_s``: the graph's equal share of the forward passes and splits plus its own local
    search."""
    if not graphs:
        raise ValueError("no graphs to schedule")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    _checked(objective, samples, noise, local_search, ls_moves, ls_screen, ls_escapes)
    polish_options = _polish_options(ls_moves, ls_screen, ls_escapes)
    path, model, doc, load_s = _load(checkpoint)
    scores, shapes, compile_s, forward_s = _scores(model, graphs, hw, objective, int(batch_size))
    compile_s += _warm_polish(graphs, hw, objective, lam, local_search, polish_options)
    start = time.perf_counter()
    decoded = _decode(graphs, hw, objective, lam, scores, samples, noise, seed, local_search, polish_options)
    # the forward passes and the splits (computed together) in equal shares, plus each graph's own local search
    share = (forward_s + time.perf_counter() - start - sum(d[2] for d in decoded)) / len(graphs)
    out = []
    for shape, (assignment, info, own_s) in zip(shapes, decoded, strict=True):
        info = {"checkpoint": path, **info, "load_s": load_s, "compile_s": compile_s, "schedule_s": share + own_s,
                "bucket": shape, "batch_graphs": len(graphs)}
        out.append(SolveResult(assignment=assignment, optimal=None, gap=None, info=info))
    return out


solve_order_policy.many = _many
