"""The policy's decoding state and features: one MDP transition with the environment, named features with
derived widths."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_hw

from respect_jax.env import SchedulingEnv
from respect_jax.graphs import GeneratorConfig, make_jax_generator
from respect_jax.policy import features as F
from respect_jax.policy.state import advance, init_decode_state, prefix_quantities, step_quantities


def test_feature_widths_are_the_lengths_of_the_name_lists():
    """The decoder's input widths come from the feature names (23 per stage, 17 + 8 of context, 8 per cut: the
    widths of every shipped checkpoint); the features have those widths and every name is used exactly once."""
    assert (F.NUM_STAGE_FEATURES, F.NUM_CONTEXT_FEATURES, F.NUM_HARDWARE_FEATURES, F.NUM_CUT_FEATURES) == (23, 17, 8, 8)
    for names in (F.STAGE_FEATURES, F.CONTEXT_FEATURES, F.HARDWARE_FEATURES, F.CUT_FEATURES):
        assert len(set(names)) == len(names)
    hw = make_hw(3)
    graph = make_jax_generator(GeneratorConfig(min_nodes=8, max_nodes=12))(jax.random.PRNGKey(0))
    st = F.graph_statics(graph, hw)
    stage = jnp.zeros(graph.params.shape, jnp.int32)
    q = jax.tree.map(lambda x: x[2], prefix_quantities(graph, st, stage, jnp.zeros(stage.shape + (0,)), 3))
    for version in F.FEATURE_VERSIONS:
        stage_feats, context, allowed = F.features(q, st, jnp.int32(2), hw, "paper", 1.0, version)
        assert stage_feats.shape == (3, F.NUM_STAGE_FEATURES) and allowed.shape == (3,)
        assert context.shape == (F.num_context_features(version),)
    cut, valid = F.cut_features(st, jnp.int32(2), hw)
    assert cut.shape == (graph.params.shape[0], F.NUM_CUT_FEATURES)
    with pytest.raises(ValueError, match="missing or unexpected"):
        F.stack_named({"a": jnp.zeros(2)}, ("a", "b"))


def test_decoding_state_advances_through_the_environment_transition():
    """Placing nodes with the policy's advance and with the environment's step, from the same actions (some below
    the precedence bound, some past the end), gives the same schedule, loads and precedence bound at every step."""
    hw = make_hw(4)
    graph = make_jax_generator(GeneratorConfig(mode="dnn", min_nodes=10, max_nodes=20))(jax.random.PRNGKey(5))
    st = F.graph_statics(graph, hw)
    env = SchedulingEnv(hw, normalise=False)
    state, ts = env.reset(jax.random.PRNGKey(0), graph)
    ds = init_decode_state(graph.params.shape[0], 4, 0)
    actions = np.random.default_rng(1).integers(0, 4, graph.params.shape[0])
    place = jax.jit(lambda ds, t, a: advance(graph, st, ds, t, a, jnp.zeros((0,))))
    low_of = jax.jit(lambda ds, t: step_quantities(graph, st, ds, t).low)
    step = jax.jit(env.step)
    for t, a in enumerate(actions):
        allowed = np.asarray(ts.observation.action_mask)
        if t < int(graph.num_nodes):
            assert allowed.tolist() == (np.arange(4) >= int(low_of(ds, t))).tolist()
        ds = place(ds, jnp.int32(t), jnp.int32(a))
        state, ts = step(state, jnp.int32(a))
        np.testing.assert_array_equal(np.asarray(ds.stage), np.asarray(state.assignment))
        np.testing.assert_array_equal(np.asarray(ds.mem), np.asarray(state.stage_param_bytes))
        np.testing.assert_array_equal(np.asarray(ds.macs), np.asarray(state.stage_macs))
    assert bool(ts.last())
