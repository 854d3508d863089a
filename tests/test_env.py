"""The pure-JAX scheduling environment against the MDP of SPEC section 3 and the loop reference."""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_hw, random_graphs
from hypothesis import given, settings
from hypothesis import strategies as st

from respect_jax.costs import evaluate_assignment
from respect_jax.env import LAST, GraphList, RandomGraphs, SchedulingEnv, random_rollout
from respect_jax.env.reference import LoopEnv
from respect_jax.graphs import (
    GeneratorConfig,
    generate_dataset,
    graph_at,
    make_jax_generator,
    pad_graph,
    stack_graphs,
    to_original_order,
)
from respect_jax.reference import enumerate_valid_schedules, reference_objective


@functools.cache
def jitted_env(stages: int):
    """One environment and its compiled reset/step per K (so examples do not recompile)."""
    env = SchedulingEnv(make_hw(stages), normalise=False)
    return env, jax.jit(env.reset_graph), jax.jit(env.step)


def run_actions(stages, graph_padded, actions):
    """Step one padded graph through ``actions`` (jitted step); return final assignment + timesteps."""
    _, reset, step = jitted_env(stages)
    state, ts = reset(graph_padded)
    out = []
    for a in actions:
        state, ts = step(state, jnp.int32(a))
        out.append(ts)
    return state, out


@pytest.mark.parametrize("objective", ["paper", "latency"])
def test_env_matches_loop_reference_step_by_step(objective):
    hw = make_hw(4)
    env = SchedulingEnv(hw, objective=objective, normalise=False)
    loop = LoopEnv(hw, objective)
    rng = np.random.default_rng(0)
    for graph in random_graphs(6, seed=1, min_nodes=5, max_nodes=25):
        padded = jax.tree.map(jnp.asarray, pad_graph(graph, (32, 256, 8)))
        state, ts = jax.jit(env.reset_graph)(padded)
        loop.reset(graph)
        step = jax.jit(env.step)
        for t in range(graph.num_nodes):
            np.testing.assert_array_equal(np.asarray(ts.observation.action_mask), loop.action_mask())
            action = int(rng.integers(0, 4))  # may be below the bound: both envs raise it
            state, ts = step(state, jnp.int32(action))
            _, loop_reward, done = loop.step(action)
            assert bool(ts.last()) == done == (t == graph.num_nodes - 1)
            np.testing.assert_allclose(float(ts.reward), loop_reward, rtol=2e-6)
        assert to_original_order(padded, state.assignment).tolist() == loop.assignment
        assert bool(ts.extras["valid"])
        # a step after the end changes nothing and pays nothing
        after, ts2 = step(state, jnp.int32(0))
        assert float(ts2.reward) == 0.0 and int(ts2.step_type) == LAST
        np.testing.assert_array_equal(after.assignment, state.assignment)


def explore(step, padded, state, ts, reached: set) -> None:
    """Depth-first over every allowed action; collect the final schedules (by node id)."""
    if bool(ts.last()):
        reached.add(tuple(to_original_order(padded, state.assignment).tolist()))
        return
    for a in np.flatnonzero(np.asarray(ts.observation.action_mask)):
        explore(step, padded, *step(state, jnp.int32(a)), reached)


def test_every_valid_schedule_is_reachable_and_only_those():
    """On small graphs: the set of schedules produced by all allowed action sequences == all valid schedules."""
    hw = make_hw(3)
    env = SchedulingEnv(hw, normalise=False)
    step, reset = jax.jit(env.step), jax.jit(env.reset_graph)
    for graph in random_graphs(6, seed=2, min_nodes=3, max_nodes=6):
        padded = jax.tree.map(jnp.asarray, pad_graph(graph, (32, 32, 8)))
        valid = {tuple(s) for s in enumerate_valid_schedules(graph, 3)}
        reached = set()
        explore(step, padded, *reset(padded), reached)
        assert reached == valid
        # every valid schedule scores the same in the env and the reference
        for s in list(valid)[:5]:
            assert evaluate_assignment(graph, list(s), hw)["valid"]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), stages=st.integers(1, 6), data=st.data())
def test_any_action_sequence_gives_a_valid_schedule(seed, stages, data):
    hw = make_hw(stages)
    graph = random_graphs(1, seed=seed, min_nodes=2, max_nodes=20)[0]
    padded = jax.tree.map(jnp.asarray, pad_graph(graph, (32, 256, 8)))
    actions = data.draw(st.lists(st.integers(-2, stages + 2), min_size=graph.num_nodes, max_size=graph.num_nodes))
    state, timesteps = run_actions(stages, padded, actions)
    s = to_original_order(padded, state.assignment)
    assert evaluate_assignment(graph, s, hw)["valid"]
    assert all(s[u] <= s[v] for u, v in graph.edges.tolist())
    final = timesteps[-1]
    assert bool(final.last()) and bool(final.extras["valid"])
    np.testing.assert_allclose(-float(final.reward), reference_objective(graph, s, hw, "paper"), rtol=2e-6)


def test_reset_and_step_trace_once():
    hw = make_hw(4)
    env = SchedulingEnv(hw)
    cfg = GeneratorConfig(mode="respect", min_nodes=10, max_nodes=30)
    generate = make_jax_generator(cfg)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def reset(key):
        return env.reset(key)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(state, action):
        return env.step(state, action)

    env.generator = generate
    for i in range(3):
        state, ts = reset(jax.random.key(i))
        for a in range(5):
            state, ts = step(state, jnp.int32(a % 4))


def test_batch_step_equals_vmapped_step_and_rollouts_are_finite():
    hw = make_hw(4)
    env = SchedulingEnv(hw, objective="latency")
    cfg = GeneratorConfig(mode="dnn", min_nodes=8, max_nodes=30)
    graphs = jax.vmap(make_jax_generator(cfg))(jax.random.split(jax.random.key(0), 16))
    actions = jax.random.randint(jax.random.key(1), (30, 16), 0, 4)

    def scan_with(step_fn):
        state, _ = env.batch_reset(graphs)

        def body(state, a):
            state, ts = step_fn(state, a)
            return state, ts

        return jax.lax.scan(body, state, actions)

    s1, ts1 = jax.jit(lambda: scan_with(env.batch_step))()
    s2, ts2 = jax.jit(lambda: scan_with(jax.vmap(env.step)))()
    chex.assert_trees_all_close(ts1, ts2, rtol=1e-6)
    np.testing.assert_array_equal(s1.assignment, s2.assignment)
    returns = ts1.reward.sum(0)
    assert np.all(np.isfinite(np.asarray(returns))) and np.all(np.asarray(returns) < 0)
    # exactly one LAST-with-reward step per graph
    assert np.all((np.asarray(ts1.reward) != 0).sum(0) == 1)

    assignment, rollout_returns = jax.jit(lambda g, k: random_rollout(env, g, k))(graphs, jax.random.key(3))
    assert np.all(np.isfinite(np.asarray(rollout_returns)))
    for i in range(16):
        g = graph_at(graphs, i)
        n = int(g.num_nodes)
        s = np.asarray(assignment[i])
        assert np.all(s[:n] >= 0) and np.all(s[n:] == -1)


def test_normalised_reward_uses_lower_bound():
    hw = make_hw(4)
    graph = random_graphs(1, seed=4, min_nodes=20, max_nodes=20)[0]
    batch = stack_graphs([graph])
    env = SchedulingEnv(hw, normalise=True)
    raw = SchedulingEnv(hw, normalise=False)
    a1, r1 = random_rollout(env, batch, jax.random.key(0))
    a2, r2 = random_rollout(raw, batch, jax.random.key(0))
    np.testing.assert_array_equal(a1, a2)
    from respect_jax.costs import objective_lower_bound

    bound = objective_lower_bound(graph_at(batch, 0), hw, "paper")
    np.testing.assert_allclose(r1[0], r2[0] / bound, rtol=1e-6)
    assert float(r1[0]) <= -1.0 + 1e-6  # the bound is a lower bound on the objective


def test_env_interface_reset_with_a_graph_or_from_the_generator():
    """reset(key, graph) is reset_graph(graph); reset(key) draws the graph from the generator with key;
    observations and actions have the shapes of the specs."""
    from env_interface import check_interface

    hw = make_hw(3)
    gen = make_jax_generator(GeneratorConfig(min_nodes=6, max_nodes=12))
    env = SchedulingEnv(hw, generator=gen)
    key = jax.random.PRNGKey(4)
    graph = gen(key)
    state, ts = check_interface(env, graph, key, steps=20)
    assert env.action_spec(graph).num_values == 3
    assert int(state.step_count) == int(graph.num_nodes)  # 20 steps end every episode of <= 12 nodes
    drawn, ts_drawn = jax.jit(env.reset)(key)
    given, ts_given = env.reset_graph(graph)
    chex.assert_trees_all_equal((drawn, ts_drawn), (given, ts_given))
    with pytest.raises(ValueError, match="needs a generator or a graph"):
        SchedulingEnv(hw).reset(key)


def test_random_graphs_generator_is_the_config_generator_with_its_padded_shape():
    cfg = GeneratorConfig(min_nodes=6, max_nodes=12)
    gen = RandomGraphs(cfg)
    keys = jax.random.split(jax.random.key(7), 8)
    drawn = jax.vmap(gen)(keys)
    chex.assert_trees_all_equal(drawn, jax.vmap(make_jax_generator(cfg))(keys))
    assert drawn.params.shape == (8, gen.shape[0]) and drawn.preds.shape == (8, gen.shape[0], gen.shape[2])
    assert len({int(n) for n in drawn.num_nodes}) > 1  # keys give different graphs
    with pytest.raises(ValueError, match="NumPy generator only"):
        RandomGraphs(GeneratorConfig(mode="layered"))


def test_graph_list_draws_every_listed_graph_padded_to_one_shape():
    """A key draws one of the listed graphs, exactly as pad_graph pads it; over many keys every graph comes up;
    reset(key) of an env on the list starts an episode on a listed graph."""
    graphs = generate_dataset(GeneratorConfig(min_nodes=5, max_nodes=20), 3, seed=1)
    gen = GraphList.from_graphs(graphs)
    assert len(gen) == 3
    shape = (gen.graphs.params.shape[1], gen.graphs.senders.shape[1], gen.graphs.preds.shape[2])
    padded = [pad_graph(g, shape) for g in graphs]
    for i in range(3):
        chex.assert_trees_all_equal(gen.graph(i), padded[i])
    drawn = jax.jit(jax.vmap(gen))(jax.random.split(jax.random.key(0), 64))
    seen = set()
    for j in range(64):
        one = graph_at(drawn, j)
        match = [i for i in range(3) if int(one.num_nodes) == int(padded[i].num_nodes)
                 and np.array_equal(one.params, padded[i].params)]
        assert match, "a drawn graph is not one of the list"
        seen.add(match[0])
    assert seen == {0, 1, 2}
    env = SchedulingEnv(make_hw(3), generator=gen)
    state, _ = jax.jit(env.reset)(jax.random.key(3))
    assert int(state.graph.num_nodes) in {g.num_nodes for g in graphs}
    with pytest.raises(ValueError, match="at least one graph"):
        GraphList.from_graphs([])
