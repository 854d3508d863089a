"""Local search (respect_jax/local_search.py) against Python references and brute force."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_hw, random_graphs, random_valid_schedule
from flax import nnx

from respect_jax.graphs import pad_graph, stack_graphs
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import reachability, to_original_order, to_position_order
from respect_jax.local_search import (
    TIE_BREAK,
    _Boundary,
    best_pair_move,
    has_unique_order,
    improve,
    move_range,
    neighbours,
    objectives_np,
    refine_boundaries,
    search_value,
    single_move_values,
)
from respect_jax.policy.config import PolicyConfig
from respect_jax.policy.decoding import Decoding
from respect_jax.policy.model import SchedulingPolicy
from respect_jax.reference import enumerate_valid_schedules, reference_metrics, reference_objective

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


def reference_score(graph, assignment, hw) -> float:
    """The search score of local_search.py (paper objective x balance tie-break) by plain loops."""
    m = reference_metrics(graph, assignment, hw)
    balance = np.mean((np.asarray(m["mem_k"], float) / max(max(m["mem_k"]), 1e-30)) ** 4)
    return reference_objective(graph, assignment, hw, "paper") * (1 + TIE_BREAK * balance)


def test_pair_move_is_the_best_composition_of_two_moves():
    hw = make_hw(3)
    value = lambda g, s: search_value(g, s, hw, False, 1.0)
    pair = jax.jit(lambda g, s: best_pair_move(g, reachability(g) > 0, s, 3, lambda c: value(g, c)))
    rng = np.random.default_rng(2)
    for graph in random_graphs(4, seed=3, min_nodes=4, max_nodes=10):
        s = random_valid_schedule(graph, 3, rng)
        padded = pad_graph(graph, SHAPE)
        cand, obj, score = pair(padded, jnp.asarray(to_position_order(padded, s)))
        got = to_original_order(padded, np.asarray(cand))
        compositions = {m2 for m1 in python_moves(graph, s, 3) for m2 in python_moves(graph, np.asarray(m1), 3)}
        assert tuple(got) in compositions
        best = min(reference_score(graph, c, hw) for c in compositions)
        assert float(score) == pytest.approx(best, rel=1e-5)
        assert float(obj) == pytest.approx(reference_objective(graph, got, hw, "paper"), rel=1e-5)


def test_pair_escapes_leave_single_move_optima_and_are_never_worse():
    hw = make_hw(3)
    run = {p: jax.jit(lambda g, s, p=p: improve(g, s, hw, "paper", 1.0, 50, pair_escapes=p)[:2]) for p in (0, 10)}
    rng = np.random.default_rng(11)
    escaped = 0
    for graph in random_graphs(12, seed=17, min_nodes=6, max_nodes=12):
        optimum = min(reference_objective(graph, a, hw, "paper") for a in enumerate_valid_schedules(graph, 3))
        start = random_valid_schedule(graph, 3, rng)
        padded = pad_graph(graph, SHAPE)
        pos = jnp.asarray(to_position_order(padded, start))
        single, with_pairs = (run[p](padded, pos) for p in (0, 10))
        assignment = to_original_order(padded, np.asarray(with_pairs[0]))
        ref = reference_objective(graph, assignment, hw, "paper")
        assert all(assignment[u] <= assignment[v] for u, v in graph.edges)
        assert float(with_pairs[1]) == pytest.approx(ref, rel=1e-5)
        assert optimum * (1 - 1e-5) <= ref <= float(single[1]) * (1 + 1e-6)
        escaped += ref < float(single[1]) * (1 - 1e-6)
    assert escaped  # on some instance the pair moves find a better schedule than hill climbing alone


def small_policy(seed: int = 0) -> SchedulingPolicy:
    cfg = PolicyConfig(encoder="gat", layers=1, width=16, heads=2, decoder="mlp", decoder_width=16)
    return SchedulingPolicy(cfg, rngs=nnx.Rngs(seed))


def test_best_of_with_local_search_is_never_worse_than_best_of():
    """Same key, same candidates: hill-climbing every candidate can only lower the chosen objective.

    A decoder is decode_candidates then keep_best (respect_jax.policy.decoding.decode): the 4 candidates of
    best_of_4 are drawn once (one compiled rollout) and each decoding's keep_best (its local search) is compiled on
    them, instead of 4 whole decoders; make_decoder's best_of is checked against the reference evaluator in
    test_policy's property test."""
    from respect_jax.policy.decoding import decode_candidates, keep_best

    hw = make_hw(3)
    graphs = random_graphs(4, seed=9, min_nodes=8, max_nodes=16)
    batch = stack_graphs(graphs, SHAPE)
    model = small_policy()
    draw = nnx.jit(lambda m, g, k: decode_candidates(m, g, hw, "paper", 1.0, k, Decoding("best_of", samples=4)))
    stage = draw(model, batch, jax.random.PRNGKey(3))  # i32[B, 4, N]
    best = jax.jit(lambda st, d: keep_best(batch, st, hw, "paper", 1.0, d), static_argnums=1)
    decode = lambda d: jax.device_get(best(stage, d))  # noqa: E731
    a = decode(Decoding("best_of", samples=4))
    b = decode(Decoding("best_of", samples=4, local_search=20))
    assert np.all(b.valid)
    assert np.all(b.objective <= a.objective * (1 + 1e-6))
    assert np.any(b.objective < a.objective * (1 - 1e-6))  # an untrained policy leaves room
    assert Decoding("best_of", samples=4, local_search=20).label == "best_of_4+ls"
    with pytest.raises(ValueError, match="local_search"):
        Decoding("greedy", local_search=-1)
    pairs = Decoding("best_of", samples=4, local_search=20, pair_escapes=3)
    c = decode(pairs)
    assert np.all(c.valid) and np.all(c.objective <= b.objective * (1 + 1e-6))
    for i, graph in enumerate(graphs):  # the returned objective is the evaluator's value of the schedule
        assignment = to_original_order(pad_graph(graph, SHAPE), np.asarray(c.stage[i]))
        assert float(c.objective[i]) == pytest.approx(reference_objective(graph, assignment, hw, "paper"), rel=1e-5)
    assert pairs.label == "best_of_4+ls+pairs"
    top = Decoding("best_of", samples=4, local_search=20, pair_escapes=3, pair_candidates=4)
    t = decode(top)
    assert np.all(t.valid) and np.all(t.objective <= c.objective * (1 + 1e-6))  # the best candidate is among them
    assert top.label == "best_of_4+ls+pairs_top4"
    with pytest.raises(ValueError, match="pair_candidates"):
        Decoding("best_of", samples=4, local_search=20, pair_escapes=3, pair_candidates=0)
    with pytest.raises(ValueError, match="pair_escapes"):
        Decoding("greedy", pair_escapes=2)


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


# ============================================================================ sparse path (large graphs)


def single_moves(graph, stage_by_id: np.ndarray, k: int) -> dict[tuple[int, int], np.ndarray]:
    """Every valid move of one node by one stage, others fixed: {(node, +1/-1): schedule} (Python)."""
    moves = {}
    for v in range(graph.num_nodes):
        for d in (1, -1):
            t = stage_by_id[v] + d
            low = max((stage_by_id[u] for u, w in graph.edges if w == v), default=0)
            high = min((stage_by_id[w] for u, w in graph.edges if u == v), default=k - 1)
            if 0 <= t < k and low <= t <= high:
                s = stage_by_id.copy()
                s[v] = t
                moves[v, d] = s
    return moves


_single_values = {
    obj: jax.jit(lambda g, s, k, obj=obj: single_move_values(g, s, make_hw(k), obj == "latency", 1.0), static_argnums=2)
    for obj in ("paper", "latency")
}


@pytest.mark.parametrize("objective", ["paper", "latency"])
def test_single_move_values_equal_the_evaluator_of_each_move(objective):
    """The incremental scores of the sparse moves equal the reference objective and search score of
    every valid single-node move; infeasible moves and padding nodes are inf."""
    rng = np.random.default_rng(3)
    for graph in random_graphs(8, seed=21, min_nodes=1, max_nodes=16):
        for k in (2, 4):
            hw = make_hw(k)
            s = random_valid_schedule(graph, k, rng)
            padded = pad_graph(graph, SHAPE)
            pos = to_position_order(padded, s)
            objs, scores = (np.asarray(x) for x in _single_values[objective](padded, jnp.asarray(pos), k))
            moves = single_moves(graph, s, k)
            n_pad = SHAPE[0]
            position = np.asarray(padded.node_ids)[: graph.num_nodes]  # position -> id
            for j in range(2 * n_pad):
                p, d = j % n_pad, (1 if j < n_pad else -1)
                key = (int(position[p]), d) if p < graph.num_nodes else None
                if key not in moves:
                    assert objs[j] == np.inf and scores[j] == np.inf
                    continue
                want = reference_objective(graph, moves[key], hw, objective)
                assert objs[j] == pytest.approx(want, rel=1e-5)
                m = reference_metrics(graph, moves[key], hw)
                loads = np.asarray(m["time_k" if objective == "latency" else "mem_k"], float)
                balance = np.mean((loads / max(loads.max(), 1e-30)) ** 4)
                assert scores[j] == pytest.approx(want * (1 + TIE_BREAK * balance), rel=1e-5)
            low, high = (np.asarray(x) for x in jax.jit(move_range, static_argnums=2)(padded, jnp.asarray(pos), k))
            assert np.all(low[: graph.num_nodes] <= pos[: graph.num_nodes])
            assert np.all(pos[: graph.num_nodes] <= high[: graph.num_nodes])


_improve_sparse = {
    p: jax.jit(lambda g, s, obj, p=p: improve(g, s, make_hw(3), obj, 1.0, 50, pair_escapes=p, dense_max_nodes=0))
    for p in (0, 4)
}


_improve_sparse_one = jax.jit(lambda g, s, obj: improve(g, s, make_hw(3), obj, 1.0, 1, dense_max_nodes=0))


def test_sparse_improve_is_valid_never_worse_and_takes_the_best_single_move():
    """The sparse path (forced with dense_max_nodes=0): valid, evaluator-scored, never worse than the
    start, never below brute force; its first step is the single-node move with the lowest search
    score by the reference; pair escapes are never worse than plain single moves."""
    hw = make_hw(3)
    rng = np.random.default_rng(8)
    improved = escaped = checked = 0
    for graph in random_graphs(10, seed=27, min_nodes=3, max_nodes=9):
        for objective in ("paper", "latency"):
            optimum = min(reference_objective(graph, a, hw, objective) for a in enumerate_valid_schedules(graph, 3))
            start = random_valid_schedule(graph, 3, rng)
            padded = pad_graph(graph, SHAPE)
            pos = jnp.asarray(to_position_order(padded, start))
            latency = jnp.bool_(objective == "latency")
            (out, value, moves), (out2, value2, _) = (_improve_sparse[p](padded, pos, latency) for p in (0, 4))
            before = reference_objective(graph, start, hw, objective)
            for o, v in ((out, value), (out2, value2)):
                a = to_original_order(padded, np.asarray(o))
                ref = reference_objective(graph, a, hw, objective)
                assert all(a[u] <= a[w] for u, w in graph.edges)
                assert float(v) == pytest.approx(ref, rel=1e-5)
                assert optimum * (1 - 1e-5) <= ref <= before * (1 + 1e-6)
            assert float(value2) <= float(value) * (1 + 1e-6)
            improved += float(value) < before * (1 - 1e-6) and int(moves) > 0
            escaped += float(value2) < float(value) * (1 - 1e-6)
            # one step takes the single-node move with the lowest reference search score
            one, one_value, _ = _improve_sparse_one(padded, pos, latency)
            scored = [
                (float(search_value(padded, jnp.asarray(to_position_order(padded, m)), hw, latency, 1.0)[1]), m)
                for m in single_moves(graph, start, 3).values()
            ]
            _, start_score = search_value(padded, pos, hw, latency, 1.0)
            if scored and min(scored, key=lambda t: t[0])[0] < float(start_score) * (1 - 1e-5):
                best_score, best_move = min(scored, key=lambda t: t[0])
                want = min(before, reference_objective(graph, best_move, hw, objective))
                assert float(one_value) == pytest.approx(want, rel=1e-5)
                checked += 1
    assert improved and escaped and checked


def test_sparse_and_dense_paths_agree_when_the_neighbourhoods_coincide():
    """Without edges every closure move changes one node, so the dense neighbourhood is exactly the
    single-node one: both paths must take the same moves to the same schedule (dense = reference)."""
    from respect_jax.graphs import Graph

    params = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]
    n = len(params)
    graph = Graph(
        name="free", params=params, output_size=[2] * n, macs=[10**6 * p for p in params],
        edges=np.zeros((0, 2), np.int64),
    )  # fmt: skip
    hw = make_hw(3)
    padded = jax.tree.map(jnp.asarray, pad_graph(graph, SHAPE))
    start = jnp.asarray(to_position_order(padded, np.zeros(n, np.int64)))
    for objective in ("paper", "latency"):
        dense = improve(padded, start, hw, objective, 1.0, 30)
        sparse = improve(padded, start, hw, objective, 1.0, 30, dense_max_nodes=0)
        assert int(dense[2]) > 0
        assert np.array_equal(np.asarray(dense[0]), np.asarray(sparse[0]))
        assert float(dense[1]) == pytest.approx(float(sparse[1]), rel=1e-6)
        assert int(dense[2]) == int(sparse[2])


def test_reachability_of_many_graphs_is_each_graphs_own():
    """host_reachability_many (every graph of one padded shape stepped together) gives each graph's
    host_reachability and the scanned reachability, on graphs with chains, branches and fan-outs."""
    from respect_jax.local_search import host_reachability, host_reachability_many

    graphs = [g for g in random_graphs(12, seed=9, min_nodes=3, max_nodes=14)]
    padded = [pad_graph(g, SHAPE) for g in graphs]
    many = host_reachability_many(padded)
    assert many.shape == (len(graphs), SHAPE[0], SHAPE[0]) and many.dtype == bool
    for p, got in zip(padded, many, strict=True):
        assert np.array_equal(got, host_reachability(p))
        assert np.array_equal(got, np.asarray(reachability(jax.tree.map(jnp.asarray, p))) > 0)


def test_polish_many_is_one_polish_per_graph():
    """polish_many (compiled program looked up once per padded shape, reachability built together, searches
    dispatched before reading) returns for every graph what polish returns for it alone: single-node moves with
    closure escapes, graphs of two padded shapes in mixed order, K = 3, both objectives."""
    from respect_jax.local_search import polish, polish_many

    graphs = random_graphs(6, seed=4, min_nodes=6, max_nodes=14) + random_graphs(3, seed=5, min_nodes=20,
                                                                                  max_nodes=28)
    graphs = [graphs[i] for i in (0, 6, 1, 2, 7, 3, 4, 8, 5)]
    hw = make_hw(3)
    rng = np.random.default_rng(0)
    starts = [random_valid_schedule(g, 3, rng) for g in graphs]
    for objective in ("paper", "latency"):
        together = polish_many(graphs, hw, objective, 1.0, starts, 25, "single", screen=8, escapes=5)
        moved = 0
        for graph, start, got in zip(graphs, starts, together, strict=True):
            alone = polish(graph, hw, objective, 1.0, start, 25, "single", screen=8, escapes=5)
            assert got.dtype == np.int64 and np.array_equal(got, alone), (objective, graph.name)
            moved += not np.array_equal(got, start)
        assert moved >= 3  # the searches do move: equal outputs are not the untouched starts
    with pytest.raises(ValueError, match="2 graphs but 1 assignments"):
        polish_many(graphs[:2], hw, "paper", 1.0, starts[:1], 5, "single")


# ---------------------------------------------------------------------------- stage-boundary cuts (min cut)


def brute_band_cut(graph, s, k, lo, hi, order, load, price, hw) -> float:
    """The least ``in_{k+1} + price * load(band nodes on stage k)`` over every valid split of the band ``order[lo:hi]``
    onto stages k / k + 1 (the rest of ``s`` kept; the band's first ``lo`` nodes on k, the others after it on k + 1):
    subsets enumerated, each scored by the loop evaluator."""
    best = np.inf
    band = order[lo:hi]
    for mask in range(1 << len(band)):
        new = s.copy()
        new[order] = k + 1
        new[order[:lo]] = k
        chosen = np.array([(mask >> i) & 1 for i in range(len(band))], bool)
        new[band[chosen]] = k
        m = reference_metrics(graph, new, hw)
        if m["valid"]:
            best = min(best, m["in_k"][k + 1] + price * float(load[lo:hi][chosen].sum()))
    return best


@pytest.mark.parametrize("price", [0.0, -0.3, 0.3])
def test_band_cut_is_the_least_crossing_of_its_band(price):
    """Every schedule a band cut returns is valid, keeps the nodes outside the band, and its crossing of boundary
    k | k + 1 (plus the price on the band's load on stage k) is the least over all splits of the band, enumerated."""
    rng = np.random.default_rng(3)
    hw = make_hw(3)
    checked = 0
    for graph in random_graphs(6, seed=11, min_nodes=6, max_nodes=10):
        s = random_valid_schedule(graph, 3, rng)
        for k in (0, 1):
            bd = _Boundary(graph, s, k, hw)
            m = len(bd.order)
            if m < 2:
                continue
            load = graph.params[bd.order].astype(np.float64)
            unit = float(graph.output_size.sum()) / max(float(load.sum()), 1.0)
            for lo, hi in {(0, m), (max(0, bd.cut - 2), min(m, bd.cut + 2)), (1, m)}:
                if lo >= hi:
                    continue
                want = brute_band_cut(graph, s, k, lo, hi, bd.order, load, price * unit, hw)
                for new in bd.band_cut(lo, hi, load, price * unit):
                    metrics = reference_metrics(graph, new, hw)
                    assert metrics["valid"]
                    outside = np.ones(graph.num_nodes, bool)
                    outside[bd.order[lo:hi]] = False
                    pinned = np.where(np.isin(np.arange(graph.num_nodes), bd.order[:lo]), k, s)
                    pinned[bd.order[hi:]] = k + 1
                    np.testing.assert_array_equal(new[outside], pinned[outside])
                    chosen = new[bd.order[lo:hi]] == k
                    got = metrics["in_k"][k + 1] + price * unit * float(load[lo:hi][chosen].sum())
                    assert got == pytest.approx(want, rel=1e-6, abs=1e-6 * float(graph.output_size.sum()))
                    checked += 1
    assert checked >= 20


def reference_cut_sides(rows, cols, caps, size: int, source: int, sink: int) -> tuple[np.ndarray, np.ndarray]:
    """(smallest, largest) minimum-cut source sides by Edmonds-Karp (shortest augmenting paths, Python integers) on
    the merged arcs, then breadth-first reachability in the residual network: from s, and towards t (complemented)."""
    cap: dict[tuple[int, int], int] = {}
    for u, v, c in zip(np.asarray(rows).tolist(), np.asarray(cols).tolist(), np.asarray(caps).tolist(), strict=True):
        cap[u, v] = cap.get((u, v), 0) + int(c)
        cap.setdefault((v, u), 0)
    adj: list[list[int]] = [[] for _ in range(size)]
    for u, v in cap:
        adj[u].append(v)

    def reach(start: int, forward: bool) -> np.ndarray:
        seen, queue = {start}, [start]
        for u in queue:
            for v in adj[u]:
                if v not in seen and (cap[u, v] if forward else cap[v, u]) > 0:
                    seen.add(v)
                    queue.append(v)
        return np.isin(np.arange(size), sorted(seen))

    while True:
        parent, queue = {source: source}, [source]
        for u in queue:
            for v in adj[u]:
                if v not in parent and cap[u, v] > 0:
                    parent[v] = u
                    queue.append(v)
        if sink not in parent:
            return reach(source, True), ~reach(sink, False)
        path, v = [], sink
        while v != source:
            path.append((parent[v], v))
            v = parent[v]
        push = min(cap[e] for e in path)
        for u, v in path:
            cap[u, v] -= push
            cap[v, u] += push


def brute_cut_sides(rows, cols, caps, size: int, source: int, sink: int) -> tuple[np.ndarray, np.ndarray]:
    """(smallest, largest) minimum-cut source sides by enumerating every source side (s in, t out): the intersection
    and the union of those of least cut capacity."""
    best, sides = None, []
    others = [v for v in range(size) if v not in (source, sink)]
    for mask in range(1 << len(others)):
        side = np.zeros(size, bool)
        side[source] = True
        side[[v for i, v in enumerate(others) if mask >> i & 1]] = True
        value = int(np.sum(np.asarray(caps)[side[rows] & ~side[cols]]))
        if best is None or value < best:
            best, sides = value, [side]
        elif value == best:
            sides.append(side)
    return np.logical_and.reduce(sides), np.logical_or.reduce(sides)


def random_network(rng, size: int, arcs: int, max_cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random arcs (int32 rows, cols, caps in 1..max_cap; parallel and opposite arcs allowed, no loops)."""
    rows, cols = rng.integers(0, size, arcs), rng.integers(0, size, arcs)
    keep = rows != cols
    return (rows[keep].astype(np.int32), cols[keep].astype(np.int32),
            rng.integers(1, max_cap + 1, int(keep.sum())).astype(np.int32))


def test_min_cut_sides_are_the_enumerated_least_cuts_intersection_and_union():
    """On 60 random networks of 4-10 nodes (small capacities, so that many cuts tie): the smallest and largest
    minimum-cut source sides equal the intersection and union of the enumerated minimum cuts, and the Edmonds-Karp
    reference agrees (it checks the larger networks of the next test)."""
    from respect_jax.local_search import _min_cut_sides

    rng, ties = np.random.default_rng(34), 0
    for _ in range(60):
        size = int(rng.integers(4, 11))
        rows, cols, caps = random_network(rng, size, int(rng.integers(size, 4 * size)), 3)
        want = brute_cut_sides(rows, cols, caps, size, 0, size - 1)
        got = _min_cut_sides(rows, cols, caps, size, 0, size - 1)
        for w, g, r in zip(want, got, reference_cut_sides(rows, cols, caps, size, 0, size - 1), strict=True):
            np.testing.assert_array_equal(g, w)
            np.testing.assert_array_equal(r, w)
        ties += not np.array_equal(*want)
    assert ties >= 10  # the two sides differ often enough to tell them apart


def test_min_cut_sides_match_the_reference_on_large_networks_and_bands(monkeypatch):
    """Random networks of 50-600 nodes and every band network of the re-cuts of a 3,000-node layered graph (bands of
    hundreds to thousands of nodes): the same smallest and largest minimum-cut sides as the Edmonds-Karp reference."""
    import respect_jax.local_search as ls
    from respect_jax.graphs import GeneratorConfig, generate_numpy
    from respect_jax.solvers import run_solver

    rng = np.random.default_rng(35)
    for size in (50, 200, 600):
        rows, cols, caps = random_network(rng, size, 5 * size, 50)
        caps[(rows == 0) | (cols == size - 1)] *= 100  # so that the least cut lies inside the network
        got = ls._min_cut_sides(rows, cols, caps, size, 0, size - 1)
        want = reference_cut_sides(rows, cols, caps, size, 0, size - 1)
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
        assert 1 < want[0].sum() <= want[1].sum() < size - 1  # a cut inside the network
    cfg = GeneratorConfig(mode="layered", min_nodes=3000, max_nodes=3000, min_levels=20, max_levels=40, max_preds=8,
                          param_scale=1000.0, output_scale=1000.0, edges_per_node=1.2)
    graph, hw = generate_numpy(cfg, np.random.default_rng(21), name="layered3000"), make_hw(4)
    s = np.asarray(run_solver("contiguous", graph, hw, "paper")["assignment"], np.int64)
    sizes, networks = [], []
    real = ls._min_cut_sides
    monkeypatch.setattr(ls, "_min_cut_sides", lambda *args: networks.append(args) or real(*args))
    for k in range(3):
        bd = _Boundary(graph, s, k, hw)
        m = len(bd.order)
        for lo, hi in ((max(0, bd.cut - m // 6), min(m, bd.cut + m // 6)), (max(0, bd.cut - m // 3), bd.cut + m // 3)):
            bd.band_cut(lo, hi)
            got, want = real(*networks[-1]), reference_cut_sides(*networks[-1])
            assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), (k, lo, hi)
            sizes.append(networks[-1][3])
    assert len(sizes) == 6 and max(sizes) >= 1000, sizes


@pytest.mark.parametrize("objective", ["paper", "latency"])
def test_refine_boundaries_is_valid_and_never_worse(objective):
    """From random valid schedules: the re-cut schedule is valid and no worse under the loop evaluator, and the
    float64 objective the re-cuts compare by equals the loop evaluator's."""
    rng = np.random.default_rng(5)
    improved = 0
    for graph in random_graphs(6, seed=13, min_nodes=8, max_nodes=24):
        for k in (2, 3, 4):
            hw = make_hw(k)
            s = random_valid_schedule(graph, k, rng)
            before = reference_objective(graph, s, hw, objective)
            assert objectives_np(graph, s[None], hw, objective, 1.0)[0] == pytest.approx(before, rel=1e-9)
            out = refine_boundaries(graph, hw, objective, 1.0, s, prices=(0.0, -0.25, 0.25))
            assert reference_metrics(graph, out, hw)["valid"]
            after = reference_objective(graph, out, hw, objective)
            assert after <= before * (1 + 1e-9)
            improved += after < before * (1 - 1e-6)
    assert improved >= 5


def parallel_cell() -> Graph:
    """input -> four parallel branches (a_i -> c_i; a_i's tensor large, c_i's tiny, 1,000 parameters each) -> concat.
    The SPEC order visits the branch heads a_1..a_4 first, so every contiguous split of it crosses several large
    tensors; the optimum (K = 2, ``paper``) puts two whole branches on stage 0 and two on stage 1."""
    edges = [(0, 1 + i) for i in range(4)] + [(1 + i, 5 + i) for i in range(4)] + [(5 + i, 9) for i in range(4)]
    return Graph(name="cell", params=np.array([0] + [1000] * 8 + [0]), output_size=np.array([1000] * 5 + [1] * 5),
                 macs=np.array([0] + [1000] * 8 + [0]), edges=np.array(edges))


def test_unique_order_is_detected_and_left_alone():
    """A chain (and a chain with a skip edge) has one topological order, the parallel cell many; on a single-order
    graph the re-cuts return the schedule as given (every valid schedule is a contiguous split of that order)."""
    ones = np.ones(5, np.int64)
    edges = np.array([(0, 1), (1, 2), (2, 3), (3, 4), (0, 3)])
    chain = Graph(name="chain", params=ones, output_size=ones, macs=ones, edges=edges)
    assert has_unique_order(chain) and not has_unique_order(parallel_cell())
    assert sum(1 for _ in enumerate_valid_schedules(chain, 3)) == 21  # the C(5 + 2, 2) contiguous splits: no other
    start = np.array([0, 1, 1, 2, 2])
    np.testing.assert_array_equal(refine_boundaries(chain, make_hw(3), "paper", 1.0, start), start)


def test_refine_boundaries_puts_parallel_branches_on_adjacent_stages():
    """On :func:`parallel_cell` from the all-on-one-stage schedule (better than every contiguous split of the SPEC
    order): the re-cut reaches the brute-force optimum, splitting the branches between the two stages."""
    graph, hw = parallel_cell(), make_hw(2, sram_bytes=1e9)
    order = graph.topological_order()
    contiguous = min(reference_objective(graph, np.where(np.isin(np.arange(10), order[:c]), 0, 1), hw, "paper")
                     for c in range(11))
    start = np.ones(10, np.int64)
    assert reference_objective(graph, start, hw, "paper") <= contiguous
    optimum = min(reference_objective(graph, a, hw, "paper") for a in enumerate_valid_schedules(graph, 2))
    assert optimum < 0.7 * reference_objective(graph, start, hw, "paper")
    out = refine_boundaries(graph, hw, "paper", 1.0, start, prices=(0.0, -0.25, 0.25))
    assert reference_objective(graph, out, hw, "paper") == pytest.approx(optimum)
    assert sorted(out[1:5].tolist()) == [0, 0, 1, 1]  # two branch heads on each stage
