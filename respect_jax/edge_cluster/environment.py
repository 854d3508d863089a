"""ASET's dispatch MDP as a pure JAX environment (Jumanji-style, sibling of :mod:`respect_jax.env`).

One step dispatches one query: the observation describes the query about to be dispatched and the
cluster as the dispatcher sees it (:func:`~respect_jax.edge_cluster.simulator.features`); the
action is ``site * V + variant``; the reward is 1 if that query succeeds, else 0, so the mean
reward of an episode is its success ratio. An episode is one trace; it ends after its last
valid query. Steps after the end are no-ops with zero reward.

The reward is credited to the step that dispatched the query even though the source only learns
the outcome at ``resolve_us``: the simulator resolves every query at dispatch (its fate depends
only on earlier dispatches), which is what an offline replay of logged outcomes gives a learner.
The agent's *observation* stays causal (it only sees outcomes already known at ``t``).

``reset``/``step`` are pure; batch them with ``jax.vmap`` or :meth:`batch_step`, roll out with
``jax.lax.scan``. The scenario travels in the state (``state.params``) so a batch may mix scenarios
of the same shapes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from respect_jax.edge_cluster.generator import generate_trace
from respect_jax.edge_cluster.scenarios import TraceConfig
from respect_jax.edge_cluster.simulator import dispatch, features, init_sim, num_features
from respect_jax.edge_cluster.types import (
    FIRST,
    INVALID,
    LAST,
    MID,
    OUTCOMES,
    SUCCESS,
    Dynamics,
    EdgeParams,
    Observation,
    Outcome,
    State,
    TimeStep,
    Trace,
    action_mask,
    query_at,
)
from respect_jax.env.types import DiscreteSpec, Environment


class EdgeEnv(Environment):
    """Dispatch of DNN inference queries over edge/cloud sites.

    Args:
        trace_cfg: workload generator settings used by :meth:`reset` (static).
        ring: L, history length of the observation's recent-rate and success features.
        rate: f32[N, A] default arrival rates of :meth:`reset` (queries/s per source and app).
        dyn: default conditions of :meth:`reset` (:class:`~respect_jax.edge_cluster.types.Dynamics`).
    """

    def __init__(
        self, trace_cfg: TraceConfig, ring: int = 32, rate: jax.Array | None = None, dyn: Dynamics | None = None
    ):
        self.trace_cfg, self.ring = trace_cfg, ring
        self.rate, self.dyn = rate, dyn

    @staticmethod
    def num_actions(params: EdgeParams) -> int:
        return params.num_actions

    @staticmethod
    def observation_size(params: EdgeParams) -> int:
        return num_features(params)

    def action_spec(self, params: EdgeParams | None = None) -> DiscreteSpec:
        """One flat action ``site * V + variant`` in ``[0, S * V)``."""
        if params is None:
            raise ValueError("EdgeEnv.action_spec(params) needs the scenario's EdgeParams (its S and V)")
        return DiscreteSpec(num_values=params.num_actions)

    # ------------------------------------------------------------------ reset
    def reset(
        self,
        key: jax.Array,
        params: EdgeParams | None = None,
        rate: jax.Array | None = None,
        dyn: Dynamics | None = None,
    ) -> tuple[State, TimeStep]:
        """Draw a trace with ``key`` at arrival rates ``rate`` f32[N, A] under conditions ``dyn`` (default: the
        environment's) and start an episode of scenario ``params`` on it."""
        rate = self.rate if rate is None else rate
        dyn = self.dyn if dyn is None else dyn
        if params is None or rate is None or dyn is None:
            raise ValueError("EdgeEnv.reset needs the scenario's params, arrival rates and dynamics")
        return self.reset_trace(params, generate_trace(key, rate, self.trace_cfg, dyn))

    def reset_trace(self, params: EdgeParams, trace: Trace) -> tuple[State, TimeStep]:
        """Start an episode on a given trace (one scenario; vmap for a batch)."""
        state = State(params=params, trace=trace, sim=init_sim(params, self.ring), index=jnp.int32(0))
        no_outcome = Outcome(*(jnp.int32(v) for v in (INVALID, -1, -1, -1, -1, -1)))
        timestep = TimeStep(
            step_type=jnp.int32(FIRST),
            reward=jnp.float32(0.0),
            discount=jnp.float32(1.0),
            observation=self._observation(state),
            extras=self._extras(state, no_outcome),
        )
        return state, timestep

    # ------------------------------------------------------------------ step
    def step(self, state: State, action: jax.Array) -> tuple[State, TimeStep]:
        """Dispatch the current query to ``action``; advance to the next query."""
        q = state.trace.valid.shape[-1]
        query = query_at(state.trace, jnp.minimum(state.index, q - 1))
        query = query.replace(valid=query.valid & (state.index < q))
        sim, outcome = dispatch(state.params, state.sim, query, action)
        n_valid = state.trace.num_valid
        new_state = state.replace(sim=sim, index=jnp.minimum(state.index + query.valid.astype(jnp.int32), q))
        ongoing = new_state.index < n_valid
        timestep = TimeStep(
            step_type=jnp.where(ongoing, MID, LAST).astype(jnp.int32),
            reward=(outcome.code == SUCCESS).astype(jnp.float32),
            discount=ongoing.astype(jnp.float32),
            observation=self._observation(new_state),
            extras=self._extras(new_state, outcome),
        )
        return new_state, timestep

    def batch_reset(self, keys: jax.Array, params: EdgeParams, rates: jax.Array, dyn: Dynamics
                    ) -> tuple[State, TimeStep]:
        """:meth:`reset` over a batch: keys [B], params and dyn with leading axis B, rates f32[B, N, A]."""
        return jax.vmap(self.reset)(keys, params, rates, dyn)

    def batch_step(self, state: State, action: jax.Array) -> tuple[State, TimeStep]:
        """:meth:`step` over a batch (leading axis B); there is no branch, so this is ``vmap(step)``."""
        return jax.vmap(self.step)(state, action)

    # ------------------------------------------------------------------ helpers
    def current_query(self, state: State) -> Trace:
        q = state.trace.valid.shape[-1]
        query = query_at(state.trace, jnp.minimum(state.index, q - 1))
        return query.replace(valid=query.valid & (state.index < q))

    def _observation(self, state: State) -> Observation:
        query = self.current_query(state)
        return Observation(
            features=features(state.params, state.sim, query),
            action_mask=action_mask(state.params, query),
            app=query.app,
            source=query.source,
        )

    @staticmethod
    def _extras(state: State, outcome: Outcome) -> dict:
        return {
            "code": outcome.code,
            "site": outcome.site,
            "variant": outcome.variant,
            "resolve_us": outcome.resolve_us,
            "counts": state.sim.counts,
        }


def episode_success(counts: jax.Array) -> jax.Array:
    """Success ratio from the running counts i32[..., A, 5] (0 when nothing arrived)."""
    total = jnp.sum(counts, axis=(-2, -1))
    return jnp.where(total > 0, jnp.sum(counts[..., SUCCESS], axis=-1) / jnp.maximum(total, 1), 0.0)


__all__ = ["EdgeEnv", "episode_success", "OUTCOMES"]
