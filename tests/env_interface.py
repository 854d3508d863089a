"""The interface every environment shares (:class:`respect_jax.env.types.Environment`), checked on one instance."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from respect_jax.env.types import DiscreteSpec, Environment


def shapes(tree):
    return jax.tree.map(lambda x: (tuple(x.shape), jnp.dtype(x.dtype)), tree)


def zero_action(spec):
    """The all-zeros action of ``spec`` (a DiscreteSpec or a pytree of ShapeDtypeStruct)."""
    if isinstance(spec, DiscreteSpec):
        return jnp.zeros(spec.shape, spec.dtype)
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), spec)


def check_interface(env: Environment, params, key: jax.Array, steps: int = 3):
    """reset(key, params) and step(state, action) return observations shaped as observation_spec(params) says,
    for actions shaped as action_spec(params) says; returns the last (state, timestep)."""
    assert isinstance(env, Environment)
    spec = env.observation_spec(params)
    action_spec = env.action_spec(params)
    if isinstance(action_spec, DiscreteSpec):
        assert action_spec.num_values >= 1
    state, ts = jax.jit(env.reset)(key, params)
    assert shapes(ts.observation) == shapes(spec)
    step = jax.jit(env.step)
    for _ in range(steps):
        state, ts = step(state, zero_action(action_spec))
        assert shapes(ts.observation) == shapes(spec)
    return state, ts
