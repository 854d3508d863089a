"""ASET lanes simulator (batch on the last axis, sorted worker times): per-query outcomes == the scan simulator's
(itself == the Python reference, tests/test_edge_reference.py) for every static policy on every preset."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from respect_jax.edge_cluster.evaluation import eval_traces
from respect_jax.edge_cluster.lanes import LANE_POLICIES, simulate_lanes, to_lanes
from respect_jax.edge_cluster.policies import STATIC_POLICIES
from respect_jax.edge_cluster.reference import ReferenceSimulator
from respect_jax.edge_cluster.scenarios import load_preset
from respect_jax.edge_cluster.simulator import simulate

FIELDS = ("code", "site", "variant", "start_us", "done_us", "resolve_us")
POLICIES = list(LANE_POLICIES)
assert set(POLICIES) == set(STATIC_POLICIES)


@functools.partial(jax.jit, static_argnames="laid_out")
def _lanes(params, traces, index, laid_out=False):
    """Every lanes policy (``index`` i32[P]) over the traces [B, Q]: counts [P, B, A, 5], Outcome [P, B, Q]."""
    branches = [LANE_POLICIES[p] for p in POLICIES]

    def one(i):
        policy = lambda p, st, q: jax.lax.switch(i, branches, p, st, q)  # noqa: E731
        policy.reads_rand = True  # for the random branch
        return simulate_lanes(params, traces, policy, outcomes=True, laid_out=laid_out)

    return jax.lax.map(one, index)


@jax.jit
def _scan(params, traces, index):
    """Every per-trace static policy under vmap: SimState, Outcome [P, B, ...]."""
    branches = [STATIC_POLICIES[p] for p in POLICIES]

    def one(i, trace):
        return simulate(params, trace, lambda p, s, q: jax.lax.switch(i, branches, p, s, q), 0)

    return jax.vmap(jax.vmap(one, in_axes=(None, 0)), in_axes=(0, None))(index, traces)


@functools.cache
def preset(name: str):
    return load_preset(name, horizon_s=0.12, max_queries=2048)  # one shape for every ISP preset


@pytest.mark.parametrize("name,load", [pytest.param("small", "overload", marks=pytest.mark.slow), ("isp", "overload"),
                                       ("isp_diurnal", "high"), ("isp_netdrift", "high"), ("isp_failure", "high"),
                                       ("isp_nearsat", "overload")])
def test_lanes_equal_the_scan_simulator(name, load):
    """Three seeded traces per preset, every static policy: identical per-query outcomes and final counts."""
    scn = preset(name)
    traces = eval_traces(scn, load, jax.random.key(5), 3)
    index = jnp.arange(len(POLICIES))
    counts, out = _lanes(scn.params, traces, index)
    sims, ref = _scan(scn.params, traces, index)
    for f in FIELDS:
        got, want = np.asarray(getattr(out, f)), np.asarray(getattr(ref, f))
        assert np.array_equal(got, want), f"{name}: {f} differs ({np.argwhere(got != want)[:5].tolist()})"
    assert np.array_equal(np.asarray(counts), np.asarray(sims.counts))
    codes = np.asarray(out.code)
    assert int((codes >= 0).sum()) == len(POLICIES) * int(np.asarray(traces.valid).sum()) > 0
    assert len(set(codes[codes >= 0].tolist())) >= 3, "the traces exercise several outcomes"


@pytest.mark.slow
def test_lanes_equal_the_reference_with_many_workers():
    """One trace of ``isp`` (76 worker slots, six sites of 2 workers and one of 64) straight against the Python
    reference, laid out once before the call (fields [Q, B])."""
    scn = preset("isp")
    traces = eval_traces(scn, "overload", jax.random.key(9), 1)
    _, out = _lanes(scn.params, to_lanes(traces), jnp.arange(len(POLICIES)), laid_out=True)
    tr = jax.tree.map(lambda x: np.asarray(x[0]), traces)
    for i, policy in enumerate(POLICIES):
        ref = ReferenceSimulator(scn.params).run(tr, policy)
        for f in FIELDS:
            assert np.array_equal(np.asarray(getattr(out, f))[i, 0], ref[f]), f"{policy}: {f} differs"


def test_lanes_counts_only_and_odd_slot_count():
    """The counts-only call (what experiments/edge_speed.py times) on a scenario whose tables are read with selects
    (``small``: every table <= SELECT_MAX entries) and an odd number of query slots whose last is padding (the loop
    stops after the last slot a lane uses): its counts equal the scan simulator's."""
    scn = load_preset("small", horizon_s=0.3)
    traces = eval_traces(scn, "overload", jax.random.key(11), 4)
    traces = jax.tree.map(lambda x: x[:, : x.shape[1] - 1 + x.shape[1] % 2], traces)  # an odd Q
    assert traces.time_us.shape[1] % 2 == 1 and bool(np.all(~np.asarray(traces.valid)[:, -1]))
    index = jnp.arange(len(POLICIES))
    sims, _ = _scan(scn.params, traces, index)
    for i, policy in enumerate(POLICIES):
        counts, out = jax.jit(lambda t, p=policy: simulate_lanes(scn.params, t, LANE_POLICIES[p]))(traces)
        assert out is None
        assert np.array_equal(np.asarray(counts), np.asarray(sims.counts)[i]), policy
    assert int(np.asarray(sims.counts).sum()) == len(POLICIES) * int(np.asarray(traces.valid).sum()) > 0


def test_lanes_in_chunks_equal_the_scan_simulator():
    """A batch laid out in chunks of 2 lanes (3 traces: chunks of 2 and 1, each its own scan), given shortest first:
    the lanes hold them longest first, and the per-query outcomes and counts come back in the caller's trace order,
    equal to the scan simulator's."""
    scn = preset("isp_failure")
    traces = eval_traces(scn, "high", jax.random.key(13), 3)
    lengths = np.asarray(traces.valid).sum(axis=1)
    traces = jax.tree.map(lambda x: x[np.argsort(lengths)], traces)  # shortest first
    lengths = np.sort(lengths)
    assert lengths[0] < lengths[1] < lengths[2]
    chunks = to_lanes(traces, chunk=2)
    assert [c.shape[-1] for c in chunks.chunks] == [2, 1]
    assert np.array_equal(np.asarray(chunks.order), [2, 1, 0])
    laid_valid = np.concatenate([(np.asarray(c[:, 1]) >> 15) & 1 for c in chunks.chunks], axis=-1)  # [Q, B]
    assert np.array_equal(laid_valid.sum(axis=0), lengths[::-1])
    index = jnp.arange(len(POLICIES))
    counts, out = _lanes(scn.params, chunks, index, laid_out=True)
    sims, ref = _scan(scn.params, traces, index)
    for f in FIELDS:
        assert np.array_equal(np.asarray(getattr(out, f)), np.asarray(getattr(ref, f))), f
    assert np.array_equal(np.asarray(counts), np.asarray(sims.counts))


def test_to_lanes_packs_the_small_fields_in_16_bits():
    """Every field of a query slot comes back from the packed layout (two 16-bit fields per i32 row, ``valid`` in bit
    15 of ``source``) at the extremes of its range; a field above SMALL_MAX is refused when laid out eagerly."""
    from respect_jax.edge_cluster.lanes import SMALL_MAX, _query_of
    from respect_jax.edge_cluster.types import Trace

    b, q, s = 3, 4, 3
    rng = np.random.default_rng(0)
    small = lambda *shape: jnp.asarray(rng.integers(0, SMALL_MAX + 1, shape), jnp.int32)  # noqa: E731
    traces = Trace(time_us=jnp.asarray(rng.integers(0, 2**31 - 1, (b, q)), jnp.int32), source=small(b, q),
                   app=small(b, q).at[0, 0].set(SMALL_MAX), jitter_pct=small(b, q), service_pct=small(b, q),
                   rand=jnp.asarray(rng.integers(0, 2**30, (b, q)), jnp.int32),
                   valid=jnp.asarray(rng.integers(0, 2, (b, q)), bool).at[:, 0].set(True),
                   net_pct=small(b, q, s).at[1, 2, 0].set(0), slow_pct=small(b, q, s).at[2, 1, 2].set(SMALL_MAX))
    traces = traces.replace(source=traces.source.at[0, 1].set(SMALL_MAX))
    (lanes,), order = to_lanes(traces)
    assert lanes.shape == (q, 4 + s, b) and np.array_equal(np.asarray(order), np.arange(b))  # one chunk: not sorted
    for slot in range(q):
        assert _query_of(lanes[slot][:-1], s).rand is None  # the step of a policy that does not read rand
        got = _query_of(lanes[slot], s)
        for f in ("time_us", "source", "app", "jitter_pct", "service_pct", "rand", "valid"):
            assert np.array_equal(np.asarray(getattr(got, f)), np.asarray(getattr(traces, f))[:, slot]), (f, slot)
        for f in ("net_pct", "slow_pct"):
            assert np.array_equal(np.asarray(getattr(got, f)), np.asarray(getattr(traces, f))[:, slot].T), (f, slot)
    with pytest.raises(ValueError, match="slow_pct outside"):
        to_lanes(traces.replace(slow_pct=traces.slow_pct.at[0, 0, 1].set(SMALL_MAX + 1)))


def test_lanes_when_every_slot_is_used_and_their_count_is_odd():
    """Q odd and the last slot used by a lane: the loop's last iteration (UNROLL = 2 slots) runs one slot past Q,
    which must count as padding (neither the last slot run twice nor its outcome overwritten)."""
    scn = load_preset("small", horizon_s=0.3)
    traces = eval_traces(scn, "overload", jax.random.key(17), 3)
    longest = int(np.asarray(traces.valid).sum(axis=1).max())
    q = longest if longest % 2 else longest - 1
    traces = jax.tree.map(lambda x: x[:, :q], traces)
    assert q % 2 == 1 and bool(np.asarray(traces.valid)[:, -1].any())
    index = jnp.arange(len(POLICIES))
    counts, out = _lanes(scn.params, traces, index)
    sims, ref = _scan(scn.params, traces, index)
    for f in FIELDS:
        assert np.array_equal(np.asarray(getattr(out, f)), np.asarray(getattr(ref, f))), f
    assert np.array_equal(np.asarray(counts), np.asarray(sims.counts))
