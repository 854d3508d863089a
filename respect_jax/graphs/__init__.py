"""Graphs: the validated SPEC graph, JSON io, padded JAX graphs, features and generators."""

import importlib

#: public name -> submodule defining it; the submodule (and JAX, for the padded / generated graphs) is imported
#: on first use, so ``from respect_jax.graphs.graph import load_graph`` or a command's ``--help`` stays light
_EXPORTS = {
    **dict.fromkeys(("FEATURE_NAMES", "NUM_FEATURES", "node_features", "to_graphs_tuple"), "features"),
    **dict.fromkeys(("GeneratorConfig", "generate_dataset", "generate_numpy", "make_jax_generator", "padded_to_graph"),
                    "generators"),
    **dict.fromkeys(("Graph", "GraphError", "graph_from_dict", "load_graph", "save_graph", "write_json_atomic"),
                    "graph"),
    **dict.fromkeys(("NODE_BUCKETS", "PaddedGraph", "bucket_shape", "bucket_size", "graph_at", "pad_graph",
                     "stack_graphs", "to_original_order", "to_position_order", "unstack_positions"), "padded"),
}


def __getattr__(name: str):
    """The public name ``name`` from its submodule (imported now, once)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


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
