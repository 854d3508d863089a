"""Synthetic DAG generators in two forms that sample the same distribution.

* :func:`generate_numpy` (NumPy RNG, one :class:`Graph` at a time) for datasets and labels;
* :func:`make_jax_generator` (pure JAX, ``key -> PaddedGraph``; jit/vmap-able) to draw thousands
  of fresh graphs per training step on the device.

Both implement the same sampling steps below with their own random streams; tests compare their
statistics. Node ids of a generated graph are already in the canonical order (topological: by
longest-path depth from the sources, ties by id), so ids = positions.

Mode ``respect`` (RESPECT's training distribution, arXiv 2304.04716): ``n`` nodes over
``L ~ U{L_min..L_max}``
levels (every level gets one node, the other ``n - L`` nodes pick a level uniformly); a node on
level ``l >= 1`` takes ``d ~ U{1..min(max_preds, #nodes on levels < l)}`` distinct predecessors:
one uniform from level ``l - 1`` and ``d - 1`` uniform without replacement from all earlier levels.
Counts are ``floor(U[0,5) * scale)`` per node for params, output size and MACs (RESPECT draws
weights U[0,5); the scales are config values).

Mode ``dnn`` (resembles keras.applications CNN layer graphs): nodes form a backbone in creation
order ``0..n-1``. Node ``v`` consumes ``v - 1`` or, with probability ``p_branch``, an earlier node
``v - j`` (``j ~ U{2..4}``: a parallel branch as in Inception/NASNet cells); with probability
``p_skip`` it also consumes ``v - d`` (``d ~ U{2..12}``: a residual/dense skip connection). A node
that no later node consumes is merged into ``v + 1`` (an add/concat), so the only output is the last
node. Resolution halves and channels double over ``num_resolutions`` equal spans of the backbone
(``H = 112 / 2^r``, ``C = C0 * 2^r``, ``C0 ~ U{16, 32, 64}`` per graph). Each node draws a layer
kind: conv (k x k, k in {1, 3}; params ``k^2 C^2 + C``, MACs ``k^2 C^2 H^2``), depthwise conv
(``k^2 C + C``, MACs ``k^2 C H^2``), batch norm (``4C``, MACs ``2 C H^2``), activation/add (0,
MACs ``C H^2``) or pooling (0, MACs ``9 C H^2``); output size ``C H^2``. Node 0 is the input
(no params, no MACs). Nodes are then relabelled into canonical order.

Mode ``layered`` (NumPy only; the random layered DAGs of the ICML'24 differentiable scheduler's public
benchmark: wide and shallow, 8-19 levels, 20-33 % of the nodes are sources, ~2.9 edges
per node in the "dense" family and ~1.2 in the "sparse" one, node weights 0-5,000 with most nodes
0): ``L ~ U{L_min..L_max}`` levels (default 8..19), a share ``U[min_source_frac, max_source_frac]``
of the ``n`` nodes are the sources (level 0); every other node takes a level in ``1..L-1`` (each level
gets one node, the rest pick uniformly). A node on level ``l >= 1`` takes one predecessor uniform
from level ``l - 1`` (so its depth is exactly ``l``) and ``min(Poisson(d - 1), max_preds - 1,
#earlier - 1)`` more, distinct and uniform from all levels ``< l``, where ``d = edges_per_node * n /
#non-sources`` makes the expected edges per node ``edges_per_node`` (less where the caps bind).
A node carries parameters with probability ``p_params``: ``params = floor(U[0,5) * param_scale)``
(``param_scale = 1000`` gives ICML's 0-4,999), else 0. Every node outputs one tensor of
``output_size = floor(U[0,5) * output_scale)`` elements, carried by each of its out-edges (ICML's
edge weight; the cost model has one tensor per producer). ``macs = params * output_size`` (each weight used
once per output element: a synthetic choice, so that compute follows the weights as in a DNN layer;
``macs_scale`` is not used). Levels are generated in order, so ids are already in canonical order.

Mode ``arch`` (synthetic DNN architectures: a stem, stages of residual / bottleneck / separable /
inverted-residual + squeeze-excite / inception / dense / NAS-cell / transformer blocks with
downsampling between stages, an optional head; Keras-style layer nodes with the real layer
formulas; ``min_nodes``..``max_nodes`` is the node range, the other fields are not used): see
:mod:`respect_jax.graphs.architectures`.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import PRED_BUCKETS, PaddedGraph, bucket_size

MODES = ("respect", "dnn", "layered", "arch")
LAYERED_LEVELS = (8, 19)  # default level range of mode layered (ICML'24 benchmark graphs)
# layer kinds of the dnn mode and their probabilities
KIND_NAMES = ("conv", "dwconv", "bn", "act", "pool")
KIND_PROBS = (0.35, 0.10, 0.25, 0.25, 0.05)
DNN_MAX_PREDS = 3  # backbone/branch, skip, merge


@dataclass(frozen=True)
class GeneratorConfig:
    """Synthetic graph distribution (every field is a Hydra config value under ``graphs``).

    ``min_nodes``..``max_nodes`` is the node-count range (uniform); ``min_levels``/``max_levels``
    default to ``n // 3`` and ``5 n // 6`` (RESPECT: 10-25 levels for 30 nodes, 16-40 for 50) and to
    8 and 19 in mode ``layered``. ``min_source_frac``, ``max_source_frac``, ``edges_per_node`` and
    ``p_params`` are used by mode ``layered`` only (see the module docstring).
    """

    mode: str = "respect"
    min_nodes: int = 30
    max_nodes: int = 30
    min_levels: int | None = None
    max_levels: int | None = None
    max_preds: int = 6
    param_scale: float = 100_000.0
    output_scale: float = 10_000.0
    macs_scale: float = 10_000_000.0
    p_branch: float = 0.15
    p_skip: float = 0.15
    num_resolutions: int = 5
    min_source_frac: float = 0.20
    max_source_frac: float = 0.33
    edges_per_node: float = 2.9
    p_params: float = 0.25

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"graphs.mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not (1 <= self.min_nodes <= self.max_nodes):
            raise ValueError(f"graphs: need 1 <= min_nodes <= max_nodes, got {self.min_nodes}, {self.max_nodes}")
        if self.mode == "arch":
            from respect_jax.graphs.architectures import check_arch_nodes

            check_arch_nodes(self.min_nodes)
        if self.max_preds < 1:
            raise ValueError(f"graphs.max_preds must be >= 1, got {self.max_preds}")
        for name in ("param_scale", "output_scale", "macs_scale"):
            if getattr(self, name) < 0:
                raise ValueError(f"graphs.{name} must be >= 0")
        if not (0 <= self.p_branch <= 1 and 0 <= self.p_skip <= 1):
            raise ValueError("graphs.p_branch and graphs.p_skip must be probabilities")
        if not (0 <= self.min_source_frac <= self.max_source_frac < 1):
            raise ValueError(
                f"graphs: need 0 <= min_source_frac <= max_source_frac < 1, got {self.min_source_frac}, "
                f"{self.max_source_frac}"
            )
        if not self.edges_per_node >= 0:
            raise ValueError(f"graphs.edges_per_node must be >= 0, got {self.edges_per_node}")
        if not 0 <= self.p_params <= 1:
            raise ValueError(f"graphs.p_params must be a probability, got {self.p_params}")

    def levels_range(self, n):
        """(L_min, L_max) for a graph of n nodes (works on ints and traced arrays)."""
        default_lo, default_hi = LAYERED_LEVELS if self.mode == "layered" else (n // 3, (5 * n) // 6)
        lo = self.min_levels if self.min_levels is not None else default_lo
        hi = self.max_levels if self.max_levels is not None else default_hi
        lo = _clip(lo, 1, n)
        hi = _clip(hi, lo, n)
        return lo, hi

    @property
    def pred_slots(self) -> int:
        if self.mode == "arch":
            from respect_jax.graphs.architectures import PRED_SLOTS

            return PRED_SLOTS
        return DNN_MAX_PREDS if self.mode == "dnn" else self.max_preds

    @property
    def padded_shape(self) -> tuple[int, int, int]:
        """(N, E, P) of the JAX generator's graphs: E = N * P (one edge slot per pred slot)."""
        n = bucket_size(self.max_nodes)
        p = bucket_size(self.pred_slots, PRED_BUCKETS)
        return n, n * p, p


def _clip(x, lo, hi):
    if isinstance(x, int | np.integer) and isinstance(lo, int | np.integer) and isinstance(hi, int | np.integer):
        return int(min(max(x, lo), hi))
    return jnp.clip(x, lo, hi)


def dnn_layer_counts(kind, k3, channels, height, xp=np):
    """(params, output_size, macs) of dnn-mode layers; ``xp`` is ``np`` or ``jnp``.

    kind: int index into KIND_NAMES; k3: bool kernel 3x3 (else 1x1); channels C; height H.
    """
    c, hw = channels.astype(xp.float32), (height * height).astype(xp.float32)
    ksq = xp.where(k3, 9.0, 1.0)
    params = xp.select(
        [kind == 0, kind == 1, kind == 2],
        [ksq * c * c + c, ksq * c + c, 4.0 * c],
        0.0,
    )
    macs = xp.select(
        [kind == 0, kind == 1, kind == 2, kind == 3],
        [ksq * c * c * hw, ksq * c * hw, 2.0 * c * hw, c * hw],
        9.0 * c * hw,
    )
    return params, c * hw, macs


def _dnn_geometry(n, index, num_resolutions, c0, xp):
    r = (index * num_resolutions) // xp.maximum(n, 1)
    return c0 * (2**r), xp.maximum(112 // (2**r), 1)


# ============================================================================ NumPy


def generate_numpy(cfg: GeneratorConfig, rng: np.random.Generator, name: str = "synthetic") -> Graph:
    """Draw one graph (ids in canonical order) from ``cfg`` with NumPy."""
    if cfg.mode == "arch":
        from respect_jax.graphs.architectures import generate_arch_numpy

        source = f"respect_jax.graphs.generate_numpy({cfg})"
        return relabel_spec_order(generate_arch_numpy(cfg.min_nodes, cfg.max_nodes, rng, name, source=source))
    n = int(rng.integers(cfg.min_nodes, cfg.max_nodes + 1))
    if cfg.mode == "respect":
        preds = _respect_preds_numpy(cfg, n, rng)
        u = rng.random((3, n))
        params = np.floor(u[0] * 5 * cfg.param_scale)
        out = np.floor(u[1] * 5 * cfg.output_scale)
        macs = np.floor(u[2] * 5 * cfg.macs_scale)
        ops = ("Synthetic",) * n
    elif cfg.mode == "layered":
        return _layered_numpy(cfg, n, rng, name)
    else:
        preds, kind, k3, c0 = _dnn_structure_numpy(cfg, n, rng)
        channels, height = _dnn_geometry(n, np.arange(n), cfg.num_resolutions, c0, np)
        params, out, macs = dnn_layer_counts(kind, k3, channels, height, np)
        params[0], macs[0] = 0.0, 0.0
        ops = ("Input",) + tuple(KIND_NAMES[k] for k in kind[1:])
    edges = [(u_, v) for v in range(n) for u_ in preds[v]]
    graph = Graph(
        name=name,
        params=params.astype(np.int64),
        output_size=out.astype(np.int64),
        macs=macs.astype(np.int64),
        edges=np.array(edges, dtype=np.int64).reshape(-1, 2),
        ops=ops,
        source=f"respect_jax.graphs.generate_numpy({cfg})",
    )
    return relabel_spec_order(graph)


def _respect_preds_numpy(cfg: GeneratorConfig, n: int, rng) -> list[list[int]]:
    lo, hi = cfg.levels_range(n)
    num_levels = int(rng.integers(lo, hi + 1))
    extra = rng.integers(0, num_levels, size=n)
    levels = np.sort(np.where(np.arange(n) < num_levels, np.arange(n), extra))
    start = np.searchsorted(levels, np.arange(num_levels + 1))
    preds: list[list[int]] = []
    for v in range(n):
        lvl = levels[v]
        if lvl == 0:
            preds.append([])
            continue
        earlier = int(start[lvl])
        d = int(rng.integers(1, min(cfg.max_preds, earlier) + 1))
        primary = int(rng.integers(start[lvl - 1], start[lvl]))
        others = [u for u in range(earlier) if u != primary]
        chosen = rng.choice(others, size=d - 1, replace=False).tolist() if d > 1 else []
        preds.append(sorted([primary, *chosen]))
    return preds


def _dnn_structure_numpy(cfg: GeneratorConfig, n: int, rng):
    idx = np.arange(n)
    branch = rng.random(n) < cfg.p_branch
    primary = np.maximum(np.where(branch, idx - rng.integers(2, 5, size=n), idx - 1), 0)
    d = rng.integers(2, 13, size=n)
    skip_ok = (rng.random(n) < cfg.p_skip) & (idx - d >= 0) & (idx - d != primary) & (idx >= 1)
    has_succ = np.zeros(n, bool)
    has_succ[primary[1:]] = True
    has_succ[(idx - d)[skip_ok]] = True
    preds: list[list[int]] = [[]]
    for v in range(1, n):
        p = {int(primary[v])}
        if skip_ok[v]:
            p.add(int(v - d[v]))
        if not has_succ[v - 1]:
            p.add(v - 1)
        preds.append(sorted(p))
    kind = rng.choice(len(KIND_NAMES), size=n, p=KIND_PROBS)
    k3 = rng.random(n) < 0.5
    c0 = int(rng.choice([16, 32, 64]))
    return preds, kind, k3, c0


def _layered_numpy(cfg: GeneratorConfig, n: int, rng: np.random.Generator, name: str) -> Graph:
    """One graph of mode ``layered`` (module docstring); ids are in canonical order (sorted by level)."""
    sources = int(np.clip(round(rng.uniform(cfg.min_source_frac, cfg.max_source_frac) * n), 1, n))
    lo, hi = cfg.levels_range(n)
    num_levels = min(int(rng.integers(lo, hi + 1)), n - sources + 1)
    rest = n - sources
    extra = rng.integers(1, num_levels, size=rest) if num_levels > 1 else np.zeros(rest, np.int64)
    levels = np.concatenate([np.zeros(sources, np.int64),
                             np.sort(np.where(np.arange(rest) < num_levels - 1, np.arange(1, rest + 1), extra))])
    start = np.searchsorted(levels, np.arange(num_levels + 1))  # start[l]: first node of level l
    child = np.arange(sources, n)
    lvl = levels[child]
    earlier = start[lvl]  # nodes on levels < l
    primary = rng.integers(start[lvl - 1], start[lvl]) if rest else np.zeros(0, np.int64)
    mean_extra = max(cfg.edges_per_node * n / max(rest, 1) - 1.0, 0.0)
    count = np.minimum(rng.poisson(mean_extra, size=rest), np.minimum(cfg.max_preds, earlier) - 1)
    owner = np.repeat(np.arange(rest), count)
    draws = _distinct_draws(rng, owner, earlier[owner] - 1, n)
    others = draws + (draws >= primary[owner])  # skip the primary predecessor
    edges = np.concatenate([np.stack([primary, child], 1), np.stack([others, child[owner]], 1)])
    edges = edges[np.lexsort((edges[:, 0], edges[:, 1]))]
    has_params = rng.random(n) < cfg.p_params
    params = np.where(has_params, np.floor(rng.random(n) * 5 * cfg.param_scale), 0.0).astype(np.int64)
    out = np.floor(rng.random(n) * 5 * cfg.output_scale).astype(np.int64)
    return Graph(
        name=name,
        params=params,
        output_size=out,
        macs=params * out,
        edges=edges,
        ops=("Input",) * sources + ("Synthetic",) * rest,
        source=f"respect_jax.graphs.generate_numpy({cfg})",
    )


def _distinct_draws(rng: np.random.Generator, owner: np.ndarray, pool: np.ndarray, n: int) -> np.ndarray:
    """i64[len(owner)] uniform draws ``x < pool[r]``, distinct among the rows of one owner (no replacement).

    Draws with replacement, then redraws every repeat of an (owner, value) pair until none is left; needs
    each owner's row count <= its pool size.
    """
    draws = np.floor(rng.random(len(owner)) * pool).astype(np.int64)
    while len(owner):
        keys = owner * n + draws
        order = np.argsort(keys, kind="stable")
        repeat = order[1:][keys[order][1:] == keys[order][:-1]]
        if len(repeat) == 0:
            break
        draws[repeat] = np.floor(rng.random(len(repeat)) * pool[repeat]).astype(np.int64)
    return draws


def relabel_spec_order(graph: Graph) -> Graph:
    """The same graph with ids renumbered into canonical order (so ids = positions)."""
    order = graph.topological_order()
    if np.array_equal(order, np.arange(graph.num_nodes)):
        return graph
    position = np.empty_like(order)
    position[order] = np.arange(graph.num_nodes)
    edges = position[graph.edges] if graph.num_edges else graph.edges
    return Graph(
        name=graph.name,
        params=graph.params[order],
        output_size=graph.output_size[order],
        macs=graph.macs[order],
        edges=edges[np.lexsort((edges[:, 0], edges[:, 1]))] if graph.num_edges else edges,
        node_names=tuple(graph.node_names[i] for i in order),
        ops=tuple(graph.ops[i] for i in order),
        source=graph.source,
    )


def generate_dataset(cfg: GeneratorConfig, count: int, seed: int, prefix: str = "g") -> list[Graph]:
    """``count`` graphs from one seed (graph i is named ``{prefix}{i:06d}``)."""
    rng = np.random.default_rng(seed)
    return [generate_numpy(cfg, rng, name=f"{prefix}{i:06d}") for i in range(count)]


# ============================================================================ JAX


def make_jax_generator(cfg: GeneratorConfig):
    """A pure function ``key -> PaddedGraph`` drawing one graph of ``cfg`` (vmap for a batch).

    Shapes are ``cfg.padded_shape`` whatever the drawn node count, so one compilation serves
    every draw. Positions are in canonical order and ``node_ids`` is the identity on real nodes.
    """
    if cfg.mode == "layered":
        raise ValueError("graphs.mode=layered has a NumPy generator only (generate_numpy / generate_dataset)")
    n_pad, _, p_pad = cfg.padded_shape
    if cfg.mode == "arch":
        from respect_jax.graphs.architectures import make_arch_jax_generator

        return make_arch_jax_generator(cfg.min_nodes, cfg.max_nodes, n_pad, p_pad)

    def generate(key: jax.Array) -> PaddedGraph:
        k_n, k_struct, k_counts = jax.random.split(key, 3)
        n = jax.random.randint(k_n, (), cfg.min_nodes, cfg.max_nodes + 1)
        if cfg.mode == "respect":
            preds, pred_mask = _respect_preds_jax(cfg, n, n_pad, k_struct)
            u = jax.random.uniform(k_counts, (3, n_pad))
            real = jnp.arange(n_pad) < n
            params = jnp.where(real, jnp.floor(u[0] * 5 * cfg.param_scale), 0.0)
            out = jnp.where(real, jnp.floor(u[1] * 5 * cfg.output_scale), 0.0)
            macs = jnp.where(real, jnp.floor(u[2] * 5 * cfg.macs_scale), 0.0)
            graph = _assemble(preds, pred_mask, params, out, macs, n, p_pad)
            return graph
        preds, pred_mask, params, out, macs = _dnn_jax(cfg, n, n_pad, k_struct, k_counts)
        return _relabel_jax(_assemble(preds, pred_mask, params, out, macs, n, p_pad))

    return generate


def _respect_preds_jax(cfg: GeneratorConfig, n, n_pad: int, key):
    k_levels, k_extra, k_d, k_primary, k_others = jax.random.split(key, 5)
    lo, hi = cfg.levels_range(n)
    num_levels = jax.random.randint(k_levels, (), lo, hi + 1)
    idx = jnp.arange(n_pad)
    extra = jax.random.randint(k_extra, (n_pad,), 0, num_levels)
    levels = jnp.where(idx < num_levels, idx, extra)
    levels = jnp.sort(jnp.where(idx < n, levels, n_pad + 1))  # padding sorts last
    start = jnp.searchsorted(levels, jnp.arange(n_pad + 1))  # start[l] = first node of level l
    lvl = jnp.minimum(levels, n_pad - 1)
    earlier = start[lvl]  # nodes on levels < lvl
    prev_start = start[jnp.maximum(lvl - 1, 0)]
    d = jax.random.randint(k_d, (n_pad,), 1, jnp.minimum(cfg.max_preds, jnp.maximum(earlier, 1)) + 1)
    primary = jax.random.randint(k_primary, (n_pad,), prev_start, jnp.maximum(earlier, prev_start + 1))
    # d - 1 more distinct earlier nodes: Gumbel top-k over candidates u < earlier, u != primary
    gumbel = jax.random.gumbel(k_others, (n_pad, n_pad))
    allowed = (idx[None, :] < earlier[:, None]) & (idx[None, :] != primary[:, None])
    scores = jnp.where(allowed, gumbel, -jnp.inf)
    top_scores, top_idx = jax.lax.top_k(scores, max(cfg.max_preds - 1, 1))
    slot = jnp.arange(cfg.max_preds - 1)[None, :]
    other_ok = (slot < (d[:, None] - 1)) & jnp.isfinite(top_scores[:, : cfg.max_preds - 1])
    preds = jnp.concatenate([primary[:, None], top_idx[:, : cfg.max_preds - 1]], axis=1)
    has_preds = (lvl >= 1) & (idx < n)
    pred_mask = jnp.concatenate([jnp.ones((n_pad, 1), bool), other_ok], axis=1) & has_preds[:, None]
    return jnp.where(pred_mask, preds, 0).astype(jnp.int32), pred_mask


def _dnn_jax(cfg: GeneratorConfig, n, n_pad: int, k_struct, k_counts):
    k_branch, k_j, k_skip, k_d = jax.random.split(k_struct, 4)
    k_kind, k_k3, k_c0 = jax.random.split(k_counts, 3)
    idx = jnp.arange(n_pad)
    real = idx < n
    branch = jax.random.uniform(k_branch, (n_pad,)) < cfg.p_branch
    primary = jnp.maximum(jnp.where(branch, idx - jax.random.randint(k_j, (n_pad,), 2, 5), idx - 1), 0)
    d = jax.random.randint(k_d, (n_pad,), 2, 13)
    skip_ok = (jax.random.uniform(k_skip, (n_pad,)) < cfg.p_skip) & (idx - d >= 0) & (idx - d != primary)
    skip_ok = skip_ok & (idx >= 1) & real
    primary_ok = (idx >= 1) & real
    has_succ = jnp.zeros(n_pad, bool).at[jnp.where(primary_ok, primary, n_pad)].set(True, mode="drop")
    has_succ = has_succ.at[jnp.where(skip_ok, idx - d, n_pad)].set(True, mode="drop")
    merge_ok = primary_ok & ~has_succ[jnp.maximum(idx - 1, 0)]
    preds = jnp.stack([primary, jnp.where(skip_ok, idx - d, 0), jnp.maximum(idx - 1, 0)], axis=1)
    pred_mask = jnp.stack([primary_ok, skip_ok, merge_ok], axis=1)
    kind = jax.random.choice(k_kind, len(KIND_NAMES), (n_pad,), p=jnp.asarray(KIND_PROBS))
    k3 = jax.random.uniform(k_k3, (n_pad,)) < 0.5
    c0 = jax.random.choice(k_c0, jnp.asarray([16, 32, 64]))
    channels, height = _dnn_geometry(n, idx, cfg.num_resolutions, c0, jnp)
    params, out, macs = dnn_layer_counts(kind, k3, channels, height, jnp)
    first = idx == 0
    params = jnp.where(real & ~first, params, 0.0)
    macs = jnp.where(real & ~first, macs, 0.0)
    out = jnp.where(real, out, 0.0)
    return preds.astype(jnp.int32), pred_mask, params, out, macs


def _assemble(preds, pred_mask, params, out, macs, n, p_pad: int) -> PaddedGraph:
    """Build a PaddedGraph from per-node predecessor slots (pads the slots to p_pad)."""
    n_pad, slots = preds.shape
    preds = jnp.pad(preds, ((0, 0), (0, p_pad - slots)))
    pred_mask = jnp.pad(pred_mask, ((0, 0), (0, p_pad - slots)))
    receivers = jnp.repeat(jnp.arange(n_pad, dtype=jnp.int32), p_pad)
    return PaddedGraph(
        params=params.astype(jnp.float32),
        output_size=out.astype(jnp.float32),
        macs=macs.astype(jnp.float32),
        node_mask=jnp.arange(n_pad) < n,
        senders=preds.reshape(-1),
        receivers=receivers,
        edge_mask=pred_mask.reshape(-1),
        preds=preds,
        pred_mask=pred_mask,
        num_nodes=n.astype(jnp.int32),
        node_ids=jnp.where(jnp.arange(n_pad) < n, jnp.arange(n_pad), -1).astype(jnp.int32),
    )


def depth_from_sources(graph: PaddedGraph) -> jax.Array:
    """i32[N] longest-path depth; needs predecessors at lower positions (a topological order)."""

    def body(depth, v):
        pred_depth = jnp.where(graph.pred_mask[v], depth[graph.preds[v]] + 1, 0)
        return depth.at[v].set(jnp.max(pred_depth, initial=0)), None

    depth, _ = jax.lax.scan(body, jnp.zeros(graph.params.shape[-1], jnp.int32), jnp.arange(graph.params.shape[-1]))
    return depth


def _relabel_jax(graph: PaddedGraph) -> PaddedGraph:
    """Renumber a graph whose positions are a topological order into canonical order."""
    n_pad = graph.params.shape[-1]
    idx = jnp.arange(n_pad)
    depth = jnp.where(graph.node_mask, depth_from_sources(graph), n_pad)
    order = jnp.argsort(depth * n_pad + idx, stable=True)
    position = jnp.zeros(n_pad, jnp.int32).at[order].set(idx.astype(jnp.int32))
    preds = position[graph.preds[order]]
    pred_mask = graph.pred_mask[order]
    preds = jnp.where(pred_mask, preds, 0)
    p_pad = preds.shape[1]
    return graph.replace(
        params=graph.params[order],
        output_size=graph.output_size[order],
        macs=graph.macs[order],
        senders=preds.reshape(-1),
        receivers=jnp.repeat(idx.astype(jnp.int32), p_pad),
        edge_mask=pred_mask.reshape(-1),
        preds=preds,
        pred_mask=pred_mask,
    )


def padded_to_graph(graph: PaddedGraph, name: str = "synthetic") -> Graph:
    """Convert one (unbatched) PaddedGraph back to a validated :class:`Graph` (ids = positions)."""
    n = int(graph.num_nodes)
    ids = np.asarray(graph.node_ids)[:n]
    position_to_id = np.full(len(np.asarray(graph.node_ids)), -1)
    position_to_id[:n] = ids
    mask = np.asarray(graph.edge_mask)
    edges = np.stack(
        [position_to_id[np.asarray(graph.senders)[mask]], position_to_id[np.asarray(graph.receivers)[mask]]], 1
    )
    params = np.zeros(n, np.int64)
    out, macs = np.zeros(n, np.int64), np.zeros(n, np.int64)
    params[ids] = np.asarray(graph.params)[:n]
    out[ids] = np.asarray(graph.output_size)[:n]
    macs[ids] = np.asarray(graph.macs)[:n]
    return Graph(name=name, params=params, output_size=out, macs=macs, edges=edges.reshape(-1, 2))
