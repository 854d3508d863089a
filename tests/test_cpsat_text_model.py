"""``solvers/cpsat.py``'s model, written as protobuf text from NumPy arrays (session 32), against the scalar
``cp_model`` calls it replaced (sessions 10-31, kept here verbatim as the reference): the same variables, constraints
in order, coefficients, objective and hint, so the same CP-SAT answer; and the text-built model's solve against brute
force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import make_hw, random_graphs, random_valid_schedule

from respect_jax.graphs import GeneratorConfig, generate_numpy
from respect_jax.reference import reference_objective
from respect_jax.solvers import cpsat
from respect_jax.solvers.common import structure

# --- the scalar cp_model build of sessions 10-31 (respect_jax/solvers/cpsat.py before session 32), verbatim but for
# the stop signal, the returned tuple and the names ---

def _crossing_literals(model, z: list, st, out: np.ndarray, m: int, stop=None) -> tuple[dict, dict]:
    """``cross[u, j]`` literals (module docstring) and the ``y`` Booleans among them."""
    cross, y_vars = {}, {}
    for u in range(st.num_nodes):
        if out[u] == 0:
            continue
        for j in range(m):
            if st.sink[u]:
                cross[u, j] = ~z[u][j]
                continue
            y = model.new_bool_var(f"y{u}_{j}")
            for v in st.succs[u]:
                model.add_bool_or([~z[v][j], z[u][j], y])
            model.add_implication(y, ~z[u][j])
            model.add_bool_or([~y] + [z[v][j] for v in st.succs[u]])
            cross[u, j] = y
            y_vars[u, j] = y
    return cross, y_vars


def _stage_sums(z: list, coef: list, m: int) -> list:
    """Linear expressions of ``sum(coef_v : s(v) = k)`` for k = 0..K-1."""
    nz = [v for v in range(len(coef)) if coef[v] != 0]
    w = [sum(coef[v] * z[v][j] for v in nz) for j in range(m)]
    total = int(sum(coef[v] for v in nz))
    return [total - w[0]] + [w[j - 1] - w[j] for j in range(1, m)] + [w[m - 1]]


def _in_sums(cross: dict, coef: list, m: int) -> list:
    """Linear expressions of ``sum(coef_u * cross[u, j])`` for stages j + 1 = 1..K-1."""
    return [sum(coef[u] * lit for (u, jj), lit in cross.items() if jj == j and coef[u] != 0) for j in range(m)]


def scalar_model(graph, st, sc, objective: str, k: int, stop=None):
    """The threshold model of cpsat's module docstring, with the objective of ``objective`` (``stop``: unused)."""
    from ortools.sat.python import cp_model  # imported at the first solve: the registry loads without it

    n, m = graph.num_nodes, k - 1
    model = cp_model.CpModel()
    z = [[model.new_bool_var(f"z{v}_{j}") for j in range(m)] for v in range(n)]
    for v in range(n):
        for j in range(m - 1):
            model.add_implication(z[v][j + 1], z[v][j])
    for u, v in st.edges.tolist():
        for j in range(m):
            model.add_implication(z[u][j], z[v][j])
    cross, y_vars = _crossing_literals(model, z, st, graph.output_size, m, stop)
    mem = _stage_sums(z, sc.mem, m)
    mem_total = int(sum(sc.mem))
    if objective == "paper":
        peak = model.new_int_var(0, max(mem_total, 0), "P")
        for e in mem:
            model.add(peak >= e)
        model.minimize(peak + sum(_in_sums(cross, sc.comm, m)))
        return model, z, y_vars, {"P": peak}
    macs = _stage_sums(z, sc.macs, m)
    inb = [0] + _in_sums(cross, sc.inb, m)
    spill_ub = max(mem_total - sc.sram, 0)
    spill = [model.new_int_var(0, spill_ub, f"spill{kk}") for kk in range(k)]
    for kk in range(k):
        model.add(spill[kk] >= mem[kk] - sc.sram)
    b_ub = int(sum(sc.macs)) + spill_ub + int(sum(sc.inb))
    bott = model.new_int_var(0, max(b_ub, 0), "B")
    for kk in range(k):
        model.add(bott >= macs[kk] + spill[kk] + inb[kk])
    model.minimize(bott)
    return model, z, y_vars, {"spill": spill, "B": bott}


def scalar_hint(mdl, values: dict, objective: str, k: int) -> None:
    """A complete solution hint: every variable, with the exact auxiliary values of ``values``."""
    n, m = len(mdl[1]), k - 1
    for v in range(n):
        for j in range(m):
            mdl[0].add_hint(mdl[1][v][j], bool(values["z"][v, j]))
    for (u, j), y in mdl[2].items():
        mdl[0].add_hint(y, bool(values["cross"][u, j]))
    if objective == "paper":
        mdl[0].add_hint(mdl[3]["P"], values["P"])
        return
    for kk in range(k):
        mdl[0].add_hint(mdl[3]["spill"][kk], values["spill"][kk])
    mdl[0].add_hint(mdl[3]["B"], values["B"])




# --- tests ---

def _layered(nodes: int, edges_per_node: float, seed: int):
    cfg = GeneratorConfig(mode="layered", min_nodes=nodes, max_nodes=nodes, edges_per_node=edges_per_node)
    return generate_numpy(cfg, np.random.default_rng(seed), name=f"layered{nodes}")


def _problems():
    """(graph, hw, objective, lam): random graphs of 5-40 nodes at K = 2-6 under both objectives (a small SRAM on a
    third, so stages spill; lam = 0.3 on some, whose paper model takes the rounded scaling), two layered graphs."""
    out = []
    for i, g in enumerate(random_graphs(30, seed=32, min_nodes=5, max_nodes=40)):
        k = 2 + i % 5
        hw = make_hw(k, **({"sram_bytes": 1e5} if i % 3 == 0 else {}))
        out.append((g, hw, "latency" if i % 2 else "paper", 0.3 if i % 4 == 0 else 1.0))
    for nodes, density in ((300, 2.9), (400, 1.2)):
        g = _layered(nodes, density, nodes)
        out += [(g, make_hw(4), "latency", 1.0), (g, make_hw(3), "paper", 1.0)]
    return out


def test_text_model_is_the_scalar_cp_model_build():
    """cpsat._build_model (protobuf text) writes exactly the scalar cp_model calls' model, hint included, on graphs
    with and without spill, under both scalings (exact and rounded) and both objectives."""
    rng = np.random.default_rng(32)
    spilled = rounded = 0
    problems = _problems()
    for graph, hw, objective, lam in problems:
        k = hw.stages
        st = structure(graph)
        sc = cpsat._Scaling(graph, hw, objective, lam)
        mdl = cpsat._build_model(graph, st, sc, objective, k)
        ref = scalar_model(graph, st, sc, objective, k)
        assert str(mdl.model.proto) == str(ref[0].proto), graph.name
        values = cpsat._exact_values(st, sc, objective, k, random_valid_schedule(graph, k, rng))
        cpsat._add_hint(mdl, values, objective, k)
        scalar_hint(ref, values, objective, k)
        assert str(mdl.model.proto) == str(ref[0].proto), graph.name
        assert mdl.zid.shape == (graph.num_nodes, k - 1)
        spilled += objective == "latency" and "spill" in str(mdl.model.proto) and sc.sram < sum(sc.mem)
        rounded += not sc.exact
    assert len(problems) == 34 and spilled >= 3 and rounded >= 2


def _brute(graph, hw, objective: str, lam: float) -> float:
    best = np.inf
    for combo in itertools.product(range(hw.stages), repeat=graph.num_nodes):
        a = np.asarray(combo)
        if len(graph.edges) and np.any(a[graph.edges[:, 0]] > a[graph.edges[:, 1]]):
            continue
        best = min(best, reference_objective(graph, a, hw, objective, lam))
    return best


@pytest.mark.parametrize("objective", ["latency", "paper"])
def test_text_model_solves_to_the_brute_force_optimum(objective):
    """solve_cpsat (the text model, its hint and its answer read from the response) proves the optimum of the loop
    reference evaluator's brute force on graphs of 5-7 nodes, from no hint and from a random valid hint."""
    rng = np.random.default_rng(5)
    for i, graph in enumerate(random_graphs(6, seed=7, min_nodes=5, max_nodes=7)):
        hw = make_hw(3, **({"sram_bytes": 1e5} if i % 2 else {}))
        best = _brute(graph, hw, objective, 1.0)
        hint = None if i % 2 else random_valid_schedule(graph, 3, rng)
        r = cpsat.solve_cpsat(graph, hw, objective, 1.0, time_limit_s=20, workers=1, hint=hint)
        assert r.optimal and r.info["assignment_source"] in ("cpsat", "hint (better than the solution)")
        assert reference_objective(graph, r.assignment, hw, objective, 1.0) == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("objective", ["latency", "paper"])
def test_on_solution_reports_each_improving_schedule_and_a_valid_bound(objective):
    """``on_solution`` (what ``solver=auto`` keeps when it abandons CP-SAT at its deadline) gets every improving
    solution: each decodes to a valid schedule whose loop-reference objective is at most the reported one (up to the
    integer scaling's rounding; CP-SAT's max variable may be slack in a solution found on the way), the objectives
    decrease, the last one is the schedule returned, and every reported bound is
    <= the brute-force optimum."""
    rng = np.random.default_rng(11)
    checked = 0
    for i, graph in enumerate(random_graphs(6, seed=9, min_nodes=5, max_nodes=7)):
        hw = make_hw(3, **({"sram_bytes": 1e5} if i % 2 else {}))
        best = _brute(graph, hw, objective, 1.0)
        got: list = []
        r = cpsat.solve_cpsat(graph, hw, objective, 1.0, time_limit_s=20, workers=1,
                              hint=random_valid_schedule(graph, 3, rng), on_solution=got.append)
        assert r.optimal and got
        scale = reference_objective(graph, r.assignment, hw, objective, 1.0)
        tol = r.info["rounding_error_bound"] + 1e-9 * scale
        for inc in got:
            a = inc.assignment()
            assert a.shape == (graph.num_nodes,) and np.all((a >= 0) & (a < 3))
            assert not len(graph.edges) or np.all(a[graph.edges[:, 0]] <= a[graph.edges[:, 1]])
            assert reference_objective(graph, a, hw, objective, 1.0) <= inc.objective + tol  # its max may be slack
            assert inc.bound <= best * (1 + 1e-9)
        assert all(b.objective < a.objective for a, b in zip(got, got[1:], strict=False))
        if r.info["assignment_source"] == "cpsat":
            np.testing.assert_array_equal(got[-1].assignment(), r.assignment)
            checked += 1
    assert checked >= 3
