"""ASET simulator: JAX == plain-Python discrete-event reference on shared traces; conservation; capacity."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from respect_jax.edge_cluster.generator import make_traces
from respect_jax.edge_cluster.policies import STATIC_POLICIES
from respect_jax.edge_cluster.reference import ReferenceSimulator
from respect_jax.edge_cluster.scenarios import load_preset
from respect_jax.edge_cluster.simulator import conservation_at, outcome_counts, replay, simulate
from respect_jax.edge_cluster.types import INVALID, OUTCOMES

FIELDS = ("code", "site", "variant", "start_us", "done_us", "resolve_us")


@functools.cache
def scenario(name: str, pattern: str = "poisson", horizon: float = 0.6):
    return load_preset(name, pattern=pattern, horizon_s=horizon)


@functools.cache
def trace(name: str, load: str, seed: int, pattern: str = "poisson", horizon: float = 0.6):
    scn = scenario(name, pattern, horizon)
    return jax.tree.map(lambda x: np.asarray(x[0]), make_traces(jax.random.key(seed), scn.rate(load)[None], scn.trace,
                                                                  scn.dynamics))


POLICIES = list(STATIC_POLICIES)
_BRANCHES = [STATIC_POLICIES[p] for p in POLICIES]


@functools.partial(jax.jit, static_argnums=3)
@functools.partial(jax.vmap, in_axes=(0, None, None, None))  # scenarios
@functools.partial(jax.vmap, in_axes=(None, None, 0, None))  # policies
def _all_policies(params, tr, index, ring):
    """Every static policy on one trace for a batch of scenarios, in one compiled function."""
    return simulate(params, tr, lambda p, s, q: jax.lax.switch(index, _BRANCHES, p, s, q), ring)


@functools.cache
def small_pair():
    """``small`` and a variant of the same shapes (one compilation for both): a 2 ms queue limit at the
    edge (drops), no queueing at the cloud, another network and noisier processing."""
    base = scenario("small")
    sites = [dict(site) for site in base.doc["sites"]]
    sites[0]["max_wait_ms"], sites[1]["max_wait_ms"] = 2, 0
    other = load_preset("small", horizon_s=0.6, service_cv=0.5, sites=sites,
                        network={"far_edge": {"local_ms": 4.0, "remote_ms": 10.0, "jitter": 0.3},
                                 "cloud": {"local_ms": 30.0, "remote_ms": 30.0, "jitter": 0.1}})
    return base, other


def run_all(scenarios, tr) -> list[dict]:
    """[scenario] -> {policy: (SimState, Outcome)}."""
    params = jax.tree.map(lambda *x: jnp.stack(x), *(scn.params for scn in scenarios))
    sim, out = _all_policies(params, tr, jnp.arange(len(POLICIES)), 0)  # ring 0: no feature history
    return [{p: (jax.tree.map(lambda x, i=i, j=j: x[i, j], sim), jax.tree.map(lambda x, i=i, j=j: x[i, j], out))
             for j, p in enumerate(POLICIES)} for i in range(len(scenarios))]


def run_policy(policy: str, tr):
    return run_all(small_pair(), tr)[0][policy]


def assert_same(out, ref):
    for f in FIELDS:
        got = np.asarray(getattr(out, f))
        assert np.array_equal(got, ref[f]), f"{f} differs at slots {np.flatnonzero(got != ref[f])[:10]}"


@pytest.mark.parametrize("load", ["low", "overload"])
def test_small_scenarios_match_reference(load):
    """Two scenarios under one vmap, every static policy: each matches the reference on its own."""
    pair, tr = small_pair(), trace("small", load, 1)
    results = run_all(pair, tr)
    for scn, runs in zip(pair, results, strict=True):
        for policy, (_, out) in runs.items():
            assert_same(out, ReferenceSimulator(scn.params).run(tr, policy))
            assert int(np.sum(np.asarray(out.code) != INVALID)) == int(tr.valid.sum()) > 50
    assert not np.array_equal(np.asarray(results[0]["closest"][1].resolve_us),
                              np.asarray(results[1]["closest"][1].resolve_us))
    if load == "overload":  # the 2 ms queue limit of the variant drops queries
        assert sum(int(np.sum(np.asarray(out.code) == OUTCOMES.index("dropped")))
                   for _, out in results[1].values()) > 0


def test_isp_scenario_matches_reference():
    scn, tr = scenario("isp", "mmpp", 0.2), trace("isp", "overload", 2, "mmpp", 0.2)
    for policy, (_, out) in run_all([scn], tr)[0].items():
        assert_same(out, ReferenceSimulator(scn.params).run(tr, policy))
        codes = np.asarray(out.code)
        if policy != "most_accurate":
            assert len(set(codes[codes >= 0].tolist())) >= 2, f"{policy}: an overloaded ISP gives several outcomes"


def test_arbitrary_actions_match_reference():
    """Replayed actions (as a learned policy would give) cover every outcome code, also ties and drops."""
    scn = load_preset("small", horizon_s=0.5, service_cv=0.0)  # no noise: many equal times
    tr = trace("small", "overload", 3)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, scn.params.num_actions, size=tr.valid.shape[0])
    _, out = jax.jit(lambda t, a: replay(scn.params, t, a, scn.ring))(tr, jnp.asarray(actions))
    assert_same(out, ReferenceSimulator(scn.params).run(tr, actions))
    codes = set(np.asarray(out.code).tolist())
    assert {0, 1, 2, 3} <= codes, f"outcomes seen: {codes}"


def test_conservation_and_accounting():
    """At every time: arrived = resolved (per outcome) + in flight; nothing lost; padding not counted."""
    scn, tr = scenario("small"), trace("small", "high", 4)
    sim, out = run_policy("fastest_expected", tr)
    valid = np.asarray(tr.valid)
    codes = np.asarray(out.code)
    assert np.all(codes[~valid] == INVALID) and np.all((codes[valid] >= 0) & (codes[valid] < len(OUTCOMES)))
    counts = np.asarray(outcome_counts(out, tr, scn.params.num_apps))
    assert counts.sum() == valid.sum()
    assert np.array_equal(counts, np.asarray(sim.counts))
    horizon = int(scn.trace.horizon_s * 1e6)
    for at in np.linspace(0, horizon + 200_000, 13).astype(np.int64):
        c = jax.device_get(conservation_at(out, tr, jnp.int32(at)))
        arrived = int(np.sum(valid & (np.asarray(tr.time_us) <= at)))
        assert c["arrived"] == arrived == int(c["resolved"].sum()) + int(c["in_flight"])
    late = conservation_at(out, tr, jnp.int32(2**30))
    assert int(late["in_flight"]) == 0 and int(late["resolved"].sum()) == valid.sum(), "the simulation drains"
    resolve = np.asarray(out.resolve_us)[valid]
    assert np.all(resolve >= np.asarray(tr.time_us)[valid])


def test_sites_never_exceed_their_workers():
    scn, tr = scenario("small"), trace("small", "overload", 6)
    _, out = run_policy("closest", tr)
    start, done, site = (np.asarray(getattr(out, f)) for f in ("start_us", "done_us", "site"))
    served = start >= 0
    workers = np.asarray(scn.params.workers)
    for s in range(scn.params.num_sites):
        m = served & (site == s)
        events = sorted([(t, 1) for t in start[m]] + [(t, -1) for t in done[m]], key=lambda e: (e[0], e[1]))
        busy = np.cumsum([d for _, d in events])
        assert busy.max(initial=0) <= workers[s]
        assert np.all(done[m] > start[m])


DYNAMIC_PRESETS = ("isp_diurnal", "isp_netdrift", "isp_failure", "isp_nearsat")


@functools.cache
def dynamic_scenario(name: str, horizon: float = 0.3):
    """A time-varying preset on a short horizon (its profiles are compressed with it; same Q for every preset so
    the simulator compiles once)."""
    return load_preset(name, horizon_s=horizon, max_queries=4096)


@pytest.mark.parametrize("name", DYNAMIC_PRESETS)
def test_time_varying_presets_match_reference(name):
    """Seeded traces of every time-varying preset: per-query outcomes of every static policy equal the reference's,
    and the conditions of the trace (network and processing factors) really move the outcomes."""
    from respect_jax.edge_cluster.scenarios import neutral_dynamics

    scn = dynamic_scenario(name)
    tr = jax.tree.map(lambda x: np.asarray(x[0]),
                      make_traces(jax.random.key(11), scn.rate("high")[None], scn.trace, scn.dynamics))
    assert int(tr.valid.sum()) > 500
    runs = run_all([scn], tr)[0]
    for policy, (_, out) in runs.items():
        assert_same(out, ReferenceSimulator(scn.params).run(tr, policy))
    valid = tr.valid
    moved = (tr.net_pct[valid] != 100).any() or (tr.slow_pct[valid] != 100).any()
    if name in ("isp_netdrift", "isp_failure", "isp_nearsat"):
        assert moved, "the preset's network or site dynamics reach the trace"
        flat = tr.replace(net_pct=np.full_like(tr.net_pct, 100), slow_pct=np.full_like(tr.slow_pct, 100))
        _, out_flat = run_all([scn], flat)[0]["fastest_expected"]
        assert not np.array_equal(np.asarray(out_flat.resolve_us), np.asarray(runs["fastest_expected"][1].resolve_us))
    else:  # load dynamics only: the per-app profiles change the mix of arrivals over time
        assert not moved
        half = 0.5 * scn.trace.horizon_s * 1e6
        first, last = tr.time_us[valid] < half, tr.time_us[valid] >= half
        apps = tr.app[valid]
        video = scn.app_names.index("video")
        assert np.mean(apps[last] == video) > 1.5 * np.mean(apps[first] == video)
    neutral = neutral_dynamics(scn.params.num_apps, scn.params.num_sites)
    assert jax.tree.structure(neutral) == jax.tree.structure(scn.dynamics)


def test_neutral_dynamics_leave_traces_unchanged():
    """A scenario without ``dynamics`` draws the same arrivals as before the conditions existed: every factor is 100
    and explicit neutral dynamics give the identical trace."""
    scn = scenario("small")
    tr = trace("small", "medium", 1)
    assert np.all(tr.net_pct == 100) and np.all(tr.slow_pct == 100)
    explicit = load_preset("small", horizon_s=0.6, dynamics={"shift": 0.5, "apps": {"ar": {"profile": [1, 1]}},
                                                            "sites": {"cloud": {"net": 1.0, "slow": [1.0]}}})
    again = jax.tree.map(lambda x: np.asarray(x[0]), make_traces(jax.random.key(1), explicit.rate("medium")[None],
                                                                 explicit.trace, explicit.dynamics))
    assert scn.trace == explicit.trace
    for f in ("time_us", "source", "app", "valid", "net_pct", "slow_pct"):
        np.testing.assert_array_equal(getattr(again, f), getattr(tr, f))
