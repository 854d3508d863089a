"""Types of the ASET edge-cluster simulator and environment (Jumanji-style, all pytrees).

Shape letters used throughout :mod:`respect_jax.edge_cluster`:

* ``N`` traffic sources, ``S`` sites, ``A`` applications, ``V`` model variants (global list),
* ``K`` worker slots: every worker of every site, site by site (``EdgeParams.slot_site``),
* ``L`` ring length of the recent-history buffers (observation features only),
* ``Q`` query slots of a trace (valid queries first, padding after),
* ``G`` knots of a time profile (:data:`PROFILE_KNOTS`), ``E`` random events per app or site (:data:`MAX_EVENTS`).

Every time is an ``int32`` number of microseconds, so the JAX simulator and the Python reference
compute bit-identical outcomes (no float rounding anywhere in the dynamics).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from respect_jax import pytree as struct

# The graph scheduler's TimeStep (step_type FIRST/MID/LAST, reward, discount, observation, extras):
# here reward is 1 when the query just dispatched succeeds (ASET's success ratio is the mean reward) and
# extras holds that query's Outcome fields and the running counts i32[A, 5].
from respect_jax.env.types import FIRST, LAST, MID, TimeStep  # noqa: F401

# per-query outcome codes (INVALID marks trace padding)
INVALID = -1
SUCCESS, LOW_ACCURACY, LATE, EXPIRED, DROPPED = 0, 1, 2, 3, 4
OUTCOMES = ("success", "low_accuracy", "late", "expired", "dropped")

PROFILE_KNOTS = 33  # G: every time profile is resampled to this many evenly spaced knots over the horizon
MAX_EVENTS = 8  # E: most bursts per app (or network spikes per site) of one trace
NEVER = 2**30  # a time above any reachable one, µs (empty history slots, masked minima)
MAX_TIME_US = 10**9  # horizon bound (1000 s): every reachable time stays < 2**31


@struct.dataclass
class EdgeParams:
    """One scenario's cluster, network and applications (vmappable; every field an array).

    Attributes:
        slot_site: i32[K] site of each worker slot (sorted; a site with ``w`` workers has ``w`` slots).
        max_wait_us: i32[S] a query waiting longer than this at a site (from its arrival there) is dropped.
        rtt_us: i32[N, S] nominal round-trip network time source -> site -> source.
        jitter_us: i32[N, S] jitter scale: a query's round trip is ``rtt + jitter * e / 100`` with its
            pre-drawn ``e = Trace.jitter_pct`` (100 x an Exp(1) draw).
        proc_us: i32[S, V] nominal processing time of variant ``v`` on one worker of site ``s``.
        fluid_us: i32[S, V] ``ceil(proc_us / workers)``: how far one such query advances the
            dispatcher's virtual clock of the site (its share of the site's capacity).
        accuracy_pm: i32[V] top-1 accuracy of each variant, per mille.
        min_accuracy_pm: i32[A] accuracy an application requires, per mille.
        deadline_us: i32[A] end-to-end deadline (dispatch to answer back at the source).
        variant_mask: bool[A, V] variants an application may use (its model family).
        nominal_rate: f32[A] total arrival rate of each application at load 1.0, queries/s
            (only normalises the agent's rate features).
    """

    slot_site: jax.Array
    max_wait_us: jax.Array
    rtt_us: jax.Array
    jitter_us: jax.Array
    proc_us: jax.Array
    fluid_us: jax.Array
    accuracy_pm: jax.Array
    min_accuracy_pm: jax.Array
    deadline_us: jax.Array
    variant_mask: jax.Array
    nominal_rate: jax.Array

    @property
    def num_sites(self) -> int:
        return int(self.proc_us.shape[-2])

    @property
    def num_variants(self) -> int:
        return int(self.proc_us.shape[-1])

    @property
    def num_actions(self) -> int:
        return self.num_sites * self.num_variants

    @property
    def num_sources(self) -> int:
        return int(self.rtt_us.shape[-2])

    @property
    def num_apps(self) -> int:
        return int(self.deadline_us.shape[-1])

    @property
    def workers(self) -> jax.Array:
        """i32[S] real workers per site."""
        sites = jnp.arange(self.num_sites)
        return jnp.sum(self.slot_site[..., None, :] == sites[:, None], axis=-1).astype(jnp.int32)


@struct.dataclass
class Trace:
    """A pre-drawn workload: every random number either simulator needs (leading axis Q).

    Valid queries come first, sorted by arrival time; ``valid`` is False on the padding after them.

    Attributes:
        time_us: i32[Q] arrival (= dispatch) time at the source.
        source: i32[Q] traffic source; app: i32[Q] application.
        jitter_pct: i32[Q] 100 x Exp(1) draw scaling the network jitter of every path (clipped at 1000).
        service_pct: i32[Q] processing-time factor in percent (``100 + 100*cv*(Exp(1)-1)``, clipped to [10, 1000]).
        rand: i32[Q] uniform integer in [0, 2**30) (the random policy's choice).
        valid: bool[Q] real query (False = padding).
        net_pct: i32[Q, S] network-delay factor of each site's path in percent at the query's dispatch
            (:class:`Dynamics`; 100 = nominal): its round trip is ``rtt * f // 100 + (jitter * f // 100) * e // 100``.
        slow_pct: i32[Q, S] processing-time factor of each site in percent at the query's dispatch (100 = nominal).
    """

    time_us: jax.Array
    source: jax.Array
    app: jax.Array
    jitter_pct: jax.Array
    service_pct: jax.Array
    rand: jax.Array
    valid: jax.Array
    net_pct: jax.Array
    slow_pct: jax.Array

    @property
    def num_valid(self) -> jax.Array:
        """i32[] (or i32[B]) number of real queries."""
        return jnp.sum(self.valid, axis=-1).astype(jnp.int32)


@struct.dataclass
class Dynamics:
    """Conditions that change within a trace (vmappable; a scenario without ``dynamics`` has neutral ones).

    A profile is a multiplier at ``G`` evenly spaced times from 0 to the horizon (linear in between). Each
    trace starts its profiles at a random phase ``u * shift`` (``u`` uniform in [0, 1)) of the horizon,
    wrapping around, and places its bursts and spikes uniformly at random over the horizon.

    Attributes:
        app_profile: f32[A, G] arrival-rate multiplier of each application (diurnal ramps).
        app_bursts: i32[A] bursts per trace (<= E); app_burst_factor: f32[A] rate multiplier inside a burst;
            app_burst_s: f32[A] burst length, seconds.
        site_net: f32[S, G] network-delay multiplier of every path to the site (RTT and jitter scale).
        site_spikes: i32[S] network spikes per trace (<= E); site_spike_factor: f32[S] extra multiplier inside
            a spike; site_spike_s: f32[S] spike length, seconds.
        site_slow: f32[S, G] processing-time multiplier of the site (1 = nominal; large = degraded or failed).
        shift: f32[] largest random phase of the profiles, as a fraction of the horizon.
    """

    app_profile: jax.Array
    app_bursts: jax.Array
    app_burst_factor: jax.Array
    app_burst_s: jax.Array
    site_net: jax.Array
    site_spikes: jax.Array
    site_spike_factor: jax.Array
    site_spike_s: jax.Array
    site_slow: jax.Array
    shift: jax.Array


def app_peaks(dyn: Dynamics) -> jax.Array:
    """f32[A] largest rate multiplier of each app's profile and bursts (its thinning envelope)."""
    burst = jnp.where(dyn.app_bursts > 0, jnp.maximum(dyn.app_burst_factor, 1.0), 1.0)
    return jnp.max(dyn.app_profile, axis=-1) * burst


# one query is a Trace of scalars
Query = Trace


def query_at(trace: Trace, i: jax.Array) -> Trace:
    """The query in slot ``i`` of a single (unbatched) trace, as a Trace of scalars."""
    return jax.tree.map(lambda x: x[i], trace)


@struct.dataclass
class SimState:
    """Dynamic state of the cluster after some dispatches.

    Dynamics (exact):
        busy_us: i32[K] time each worker slot finishes the work committed to it.
        hol_us: i32[S] time the previous query dispatched to the site left its queue (head-of-line).
    Dispatcher bookkeeping (what a controller knows without asking the sites):
        vclock_us: i32[S] fluid virtual clock of the nominal work sent to the site; the estimated
            backlog at time t is ``max(0, vclock - t)``.
    Recent history (observation features):
        ring_done_us: i32[S, L] when each of the site's last L queries leaves processing
            (finish or removal); a query is pending at t while ``t < done``.
        ring_work_us: i32[S, L] nominal processing time of those queries.
        ring_resolve_us: i32[S, L] when their answer (or removal) is known at the source (NEVER = empty slot);
            the measurements below are known to the dispatcher from then on.
        ring_queue_us: i32[S, L] measured wait at the site (start, or removal, minus arrival there).
        ring_net_pct: i32[S, L] measured round trip in percent of the nominal RTT of its path.
        ring_proc_pct: i32[S, L] measured processing time in percent of the nominal one (100 if removed).
        ring_pos: i32[S] next ring slot per site.
        app_arrival_us: i32[A, L] arrival times of each app's last L queries (-NEVER = empty slot).
        app_resolve_us: i32[A, L] when their outcome is known at the source (NEVER = empty slot).
        app_ok: bool[A, L] whether they succeeded.
        app_slack_us: i32[A, L] their slack: deadline minus answer time (minus the deadline if removed).
        app_pos: i32[A] next ring slot per app.
    Counters:
        counts: i32[A, 5] outcomes so far per app and code (SUCCESS..DROPPED), counted at dispatch.
        now_us: i32[] time of the last dispatched query.
    """

    busy_us: jax.Array
    hol_us: jax.Array
    vclock_us: jax.Array
    ring_done_us: jax.Array
    ring_work_us: jax.Array
    ring_resolve_us: jax.Array
    ring_queue_us: jax.Array
    ring_net_pct: jax.Array
    ring_proc_pct: jax.Array
    ring_pos: jax.Array
    app_arrival_us: jax.Array
    app_resolve_us: jax.Array
    app_ok: jax.Array
    app_slack_us: jax.Array
    app_pos: jax.Array
    counts: jax.Array
    now_us: jax.Array


@struct.dataclass
class Outcome:
    """What happened to one query (scalars; leading axis Q when stacked by a scan).

    Attributes:
        code: i32 SUCCESS, LOW_ACCURACY, LATE, EXPIRED, DROPPED (INVALID on padding).
        site, variant: i32 the dispatch decision.
        start_us: i32 processing start (-1 if removed from the queue).
        done_us: i32 processing end, or removal time.
        resolve_us: i32 when the outcome is known at the source: answer back (served) or removal.
    """

    code: jax.Array
    site: jax.Array
    variant: jax.Array
    start_us: jax.Array
    done_us: jax.Array
    resolve_us: jax.Array


@struct.dataclass
class Observation:
    """What a policy sees before dispatching the current query.

    Attributes:
        features: f32[F] the agent's continuous state (see :func:`respect_jax.edge_cluster.simulator.features`).
        action_mask: bool[S*V] allowed actions ``site * V + variant`` (all False after the episode).
        app: i32[] application of the current query; source: i32[] its traffic source.
    """

    features: jax.Array
    action_mask: jax.Array
    app: jax.Array
    source: jax.Array


@struct.dataclass
class State:
    """Environment state of one episode (one trace on one scenario).

    Attributes:
        params: the scenario (explicit, so a batch of scenarios vmaps).
        trace: the workload of this episode.
        sim: the cluster state.
        index: i32[] slot of the query to dispatch next; the episode ends at ``trace.num_valid``.
    """

    params: EdgeParams
    trace: Trace
    sim: SimState
    index: jax.Array


# ------------------------------------------------------------------ what a dispatcher computes from these
Policy = Callable[[EdgeParams, SimState, Trace], jax.Array]
"""A dispatch policy: ``(params, sim, query) -> action`` i32[] (``site * V + variant``)."""


def action_mask(params: EdgeParams, query: Trace) -> jax.Array:
    """bool[S*V] actions allowed for the query: any site, any variant of its app's family."""
    mask = jnp.broadcast_to(params.variant_mask[query.app], params.proc_us.shape)
    return mask.reshape(-1) & query.valid


def backlog_estimate(params: EdgeParams, sim: SimState, at_us: jax.Array) -> jax.Array:
    """i32[S] the dispatcher's estimate of each site's queueing delay for a query reaching it at ``at_us``."""
    return jnp.maximum(sim.vclock_us - at_us, 0)


def first_argmin(x: jax.Array) -> jax.Array:
    """i32[...] index of the first minimum along the last axis.

    Two plain min-reductions (value, then smallest index holding it): on XLA CPU they vectorise,
    unlike the variadic reduction of ``jnp.argmin``.
    """
    n = x.shape[-1]
    low = jnp.min(x, axis=-1, keepdims=True)
    return jnp.min(jnp.where(x == low, jnp.arange(n, dtype=jnp.int32), n), axis=-1).astype(jnp.int32)
