"""solver=auto's rule for the crossing bound's finer chain passes (issue 27, session 36): they run only at
K >= ``bound_refine_min_stages`` on graphs that cannot spill, and only once no fast member runs or can start."""

from __future__ import annotations

import time

import pytest
from conftest import make_hw, random_graphs
from test_oracles import brute_force, tiny_graphs

import respect_jax.solvers.auto as auto
from respect_jax.solvers import bounds, run_solver
from respect_jax.solvers.bounds import Deadline, no_spill

RTOL = 1e-9


def _no_spill_hw(graph, stages: int, **overrides):
    hw = make_hw(stages, **overrides)
    return make_hw(stages, sram_bytes=float(hw.param_bytes * graph.params.sum()), **overrides)


def _spy(monkeypatch, seen: list, gate: list | None = None):
    """crossing_lower_bound as it is, recording (paper_refine_max, latency_refine_max, refine_when given) per call;
    with ``gate``, it first waits for refine_when (bounds.wait_until) and records (opened, when)."""
    real = auto.crossing_lower_bound

    def spy(*args, **kwargs):
        when = kwargs.get("refine_when")
        seen.append((kwargs.get("paper_refine_max"), kwargs.get("latency_refine_max"), when is not None))
        if gate is not None and when is not None:
            opened = bounds.wait_until(when, Deadline(time.perf_counter() + args[5], kwargs.get("stop")))
            gate.append((opened, time.perf_counter()))
        return real(*args, **kwargs)

    monkeypatch.setattr(auto, "crossing_lower_bound", spy)


@pytest.mark.parametrize(("stages", "spill", "options", "want"), [
    (6, False, {}, (72, 63, True)),  # the defaults: K >= 6, no spill
    (8, False, {}, (72, 63, True)),
    (4, False, {}, (None, None, False)),  # K < 6: the bound's module defaults, no finer pass, no wait
    (6, True, {}, (None, None, False)),  # a graph that can spill
    (6, True, {"bound_refine_spill": True}, (72, 63, True)),
    (3, False, {"bound_refine_min_stages": None}, (72, 63, True)),
    (8, False, {"bound_refine_after_members": False}, (72, 63, True)),  # its refine_when is then always True
    (8, False, {"bound_latency_refine_max": None, "bound_paper_refine_max": 24}, (24, None, True)),
])
def test_the_finer_passes_reach_the_bound_only_where_the_rule_allows(stages, spill, options, want, monkeypatch):
    seen: list = []
    _spy(monkeypatch, seen)
    graph = random_graphs(1, seed=8, min_nodes=40, max_nodes=40)[0]
    hw = make_hw(stages, sram_bytes=1.0) if spill else _no_spill_hw(graph, stages)
    assert no_spill(graph, hw) is not spill
    run_solver("auto", graph, hw, "latency", members=["contiguous"], exact="none", progress=False,
               time_budget_s=1.0, lattice_downsets=0, **options)
    assert seen == [want]


def test_the_finer_passes_wait_for_a_member_running_in_turn_past_fast_share(monkeypatch):
    """The bound starts at once (a small graph: no rebalancing); a member run in turn (a stub for gumbel: 1 s of sleep)
    starts before ``fast_share`` of the budget and ends after it: the finer passes' gate opens only after it ended.
    Fails when the gate ignores the member in turn (it opened at fast_share, 0.3 s) or does not wait at all."""
    real = auto.get_solver
    ran: list = []

    def slow_gumbel(*args, **kwargs):
        t0 = time.perf_counter()
        time.sleep(1.0)
        ran.append((t0, time.perf_counter()))
        return real("contiguous")(*args[:4])

    monkeypatch.setattr(auto, "get_solver", lambda name: slow_gumbel if name == "gumbel" else real(name))
    monkeypatch.setattr(auto, "gumbel_need_s", lambda *args: (0.0, "stub"))
    seen: list = []
    gate: list = []
    _spy(monkeypatch, seen, gate)
    graph = random_graphs(1, seed=8, min_nodes=40, max_nodes=40)[0]
    hw = _no_spill_hw(graph, 6)
    result = run_solver("auto", graph, hw, "paper", members=["contiguous", "gumbel"], polish_moves=0, exact="none",
                        progress=False, time_budget_s=3.0, fast_share=0.1, lattice_downsets=0,
                        member_options={"gumbel": {"chunk_steps": 0}})
    assert seen == [(72, 63, True)]
    assert len(ran) == 1 and len(gate) == 1, (ran, gate)
    (opened, at), (_, member_end) = gate[0], ran[0]
    assert opened and at >= member_end, (at - member_end)
    assert result["info"]["portfolio"]["bound"].get("finer_from_s") is not None


@pytest.mark.parametrize("objective", ["latency", "paper"])
def test_auto_with_the_finer_passes_stays_below_the_brute_force_optimum(objective, monkeypatch):
    """With the rule on at K = 3 (``bound_refine_min_stages`` 0) on small graphs that cannot spill, auto's certified
    bound stays at or below the brute-force optimum and its schedule is that optimum or above it."""
    seen: list = []
    _spy(monkeypatch, seen)
    for graph in [g for g in tiny_graphs() if g.name in ("tiny_respect4", "tiny_respect6")]:
        hw = _no_spill_hw(graph, 3, link_bw=2.35e6)
        best = brute_force(graph, hw)[objective]
        result = run_solver("auto", graph, hw, objective, members=["contiguous"], exact="none", progress=False,
                            time_budget_s=3.0, lattice_downsets=0, bound_refine_min_stages=0)
        assert result["info"]["lower_bound"] <= best * (1 + RTOL) + 1e-15, graph.name
        assert result["objective"] >= best * (1 - RTOL), graph.name
    assert seen and all(s == (72, 63, True) for s in seen), seen


@pytest.mark.parametrize(("name", "value", "message"), [
    ("bound_refine_min_stages", -1, "bound_refine_min_stages must be an integer >= 0 or null"),
    ("bound_refine_min_stages", 2.5, "bound_refine_min_stages must be an integer >= 0 or null"),
    ("bound_refine_after_members", "yes", "bound_refine_after_members must be true or false"),
    ("bound_refine_spill", 1, "bound_refine_spill must be true or false"),
])
def test_auto_rejects_a_bad_bound_refine_rule_option_in_one_line(name, value, message):
    with pytest.raises(ValueError, match=message) as err:
        run_solver("auto", random_graphs(1, seed=8, min_nodes=20, max_nodes=20)[0], make_hw(2), "latency",
                   progress=False, **{name: value})
    assert "\n" not in str(err.value)
