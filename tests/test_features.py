"""Node features and jraph batching of padded graphs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from conftest import random_graphs

from respect_jax.graphs import FEATURE_NAMES, bucket_shape, graph_at, node_features, stack_graphs, to_graphs_tuple


def test_features_match_numpy_graph_quantities():
    graphs = random_graphs(8, seed=3, min_nodes=4, max_nodes=50)
    batch = stack_graphs(graphs)
    feats = np.asarray(jax.jit(jax.vmap(node_features))(batch))
    col = {name: i for i, name in enumerate(FEATURE_NAMES)}
    for i, g in enumerate(graphs):
        order = g.topological_order()  # position -> id
        n = g.num_nodes
        f = feats[i]
        assert np.all(f[n:] == 0), "padding rows are zero"
        depth, height = g.depth()[order], g.height()[order]
        levels = max(depth.max(), 1)
        np.testing.assert_allclose(f[:n, col["depth"]], depth / levels, rtol=1e-6)
        np.testing.assert_allclose(f[:n, col["height"]], height / levels, rtol=1e-6)
        params = g.params[order].astype(float)
        np.testing.assert_allclose(f[:n, col["params_frac"]], params / max(params.sum(), 1), rtol=1e-5)
        np.testing.assert_allclose(f[:n, col["params_prefix"]], np.cumsum(params) / max(params.sum(), 1), rtol=1e-5)
        indeg = np.bincount(g.edges[:, 1], minlength=n)[order]
        outdeg = np.bincount(g.edges[:, 0], minlength=n)[order]
        slots = batch.preds.shape[-1]
        np.testing.assert_allclose(f[:n, col["in_degree"]], indeg / slots)
        np.testing.assert_allclose(f[:n, col["out_degree"]], outdeg / slots)
        np.testing.assert_array_equal(f[:n, col["is_source"]], indeg == 0)
        np.testing.assert_array_equal(f[:n, col["is_sink"]], outdeg == 0)
        assert np.all(np.isfinite(f))


def test_graphs_tuple_is_disjoint_union_with_fixed_shapes():
    graphs = random_graphs(5, seed=4, min_nodes=10, max_nodes=30)
    batch = stack_graphs(graphs)
    n_pad, e_pad, _ = bucket_shape(graphs)
    feats = jax.vmap(node_features)(batch)
    gt = to_graphs_tuple(batch, feats)
    assert gt.nodes.shape == (5 * n_pad, len(FEATURE_NAMES))
    assert gt.senders.shape == (5 * e_pad,) and gt.edges.shape == (5 * e_pad, 1)
    assert gt.n_node.tolist() == [n_pad] * 5
    real = np.asarray(gt.edges[:, 0]) > 0
    assert real.sum() == sum(g.num_edges for g in graphs)
    # every real edge stays inside its own graph and goes forward in SPEC order
    graph_of = np.asarray(gt.senders) // n_pad
    np.testing.assert_array_equal(graph_of, np.asarray(gt.receivers) // n_pad)
    assert np.all(np.asarray(gt.senders)[real] < np.asarray(gt.receivers)[real])
    # a sum over incoming real edges reproduces in-degrees
    indeg = jax.ops.segment_sum(gt.edges[:, 0], gt.receivers, num_segments=5 * n_pad)
    for i, g in enumerate(graphs):
        want = np.bincount(g.edges[:, 1], minlength=g.num_nodes)[g.topological_order()]
        np.testing.assert_array_equal(np.asarray(indeg)[i * n_pad : i * n_pad + g.num_nodes], want)
    assert int(graph_at(batch, 0).num_nodes) == graphs[0].num_nodes
    assert jnp.all(gt.globals[:, 0] == batch.num_nodes)
