"""Workload generator: pre-drawn, seeded query traces (pure JAX; jit and vmap over keys and rates).

Arrivals of every (source, app) pair are an inhomogeneous Poisson process with rate
``rate[n, a] * m_n(t)``, drawn by thinning: ``Q`` candidates of a homogeneous process at the
envelope rate ``sum(rate) * peak`` (gaps rounded to whole microseconds, summed exactly in int32), each
labelled with a pair drawn proportionally to ``rate`` and kept with probability ``m_n(t) / peak``.
The modulation ``m_n`` is 1 (``poisson``), a two-state calm/burst Markov chain per source
(``mmpp``, normalised so its long-run mean is 1) or ``1 + amplitude * sin(2 pi t / period + phase_n)``
(``diurnal``). Rejected candidates and candidates past the horizon become padding; valid queries are
moved to the front in time order. Conditions that change within the trace
(:class:`~respect_jax.edge_cluster.types.Dynamics`: per-app rate profiles and bursts, per-site network delay
profiles and spikes, per-site processing slow-downs) multiply the app's rate (thinning again, against the app's
peak multiplier) and are written into every query as per-site percent factors (``net_pct``, ``slow_pct``) taken
at its dispatch time. Every other random number the simulators use (network jitter,
processing noise, the random policy's choice) is drawn here too, so the JAX simulator and the
Python reference consume the same randomness.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from respect_jax.edge_cluster.scenarios import TraceConfig
from respect_jax.edge_cluster.types import MAX_EVENTS, Dynamics, Trace, app_peaks

_CAP = 2**30 - 1  # "beyond every horizon" time, µs
MAX_NET_PCT = 5000  # network factors are clipped to x50 (scenarios validate RTT x factor <= 1000 ms)
MAX_SLOW_PCT = 10000  # processing factors are clipped to x100 (scenarios validate proc x factor <= 2000 ms)
_DYN_SALT = 0x5EED  # the conditions' randomness comes from fold_in(key, _DYN_SALT): other draws are unchanged


def profile_at(knots: jax.Array, x: jax.Array) -> jax.Array:
    """Piecewise-linear profiles at phases ``x`` f32[Q] in [0, 1]: knots f32[X, G] -> f32[Q, X]."""
    g = knots.shape[-1]
    pos = jnp.clip(x, 0.0, 1.0) * (g - 1)
    i0 = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, g - 2)
    w = (pos - i0)[:, None]
    return knots.T[i0] * (1.0 - w) + knots.T[i0 + 1] * w


def _windows(key: jax.Array, count: jax.Array, length_s: jax.Array, horizon_s: float, times_s: jax.Array,
             max_events: int) -> jax.Array:
    """bool[Q, X]: query time inside one of the ``count[x]`` windows of ``length_s[x]`` seconds placed uniformly
    at random over the horizon (``max_events`` drawn per x, the first ``count[x]`` used)."""
    starts = jax.random.uniform(key, (count.shape[0], max_events)) * horizon_s  # [X, E]
    used = jnp.arange(max_events)[None, :] < count[:, None]
    t = times_s[:, None, None]
    inside = (t >= starts[None]) & (t < starts[None] + length_s[None, :, None])
    return jnp.any(inside & used[None], axis=-1)


def _cumsum_us(gaps: jax.Array, limit_us: int) -> jax.Array:
    """Exact inclusive cumulative sum of non-negative i32 microsecond gaps, up to ``limit_us``.

    The int32 sum is exact while it stays below 2**31; a float32 sum beside it marks where the true
    sum is surely past ``1.05 * limit_us`` (and the int32 sum may have wrapped); those entries are
    set to ``_CAP``. Cheap to compile, unlike a saturating ``associative_scan``.
    """
    exact = jnp.cumsum(gaps, axis=-1, dtype=jnp.int32)
    approx = jnp.cumsum(gaps.astype(jnp.float32), axis=-1)
    return jnp.where(approx < 1.05 * limit_us + 1.0, exact, _CAP)


def _exponential(u: jax.Array) -> jax.Array:
    """Exp(1) draws from uniforms in [0, 1) (inverse CDF)."""
    return -jnp.log1p(-u)


def _to_us(seconds: jax.Array) -> jax.Array:
    """Seconds -> i32 microseconds, rounded to the nearest: an exponential gap of mean 1/r keeps its mean
    to a relative -(r / 1e6)**2 / 24 (-0.17% at 200,000 queries/s; flooring lost 0.5 us per gap, -10% there)."""
    return jnp.clip(jnp.floor(seconds * 1e6 + 0.5), 0, _CAP).astype(jnp.int32)


def generate_trace(key: jax.Array, rate: jax.Array, cfg: TraceConfig, dyn: Dynamics, return_covered: bool = False):
    """One trace of ``cfg.max_queries`` slots.

    Args:
        key: PRNG key.
        rate: f32[N, A] mean arrival rate of each (source, app), queries/s (before the app profiles).
        cfg: static generator settings (pattern, horizon, Q).
        dyn: the conditions over time (:attr:`Scenario.dynamics`; neutral ones change nothing).
        return_covered: also return bool[]: the candidates reached the horizon (False means Q was
            too small and the trace ends early; scenarios size Q with an 8-sigma margin).
    Returns:
        :class:`Trace` with leading axis Q (and the flag when asked).
    """
    rate = jnp.asarray(rate, jnp.float32)
    n_src, n_app = rate.shape
    q = cfg.max_queries
    horizon_us = int(round(cfg.horizon_s * 1e6))
    k_u, k_bits, k_mod = jax.random.split(key, 3)
    # one draw for every per-query number (few PRNG calls compile much faster than many)
    u_gap, u_pair, u_keep, u_jit, u_svc = jax.random.uniform(k_u, (5, q))
    rand = (jax.random.bits(k_bits, (q,), jnp.uint32) >> 2).astype(jnp.int32)  # uniform in [0, 2**30)

    k_phase, k_burst, k_spike = jax.random.split(jax.random.fold_in(key, _DYN_SALT), 3)
    peaks = app_peaks(dyn)  # [A]
    envelope = (rate * peaks[None, :]).reshape(-1) * cfg.peak_factor
    total = jnp.sum(envelope)
    gaps = _to_us(_exponential(u_gap) / jnp.maximum(total, 1e-12))
    times = _cumsum_us(gaps, horizon_us)
    cdf = jnp.cumsum(envelope) / jnp.maximum(total, 1e-12)
    pair = jnp.minimum(jnp.sum(cdf[None, :] <= u_pair[:, None], axis=1), envelope.shape[0] - 1)
    pair = jnp.where(envelope[pair] > 0, pair, jnp.argmax(envelope > 0))  # never a zero-rate pair
    source, app = (pair // n_app).astype(jnp.int32), (pair % n_app).astype(jnp.int32)

    if cfg.pattern == "poisson":
        keep_p = jnp.ones((q,), jnp.float32)
    elif cfg.pattern == "mmpp":
        k = cfg.max_switches
        u_mod = jax.random.uniform(k_mod, (n_src, k + 1))
        burst0 = u_mod[:, 0] < cfg.burst_fraction  # stationary initial state
        parity = (jnp.arange(k) % 2).astype(bool)
        in_burst = burst0[:, None] ^ parity[None, :]  # state of sojourn k
        mean = jnp.where(in_burst, cfg.mean_burst_s, cfg.mean_calm_s)
        sojourn = _to_us(_exponential(u_mod[:, 1:]) * mean)
        switches = _cumsum_us(sojourn, horizon_us)  # [N, K] end of sojourn k
        passed = jnp.sum(switches[source] <= times[:, None], axis=1)
        burst_now = burst0[source] ^ (passed % 2 == 1)
        keep_p = jnp.where(burst_now, 1.0, 1.0 / cfg.burst_factor)
    elif cfg.pattern == "diurnal":
        phase = 2.0 * math.pi * cfg.phase_spread * jnp.arange(n_src) / n_src
        t_s = times.astype(jnp.float32) / 1e6
        level = 1.0 + cfg.amplitude * jnp.sin(2.0 * math.pi * t_s / cfg.period_s + phase[source])
        keep_p = level / (1.0 + cfg.amplitude)
    else:
        raise ValueError(f"unknown arrival pattern {cfg.pattern!r}")

    # conditions over time: profiles at the query's phase of the (randomly shifted) horizon, bursts and spikes
    times_s = times.astype(jnp.float32) / 1e6
    phase = jnp.mod(times_s / cfg.horizon_s + jax.random.uniform(k_phase) * dyn.shift, 1.0)
    in_burst = _windows(k_burst, dyn.app_bursts, dyn.app_burst_s, cfg.horizon_s, times_s, MAX_EVENTS)  # [Q, A]
    app_level = profile_at(dyn.app_profile, phase) * jnp.where(in_burst, dyn.app_burst_factor[None, :], 1.0)
    app_hot = jnp.arange(n_app)[None, :] == app[:, None]
    keep_p = keep_p * jnp.sum(jnp.where(app_hot, app_level / peaks[None, :], 0.0), axis=1)
    in_spike = _windows(k_spike, dyn.site_spikes, dyn.site_spike_s, cfg.horizon_s, times_s, MAX_EVENTS)  # [Q, S]
    net = profile_at(dyn.site_net, phase) * jnp.where(in_spike, dyn.site_spike_factor[None, :], 1.0)
    net_pct = jnp.clip(jnp.round(100.0 * net), 1, MAX_NET_PCT).astype(jnp.int32)
    slow_pct = jnp.clip(jnp.round(100.0 * profile_at(dyn.site_slow, phase)), 1, MAX_SLOW_PCT).astype(jnp.int32)

    valid = (u_keep < keep_p) & (times < horizon_us) & (total > 0)
    jitter_pct = jnp.minimum(jnp.round(100.0 * _exponential(u_jit)), 1000).astype(jnp.int32)
    noise = 100.0 + 100.0 * cfg.service_cv * (_exponential(u_svc) - 1.0)
    service_pct = jnp.clip(jnp.round(noise), 10, 1000).astype(jnp.int32)

    order = jnp.argsort(~valid, stable=True)  # valid first, in time order
    valid_sorted = valid[order]
    trace = Trace(
        time_us=jnp.where(valid_sorted, times[order], horizon_us),
        source=jnp.where(valid_sorted, source[order], 0),
        app=jnp.where(valid_sorted, app[order], 0),
        jitter_pct=jitter_pct[order],
        service_pct=service_pct[order],
        rand=rand[order],
        valid=valid_sorted,
        net_pct=net_pct[order],
        slow_pct=slow_pct[order],
    )
    if return_covered:
        return trace, (times[-1] >= horizon_us) | (total <= 0)
    return trace


@functools.lru_cache(maxsize=32)
def _batched_generator(cfg: TraceConfig):
    return jax.jit(jax.vmap(lambda k, r, d: generate_trace(k, r, cfg, d, return_covered=True), in_axes=(0, 0, None)))


def make_traces(key: jax.Array, rates: jax.Array, cfg: TraceConfig, dyn: Dynamics, return_covered: bool = False):
    """A batch of traces: ``rates`` f32[B, N, A] (one rate matrix per trace) -> Trace [B, Q], all with the
    conditions ``dyn`` (each trace draws its own phase, bursts and spikes).

    Trace ``b`` uses ``jax.random.split(key, B)[b]`` (compiled once per ``cfg`` and shape). With
    ``return_covered``: ``(traces, bool[B])``, False where the Q slots ran out before the horizon.
    """
    keys = jax.random.split(key, rates.shape[0])
    traces, covered = _batched_generator(cfg)(keys, jnp.asarray(rates, jnp.float32), dyn)
    return (traces, covered) if return_covered else traces
