"""The host single-node local search (respect_jax/solvers/host_polish.py) against the loop evaluator
(respect_jax/reference.py): every move's incremental objective and score equal a from-scratch evaluation of the moved
schedule, infeasible moves are exactly the invalid ones, and the search ends at a local optimum of its score, never
worse than its start; auto's line polish uses it while the compiled one compiles."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_hw, random_graphs, random_valid_schedule
from test_auto_rebalance import layered

import respect_jax.solvers.auto as auto
from respect_jax.local_search import MIN_IMPROVEMENT, TIE_BREAK
from respect_jax.reference import reference_metrics, reference_objective
from respect_jax.solvers.host_polish import _Moves, _State, descend, host_polish


def reference_score(graph, s, hw, objective, lam=1.0):
    """(objective, search score) from the loop evaluator: objective * (1 + TIE_BREAK * mean((load / max)^4))."""
    m = reference_metrics(graph, s, hw)
    if not m["valid"]:
        return np.inf, np.inf
    loads = np.asarray(m["time_k"] if objective == "latency" else m["mem_k"], float)
    obj = reference_objective(graph, s, hw, objective, lam)
    return obj, obj * (1.0 + TIE_BREAK * np.mean((loads / max(loads.max(), 1e-30)) ** 4))


def moved(s, j):
    n = len(s)
    t = np.asarray(s, np.int64).copy()
    t[j % n] += 1 if j < n else -1
    return t


@pytest.mark.parametrize("objective", ["latency", "paper"])
def test_every_single_move_value_equals_the_loop_evaluator(objective):
    """Random graphs, K = 2..4, random valid schedules and tighter memory (spill): for all 2N moves, the move scanner
    gives the loop evaluator's objective and score of the moved schedule, inf exactly where it is invalid."""
    rng = np.random.default_rng(3)
    checked = 0
    for i, graph in enumerate(random_graphs(8, 5, 6, 30)):
        hw = make_hw(2 + i % 3, **({"sram_bytes": 2_000} if i % 2 else {}))
        for _ in range(2):
            s = random_valid_schedule(graph, hw.stages, rng)
            objs, scores = _Moves(graph, hw, objective, 0.7)(s)
            for j in range(2 * graph.num_nodes):
                want_obj, want_score = reference_score(graph, moved(s, j), hw, objective, 0.7)
                if not np.isfinite(want_obj):
                    assert objs[j] == np.inf and scores[j] == np.inf
                    continue
                checked += 1
                assert objs[j] == pytest.approx(want_obj, rel=1e-9)
                assert scores[j] == pytest.approx(want_score, rel=1e-9)
    assert checked > 40


@pytest.mark.parametrize("objective", ["latency", "paper"])
def test_host_polish_ends_at_a_local_optimum_never_worse(objective):
    """From random valid schedules: the result is valid, never worse than the start or the search's last schedule (loop
    evaluator), and with moves to spare no single-node move lowers the last schedule's score by the relative
    MIN_IMPROVEMENT; moves=1 changes at most one node by one stage."""
    rng = np.random.default_rng(4)
    improved = 0
    for i, graph in enumerate(random_graphs(6, 7, 10, 40)):
        hw = make_hw(3 + i % 2)
        s = random_valid_schedule(graph, hw.stages, rng)
        start = reference_objective(graph, s, hw, objective)
        out, last = descend(graph, hw, objective, 1.0, s, 10_000)
        assert np.array_equal(out, host_polish(graph, hw, objective, 1.0, s, 10_000))
        assert reference_metrics(graph, out, hw)["valid"]
        got = reference_objective(graph, out, hw, objective)
        assert got <= start * (1 + 1e-12) and got <= reference_objective(graph, last, hw, objective) * (1 + 1e-12)
        improved += got < start * (1 - 1e-9)
        _, score = reference_score(graph, last, hw, objective)
        for j in range(2 * graph.num_nodes):
            after = reference_score(graph, moved(last, j), hw, objective)[1]
            assert not after < score * (1 - MIN_IMPROVEMENT) * (1 - 1e-9)
        one = host_polish(graph, hw, objective, 1.0, s, 1)
        assert np.sum(np.abs(one - s)) <= 1
    assert improved >= 3


def test_host_polish_offers_better_schedules_and_stops_when_told():
    """A 400-node layered graph (latency, K = 4) from the all-stage-0-then-split start of its SPEC order: the offers
    strictly improve (loop evaluator) and the last is the result; a stop after the first look returns the schedule
    of the first offer."""
    graph, hw = layered(400, 11, 1.2), make_hw(4)
    order = graph.topological_order()
    s = np.empty(graph.num_nodes, np.int64)
    s[order] = np.arange(graph.num_nodes) * 4 // graph.num_nodes
    offered = []
    out = host_polish(graph, hw, "latency", 1.0, s, 300, offer=offered.append, check_every=5)
    values = [reference_objective(graph, a, hw, "latency") for a in offered]
    assert len(offered) >= 2 and np.array_equal(offered[-1], out)
    assert all(b < a for a, b in zip([reference_objective(graph, s, hw, "latency"), *values], values, strict=False))
    first = []
    stopped = host_polish(graph, hw, "latency", 1.0, s, 300, stop=lambda: bool(first), offer=first.append,
                          check_every=5)
    assert len(first) == 1 and np.array_equal(stopped, first[0]) and np.array_equal(first[0], offered[0])


def test_polish_until_runs_on_the_host_while_told(monkeypatch):
    """auto's :func:`polish_until` with ``host()`` True makes every call of moves with :func:`host_polish` (the
    compiled polish is never called), and is no worse than its first call (one host_polish of 10 moves)."""
    graph, hw = layered(400, 11, 1.2), make_hw(4)
    split = auto.live_splits(graph, hw, "latency", 1.0, [3.0])[0][1]

    def compiled(*args, **kwargs):
        raise AssertionError("the compiled polish ran")

    monkeypatch.setattr(auto, "polish", compiled)
    got = auto.polish_until(graph, hw, "latency", 1.0, split, 40, lambda: False, 10, host=lambda: True)
    first = host_polish(graph, hw, "latency", 1.0, split, 10)
    assert reference_objective(graph, got, hw, "latency") <= reference_objective(graph, first, hw, "latency") * (
        1 + 1e-12)
    assert reference_objective(graph, got, hw, "latency") < reference_objective(graph, split, hw, "latency")


@pytest.mark.parametrize("option, value", [("host_polish_moves", 1), ("host_polish_moves", "yes"),
                                           ("host_polish_moves", None), ("host_polish_first_max_nodes", -1),
                                           ("host_polish_first_max_nodes", 2.5), ("host_polish_first_max_nodes", True)])
def test_auto_rejects_bad_host_polish_options(option, value):
    graph = layered(40, 1, 1.2)
    with pytest.raises(ValueError, match=option):
        auto.solve_auto(graph, make_hw(2), "latency", progress=False, **{option: value})


def test_auto_polishes_first_up_to_its_limit_and_rebalances_first_above(monkeypatch):
    """``host_polish_first_max_nodes`` on a 400-node layered graph (latency, K = 4; the warm compile slowed to 3 s):
    at the graph's size the line's first host step is the polish, below it the host rebalancing."""
    import time

    graph, hw = layered(400, 11, 1.2), make_hw(4)
    steps = []
    real_polish, real_rebalance = auto.host_polish, auto.rebalance_host
    monkeypatch.setattr(auto, "compile_polish", lambda *a, **k: time.sleep(3.0))
    monkeypatch.setattr(auto, "host_polish", lambda *a, **k: steps.append("polish") or real_polish(*a, **k))
    monkeypatch.setattr(auto, "rebalance_host", lambda *a, **k: steps.append("rebalance") or real_rebalance(*a, **k))
    for limit, first in ((graph.num_nodes, "polish"), (graph.num_nodes - 1, "rebalance")):
        steps.clear()
        auto.solve_auto(graph, hw, "latency", members=["contiguous"], exact="none", crossing_bound=False,
                        progress=False, time_budget_s=30.0, lattice_downsets=0, line_moves={"latency": 300},
                        line_restarts={"latency": 0}, host_polish_first_max_nodes=limit)
        assert steps and steps[0] == first, (limit, steps)


def test_auto_polishes_its_line_on_the_host_while_the_polish_compiles(monkeypatch):
    """auto with ``host_polish_moves`` on a 400-node layered graph (latency, K = 4, contiguous member, no exact solver,
    no bound), its warm compile slowed to 4 s: the line's first polish is done (on the host) within those 4 s, and the
    compiled polish is called only once the compile is over; the result is never worse than the polish."""
    import time

    graph, hw = layered(400, 11, 1.2), make_hw(4)
    t0, done, calls = time.perf_counter(), [], []
    real_polish, real_many = auto.polish, auto.rebalance_many

    def slow_compile(*args, **kwargs):
        time.sleep(4.0)
        done.append(time.perf_counter())

    def polish(*args, **kwargs):
        calls.append(time.perf_counter())
        return real_polish(*args, **kwargs)

    def rebalance_many(*args, **kwargs):
        calls.append(time.perf_counter())
        return real_many(*args, **kwargs)

    monkeypatch.setattr(auto, "compile_polish", slow_compile)
    monkeypatch.setattr(auto, "polish", polish)
    monkeypatch.setattr(auto, "rebalance_many", rebalance_many)
    result = auto.solve_auto(graph, hw, "latency", members=["contiguous"], exact="none", crossing_bound=False,
                             progress=False, time_budget_s=30.0, lattice_downsets=0, line_moves={"latency": 300},
                             line_restarts={"latency": 0}, host_polish_moves=True)
    entry = result.info["portfolio"]["contiguous+ls"]
    assert done and entry["time_s"] < done[0] - t0
    assert all(c >= done[0] for c in calls)
    got = reference_objective(graph, result.assignment, hw, "latency")
    assert got <= entry["objective"] * (1 + 1e-9) < result.info["portfolio"]["orders"]["objective"]


def fresh_descend(graph, hw, objective, lam, s, moves):
    """descend written out with a from-scratch scan of every move at every step (the search before session 33): (best
    by objective, last schedule)."""
    s = np.asarray(s, np.int64).copy()
    best = s.copy()
    best_obj, s_score = reference_score(graph, s, hw, objective, lam)
    for _ in range(moves):
        objs, scores = _Moves(graph, hw, objective, lam)(s)
        j = int(np.argmin(scores))
        if not scores[j] < s_score * (1.0 - MIN_IMPROVEMENT):
            break
        s, s_score = moved(s, j), float(scores[j])
        if objs[j] < best_obj:
            best, best_obj = s.copy(), float(objs[j])
    return best, s


def test_the_kept_state_equals_a_fresh_one_after_every_move():
    """:class:`_State` after random allowed moves (random graphs and a 400-node layered one, K = 2..4, tight memory on
    every other one): low, high, last, lifted, dropped and the consumer counts equal a from-scratch computation of the
    moved schedule bit for bit, and so do the moves' objectives and scores."""
    rng = np.random.default_rng(8)
    graphs = random_graphs(8, 9, 6, 30)
    moves = 0
    for i, graph in enumerate(graphs + [layered(400, 11, 1.2)]):
        hw = make_hw(2 + i % 3, **({"sram_bytes": 2_000} if i % 2 else {}))
        for objective in ("latency", "paper"):
            scan = _Moves(graph, hw, objective, 0.7)
            state = _State(scan, random_valid_schedule(graph, hw.stages, rng))
            for _ in range(60):
                objs, _ = state.scores()
                allowed = np.flatnonzero(np.isfinite(objs))
                if not len(allowed):
                    break
                j = int(rng.choice(allowed))
                state.move(j % graph.num_nodes, int(state.s[j % graph.num_nodes]) + (1 if j < graph.num_nodes else -1))
                moves += 1
                fresh = scan.state(state.s)
                for got, want in zip((state.low, state.high, state.last, state.lifted, state.dropped), fresh,
                                     strict=True):
                    assert np.array_equal(got, want)
                at_last = state.s[scan.rcv] == fresh[2][scan.snd]
                assert state.on_last == np.bincount(scan.snd, at_last, minlength=graph.num_nodes).astype(int).tolist()
                for got, want in zip(state.scores(), scan(state.s), strict=True):
                    assert np.array_equal(got, want)
    assert moves > 500


@pytest.mark.parametrize("objective", ["latency", "paper"])
def test_descend_takes_the_moves_of_a_fresh_scan_every_step(objective):
    """descend (the kept state) against the search written out with a fresh scan per step: the same best and last
    schedules, from random starts on random graphs and from a split of a 400-node layered graph."""
    rng = np.random.default_rng(10)
    graph, hw = layered(400, 11, 1.2), make_hw(4)
    split = auto.live_splits(graph, hw, objective, 1.0, [3.0])[0][1]
    cases = [(graph, hw, split)] + [(g, make_hw(3 + i % 2), None) for i, g in enumerate(random_graphs(5, 12, 8, 40))]
    for g, h, start in cases:
        start = random_valid_schedule(g, h.stages, rng) if start is None else start
        got = descend(g, h, objective, 1.0, start, 400)
        want = fresh_descend(g, h, objective, 1.0, start, 400)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
