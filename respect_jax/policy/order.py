"""The order policy: a GNN scores every node, the scores choose a topological order, and the exact
contiguous programme splits that order into at most K stages.

Why this is complete: for every valid schedule ``s`` (``s(u) <= s(v)`` on every edge) the order "by stage,
then by SPEC position" is topological and holds every stage as one segment, so the best schedule is the
best contiguous split of *some* topological order. The network only has to rank the nodes; where the
cuts go is decided exactly (:func:`respect_jax.solvers.partitioners.contiguous_search`, O(K n log n)).
A greedy decoding is one forward pass, one priority-queue topological sort and one split; sampling
perturbs the scores and keeps the best split.

Inputs are size-free (no 1/n fractions, no degree normalised by a padded width, no node count): every
byte count is relative to a stage's share of the graph's parameters, compute to a stage's share of the
MACs, times to the latency bound ``T*``, and the context carries K, the hardware relative to the graph
and the objective. So one network serves every K, hardware, objective and graph size.

The training target of a node is its normalised stage ``(s(v) + 0.5) / K`` in a teacher's schedule
(:func:`stage_targets`); any score vector that ranks later stages higher reproduces the teacher's schedule
up to the split, which the programme then optimises.

The network itself (a flax module) is :mod:`respect_jax.policy.order_model`; this module imports no flax, so a
command that schedules with a stored compiled forward pass never imports it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.compile_cache import cached_compile
from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph, kahn_order
from respect_jax.graphs.padded import PaddedGraph, bucket_shape, bucket_size, pad_graph
from respect_jax.solvers.partitioners import _segment_terms, contiguous_assignment, contiguous_search

if TYPE_CHECKING:
    from respect_jax.policy.order_model import OrderPolicy

ORDER_FEATURE_NAMES = (
    "params_share_log",  # log1p(4 p_v / (P/K)): the node's parameters against a stage's share
    "params_sram_log",  # log1p(p_v / C)
    "macs_share_log",  # log1p(4 m_v / (M/K))
    "out_share_log",  # log1p(4 o_v / (P/K)): its output tensor against a stage's share of parameters
    "out_cut_log",  # log1p(o_v / mean cut bytes of the SPEC order)
    "params_before",  # parameters at SPEC positions < v, / P
    "macs_before",  # MACs at SPEC positions < v, / M
    "position",  # SPEC position / (n - 1)
    "depth",  # ASAP level / longest path
    "height",  # levels to a sink / longest path
    "in_degree",  # min(deg, 8) / 8
    "out_degree",
    "is_source",
    "is_sink",
    "no_params",
    "cut_before_log",  # log1p(bytes crossing a cut just before v / mean cut)
    "cut_after_log",  # the same just after v
    "cut_after_share_log",  # log1p(4 cut after v / (P/K)): the paper objective's trade-off
    "cut_after_time_log",  # log1p(cut after v / link_bw / T*)
    "macs_time_log",  # log1p(m_v / macs_per_s / T*)
    "spill_time_log",  # log1p(p_v / host_bw / T*)
)
NUM_ORDER_FEATURES = len(ORDER_FEATURE_NAMES)
ORDER_CONTEXT_NAMES = (
    "inv_k",
    "memory_pressure",  # log1p(P / (K C))
    "overhead_share",  # tau / T*
    "stream_time_log",  # log1p((P/K) / host_bw / T*)
    "cut_time_log",  # log1p(mean cut / link_bw / T*)
    "cut_share_log",  # log1p(mean cut / (P/K))
    "host_link_ratio",  # log(host_bw / link_bw) / 4
    "act_param_ratio",  # log(b_a / b_p) / 2
    *(f"objective_{name}" for name in OBJECTIVES),
)
NUM_ORDER_CONTEXT = len(ORDER_CONTEXT_NAMES)
FORMAT = "respect-jax-order-policy/1"


@dataclass(frozen=True)
class OrderPolicyConfig:
    """Architecture of :class:`~respect_jax.policy.order_model.OrderPolicy` (saved in the checkpoint's network.json).

    Attributes: encoder (``gat`` | ``mean`` | ``sum``), layers (message-passing layers), width, heads (of
    ``gat``), head_layers (hidden layers of the per-node score MLP).
    """

    encoder: str = "gat"
    layers: int = 4
    width: int = 64
    heads: int = 4
    head_layers: int = 2

    def __post_init__(self):
        if self.encoder not in ("gat", "mean", "sum"):
            raise ValueError(f"order policy encoder must be gat, mean or sum, got {self.encoder!r}")
        if self.width < 1 or self.heads < 1 or self.width % self.heads:
            raise ValueError(f"order policy width ({self.width}) must be a positive multiple of heads ({self.heads})")
        if self.layers < 0 or self.head_layers < 0:
            raise ValueError("order policy layers and head_layers must be >= 0")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> OrderPolicyConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown order policy option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**values)


# ----------------------------------------------------------------------------- inputs (NumPy, O(N + E))


def order_inputs(graph: Graph, hw: Hardware, objective: str) -> tuple[np.ndarray, np.ndarray]:
    """(f32[n, NUM_ORDER_FEATURES] node features in SPEC order, f32[NUM_ORDER_CONTEXT] context).

    Every feature is unchanged when the graph is scaled (more nodes of the same kind) and when every byte
    count, or every rate and the overhead, is multiplied by one factor (see the module docstring).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; expected one of {', '.join(OBJECTIVES)}")
    order = graph.topological_order()
    n, k = graph.num_nodes, hw.stages
    par_prefix, macs_prefix, cut_b = _segment_terms(graph, hw, order)
    par, macs = np.diff(par_prefix), np.diff(macs_prefix)
    out = float(hw.act_bytes) * graph.output_size[order].astype(np.float64)
    total_par, total_macs = max(par_prefix[-1], 1.0), max(macs_prefix[-1], 1.0)
    share_p, share_m = max(total_par / k, 1.0), max(total_macs / k, 1.0)
    t_star = max(float(hw.stage_overhead_s) + max(total_macs / k, float(macs.max(initial=0.0))) / float(hw.macs_per_s),
                 1e-12)
    mean_cut = max(float(np.mean(cut_b[1:n])) if n > 1 else float(cut_b[-1]), 1.0)
    depth, height = graph.depth(), graph.height()
    levels = max(int(depth.max(initial=0)), 1)
    in_deg = np.bincount(graph.edges[:, 1], minlength=n) if graph.num_edges else np.zeros(n, np.int64)
    out_deg = np.bincount(graph.edges[:, 0], minlength=n) if graph.num_edges else np.zeros(n, np.int64)
    in_deg, out_deg = in_deg[order], out_deg[order]
    cut_after = cut_b[1:]
    link, host = float(hw.link_bw), float(hw.host_bw)
    feats = np.stack(
        [
            np.log1p(4.0 * par / share_p),
            np.log1p(par / max(float(hw.sram_bytes), 1.0)),
            np.log1p(4.0 * macs / share_m),
            np.log1p(4.0 * out / share_p),
            np.log1p(out / mean_cut),
            par_prefix[:-1] / total_par,
            macs_prefix[:-1] / total_macs,
            np.arange(n) / max(n - 1, 1),
            depth[order] / levels,
            height[order] / levels,
            np.minimum(in_deg, 8) / 8.0,
            np.minimum(out_deg, 8) / 8.0,
            (in_deg == 0).astype(np.float64),
            (out_deg == 0).astype(np.float64),
            (par == 0).astype(np.float64),
            np.log1p(cut_b[:-1] / mean_cut),
            np.log1p(cut_after / mean_cut),
            np.log1p(4.0 * cut_after / share_p),
            np.log1p(cut_after / link / t_star),
            np.log1p(macs / float(hw.macs_per_s) / t_star),
            np.log1p(par / host / t_star),
        ],
        axis=-1,
    )
    tiny = 1e-30
    context = np.array(
        [
            1.0 / k,
            np.log1p(total_par / max(k * float(hw.sram_bytes), 1.0)),
            float(hw.stage_overhead_s) / t_star,
            np.log1p(share_p / host / t_star),
            np.log1p(mean_cut / link / t_star),
            np.log1p(mean_cut / share_p),
            np.log(host / link) / 4.0,
            np.log(max(float(hw.act_bytes), tiny) / max(float(hw.param_bytes), tiny)) / 2.0,
            *(float(objective == name) for name in OBJECTIVES),
        ]
    )
    return feats.astype(np.float32), context.astype(np.float32)


@dataclass(frozen=True)
class OrderBatch:
    """A padded batch for the order policy (B graphs, N padded nodes).

    Attributes: graphs: PaddedGraph with leading axis B (SPEC order); feats f32[B, N, F] (0 on padding);
    context f32[B, C].
    """

    graphs: PaddedGraph
    feats: np.ndarray
    context: np.ndarray


def make_batch(
    graphs: list[Graph], hws: list[Hardware], objectives: list[str], shape: tuple[int, int, int]
) -> OrderBatch:
    """Pad ``graphs`` (each with its hardware and objective) to ``shape`` = (N, E, P) and stack them."""
    padded, feats, context = [], [], []
    for graph, hw, objective in zip(graphs, hws, objectives, strict=True):
        padded.append(pad_graph(graph, shape))
        f, c = order_inputs(graph, hw, objective)
        pad = np.zeros((shape[0], NUM_ORDER_FEATURES), np.float32)
        pad[: graph.num_nodes] = f
        feats.append(pad)
        context.append(c)
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *padded)
    return OrderBatch(stacked, np.stack(feats), np.stack(context))


def stage_targets(graph: Graph, assignment_by_id: np.ndarray, stages: int) -> np.ndarray:
    """f32[n] the training target of each node in SPEC order: ``(s(v) + 0.5) / K``."""
    order = graph.topological_order()
    return ((np.asarray(assignment_by_id)[order] + 0.5) / stages).astype(np.float32)


def score_loss(scores: jax.Array, targets: jax.Array, node_mask: jax.Array) -> jax.Array:
    """Mean squared error over real nodes. scores, targets f32[B, N]; node_mask bool[B, N]."""
    w = node_mask.astype(jnp.float32)
    return jnp.sum(w * (scores - targets) ** 2) / jnp.maximum(jnp.sum(w), 1.0)


# ----------------------------------------------------------------------------- decoding (NumPy)


class _Kahn:
    """Kahn's algorithm on one graph with its successor lists and in-degrees built once (many orders of one graph):
    among the ready nodes the one of least ``priority`` first, the same order as
    :func:`~respect_jax.graphs.graph.topological_order_kahn`."""

    def __init__(self, graph: Graph):
        n = graph.num_nodes
        self.indeg = np.bincount(graph.edges[:, 1], minlength=n).tolist() if graph.num_edges else [0] * n
        self.succs = graph.successors()

    def __call__(self, priority: np.ndarray) -> list[int]:
        return kahn_order(list(self.indeg), self.succs, np.asarray(priority).tolist())


def order_from_scores(graph: Graph, scores: np.ndarray, kahn: _Kahn | None = None) -> np.ndarray:
    """int64[n] node ids in a topological order that takes the ready node of least score first (ties: SPEC
    position). ``scores`` f32[n] in SPEC order; ``kahn``: the graph's prepared sort (built when None). O((n + E) log
    n)."""
    spec = graph.topological_order()
    n = graph.num_nodes
    key = np.empty(n, dtype=np.float64)
    key[spec] = np.asarray(scores, dtype=np.float64)[:n]
    position = np.empty(n, dtype=np.int64)
    position[spec] = np.arange(n)
    priority = np.empty(n, dtype=np.int64)
    priority[np.lexsort((position, key))] = np.arange(n)  # by score, ties by SPEC position
    return np.asarray((kahn or _Kahn(graph))(priority), dtype=np.int64)


def split_order(graph: Graph, hw: Hardware, objective: str, lam: float, order: np.ndarray) -> tuple[np.ndarray, float]:
    """(int64[n] assignment by node id, objective) of the best contiguous split of ``order``."""
    cuts, value, _ = contiguous_search(graph, hw, objective, lam, order)
    return contiguous_assignment(graph, cuts, order), float(value)


def priorities(graph: Graph, scores: np.ndarray) -> np.ndarray:
    """int64[R, n] the Kahn priority (a rank: by score, ties by SPEC position) of every node id, for each row of
    ``scores`` (f[R, >= n], SPEC order)."""
    spec = graph.topological_order()
    n = graph.num_nodes
    rows = len(scores)
    key = np.empty((rows, n), dtype=np.float64)
    key[:, spec] = np.asarray(scores, dtype=np.float64)[:, :n]
    position = np.empty(n, dtype=np.int64)
    position[spec] = np.arange(n)
    ranks = np.empty((rows, n), dtype=np.int64)
    np.put_along_axis(ranks, np.lexsort((np.broadcast_to(position, (rows, n)), key), axis=-1),
                      np.broadcast_to(np.arange(n), (rows, n)), axis=-1)
    return ranks


#: rows of one node count from which :func:`kahn_rows` steps them together in NumPy rather than one heap sort per row
#: (measured on this 2-core CPU, CPU time: one step costs ~34 us + ~0.02 us per row, a heap sort ~0.1 us per row and
#: node, so the lockstep pays from ~100 rows: 200 nodes, 33 / 128 rows: heap 3.6 / 13.6 ms, lockstep 7.3 / 9.9 ms;
#: Inception-ResNet-v2 (780 nodes), 33 / 128 rows: 15.7 / 59.3 vs 32.9 / 55.6 ms; the same orders)
LOCKSTEP_MIN_ROWS = 128


def kahn_rows(graphs: Sequence[Graph], ranks: Sequence[np.ndarray]) -> list[np.ndarray]:
    """int64[R_i, n] per graph: the topological orders of Kahn's algorithm taking the ready node of least rank first
    (:func:`~respect_jax.graphs.graph.topological_order_kahn` for each row of ``ranks[i]``, int[R_i, n] distinct per
    row). The rows of graphs with one node count are stepped together (n NumPy steps) when there are at least
    :data:`LOCKSTEP_MIN_ROWS` of them, else each row is one heap sort (:class:`_Kahn`); the same orders."""
    out: list[np.ndarray | None] = [None] * len(graphs)
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(graphs):
        groups.setdefault(g.num_nodes, []).append(i)
    for n, idx in groups.items():
        if sum(len(ranks[i]) for i in idx) < LOCKSTEP_MIN_ROWS:
            for i in idx:
                sort, rows_i = _Kahn(graphs[i]), np.asarray(ranks[i], np.int64)
                out[i] = np.array([sort(row) for row in rows_i], np.int64).reshape(len(rows_i), n)
            continue
        out_of_reach = np.int32(n + 1)  # the rank of a node that is not ready (every real rank is < n)
        never = np.int32(1 << 30)  # in-degree of the sentinel column n (never read: successors skip it)
        width = max([int(np.bincount(graphs[i].edges[:, 0]).max()) if graphs[i].num_edges else 0 for i in idx] + [1])
        succ, indeg, rank = [], [], []
        for i in idx:
            g = graphs[i]
            table = np.full((n, width), n, np.int32)  # column n: a sentinel that never becomes ready
            for u, vs in enumerate(g.successors()):
                table[u, : len(vs)] = vs
            deg = np.append(np.bincount(g.edges[:, 1], minlength=n) if g.num_edges else np.zeros(n, np.int64), never)
            r = np.asarray(ranks[i], np.int32)
            succ.append(np.broadcast_to(table, (len(r), n, width)))
            indeg.append(np.broadcast_to(deg.astype(np.int32), (len(r), n + 1)))
            rank.append(np.concatenate([r, np.full((len(r), 1), out_of_reach, np.int32)], axis=1))
        succ_rows, indeg_rows, rank_rows = np.concatenate(succ), np.concatenate(indeg).ravel(), np.concatenate(rank)
        rows = np.arange(len(rank_rows))
        # flat positions of row r's column c: r * (n + 1) + c (one-dimensional gathers and scatters are the cheap ones)
        row_base = (rows * (n + 1)).astype(np.int64)
        rank_flat = rank_rows.ravel()
        ready = np.where(indeg_rows.reshape(len(rows), n + 1) == 0, rank_rows, out_of_reach)  # int32[R, n + 1]
        ready_flat = ready.ravel()  # a view: writes reach ``ready``
        orders = np.empty((len(rows), n), np.int64)
        for step in range(n):
            u = np.argmin(ready, axis=1)
            orders[:, step] = u
            ready_flat[row_base + u] = out_of_reach
            succ_u = succ_rows[rows, u]  # [R, width]: u's successors in each row, the sentinel n after them
            targets = (row_base[:, None] + succ_u)[succ_u < n]  # distinct flat positions (successors are distinct)
            indeg_rows[targets] -= 1
            newly = targets[indeg_rows[targets] == 0]
            ready_flat[newly] = rank_flat[newly]
        at = 0
        for i in idx:
            out[i] = orders[at : at + len(ranks[i])]
            at += len(ranks[i])
    return out  # type: ignore[return-value]


def candidate_orders(graph: Graph, scores: np.ndarray, samples: int, noise: float,
                     seed: int) -> tuple[list[np.ndarray], list[int]]:
    """(the distinct orders to split, the candidate index of each): the greedy order of ``scores`` (f32[n], SPEC
    order; candidate 0) and the orders of ``samples`` draws of the scores plus Gaussian noise of standard deviation
    ``noise`` (candidate i >= 1; seeded by ``seed``). A sampled order equal to an earlier one is left out (it cannot
    win: a candidate must be strictly better), so on graphs whose order is nearly forced (chains) samples cost
    little. (:func:`candidate_orders_many` of one graph.)"""
    return candidate_orders_many([graph], [scores], samples, noise, [seed])[0]


def candidate_orders_many(graphs: Sequence[Graph], scores: Sequence[np.ndarray], samples: int, noise: float,
                          seeds: Sequence[int]) -> list[tuple[list[np.ndarray], list[int]]]:
    """:func:`candidate_orders` of every graph, the orders of all graphs sorted together (:func:`kahn_rows`)."""
    ranks = []
    for graph, s, seed in zip(graphs, scores, seeds, strict=True):
        base = np.asarray(s[: graph.num_nodes], np.float64)
        rows = [base]
        if samples > 0:
            rng = np.random.default_rng(seed)
            rows += list(base + noise * rng.standard_normal((samples, graph.num_nodes)))
        ranks.append(priorities(graph, np.stack(rows)))
    out = []
    for orders in kahn_rows(graphs, ranks):
        kept, index, seen = [], [], set()
        for i, order in enumerate(orders):
            if order.tobytes() not in seen:
                seen.add(order.tobytes())
                kept.append(order)
                index.append(i)
        out.append((kept, index))
    return out


#: ``latency``: :func:`decode_many` splits only the winning order to the end
#: (:func:`~respect_jax.policy.order_split.best_latency_splits`: the same winner, cuts and value as splitting every
#: order, ``tests/test_schedule_many.py``); False: every order's split (sessions 19-29)
LATENCY_BEST_ONLY = True


def decode_many(
    graphs: Sequence[Graph],
    hw: Hardware,
    objective: str,
    lam: float,
    scores: Sequence[np.ndarray],
    samples: int = 0,
    noise: float = 0.05,
    seeds: Sequence[int] | None = None,
) -> list[tuple[np.ndarray, float, int]]:
    """:func:`decode_scores` of every graph (graph i with ``scores[i]`` and ``seeds[i]``, default 0), the splits of
    all their orders computed together (:func:`respect_jax.policy.order_split.split_many`: the same cuts and values
    as one ``contiguous_search`` per order)."""
    from respect_jax.policy.order_split import best_latency_splits, split_many

    seeds = [0] * len(graphs) if seeds is None else seeds
    candidates = candidate_orders_many(graphs, scores, samples, noise, seeds)
    if objective == "latency" and LATENCY_BEST_ONLY:  # the winning order only (the same winner, cuts and value)
        best = best_latency_splits([(g, orders) for g, (orders, _) in zip(graphs, candidates, strict=True)], hw, lam)
        return [(contiguous_assignment(graph, cuts, orders[c]), float(value), index[c])
                for graph, (orders, index), (c, cuts, value) in zip(graphs, candidates, best, strict=True)]
    splits = split_many([(g, orders) for g, (orders, _) in zip(graphs, candidates, strict=True)], hw, objective, lam)
    out = []
    for graph, (orders, index), split in zip(graphs, candidates, splits, strict=True):
        best = 0
        for c in range(1, len(orders)):
            if split[c][1] < split[best][1]:
                best = c
        cuts, value = split[best]
        out.append((contiguous_assignment(graph, cuts, orders[best]), float(value), index[best]))
    return out


def decode_scores(
    graph: Graph,
    hw: Hardware,
    objective: str,
    lam: float,
    scores: np.ndarray,
    samples: int = 0,
    noise: float = 0.05,
    seed: int = 0,
) -> tuple[np.ndarray, float, int]:
    """The best split over the greedy order of ``scores`` (f32[n], SPEC order) and ``samples`` orders of the
    scores plus Gaussian noise of standard deviation ``noise`` (in target units: a stage is 1/K).

    Returns (assignment by node id, objective, index of the winning candidate: 0 greedy, i >= 1 sample i; the first
    of equal ones). Each distinct order is split once (:func:`candidate_orders`), all of them together
    (:func:`decode_many`).
    """
    return decode_many([graph], hw, objective, lam, [scores], samples, noise, [seed])[0]


# ----------------------------------------------------------------------------- inference and checkpoints

#: on accelerators, graphs above this padded size use the O(E) segment aggregation instead of N x N matmuls
DENSE_MAX_NODES = 1024


def default_aggregation(padded_nodes: int) -> str:
    """``segment`` (O(E) gathers and segment sums) on CPU, where it is faster than the dense N x N adjacency
    matmuls at every bucket size and batch (``experiments/order_aggregation.py``), and above
    :data:`DENSE_MAX_NODES`; ``dense`` on accelerators below it. Both give the same scores up to float error."""
    return "segment" if jax.default_backend() == "cpu" or padded_nodes > DENSE_MAX_NODES else "dense"


@dataclass(frozen=True)
class OrderNetwork:
    """A trained order policy as plain arrays: its config and its parameters by path (``encoder/embed1/kernel``,
    ...), without the flax module (:func:`respect_jax.policy.order_model.restore_module` builds one). What the
    solver loads: the forward pass is a compiled executable of these arrays (:func:`predict_scores`), so a process
    that finds it in the executable cache (:func:`respect_jax.compile_cache.cached_compile`) never builds or traces
    the network."""

    config: OrderPolicyConfig
    params: dict[str, jax.Array]


def as_network(model: OrderPolicy | OrderNetwork) -> OrderNetwork:
    """``model`` (a trained :class:`~respect_jax.policy.order_model.OrderPolicy` module, or already plain arrays) as
    an :class:`OrderNetwork`."""
    if isinstance(model, OrderNetwork):
        return model
    from respect_jax.policy.order_model import module_network  # a module exists: flax is imported already

    return module_network(model)


def _apply(config: OrderPolicyConfig, aggregation: str):
    """``(params, graphs, feats, context) -> scores f32[B, N]``: the network of ``config`` as a pure function of its
    parameters (what :func:`respect_jax.compile_cache.cached_compile` compiles and stores)."""

    def apply(params, graphs, feats, context):
        from respect_jax.policy.order_model import restore_module  # flax only when a forward pass is compiled

        return restore_module(config, params)(graphs, feats, context, aggregation)

    return apply


def forward_executable(network: OrderNetwork, batch: OrderBatch, aggregation: str):
    """The compiled forward pass for ``batch``'s shapes (from memory, the executable cache, or compiled now):
    call it as ``(network.params, batch.graphs, batch.feats, batch.context)``."""
    args = (network.params, batch.graphs, batch.feats, batch.context)
    static = (FORMAT, tuple(sorted(network.config.to_dict().items())), aggregation)
    return cached_compile("order_forward", _apply(network.config, aggregation), args, static_key=static)


def forward_ready(network: OrderNetwork, graph: Graph, hw: Hardware, objective: str) -> bool:
    """True when the forward pass of ``graph`` alone (its bucket shape, one row) needs no compilation
    (:func:`respect_jax.compile_cache.is_ready`: compiled in this process or stored in the executable cache)."""
    from respect_jax.compile_cache import is_ready

    ((shape, rows, _),) = forward_plan([graph], 1)
    batch = make_batch([graph] * rows, [hw] * rows, [objective] * rows, shape)
    static = (FORMAT, tuple(sorted(network.config.to_dict().items())), default_aggregation(shape[0]))
    return is_ready("order_forward", (network.params, batch.graphs, batch.feats, batch.context), static)


def forward_plan(graphs: Sequence[Graph], batch_size: int) -> list[tuple[tuple[int, int, int], int, list[int]]]:
    """How :func:`predict_scores` batches ``graphs``: per node bucket, (padded shape (N, E, P) fitting all of that
    bucket's graphs, rows per compiled call, indices of its graphs). One compilation per (shape, rows): a bucket
    of more than ``batch_size`` graphs runs ``batch_size`` rows per call, its last call padded with copies."""
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(graphs):
        groups.setdefault(bucket_size(g.num_nodes), []).append(i)
    return [(bucket_shape([graphs[i] for i in idx]), min(batch_size, len(idx)), idx) for idx in groups.values()]


def predict_scores(model: OrderPolicy | OrderNetwork, graphs: list[Graph], hws: list[Hardware],
                   objectives: list[str], batch_size: int = 64, plan: list | None = None) -> list[np.ndarray | None]:
    """f32[n_i] scores (SPEC order) of every graph, batched by size bucket (one compiled call per bucket shape
    and rows: :func:`forward_executable`). ``plan``: the batching (:func:`forward_plan`, computed when None); graphs
    it leaves out get None."""
    network = as_network(model)
    out: list[np.ndarray | None] = [None] * len(graphs)
    for shape, size, idx in forward_plan(graphs, batch_size) if plan is None else plan:
        aggregation = default_aggregation(shape[0])
        for start in range(0, len(idx), size):
            chunk = idx[start : start + size]
            rows = chunk + [chunk[-1]] * (size - len(chunk))
            batch = make_batch([graphs[i] for i in rows], [hws[i] for i in rows], [objectives[i] for i in rows], shape)
            forward = forward_executable(network, batch, aggregation)
            scores = np.asarray(forward(network.params, batch.graphs, batch.feats, batch.context))
            for row, i in enumerate(chunk):
                out[i] = scores[row, : graphs[i].num_nodes]
    return out  # type: ignore[return-value]


def is_order_checkpoint(path: str | Path) -> bool:
    """True when ``path`` is a run folder of the order policy (its network.json names :data:`FORMAT`)."""
    doc = Path(path) / "network.json"
    try:
        return doc.is_file() and json.loads(doc.read_text()).get("format") == FORMAT
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return False


@functools.lru_cache(maxsize=4)
def load_order_network(path: str | Path) -> tuple[OrderNetwork, dict]:
    """(network as plain arrays, network document) of a run folder written by
    :func:`respect_jax.policy.order_model.save_order_policy`, without building the flax module: its float32
    parameters by name, on the device. Whether they fit the config is checked where the network is built
    (``order_model.restore_module``: compiling the forward pass, ``load_order_policy``); a stored executable is keyed
    by the names and shapes, so only a fitting set ever reaches one. One-line ValueError when the folder is not a
    checkpoint."""
    path = Path(path)
    if not is_order_checkpoint(path):
        raise ValueError(f"{path}: not an order-policy checkpoint (no network.json of format {FORMAT})")
    doc = json.loads((path / "network.json").read_text())
    config = OrderPolicyConfig.from_dict(doc["policy"])
    with np.load(path / "params.npz") as data:
        names = sorted(data.files)
        values = [data[name].astype(np.float32, copy=False) for name in names]
    return OrderNetwork(config, dict(zip(names, jax.device_put(values), strict=True))), doc
