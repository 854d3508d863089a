"""Graphs: the validated SPEC graph, JSON io, padded JAX graphs, features and generators."""

from respect_jax.graphs.features import FEATURE_NAMES, NUM_FEATURES, node_features, to_graphs_tuple
from respect_jax.graphs.generators import (
    GeneratorConfig,
    generate_dataset,
    generate_numpy,
    make_jax_generator,
    padded_to_graph,
)
from respect_jax.graphs.graph import Graph, GraphError, graph_from_dict, load_graph, save_graph, write_json_atomic
from respect_jax.graphs.padded import (
    NODE_BUCKETS,
    PaddedGraph,
    bucket_shape,
    bucket_size,
    graph_at,
    pad_graph,
    stack_graphs,
    to_original_order,
    to_position_order,
    unstack_positions,
)

__all__ = [
    "FEATURE_NAMES",
    "NUM_FEATURES",
    "NODE_BUCKETS",
    "GeneratorConfig",
    "Graph",
    "GraphError",
    "PaddedGraph",
    "bucket_shape",
    "bucket_size",
    "generate_dataset",
    "generate_numpy",
    "graph_at",
    "graph_from_dict",
    "load_graph",
    "make_jax_generator",
    "node_features",
    "pad_graph",
    "padded_to_graph",
    "save_graph",
    "stack_graphs",
    "to_graphs_tuple",
    "to_original_order",
    "to_position_order",
    "unstack_positions",
    "write_json_atomic",
]
