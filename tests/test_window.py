"""Window re-solves (respect_jax/solvers/window.py) against brute force, the loop reference evaluator and the
session-25 decoding."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import make_hw, random_graphs, random_valid_schedule

import respect_jax.solvers.window as window
from respect_jax.graphs.graph import Graph, has_unique_order
from respect_jax.reference import reference_metrics
from respect_jax.solvers.rebalance import leximax_less, stage_times_np
from respect_jax.solvers.window import window_floor, window_free_share, window_resolve, window_search

ROOT = Path(__file__).resolve().parents[1]


def brute_window(graph, hw, s: np.ndarray, first: int, last: int) -> tuple[float, float]:
    """(least, largest) of the window's largest stage time over every valid re-split of its nodes among its stages,
    the other nodes fixed, scored by the loop reference evaluator."""
    nodes = np.flatnonzero((s >= first) & (s <= last))
    best, worst = np.inf, -np.inf
    for combo in itertools.product(range(first, last + 1), repeat=len(nodes)):
        t = s.copy()
        t[nodes] = combo
        if np.any(t[graph.edges[:, 0]] > t[graph.edges[:, 1]]):
            continue
        value = float(np.max(reference_metrics(graph, t, hw)["time_k"][first:last + 1]))
        best, worst = min(best, value), max(worst, value)
    return best, worst


def _cases(count: int, seed: int):
    """(graph, hw, schedule, first, last) with at most 9 nodes in the window; a small SRAM on some so stages spill."""
    rng = np.random.default_rng(seed)
    out = []
    for i, graph in enumerate(random_graphs(count, seed=seed, min_nodes=7, max_nodes=12)):
        k = 3 + i % 2
        hw = make_hw(k, **({"sram_bytes": 1e5} if i % 3 == 0 else {}))
        for _ in range(20):
            s = random_valid_schedule(graph, k, rng)
            width = 2 + int(rng.integers(0, 2))
            first = int(rng.integers(0, k - width + 1))
            inside = int(np.sum((s >= first) & (s <= first + width - 1)))
            if 2 <= inside <= (9 if width == 2 else 7):
                out.append((graph, hw, s, first, first + width - 1))
                break
    return out


def test_window_resolve_is_exact_against_brute_force_and_keeps_the_other_stages():
    """The re-solved window's largest stage time equals the brute-force least (CP-SAT's integer scaling: 1e-6
    relative), the schedule is valid, nodes outside the window keep their stage and the stages outside keep their
    time; the window floor is below the least."""
    cases = _cases(12, seed=31)
    assert len(cases) >= 8
    strictly = 0
    for graph, hw, s, first, last in cases:
        new = window_resolve(graph, hw, s, first, last, deterministic_limit=10.0)
        assert np.all(new[graph.edges[:, 0]] <= new[graph.edges[:, 1]])
        outside = (s < first) | (s > last)
        assert np.array_equal(new[outside], s[outside])
        assert np.all((new[~outside] >= first) & (new[~outside] <= last))
        times = np.asarray(reference_metrics(graph, new, hw)["time_k"])
        before = np.asarray(reference_metrics(graph, s, hw)["time_k"])
        keep = np.r_[0:first, last + 1:int(hw.stages)]
        np.testing.assert_allclose(times[keep], before[keep], rtol=1e-12)
        best, worst = brute_window(graph, hw, s, first, last)
        assert float(np.max(times[first:last + 1])) == pytest.approx(best, rel=1e-6)
        assert window_floor(graph, hw, s, first, last) <= best * (1 + 1e-9)
        info: dict = {}
        again = window_resolve(graph, hw, s, first, last, deterministic_limit=10.0, info=info)
        assert info == {"optimal": True} and np.array_equal(again, new)  # proven, and deterministic
        strictly += best < worst * (1 - 1e-6)
    assert strictly >= 5  # the windows had something to choose


def test_window_search_is_valid_never_worse_and_exact_when_the_window_is_everything():
    """K = 2: the one window is the whole problem, so the search ends at the brute-force optimum; K = 4: valid and
    leximax-never-worse from random schedules, strictly better on most of them."""
    rng = np.random.default_rng(5)
    branchy = [g for g in random_graphs(8, seed=41, min_nodes=6, max_nodes=11) if not has_unique_order(g)]
    assert len(branchy) >= 3
    for graph in branchy:
        hw = make_hw(2)
        s = random_valid_schedule(graph, 2, rng)
        out, kept = window_search(graph, hw, s, solves=2, deterministic_limit=10.0, widths=(2,), min_free=0.0)
        best, _ = brute_window(graph, hw, np.zeros(graph.num_nodes, np.int64), 0, 1)
        assert float(stage_times_np(graph, out[None], hw)[0].max()) == pytest.approx(best, rel=1e-6)
    better = 0
    graphs = [g for g in random_graphs(10, seed=43, min_nodes=15, max_nodes=30) if not has_unique_order(g)]
    assert len(graphs) >= 4
    for graph in graphs:
        hw = make_hw(4)
        s = random_valid_schedule(graph, 4, rng)
        out, kept = window_search(graph, hw, s, solves=3, deterministic_limit=1.0, min_free=0.0)
        assert np.all(out[graph.edges[:, 0]] <= out[graph.edges[:, 1]])
        before, after = stage_times_np(graph, s[None], hw)[0], stage_times_np(graph, out[None], hw)[0]
        assert after.max() <= before.max() * (1 + 1e-12)
        assert (kept > 0) == leximax_less(after, before)
        assert kept > 0 or np.array_equal(out, s)
        better += kept > 0
    assert better >= len(graphs) // 2
    s = random_valid_schedule(graphs[0], 4, rng)
    assert np.array_equal(window_search(graphs[0], make_hw(4), s, solves=0)[0], s)
    chain = Graph(name="chain", params=np.full(6, 9e4), output_size=np.full(6, 1e4), macs=np.full(6, 1e6),
                  edges=np.array([(i, i + 1) for i in range(5)]))
    s = np.array([0, 0, 0, 0, 0, 1])  # poor, but a single topological order: the exact split is the decoding's job
    assert has_unique_order(chain) and window_search(chain, make_hw(2), s, solves=3)[1] == 0
    for graph in graphs:  # windows above max_nodes are skipped: nothing moves
        s = random_valid_schedule(graph, 4, rng)
        out, kept = window_search(graph, make_hw(4), s, solves=3, deterministic_limit=1.0, max_nodes=1)
        assert kept == 0 and np.array_equal(out, s)


def _free_share_reference(graph, s: np.ndarray, first: int, last: int) -> float:
    """The free share from the transitive closure of the WHOLE graph (boolean matrix squaring), not the window's."""
    n = graph.num_nodes
    reach = np.eye(n, dtype=bool)
    reach[graph.edges[:, 0], graph.edges[:, 1]] = True
    for _ in range(int(np.ceil(np.log2(max(n, 2)))) + 1):
        reach = reach | ((reach.astype(np.int64) @ reach.astype(np.int64)) > 0)
    nodes = np.flatnonzero((s >= first) & (s <= last))
    if len(nodes) < 2:
        return 0.0
    sub = reach[np.ix_(nodes, nodes)]
    return float(np.mean([not np.all(sub[i] | sub[:, i]) for i in range(len(nodes))]))


def test_window_free_share_against_the_whole_graph_closure_and_hand_cases():
    """The share of window nodes with a parallel node in the window equals the one from the whole graph's transitive
    closure (a path between window nodes never leaves the window); a chain has 0, a diamond's two middle nodes of
    four 0.5, two unconnected nodes 1."""
    rng = np.random.default_rng(7)
    for graph in random_graphs(10, seed=51, min_nodes=8, max_nodes=40):
        for k in (2, 3, 5):
            s = random_valid_schedule(graph, k, rng)
            for first in range(k - 1):
                for last in range(first + 1, min(first + 3, k)):
                    assert window_free_share(graph, s, first, last) == pytest.approx(
                        _free_share_reference(graph, s, first, last), abs=1e-12)
    ones = dict(params=np.ones(4), output_size=np.ones(4), macs=np.ones(4))
    chain = Graph(name="c", edges=np.array([(0, 1), (1, 2), (2, 3)]), **ones)
    diamond = Graph(name="d", edges=np.array([(0, 1), (0, 2), (1, 3), (2, 3)]), **ones)
    assert window_free_share(chain, np.array([0, 0, 1, 1]), 0, 1) == 0.0
    assert window_free_share(diamond, np.array([0, 0, 1, 1]), 0, 1) == 0.5
    assert window_free_share(diamond, np.array([0, 1, 1, 2]), 1, 2) == pytest.approx(2 / 3)  # {1, 2, 3}
    two = Graph(name="t", edges=np.zeros((0, 2), np.int64), params=np.ones(2), output_size=np.ones(2), macs=np.ones(2))
    assert window_free_share(two, np.array([0, 1]), 0, 1) == 1.0


def _residual_like(blocks: int = 8) -> Graph:
    """A chain of residual blocks, each main path of 5 nodes with an identity skip into its add, and every fourth
    block a downsampling one whose skip has 2 nodes (a 1x1 conv and its batch norm): the one freedom of order, as in
    a ResNet."""
    edges, n = [], 1
    for b in range(blocks):
        x, main = n - 1, list(range(n, n + 5))
        edges += [(x, main[0])] + [(main[i], main[i + 1]) for i in range(4)]
        n += 5
        if b % 4 == 0:
            edges += [(x, n), (n, n + 1), (n + 1, n + 2)]
            n += 2
        else:
            edges.append((x, n))
        edges.append((main[-1], n))
        n += 1
    sizes = np.linspace(1.0, 2.0, n)
    return Graph(name="res", edges=np.array(edges), params=1e5 * sizes, output_size=1e4 * sizes[::-1],
                 macs=1e7 * sizes)


def test_window_search_skips_windows_with_little_freedom_of_order(monkeypatch):
    """The gate checked directly: every window handed to the re-solve has a free share >= min_free; on a
    residual-like chain (free share ~0.2) the default skips every window (no CP-SAT call, the schedule unchanged) while
    min_free = 0 re-solves; min_free > 1 skips everything."""
    calls = []

    def counted(graph, hw, s, first, last, *args, **kwargs):
        calls.append(window_free_share(graph, s, first, last))
        return window_resolve(graph, hw, s, first, last, *args, **kwargs)

    monkeypatch.setattr(window, "window_resolve", counted)
    graph = _residual_like()
    assert not has_unique_order(graph)
    hw = make_hw(3)
    s = np.minimum(np.arange(graph.num_nodes) * 3 // graph.num_nodes, 2)  # stage by id: ids are topological here
    s[-3:] = 2
    assert np.all(s[graph.edges[:, 0]] <= s[graph.edges[:, 1]])
    shares = [window_free_share(graph, s, a, b) for a, b in [(0, 1), (1, 2), (0, 2)]]
    assert 0 < max(shares) < window.WINDOW_MIN_FREE
    out, kept = window_search(graph, hw, s, solves=3, deterministic_limit=1.0)
    assert calls == [] and kept == 0 and np.array_equal(out, s)
    window_search(graph, hw, s, solves=3, deterministic_limit=1.0, min_free=0.0)
    assert len(calls) >= 1
    rng = np.random.default_rng(9)
    seen = []

    def logged(graph, hw, s, first, last, *args, **kwargs):
        seen.append((first, last, np.asarray(s).tobytes()))
        return counted(graph, hw, s, first, last, *args, **kwargs)

    monkeypatch.setattr(window, "window_resolve", logged)
    for graph in [g for g in random_graphs(8, seed=53, min_nodes=15, max_nodes=30) if not has_unique_order(g)]:
        s = random_valid_schedule(graph, 4, rng)
        for min_free in (0.0, 0.3, 0.6, 0.9):
            calls.clear()
            seen.clear()
            window_search(graph, make_hw(4), s, solves=6, deterministic_limit=10.0, min_free=min_free)
            assert all(share >= min_free for share in calls)
            # never the same window twice from the same schedule (a kept window proven optimal is not re-solved)
            assert len(set(seen)) == len(seen)
        calls.clear()
        out, kept = window_search(graph, make_hw(4), s, solves=3, min_free=1.01)
        assert calls == [] and kept == 0 and np.array_equal(out, s)
    kept_once = 0
    for graph in [g for g in random_graphs(8, seed=41, min_nodes=6, max_nodes=11) if not has_unique_order(g)]:
        seen.clear()  # K = 2: one window, the whole problem; once proven optimal nothing is left to re-solve
        out, kept = window_search(graph, make_hw(2), random_valid_schedule(graph, 2, rng), solves=3,
                                  deterministic_limit=10.0, widths=(2,), min_free=0.0)
        assert len(seen) == 1 and kept <= 1
        kept_once += kept
    assert kept_once >= 2


def test_window_resolve_rejects_a_bad_window():
    graph = random_graphs(1, seed=3, min_nodes=6, max_nodes=8)[0]
    with pytest.raises(ValueError, match="window stages"):
        window_resolve(graph, make_hw(3), np.zeros(graph.num_nodes, np.int64), 2, 1)


def _val_case(graph: str, k: int) -> dict:
    doc = json.loads((ROOT / "experiments/results/latency_rebalance_val.json").read_text())
    rec = next(r for r in doc["records"] if r["graph"] == graph and r["K"] == k)
    case = next(json.loads(line) for line in (ROOT / "experiments/results/latency_rebalance_oracle.jsonl")
                .read_text().splitlines() if json.loads(line)["graph"] == graph and json.loads(line)["K"] == k)
    return {**rec, "path": case["path"]}


@pytest.mark.slow  # the forward pass and the polish compile for a new shape
def test_window_in_the_decoding_off_restores_session_25_and_on_improves():
    """solver=policy under ``latency`` on a validation graph: ``ls_window=0`` gives session 25's recorded default
    objective exactly (latency_rebalance_val.json, 1 cycle); the default (3 re-solves) is valid, re-scored by the
    evaluator and strictly better there (3.03 % above the MILP in session 25); ``paper`` does not run it; bad
    values are one-line errors."""
    import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
    from respect_jax.api import hardware
    from respect_jax.costs import evaluate_assignment
    from respect_jax.graphs.graph import load_graph
    from respect_jax.solvers import run_solver

    case = _val_case("val_nas0_a", 5)
    graph, hw = load_graph(ROOT / case["path"]), hardware("coral_usb", stages=5)
    off = run_solver("policy", graph, hw, "latency", 1.0, ls_window=0)
    assert off["objective"] == pytest.approx(case["c1"], rel=1e-9)
    assert "ls_window" not in off["info"]
    out = run_solver("policy", graph, hw, "latency", 1.0)
    assert out["info"]["ls_window"] == 3 and out["info"]["windowed"] >= 1
    metrics = evaluate_assignment(graph, np.asarray(out["assignment"]), hw, "latency", 1.0)
    assert metrics["valid"] and metrics["objective"] == pytest.approx(out["objective"], rel=1e-6)
    assert out["objective"] < off["objective"] * (1 - 1e-3)
    assert "ls_window" not in run_solver("policy", graph, hw, "paper", 1.0)["info"]
    # the window options reach the search: no window holds <= 2 nodes (the escalation off: it would fire on the
    # capped windows), and 2-stage windows alone do less here
    capped = run_solver("policy", graph, hw, "latency", 1.0, ls_window_max_nodes=2, ls_window_escalate=0)
    assert capped["info"]["windowed"] == 0 and capped["objective"] == pytest.approx(off["objective"], rel=1e-9)
    wide = run_solver("policy", graph, hw, "latency", 1.0, ls_window=5, ls_window_widths=[2, 3, 4],
                      ls_window_max_nodes=450)
    assert wide["objective"] <= out["objective"] * (1 + 1e-9)
    for bad, match in [({"ls_window": -1}, "ls_window must be"), ({"ls_window_limit": 0.0}, "ls_window_limit"),
                       ({"ls_window": True}, "ls_window must be"), ({"ls_window_free": 1.5}, "ls_window_free"),
                       ({"ls_window_free": -0.1}, "ls_window_free"), ({"ls_window_widths": [1, 2]}, "ls_window_widths"),
                       ({"ls_window_widths": 3}, "ls_window_widths"), ({"ls_window_max_nodes": 1}, "ls_window_max")]:
        with pytest.raises(ValueError, match=match) as err:
            run_solver("policy", graph, hw, "latency", 1.0, **bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="latency objective only"):
        run_solver("policy", graph, hw, "paper", 1.0, ls_window=2)


def test_escalation_signal_truth_table():
    """Escalate when the first search skipped a window for its node cap, ran out of re-solves, or K >= min_stages;
    otherwise not."""
    assert not window.escalation_signal(0, False, 5, 6)
    assert window.escalation_signal(1, False, 5, 6)
    assert window.escalation_signal(0, True, 5, 6)
    assert window.escalation_signal(0, False, 6, 6)
    assert not window.escalation_signal(0, False, 2, 3)


def test_window_search_escalates_where_the_signal_holds_and_reaches_the_brute_force_optimum():
    """K = 4, escalation widths (4,): the escalation's one window is the whole problem, so where the signal holds
    (first search out of re-solves; every window above its node cap; K >= escalate_stages) the search ends at the
    brute-force optimum of the whole schedule (the loop reference evaluator); where it does not hold (the first search
    tried every window without gain, nothing capped, K < escalate_stages) it runs no escalation and returns the first
    search's schedule exactly. Never worse than the first search alone."""
    rng = np.random.default_rng(17)
    graphs = [g for g in random_graphs(16, seed=61, min_nodes=6, max_nodes=7) if not has_unique_order(g)]
    hw = make_hw(4)
    fired = {"exhausted": 0, "capped": 0, "stages": 0, "quiet": 0}
    short_of_optimum = 0
    for graph in graphs:
        s = random_valid_schedule(graph, 4, rng)
        best, _ = brute_window(graph, hw, np.zeros(graph.num_nodes, np.int64), 0, 3)
        largest = lambda a, graph=graph: float(stage_times_np(graph, a[None], hw)[0].max())  # noqa: E731
        opts = {"deterministic_limit": 10.0, "widths": (2,), "min_free": 0.0, "escalate_widths": (4,)}
        info: dict = {}
        plain, _ = window_search(graph, hw, s, solves=1, **opts, info=info)
        if info["exhausted"] and info["capped"] == 0:  # one 2-stage re-solve, then the whole problem
            out, _ = window_search(graph, hw, s, solves=1, escalate=2, escalate_stages=99, **opts, info=info)
            assert info["escalated"] >= 1 and largest(out) == pytest.approx(best, rel=1e-6)
            assert largest(out) <= largest(plain) * (1 + 1e-12)
            assert np.all(out[graph.edges[:, 0]] <= out[graph.edges[:, 1]])
            fired["exhausted"] += 1
            short_of_optimum += largest(plain) > best * (1 + 1e-6)
        out, _ = window_search(graph, hw, s, solves=1, max_nodes=1, escalate=2, escalate_stages=99, **opts, info=info)
        if info["capped"] > 0:  # every window above the first search's cap; the escalation's cap admits it
            assert info["used"] == 0 and largest(out) == pytest.approx(best, rel=1e-6)
            fired["capped"] += 1
        info = {}
        plain, _ = window_search(graph, hw, s, solves=50, **opts, info=info)
        if not info["exhausted"] and info["capped"] == 0:
            quiet, _ = window_search(graph, hw, s, solves=50, escalate=2, escalate_stages=5, **opts, info=info)
            assert info["escalated"] == 0 and np.array_equal(quiet, plain)
            fired["quiet"] += 1
            out, _ = window_search(graph, hw, s, solves=50, escalate=2, escalate_stages=4, **opts, info=info)
            assert largest(out) == pytest.approx(best, rel=1e-6)  # K = 4 >= escalate_stages: fires
            fired["stages"] += 1
            short_of_optimum += largest(plain) > best * (1 + 1e-6)
    assert min(fired.values()) >= 2 and short_of_optimum >= 2, (fired, short_of_optimum)


def test_window_search_escalation_never_re_solves_a_window_from_the_same_schedule(monkeypatch):
    """With the escalation (widths 2-4, K = 5-6, every case firing) after a first search that tried every window of
    the bottleneck without gain, no (window, schedule) pair reaches CP-SAT twice: the windows the first search tried
    are skipped (the same deterministic sub-problem); the result is never worse
    than the first search's."""
    seen = []

    def logged(graph, hw, s, first, last, *args, **kwargs):
        seen.append((first, last, np.asarray(s).tobytes()))
        return window_resolve(graph, hw, s, first, last, *args, **kwargs)

    monkeypatch.setattr(window, "window_resolve", logged)
    rng = np.random.default_rng(23)
    escalated = 0
    for i, graph in enumerate([g for g in random_graphs(8, seed=67, min_nodes=15, max_nodes=30)
                               if not has_unique_order(g)]):
        k = 5 + i % 2
        hw = make_hw(k)
        s = random_valid_schedule(graph, k, rng)
        plain, _ = window_search(graph, hw, s, solves=50, deterministic_limit=1.0, min_free=0.0)
        seen.clear()
        info: dict = {}  # the first search ends with every window of the bottleneck tried without gain
        out, _ = window_search(graph, hw, s, solves=50, deterministic_limit=1.0, min_free=0.0, escalate=3,
                               escalate_stages=2, info=info)
        assert not info["exhausted"]
        assert len(set(seen)) == len(seen)
        assert not leximax_less(stage_times_np(graph, plain[None], hw)[0], stage_times_np(graph, out[None], hw)[0])
        escalated += info["escalated"] > 0
    assert escalated >= 2


def test_escalation_options_bad_values_are_one_line_errors():
    """ls_window_escalate* options are checked before anything runs (order_solver.window_options), one line each."""
    from respect_jax.policy.order_solver import window_options

    resolved = window_options("latency", 1, ls_window_escalate=0, ls_window_escalate_widths=[2, 3, 4],
                              ls_window_escalate_max_nodes=450, ls_window_escalate_stages=2)
    assert (resolved.escalate, resolved.escalate_widths, resolved.escalate_max_nodes, resolved.escalate_stages) \
        == (0, (2, 3, 4), 450, 2)
    for bad, match in [({"ls_window_escalate": -1}, "ls_window_escalate must"),
                       ({"ls_window_escalate": True}, "ls_window_escalate must"),
                       ({"ls_window_escalate_widths": [1, 4]}, "ls_window_escalate_widths"),
                       ({"ls_window_escalate_widths": []}, "ls_window_escalate_widths"),
                       ({"ls_window_escalate_widths": 4}, "ls_window_escalate_widths"),
                       ({"ls_window_escalate_max_nodes": 1}, "ls_window_escalate_max_nodes"),
                       ({"ls_window_escalate_stages": 1}, "ls_window_escalate_stages"),
                       ({"ls_window_escalate_stages": False}, "ls_window_escalate_stages")]:
        with pytest.raises(ValueError, match=match) as err:
            window_options("latency", 1, **bad)
        assert "\n" not in str(err.value)


@pytest.mark.slow  # the forward pass and the polish compile for a new shape
def test_escalation_in_the_decoding_gains_on_a_validation_graph():
    """solver=policy under ``latency`` on validation graph val_nas0_a at K = 6 (the first search's 2-3-stage windows
    cannot move the three boundaries its optimum moves; K >= 6 fires the escalation): the default (escalation on) is
    valid, re-scored by the evaluator and > 1 % better than ``ls_window_escalate=0`` (4.1 % in
    latency_window_adaptive_val.md); ``ls_window_escalate_stages=7`` (K below it, nothing capped) gives the
    ``ls_window_escalate=0`` schedule exactly."""
    import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
    from respect_jax.api import hardware
    from respect_jax.costs import evaluate_assignment
    from respect_jax.graphs.graph import load_graph
    from respect_jax.solvers import run_solver

    graph = load_graph(ROOT / "data/models_val/nas_generated/nas0_a.json")
    hw = hardware("coral_usb", stages=6)
    off = run_solver("policy", graph, hw, "latency", 1.0, ls_window_escalate=0)
    out = run_solver("policy", graph, hw, "latency", 1.0)
    metrics = evaluate_assignment(graph, np.asarray(out["assignment"]), hw, "latency", 1.0)
    assert metrics["valid"] and metrics["objective"] == pytest.approx(out["objective"], rel=1e-6)
    assert out["objective"] < off["objective"] * (1 - 1e-2)
    below = run_solver("policy", graph, hw, "latency", 1.0, ls_window_escalate_stages=7)
    assert np.array_equal(np.asarray(below["assignment"]), np.asarray(off["assignment"]))


def _scalar_model(graph, hw, s: np.ndarray, first: int, last: int):
    """The window model built by scalar ``cp_model`` calls, one Python object per variable and term (sessions 26-28's
    :func:`window_resolve`, verbatim): the reference :func:`window.window_model` must equal."""
    from ortools.sat.python import cp_model

    k = int(hw.stages)
    width = last - first + 1
    inside = (s >= first) & (s <= last)
    nodes = np.flatnonzero(inside)
    edges = graph.edges if graph.num_edges else np.zeros((0, 2), np.int64)
    succ: list[list[int]] = [[] for _ in range(graph.num_nodes)]
    for u, v in edges.tolist():
        succ[u].append(v)
    out = float(hw.act_bytes) * graph.output_size.astype(np.float64)
    lst = window._last_stage(graph, s, k)
    sink = np.array([not succ[u] for u in range(graph.num_nodes)])
    later = sink | (lst > last)
    unit = float(stage_times_np(graph, s[None], hw)[0].max()) / window.WINDOW_SCALE

    def coef(x: float) -> int:
        return int(round(x / unit))

    m = cp_model.CpModel()
    z = {u: [m.new_bool_var(f"z{u}_{j}") for j in range(width - 1)] for u in nodes.tolist()}
    for u in nodes.tolist():
        for j in range(width - 2):
            m.add_implication(z[u][j + 1], z[u][j])
        for j in range(width - 1):
            m.add_hint(z[u][j], bool(s[u] > first + j))
    for u, v in edges.tolist():
        if inside[u] and inside[v]:
            for j in range(width - 1):
                m.add_implication(z[u][j], z[v][j])
    in_const = np.zeros(width)
    in_terms: list[list] = [[] for _ in range(width)]
    varying = np.zeros(graph.num_nodes, bool)
    for u in np.flatnonzero(out > 0).tolist():
        if inside[u]:
            varying[u] = True
            for j in range(1, width):
                if later[u]:
                    in_terms[j].append((out[u], z[u][j - 1].Not()))
                else:
                    y = m.new_bool_var(f"y{u}_{j}")
                    for v in succ[u]:
                        m.add_bool_or([y, z[v][j - 1].Not(), z[u][j - 1]])
                    in_terms[j].append((out[u], y))
        elif s[u] < first and not later[u] and any(inside[v] for v in succ[u]):
            varying[u] = True
            in_const[0] += out[u]
            for j in range(1, width):
                y = m.new_bool_var(f"y{u}_{j}")
                for v in succ[u]:
                    if inside[v]:
                        m.add_implication(z[v][j - 1], y)
                in_terms[j].append((out[u], y))
    for u in np.flatnonzero(~varying & (out > 0)).tolist():
        for j in range(width):
            if s[u] < first + j <= lst[u]:
                in_const[j] += out[u]
    macs = graph.macs.astype(np.float64) / float(hw.macs_per_s)
    mem = float(hw.param_bytes) * graph.params.astype(np.float64)
    top = m.new_int_var(0, coef(1e3 * unit * window.WINDOW_SCALE), "t")
    for j in range(width):
        const_t = float(hw.stage_overhead_s) + in_const[j] / float(hw.link_bw)
        const_m = 0.0
        lin_t, lin_m = [], []
        for u in nodes.tolist():
            if j == 0:
                const_t += macs[u]
                const_m += mem[u]
            else:
                lin_t.append((macs[u], z[u][j - 1]))
                lin_m.append((mem[u], z[u][j - 1]))
            if j < width - 1:
                lin_t.append((-macs[u], z[u][j]))
                lin_m.append((-mem[u], z[u][j]))
        lin_t += [(b / float(hw.link_bw), lit) for b, lit in in_terms[j]]
        expr = sum(coef(c) * lit for c, lit in lin_t if coef(c))
        if const_m + sum(max(0.0, c) for c, _ in lin_m) > float(hw.sram_bytes):
            spill = m.new_int_var(0, coef(1e3 * unit * window.WINDOW_SCALE), f"spill{j}")
            rate = float(hw.host_bw)
            m.add(spill >= sum(coef(c / rate) * lit for c, lit in lin_m if coef(c / rate))
                  + coef((const_m - float(hw.sram_bytes)) / rate))
            expr = expr + spill
        m.add(top >= expr + coef(const_t))
    m.minimize(top)
    return m


def test_window_model_is_the_scalar_cp_model_build():
    """window.window_model (protobuf text from NumPy arrays) writes exactly the model of the scalar cp_model calls it
    replaced (variables, constraints in order, coefficients, hint): the same CP-SAT answer. Random graphs of 8-30
    nodes at K = 3-6, windows of 2-4 stages, SRAM small enough to spill on a third; and a validation NAS graph."""
    from respect_jax.graphs.graph import load_graph

    rng = np.random.default_rng(29)
    checked = spilled = 0
    problems = [(g, 3 + i % 4, i % 3 == 0) for i, g in enumerate(random_graphs(24, seed=29, min_nodes=8, max_nodes=30))]
    problems.append((load_graph(ROOT / "data/models_val/nas_generated/nas0_a.json"), 6, False))
    for graph, k, small in problems:
        hw = make_hw(k, **({"sram_bytes": 1e5} if small else {}))
        for _ in range(3):
            s = random_valid_schedule(graph, k, rng)
            width = int(rng.integers(2, min(4, k) + 1))
            first = int(rng.integers(0, k - width + 1))
            if int(np.sum((s >= first) & (s <= first + width - 1))) < 2:
                continue
            model, zid, nodes = window.window_model(graph, hw, s, first, first + width - 1)
            assert str(model.proto) == str(_scalar_model(graph, hw, s, first, first + width - 1).proto)
            assert zid.shape == (len(nodes), width - 1)
            checked += 1
            spilled += "spill" in str(model.proto)
    assert checked >= 40 and spilled >= 5


def test_window_probing_reaches_cp_sat_and_both_levels_are_exact(monkeypatch):
    """``probing`` (``ls_window_probing``; None: WINDOW_PROBING = 0) is the cp_model_probing_level of every re-solve of
    window_search; level 0 and CP-SAT's default 2 both reach the brute-force optimum on small windows; bad values of
    ls_window_probing are one-line errors."""
    from ortools.sat.python import cp_model

    from respect_jax.policy.order_solver import window_options

    levels: list[int] = []
    solve = cp_model.CpSolver.solve

    def recording(self, model, *args, **kwargs):
        levels.append(int(self.parameters.cp_model_probing_level))
        return solve(self, model, *args, **kwargs)

    monkeypatch.setattr(cp_model.CpSolver, "solve", recording)
    for graph, hw, s, first, last in _cases(6, seed=31):
        best, _ = brute_window(graph, hw, s, first, last)
        for probing in (None, 0, 2):
            new = window_resolve(graph, hw, s, first, last, deterministic_limit=10.0, probing=probing)
            top = float(np.max(reference_metrics(graph, new, hw)["time_k"][first:last + 1]))
            assert top == pytest.approx(best, rel=1e-6)
            assert levels[-1] == (window.WINDOW_PROBING if probing is None else probing)
    assert window.WINDOW_PROBING == 0
    graph, hw, s, _, _ = _cases(6, seed=31)[0]
    levels.clear()
    window_search(graph, hw, s, 3, 10.0, **{**window_options("latency", 1, ls_window_probing=1).search_kwargs(),
                                           "min_free": 0.0})
    assert levels and set(levels) == {1}
    for bad in (-1, 4, True):
        with pytest.raises(ValueError, match="ls_window_probing must") as err:
            window_options("latency", 1, ls_window_probing=bad)
        assert "\n" not in str(err.value)


def test_window_presolve_reaches_cp_sat_and_every_level_is_exact(monkeypatch):
    """``presolve`` (``ls_window_presolve``; None: WINDOW_PRESOLVE) sets CP-SAT's presolve in every re-solve of
    window_search: 0 presolve off, 1-2 that many iterations without symmetry detection, 3 CP-SAT's own defaults
    (3 iterations, symmetry level 2, compared with a fresh CpSolver's parameters); every level reaches the
    brute-force optimum on small windows; solver=policy routes the option; bad values are one-line errors.
    Fails if the level is ignored, if 0 only sets zero iterations instead of turning presolve off, or if the option
    is not passed on to window_search."""
    from ortools.sat.python import cp_model

    from respect_jax.policy import solver as policy_solver
    from respect_jax.policy.order_solver import window_options

    defaults = cp_model.CpSolver().parameters
    expected = {0: (False, int(defaults.max_presolve_iterations), int(defaults.symmetry_level)),
                1: (True, 1, 0), 2: (True, 2, 0),
                3: (True, int(defaults.max_presolve_iterations), int(defaults.symmetry_level))}
    assert expected[3] == (True, 3, 2)  # CP-SAT's defaults, the sessions 26-30 decoding
    seen: list[tuple[bool, int, int]] = []
    solve = cp_model.CpSolver.solve

    def recording(self, model, *args, **kwargs):
        p = self.parameters
        seen.append((bool(p.cp_model_presolve), int(p.max_presolve_iterations), int(p.symmetry_level)))
        return solve(self, model, *args, **kwargs)

    monkeypatch.setattr(cp_model.CpSolver, "solve", recording)
    for graph, hw, s, first, last in _cases(6, seed=32):
        best, _ = brute_window(graph, hw, s, first, last)
        for presolve in (None, 0, 1, 2, 3):
            new = window_resolve(graph, hw, s, first, last, deterministic_limit=10.0, presolve=presolve)
            top = float(np.max(reference_metrics(graph, new, hw)["time_k"][first:last + 1]))
            assert top == pytest.approx(best, rel=1e-6)
            assert seen[-1] == expected[window.WINDOW_PRESOLVE if presolve is None else presolve]
    graph, hw, s, _, _ = _cases(6, seed=32)[0]
    seen.clear()
    window_search(graph, hw, s, 3, 10.0, **{**window_options("latency", 1, ls_window_presolve=0).search_kwargs(),
                                           "min_free": 0.0})
    assert seen and set(seen) == {expected[0]}
    _, options = policy_solver._route(ls_window_presolve=2)  # the order policy (default checkpoint)
    assert options["ls_window_presolve"] == 2
    with pytest.raises(ValueError, match="presolve must be one of"):
        window_resolve(graph, hw, s, 0, 1, presolve=4)
    for bad in (-1, 4, True):
        with pytest.raises(ValueError, match="ls_window_presolve must") as err:
            window_options("latency", 1, ls_window_presolve=bad)
        assert "\n" not in str(err.value)


def test_window_options_resolve_defaults_and_reach_every_entry_point():
    """``window_options`` resolves None to the module defaults (WINDOW_SOLVES re-solves under latency with the
    rebalancing, none under paper or without it; WINDOW_LIMIT; WINDOW_ESCALATE), its ``search_kwargs`` are
    window_search's own keyword arguments, and every ``ls_window*`` option is an option of solver=policy and
    solver=order_policy (a misspelt one is refused in one line). Fails if a default is resolved differently, if a
    field is dropped on the way to window_search, or if an option falls out of the option check."""
    import inspect

    from respect_jax.policy import order_solver
    from respect_jax.policy import solver as policy_solver
    from respect_jax.solvers.base import check_solver_options, solver_options

    default = order_solver.window_options("latency", 1)
    assert (default.solves, default.limit, default.escalate) == (3, 0.2, 2)
    assert order_solver.WINDOW_SOLVES["latency"] == 3 and order_solver.WINDOW_LIMIT == 0.2
    assert order_solver.window_options("paper", 1).solves == 0
    assert order_solver.window_options("latency", 0, ls_window=5).solves == 0  # no rebalancing: no windows
    assert order_solver.window_options("latency", 1, ls_window=5, ls_window_limit=1).limit == 1.0
    kwargs = order_solver.window_options("latency", 1, ls_window_free=0.5, ls_window_widths=[3],
                                         ls_window_max_nodes=10, ls_window_presolve=2).search_kwargs()
    assert set(kwargs) <= set(inspect.signature(window_search).parameters)
    assert (kwargs["min_free"], kwargs["widths"], kwargs["max_nodes"], kwargs["presolve"]) == (0.5, (3,), 10, 2)
    names = set(order_solver.WINDOW_OPTION_NAMES)
    assert len(names) == 12 and all(n.startswith("ls_window") for n in names)
    for solver in ("policy", "order_policy"):
        assert names <= set(solver_options(solver))
        check_solver_options(solver, {"ls_window_presolve": 1, "ls_window_limit": 0.5})
        with pytest.raises(ValueError, match="unknown option\\(s\\) ls_window_limt;") as err:
            check_solver_options(solver, {"ls_window_limt": 0.5})
        assert "\n" not in str(err.value)
    with pytest.raises(TypeError, match="ls_window_limt"):
        policy_solver._route(ls_window_limt=0.5)


def test_window_search_in_threads_gives_the_sequential_search_exactly(monkeypatch):
    """``threads`` 3 (re-solves of the next windows run ahead at once) against ``threads`` 1, K = 5-6 with the
    escalation: the same schedule, re-solves kept and ``info`` (used, capped, exhausted, escalated) on every case, while
    re-solves did run at once (a recording wrapper sees two in flight). Fails if a re-solve ahead starts from another
    schedule than the one the search reaches it from, if a result is used for the wrong window, or if a re-solve run
    ahead counts against the budget."""
    import threading
    import time

    active, most = [0], [0]
    lock = threading.Lock()
    resolve = window.window_resolve

    def recording(*args, **kwargs):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        try:
            time.sleep(0.005)  # long enough for a re-solve run ahead to overlap this one
            return resolve(*args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(window, "window_resolve", recording)
    rng = np.random.default_rng(23)
    graphs = [g for g in random_graphs(10, seed=71, min_nodes=14, max_nodes=22) if not has_unique_order(g)]
    kept_any = 0
    for i, graph in enumerate(graphs):
        k = 5 + i % 2
        hw = make_hw(k, **({"sram_bytes": 1e5} if i % 3 == 0 else {}))
        s = random_valid_schedule(graph, k, rng)
        opts = {"deterministic_limit": 0.5, "min_free": 0.0, "escalate": 3, "escalate_stages": 2}
        results = []
        for threads in (1, 3):
            info: dict = {}
            out, kept = window_search(graph, hw, s, 4, **opts, info=info, threads=threads)
            results.append((out, kept, info))
        (a, kept_a, info_a), (b, kept_b, info_b) = results
        assert np.array_equal(a, b) and kept_a == kept_b and info_a == info_b, (graph.name, info_a, info_b)
        kept_any += kept_a > 0
    assert kept_any >= 3 and most[0] >= 2, (kept_any, most[0])
    with pytest.raises(ValueError, match="threads must be an integer >= 1"):
        window_search(graphs[0], make_hw(5), np.zeros(graphs[0].num_nodes, np.int64), 2, threads=0)
