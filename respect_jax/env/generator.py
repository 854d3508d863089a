"""Instance generators of :class:`~respect_jax.env.SchedulingEnv`: pure functions ``key -> PaddedGraph``.

An instance of the pipeline-scheduling MDP is one padded graph (the hardware and objective are the
environment's). ``SchedulingEnv(hw, generator=...)`` calls the generator in ``reset(key)``; both generators
below are pure JAX and ``vmap`` over keys, and every draw has the same shape, so one compilation serves all.

* :class:`RandomGraphs`: synthetic graphs of a :class:`~respect_jax.graphs.GeneratorConfig` (the ``respect``,
  ``dnn`` and ``arch`` modes of :func:`respect_jax.graphs.generators.make_jax_generator`; ``layered`` is
  NumPy-only and refused here).
* :class:`GraphList`: a fixed list of graphs (real models, a labelled dataset), padded to one shape; a key
  draws one uniformly (the Jumanji ``ListGenerator`` pattern, for training or evaluating on a fixed set).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import jax

from respect_jax.graphs.generators import GeneratorConfig, make_jax_generator
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import PaddedGraph, graph_at, stack_graphs


@dataclass(frozen=True)
class RandomGraphs:
    """Synthetic graphs of ``config``; every draw is padded to ``config.padded_shape`` (N, E, P)."""

    config: GeneratorConfig
    _draw: object = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_draw", make_jax_generator(self.config))

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.config.padded_shape

    def __call__(self, key: jax.Array) -> PaddedGraph:
        """One graph (arrays of shape ``(N,)`` / ``(E,)`` / ``(N, P)``)."""
        return self._draw(key)


@dataclass(frozen=True)
class GraphList:
    """A fixed list of graphs, stacked (leading axis ``G``) in one padded shape; a key draws one uniformly."""

    graphs: PaddedGraph

    @classmethod
    def from_graphs(cls, graphs: Sequence[Graph], shape: tuple[int, int, int] | None = None) -> GraphList:
        """Pad ``graphs`` to ``shape`` (default: the bucket of the largest) and stack them."""
        if not graphs:
            raise ValueError("GraphList needs at least one graph")
        return cls(stack_graphs(list(graphs), shape))

    def __len__(self) -> int:
        return int(self.graphs.params.shape[0])

    def __call__(self, key: jax.Array) -> PaddedGraph:
        """Graph number ``randint(key, 0, G)`` of the list (a traced index: jit and vmap work)."""
        index = jax.random.randint(key, (), 0, self.graphs.params.shape[0])
        return graph_at(self.graphs, index)

    def graph(self, index: int) -> PaddedGraph:
        """Graph ``index`` of the list (a Python index, for tests and reports)."""
        return graph_at(self.graphs, index)
