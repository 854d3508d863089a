"""The pipeline-scheduling MDP as a pure JAX environment (Jumanji-style).

Nodes are placed one per step in the graph's order (positions ``0..num_nodes-1`` of a
:class:`~respect_jax.graphs.padded.PaddedGraph`: a topological order, producers before consumers).
The action is the node's stage in ``0..K-1``; allowed stages are
``k >= max(stage of predecessors)``. An action below that bound is raised to it, so no invalid
schedule is reachable and every valid one is. The episode ends after the last real node; the
reward of that step is ``-objective / norm`` computed by the shared evaluator
(:func:`respect_jax.costs.evaluate`). Steps after the end are no-ops with zero reward.

``reset``/``step`` are pure; batch them with ``jax.vmap`` and roll them out with ``jax.lax.scan``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from respect_jax.costs import OBJECTIVES, Hardware, evaluate, objective_lower_bound, objective_value
from respect_jax.env.types import FIRST, LAST, MID, DiscreteSpec, Environment, Observation, State, TimeStep
from respect_jax.graphs.padded import PaddedGraph


def precedence_bound(graph: PaddedGraph, assignment: jax.Array, t: jax.Array) -> jax.Array:
    """i32[] the smallest stage node t may take: ``max(s(u) : u in pred(t))`` (0 without predecessors).

    Args: assignment i32[N] stages of the placed nodes (-1 for the others), t i32[] a position (clamped
    to the padded size).
    """
    t = jnp.minimum(t, graph.params.shape[-1] - 1)
    pred_stage = jnp.where(graph.pred_mask[t], assignment[graph.preds[t]], 0)
    return jnp.max(pred_stage, initial=0)


def place_node(
    graph: PaddedGraph, assignment: jax.Array, t: jax.Array, action: jax.Array, num_stages: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The MDP's transition on the schedule: node t goes to stage ``action`` raised to the precedence bound.

    Shared by :class:`SchedulingEnv` and the policy's decoding state (:func:`respect_jax.policy.state.advance`).
    Returns the new assignment i32[N], the stage i32[] node t takes and ``active`` bool[] (``t <
    num_nodes``; when False the assignment is unchanged: steps after the end are no-ops).
    """
    active = t < graph.num_nodes
    stage = jnp.clip(jnp.maximum(action.astype(jnp.int32), precedence_bound(graph, assignment, t)), 0, num_stages - 1)
    node = jnp.arange(assignment.shape[-1]) == t
    return jnp.where(node & active, stage, assignment), stage, active


class SchedulingEnv(Environment):
    """Pipeline-stage assignment of a DNN graph onto ``hw.stages`` accelerators.

    Args:
        hw: hardware (its ``stages`` fixes the action space K).
        objective: ``"paper"`` (peak stage memory + lam * bytes forwarded between stages) or
            ``"latency"`` (the bottleneck stage time), both by :func:`respect_jax.costs.evaluate`.
        lam: weight of communication in the ``paper`` objective.
        normalise: divide the reward by :func:`objective_lower_bound` of each graph (so rewards of
            different graphs are comparable; ``-1`` is then a perfect schedule or better bound).
        generator: optional ``key -> PaddedGraph`` used by :meth:`reset` without a graph (e.g.
            :func:`respect_jax.graphs.generators.make_jax_generator`).
    """

    def __init__(
        self,
        hw: Hardware,
        objective: str = "paper",
        lam: float = 1.0,
        normalise: bool = True,
        generator: Callable[[jax.Array], PaddedGraph] | None = None,
    ):
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
        self.hw, self.objective, self.lam = hw, objective, lam
        self.normalise, self.generator = normalise, generator

    @property
    def num_actions(self) -> int:
        return self.hw.stages

    # ------------------------------------------------------------------ reset
    def reset(self, key: jax.Array, params: PaddedGraph | None = None) -> tuple[State, TimeStep]:
        """Start an episode on the graph ``params``, or (None) on a graph drawn from the generator with ``key``."""
        if params is not None:
            return self.reset_graph(params)
        if self.generator is None:
            raise ValueError("SchedulingEnv.reset(key) needs a generator or a graph: reset(key, graph)")
        return self.reset_graph(self.generator(key))

    def action_spec(self, params: PaddedGraph | None = None) -> DiscreteSpec:
        """One stage in ``[0, K)`` (the same for every graph)."""
        return DiscreteSpec(num_values=self.hw.stages)

    def reset_graph(self, graph: PaddedGraph) -> tuple[State, TimeStep]:
        """Start an episode on ``graph`` (one padded graph; vmap for a batch)."""
        k, n = self.hw.stages, graph.params.shape[-1]
        norm = objective_lower_bound(graph, self.hw, self.objective) if self.normalise else jnp.float32(1.0)
        state = State(
            graph=graph,
            assignment=jnp.full((n,), -1, jnp.int32),
            step_count=jnp.int32(0),
            stage_param_bytes=jnp.zeros((k,), jnp.float32),
            stage_macs=jnp.zeros((k,), jnp.float32),
            norm=jnp.asarray(norm, jnp.float32),
        )
        timestep = TimeStep(
            step_type=jnp.int32(FIRST),
            reward=jnp.float32(0.0),
            discount=jnp.float32(1.0),
            observation=self._observation(state),
            extras=self._no_extras(state),
        )
        return state, timestep

    # ------------------------------------------------------------------ step
    def step(self, state: State, action: jax.Array) -> tuple[State, TimeStep]:
        """Place the current node on stage ``action`` (raised to the precedence bound).

        For a batch prefer :meth:`batch_step`: under ``jax.vmap`` the terminal-reward
        ``lax.cond`` becomes a select and the evaluator would run at every step.
        """
        new_state, finished = self._advance(state, action)
        extras = jax.lax.cond(finished, self._final_extras, self._no_extras, new_state)
        return new_state, self._timestep(state, new_state, finished, extras)

    def batch_reset(self, graphs: PaddedGraph) -> tuple[State, TimeStep]:
        """:meth:`reset_graph` over a batch (leading axis B)."""
        return jax.vmap(self.reset_graph)(graphs)

    def batch_step(self, state: State, action: jax.Array) -> tuple[State, TimeStep]:
        """:meth:`step` over a batch (leading axis B), same results as ``jax.vmap(step)``.

        The shared evaluator runs only on steps where at least one episode of the batch ends
        (a real ``lax.cond`` on ``any(finished)``), i.e. once per episode for same-size graphs.
        """
        new_state, finished = jax.vmap(self._advance)(state, action)
        extras = jax.lax.cond(jnp.any(finished), jax.vmap(self._final_extras), jax.vmap(self._no_extras), new_state)
        # as in step(): extras are zero except where this step ended the episode
        extras = jax.tree.map(lambda x: jnp.where(finished, x, jnp.zeros_like(x)), extras)
        return new_state, jax.vmap(self._timestep)(state, new_state, finished, extras)

    def _advance(self, state: State, action: jax.Array) -> tuple[State, jax.Array]:
        """The state transition; returns the new state and whether this step ended the episode."""
        graph, t = state.graph, state.step_count
        assignment, stage, active = place_node(graph, state.assignment, t, action, self.hw.stages)
        onehot = (jnp.arange(self.hw.stages) == stage) & active
        t_safe = jnp.minimum(t, graph.params.shape[-1] - 1)
        new_state = state.replace(
            assignment=assignment,
            step_count=t + active.astype(jnp.int32),
            stage_param_bytes=state.stage_param_bytes
            + jnp.where(onehot, graph.params[t_safe] * self.hw.param_bytes, 0.0),
            stage_macs=state.stage_macs + jnp.where(onehot, graph.macs[t_safe], 0.0),
        )
        finished = active & (new_state.step_count == graph.num_nodes)
        return new_state, finished

    def _timestep(self, state: State, new_state: State, finished: jax.Array, extras: dict) -> TimeStep:
        ongoing = (state.step_count < state.graph.num_nodes) & ~finished
        return TimeStep(
            step_type=jnp.where(ongoing, MID, LAST).astype(jnp.int32),
            reward=jnp.where(finished, -extras["objective"] / state.norm, 0.0).astype(jnp.float32),
            discount=jnp.where(ongoing, 1.0, 0.0).astype(jnp.float32),
            observation=self._observation(new_state),
            extras=extras,
        )

    # ------------------------------------------------------------------ helpers
    def _lower_bound(self, state: State) -> jax.Array:
        """i32[] the smallest stage the current node may take (max stage of its predecessors)."""
        return precedence_bound(state.graph, state.assignment, state.step_count)

    def action_mask(self, state: State) -> jax.Array:
        """bool[K] allowed stages for the current node (all False after the episode ends)."""
        active = state.step_count < state.graph.num_nodes
        return (jnp.arange(self.hw.stages) >= self._lower_bound(state)) & active

    def _observation(self, state: State) -> Observation:
        return Observation(
            node=state.step_count,
            action_mask=self.action_mask(state),
            assignment=state.assignment,
            stage_param_bytes=state.stage_param_bytes,
            stage_macs=state.stage_macs,
        )

    def _final_extras(self, state: State) -> dict:
        metrics = evaluate(state.graph, state.assignment, self.hw)
        return {
            "objective": objective_value(metrics, self.objective, self.lam).astype(jnp.float32),
            "valid": metrics.valid,
        }

    @staticmethod
    def _no_extras(state: State | None = None) -> dict:
        return {"objective": jnp.float32(0.0), "valid": jnp.bool_(False)}


def random_rollout(env: SchedulingEnv, graphs: PaddedGraph, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Roll out uniformly random *allowed* actions on a batch of graphs with ``lax.scan``.

    Each step draws one uniform number per graph and maps it onto the allowed stages
    ``low..K-1`` (the same law as a masked uniform categorical, at a fraction of the RNG cost).

    Args:
        graphs: PaddedGraph with leading axis B.
    Returns:
        the final assignments i32[B, N] (positions) and the episode returns f32[B].
        The scan runs for the padded length N; steps after an episode's end are no-ops.
    """
    state, _ = env.batch_reset(graphs)
    k = env.num_actions
    uniforms = jax.random.uniform(key, (graphs.params.shape[-1],) + graphs.num_nodes.shape)

    def body(carry, u):
        state, total = carry
        low = jax.vmap(env._lower_bound)(state)
        action = low + jnp.floor(u * (k - low)).astype(jnp.int32)
        state, timestep = env.batch_step(state, action)
        return (state, total + timestep.reward), None

    (state, returns), _ = jax.lax.scan(body, (state, jnp.zeros_like(uniforms[0])), uniforms)
    return state.assignment, returns
