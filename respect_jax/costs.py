"""THE cost model of SPEC section 2, written once, in jnp (jit- and vmap-able).

Every solver, the environment's reward, the CLI and every reported number call
:func:`evaluate` (or :func:`evaluate_assignment`, its NumPy-graph convenience wrapper). Nothing
project-internal is imported here apart from the padded graph container.

Notation (K stages, N padded nodes): ``s`` is the stage of each node (i32[N], SPEC order).

* ``mem_k   = b_p * sum(params_v : s(v) = k)``
* ``last(u) = max(s(v) : v in succ(u))``, or K-1 for a node without successors
* ``comm    = b_a * sum_u output_size_u * (last(u) - s(u))``
* ``in_k    = b_a * sum_u output_size_u * [s(u) < k <= last(u)]``  (``in_0 = 0``)
* ``spill_k = max(0, mem_k - C)``
* ``T_k     = tau + macs_k / R + spill_k / H + in_k / L``
* ``bottleneck = max_k T_k``, ``latency = sum_k T_k``, ``throughput = 1 / bottleneck``
* objective ``paper``  = ``max_k mem_k + lam * comm``; objective ``latency`` = ``bottleneck``.
"""

from __future__ import annotations

from dataclasses import asdict

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax import pytree as struct
from respect_jax.compile_cache import cached_compile
from respect_jax.graphs.padded import PaddedGraph

OBJECTIVES = ("paper", "latency")


@struct.dataclass
class Hardware:
    """A pipeline of K identical accelerators (SPEC section 2). Units: bytes, seconds.

    ``stages`` is static (it fixes array shapes); every other field may be a traced scalar, so a
    batch of hardware settings can be vmapped.
    """

    stages: int = struct.field(pytree_node=False)
    sram_bytes: float
    param_bytes: float
    act_bytes: float
    macs_per_s: float
    host_bw: float
    link_bw: float
    stage_overhead_s: float

    def to_dict(self) -> dict:
        return {k: (int(v) if k == "stages" else float(v)) for k, v in asdict(self).items()}


MAX_STAGES = 1024  # accelerators in one pipeline: far above any real one; bounds the [K, K] state arrays


def hardware_from_dict(values: dict) -> Hardware:
    """Build :class:`Hardware` from a mapping (e.g. a Hydra ``hardware`` node); checks ranges."""
    fields = (
        "stages",
        "sram_bytes",
        "param_bytes",
        "act_bytes",
        "macs_per_s",
        "host_bw",
        "link_bw",
        "stage_overhead_s",
    )
    missing = [f for f in fields if f not in values]
    if missing:
        raise ValueError(f"hardware config is missing {', '.join(missing)}")
    stages = values["stages"]
    if not isinstance(stages, int) or isinstance(stages, bool) or not 1 <= stages <= MAX_STAGES:
        raise ValueError(f"hardware.stages must be an integer in [1, {MAX_STAGES}], got {stages!r}")
    kwargs = {"stages": stages}
    for f in fields[1:]:
        try:
            v = float(values[f])
        except (TypeError, ValueError):
            raise ValueError(f"hardware.{f} must be a number, got {values[f]!r}") from None
        positive = f in ("macs_per_s", "host_bw", "link_bw")
        if not np.isfinite(v) or v < 0 or (positive and v == 0):
            raise ValueError(f"hardware.{f} must be {'> 0' if positive else '>= 0'} and finite, got {values[f]!r}")
        kwargs[f] = v
    return Hardware(**kwargs)


@struct.dataclass
class Metrics:
    """Every SPEC quantity for one schedule (add a leading axis for a batch).

    Attributes:
        mem_k: f32[K] parameter bytes per stage.
        in_k: f32[K] bytes of tensors entering each stage from the previous one.
        spill_k: f32[K] parameter bytes streamed from the host per inference.
        macs_k: f32[K] compute per stage.
        time_k: f32[K] stage times T_k (s).
        comm_bytes: f32[] bytes forwarded across all stage boundaries.
        peak_mem_bytes: f32[] max_k mem_k.
        spill_bytes: f32[] sum_k spill_k.
        bottleneck_s: f32[] max_k T_k.
        latency_s: f32[] sum_k T_k.
        valid: bool[] every edge goes forward (s(u) <= s(v)) and every stage is in 0..K-1.
    """

    mem_k: jax.Array
    in_k: jax.Array
    spill_k: jax.Array
    macs_k: jax.Array
    time_k: jax.Array
    comm_bytes: jax.Array
    peak_mem_bytes: jax.Array
    spill_bytes: jax.Array
    bottleneck_s: jax.Array
    latency_s: jax.Array
    valid: jax.Array


def last_stage(graph: PaddedGraph, stage: jax.Array, num_stages: int) -> jax.Array:
    """i32[N] ``last(u)``: the latest stage among u's consumers, K-1 for graph outputs."""
    consumer_stage = jnp.where(graph.edge_mask, stage[graph.receivers], -1)
    latest = jnp.full(stage.shape, -1, stage.dtype).at[graph.senders].max(consumer_stage)
    return jnp.where(latest < 0, num_stages - 1, latest)


def is_valid(graph: PaddedGraph, stage: jax.Array, num_stages: int) -> jax.Array:
    """bool[] True iff every real edge goes forward and every real node has a stage in range."""
    forward = stage[graph.senders] <= stage[graph.receivers]
    in_range = (stage >= 0) & (stage < num_stages)
    return jnp.all(forward | ~graph.edge_mask) & jnp.all(in_range | ~graph.node_mask)


def spill(mem, hw: Hardware):
    """``spill = max(0, mem - C)``: parameter bytes of a stage streamed from the host per inference. NumPy in
    (``mem`` an ndarray, ``hw`` of Python numbers), NumPy out, in its dtype; anything else goes through jnp."""
    maximum = np.maximum if isinstance(mem, np.ndarray) else jnp.maximum
    return maximum(0.0, mem - hw.sram_bytes)


def stage_time(mem, macs, in_bytes, hw: Hardware):
    """``T = tau + macs / R + spill(mem) / H + in_bytes / L``: the time of a stage holding ``mem`` parameter
    bytes and ``macs`` compute that receives ``in_bytes`` from the previous stage (any broadcastable shapes)."""
    return hw.stage_overhead_s + macs / hw.macs_per_s + spill(mem, hw) / hw.host_bw + in_bytes / hw.link_bw


def evaluate(graph: PaddedGraph, stage: jax.Array, hw: Hardware) -> Metrics:
    """All SPEC quantities of the schedule ``stage`` (i32[N], positions) on ``graph``.

    Works on one graph; ``jax.vmap`` it for a batch. Values for an invalid schedule are computed
    by the same formulas (``last - s`` may then be negative) and must be ignored: check ``valid``.
    """
    k = hw.stages
    stage = stage.astype(jnp.int32)
    mask = graph.node_mask
    onehot = (stage[:, None] == jnp.arange(k)[None, :]) & mask[:, None]  # [N, K]
    mem_k = hw.param_bytes * jnp.sum(jnp.where(onehot, graph.params[:, None], 0.0), axis=0)
    macs_k = jnp.sum(jnp.where(onehot, graph.macs[:, None], 0.0), axis=0)
    last = last_stage(graph, stage, k)
    out = jnp.where(mask, graph.output_size, 0.0)
    comm = hw.act_bytes * jnp.sum(out * (last - stage))
    ks = jnp.arange(k)[None, :]
    crossing = (stage[:, None] < ks) & (ks <= last[:, None])  # [N, K]
    in_k = hw.act_bytes * jnp.sum(jnp.where(crossing, out[:, None], 0.0), axis=0)
    spill_k = spill(mem_k, hw)
    time_k = stage_time(mem_k, macs_k, in_k, hw)
    return Metrics(
        mem_k=mem_k,
        in_k=in_k,
        spill_k=spill_k,
        macs_k=macs_k,
        time_k=time_k,
        comm_bytes=comm,
        peak_mem_bytes=jnp.max(mem_k),
        spill_bytes=jnp.sum(spill_k),
        bottleneck_s=jnp.max(time_k),
        latency_s=jnp.sum(time_k),
        valid=is_valid(graph, stage, k),
    )


def objective_value(metrics: Metrics, objective: str, lam: float = 1.0) -> jax.Array:
    """The named SPEC objective (lower is better) from :class:`Metrics` (works batched)."""
    if objective == "paper":
        return metrics.peak_mem_bytes + lam * metrics.comm_bytes
    if objective == "latency":
        return metrics.bottleneck_s
    raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")


def lower_bound_from_totals(total, largest, hw: Hardware, objective: str):
    """The bound of :func:`objective_lower_bound` from a graph's total and largest node count.

    ``total``/``largest`` are the params (``paper``) or MACs (``latency``) of the graph; works on
    Python/NumPy float64 values and on jnp arrays alike (one formula for both callers).
    """
    work = jnp.maximum(total / hw.stages, largest) if isinstance(total, jax.Array) else max(total / hw.stages, largest)
    if objective == "paper":
        return hw.param_bytes * work
    if objective == "latency":
        return hw.stage_overhead_s + work / hw.macs_per_s
    raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")


def objective_lower_bound(graph: PaddedGraph, hw: Hardware, objective: str) -> jax.Array:
    """f32[] a cheap lower bound on the objective of any valid schedule (reward normaliser).

    ``paper``: peak memory >= max(total / K, largest node); communication >= 0.
    ``latency``: the bottleneck >= tau + max(total macs / K, largest node's macs) / R.
    The bound is floored at a tiny positive value so it can divide.
    """
    counts = {"paper": graph.params, "latency": graph.macs}.get(objective)
    if counts is None:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    bound = lower_bound_from_totals(jnp.sum(counts), jnp.max(counts), hw, objective)
    return jnp.maximum(bound, 1e-12)


def _evaluate_compiled(padded: PaddedGraph, stage: jax.Array, hw: Hardware) -> Metrics:
    """:func:`evaluate` through its compiled executable for these shapes (a command's later process loads it
    from the executables cache without tracing: :func:`respect_jax.compile_cache.cached_compile`)."""
    return cached_compile("evaluate", evaluate, (padded, stage, hw))(padded, stage, hw)


def evaluate_assignment(graph, assignment, hw: Hardware, objective: str = "paper", lam: float = 1.0) -> dict:
    """Score an assignment given by original node id on a :class:`~respect_jax.graphs.Graph`.

    Returns a plain dict of Python floats: ``objective``, ``valid`` and every metric (per-stage
    lists included). This is the function solvers and the CLI use to report numbers.
    """
    from respect_jax.graphs.padded import pad_graph, to_position_order

    padded = pad_graph(graph)
    assignment = np.asarray(assignment)
    if assignment.shape != (graph.num_nodes,):
        raise ValueError(f"assignment has shape {assignment.shape}, expected ({graph.num_nodes},)")
    stage = jnp.asarray(to_position_order(padded, assignment))
    m = jax.device_get(_evaluate_compiled(padded, stage, hw))
    in_range = bool(np.all((assignment >= 0) & (assignment < hw.stages)))
    return metrics_document(m, objective, lam, in_range)


def metrics_document(m: Metrics, objective: str, lam: float, in_range: bool) -> dict:
    """The plain dict :func:`evaluate_assignment` returns, from one schedule's :class:`Metrics` (NumPy values,
    no batch axis) and whether every stage index is in ``[0, K)``; shared by the batched re-scoring."""
    out = {
        "objective": float(objective_value(m, objective, lam)),
        "valid": bool(m.valid) and in_range,
        "peak_mem_bytes": float(m.peak_mem_bytes),
        "comm_bytes": float(m.comm_bytes),
        "bottleneck_s": float(m.bottleneck_s),
        "latency_s": float(m.latency_s),
        # null when nothing takes time (an all-zero graph with stage_overhead_s = 0): JSON has no Infinity
        "throughput_per_s": float(1.0 / m.bottleneck_s) if float(m.bottleneck_s) > 0 else None,
        "spill_bytes": float(m.spill_bytes),
        "mem_k": np.asarray(m.mem_k).tolist(),
        "in_k": np.asarray(m.in_k).tolist(),
        "spill_k": np.asarray(m.spill_k).tolist(),
        "macs_k": np.asarray(m.macs_k).tolist(),
        "time_k": np.asarray(m.time_k).tolist(),
    }
    return out
