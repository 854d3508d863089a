"""Types of the pipeline-scheduling environment (Jumanji-style, all pytrees), and the interface every
environment of the package shares (:class:`Environment`, :class:`DiscreteSpec`)."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from respect_jax import pytree as struct
from respect_jax.graphs.padded import PaddedGraph

FIRST, MID, LAST = 0, 1, 2


@struct.dataclass
class Observation:
    """What a policy sees before placing the node at position ``node``.

    Attributes:
        node: i32[] position (in the graph's topological order) of the node to place now.
        action_mask: bool[K] stages allowed by precedence (all False once the episode is over).
        assignment: i32[N] stage of every placed node, -1 for the others and for padding.
        stage_param_bytes: f32[K] parameter bytes already placed on each stage.
        stage_macs: f32[K] compute already placed on each stage.
    """

    node: jax.Array
    action_mask: jax.Array
    assignment: jax.Array
    stage_param_bytes: jax.Array
    stage_macs: jax.Array


@struct.dataclass
class State:
    """Environment state of one episode (one graph).

    Attributes:
        graph: the graph being scheduled (padded, nodes by position in its topological order).
        assignment: i32[N] stages so far (-1 = unplaced).
        step_count: i32[] number of nodes placed; the episode ends at ``graph.num_nodes``.
        stage_param_bytes: f32[K], stage_macs: f32[K] running per-stage loads.
        norm: f32[] the reward divisor of this graph (1 when not normalising).
    """

    graph: PaddedGraph
    assignment: jax.Array
    step_count: jax.Array
    stage_param_bytes: jax.Array
    stage_macs: jax.Array
    norm: jax.Array


@struct.dataclass
class TimeStep:
    """Result of reset/step: ``step_type`` is FIRST, MID or LAST (0/1/2).

    ``reward`` is 0 except on the LAST step, where it is ``-objective / norm``. ``extras`` holds
    ``objective`` (un-normalised, f32[]) and ``valid`` (bool[]) of the finished schedule; both are
    only meaningful on the LAST step.
    """

    step_type: jax.Array
    reward: jax.Array
    discount: jax.Array
    observation: Observation
    extras: dict

    def last(self) -> jax.Array:
        return self.step_type == LAST


@dataclass(frozen=True)
class DiscreteSpec:
    """An integer array of ``shape`` whose entries lie in ``[0, num_values)`` (Jumanji's ``DiscreteArray``)."""

    num_values: int
    shape: tuple[int, ...] = ()
    dtype: Any = jnp.int32


class Environment(abc.ABC):
    """The interface of the package's environments (Jumanji-style, pure functions of explicit state).

    ``reset(key, params)`` starts an episode and ``step(state, action)`` advances it, both returning
    ``(state, TimeStep)`` and both pure (jit, vmap and scan them). ``params`` is the episode's instance (a
    padded graph, an edge scenario, a real-time scenario); what is random in an episode is drawn from
    ``key`` by the environment's generator. The specs describe one (unbatched) episode of ``params``:
    ``observation_spec`` is a pytree of ``jax.ShapeDtypeStruct`` shaped like the observation,
    ``action_spec`` a :class:`DiscreteSpec` or a pytree of ``jax.ShapeDtypeStruct``.
    """

    @abc.abstractmethod
    def reset(self, key: jax.Array, params: Any = None) -> tuple[Any, TimeStep]:
        """Start an episode of instance ``params`` (randomness from ``key``)."""

    @abc.abstractmethod
    def step(self, state: Any, action: Any) -> tuple[Any, TimeStep]:
        """Take ``action`` in ``state``; a no-op with zero reward once the episode is over."""

    @abc.abstractmethod
    def action_spec(self, params: Any = None) -> DiscreteSpec | Any:
        """The action of one episode of ``params``."""

    def observation_spec(self, params: Any = None) -> Any:
        """Shapes and dtypes of the observation of one episode of ``params`` (traced, nothing computed)."""
        return jax.eval_shape(lambda p: self.reset(jax.random.key(0), p)[1].observation, params)
