"""Online HRT/SRT scheduling on heterogeneous accelerators as a pure JAX environment.

Event semantics (the plain-Python :mod:`respect_jax.realtime.reference` simulator implements the
same rules independently):

* The state is always at a **decision point**: some (sub-job, accelerator) pair may start now
  (:func:`pair_mask`), or the episode is done.
* One :meth:`RTEnv.step` = one decision. The policy's :class:`~.types.Action` selects the ready
  sub-job of highest priority and, for it, the allowed accelerator of highest preference: the
  **proposal** ``(x, m)``, to start at ``t`` and run non-preemptively.
* With the safety layer on, the proposal is certified by :func:`.safety.certify`. If it is
  rejected the environment executes the **reference prefix** instead: the reference sub-job due
  now (``s_R = t``) if there is one; else the reference's next sub-job on ``m`` started early if
  that certifies; else ``m`` is held idle until the next event (``blocked``). After every
  dispatch the reference is refreshed (kept if the refresh fails the exact check).
* After the step, time advances to the next event while no pair may start: an accelerator
  becoming idle, a release, predecessor data arriving, or a reference start. Blocks clear when
  time advances. The episode ends when every real sub-job has been dispatched (their finish times
  are then known).

``reset``/``step`` are pure; vmap them (``batch_reset``/``batch_step``) and roll them out with
``lax.scan`` or ``lax.while_loop`` (:func:`rollout`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from respect_jax.env.types import Environment
from respect_jax.realtime.safety import certify, certify_all, ready_times, reference_schedule
from respect_jax.realtime.types import (
    FIRST,
    INF,
    LAST,
    MID,
    SLACK_NONE,
    Action,
    Observation,
    RTParams,
    RTState,
    TimeStep,
)

Policy = Callable[[Observation, RTState, jax.Array], Action]
METRIC_KEYS = (
    "hrt_jobs",
    "hrt_missed",
    "srt_jobs",
    "srt_met",
    "jain",
    "utilisation",
    "work_utilisation",
    "makespan",
    "decisions",
    "proposals",
    "overrides",
    "fallbacks",
    "violation",
)


def pair_mask(state: RTState) -> jax.Array:
    """bool[S, M] pairs that may start at ``state.t`` (see :class:`~.types.Observation`)."""
    p = state.params
    ready = ready_times(p, state.finish, state.machine)
    idle = (state.free_at <= state.t) & ~state.blocked
    todo = p.valid & (state.finish >= INF)
    return todo[:, None] & (ready <= state.t) & idle[None, :] & ~state.done


def _jobs(p: RTParams, x: jax.Array) -> jax.Array:
    """Reshape a per-sub-job array [S, ...] to [J, G, ...]."""
    return x.reshape((x.shape[0] // p.groups, p.groups) + x.shape[1:])


def job_outcomes(p: RTParams, finish: jax.Array) -> dict:
    """Per-job status from sub-job finish times.

    Returns: ``real`` bool[J], ``complete`` bool[J] (every sub-job dispatched), ``finish`` i32[J],
    ``hrt`` bool[J], ``met`` bool[J] (complete and finished by the deadline), ``client`` i32[J].
    """
    valid = _jobs(p, p.valid)
    real = jnp.any(valid, axis=1)
    fin = _jobs(p, finish)
    complete = real & jnp.all(~valid | (fin < INF), axis=1)
    job_finish = jnp.max(jnp.where(valid, fin, 0), axis=1)
    deadline = _jobs(p, p.deadline)[:, 0]
    return {
        "real": real,
        "complete": complete,
        "finish": job_finish,
        "hrt": _jobs(p, p.is_hrt)[:, 0] & real,
        "met": complete & (job_finish <= deadline),
        "client": _jobs(p, p.client)[:, 0],
    }


def jain_index(x: jax.Array, mask: jax.Array) -> jax.Array:
    """f32[] Jain fairness ``(sum x)^2 / (n sum x^2)`` over the masked entries (1 if all are 0)."""
    x = jnp.where(mask, x, 0.0)
    n = jnp.sum(mask)
    sq = jnp.sum(x * x)
    return jnp.where((n > 0) & (sq > 0), jnp.sum(x) ** 2 / jnp.maximum(n * sq, 1e-30), 1.0).astype(jnp.float32)


def client_counts(p: RTParams, finish: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """f32[C] SRT jobs per client, met per client, and finished (known outcome) per client."""
    o = job_outcomes(p, finish)
    onehot = (o["client"][:, None] == jnp.arange(p.clients)[None, :]) & (o["real"] & ~o["hrt"])[:, None]
    total = jnp.sum(onehot, axis=0).astype(jnp.float32)
    met = jnp.sum(onehot & o["met"][:, None], axis=0).astype(jnp.float32)
    done = jnp.sum(onehot & o["complete"][:, None], axis=0).astype(jnp.float32)
    return total, met, done


def episode_metrics(state: RTState) -> dict:
    """Metrics of a finished episode (all f32[] / i32[] / bool[]; see :data:`METRIC_KEYS`).

    ``jain`` is over the per-client SRT satisfaction rates of clients with at least one job;
    ``utilisation`` is the mean over accelerators of busy time / makespan; ``work_utilisation`` (issue 31) is the
    scenario's work W / (M x makespan), W = the sum over its sub-jobs of their mean time over the accelerators (the
    unit of the generator's offered utilisation): the same W whatever the schedule, so unlike ``utilisation`` it does
    not grow when the same jobs run on slower accelerators, only when they finish earlier.
    """
    p = state.params
    o = job_outcomes(p, state.finish)
    total, met, _ = client_counts(p, state.finish)
    rate = met / jnp.maximum(total, 1.0)
    makespan = jnp.max(jnp.where(p.valid, state.finish, 0))
    work = jnp.sum(jnp.where(p.valid, jnp.mean(p.exec_us.astype(jnp.float32), axis=-1), 0.0))
    return {
        "hrt_jobs": jnp.sum(o["hrt"]).astype(jnp.int32),
        "hrt_missed": jnp.sum(o["hrt"] & ~o["met"]).astype(jnp.int32),
        "srt_jobs": jnp.sum(o["real"] & ~o["hrt"]).astype(jnp.int32),
        "srt_met": jnp.sum(o["real"] & ~o["hrt"] & o["met"]).astype(jnp.int32),
        "jain": jain_index(rate, total > 0),
        "utilisation": jnp.mean(state.busy_us / jnp.maximum(makespan, 1).astype(jnp.float32)).astype(jnp.float32),
        "work_utilisation": (work / (p.exec_us.shape[-1] * jnp.maximum(makespan, 1))).astype(jnp.float32),
        "makespan": makespan.astype(jnp.int32),
        "decisions": state.steps,
        "proposals": state.proposals,
        "overrides": state.overrides,
        "fallbacks": state.fallbacks,
        "violation": state.violation,
    }


def _zero_metrics() -> dict:
    z = {k: jnp.int32(0) for k in METRIC_KEYS}
    z.update(jain=jnp.float32(0.0), utilisation=jnp.float32(0.0), work_utilisation=jnp.float32(0.0),
             violation=jnp.bool_(False))  # fmt: skip
    return z


class RTEnv(Environment):
    """HRT/SRT scheduling environment.

    Args:
        safety: run the safety layer (False = the policy's proposals always execute).
        refresh: re-run the reference scheduler after every dispatch (False = keep ``R'``).
        hrt_penalty: reward weight of an HRT miss (per HRT job, normalised by their count).
        override_penalty: reward subtracted when the safety layer rejects a proposal.
    """

    def __init__(
        self, safety: bool = True, refresh: bool = True, hrt_penalty: float = 4.0, override_penalty: float = 0.0
    ):
        self.safety, self.refresh = bool(safety), bool(refresh)
        self.hrt_penalty, self.override_penalty = float(hrt_penalty), float(override_penalty)

    # ------------------------------------------------------------------ reset
    def reset(self, key: jax.Array, params: RTParams | None = None) -> tuple[RTState, TimeStep]:
        """Start an episode on the packed scenario ``params`` (:func:`.tasks.pack`). Every release and
        execution time is in the scenario (drawn by :mod:`.generator`), so ``key`` is not used."""
        if params is None:
            raise ValueError("RTEnv.reset(key, params) needs the packed scenario (respect_jax.realtime.tasks.pack)")
        return self.reset_scenario(params)

    def action_spec(self, params: RTParams | None = None) -> Action:
        """A priority per sub-job f32[S] and an accelerator preference per sub-job f32[S, M]."""
        if params is None:
            raise ValueError("RTEnv.action_spec(params) needs the packed scenario (its S and M)")
        s_n, m_n = params.exec_us.shape[-2:]
        return Action(
            priority=jax.ShapeDtypeStruct((s_n,), jnp.float32),
            machine_pref=jax.ShapeDtypeStruct((s_n, m_n), jnp.float32),
        )

    def reset_scenario(self, params: RTParams) -> tuple[RTState, TimeStep]:
        """Start an episode on one scenario at time 0 and advance to the first decision point."""
        s_n, m_n = params.exec_us.shape
        state = RTState(
            params=params,
            t=jnp.int32(0),
            start=jnp.full((s_n,), INF, jnp.int32),
            finish=jnp.full((s_n,), INF, jnp.int32),
            machine=jnp.full((s_n,), -1, jnp.int32),
            free_at=jnp.zeros((m_n,), jnp.int32),
            busy_us=jnp.zeros((m_n,), jnp.int32),
            ref_start=jnp.full((s_n,), INF, jnp.int32),
            ref_machine=jnp.full((s_n,), -1, jnp.int32),
            blocked=jnp.zeros((m_n,), bool),
            done=jnp.bool_(False),
            steps=jnp.int32(0),
            proposals=jnp.int32(0),
            overrides=jnp.int32(0),
            fallbacks=jnp.int32(0),
            refresh_failures=jnp.int32(0),
            violation=jnp.bool_(False),
        )
        if self.safety:
            r_start, r_mach, _ = reference_schedule(params, state.t, state.free_at, state.finish, state.machine)
            state = state.replace(ref_start=r_start, ref_machine=r_mach)
        state = self._advance(state)
        extras = self._step_extras(jnp.int32(-1), jnp.int32(-1), jnp.int32(-1), jnp.int32(-1), jnp.bool_(False))
        extras.update(self._final(state))
        ts = TimeStep(
            step_type=jnp.where(state.done, LAST, FIRST).astype(jnp.int32),
            reward=jnp.float32(0.0),
            discount=jnp.where(state.done, 0.0, 1.0).astype(jnp.float32),
            observation=self.observe(state),
            extras=extras,
        )
        return state, ts

    def batch_reset(self, params: RTParams) -> tuple[RTState, TimeStep]:
        """:meth:`reset_scenario` over a batch of scenarios (leading axis B)."""
        return jax.vmap(self.reset_scenario)(params)

    # ------------------------------------------------------------------ step
    def step(self, state: RTState, action: Action) -> tuple[RTState, TimeStep]:
        """One decision (a no-op with zero reward once the episode is done)."""
        p = state.params
        mask = pair_mask(state)
        active = ~state.done & jnp.any(mask)
        j, m = self.propose(mask, action)
        violation = state.violation
        if self.safety:
            accepted, x, mx, dispatch, bad = self.safety_decision(state, mask, j, m)
            dispatch = active & dispatch
            violation = violation | (active & bad)
            override = active & ~accepted
        else:
            accepted, x, mx, dispatch, override = active, j, m, active, jnp.bool_(False)
        new = self._dispatch(state, x, mx, dispatch)
        if self.safety:
            new = self._update_reference(new, x, dispatch)
            # a held accelerator stays idle until the next event; a dispatch (and the reference's refresh, which
            # may now start a sub-job on a held accelerator at t) frees every one of them
            hold = (jnp.arange(p.exec_us.shape[1]) == m) & active & ~dispatch
            new = new.replace(blocked=jnp.where(dispatch, False, new.blocked | hold))
        new = new.replace(
            steps=state.steps + active,
            proposals=state.proposals + active,
            overrides=state.overrides + override,
            fallbacks=state.fallbacks + (override & dispatch),
            violation=violation,
        )
        new = self._advance(new)
        reward = self._reward(state, new) - self.override_penalty * override.astype(jnp.float32)
        extras = self._step_extras(j, m, jnp.where(dispatch, x, -1), jnp.where(dispatch, mx, -1), accepted & active)
        extras["override"] = override
        finished = active & new.done
        final = jax.tree.map(lambda v, z: jnp.where(finished, v, z), self._final(new), _zero_metrics())
        extras.update(final)
        ts = TimeStep(
            step_type=jnp.where(new.done, LAST, MID).astype(jnp.int32),
            reward=jnp.where(active, reward, 0.0).astype(jnp.float32),
            discount=jnp.where(new.done, 0.0, 1.0).astype(jnp.float32),
            observation=self.observe(new),
            extras=extras,
        )
        return new, ts

    def batch_step(self, state: RTState, action: Action) -> tuple[RTState, TimeStep]:
        """:meth:`step` over a batch (leading axis B)."""
        return jax.vmap(self.step)(state, action)

    # ------------------------------------------------------------------ pieces
    @staticmethod
    def propose(mask: jax.Array, action: Action) -> tuple[jax.Array, jax.Array]:
        """i32[] sub-job and i32[] accelerator the action proposes among the allowed pairs."""
        has = jnp.any(mask, axis=1)
        j = jnp.argmax(jnp.where(has, action.priority, -jnp.inf)).astype(jnp.int32)
        m = jnp.argmax(jnp.where(mask[j], action.machine_pref[j], -jnp.inf)).astype(jnp.int32)
        return j, m

    @staticmethod
    def safety_decision(
        state: RTState, mask: jax.Array, j: jax.Array, m: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
        """The safety layer's verdict on proposal ``(j, m)`` (refresh excluded, see
        :meth:`_update_reference`).

        Returns: ``accepted`` bool[], the sub-job and accelerator to dispatch (i32[] each),
        ``dispatch`` bool[] (False: hold ``m`` idle until the next event) and ``violation`` bool[]
        (a due reference pair is not startable or a reference start lies in the past: invariant I
        broken; never expected).
        """
        p, t = state.params, state.t
        accepted = certify(p, t, state.ref_start, state.ref_machine, j, m)
        in_ref = state.ref_machine >= 0
        due = in_ref & (state.ref_start <= t)
        has_due = jnp.any(due)
        y_due = jnp.argmin(jnp.where(due, state.ref_start, INF)).astype(jnp.int32)
        on_m = state.ref_machine == m
        first = jnp.argmin(jnp.where(on_m, state.ref_start, INF)).astype(jnp.int32)
        pull = jnp.any(on_m) & mask[first, m] & certify(p, t, state.ref_start, state.ref_machine, first, m)
        x = jnp.where(accepted, j, jnp.where(has_due, y_due, first))
        mx = jnp.where(accepted | ~has_due, m, state.ref_machine[y_due])
        dispatch = accepted | has_due | pull
        violation = ~accepted & has_due & ~mask[y_due, state.ref_machine[y_due]]
        violation = violation | jnp.any(in_ref & (state.ref_start < t))
        return accepted, x.astype(jnp.int32), mx.astype(jnp.int32), dispatch, violation

    @staticmethod
    def _dispatch(state: RTState, x: jax.Array, m: jax.Array, do: jax.Array) -> RTState:
        p = state.params
        c = p.exec_us[x, m]
        f = state.t + c
        sel = (jnp.arange(p.exec_us.shape[0]) == x) & do
        msel = (jnp.arange(p.exec_us.shape[1]) == m) & do
        return state.replace(
            start=jnp.where(sel, state.t, state.start),
            finish=jnp.where(sel, f, state.finish),
            machine=jnp.where(sel, m, state.machine),
            free_at=jnp.where(msel, f, state.free_at),
            busy_us=jnp.where(msel, state.busy_us + c, state.busy_us),
        )

    def _update_reference(self, state: RTState, x: jax.Array, dispatched: jax.Array) -> RTState:
        """Drop ``x`` from the reference (``R'``); then refresh it if the refresh is feasible."""
        gone = (jnp.arange(state.ref_start.shape[0]) == x) & dispatched
        r_start = jnp.where(gone, INF, state.ref_start)
        r_mach = jnp.where(gone, -1, state.ref_machine)
        failures = state.refresh_failures
        if self.refresh:
            n_start, n_mach, ok = reference_schedule(state.params, state.t, state.free_at, state.finish, state.machine)
            use = dispatched & ok
            r_start = jnp.where(use, n_start, r_start)
            r_mach = jnp.where(use, n_mach, r_mach)
            failures = failures + (dispatched & ~ok)
        return state.replace(ref_start=r_start, ref_machine=r_mach, refresh_failures=failures)

    @staticmethod
    def next_event(state: RTState) -> jax.Array:
        """i32[] the earliest event strictly after ``t`` (INF if none)."""
        p, t = state.params, state.t
        todo = p.valid & (state.finish >= INF)
        ready = ready_times(p, state.finish, state.machine)
        cands = jnp.concatenate([state.free_at, jnp.where(todo[:, None], ready, INF).reshape(-1), state.ref_start])
        return jnp.min(jnp.where((cands > t) & (cands < INF), cands, INF))

    def _advance(self, state: RTState) -> RTState:
        """Move time forward until some pair may start or every sub-job is dispatched."""

        def finished(st: RTState) -> jax.Array:
            return ~jnp.any(st.params.valid & (st.finish >= INF))

        def cond(st: RTState) -> jax.Array:
            return ~st.done & ~jnp.any(pair_mask(st))

        def body(st: RTState) -> RTState:
            all_done = finished(st)
            tn = self.next_event(st)
            stuck = ~all_done & (tn >= INF)
            return st.replace(
                t=jnp.where(all_done | stuck, st.t, tn).astype(jnp.int32),
                blocked=jnp.zeros_like(st.blocked),
                done=all_done | stuck,
                violation=st.violation | stuck,
            )

        state = state.replace(done=state.done | finished(state))
        return jax.lax.while_loop(cond, body, state)

    def _reward(self, old: RTState, new: RTState) -> jax.Array:
        p = new.params
        before = job_outcomes(p, old.finish)["complete"]
        o = job_outcomes(p, new.finish)
        newly = o["complete"] & ~before
        n_srt = jnp.maximum(jnp.sum(o["real"] & ~o["hrt"]), 1)
        n_hrt = jnp.maximum(jnp.sum(o["hrt"]), 1)
        srt_gain = jnp.sum(newly & ~o["hrt"] & o["met"]) / n_srt
        hrt_loss = jnp.sum(newly & o["hrt"] & ~o["met"]) / n_hrt
        return (srt_gain - self.hrt_penalty * hrt_loss).astype(jnp.float32)

    @staticmethod
    def _step_extras(j, m, x, mx, accepted) -> dict:
        return {
            "proposed": jnp.stack([j, m]).astype(jnp.int32),
            "dispatched": jnp.stack([x, mx]).astype(jnp.int32),
            "accepted": jnp.asarray(accepted, bool),
            "override": jnp.bool_(False),
        }

    @staticmethod
    def _final(state: RTState) -> dict:
        return episode_metrics(state)

    # ------------------------------------------------------------------ observation
    @staticmethod
    def observe(state: RTState) -> Observation:
        p = state.params
        dispatched = state.finish < INF
        min_exec = jnp.min(p.exec_us, axis=1)
        left = _jobs(p, jnp.where(p.valid & ~dispatched, min_exec, 0))
        job_rem = jnp.repeat(jnp.sum(left, axis=1), p.groups)
        total, met, done = client_counts(p, state.finish)
        del total
        mask = pair_mask(state)
        t = state.t
        in_ref = state.ref_machine >= 0
        on_m = state.ref_machine[None, :] == jnp.arange(p.exec_us.shape[1])[:, None]  # [M, S]
        cuts = jnp.min(jnp.where(on_m, state.ref_start[None, :], INF), axis=1)
        return Observation(
            time=t,
            pair_mask=mask,
            exec_us=p.exec_us,
            release=p.release,
            deadline=p.deadline,
            is_hrt=p.is_hrt,
            client=p.client,
            rank_u=p.rank_u,
            valid=p.valid,
            dispatched=dispatched,
            job_remaining_us=job_rem.astype(jnp.int32),
            free_in_us=jnp.maximum(state.free_at - state.t, 0),
            client_met=met,
            client_done=done,
            cp_after_us=p.cp_after,
            certifiable=mask & certify_all(p, t, state.ref_start, state.ref_machine),
            ref_slack_us=jnp.where(in_ref, state.ref_start - t, SLACK_NONE).astype(jnp.int32),
            cut_in_us=jnp.where(cuts < INF, cuts - t, SLACK_NONE).astype(jnp.int32),
        )


def rollout(env: RTEnv, params: RTParams, policy: Policy, key: jax.Array, max_steps: int) -> tuple[RTState, dict]:
    """Run a batch of episodes to the end with ``lax.while_loop`` (at most ``max_steps`` decisions).

    Args:
        params: RTParams with leading axis B.
        policy: ``(obs, state, key) -> Action`` for ONE episode (vmapped here).
    Returns:
        the final states (axis B) and :func:`episode_metrics` (each value [B]) plus ``finished``
        bool[B] (False if ``max_steps`` ran out).
    """
    state, ts = env.batch_reset(params)
    b = params.valid.shape[0]

    def cond(carry):
        st, _, k = carry
        return jnp.any(~st.done) & (k < max_steps)

    def body(carry):
        st, key, k = carry
        key, sub = jax.random.split(key)
        obs = jax.vmap(env.observe)(st)
        action = jax.vmap(policy)(obs, st, jax.random.split(sub, b))
        st, _ = env.batch_step(st, action)
        return st, key, k + 1

    state, _, _ = jax.lax.while_loop(cond, body, (state, key, jnp.int32(0)))
    metrics = jax.vmap(episode_metrics)(state)
    metrics["finished"] = state.done
    return state, metrics
