"""Types of the pipeline-scheduling environment (Jumanji-style, all pytrees)."""

from __future__ import annotations

import jax
from flax import struct

from respect_jax.graphs.padded import PaddedGraph

FIRST, MID, LAST = 0, 1, 2


@struct.dataclass
class Observation:
    """What a policy sees before placing the node at position ``node``.

    Attributes:
        node: i32[] position (SPEC order) of the node to place now.
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
        graph: the graph being scheduled (SPEC order, padded).
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
