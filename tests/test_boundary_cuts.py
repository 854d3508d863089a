"""The interval re-cuts (``respect_jax.solvers.boundary_cuts``) and their use in ``solver=auto`` (``interval_cuts``):
each minimum cut against the least weighted cost of every downset of its interval enumerated by brute force, a re-cut
against the best Lagrangian point of the interval (the lower hull of every downset's (compute, transfer) point, written
out) with stage times by the loop reference, and auto's ``contiguous+cuts`` entry and its size limit."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_hw, random_graphs, random_valid_schedule
from test_auto_hull_order import all_downsets, crossing, lower_hull
from test_auto_rebalance import layered

from respect_jax.reference import reference_metrics, reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.boundary_cuts import IntervalCut, interval_recut, interval_sweep
from respect_jax.solvers.orders import split_of_order


def small_cases(seed: int):
    """(graph, schedule, K) of small random and layered graphs (<= 12 nodes) with random valid schedules."""
    rng = np.random.default_rng(seed)
    graphs = random_graphs(10, seed, 5, 12) + [layered(12, s, 1.5) for s in range(6)]
    for i, graph in enumerate(graphs):
        k = 3 + i % 2
        yield graph, random_valid_schedule(graph, k, rng), k


def times_of(graph, member_stage, hw):
    return reference_metrics(graph, member_stage, hw)["time_k"]


def test_interval_cut_is_the_least_weighted_cost_of_its_interval():
    """For each boundary k of a random valid schedule and several (alpha, beta) (beta of both signs), the cut's set is
    a downset between ``s < k - 1`` and ``s <= k`` whose ``alpha x(D) - beta c(D)`` (x: the written-out crossing bytes
    over the link bandwidth, c: MACs over the MAC rate) is the least over every downset of that interval."""
    checked = 0
    for graph, s, k in small_cases(5):
        hw = make_hw(k)
        downsets = list(all_downsets(graph))
        for b in range(1, k):
            lo, hi = s < b - 1, s <= b
            cut = IntervalCut(graph, hw, lo, hi)
            inside = [m for m in downsets if np.all(m >= lo) and np.all(m <= hi)]
            for alpha, beta in ((1.0, 1.0), (0.7, 0.4), (0.5, 0.0), (0.2, -0.6), (1e-3, -1.0)):
                def cost(m, alpha=alpha, beta=beta, graph=graph, hw=hw):
                    return (alpha * crossing(graph, m) * hw.act_bytes / hw.link_bw
                            - beta * float(graph.macs[m].sum()) / hw.macs_per_s)
                got = cut.solve(alpha, beta)
                assert any(np.array_equal(got, m) for m in inside), (graph.name, b)
                best = min(cost(m) for m in inside)
                scale = max(abs(best), max(abs(cost(m)) for m in inside), 1e-30)
                assert cost(got) <= best + 1e-9 * scale, (graph.name, b, alpha, beta)
                checked += 1
    assert checked >= 100


def test_interval_recut_takes_the_best_lagrangian_point_between_two_stages():
    """Spill-free small cases: a re-cut of boundary k moves nodes only between stages k - 1 and k, stays valid, and its
    larger stage time of the two (loop reference) is at most the start's and at most that of the best downset among the
    lower hull's vertices of the interval's (compute, transfer) points whose left slope is <= 1 (the Lagrangian points a
    bisection on the multiplier can reach; every one of them a minimiser for some multiplier)."""
    checked = improved = 0
    for graph, s, k in small_cases(8):
        hw = make_hw(k, sram_bytes=1e12)
        downsets = list(all_downsets(graph))
        for b in range(1, k):
            lo, hi = s < b - 1, s <= b
            inside = [m for m in downsets if np.all(m >= lo) and np.all(m <= hi)]
            by_point: dict = {}
            for m in inside:
                schedule = s.copy()
                schedule[hi & ~lo] = np.where(m[hi & ~lo], b - 1, b)
                t = times_of(graph, schedule, hw)
                point = (int(graph.macs[m].sum()), crossing(graph, m))
                by_point[point] = max(t[b - 1], t[b])  # the two times depend on the point alone (no spill)
            hull = lower_hull(list(by_point))
            # slopes in seconds: transfer time per compute time
            ratio = (hw.act_bytes / hw.link_bw) / (1.0 / hw.macs_per_s)
            reachable = [hull[0]] + [q for p, q in zip(hull, hull[1:], strict=False)
                                     if (q[1] - p[1]) * ratio <= (q[0] - p[0])]
            reference = min(by_point[p] for p in reachable)
            got = interval_recut(graph, hw, s, b, steps=40)
            assert reference_metrics(graph, got, hw)["valid"]
            moved = got != s
            assert np.all(np.isin(s[moved], (b - 1, b))) and np.all(np.isin(got[moved], (b - 1, b)))
            t_start, t_got = times_of(graph, s, hw), times_of(graph, got, hw)
            value = max(t_got[b - 1], t_got[b])
            assert value <= max(t_start[b - 1], t_start[b]) * (1 + 1e-12)
            assert value <= reference * (1 + 1e-12), (graph.name, b)
            improved += value < max(t_start[b - 1], t_start[b]) * (1 - 1e-9)
            checked += 1
    assert checked >= 30 and improved >= 5


def test_interval_sweep_is_never_worse_and_offers_each_kept_schedule():
    """A 300-node dense layered graph from the exact split of its SPEC order (latency, K = 4): the sweep's schedule is
    valid, its bottleneck (loop reference) at most the start's and lower here, and the last schedule offered is the one
    returned."""
    graph, hw = layered(300, 4), make_hw(4)
    s, _ = split_of_order(graph, hw, "latency", 1.0, graph.topological_order())
    offered = []
    got = interval_sweep(graph, hw, s, offer=offered.append)
    assert reference_metrics(graph, got, hw)["valid"]
    start, end = reference_objective(graph, s, hw, "latency"), reference_objective(graph, got, hw, "latency")
    assert end < start
    assert offered and np.array_equal(offered[-1], got)


def test_auto_runs_the_interval_cuts_on_the_line_from_their_minimum_size():
    """A 1,000-node dense layered graph (latency, K = 4, the Coral USB's rates and SRAM; the line on the host, no exact
    solver): with the defaults auto reports ``contiguous+cuts``, below the line's first polish here (12 %), and its
    result is at most that, as the loop reference scores it; with ``interval_cuts`` off or ``interval_cuts_min_nodes``
    above the graph's size there is no such entry."""
    graph, hw = layered(1000, 6), make_hw(4, macs_per_s=2.4e11, sram_bytes=8388608.0, stage_overhead_s=2e-4)
    options = dict(members=["contiguous"], exact="none", crossing_bound=False, progress=False, time_budget_s=60.0,
                   lattice_downsets=0, line_restarts={"latency": 0}, rebalance={"latency": 1}, host_line_min_nodes=500)
    result = run_solver("auto", graph, hw, "latency", **options)
    portfolio = result["info"]["portfolio"]
    assert portfolio["contiguous+cuts"]["objective"] < portfolio["contiguous+ls"]["objective"]
    assert result["objective"] <= portfolio["contiguous+cuts"]["objective"] * (1 + 1e-6)
    assert result["objective"] == pytest.approx(reference_objective(graph, result["assignment"], hw, "latency"),
                                                rel=1e-6)  # the shared evaluator's float32
    for extra in ({"interval_cuts": {"latency": False}}, {"interval_cuts_min_nodes": graph.num_nodes + 1}):
        portfolio = run_solver("auto", graph, hw, "latency", **options, **extra)["info"]["portfolio"]
        assert "contiguous+cuts" not in portfolio, extra


@pytest.mark.parametrize("option, value, match", [
    ("interval_cuts", {"latency": 1}, "interval_cuts must map objectives"),
    ("interval_cuts", {"both": True}, "interval_cuts must map objectives"),
    ("interval_cuts_min_nodes", -1, "interval_cuts_min_nodes must be an integer >= 0 or null"),
    ("interval_cuts_min_nodes", 2.5, "interval_cuts_min_nodes must be an integer >= 0 or null"),
    ("interval_cut_steps", 0, "interval_cut_steps must be an integer >= 1"),
    ("interval_cut_steps", 2.0, "interval_cut_steps must be an integer >= 1"),
    ("interval_cut_steps", True, "interval_cut_steps must be an integer >= 1"),
])
def test_auto_rejects_bad_interval_cut_options(option, value, match):
    with pytest.raises(ValueError, match=match):
        run_solver("auto", layered(40, 1, 1.2), make_hw(2), "latency", progress=False, **{option: value})


def test_interval_cut_steps_are_max_flows_per_re_cut_and_reach_auto(monkeypatch):
    """``interval_recut(steps=s)`` solves s max flows; auto's ``interval_cut_steps`` is the steps its sweeps take (a
    1,000-node dense layered graph, the line on the host)."""
    graph, hw = layered(1000, 6), make_hw(4, macs_per_s=2.4e11, sram_bytes=8388608.0, stage_overhead_s=2e-4)
    s, _ = split_of_order(graph, hw, "latency", 1.0, graph.topological_order())
    for steps in (1, 5):
        info = {}
        interval_recut(graph, hw, s, 2, steps, info)
        assert info["cuts"] == steps
    import respect_jax.solvers.auto as auto_module

    seen = []

    def spy(*args, **kwargs):
        seen.append(kwargs["steps"])
        return interval_sweep(*args, **kwargs)

    monkeypatch.setattr(auto_module, "interval_sweep", spy)
    options = dict(members=["contiguous"], exact="none", crossing_bound=False, progress=False, time_budget_s=60.0,
                   lattice_downsets=0, line_restarts={"latency": 0}, rebalance={"latency": 1}, host_line_min_nodes=500)
    run_solver("auto", graph, hw, "latency", **options, interval_cut_steps=3)
    assert seen and set(seen) == {3}


def leximax_key(times, tolerance):
    """The stage times sorted in decreasing order, each rounded to ``tolerance`` (a key for the leximax order)."""
    return tuple(np.round(np.sort(np.asarray(times))[::-1] / tolerance))


def test_jump_move_is_the_leximax_best_move_across_two_or_more_stages():
    """jump_move against brute force on small random / layered graphs with random valid schedules (K = 3, 4): every
    single-node move to a stage at least two away is tried, kept when the loop reference calls it valid; the result is
    the original schedule when no such move is leximax-less, else a valid schedule one such move away whose sorted stage
    times equal the brute-force least ones (several graphs must take a move)."""
    from respect_jax.solvers.boundary_cuts import jump_move

    taken = 0
    for seed in range(3):
        for graph, s, k in small_cases(seed):
            hw = make_hw(k)
            base = times_of(graph, s, hw)
            tol = 1e-9 * max(base)
            best = None
            for v in range(graph.num_nodes):
                for t in range(k):
                    if abs(t - s[v]) < 2:
                        continue
                    cand = np.array(s)
                    cand[v] = t
                    if not reference_metrics(graph, cand, hw)["valid"]:
                        continue
                    times = times_of(graph, cand, hw)
                    if max(times) <= max(base) + tol and leximax_key(times, tol) < leximax_key(base, tol) and (
                            best is None or leximax_key(times, tol) < leximax_key(best, tol)):
                        best = times
            got = jump_move(graph, hw, np.asarray(s))
            if best is None:
                assert np.array_equal(got, s)
                continue
            taken += 1
            assert reference_metrics(graph, got, hw)["valid"]
            moved = np.flatnonzero(got != np.asarray(s))
            assert len(moved) == 1 and abs(int(got[moved[0]]) - int(s[moved[0]])) >= 2
            assert leximax_key(times_of(graph, got, hw), tol) == leximax_key(best, tol)
    assert taken >= 3, taken
