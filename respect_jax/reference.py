"""Slow, obviously-correct references of the cost model: a loop evaluator and brute-force enumeration.

Nothing in the library's code paths uses this module. Tests compare the jnp evaluator
(:mod:`respect_jax.costs`) against it. Works on original node ids of a :class:`~respect_jax.graphs.Graph`,
with exact Python integers where the formulas allow. The loop environment (the MDP's reference) is
:class:`respect_jax.env.reference.LoopEnv`.
"""

from __future__ import annotations

from respect_jax.graphs.graph import Graph


def reference_metrics(graph: Graph, assignment, hw) -> dict:
    """Every SPEC quantity with plain loops. ``hw`` is any object with the Hardware fields."""
    k_stages = hw.stages
    s = [int(x) for x in assignment]
    succs = graph.successors()
    valid = all(0 <= x < k_stages for x in s) and all(s[u] <= s[v] for u, v in graph.edges.tolist())
    mem = [0] * k_stages
    macs = [0] * k_stages
    inb = [0] * k_stages
    comm = 0
    for v in range(graph.num_nodes):
        if 0 <= s[v] < k_stages:
            mem[s[v]] += hw.param_bytes * int(graph.params[v])
            macs[s[v]] += int(graph.macs[v])
    for u in range(graph.num_nodes):
        last = max(s[v] for v in succs[u]) if succs[u] else k_stages - 1
        out = int(graph.output_size[u])
        comm += hw.act_bytes * out * (last - s[u])
        for k in range(1, k_stages):
            if s[u] < k <= last:
                inb[k] += hw.act_bytes * out
    spill = [max(0, m - hw.sram_bytes) for m in mem]
    times = [
        hw.stage_overhead_s + macs[k] / hw.macs_per_s + spill[k] / hw.host_bw + inb[k] / hw.link_bw
        for k in range(k_stages)
    ]
    return {
        "valid": valid,
        "mem_k": mem,
        "in_k": inb,
        "spill_k": spill,
        "macs_k": macs,
        "time_k": times,
        "comm_bytes": comm,
        "peak_mem_bytes": max(mem),
        "spill_bytes": sum(spill),
        "bottleneck_s": max(times),
        "latency_s": sum(times),
    }


def reference_objective(graph: Graph, assignment, hw, objective: str, lam: float = 1.0) -> float:
    m = reference_metrics(graph, assignment, hw)
    if objective == "paper":
        return m["peak_mem_bytes"] + lam * m["comm_bytes"]
    if objective == "latency":
        return m["bottleneck_s"]
    raise ValueError(objective)


def enumerate_valid_schedules(graph: Graph, k_stages: int):
    """Yield every valid assignment (by node id) of a small graph, depth-first in SPEC order."""
    order = graph.topological_order().tolist()
    preds = graph.predecessors()
    s = [-1] * graph.num_nodes

    def rec(i):
        if i == len(order):
            yield list(s)
            return
        v = order[i]
        low = max((s[u] for u in preds[v]), default=0)
        for k in range(low, k_stages):
            s[v] = k
            yield from rec(i + 1)
        s[v] = -1

    yield from rec(0)
