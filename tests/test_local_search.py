"""Local search (respect_jax/solvers/local_search.py) against Python references and brute force."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_hw, random_graphs, random_valid_schedule
from flax import nnx

from respect_jax.graphs import pad_graph, stack_graphs
from respect_jax.graphs.padded import reachability, to_original_order, to_position_order
from respect_jax.policy.config import PolicyConfig
from respect_jax.policy.decoding import Decoding, make_decoder
from respect_jax.policy.model import SchedulingPolicy
from respect_jax.reference import enumerate_valid_schedules, reference_objective
from respect_jax.solvers.local_search import improve, neighbours

SHAPE = (16, 96, 8)  # one padded shape for every small graph: one compilation per function


def python_moves(graph, stage_by_id: np.ndarray, k: int) -> set[tuple[int, ...]]:
    """Every raise/lower-by-one closure move of a schedule, by node id (plain-Python reference)."""
    succ = [[] for _ in range(graph.num_nodes)]
    pred = [[] for _ in range(graph.num_nodes)]
    for u, v in graph.edges:
        succ[u].append(v)
        pred[v].append(u)

    def closure(v, nbrs):
        seen, todo = {v}, [v]
        while todo:
            for w in nbrs[todo.pop()]:
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        return seen

    moves = {tuple(stage_by_id)}
    for v in range(graph.num_nodes):
        up, down = stage_by_id.copy(), stage_by_id.copy()
        for w in closure(v, succ):
            up[w] = max(up[w], min(stage_by_id[v] + 1, k - 1))
        for w in closure(v, pred):
            down[w] = min(down[w], max(stage_by_id[v] - 1, 0))
        moves |= {tuple(up), tuple(down)}
    return moves


_neighbours = jax.jit(lambda g, s, k: neighbours(g, reachability(g) > 0, s, k), static_argnums=2)
_improve = {
    (obj, k): jax.jit(lambda g, s, obj=obj, k=k: improve(g, s, make_hw(k), obj, 1.0, 50))
    for obj in ("paper", "latency")
    for k in (1, 3)
}


def test_neighbourhood_equals_python_closure_moves():
    rng = np.random.default_rng(0)
    for graph in random_graphs(6, seed=1, min_nodes=1, max_nodes=16):
        for k in (2, 4):
            s = random_valid_schedule(graph, k, rng)
            padded = pad_graph(graph, SHAPE)
            pos = to_position_order(padded, s)
            cands = np.asarray(_neighbours(padded, jnp.asarray(pos), k))
            got = {tuple(to_original_order(padded, c)) for c in cands}
            assert got == python_moves(graph, s, k)
            for c in cands:  # padding positions are never touched
                assert np.array_equal(c[graph.num_nodes :], pos[graph.num_nodes :])


@pytest.mark.parametrize("objective", ["paper", "latency"])
def test_improve_is_valid_never_worse_and_never_below_brute_force(objective):
    rng = np.random.default_rng(5)
    improved_any = False
    for graph in random_graphs(10, seed=7, min_nodes=1, max_nodes=8):
        for k in (1, 3):
            hw = make_hw(k)
            optimum = min(reference_objective(graph, a, hw, objective) for a in enumerate_valid_schedules(graph, k))
            start = random_valid_schedule(graph, k, rng)
            padded = pad_graph(graph, SHAPE)
            out, value, moves = _improve[(objective, k)](padded, jnp.asarray(to_position_order(padded, start)))
            assignment = to_original_order(padded, np.asarray(out))
            ref = reference_objective(graph, assignment, hw, objective)
            assert all(assignment[u] <= assignment[v] for u, v in graph.edges)
            assert float(value) == pytest.approx(ref, rel=1e-5)
            before = reference_objective(graph, start, hw, objective)
            assert ref <= before * (1 + 1e-6)
            assert ref >= optimum * (1 - 1e-5)
            improved_any |= ref < before * (1 - 1e-6) and int(moves) > 0
    assert improved_any  # the search does move on some of these instances


def small_policy(seed: int = 0) -> SchedulingPolicy:
    cfg = PolicyConfig(encoder="gat", layers=1, width=16, heads=2, decoder="mlp", decoder_width=16)
    return SchedulingPolicy(cfg, rngs=nnx.Rngs(seed))


def test_best_of_with_local_search_is_never_worse_than_best_of():
    """Same key, same candidates: hill-climbing every candidate can only lower the chosen objective."""
    hw = make_hw(3)
    graphs = random_graphs(4, seed=9, min_nodes=8, max_nodes=16)
    batch = stack_graphs(graphs, SHAPE)
    model = small_policy()
    plain, params = make_decoder(model, hw, "paper", 1.0, Decoding("best_of", samples=4))
    refined, _ = make_decoder(model, hw, "paper", 1.0, Decoding("best_of", samples=4, local_search=20))
    a = jax.device_get(plain(params, batch, jax.random.PRNGKey(3)))
    b = jax.device_get(refined(params, batch, jax.random.PRNGKey(3)))
    assert np.all(b.valid)
    assert np.all(b.objective <= a.objective * (1 + 1e-6))
    assert np.any(b.objective < a.objective * (1 - 1e-6))  # an untrained policy leaves room
    assert Decoding("best_of", samples=4, local_search=20).label == "best_of_4+ls"
    with pytest.raises(ValueError, match="local_search"):
        Decoding("greedy", local_search=-1)


@pytest.mark.parametrize("objective", ["paper", "latency"])
def test_gumbel_solver_with_local_search_is_never_worse(objective):
    """solve_batch hill-climbs each best schedule in the same call: valid, evaluator-scored, never worse."""
    from respect_jax.costs import evaluate_assignment
    from respect_jax.solvers.gumbel import solve_batch

    hw = make_hw(3)
    graphs = random_graphs(4, seed=13, min_nodes=8, max_nodes=16)
    batch = stack_graphs(graphs, SHAPE)
    key = jax.random.PRNGKey(4)
    _, raw = solve_batch(batch, hw, objective, 1.0, key, steps=3, samples=4, local_search=0)
    assign, polished = solve_batch(batch, hw, objective, 1.0, key, steps=3, samples=4, local_search=20)
    assert np.all(np.asarray(polished) <= np.asarray(raw) * (1 + 1e-6))
    for i, graph in enumerate(graphs):
        assignment = to_original_order(pad_graph(graph, SHAPE), np.asarray(assign[i]))
        ref = evaluate_assignment(graph, assignment, hw, objective)
        assert ref["valid"] and float(polished[i]) == pytest.approx(ref["objective"], rel=1e-5)
