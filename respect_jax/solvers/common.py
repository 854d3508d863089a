"""Helpers shared by the exact solvers and the heuristics (graph structure, gaps, warm starts).

Nothing here scores a schedule: every reported objective comes from the shared evaluator
(:mod:`respect_jax.costs`). The helpers below only build the *structure* the models need
(threshold indicators, tensor crossings) and check user-supplied warm starts.

Notation used by the MILP and CP-SAT models (K stages, ``M = K - 1`` thresholds):

* ``z[v, j] = [s(v) >= j + 1]`` for ``j = 0..M-1`` (the "threshold" or step encoding of a stage);
  ``s(v) = sum_j z[v, j]`` and ``[s(v) = k] = z[v, k-1] - z[v, k]`` with ``z[v, -1] = 1``,
  ``z[v, M] = 0``;
* ``cross[u, j] = [s(u) < j + 1 <= last(u)]``: tensor ``u`` enters stage ``j + 1``. Because
  ``s(u) <= last(u)`` in a valid schedule, ``cross[u, j] = [last(u) >= j+1] - z[u, j]`` and
  ``[last(u) >= j+1] = max_{v in succ(u)} z[v, j]`` (1 for a graph output).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from respect_jax.graphs.graph import Graph
from respect_jax.solvers.partitioners import solve_compiler, solve_contiguous
from respect_jax.solvers.respect_label import solve_respect_label


@dataclass(frozen=True)
class Structure:
    """Graph structure in the form the models use (all arrays by original node id).

    Attributes:
        num_nodes: N.
        edges: int64[E, 2] (producer, consumer).
        succs: successor ids of every node.
        preds: predecessor ids of every node.
        sink: bool[N] True for nodes without successors (model outputs, ``last = K-1``).
        order: int64[N] the graph's topological order (by depth from the sources, ties by id).
    """

    num_nodes: int
    edges: np.ndarray
    succs: list[list[int]]
    preds: list[list[int]]
    sink: np.ndarray
    order: np.ndarray


def structure(graph: Graph) -> Structure:
    succs = graph.successors()
    return Structure(
        num_nodes=graph.num_nodes,
        edges=np.asarray(graph.edges, dtype=np.int64).reshape(-1, 2),
        succs=succs,
        preds=graph.predecessors(),
        sink=np.array([not s for s in succs], dtype=bool),
        order=graph.topological_order(),
    )


def relative_gap(primal: float, bound: float) -> float:
    """Proven relative gap ``(primal - bound) / |primal|`` (0 when both are 0), floored at 0."""
    primal, bound = float(primal), float(bound)
    diff = max(primal - bound, 0.0)
    if diff == 0.0:
        return 0.0
    if primal == 0.0:
        return math.inf
    return diff / abs(primal)


def check_assignment(graph: Graph, assignment, num_stages: int, what: str = "warm start") -> np.ndarray:
    """int64[N] ``assignment`` after checking shape, range and precedence (ValueError otherwise)."""
    a = np.asarray(assignment)
    if a.shape != (graph.num_nodes,):
        raise ValueError(f"{what} has shape {a.shape}, expected ({graph.num_nodes},)")
    if not np.all(np.equal(np.mod(a, 1), 0)):
        raise ValueError(f"{what} must hold integer stages")
    a = a.astype(np.int64)
    if np.any((a < 0) | (a >= num_stages)):
        raise ValueError(f"{what} has stages outside 0..{num_stages - 1}")
    e = graph.edges
    if len(e) and np.any(a[e[:, 0]] > a[e[:, 1]]):
        raise ValueError(f"{what} violates precedence (some edge goes to an earlier stage)")
    return a


def thresholds(assignment: np.ndarray, num_stages: int) -> np.ndarray:
    """int64[N, K-1] ``z[v, j] = [s(v) >= j + 1]``."""
    return (assignment[:, None] >= np.arange(1, num_stages)[None, :]).astype(np.int64)


def crossings(st: Structure, assignment: np.ndarray, num_stages: int) -> np.ndarray:
    """int64[N, K-1] ``cross[u, j] = [s(u) < j + 1 <= last(u)]`` of a valid assignment."""
    last = np.full(st.num_nodes, num_stages - 1, dtype=np.int64)
    for u, succ in enumerate(st.succs):
        if succ:
            last[u] = max(int(assignment[v]) for v in succ)
    ks = np.arange(1, num_stages)[None, :]
    return ((assignment[:, None] < ks) & (ks <= last[:, None])).astype(np.int64)


def stages_from_thresholds(z: np.ndarray, st: Structure) -> np.ndarray:
    """int64[N] stages from (possibly slightly fractional) threshold values, repaired to be valid.

    Rounds ``z`` at 0.5 and counts the ones; then, in that order, raises any stage below a
    predecessor's (a no-op for a feasible integral solution; guards against solver tolerances).
    """
    s = (np.asarray(z) > 0.5).sum(axis=1).astype(np.int64) if np.asarray(z).size else np.zeros(st.num_nodes, np.int64)
    for v in st.order.tolist():
        if st.preds[v]:
            s[v] = max(s[v], max(int(s[u]) for u in st.preds[v]))
    return s


def auto_starts(graph: Graph, hw, objective: str, lam: float = 1.0) -> dict[str, np.ndarray]:
    """Cheap valid schedules used as default warm starts by the exact oracles (pure NumPy, no JAX).

    The compiler's parameter-count split, RESPECT's label packing and the best contiguous split for
    ``objective`` (exact, milliseconds to a quarter of a second on the real models; on them it is
    often optimal); the oracles keep the one with the smallest objective under their own exact model.
    """
    return {
        "compiler": solve_compiler(graph, hw).assignment,
        "respect_label": solve_respect_label(graph, hw).assignment,
        "contiguous": solve_contiguous(graph, hw, objective, lam).assignment,
    }


def resolve_start(
    graph: Graph, hw, objective: str, lam: float, start, score, what: str
) -> tuple[np.ndarray | None, str | None]:
    """The warm start an oracle uses: ``None`` (none), ``"auto"`` or an assignment.

    ``score(assignment) -> float`` is the oracle's exact model objective; with ``"auto"`` the best
    of :func:`auto_starts` for ``objective`` is returned. Returns ``(assignment or None, description)``.
    """
    if start is None:
        return None, None
    if isinstance(start, str):
        if start != "auto":
            raise ValueError(f"{what} must be null, 'auto' or an assignment, got {start!r}")
        cands = auto_starts(graph, hw, objective, lam)
        name = min(cands, key=lambda c: score(cands[c]))
        return cands[name], f"auto:{name}"
    return check_assignment(graph, start, hw.stages, what), "given"
