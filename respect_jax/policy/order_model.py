"""The order policy's network as a flax module (:class:`OrderPolicy`), its checkpoints and the bridge between the
module and :class:`~respect_jax.policy.order.OrderNetwork` (its parameters as plain arrays by path name).

Apart from :mod:`respect_jax.policy.order` so that scheduling with a trained policy imports no flax: the solver loads
an ``OrderNetwork`` and runs a stored compiled forward pass; this module is imported only to train, to save, or to
compile a forward pass that is not in the executable cache (:func:`respect_jax.policy.order.forward_executable`).
"""

from __future__ import annotations

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from respect_jax.graphs.graph import write_json_atomic
from respect_jax.graphs.padded import PaddedGraph
from respect_jax.policy.encoder import GraphEncoder, ShapeOnlyRngs, linear
from respect_jax.policy.order import (
    FORMAT,
    NUM_ORDER_CONTEXT,
    NUM_ORDER_FEATURES,
    OrderNetwork,
    OrderPolicyConfig,
    load_order_network,
)


class OrderPolicy(nnx.Module):
    """Node features + context -> one score per node, f32[B, N] (later stages score higher)."""

    def __init__(self, config: OrderPolicyConfig, *, rngs: nnx.Rngs | ShapeOnlyRngs):
        """``rngs``: ``nnx.Rngs`` initialises the parameters; :class:`~respect_jax.policy.encoder.ShapeOnlyRngs` builds
        a skeleton (every parameter a ``jax.ShapeDtypeStruct``, as ``nnx.eval_shape`` leaves it) to restore into."""
        width = config.width
        self.config = config
        self.encoder = GraphEncoder(width, config.layers, config.encoder, config.heads, "dense", rngs=rngs,
                                    in_features=NUM_ORDER_FEATURES + NUM_ORDER_CONTEXT)
        sizes = [3 * width] + [width] * config.head_layers
        self.head = nnx.List([linear(a, b, rngs) for a, b in zip(sizes[:-1], sizes[1:], strict=True)])
        self.out = linear(sizes[-1], 1, rngs)

    def __call__(
        self, graphs: PaddedGraph, feats: jax.Array, context: jax.Array, aggregation: str = "dense"
    ) -> jax.Array:
        """Args: graphs (B padded graphs), feats f32[B, N, F], context f32[B, C]; aggregation ``dense``
        (N x N adjacency matmuls: small buckets) or ``segment`` (O(E): large graphs). Returns f32[B, N]
        (0 on padding)."""
        b, n, _ = feats.shape
        fmask = graphs.node_mask[:, :, None].astype(jnp.float32)
        x = jnp.concatenate([feats, jnp.broadcast_to(context[:, None, :], (b, n, context.shape[-1]))], axis=-1)
        h, g = self.encoder(graphs, x, aggregation)
        gb = jnp.broadcast_to(g[:, None, :], h.shape)
        z = jnp.concatenate([h, gb, h * gb], axis=-1)
        z = z.reshape(b * n, -1)
        for layer in self.head:
            z = jax.nn.relu(layer(z))
        return self.out(z).reshape(b, n) * fmask[..., 0]


def param_names(model: OrderPolicy) -> list[tuple[str, tuple[int, ...]]]:
    """(path name, shape) of every parameter of ``model`` in its state's flattening order."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(nnx.to_pure_dict(nnx.state(model, nnx.Param)))
    return [("/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path), tuple(leaf.shape))
            for path, leaf in leaves]


def restore_module(config: OrderPolicyConfig, params: dict[str, jax.Array]) -> OrderPolicy:
    """The :class:`OrderPolicy` of ``config`` holding ``params`` (by path name; arrays or tracers): a skeleton
    (:class:`~respect_jax.policy.encoder.ShapeOnlyRngs`, nothing initialised) with the values put in. One-line
    ValueError when a parameter is missing or of the wrong shape (names in ``params`` the network lacks are
    ignored)."""
    model = OrderPolicy(config, rngs=ShapeOnlyRngs())
    state = nnx.state(model, nnx.Param)
    _, treedef = jax.tree_util.tree_flatten(nnx.to_pure_dict(state))
    values = []
    for name, shape in param_names(model):
        if name not in params or tuple(params[name].shape) != shape:
            raise ValueError(f"order policy: parameter {name} missing or of the wrong shape")
        values.append(params[name])
    nnx.replace_by_pure_dict(state, jax.tree_util.tree_unflatten(treedef, values))
    nnx.update(model, state)
    return model


_NETWORKS: dict[int, tuple] = {}  # id(model) -> (model, OrderNetwork); the model is kept alive


def module_network(model: OrderPolicy) -> OrderNetwork:
    """``model``'s parameters as an :class:`OrderNetwork` (read once per module: a state walk is ~20 ms)."""
    entry = _NETWORKS.get(id(model))
    if entry is None:
        if len(_NETWORKS) >= 8:
            _NETWORKS.pop(next(iter(_NETWORKS)))
        entry = _NETWORKS[id(model)] = (model, OrderNetwork(model.config, param_leaves(model)))
    return entry[1]


def param_leaves(model: OrderPolicy) -> dict[str, jax.Array]:
    """Every parameter of ``model`` by path name (``encoder/embed1/kernel``, ...): what :class:`OrderNetwork` holds."""
    state = nnx.state(model, nnx.Param)
    leaves, _ = jax.tree_util.tree_flatten_with_path(nnx.to_pure_dict(state))
    return {"/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path): leaf for path, leaf in leaves}


def save_order_policy(run_dir: str | Path, model: OrderPolicy, extra: dict) -> None:
    """Write ``params.npz`` (one array per parameter path) and ``network.json`` (format, config, ``extra``)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / "params.tmp.npz"
    np.savez(tmp, **{k: np.asarray(v) for k, v in param_leaves(model).items()})
    tmp.replace(run_dir / "params.npz")
    write_json_atomic({"format": FORMAT, "policy": model.config.to_dict(), **extra}, run_dir / "network.json")


@functools.lru_cache(maxsize=4)
def load_order_policy(path: str | Path) -> tuple[OrderPolicy, dict]:
    """(network with its trained parameters, network document) of a run folder written by
    :func:`save_order_policy`. One-line ValueError when the folder is not one or a parameter is missing.

    The module is a skeleton (:class:`~respect_jax.policy.encoder.ShapeOnlyRngs`: no initialiser runs or is traced)
    holding :func:`load_order_network`'s arrays: ~0.1 s in a fresh process instead of ~0.65 s with
    ``nnx.eval_shape`` (the same parameters, bit for bit; tested)."""
    network, doc = load_order_network(path)
    try:
        return restore_module(network.config, network.params), doc
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
