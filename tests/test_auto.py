"""``solver=auto`` (the portfolio with a certified gap) and the analytic bounds, against brute force."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import make_hw, random_graphs
from test_oracles import EDGE_CASES, brute_force, tiny_graphs

from respect_jax.graphs import GeneratorConfig, generate_numpy
from respect_jax.reference import reference_objective
from respect_jax.solvers import run_solver
from respect_jax.solvers.bounds import analytic_lower_bound

OBJECTIVES = ("paper", "latency")
FAST = dict(members=["contiguous", "gumbel"], member_options={"gumbel": {"steps": 10, "samples": 8}}, progress=False)
#: the members and the exact solver under test, not the downset programme's certificate (tests/test_bounds_lattice.py)
NO_LATTICE = dict(lattice_downsets=0)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_analytic_bounds_never_exceed_the_brute_force_optimum(k):
    graphs = tiny_graphs() + list(EDGE_CASES.values())
    for graph in graphs:
        hw = make_hw(k)
        best = brute_force(graph, hw, lam=0.7)
        for objective in OBJECTIVES:
            bound = analytic_lower_bound(graph, hw, objective, lam=0.7)
            assert 0.0 <= bound <= best[objective] * (1 + 1e-12) + 1e-15, (graph.name, objective, k)


def test_analytic_bounds_are_tight_where_they_must_be():
    """One stage: the paper bound is the whole memory (the optimum); the latency bound counts the spill."""
    graph = EDGE_CASES["huge_node"]
    hw = make_hw(1)
    for objective in OBJECTIVES:
        best = brute_force(graph, hw)[objective]
        assert analytic_lower_bound(graph, hw, objective) == pytest.approx(best, rel=1e-12)


@pytest.mark.parametrize("graph", tiny_graphs()[:6], ids=lambda g: g.name)
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_auto_returns_the_proven_optimum_on_tiny_graphs(graph, objective):
    hw = make_hw(3)
    best = brute_force(graph, hw)[objective]
    result = run_solver("auto", graph, hw, objective, time_budget_s=20.0, **FAST)
    exact = reference_objective(graph, result["assignment"], hw, objective)
    assert exact == pytest.approx(best, rel=1e-9, abs=1e-12)
    assert result["optimal"] is True and 0.0 <= result["gap"] <= 1e-6
    info = result["info"]
    assert info["lower_bound"] <= best * (1 + 1e-6) + 1e-15
    assert info["certified_gap"] == result["gap"]


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_auto_is_never_worse_than_its_members_and_reports_each(objective):
    hw = make_hw(4)
    for graph in random_graphs(4, seed=5, min_nodes=30, max_nodes=60):
        result = run_solver("auto", graph, hw, objective, time_budget_s=600.0, exact="none", **FAST, **NO_LATTICE)
        portfolio = result["info"]["portfolio"]
        assert set(portfolio) - {"bound"} == {"contiguous", "contiguous+ls", "gumbel", "exact"}
        for name in ("contiguous", "contiguous+ls", "gumbel"):
            assert result["objective"] <= portfolio[name]["objective"] * (1 + 1e-6)
        # independently: the members run alone (the contiguous split before polishing)
        alone = run_solver("contiguous", graph, hw, objective)["objective"]
        assert portfolio["contiguous"]["objective"] == pytest.approx(alone, rel=1e-6)
        assert portfolio["contiguous+ls"]["objective"] <= alone * (1 + 1e-6)  # local search never worsens
        assert result["info"]["winner"] in ("contiguous", "contiguous+ls", "gumbel")
        assert 0.0 <= result["gap"] < 1.0
        best_member = min(portfolio[n]["objective"] for n in ("contiguous", "contiguous+ls", "gumbel"))
        assert result["objective"] == pytest.approx(best_member, rel=1e-6)


def test_auto_respects_its_budget_and_bounds_the_optimum():
    """A graph CP-SAT does not prove in 2 s: auto stops at the budget (slack for start-up and the
    last evaluation), with a finite certified gap whose bound is below the proven optimum of a longer MILP."""
    rng = np.random.default_rng(11)
    graph = generate_numpy(GeneratorConfig(mode="respect", min_nodes=120, max_nodes=120), rng, name="r120")
    hw = make_hw(4)
    # warm-up: compiles the local search of this size bucket (a member running at the deadline is not interrupted)
    run_solver("auto", graph, hw, "paper", time_budget_s=600.0, members=["contiguous"], exact="none", progress=False)
    start = time.perf_counter()
    result = run_solver("auto", graph, hw, "paper", time_budget_s=2.0, members=["contiguous"], progress=False,
                        **NO_LATTICE)
    elapsed = time.perf_counter() - start
    assert elapsed <= 2.0 + 1.5, elapsed
    assert result["info"]["elapsed_s"] <= 2.0 + 1.0
    assert "cpsat" in result["info"]["portfolio"]
    assert 0.0 <= result["gap"] < 1.0
    bound = result["info"]["lower_bound"]
    milp = run_solver("milp", graph, hw, "paper", time_limit_s=20.0)
    assert bound <= milp["objective"] * (1 + 1e-6)
    assert bound <= result["objective"]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"time_budget_s": 0.0}, "time_budget_s must be > 0"),
        ({"members": ["contiguous", "simplex"]}, "unknown member"),
        ({"exact": "gurobi"}, "exact must be"),
        ({"member_options": {"gumbel": {"stepz": 3}}}, "unknown option"),
        ({"member_options": {"magic": {}}}, "not a member"),
    ],
)
def test_auto_rejects_bad_options_in_one_line(options, message):
    graph = tiny_graphs()[0]
    with pytest.raises(ValueError, match=message) as err:
        run_solver("auto", graph, make_hw(2), "paper", progress=False, **options)
    assert "\n" not in str(err.value)


def test_auto_abandons_a_member_still_running_at_the_deadline(monkeypatch):
    """A member that would overrun (here: sleeps 4 s) is abandoned at the deadline; the call ends within the slack."""
    import respect_jax.solvers.auto as auto

    real = auto.get_solver

    def slow_gumbel(*args, **kwargs):
        time.sleep(4.0)
        return real("contiguous")(*args[:4])

    monkeypatch.setattr(auto, "get_solver", lambda name: slow_gumbel if name == "gumbel" else real(name))
    monkeypatch.setattr(auto, "gumbel_need_s", lambda *args: (0.0, "stub"))  # started whatever its estimate
    graph = random_graphs(1, seed=8, min_nodes=40, max_nodes=40)[0]
    # chunk_steps=0: one call that never looks at the stop signal (as a JAX member)
    options = dict(members=["contiguous", "gumbel"], polish_moves=0, exact="none", progress=False,
                   member_options={"gumbel": {"chunk_steps": 0}}, **NO_LATTICE)
    run_solver("auto", graph, make_hw(3), "paper", time_budget_s=0.5, **options)  # compiles the shared evaluator
    start = time.perf_counter()
    result = run_solver("auto", graph, make_hw(3), "paper", time_budget_s=1.5, **options)
    elapsed = time.perf_counter() - start
    assert elapsed <= 1.5 + 0.5, elapsed
    portfolio = result["info"]["portfolio"]
    assert "abandoned" in portfolio["gumbel"] and result["info"]["winner"] == "contiguous"
    assert result["objective"] == pytest.approx(portfolio["contiguous"]["objective"])


def _layered(nodes: int, seed: int):
    cfg = GeneratorConfig(mode="layered", min_nodes=nodes, max_nodes=nodes, min_levels=6, max_levels=12, max_preds=8,
                          param_scale=1000.0, output_scale=1000.0, edges_per_node=2.5)
    return generate_numpy(cfg, np.random.default_rng(seed), name=f"layered{nodes}")


def test_stop_signal_ends_a_cpsat_search_and_its_model_build():
    """Set during the search, the signal ends it at once (not at its 60 s limit); set before, the build stops and the
    hint comes back unchanged."""
    import threading

    from respect_jax.solvers.cpsat import solve_cpsat
    from respect_jax.solvers.stopping import StopSignal

    graph, hw = _layered(300, seed=2), make_hw(8)
    # warm-up (OR-tools' first import and model parse): the timed search below must be past its build at 1.5 s on a
    # loaded machine too
    solve_cpsat(_layered(20, seed=2), hw, "latency", time_limit_s=5.0)
    signal = StopSignal()
    start = time.perf_counter()
    threading.Timer(1.5, signal.set).start()
    result = solve_cpsat(graph, hw, "latency", time_limit_s=60.0, stop=signal)
    assert time.perf_counter() - start <= 1.5 + 1.5
    assert result.info["status"] in ("FEASIBLE", "UNKNOWN") and not result.optimal
    hint = run_solver("contiguous", graph, hw, "latency")["assignment"]
    stopped = solve_cpsat(graph, hw, "latency", time_limit_s=60.0, hint=np.asarray(hint), stop=lambda: True)
    assert stopped.info["status"] == "STOPPED" and stopped.assignment.tolist() == hint


def test_auto_stops_every_worker_by_its_budget():
    """A 500-node graph CP-SAT does not prove in 3 s: auto returns within the budget + 1 s, with no worker thread
    left running (the exact solver, the bound and the chunked local search look at one stop signal), and its
    result is never worse than its members."""
    import threading

    graph, hw = _layered(500, seed=4), make_hw(4)
    options = dict(members=["contiguous"], polish_moves=50, progress=False, **NO_LATTICE)
    # warm-up: compiles the local search and the shared evaluator of this size (one JAX call is never interrupted)
    run_solver("auto", graph, hw, "latency", time_budget_s=600.0, exact="none", crossing_bound=False, **options)
    start = time.perf_counter()
    result = run_solver("auto", graph, hw, "latency", time_budget_s=3.0, **options)
    elapsed = time.perf_counter() - start
    alive = [t.name for t in threading.enumerate() if t.name.startswith("auto-")]
    info = result["info"]
    assert info["elapsed_s"] <= 3.0 + 1.0 and elapsed <= 3.0 + 1.0, (info["elapsed_s"], elapsed)
    assert alive == [] and info["running_after_return"] == [], alive
    portfolio = info["portfolio"]
    assert {"cpsat", "bound", "contiguous", "contiguous+ls"} <= set(portfolio)
    assert "abandoned" not in portfolio["cpsat"] and "abandoned" not in portfolio["bound"]
    for name in ("contiguous", "contiguous+ls", "cpsat"):
        assert result["objective"] <= portfolio[name]["objective"] * (1 + 1e-6)
    assert 0.0 < result["gap"] < 1.0


def test_gumbel_member_stops_in_chunks_within_a_small_budget():
    """A Gumbel run far longer than the budget (100,000 steps), compiled beforehand: inside auto it runs in chunks
    that look at the stop signal, so the call returns within the budget + 1 s with the member's best schedule so
    far and no thread left running (in one compiled call it would still be running after the return)."""
    import threading

    graph, hw = random_graphs(1, seed=12, min_nodes=60, max_nodes=60)[0], make_hw(4)
    member = {"steps": 100_000, "samples": 8, "local_search": 20}
    # warm-up: compiles this shape's chunk and local-search programmes (a compilation is never interrupted)
    run_solver("gumbel", graph, hw, "paper", steps=10, samples=8, local_search=20, chunk_steps=10)
    options = dict(members=["contiguous", "gumbel"], polish_moves=0, exact="none", crossing_bound=False,
                   progress=False, member_options={"gumbel": member}, **NO_LATTICE)
    start = time.perf_counter()
    result = run_solver("auto", graph, hw, "paper", time_budget_s=3.0, **options)
    elapsed = time.perf_counter() - start
    alive = [t.name for t in threading.enumerate() if t.name == "auto-gumbel"]
    info = result["info"]
    entry = info["portfolio"]["gumbel"]
    assert elapsed <= 3.0 + 1.0 and alive == [] and info["running_after_return"] == [], (elapsed, alive)
    assert "objective" in entry and 1 <= entry["chunks_run"] < entry["chunks"], entry
    assert result["objective"] <= entry["objective"] * (1 + 1e-6)
    exact = reference_objective(graph, result["assignment"], hw, "paper")
    assert exact == pytest.approx(result["objective"], rel=1e-6)


def test_gumbel_member_is_not_started_when_it_cannot_finish():
    """Not compiled in this process (an option set no other test uses), the member's estimate (a compilation of
    seconds) does not fit a 2 s budget: it is skipped with its estimate, and the call keeps its budget."""
    from respect_jax.solvers.auto import gumbel_need_s

    graph, hw = random_graphs(1, seed=13, min_nodes=70, max_nodes=70)[0], make_hw(3)
    member = {"steps": 30, "samples": 7, "local_search": 13}
    need, _ = gumbel_need_s(graph, 3, {**member, "chunk_steps": 10}, 0)
    assert need > 2.0
    options = dict(members=["contiguous", "gumbel"], polish_moves=0, exact="none", crossing_bound=False,
                   progress=False, member_options={"gumbel": member}, **NO_LATTICE)
    start = time.perf_counter()
    result = run_solver("auto", graph, hw, "latency", time_budget_s=2.0, **options)
    assert time.perf_counter() - start <= 2.0 + 1.0
    assert "estimated" in result["info"]["portfolio"]["gumbel"]["skipped"]


def test_the_exact_solver_aims_earlier_on_large_graphs():
    """The exact solver's own limit ends ``exact_lead_s`` before auto's deadline: STOP_LEAD_S on small graphs,
    EXACT_LEAD_S_PER_NODE per node on large ones (10k nodes: 1.5 s), never more than a tenth of the budget; and auto
    passes CP-SAT exactly that deadline (a 40-node graph at 0.02 s per node: 0.8 s before auto's)."""
    import respect_jax.solvers.auto as auto

    assert auto.exact_lead_s(40, 60.0) == auto.STOP_LEAD_S
    assert auto.exact_lead_s(10_000, 60.0) == pytest.approx(10_000 * auto.EXACT_LEAD_S_PER_NODE) == pytest.approx(1.5)
    assert auto.exact_lead_s(5_000, 60.0) == pytest.approx(0.75)
    assert auto.exact_lead_s(10_000, 10.0) == pytest.approx(1.0)  # a tenth of the budget at most
    assert auto.exact_lead_s(40, 1.0) == pytest.approx(0.1)
    real, seen = auto.get_solver, {}

    def cpsat_seen(graph, hw, objective, lam, **options):
        seen.update(deadline=options["deadline"], at=time.perf_counter())
        return real("contiguous")(graph, hw, objective, lam)

    graph = random_graphs(1, seed=8, min_nodes=40, max_nodes=40)[0]
    start = time.perf_counter()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(auto, "get_solver", lambda name: cpsat_seen if name == "cpsat" else real(name))
        mp.setattr(auto, "EXACT_LEAD_S_PER_NODE", 0.02)
        run_solver("auto", graph, make_hw(3), "paper", time_budget_s=10.0, members=["contiguous"], polish_moves=0,
                   exact="cpsat", progress=False, crossing_bound=False, **NO_LATTICE)
    # auto's deadline is its start + 10 s (taken inside the call, after ``start``): the solver's is 0.8 s before it
    assert start + 10.0 - 0.8 <= seen["deadline"] <= seen["at"] + 10.0 - 0.8
