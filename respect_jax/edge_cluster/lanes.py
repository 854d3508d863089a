"""The static policies on a batch of traces, lanes layout: the same dynamics as :mod:`.simulator`, faster on CPU.

:func:`respect_jax.edge_cluster.simulator.simulate` under ``vmap`` keeps the batch axis first ([B, K] worker
times), so every per-step reduction over sites or workers runs along the short minor axis and XLA CPU cannot
vectorise it across traces. Here the batch axis B is the *last* axis of every array ("lanes": one trace per
SIMD lane) and one loop over the Q query slots advances all B traces together:

* state: ``busy`` i32[K, B], ``hol`` and ``vclock`` i32[S, B], ``counts`` i32[A, 5, B];
* a reduction over sites or workers is an elementwise min / sum of K (or S) rows of B lanes;
* table look-ups by the query's source, app, site or variant are chains of selects over the table's entries when it
  has at most :data:`SELECT_MAX` of them (elementwise: XLA CPU fuses and vectorises them, where a per-lane gather
  runs one scalar load per lane), gathers from larger tables; per-site values of the chosen site are one-hot
  selects over S rows;
* each site's worker times are kept *sorted* (its slots in ``EdgeParams.slot_site`` order): the worker that
  frees first is the site's first slot, and serving a query removes that time and inserts its finish with one
  shifted min / max (no arg-min). Which worker runs a query is not part of its :class:`Outcome`, and the site's
  multiset of worker times is the same as the simulator's, so every outcome is identical (tested against
  :func:`~respect_jax.edge_cluster.simulator.simulate` and the Python reference on every preset);
* the loop stops after the last query slot that any lane of the chunk uses (valid queries come first in every trace;
  the slot count is found by a binary search over the slots before the loop): padding slots after it are not run
  (their outcomes stay INVALID, -1), so a batch padded to a common Q costs the steps of its longest trace only;
  each iteration runs :data:`UNROLL` slots (a slot past the last used one is run as padding);
* :func:`to_lanes` puts the traces in lanes longest first (by valid-query count, stable), so each chunk of
  :data:`LANE_CHUNK` lanes holds traces of similar length and runs about the steps of its own longest one, not of the
  batch's: ~5 % fewer steps at B = 4,096 on ``small`` (Poisson trace lengths). :func:`simulate_lanes` returns the
  counts and outcomes in the caller's trace order (:attr:`LaneTraces.order`);
* the traces stream from memory at every step (~18 % of a step's time on ``small`` with 4-byte fields, measured by
  re-reading two cached slots instead), so :func:`to_lanes` packs
  every field but ``time_us`` and ``rand`` in 16 bits, two per i32 row (``valid`` in bit 15 of ``source``): 4 + S
  rows per query slot instead of 7 + 2S (24 bytes per slot and lane instead of 44 for two sites). The generator clips
  those fields far below :data:`SMALL_MAX` (percent factors <= 10,000); :func:`to_lanes` refuses other values when
  it runs eagerly. ``rand`` is the slot's last row, and a step reads it only for a policy that sets ``reads_rand``
  (``random``): 20 instead of 24 bytes per slot and lane for the others (x1.02, paired, session 32);
* a step is split in two: :func:`resolve_lanes` computes each lane's outcome and a few per-lane values (its site,
  finish time, the site's new head-of-line and virtual-clock times, app and code), :func:`apply_lanes` updates the
  [K, B], [S, B] and [A, 5, B] state from them. The loop applies slot ``q - 1``'s update at the start of slot ``q``'s
  step, so those values cross the loop boundary: XLA computes each of them once, where inside one step it fuses
  the whole per-lane chain into every row of the [K, B] update (or needs :func:`materialize`'s extra copies).

Only the static rules run here (:data:`LANE_POLICIES`, each the lanes form of the rule of the same name in
:mod:`.policies`); agents, which need the history ring, use :mod:`.simulator`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from respect_jax.edge_cluster.simulator import BACKLOG_CAP_US
from respect_jax.edge_cluster.types import (
    DROPPED,
    EXPIRED,
    INVALID,
    LATE,
    LOW_ACCURACY,
    NEVER,
    OUTCOMES,
    SUCCESS,
    EdgeParams,
    Outcome,
    Trace,
)

_BIG = 2**31 - 1
SELECT_MAX = 32
"""A table of at most this many entries is read per lane with a chain of selects, a larger one with a gather."""
LANE_CHUNK = 1024
"""Lanes per loop (:func:`to_lanes`): a larger batch runs as several loops, whose per-step state and intermediates
stay in the core's cache (small, closest: 51 M queries per CPU-second at B = 4,096 in one loop, 59 M at 1,024)."""

UNROLL = 2
"""Query slots per loop iteration: with 2, XLA writes the second slot's [K, B] worker update straight into the loop
carry (with 1 it copies it there at every step): x1.01-1.05 at B = 4,096 (session 31, paired)."""

LanePolicy = Callable[[EdgeParams, dict, Trace], jax.Array]
"""``(params, state, query) -> action i32[B]`` with the state's arrays [..., B] and the query's fields [B] ([S, B]).
``query.rand`` is None unless the policy has the attribute ``reads_rand = True``."""


def materialize(*xs: jax.Array) -> tuple[jax.Array, ...]:
    """The i32[B] / bool[B] arrays ``xs`` computed once per step.

    XLA CPU fuses cheap elementwise chains into every consumer, so a per-lane value feeding a [K, B] update is
    recomputed K times per lane (and ``lax.optimization_barrier`` is removed before fusion on CPU). A reduction is
    never fused into its consumers: the values pass through a sum over an axis of 2 (each value and a 0).
    """
    stacked = jnp.stack([x.astype(jnp.int32) for x in xs])  # [M, B]
    summed = jnp.sum(jnp.stack([stacked, jnp.zeros_like(stacked)], axis=1), axis=1)
    return tuple(summed[i].astype(x.dtype) for i, x in enumerate(xs))


SMALL_MAX = 2**15 - 1
"""Every trace field but ``time_us`` and ``rand`` is laid out in 16 bits (:func:`to_lanes`): it must lie in
[0, SMALL_MAX]; bit 15 of ``source``'s half carries ``valid``."""


def _small_fields(num_sites: int) -> int:
    """How many 16-bit fields a query slot has: source (+ valid), app, jitter_pct, service_pct, net_pct[S],
    slow_pct[S]; an even number (two per i32 row)."""
    return 4 + 2 * num_sites


def _unpack(rows: jax.Array, count: int) -> list[jax.Array]:
    """The ``count`` 16-bit fields of the packed rows i32[count / 2, B] (low half first)."""
    out = []
    for i in range(count):
        word = rows[i // 2]
        out.append(jnp.bitwise_and(word, 0xFFFF) if i % 2 == 0 else jax.lax.shift_right_logical(word, 16))
    return out


def _query_of(rows: jax.Array, num_sites: int) -> Trace:
    """The step's query (fields [B], per-site fields [S, B]) from its rows of the :func:`to_lanes` layout (i32[F, B],
    or its first F - 1 rows: then ``rand`` is None), read once (not re-sliced inside every fused loop)."""
    (rows,) = materialize(rows)
    s = num_sites  # F = 2 + (4 + 2S) / 2 rows: time_us, the packed fields, rand
    tagged, app, jitter, service, *per_site = _unpack(rows[1:3 + s], _small_fields(s))
    source, valid = jnp.bitwise_and(tagged, SMALL_MAX), tagged > SMALL_MAX
    rand = rows[3 + s] if rows.shape[0] > 3 + s else None
    return Trace(rows[0], source, app, jitter, service, rand, valid=valid,
                 net_pct=jnp.stack(per_site[:s]), slow_pct=jnp.stack(per_site[s:]))


def _udiv(x: jax.Array, d: int) -> jax.Array:
    """``x // d`` for ``x >= 0`` (i32), as an unsigned division: fewer instructions per lane than the signed one.

    Every dividend here is a product of non-negative scenario values and trace fields (the layout's [0, SMALL_MAX]),
    below 2**31 by the scenarios' bounds (round trip x factor <= 1,000 ms, processing x factor <= 2,000 ms), so the
    unsigned quotient is the signed one: x1.04-1.05 per step on ``small`` (session 31, paired)."""
    return jax.lax.div(x.astype(jnp.uint32), jnp.uint32(d)).astype(jnp.int32)


def _urem(x: jax.Array, d: int) -> jax.Array:
    """``x % d`` for ``x >= 0`` (i32), unsigned (see :func:`_udiv`)."""
    return jax.lax.rem(x.astype(jnp.uint32), jnp.uint32(d)).astype(jnp.int32)


def _select(index: jax.Array, values: list) -> jax.Array:
    """``values[index]`` per lane (``index`` i32[B] in ``[0, len(values))``) by a chain of selects."""
    out = values[0]
    for i in range(1, len(values)):
        out = jnp.where(index == i, values[i], out)
    return out


def _lookup(table: jax.Array, index: jax.Array) -> jax.Array:
    """``table.reshape(-1)[index]`` per lane (i32[B] -> [B]): selects over a small table, a gather over a large one."""
    flat = table.reshape(-1)
    if flat.shape[0] <= SELECT_MAX:
        return _select(index, [flat[i] for i in range(flat.shape[0])])
    return jnp.take(flat, index)


def _first_argmin0(x: jax.Array) -> jax.Array:
    """i32[B] index of the first minimum along axis 0 of ``x`` [M, B]."""
    low = jnp.min(x, axis=0, keepdims=True)
    idx = jnp.arange(x.shape[0], dtype=jnp.int32)[:, None]
    return jnp.min(jnp.where(x == low, idx, x.shape[0]), axis=0).astype(jnp.int32)


def _feasible(params: EdgeParams) -> jax.Array:
    """bool[A, V] the variants of each app's family accurate enough."""
    return params.variant_mask & (params.accuracy_pm[None, :] >= params.min_accuracy_pm[:, None])


def _cheapest_table(params: EdgeParams) -> jax.Array:
    """i32[S, A] the cheapest feasible variant of each app at each site (lowest index on ties)."""
    cost = jnp.where(_feasible(params)[None, :, :], params.proc_us[:, None, :], _BIG)  # [S, A, V]
    low = jnp.min(cost, axis=-1, keepdims=True)
    v = params.num_variants
    return jnp.min(jnp.where(cost == low, jnp.arange(v, dtype=jnp.int32), v), axis=-1).astype(jnp.int32)


def _first_min_last(x: jax.Array) -> jax.Array:
    low = jnp.min(x, axis=-1, keepdims=True)
    n = x.shape[-1]
    return jnp.min(jnp.where(x == low, jnp.arange(n, dtype=jnp.int32), n), axis=-1).astype(jnp.int32)


def _closest_table(params: EdgeParams) -> jax.Array:
    """i32[N, A] the action of ``closest`` for each (source, app): it reads no state."""
    site = _first_min_last(params.rtt_us)  # [N]
    variant = _cheapest_table(params)[site]  # [N, A]
    return site[:, None] * params.num_variants + variant


def _most_accurate_table(params: EdgeParams) -> jax.Array:
    """i32[N, A] the action of ``most_accurate`` for each (source, app): it reads no state."""
    nominal = params.rtt_us[:, :, None] + params.proc_us[None, :, :]  # [N, S, V]
    feasible = jnp.broadcast_to(_feasible(params)[None, :, None, :], (params.num_sources, params.num_apps,
                                                                       *params.proc_us.shape))  # [N, A, S, V]
    nom = jnp.broadcast_to(nominal[:, None], feasible.shape)
    in_time = feasible & (nom <= params.deadline_us[None, :, None, None])
    acc = jnp.broadcast_to(params.accuracy_pm, feasible.shape)
    best = jnp.max(jnp.where(in_time, acc, -1), axis=(-2, -1), keepdims=True)
    chosen = jnp.where(jnp.any(in_time, axis=(-2, -1), keepdims=True), in_time & (acc == best), feasible)
    score = jnp.where(chosen, nom, _BIG).reshape(params.num_sources, params.num_apps, -1)
    return _first_min_last(score)


def _table_policy(table_of: Callable[[EdgeParams], jax.Array]) -> LanePolicy:
    def policy(params: EdgeParams, state: dict, query: Trace) -> jax.Array:
        table = state["tables"][table_of.__name__]
        return _lookup(table, query.source * params.num_apps + query.app)

    policy.table = table_of
    return policy


def _rtt_rows(params: EdgeParams, query: Trace) -> jax.Array:
    """i32[S, B] nominal RTT from each lane's source to every site."""
    if params.rtt_us.size <= SELECT_MAX:
        return jnp.stack([_lookup(params.rtt_us[:, s], query.source) for s in range(params.num_sites)])
    return jnp.take(params.rtt_us.T, query.source, axis=1)


def fastest_expected(params: EdgeParams, state: dict, query: Trace) -> jax.Array:
    """Lanes form of :func:`respect_jax.edge_cluster.policies.fastest_expected`.

    ``rtt + wait`` does not depend on the variant, so the best variant at a site is the app's cheapest feasible one
    there (lowest index on ties) and the rule is an arg-min over S sites of ``rtt + wait + cheapest proc``: the
    lowest site among the minima, then its lowest variant, is the flat arg-min over S*V of the per-trace rule.
    """
    rtt = _rtt_rows(params, query)  # [S, B]
    wait = jnp.maximum(state["vclock"] - (query.time_us[None, :] + _udiv(rtt, 2)), 0)
    cheapest = state["tables"]["cheapest"]  # [S, A]
    proc = jnp.stack([_lookup(state["tables"]["cheapest_proc"][s], query.app)
                      for s in range(params.num_sites)])  # [S, B]; _BIG if the app has none
    site = _first_argmin0(jnp.where(proc < _BIG, rtt + wait + proc, _BIG))
    return site * params.num_variants + _lookup(cheapest, site * params.num_apps + query.app)


def least_loaded(params: EdgeParams, state: dict, query: Trace) -> jax.Array:
    """Lanes form of :func:`respect_jax.edge_cluster.policies.least_loaded`."""
    backlog = jnp.maximum(state["vclock"] - query.time_us[None, :], 0)  # [S, B]
    tied = backlog == jnp.min(backlog, axis=0, keepdims=True)
    site = _first_argmin0(jnp.where(tied, _rtt_rows(params, query), _BIG))
    variant = _lookup(state["tables"]["cheapest"], site * params.num_apps + query.app)
    return site * params.num_variants + variant


def random(params: EdgeParams, state: dict, query: Trace) -> jax.Array:
    """Lanes form of :func:`respect_jax.edge_cluster.policies.random`."""
    family = jnp.take(params.variant_mask.T, query.app, axis=1)  # [V, B]
    allowed = jnp.broadcast_to(family[None], (params.num_sites, *family.shape)).reshape(params.num_actions, -1)
    allowed = allowed | ~query.valid[None, :]
    count = jnp.maximum(jnp.sum(allowed, axis=0), 1)
    k = query.rand % count
    return _first_argmin0(jnp.where(jnp.cumsum(allowed, axis=0) > k[None, :], 0, 1))


random.reads_rand = True


closest = _table_policy(_closest_table)
most_accurate = _table_policy(_most_accurate_table)

LANE_POLICIES: dict[str, LanePolicy] = {
    "closest": closest,
    "fastest_expected": fastest_expected,
    "most_accurate": most_accurate,
    "least_loaded": least_loaded,
    "random": random,
}


def _tables(params: EdgeParams) -> dict[str, jax.Array]:
    """Per-scenario look-up tables, computed once before the loop."""
    cheapest = _cheapest_table(params)
    proc = jnp.take_along_axis(params.proc_us, cheapest, axis=1)  # [S, A]
    any_feasible = jnp.any(_feasible(params), axis=1)  # [A]
    return {"cheapest": cheapest, "cheapest_proc": jnp.where(any_feasible[None, :], proc, _BIG),
            "_closest_table": _closest_table(params),
            "_most_accurate_table": _most_accurate_table(params)}


def init_lanes(params: EdgeParams, batch: int) -> dict:
    """The empty cluster for B lanes: ``busy`` i32[K, B] (sorted per site), ``hol``, ``vclock`` i32[S, B],
    ``counts`` i32[A, 5, B]."""
    k, s, a = params.slot_site.shape[0], params.num_sites, params.num_apps
    return {"busy": jnp.zeros((k, batch), jnp.int32), "hol": jnp.zeros((s, batch), jnp.int32),
            "vclock": jnp.zeros((s, batch), jnp.int32), "counts": jnp.zeros((a, len(OUTCOMES), batch), jnp.int32)}


def resolve_lanes(params: EdgeParams, state: dict, query: Trace, action: jax.Array) -> tuple[dict, Outcome]:
    """Resolve each lane's query sent to its ``action`` (i32[B]): the dynamics of
    :func:`respect_jax.edge_cluster.simulator.dispatch`, lane by lane, without the state update (:func:`apply_lanes`).
    Returns the pending update (a dict of [B]) and the Outcome [B]."""
    s_count, v_count = params.num_sites, params.num_variants
    action = jnp.clip(action.astype(jnp.int32), 0, s_count * v_count - 1)
    site, variant = _udiv(action, v_count), _urem(action, v_count)  # action >= 0: no floor corrections
    n, app, t, valid = query.source, query.app, query.time_us, query.valid
    s_hot = jnp.arange(s_count, dtype=jnp.int32)[:, None] == site[None, :]  # [S, B]

    def pick(x):  # x [S, B] -> the chosen site's entry [B]
        return jnp.sum(jnp.where(s_hot, x, 0), axis=0, dtype=x.dtype)

    path = n * s_count + site
    rtt = _lookup(params.rtt_us, path)
    net_f = pick(query.net_pct)
    jit = _udiv(_lookup(params.jitter_us, path) * net_f, 100)
    net = _udiv(rtt * net_f, 100) + _udiv(jit * query.jitter_pct, 100)
    up = _udiv(net, 2)
    down = net - up
    t_site = t + up
    nominal = _lookup(params.proc_us, action)
    slowed = _udiv(nominal * pick(query.slow_pct), 100)
    svc = jnp.maximum(_udiv(slowed * query.service_pct, 100), 1)

    first_slot = state["tables"]["first_slot"]  # [S] the first worker slot of each site
    free_first = pick(jnp.take(state["busy"], first_slot, axis=0))  # the site's earliest free worker
    hol_s = pick(state["hol"])
    start = jnp.maximum(jnp.maximum(t_site, hol_s), free_first)
    deadline = _lookup(params.deadline_us, app)
    deadline_abs = t + deadline
    wait_limit = t_site + _lookup(params.max_wait_us, site)
    limit = jnp.minimum(wait_limit, deadline_abs)
    removed = start > limit
    finish = start + svc
    response = finish + down
    accurate = _lookup(params.accuracy_pm, variant) >= _lookup(params.min_accuracy_pm, app)
    served_code = jnp.where(response > deadline_abs, LATE, jnp.where(accurate, SUCCESS, LOW_ACCURACY))
    removed_code = jnp.where(deadline_abs <= wait_limit, EXPIRED, DROPPED)
    code = jnp.where(valid, jnp.where(removed, removed_code, served_code), INVALID).astype(jnp.int32)
    done = jnp.where(removed, limit, finish)
    resolve = jnp.where(removed, limit, response)
    hol_new = jnp.where(removed, jnp.maximum(hol_s, limit), start)
    vclock_new = jnp.maximum(pick(state["vclock"]), t + _udiv(rtt, 2)) + _lookup(params.fluid_us, action)
    vclock_new = jnp.minimum(vclock_new, t + BACKLOG_CAP_US)
    outcome = Outcome(
        code=code,
        site=jnp.where(valid, site, -1),
        variant=jnp.where(valid, variant, -1),
        start_us=jnp.where(valid & ~removed, start, -1),
        done_us=jnp.where(valid, done, -1),
        resolve_us=jnp.where(valid, resolve, -1),
    )
    pending = {"site": jnp.where(valid, site, -1), "finish": jnp.where(valid & ~removed, finish, -NEVER),
               "hol": hol_new, "vclock": vclock_new,
               "key": jnp.where(valid, app * len(OUTCOMES) + code, -1)}
    return pending, outcome


def apply_lanes(params: EdgeParams, state: dict, pending: dict) -> dict:
    """The state after the queries of :func:`resolve_lanes` (``pending``: their site, -1 for padding, finish time,
    -NEVER if not served, the site's new head-of-line and virtual-clock times, app * 5 + code, -1 for padding)."""
    site = pending["site"]
    site_hot = jnp.arange(params.num_sites, dtype=jnp.int32)[:, None] == site[None, :]  # [S, B]; none for padding
    busy = state["busy"]
    # serve: the site's sorted worker times lose their first (the worker taking the query) and gain ``finish``;
    # every other slot (finish -NEVER) keeps its time, as min(next, max(time, -NEVER)) = time on sorted times
    last_of_site = state["tables"]["last_of_site"]  # bool[K]
    after = jnp.where(last_of_site[:, None], NEVER, jnp.concatenate([busy[1:], busy[:1]], axis=0))
    finish = jnp.where(params.slot_site[:, None] == site[None, :], pending["finish"][None, :], -NEVER)  # [K, B]
    a5 = params.num_apps * len(OUTCOMES)
    key_hot = jnp.arange(a5, dtype=jnp.int32).reshape(params.num_apps, len(OUTCOMES))[:, :, None] == pending["key"]
    return {
        **state,
        "busy": jnp.minimum(after, jnp.maximum(busy, finish)),
        "hol": jnp.where(site_hot, pending["hol"][None, :], state["hol"]),
        "vclock": jnp.where(site_hot, pending["vclock"][None, :], state["vclock"]),
        "counts": state["counts"] + key_hot.astype(jnp.int32),
    }


def no_update(batch: int) -> dict:
    """The pending update of :func:`apply_lanes` that changes nothing (every lane padding)."""
    none = jnp.full((batch,), -1, jnp.int32)
    return {"site": none, "finish": jnp.full((batch,), -NEVER, jnp.int32), "hol": none, "vclock": none, "key": none}


class LaneTraces(NamedTuple):
    """A batch of traces in the loop's layout (:func:`to_lanes`)."""

    chunks: tuple[jax.Array, ...]
    """i32[Q, F, b] each: lanes ``[i * chunk, i * chunk + b)`` of the batch in lane order."""
    order: jax.Array
    """i32[B]: the caller's index of the trace in each lane (longest trace first)."""


def lane_order(valid: jax.Array) -> jax.Array:
    """i32[B] the traces of ``valid`` bool[B, Q] by decreasing valid-query count, ties in the caller's order."""
    return jnp.argsort(-jnp.sum(valid, axis=-1, dtype=jnp.int32), stable=True).astype(jnp.int32)


def to_lanes(traces: Trace, chunk: int = LANE_CHUNK) -> LaneTraces:
    """Trace [B, Q] (per-site fields [B, Q, S]) -> the loop's inputs: chunks of at most ``chunk`` lanes, each
    i32[Q, F, b], F = 4 + S, and the lane order. With more than one chunk the traces go in lanes longest first
    (:func:`lane_order`): a chunk's loop runs the steps of its own longest trace, so chunks of similar lengths waste
    fewer padding steps. The rows of a query slot are time_us, the 16-bit fields two per row, low half first:
    source | valid << 15, app, jitter_pct, service_pct, net_pct[S], slow_pct[S], then rand (one contiguous block
    per slot: each step reads one slice, where separate field arrays cost one slice kernel per field);
    :func:`simulate_lanes` runs the chunks one after another. The 16-bit fields must lie in [0, :data:`SMALL_MAX`]
    (a ValueError when called eagerly; under ``jit`` the values are not checked)."""
    s = traces.net_pct.shape[-1]
    small = [traces.source, traces.app, traces.jitter_pct, traces.service_pct]
    small += [traces.net_pct[..., i] for i in range(s)] + [traces.slow_pct[..., i] for i in range(s)]
    small = [x.astype(jnp.int32) for x in small]
    if not any(isinstance(x, jax.core.Tracer) for x in small):  # eager: check the 16-bit fields
        for name, x in zip(("source", "app", "jitter_pct", "service_pct", *["net_pct"] * s,
                            *["slow_pct"] * s), small, strict=True):
            if x.size and (int(jnp.min(x)) < 0 or int(jnp.max(x)) > SMALL_MAX):
                raise ValueError(f"to_lanes: trace field {name} outside [0, {SMALL_MAX}] (laid out in 16 bits)")
    small[0] = small[0] | jax.lax.shift_left(traces.valid.astype(jnp.int32), 15)
    rows = [traces.time_us.astype(jnp.int32)]
    rows += [small[i] | jax.lax.shift_left(small[i + 1], 16) for i in range(0, len(small), 2)]
    rows += [traces.rand.astype(jnp.int32)]
    batch = traces.valid.shape[0]
    if batch > chunk:  # one chunk runs the steps of its longest trace whatever the order: no permutation
        order = lane_order(traces.valid)
        rows = [r[order] for r in rows]
    else:
        order = jnp.arange(batch, dtype=jnp.int32)
    full = jnp.stack([jnp.moveaxis(r, 0, -1) for r in rows], axis=1)
    return LaneTraces(tuple(full[..., i:i + chunk] for i in range(0, full.shape[-1], chunk)), order)


def simulate_lanes(params: EdgeParams, traces: Trace | LaneTraces, policy: LanePolicy,
                   outcomes: bool = False, laid_out: bool = False) -> tuple[jax.Array, Outcome | None]:
    """Run a lanes policy over a batch of traces of one scenario.

    Args:
        params: one scenario (shared by every lane); traces: Trace [B, Q]; policy: a :data:`LANE_POLICIES` entry;
        outcomes: also return the per-query outcomes; laid_out: ``traces`` are already in the loop's layout
        (:class:`LaneTraces` from :func:`to_lanes`), e.g. converted once for repeated runs.
    Returns:
        counts i32[B, A, 5] (as ``SimState.counts`` of :func:`~respect_jax.edge_cluster.simulator.simulate`) and,
        with ``outcomes``, the Outcome [B, Q] (else None), both in the order of the traces given to :func:`to_lanes`.
    """
    if laid_out and not isinstance(traces, LaneTraces):
        raise TypeError(f"simulate_lanes(laid_out=True): expected the LaneTraces of to_lanes, got {type(traces)}")
    laid = traces if laid_out else to_lanes(traces)
    slot_site = params.slot_site
    k = slot_site.shape[0]
    is_first = jnp.concatenate([jnp.ones((1,), bool), slot_site[1:] != slot_site[:-1]])
    first_slot = jnp.min(jnp.where(slot_site[None, :] == jnp.arange(params.num_sites)[:, None],
                                   jnp.arange(k), k), axis=1)  # [S]
    tables = {**_tables(params), "first_slot": first_slot,
              "last_of_site": jnp.concatenate([is_first[1:], jnp.ones((1,), bool)])}

    def run(lanes):
        q_count, batch = lanes.shape[0], lanes.shape[-1]

        def used(q):  # does any lane hold a real query at slot q (valid queries come first in every trace)
            tagged = jax.lax.dynamic_index_in_dim(lanes, q, 0, keepdims=False)[1]  # source | valid << 15 | app << 16
            return jnp.any(jnp.bitwise_and(tagged, 1 << 15) != 0)

        def halve(bounds):  # slots [0, lo) are used, [hi, Q) are not
            lo, hi = bounds
            mid = (lo + hi) // 2
            return jax.lax.cond(used(mid), lambda: (mid + 1, hi), lambda: (lo, mid))

        steps, _ = jax.lax.while_loop(lambda b: b[0] < b[1], halve, (jnp.int32(0), jnp.int32(q_count)))

        def cond(carry):  # stop after the last slot any lane uses
            return carry[0] < steps

        def step(q, st, pending, outs, first):
            st = apply_lanes(params, st, pending)  # the previous slot's update (see the module docstring)
            rows = jax.lax.dynamic_index_in_dim(lanes, q, 0, keepdims=False)
            query = _query_of(rows if getattr(policy, "reads_rand", False) else rows[:-1], params.num_sites)
            if not first:  # q may be Q (it reads slot Q - 1 again): padding here
                query = query.replace(valid=query.valid & (q < steps))
            (action,) = materialize(policy(params, st, query))
            pending, out = resolve_lanes(params, st, query, action)
            if outcomes:
                outs = jax.tree.map(lambda buf, x: jax.lax.dynamic_update_index_in_dim(buf, x, q, 0), outs, out)
            return st, pending, outs

        def body(carry):  # two slots per iteration (UNROLL): the [K, B] worker update needs no copy into the carry
            q, st, pending, outs = carry
            for i in range(UNROLL):
                if i:  # computed once, not fused into the next slot's [K, B] update; vclock feeds the [S, B] update
                    # only, where its chain costs less than a fifth row of materialize's kernel (paired, session 32:
                    # fastest_expected x1.02, closest x0.99-1.03)
                    rows = [k for k in pending if k != "vclock"]
                    pending = {**pending, **dict(zip(rows, materialize(*(pending[k] for k in rows)), strict=True))}
                st, pending, outs = step(q + i, st, pending, outs, i == 0)
            return q + UNROLL, st, pending, outs

        state = {**init_lanes(params, batch), "tables": tables}
        # UNROLL - 1 spare slots: the last iteration may run past Q (its slots are padding, their outcomes dropped)
        outs = (Outcome(*[jnp.full((q_count + UNROLL - 1, batch), -1, jnp.int32) for _ in range(6)]) if outcomes
                else None)
        _, final, pending, outs = jax.lax.while_loop(cond, body, (jnp.int32(0), state, no_update(batch), outs))
        outs = jax.tree.map(lambda x: x[:q_count], outs) if outcomes else None
        return jnp.moveaxis(apply_lanes(params, final, pending)["counts"], -1, 0), outs

    counts, outs = [], []
    for lanes in laid.chunks:
        c, out = run(lanes)
        counts.append(c)
        outs.append(out)
    # lane i holds trace order[i]: back to the caller's order
    inverse = jnp.zeros_like(laid.order).at[laid.order].set(jnp.arange(laid.order.shape[0], dtype=jnp.int32))
    out = jax.tree.map(lambda *xs: jnp.concatenate([x.T for x in xs])[inverse], *outs) if outcomes else None
    return jnp.concatenate(counts)[inverse], out
