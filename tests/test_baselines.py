"""Baselines (compiler, profiling, contiguous, greedy, respect_label, single_stage): validity, bounds, examples."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import make_hw, random_graphs
from contiguous_reference import dense_contiguous_cuts

from respect_jax.graphs import GeneratorConfig, Graph, generate_numpy
from respect_jax.reference import enumerate_valid_schedules, reference_metrics, reference_objective
from respect_jax.solvers import available_solvers, get_solver, run_solver
from respect_jax.solvers.partitioners import (
    _last_fitting,
    _SegmentProfiler,
    _WindowMin,
    best_contiguous_cuts,
    contiguous_assignment,
    contiguous_search,
    solve_compiler,
    solve_contiguous,
    solve_profiling,
)
from respect_jax.solvers.respect_label import pack, solve_respect_label

BASELINES = ("compiler", "profiling", "contiguous", "greedy", "respect_label", "single_stage")
OBJECTIVES = ("paper", "latency")
CONF = Path(__file__).resolve().parents[1] / "conf" / "solver"


def graph_of(params, edges, out=None, macs=None, name="hand") -> Graph:
    n = len(params)
    return Graph(
        name=name,
        params=np.array(params),
        output_size=np.array(out if out is not None else [1] * n),
        macs=np.array(macs if macs is not None else [1] * n),
        edges=np.array(edges, dtype=np.int64).reshape(-1, 2),
    )


def test_every_baseline_is_registered_and_configured():
    for name in (*BASELINES, "milp", "cpsat"):
        assert name in available_solvers()
        conf = yaml.safe_load((CONF / f"{name}.yaml").read_text())
        assert conf["name"] == name
        accepted = inspect.signature(get_solver(name)).parameters
        for option in conf["options"] or {}:
            assert option in accepted, (name, option)


@pytest.mark.parametrize("k", [1, 3])
def test_baselines_always_return_valid_schedules(k):
    """Property test over a seeded stream of graphs of both generator modes (1..32 nodes)."""
    hw = make_hw(k)
    for graph in random_graphs(10, seed=100 + k, min_nodes=1, max_nodes=32):
        for objective in OBJECTIVES:
            for name in BASELINES:
                result = get_solver(name)(graph, hw, objective, 1.0)
                assert result.assignment.shape == (graph.num_nodes,)
                assert reference_metrics(graph, result.assignment, hw)["valid"], (name, graph.name)
                assert result.optimal is None and result.gap is None


def test_run_solver_scores_baselines_with_the_shared_evaluator():
    hw = make_hw(4)
    graph = random_graphs(1, seed=3, min_nodes=20, max_nodes=20)[0]
    for objective in OBJECTIVES:
        for name in BASELINES:
            result = run_solver(name, graph, hw, objective)
            exact = reference_objective(graph, result["assignment"], hw, objective)
            assert result["objective"] == pytest.approx(exact, rel=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_baselines_never_beat_brute_force(seed):
    rng = np.random.default_rng(seed)
    mode = "respect" if seed % 2 == 0 else "dnn"
    graph = generate_numpy(GeneratorConfig(mode=mode, min_nodes=4, max_nodes=8), rng, name=f"bf{seed}")
    hw = make_hw(3)
    schedules = list(enumerate_valid_schedules(graph, hw.stages))
    for objective in OBJECTIVES:
        best = min(reference_objective(graph, a, hw, objective) for a in schedules)
        for name in BASELINES:
            a = get_solver(name)(graph, hw, objective, 1.0).assignment
            assert reference_objective(graph, a, hw, objective) >= best * (1 - 1e-12), (name, objective)


def test_baselines_never_beat_the_proven_optimum():
    hw = make_hw(4)
    rng = np.random.default_rng(11)
    for mode in ("respect", "dnn"):
        graph = generate_numpy(GeneratorConfig(mode=mode, min_nodes=18, max_nodes=18), rng, name=mode)
        for objective in OBJECTIVES:
            oracle = run_solver("cpsat", graph, hw, objective, time_limit_s=30.0)
            assert oracle["optimal"]
            best = reference_objective(graph, oracle["assignment"], hw, objective)
            for name in BASELINES:
                a = get_solver(name)(graph, hw, objective, 1.0).assignment
                assert reference_objective(graph, a, hw, objective) >= best * (1 - 1e-12), (name, mode, objective)


def test_compiler_split_hand_example():
    # ids are not in SPEC order: depth(3)=0, depth(0)=depth(1)=1, depth(2)=2 -> order 3, 0, 1, 2
    graph = graph_of([2, 2, 4, 4], [[3, 0], [3, 1], [0, 2], [1, 2]])
    # params in order: 4, 2, 2, 4 (total 12, K=2, target 6): 4+2 = 6 fits, +2 = 8 > 6 -> cut before
    # position 2 -> positions 0,1 on stage 0 (nodes 3, 0), positions 2,3 on stage 1 (nodes 1, 2)
    result = solve_compiler(graph, make_hw(2))
    assert result.assignment.tolist() == [0, 1, 1, 0]
    assert result.info["cuts"] == [2]
    # a chain, K=3, target 18/3 = 6: [5, 1] | [1] | [6, 2, 3] (only K-1 = 2 cuts are made)
    chain = graph_of([5, 1, 1, 6, 2, 3], [[i, i + 1] for i in range(5)])
    assert solve_compiler(chain, make_hw(3)).assignment.tolist() == [0, 0, 1, 2, 2, 2]


def test_respect_label_hand_example():
    # chain of 4 unit weights, K = 2: cap bisection ends at 2; stage 1 (packed first, from the
    # output) takes nodes 3 and 2, stage 0 the rest
    chain = graph_of([1, 1, 1, 1], [[0, 1], [1, 2], [2, 3]])
    result = solve_respect_label(chain, make_hw(2))
    assert result.assignment.tolist() == [0, 0, 1, 1]
    assert result.info["cap_params"] == 2
    # a cap below the largest node cannot pack; a cap of the total packs everything in the last stage
    assert pack(chain, 0, 2) is None
    assert pack(chain, 4, 2).tolist() == [1, 1, 1, 1]
    # a diamond: 0 -> {1, 2} -> 3 with weights 1, 3, 2, 1 and K = 2; deepest-first rounds:
    # cap 4 -> stage 1 = {3} then {1} (prefix of [1, 2] that fits 1+3 = 4), stage 0 = {2, 0}
    diamond = graph_of([1, 3, 2, 1], [[0, 1], [0, 2], [1, 3], [2, 3]])
    assert pack(diamond, 4, 2).tolist() == [0, 1, 0, 1]


def test_profiling_longest_segment_matches_a_linear_scan():
    graph = generate_numpy(GeneratorConfig(mode="dnn", min_nodes=60, max_nodes=60), np.random.default_rng(5))
    hw = make_hw(4)
    prof = _SegmentProfiler(graph, hw)
    start = 13
    ends = np.arange(start, graph.num_nodes + 1)
    times = np.concatenate(
        [prof.segment_times(1, start, ends[i : i + prof.BATCH]) for i in range(0, len(ends), prof.BATCH)]
    )
    assert np.all(np.diff(times) >= -1e-9 * times.max())  # non-decreasing in the end position
    for target in np.quantile(times, [0.0, 0.1, 0.5, 0.9, 1.0]).tolist() + [times[0] * 0.5]:
        ok = np.flatnonzero(times <= target)
        expected = int(ends[ok.max()]) if len(ok) else None
        assert prof.longest_segment(1, start, target) == expected
    # the profiled time of a segment equals the shared evaluator's T_k of a full schedule using it
    cuts = [start, 30, 45]
    order = graph.topological_order()
    stage = np.empty(graph.num_nodes, dtype=np.int64)
    stage[order] = np.searchsorted(np.array(cuts), np.arange(graph.num_nodes), side="right")
    t1 = reference_metrics(graph, stage, hw)["time_k"][1]
    assert prof.segment_times(1, start, np.array([30]))[0] == pytest.approx(t1, rel=1e-5)


def test_profiling_never_worse_than_compiler_on_latency():
    hw = make_hw(4)
    for graph in random_graphs(6, seed=9, min_nodes=10, max_nodes=32):
        comp = reference_objective(graph, solve_compiler(graph, hw).assignment, hw, "latency")
        prof = solve_profiling(graph, hw, "latency")
        assert reference_objective(graph, prof.assignment, hw, "latency") <= comp * (1 + 1e-5)
        lo, hi = prof.info["target_bounds_s"]
        assert lo <= hi


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_contiguous_is_the_best_of_every_contiguous_split(k):
    """The programme equals the best of all contiguous splits of the SPEC order (empty stages included),
    each scored by the NumPy reference evaluator, for both objectives, with SRAM that holds every node and
    SRAM smaller than most nodes (parameters streamed)."""
    import itertools

    max_nodes = 11 if k <= 4 else 7
    for sram in (600_000.0, 30_000.0):
        hw = make_hw(k, sram_bytes=sram)
        for graph in random_graphs(4, seed=20 + k, min_nodes=1, max_nodes=max_nodes):
            n = graph.num_nodes
            cuts = itertools.combinations_with_replacement(range(n + 1), k - 1)
            splits = [contiguous_assignment(graph, list(c)) for c in cuts]
            for objective in OBJECTIVES:
                best = min(reference_objective(graph, a, hw, objective) for a in splits)
                result = solve_contiguous(graph, hw, objective)
                assert reference_objective(graph, result.assignment, hw, objective) == pytest.approx(best, rel=1e-9)
                assert result.info["dp_objective"] == pytest.approx(best, rel=1e-9)


def _assert_same_as_dense(graph, hw, objective, lam=1.0):
    """The scalable programme returns the dense programme's optimum as the same float, and its split scores it."""
    cuts, value = best_contiguous_cuts(graph, hw, objective, lam)
    dense_cuts, dense_value = dense_contiguous_cuts(graph, hw, objective, lam)
    assert value == dense_value, (graph.name, hw.stages, objective, lam, cuts, dense_cuts)
    assert len(cuts) == hw.stages - 1 and cuts == sorted(cuts) and all(0 <= c <= graph.num_nodes for c in cuts)
    scored = reference_objective(graph, contiguous_assignment(graph, cuts), hw, objective, lam)
    assert scored == pytest.approx(value, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_contiguous_equals_the_dense_programme(seed):
    """Against the dense O(K n^2) programme (tests/contiguous_reference.py) on random graphs of 1-90 nodes of
    both generator modes, K = 1..8, both objectives, lam in {0, 0.01, 1, 30}, SRAM above and below the node sizes."""
    rng = np.random.default_rng(seed)
    for graph in random_graphs(6, seed=40 + seed, min_nodes=1, max_nodes=90):
        for k in range(1, 9):
            hw = make_hw(k, sram_bytes=float(rng.choice([600_000.0, 30_000.0, 1e12])),
                         act_bytes=float(rng.choice([1.0, 4.0])))
            _assert_same_as_dense(graph, hw, "latency")
            _assert_same_as_dense(graph, hw, "paper", float(rng.choice([0.0, 0.01, 1.0, 30.0])))


def test_contiguous_on_a_layered_graph_equals_the_dense_programme():
    """A 400-node ICML'24-style layered graph (wide: most tensors cross every boundary), K = 3 and 8. With lam = 0.05
    memory and communication weigh about the same and the paper walk has many steps: its warm start (the best of a
    zoomed grid of caps) halves the caps it visits (87 for the plain walk down every step at K = 8)."""
    cfg = GeneratorConfig(mode="layered", min_nodes=400, max_nodes=400, param_scale=1000, output_scale=1000,
                          edges_per_node=2.9, max_preds=12)
    graph = generate_numpy(cfg, np.random.default_rng(0))
    for k in (3, 8):
        for objective in OBJECTIVES:
            _assert_same_as_dense(graph, make_hw(k, sram_bytes=20_000.0), objective, 0.05)
    assert contiguous_search(graph, make_hw(8, sram_bytes=20_000.0), "paper", 0.05)[2] <= 50


def test_contiguous_memory_cap_edge_cases():
    """Nodes bigger than SRAM (every stage streams), all-zero counts (every segment costs the same: the search
    over equal candidates ends), one node, and a chain whose heavy node dominates the memory floor."""
    big = graph_of([900, 50, 700, 10, 800, 5], [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [0, 5]],
                   out=[7, 3, 9, 1, 4, 2], macs=[100, 5, 80, 3, 60, 1])
    zeros = graph_of([0] * 300, [[i, i + 1] for i in range(299)], out=[0] * 300, macs=[0] * 300)
    single = graph_of([5], [])
    for k in (1, 2, 3, 5):
        for sram in (1.0, 100.0, 1e9):
            hw = make_hw(k, sram_bytes=sram)
            for graph in (big, single):
                for objective in OBJECTIVES:
                    _assert_same_as_dense(graph, hw, objective)
        for objective in OBJECTIVES:
            _assert_same_as_dense(zeros, make_hw(k), objective)
    # the heavy node alone sets the floor: the best paper split isolates it, K = 3
    cuts, value = best_contiguous_cuts(big, make_hw(3, sram_bytes=1.0), "paper", 0.0)
    assert value == 900.0


def test_window_minimum_and_binary_search_helpers():
    """The sliding-window minimum and the vectorised binary search against plain loops."""
    rng = np.random.default_rng(0)
    for m in (1, 2, 7, 64, 100):
        h = rng.normal(size=m)
        lo = rng.integers(0, np.arange(m) + 1)  # any window start lo[j] <= j
        assert _WindowMin(lo)(h).tolist() == [h[lo[j] : j + 1].min() for j in range(m)]
        values = np.sort(rng.integers(0, 10, size=m))  # largest j in [lo, hi] with values[j] <= t, or lo - 1
        target = rng.integers(0, 10, size=m)
        start = rng.integers(0, m, size=m)
        stop = np.maximum(start - 1, rng.integers(0, m, size=m))

        def fits(rows, j, values=values, target=target):
            return values[j] <= target[rows]

        want = [max((j for j in range(start[r], stop[r] + 1) if values[j] <= target[r]), default=start[r] - 1)
                for r in range(m)]
        assert _last_fitting(fits, start, stop).tolist() == want


@pytest.mark.slow
def test_contiguous_scales_to_10000_nodes():
    """A 10,000-node, ~29,000-edge layered graph, K = 8, both objectives: seconds and little memory (the dense
    programme took 335 s and 2.5 GB at 8,000 nodes). The time bound is loose: the test machine is shared."""
    import time
    import tracemalloc

    cfg = GeneratorConfig(mode="layered", min_nodes=10_000, max_nodes=10_000, param_scale=1000, output_scale=1000,
                          edges_per_node=2.9, max_preds=12)
    graph = generate_numpy(cfg, np.random.default_rng(0))
    assert graph.num_edges > 27_000
    for objective, lam in (("paper", 1.0), ("paper", 0.1), ("latency", 1.0)):
        tracemalloc.start()
        start = time.perf_counter()
        result = solve_contiguous(graph, make_hw(8, sram_bytes=8e6), objective, lam)
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert elapsed < 30.0, elapsed
        assert peak < 256 * 2**20, peak
        assert result.info["memory_caps"] <= 150  # lam = 0.1: 1,555 caps for the plain walk down every step
        assert reference_metrics(graph, result.assignment, make_hw(8))["valid"]


def test_contiguous_never_worse_than_the_compiler_or_profiling_splits():
    """Both libcoral partitioners return contiguous splits, so the exact best one bounds them on 60-node graphs
    (for the paper objective too, where the programme walks down the memory caps)."""
    for k in (4, 6):
        hw = make_hw(k)
        for graph in random_graphs(4, seed=31 + k, min_nodes=40, max_nodes=60):
            for objective in OBJECTIVES:
                best = reference_objective(graph, solve_contiguous(graph, hw, objective).assignment, hw, objective)
                for other in (solve_compiler(graph, hw), solve_profiling(graph, hw, objective)):
                    assert best <= reference_objective(graph, other.assignment, hw, objective) * (1 + 1e-9)
