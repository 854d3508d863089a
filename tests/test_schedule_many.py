"""Many graphs at once (``run_solver_many``, the policy's batched form), compile time reported apart, and
JAX's persistent compilation cache (``respect_jax.compile_cache``)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_hw, random_graphs

import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
from respect_jax.compile_cache import default_cache_dir, resolve_cache_dir
from respect_jax.graphs import bucket_shape
from respect_jax.policy.solver import DEFAULT_CHECKPOINT
from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.base import run_solver_many


@pytest.fixture(scope="module")
def graphs():
    """Five graphs in two size buckets: three padded alike to 32 nodes, two alike to 64 (so that scheduling
    them one at a time compiles two programs, not five)."""
    by_shape: dict = {}
    for graph in random_graphs(60, seed=3, min_nodes=8, max_nodes=60):
        by_shape.setdefault(bucket_shape([graph]), []).append(graph)
    small = max((v for k, v in by_shape.items() if k[0] == 32), key=len)[:3]
    large = max((v for k, v in by_shape.items() if k[0] == 64), key=len)[:2]
    assert len(small) == 3 and len(large) == 2
    return [small[0], large[0], small[1], large[1], small[2]]


DEFAULT_SAMPLES = getattr(respect_jax.policy.solver, "ORDER_DEFAULT_SAMPLES", 16)  # solver=policy's sampled orders
STEP = {"checkpoint": str(DEFAULT_CHECKPOINT)}  # the step-by-step policy (solver=policy's default is the order policy)


def test_batched_policy_gives_each_graph_its_own_greedy_schedule(graphs):
    hw = make_hw(3)
    batched = run_solver_many("policy", graphs, hw, "paper", 1.0, batch_size=2, **STEP)  # partial last batch: padded
    assert len(batched) == len(graphs)
    first_of_bucket = set()
    for graph, result in zip(graphs, batched, strict=True):
        alone = run_solver("policy", graph, hw, "paper", 1.0, **STEP)
        assert result["graph"] == graph.name and result["num_nodes"] == graph.num_nodes
        assert result["assignment"] == alone["assignment"], graph.name
        assert result["objective"] == pytest.approx(reference_objective(graph, result["assignment"], hw, "paper"))
        info = result["info"]
        assert info["bucket"][0] in (32, 64) and info["bucket"][0] >= graph.num_nodes
        assert 1 <= info["batch_graphs"] <= 2 and info["compile_s"] >= 0 and result["solve_time_s"] > 0
        assert result["solve_time_s"] == info["schedule_s"]
        # one graph alone: compile time (its bucket at batch 1, once per process) apart from scheduling
        one = alone["info"]
        assert "compile_s" in one["timing"] and one["load_s"] >= 0
        assert alone["solve_time_s"] == pytest.approx(one["wall_s"] - one["compile_s"] - one["load_s"], abs=1e-9)
        if tuple(one["bucket"]) not in first_of_bucket:  # its own padded shape (N, E, P)
            first_of_bucket.add(tuple(one["bucket"]))
            assert one["compile_s"] > 0.05
        else:
            assert one["compile_s"] < 0.01, "compiled once per process and padded shape"
    by_bucket = {}
    for r in batched:
        by_bucket.setdefault(r["info"]["bucket"][0], set()).add(r["info"]["compile_s"])
    assert sorted(by_bucket) == [32, 64] and all(len(v) == 1 for v in by_bucket.values()), "one compile per bucket"


def test_batched_local_search_matches_one_graph_at_a_time(graphs):
    hw = make_hw(4)
    options = {"decoding": "greedy", "local_search": 20, **STEP}
    small = [graphs[0], graphs[2], graphs[4]]  # one padded shape: two compilations (batch of 3, batch of 1)
    batched = run_solver_many("policy", small, hw, "latency", 1.0, batch_size=4, **options)
    for graph, result in zip(small, batched, strict=True):
        alone = run_solver("policy", graph, hw, "latency", 1.0, **options)
        assert result["assignment"] == alone["assignment"]
        assert result["info"]["decoding"] == "greedy+ls"


def test_default_policy_is_the_order_policy_batched_as_alone(graphs):
    """solver=policy's default family is the order policy; its batched form gives each graph the schedule a
    call for that graph alone gives (sampled orders seeded per graph), and its objective is the evaluator's."""
    hw = make_hw(3)
    batched = run_solver_many("policy", graphs, hw, "latency", 1.0, batch_size=2)
    for graph, result in zip(graphs, batched, strict=True):
        alone = run_solver("policy", graph, hw, "latency", 1.0)
        assert result["info"]["family"] == alone["info"]["family"] == "order"
        assert result["info"]["decoding"] == f"sample_{DEFAULT_SAMPLES}+ls"
        assert result["assignment"] == alone["assignment"], graph.name
        assert result["objective"] == pytest.approx(reference_objective(graph, result["assignment"], hw, "latency"))


def test_solvers_without_a_batched_form_run_one_graph_at_a_time(graphs):
    hw = make_hw(3)
    many = run_solver_many("greedy", graphs[:3], hw, "paper", 1.0)
    for graph, result in zip(graphs[:3], many, strict=True):
        assert result["assignment"] == run_solver("greedy", graph, hw, "paper", 1.0)["assignment"]


@pytest.mark.parametrize(
    "kwargs,message",
    [({"graphs": []}, "no graphs to schedule"), ({"batch_size": 0}, "batch_size must be >= 1, got 0")],
)
def test_batched_policy_bad_inputs_are_one_line_errors(graphs, kwargs, message):
    args = {"graphs": graphs[:2], "batch_size": 4, **kwargs}
    with pytest.raises(ValueError, match=message):
        run_solver_many("policy", args["graphs"], make_hw(3), "paper", 1.0, batch_size=args["batch_size"])


def test_cache_setting_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("RESPECT_JAX_CACHE", raising=False)
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "respect-jax" / "jax"
    assert resolve_cache_dir("auto") == tmp_path / "xdg" / "respect-jax" / "jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_cache_dir("auto") == tmp_path / "home" / ".cache" / "respect-jax" / "jax"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jaxenv"))
    assert resolve_cache_dir("auto") == tmp_path / "jaxenv"
    monkeypatch.setenv("RESPECT_JAX_CACHE", str(tmp_path / "ours"))
    assert resolve_cache_dir("auto") == tmp_path / "ours"
    assert resolve_cache_dir(str(tmp_path / "given")) == tmp_path / "given"  # an explicit folder wins
    monkeypatch.setenv("RESPECT_JAX_CACHE", "off")
    assert resolve_cache_dir("auto") is None
    for off in ("off", None, "false", "none"):
        assert resolve_cache_dir(off) is None


CACHE_PROBE = """
import sys, jax, jax.numpy as jnp
from respect_jax.compile_cache import enable_compilation_cache
hits = []
jax.monitoring.register_event_listener(lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None)
enable_compilation_cache(sys.argv[1] if sys.argv[1] != "off" else None, min_compile_time_s=0.0)
f = jax.jit(lambda x: jnp.sin(x) @ jnp.cos(x).T + 41.0)
print(float(f(jnp.ones((7, 5)))[0, 0]), len(hits))
"""


def _probe(arg: str) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "RESPECT_JAX_CACHE")}
    env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, "-c", CACHE_PROBE, arg]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    value, hits = proc.stdout.split()
    return value, int(hits)


def test_a_second_process_loads_the_compiled_program_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    first, hits = _probe(str(cache))
    assert hits == 0 and any(cache.iterdir()), "the first process compiles and writes the cache"
    entries = sorted(p.name for p in cache.iterdir())
    second, hits = _probe(str(cache))
    assert hits >= 1 and second == first, "the second process reads the compiled program"
    assert sorted(p.name for p in cache.iterdir()) == entries, "and compiles nothing new"
    _, hits = _probe("off")
    assert hits == 0


def test_grouping_by_bucket_puts_every_graph_in_exactly_one_group(graphs):
    from respect_jax.policy.solver import grouped_by_bucket

    groups = grouped_by_bucket(graphs)
    assert sorted(i for idx in groups.values() for i in idx) == list(range(len(graphs)))
    for (n, e, p), idx in groups.items():
        for i in idx:
            g = graphs[i]
            assert g.num_nodes <= n and g.num_edges <= e
            assert (np.bincount(g.edges[:, 1]).max() if g.num_edges else 1) <= p


def test_default_cache_folder_is_not_home_in_tests():
    """The suite points the commands' cache at its own folder (conftest), never at the user's."""
    folder = resolve_cache_dir("auto")
    assert folder is None or not str(folder).startswith(str(Path.home() / ".cache"))


# ----------------------------------------------------------------------------- the batched re-scoring


def test_batched_rescoring_gives_the_one_graph_evaluator_dicts():
    """evaluate_many scores every (graph, schedule) with the shared evaluator, batched per padded shape: on graphs whose
    float32 sums are exact (small counts) the dicts equal evaluate_assignment's exactly, valid or not, whatever the
    batching (a shape's last call padded with copies)."""
    from respect_jax.costs import evaluate_assignment
    from respect_jax.solvers.base import SCORE_ROWS, evaluate_many

    rng = np.random.default_rng(5)
    graphs = [  # small integer counts: every float32 sum is exact
        dataclasses.replace(g, params=rng.integers(0, 1000, g.num_nodes), macs=rng.integers(0, 1000, g.num_nodes),
                            output_size=rng.integers(0, 1000, g.num_nodes))
        for g in random_graphs(2 * SCORE_ROWS + 7, seed=11, min_nodes=4, max_nodes=40)
    ]
    hw = make_hw(3, sram_bytes=20_000.0)
    schedules = []
    for i, graph in enumerate(graphs):  # valid and invalid ones
        valid = np.zeros(graph.num_nodes, np.int64)
        valid[graph.topological_order()] = np.arange(graph.num_nodes) * 3 // graph.num_nodes
        schedules.append(valid if i % 3 else rng.integers(0, 3, graph.num_nodes))
    for objective, lam in (("paper", 0.5), ("latency", 1.0)):
        batched = evaluate_many(graphs, schedules, hw, objective, lam)
        alone = [evaluate_assignment(g, s, hw, objective, lam) for g, s in zip(graphs, schedules, strict=True)]
        assert batched == alone
        assert {d["valid"] for d in batched} == {True, False}
        for graph, s, doc in zip(graphs, schedules, batched, strict=True):
            if doc["valid"]:
                assert doc["objective"] == pytest.approx(reference_objective(graph, s, hw, objective, lam), rel=1e-6)


def test_batched_rescoring_of_large_counts_is_within_float32_rounding():
    """On generated architectures (MACs per stage far above 2**24) vmap may regroup a float32 sum: an ulp or two."""
    from respect_jax.costs import evaluate_assignment
    from respect_jax.graphs import GeneratorConfig, generate_dataset
    from respect_jax.solvers.base import evaluate_many

    graphs = generate_dataset(GeneratorConfig(mode="arch", min_nodes=40, max_nodes=120), 12, 3)
    hw = make_hw(4)
    schedules = []
    for graph in graphs:
        s = np.zeros(graph.num_nodes, np.int64)
        s[graph.topological_order()] = np.arange(graph.num_nodes) * 4 // graph.num_nodes
        schedules.append(s)
    for batched, graph, s in zip(evaluate_many(graphs, schedules, hw, "latency"), graphs, schedules, strict=True):
        alone = evaluate_assignment(graph, s, hw, "latency")
        assert batched.keys() == alone.keys() and batched["valid"] == alone["valid"]
        for key, value in alone.items():
            if isinstance(value, float):
                assert batched[key] == pytest.approx(value, rel=3e-7), key
            elif isinstance(value, list):
                assert batched[key] == pytest.approx(value, rel=3e-7), key


def test_batched_rescoring_bad_inputs():
    from respect_jax.solvers.base import evaluate_many

    graphs = random_graphs(2, seed=1)
    with pytest.raises(ValueError, match="2 graphs but 1 assignments"):
        evaluate_many(graphs, [np.zeros(graphs[0].num_nodes, np.int64)], make_hw(3))
    with pytest.raises(ValueError, match="assignment has shape"):
        evaluate_many(graphs, [np.zeros(graphs[0].num_nodes, np.int64), np.zeros(1, np.int64)], make_hw(3))


def test_run_solver_many_documents_are_the_one_graph_documents(graphs):
    """The result documents of the batched form (scored by evaluate_many) are those of run_solver, timing aside."""
    hw = make_hw(3)
    batched = run_solver_many("policy", graphs, hw, "paper", 1.0, batch_size=4, decoding="greedy")
    for graph, doc in zip(graphs, batched, strict=True):
        alone = run_solver("policy", graph, hw, "paper", 1.0, decoding="greedy")
        for key in ("graph", "num_nodes", "solver", "objective_name", "assignment", "hardware", "lam", "optimal"):
            assert doc[key] == alone[key], key
        assert doc["objective"] == pytest.approx(alone["objective"], rel=3e-7)
        assert doc["metrics"].keys() == alone["metrics"].keys()


def test_batch_size_none_is_the_order_policys_own_default(graphs, monkeypatch):
    """run_solver_many without batch_size (respect-schedule's default, batch_size=null) batches the order policy's
    forward passes by its own MANY_BATCH_SIZE; an explicit one is passed through; the schedules are the same."""
    from respect_jax.policy import order_solver

    seen, real = [], order_solver.forward_plan
    monkeypatch.setattr(order_solver, "forward_plan", lambda gs, size: seen.append(size) or real(gs, size))
    hw = make_hw(3)
    default = run_solver_many("policy", graphs, hw, "paper", 1.0, decoding="greedy")
    explicit = run_solver_many("policy", graphs, hw, "paper", 1.0, batch_size=3, decoding="greedy")
    assert seen == [order_solver.MANY_BATCH_SIZE, 3] and order_solver.MANY_BATCH_SIZE == 32
    assert [d["assignment"] for d in default] == [d["assignment"] for d in explicit]


# ----------------------------------------------------------------------------- sampled orders


def test_repeated_sampled_orders_are_split_once_and_change_nothing(monkeypatch):
    """decode_scores splits each distinct order once: on a chain (one topological order) 16 samples cost one split,
    and on a branchy graph the result is that of splitting every sampled order one at a time with contiguous_search
    (a reference loop here): same assignment, value and winning candidate."""
    import respect_jax.policy.order_split as split_mod
    from respect_jax.graphs import Graph
    from respect_jax.policy.order import decode_scores, order_from_scores
    from respect_jax.solvers.partitioners import contiguous_assignment, contiguous_search

    rows = []
    split_many = split_mod.split_many
    monkeypatch.setattr(split_mod, "split_many", lambda items, *a: rows.append(sum(len(o) for _, o in items))
                        or split_many(items, *a))
    n = 12
    chain = Graph("chain", np.arange(n) * 1000 + 10, np.full(n, 500), np.full(n, 10**6),
                  np.array([[i, i + 1] for i in range(n - 1)]))
    hw = make_hw(3)
    decode_scores(chain, hw, "paper", 1.0, np.random.default_rng(0).random(n), 16, 0.3, 0)
    assert rows == [1]
    for objective in ("paper", "latency"):
        for graph in random_graphs(4, seed=4, min_nodes=15, max_nodes=30):
            scores = np.random.default_rng(1).random(graph.num_nodes)
            got = decode_scores(graph, hw, objective, 0.7, scores, 16, 0.2, 7)
            noise_rng = np.random.default_rng(7)  # reference: split every sampled order, keep the first strictly best
            order = order_from_scores(graph, scores)
            cuts, value, _ = contiguous_search(graph, hw, objective, 0.7, order)
            best = (contiguous_assignment(graph, cuts, order), value, 0)
            for i in range(1, 17):
                noisy = scores.astype(np.float64) + 0.2 * noise_rng.standard_normal(graph.num_nodes)
                order = order_from_scores(graph, noisy)
                cuts, value, _ = contiguous_search(graph, hw, objective, 0.7, order)
                if value < best[1]:
                    best = (contiguous_assignment(graph, cuts, order), value, i)
            assert got[1] == best[1] and got[2] == best[2] and np.array_equal(got[0], best[0])


def test_vectorised_splits_are_contiguous_search_cut_for_cut():
    """split_many (many orders of many graphs in lockstep) returns, for every order, contiguous_search's cuts and
    value exactly: K from 1 to 8, memory caps from tight to loose, several lam, graphs below and above the size where
    contiguous_search switches to its sparse programmes (its zoom differs there)."""
    from respect_jax.graphs import GeneratorConfig, generate_dataset
    from respect_jax.policy.order import order_from_scores
    from respect_jax.policy.order_split import split_many
    from respect_jax.solvers.partitioners import DENSE_SPLIT_MAX_NODES, contiguous_search

    rng = np.random.default_rng(3)
    graphs = random_graphs(8, seed=9, min_nodes=2, max_nodes=40) + generate_dataset(
        GeneratorConfig(mode="arch", min_nodes=60, max_nodes=200), 3, 2)
    graphs += generate_dataset(GeneratorConfig(mode="respect", min_nodes=DENSE_SPLIT_MAX_NODES + 1,
                                               max_nodes=DENSE_SPLIT_MAX_NODES + 20), 1, 1)
    checked = 0
    for k in (1, 2, 3, 5, 8):
        for lam in (1.0, 0.25):
            hw = make_hw(k, sram_bytes=float(rng.choice([5e4, 6e5, 1e8])))
            items = [(g, [order_from_scores(g, rng.random(g.num_nodes)) for _ in range(3)] + [g.topological_order()])
                     for g in graphs]
            for objective in ("paper", "latency") if k in (1, 5) else ("paper",):
                for (graph, orders), got in zip(items, split_many(items, hw, objective, lam), strict=True):
                    for order, (cuts, value) in zip(orders, got, strict=True):
                        ref_cuts, ref_value, _ = contiguous_search(graph, hw, objective, lam, order)
                        assert (list(cuts), value) == (list(ref_cuts), ref_value), (graph.name, k, lam, objective)
                        checked += 1
    assert checked > 500


def test_min_max_crossing_is_the_exact_binary_search():
    """order_split.crossing (a guess by one searchsorted over all rows, checked exactly) is the first i <= j with
    prev[i] >= par[j] - par[i] that a plain per-entry search finds, on rows with zero-parameter runs, ties, and 1e16
    beside units (the guess is off by rounding there: the exact fallback runs), and min_max_memory is brute force's."""
    from respect_jax.policy.order_split import crossing, min_max_memory

    rng = np.random.default_rng(5)
    params = rng.lognormal(10, 4, (300, 40)) * (rng.random((300, 40)) < 0.6)
    params[:40] = np.round(params[:40] / 1e6)  # small integers: many ties
    params[40:80] = np.where(rng.random((40, 40)) < 0.3, 1e16, rng.integers(0, 4, (40, 40)))  # sums that round
    par = np.concatenate([np.zeros((300, 1)), np.cumsum(params, axis=1)], axis=1)
    prev = par - par[:, :1]
    for k in range(1, 4):
        star = crossing(prev, par)
        for r in list(range(0, 300, 7)) + list(range(40, 80)):
            for j in range(par.shape[1]):
                want = next(i for i in range(j + 1) if prev[r, i] >= par[r, j] - par[r, i])
                assert star[r, j] == want, (k, r, j)
        before = np.maximum(star - 1, 0)
        rows = np.arange(300)[:, None]
        prev = np.minimum(prev[rows, star], np.where(star >= 1, par - par[rows, before], np.inf))
    small = par[:20, :9]  # brute force over every split of 8 items into 3 segments
    for r, got in enumerate(min_max_memory(small, 3)):
        best = min(max(small[r, a] - small[r, 0], small[r, b] - small[r, a], small[r, 8] - small[r, b])
                   for a in range(9) for b in range(a, 9))
        assert got == best


def test_single_order_groups_take_the_one_order_programme(monkeypatch):
    """split_many (paper) with items of one and of several orders per node count: groups of fewer than PAPER_MIN_ROWS
    rows take contiguous_search, the others the lockstep search; every result is contiguous_search's, in place."""
    from respect_jax.policy import order_split
    from respect_jax.policy.order import order_from_scores
    from respect_jax.solvers.partitioners import contiguous_search

    rng = np.random.default_rng(6)
    graphs = random_graphs(5, seed=11, min_nodes=5, max_nodes=40)
    graphs = [g for i, g in enumerate(graphs) if g.num_nodes not in {h.num_nodes for h in graphs[:i]}]
    items = [(g, [order_from_scores(g, rng.random(g.num_nodes)) for _ in range(1 + 2 * (i % 2))])
             for i, g in enumerate(graphs)]
    lockstep = []
    search = order_split.paper_search
    monkeypatch.setattr(order_split, "paper_search", lambda par, *a: lockstep.append(len(par)) or search(par, *a))
    hw = make_hw(3)
    got = order_split.split_many(items, hw, "paper", 1.0)
    assert sorted(lockstep) == sorted(len(o) for _, o in items if len(o) >= order_split.PAPER_MIN_ROWS)
    assert 0 < len(lockstep) < len(items)
    for (graph, orders), results in zip(items, got, strict=True):
        for order, (cuts, value) in zip(orders, results, strict=True):
            assert (list(cuts), value) == tuple(contiguous_search(graph, hw, "paper", 1.0, order)[:2])


def test_vectorised_latency_split_is_contiguous_search_cut_for_cut(monkeypatch):
    """latency_search (the latency programme of many orders at once, bisection on the float bit patterns) returns
    contiguous_search's value and cuts exactly for every order: K from 1 to 8, tight to loose SRAM (spills), no stage
    overhead too, graphs below the dense programmes' size (last feasible start) and above it (first); split_many takes
    it for a graph above that size with LATENCY_MIN_ROWS orders or more."""
    from respect_jax.graphs import GeneratorConfig, generate_dataset
    from respect_jax.policy import order_split
    from respect_jax.policy.order import order_from_scores
    from respect_jax.policy.order_split import latency_search, macs_rows, segment_rows, split_many
    from respect_jax.solvers.partitioners import DENSE_SPLIT_MAX_NODES, contiguous_search

    rng = np.random.default_rng(5)
    graphs = random_graphs(6, seed=4, min_nodes=1, max_nodes=40) + generate_dataset(
        GeneratorConfig(mode="arch", min_nodes=60, max_nodes=150), 2, 3)
    large = generate_dataset(GeneratorConfig(mode="respect", min_nodes=DENSE_SPLIT_MAX_NODES + 1,
                                             max_nodes=DENSE_SPLIT_MAX_NODES + 30), 1, 4)
    checked = 0
    for k in (1, 2, 3, 5, 8):
        for overrides in ({"sram_bytes": float(rng.choice([5e4, 6e5, 1e8]))}, {"stage_overhead_s": 0.0}):
            hw = make_hw(k, **overrides)
            for graph in graphs + large:
                orders = np.stack([order_from_scores(graph, rng.random(graph.num_nodes)) for _ in range(3)]
                                  + [graph.topological_order()])
                par, cut_b = segment_rows(graph, hw, orders)
                cuts, values = latency_search(par, macs_rows(graph, orders), cut_b, hw,
                                              last_start=graph.num_nodes <= DENSE_SPLIT_MAX_NODES)
                for order, c, v in zip(orders, cuts.tolist(), values.tolist(), strict=True):
                    ref_cuts, ref_value, _ = contiguous_search(graph, hw, "latency", 1.0, order)
                    assert (c, v) == (list(ref_cuts), ref_value), (graph.name, k, overrides)
                    checked += 1
    assert checked == 360
    calls = []
    search = order_split.latency_search
    monkeypatch.setattr(order_split, "latency_search", lambda *a, **o: calls.append(1) or search(*a, **o))
    hw = make_hw(4)
    orders = [order_from_scores(large[0], rng.random(large[0].num_nodes)) for _ in range(order_split.LATENCY_MIN_ROWS)]
    got = split_many([(large[0], orders), (graphs[-1], [graphs[-1].topological_order()])], hw,
                     "latency", 1.0)
    assert calls == [1]
    for order, (cuts, value) in zip(orders, got[0], strict=True):
        assert (list(cuts), value) == tuple(contiguous_search(large[0], hw, "latency", 1.0, order)[:2])


def test_prepared_kahn_sort_is_the_graph_module_sort():
    """The order policy's Kahn sort (successors built once per graph, reused for every sampled order) gives the
    order of graphs.graph.topological_order_kahn for the same priorities, ties in the scores included."""
    from respect_jax.graphs.graph import topological_order_kahn
    from respect_jax.policy.order import _Kahn, order_from_scores

    rng = np.random.default_rng(2)
    for graph in random_graphs(10, seed=6, min_nodes=1, max_nodes=50):
        kahn = _Kahn(graph)
        for scores in (rng.random(graph.num_nodes), rng.integers(0, 3, graph.num_nodes).astype(np.float32)):
            priority = rng.permutation(graph.num_nodes)
            assert kahn(priority) == topological_order_kahn(graph, priority)
            got = order_from_scores(graph, scores, kahn)
            assert np.array_equal(got, order_from_scores(graph, scores))
            spec = graph.topological_order()  # the reference: priority by (score, SPEC position)
            key = {int(v): (float(scores[i]), i) for i, v in enumerate(spec)}
            ranks = np.empty(graph.num_nodes, np.int64)
            ranks[sorted(range(graph.num_nodes), key=lambda v: key[v])] = np.arange(graph.num_nodes)
            assert got.tolist() == topological_order_kahn(graph, ranks)


@pytest.mark.parametrize("lockstep_from", [0, 10**9])
def test_lockstep_kahn_rows_are_heap_kahn_orders(lockstep_from, monkeypatch):
    """kahn_rows (every row of graphs with one node count stepped together, or one heap sort per row below
    LOCKSTEP_MIN_ROWS rows) gives topological_order_kahn's order for each row's ranks, on graphs of equal and of
    different sizes in one call."""
    from respect_jax.graphs import GeneratorConfig, generate_dataset
    from respect_jax.graphs.graph import topological_order_kahn
    from respect_jax.policy import order as order_module
    from respect_jax.policy.order import kahn_rows

    monkeypatch.setattr(order_module, "LOCKSTEP_MIN_ROWS", lockstep_from)

    rng = np.random.default_rng(8)
    graphs = generate_dataset(GeneratorConfig(mode="respect", min_nodes=20, max_nodes=20), 3, 1)
    graphs += random_graphs(4, seed=2, min_nodes=1, max_nodes=30)
    ranks = [np.stack([rng.permutation(g.num_nodes) for _ in range(int(rng.integers(1, 5)))]) for g in graphs]
    for graph, r, orders in zip(graphs, ranks, kahn_rows(graphs, ranks), strict=True):
        assert orders.shape == r.shape
        for row, order in zip(r, orders, strict=True):
            assert order.tolist() == topological_order_kahn(graph, row)


def test_local_search_compiles_apart_once_per_shape(graphs, monkeypatch):
    """With local_search, the order policy compiles local search ahead once per new (shape, K, objective, moves)
    (compile_polish), reported in compile_s, so that no graph's schedule time holds the compilation."""
    import respect_jax.policy.order_solver as order_solver

    calls = []
    polish_many, compile_polish = order_solver.polish_many, order_solver.compile_polish
    monkeypatch.setattr(order_solver, "polish_many",
                        lambda *a, **o: calls.append(("polish", [g.name for g in a[0]])) or polish_many(*a, **o))
    monkeypatch.setattr(order_solver, "compile_polish",
                        lambda *a, **o: calls.append(("compile", a[0].name)) or compile_polish(*a, **o))
    hw = make_hw(3)
    small = [graphs[0], graphs[2]]  # one padded shape
    first = run_solver_many("policy", small, hw, "paper", 1.0, batch_size=2, decoding="greedy", local_search=7)
    assert calls == [("compile", small[0].name), ("polish", [small[0].name, small[1].name])], \
        "one compilation, then the polish of both graphs"
    assert all(r["info"]["compile_s"] > 0 and r["info"]["decoding"] == "greedy+ls" for r in first)
    calls.clear()
    again = run_solver("policy", small[1], hw, "paper", 1.0, decoding="greedy", local_search=7)
    assert calls == [("polish", [small[1].name])] and again["assignment"] == first[1]["assignment"]


def test_decoding_units_in_threads_schedule_as_one_unit(graphs, monkeypatch):
    """The batched order policy decodes units of forward batches (_decode_units: at least DECODE_ROWS orders each)
    in worker threads: every unit size and thread count gives each graph the schedule of one unit in one thread,
    and the units hold every graph once, in order."""
    import respect_jax.policy.order_solver as order_solver

    hw = make_hw(3)
    options = {"samples": 4, "noise": 0.2, "local_search": 20, "ls_moves": "single", "ls_screen": 4, "ls_escapes": 2}
    whole = order_solver._many(graphs, hw, "latency", 1.0, batch_size=2, threads=1, **options)
    pending = [([0, 2], None), ([4], None), ([1, 3], None)]
    monkeypatch.setattr(order_solver, "DECODE_ROWS", 10)  # 2 graphs x 5 orders fill a unit
    assert [[c for c, _ in u] for u in order_solver._decode_units(pending, 5)] == [[[0, 2]], [[4], [1, 3]]]
    monkeypatch.setattr(order_solver, "DECODE_ROWS", 1)  # one unit per forward batch: three units
    assert len(order_solver._decode_units(pending, 5)) == 3
    for threads in (1, 3):
        split = order_solver._many(graphs, hw, "latency", 1.0, batch_size=2, threads=threads, **options)
        assert all(r.info["threads"] == threads for r in split)
        for a, b in zip(whole, split, strict=True):
            assert np.array_equal(a.assignment, b.assignment) and a.info["candidate"] == b.info["candidate"]
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        order_solver._many(graphs, hw, "latency", 1.0, threads=0)


def test_latency_best_is_the_first_least_split_of_every_order():
    """best_latency_splits / latency_best (one shared bisection, rows that cannot reach the bottleneck tried leave it)
    give the row, cuts and value of the first strict minimum of contiguous_search over the orders: K from 1 to 8,
    tight to loose SRAM, no stage overhead, graphs below and above the dense programmes' size, rows that tie (a
    repeated order) and a better row after row 0; decode_many picks the same schedule and winner with and without
    it (LATENCY_BEST_ONLY)."""
    from respect_jax.graphs import GeneratorConfig, generate_dataset
    from respect_jax.policy import order as order_mod
    from respect_jax.policy.order import order_from_scores
    from respect_jax.policy.order_split import best_latency_splits
    from respect_jax.solvers.partitioners import DENSE_SPLIT_MAX_NODES, contiguous_search

    rng = np.random.default_rng(8)
    graphs = random_graphs(5, seed=6, min_nodes=2, max_nodes=40) + generate_dataset(
        GeneratorConfig(mode="arch", min_nodes=60, max_nodes=150), 2, 5)
    graphs += generate_dataset(GeneratorConfig(mode="respect", min_nodes=DENSE_SPLIT_MAX_NODES + 1,
                                               max_nodes=DENSE_SPLIT_MAX_NODES + 30), 1, 6)
    checked = not_first = 0
    for k in (1, 2, 3, 5, 8):
        for overrides in ({"sram_bytes": float(rng.choice([5e4, 6e5, 1e8]))}, {"stage_overhead_s": 0.0}):
            hw = make_hw(k, **overrides)
            for graph in graphs:
                orders = [order_from_scores(graph, rng.random(graph.num_nodes)) for _ in range(9)]
                orders[4] = orders[0]  # a tie with row 0
                orders.append(graph.topological_order())
                ref = [contiguous_search(graph, hw, "latency", 1.0, o)[:2] for o in orders]
                want = min(range(len(orders)), key=lambda c: (ref[c][1], c))
                got = best_latency_splits([(graph, orders)], hw, 1.0)[0]
                assert (got[0], list(got[1]), got[2]) == (want, list(ref[want][0]), ref[want][1]), (graph.name, k)
                checked += 1
                not_first += want > 0
    assert checked == 80 and not_first >= 10
    graph = graphs[-1]
    scores = rng.random(graph.num_nodes)
    hw = make_hw(4)
    new = order_mod.decode_many([graph], hw, "latency", 1.0, [scores], 16, 0.3, [2])[0]
    old_flag, order_mod.LATENCY_BEST_ONLY = order_mod.LATENCY_BEST_ONLY, False
    try:
        old = order_mod.decode_many([graph], hw, "latency", 1.0, [scores], 16, 0.3, [2])[0]
    finally:
        order_mod.LATENCY_BEST_ONLY = old_flag
    assert np.array_equal(new[0], old[0]) and new[1:] == old[1:]
