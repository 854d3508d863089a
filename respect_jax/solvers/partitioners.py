"""Compiler-style partitioners: contiguous ranges of the SPEC topological order.

``compiler``: libcoral's ParameterCountBasedPartitioner / ``edgetpu_compiler --num_segments``
(NOTES.md): target ``total_params / K`` per segment; each of the first K-1 segments is cut just
before the node that would make it exceed the target. The last segment takes the rest.
"""

from __future__ import annotations

import numpy as np

from respect_jax.costs import Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.solvers.base import SolveResult, register_solver


def contiguous_assignment(graph: Graph, cut_positions: list[int]) -> np.ndarray:
    """Assignment (by id) of the contiguous split of the SPEC order at ``cut_positions``.

    ``cut_positions`` are increasing positions where a new stage starts; stage i holds positions
    ``[cut[i-1], cut[i])``. Any such split is valid because the order is topological.
    """
    order = graph.topological_order()
    stage_of_position = np.searchsorted(np.asarray(cut_positions, dtype=np.int64), np.arange(graph.num_nodes), side="right")
    assignment = np.empty(graph.num_nodes, dtype=np.int64)
    assignment[order] = stage_of_position
    return assignment


def parameter_count_cuts(params_in_order: np.ndarray, num_stages: int) -> list[int]:
    """Cut positions of libcoral's parameter-count partitioner (see module docstring)."""
    target = params_in_order.sum() / num_stages
    cuts: list[int] = []
    acc = 0
    for pos, p in enumerate(params_in_order.tolist()):
        if len(cuts) < num_stages - 1 and acc > 0 and acc + p > target:
            cuts.append(pos)
            acc = 0
        acc += p
    return cuts


@register_solver("compiler")
def solve_compiler(graph: Graph, hw: Hardware, objective: str = "paper", lam: float = 1.0) -> SolveResult:
    """The Edge TPU compiler's parameter-count split (ignores the objective, as the compiler does)."""
    params = graph.params[graph.topological_order()]
    cuts = parameter_count_cuts(params, hw.stages)
    return SolveResult(contiguous_assignment(graph, cuts), info={"cuts": cuts})


@register_solver("single_stage")
def solve_single_stage(graph: Graph, hw: Hardware, objective: str = "paper", lam: float = 1.0) -> SolveResult:
    """Everything on stage 0 (the unpipelined model): a reference point, always valid."""
    return SolveResult(np.zeros(graph.num_nodes, dtype=np.int64))
