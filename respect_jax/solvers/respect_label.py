"""RESPECT's own label heuristic (reverse-DAG greedy packing under a per-stage memory cap).

What RESPECT's public code does (``dataset/dataset_generator.py``, ``_scheduling`` and
``_priority_sorting`` in GitHub Yu-Maryland/RESPECT): walk the *reversed* DAG from the model
outputs; at each round the candidates are the nodes all of whose successors are already
scheduled, sorted by priority (the node's level counted from the sources: deepest first, ties by
smaller id); the round's group is that sorted list with nodes popped from its end while the
group's total weight exceeds the cap (i.e. the longest prefix that fits). Groups are numbered
from the outputs backwards. Its labels are those group indices (one group per round); a
deployment to K stages bisection-searches the cap (NOTES.md).

What this module implements, to get exactly K stages:

1. Priority = ``graph.depth()`` (longest-path level from the sources; RESPECT's recursive
   priority rewrite computes this level up to its visited-set shortcut).
2. ``pack(cap)``: fill stage K-1 first, then K-2, ... . In each round, the candidates (all
   successors placed) sorted as above contribute their longest prefix whose weight fits in the
   *remaining* capacity of the current stage; newly freed predecessors join the next round's
   candidates. When the prefix is empty the stage is closed and the next (earlier) stage opens.
   ``pack`` fails if nodes remain after stage 0 is closed, or if a node alone exceeds ``cap``.
   Weight = ``params`` (parameter memory; b_p is a common factor).
3. Integer bisection of the cap between ``max(largest node, ceil(total / K)) - 1`` (infeasible)
   and ``total`` (feasible: everything fits in stage K-1); returns the packing at the smallest
   feasible cap found.

Every node is placed only after all its successors, on a stage no later than theirs, so the
schedule is valid by construction. The objective is ignored (RESPECT's labels are memory-only).
"""

from __future__ import annotations

import math

import numpy as np

from respect_jax.costs import Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.solvers.base import SolveResult, register_solver


def pack(graph: Graph, cap: int, num_stages: int, priority: np.ndarray | None = None) -> np.ndarray | None:
    """int64[N] stages of the reverse greedy packing under ``cap`` params per stage, or None."""
    n = graph.num_nodes
    w = graph.params.astype(np.int64).tolist()
    prio = (graph.depth() if priority is None else priority).tolist()
    succs, preds = graph.successors(), graph.predecessors()
    if max(w) > cap:
        return None
    left = [len(sv) for sv in succs]  # unplaced successors
    stage = np.full(n, -1, dtype=np.int64)
    ready = [v for v in range(n) if left[v] == 0]
    k, load, placed = num_stages - 1, 0, 0
    while placed < n:
        if k < 0:
            return None
        ready.sort(key=lambda x: (-prio[x], x))
        take = []
        acc = load
        for v in ready:
            if acc + w[v] > cap:
                break
            take.append(v)
            acc += w[v]
        if not take:
            k, load = k - 1, 0
            continue
        load = acc
        taken = set(take)
        ready = [v for v in ready if v not in taken]
        for v in take:
            stage[v] = k
            placed += 1
            for u in preds[v]:
                left[u] -= 1
                if left[u] == 0:
                    ready.append(u)
    return stage


@register_solver("respect_label")
def solve_respect_label(graph: Graph, hw: Hardware, objective: str = "paper", lam: float = 1.0) -> SolveResult:
    """RESPECT's reverse-DAG packing with a bisection-searched per-stage cap (module docstring)."""
    k = hw.stages
    prio = graph.depth()
    total = int(graph.params.sum())
    largest = int(graph.params.max())
    hi = total
    best = pack(graph, hi, k, prio)
    assert best is not None  # cap = total always fits in the last stage
    lo = max(largest, math.ceil(total / k)) - 1  # no packing fits under this cap
    evaluations = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        stages = pack(graph, mid, k, prio)
        evaluations += 1
        if stages is None:
            lo = mid
        else:
            hi, best = mid, stages
    return SolveResult(best, info={"cap_params": hi, "cap_bytes": hi * hw.param_bytes, "packings": evaluations})
