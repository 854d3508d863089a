"""The cost model's objective in float64 NumPy, for scoring without a JAX compilation.

``solver=auto`` scores every member's schedule here, so its first incumbent (the exact contiguous split,
NumPy) costs no compilation of the JAX evaluator (seconds to tens of seconds per padded size on a loaded
2-core CPU). The formulas are those of :func:`respect_jax.costs.evaluate` (K stages, ``s(v)`` the stage of
node v):

* ``mem_k = b_p sum(params_v : s(v) = k)``, ``macs_k = sum(macs_v : s(v) = k)``;
* ``last(u) = max(s(v) : v in succ(u))``, K - 1 for a node without successors;
* ``comm = b_a sum_u out_u (last(u) - s(u))``, ``in_k = b_a sum(out_u : s(u) < k <= last(u))``;
* ``T_k = tau + macs_k / R + max(0, mem_k - C) / H + in_k / L``;
* ``paper = max_k mem_k + lam comm``, ``latency = max_k T_k``.

Reported numbers still come from the shared JAX evaluator (``solvers.base.run_solver`` re-scores the result);
the tests check that the two agree (float32 there, float64 here).
"""

from __future__ import annotations

import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware, stage_time
from respect_jax.graphs.graph import Graph


def stage_loads(graph: Graph, assignment: np.ndarray, hw: Hardware) -> dict:
    """Per-stage quantities of ``assignment`` (i64[N], a stage per node id) in float64.

    Returns ``{"valid": bool, "mem_k", "macs_k", "in_k", "time_k": f64[K], "comm_bytes": float}``. Values of an
    invalid schedule (an edge going backwards or a stage out of range) are not meaningful.
    """
    k = int(hw.stages)
    s = np.asarray(assignment, dtype=np.int64)
    if s.shape != (graph.num_nodes,):
        raise ValueError(f"assignment has shape {s.shape}, expected ({graph.num_nodes},)")
    in_range = bool(np.all((s >= 0) & (s < k)))
    sc = np.clip(s, 0, k - 1)
    edges = graph.edges
    forward = bool(np.all(sc[edges[:, 0]] <= sc[edges[:, 1]])) if len(edges) else True
    mem_k = float(hw.param_bytes) * np.bincount(sc, graph.params.astype(np.float64), minlength=k)
    macs_k = np.bincount(sc, graph.macs.astype(np.float64), minlength=k)
    last = np.full(graph.num_nodes, -1, dtype=np.int64)
    if len(edges):
        np.maximum.at(last, edges[:, 0], sc[edges[:, 1]])
    last = np.where(last < 0, k - 1, last)
    out = float(hw.act_bytes) * graph.output_size.astype(np.float64)
    comm = float(np.sum(out * (last - sc)))
    delta = np.zeros(k + 1)  # out_u enters stages s(u) + 1 .. last(u)
    np.add.at(delta, np.minimum(sc + 1, k), out)
    np.add.at(delta, np.maximum(last + 1, sc + 1).clip(max=k), -out)
    in_k = np.cumsum(delta)[:k]
    time_k = stage_time(mem_k, macs_k, in_k, hw)  # the cost model's formula, in NumPy float64 here
    return {"valid": in_range and forward, "mem_k": mem_k, "macs_k": macs_k, "in_k": in_k, "time_k": time_k,
            "comm_bytes": comm}


def objective_np(graph: Graph, assignment: np.ndarray, hw: Hardware, objective: str, lam: float = 1.0) -> float:
    """The ``objective`` (``paper`` | ``latency``) of ``assignment`` in float64; ValueError if it is invalid."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    loads = stage_loads(graph, assignment, hw)
    if not loads["valid"]:
        raise ValueError(f"invalid schedule of graph {graph.name!r}: an edge goes backwards or a stage out of range")
    if objective == "paper":
        return float(loads["mem_k"].max() + lam * loads["comm_bytes"])
    return float(loads["time_k"].max())
