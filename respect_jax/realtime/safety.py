r"""The runtime safety layer (pure JAX): a reference schedule and the prefix-replacement test.

Notation at a decision point (time ``t``): ``a_m`` is the time accelerator ``m`` becomes idle
(work already dispatched, HRT or SRT, is non-preemptive and its finish times are known);
``U`` is the set of HRT sub-jobs not yet dispatched. A **reference schedule** ``R`` gives every
``y in U`` an accelerator ``m_R(y)`` and a start ``s_R(y)``.

**Feasible reference (invariant I).** ``R`` is feasible for the current state when

1. ``s_R(y) >= t`` and ``s_R(y) >= a_{m_R(y)}`` (starts in the future, after the dispatched work);
2. sub-jobs on one accelerator do not overlap (``[s_R, s_R + c)`` intervals disjoint);
3. ``s_R(y) >= release(y)``;
4. for each predecessor ``p`` of ``y``: ``s_R(y) >= f(p) + delta(p, y) * [m(p) != m_R(y)]``, where
   ``f(p), m(p)`` are the actual finish/accelerator if ``p`` is dispatched, else ``R``'s;
5. every ``y`` finishes by its deadline: ``s_R(y) + c(y, m_R(y)) <= d(y)``.

**Reference scheduler** (:func:`reference_schedule`): deterministic list scheduling of ``U`` in
the static order (absolute deadline, job, group) -- precedence-consistent, since predecessors are
earlier groups of the same job -- each sub-job appended on the accelerator that finishes it
earliest (lowest index on ties), starting at ``max(t, a_m, ready on m, release)``. It satisfies
1-4 by construction; the **exact feasibility check** is condition 5 on the produced schedule.

**Prefix-replacement test** (:func:`certify`). The policy proposes to start ``x`` on idle ``m`` at
``t`` (finish ``f = t + c(x, m)``). Let ``R' = R \ {x}`` and ``cut_m = min{s_R(y) : y in R',
m_R(y) = m}`` (INF if none) -- the per-machine cut: where the reference's remaining work on ``m``
begins. Accept iff

* (C1) ``f <= cut_m``: the new prefix leaves ``m`` free no later than the reference needs it;
* (C2) if ``x`` is HRT, for every successor ``y`` of ``x``: ``f + delta(x, y)*[m != m_R(y)] <=
  s_R(y)`` (precedence preserved, also when ``x`` moved to another accelerator);
* (C3) if ``x`` is HRT, ``f <= d(x)``.

**Claim.** If I holds for ``R`` and the test accepts, then I holds for ``R'`` after dispatching
``x``. *Proof.* Only ``a_m`` changed, to ``f``; every ``y in R'`` on ``m`` starts at
``>= cut_m >= f`` (C1), so (1) holds; (2), (3) and (5) hold for a subset of ``R``; in (4) only
predecessors equal to ``x`` changed (their finish and accelerator are now actual), covered by
(C2); ``x`` itself is released, its predecessors' data arrived (the environment only offers ready
pairs) and it meets its deadline (C3). []

**Events never skip the reference.** Time only advances to the next event, and the reference
starts ``s_R`` are events; a due sub-job (``s_R(y) = t``) is a valid pair (by (1) and (4)) and
certifies trivially, and on a rejection the environment dispatches it (the reference prefix).
When nothing is due, the fallback may start the reference's next sub-job on ``m`` early; that
dispatch goes through the same test, so the claim above covers it. When it cannot, ``m`` is held
idle until the next event; every dispatch releases the held accelerators, because the refresh
after it may put a reference start at ``t`` on one of them (holding it then let time pass that
start: found by fuzzing, 13 of ~7,700 episodes, before the release was added).
So ``s_R(y) >= t`` keeps holding and every HRT sub-job is eventually dispatched with the
precedence, release and deadline guarantees of (3)-(5).

**Refresh.** After every dispatch the reference scheduler is re-run from the new state; its
result replaces ``R'`` only if it passes the exact check, so I is never lost.

**Theorem.** If the reference scheduler meets every HRT deadline at time 0 (the scenario is
*certified*), every HRT job meets its deadline under the safety layer, whatever the policy
proposes. Scenarios that are not certified are rejected up front
(:func:`respect_jax.realtime.tasks.check_task_set`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from respect_jax.realtime.types import INF, RTParams


def ready_times(params: RTParams, finish: jax.Array, machine: jax.Array) -> jax.Array:
    """i32[S, M] earliest time each sub-job could start on each accelerator.

    ``max(release, f(p) + delta(p) * [m(p) != m])`` over predecessors ``p``; at least INF when a
    predecessor is not dispatched.

    Args:
        finish: i32[S] finish times (INF if not dispatched); machine: i32[S] (-1 if not).
    """
    m_n = params.exec_us.shape[-1]
    pf = finish[params.preds]  # [S, P]
    pm = machine[params.preds]
    moved = pm[:, :, None] != jnp.arange(m_n)[None, None, :]  # [S, P, M]
    arrive = pf[:, :, None] + jnp.where(moved, params.xfer_us[:, :, None], 0)
    arrive = jnp.where(params.pred_mask[:, :, None], arrive, 0)
    return jnp.maximum(params.release[:, None], jnp.max(arrive, axis=1))


def reference_schedule(
    params: RTParams, t: jax.Array, free_at: jax.Array, finish: jax.Array, machine: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Deterministic EDF list schedule of the not-yet-dispatched HRT sub-jobs from time ``t``.

    Args:
        t: i32[] now; free_at: i32[M]; finish, machine: i32[S] actual dispatches (INF / -1 = not).
    Returns:
        ref_start i32[S] (INF outside the schedule), ref_machine i32[S] (-1 outside) and
        ``feasible`` bool[] = every scheduled sub-job finishes by its deadline (the exact check).
    """
    s_n, m_n = params.exec_us.shape
    todo = params.valid & params.is_hrt & (finish >= INF)
    avail0 = jnp.maximum(free_at, t)
    arange_m = jnp.arange(m_n)

    def body(k, carry):
        avail, r_start, r_fin, r_mach, ok = carry
        s = params.ref_order[k]
        active = todo[s]
        preds, mask = params.preds[s], params.pred_mask[s]
        dispatched = finish[preds] < INF
        pf = jnp.where(dispatched, finish[preds], r_fin[preds])
        pm = jnp.where(dispatched, machine[preds], r_mach[preds])
        arrive = pf[:, None] + jnp.where(pm[:, None] != arange_m[None, :], params.xfer_us[s][:, None], 0)
        ready = jnp.max(jnp.where(mask[:, None], arrive, 0), axis=0)  # [M]
        est = jnp.maximum(jnp.maximum(avail, ready), params.release[s])
        fin = est + params.exec_us[s]
        m = jnp.argmin(fin)
        avail = jnp.where(active & (arange_m == m), fin[m], avail)
        r_start = r_start.at[s].set(jnp.where(active, est[m], r_start[s]))
        r_fin = r_fin.at[s].set(jnp.where(active, fin[m], r_fin[s]))
        r_mach = r_mach.at[s].set(jnp.where(active, m, r_mach[s]).astype(jnp.int32))
        ok = ok & (~active | (fin[m] <= params.deadline[s]))
        return avail, r_start, r_fin, r_mach, ok

    init = (
        avail0,
        jnp.full((s_n,), INF, jnp.int32),
        jnp.full((s_n,), INF, jnp.int32),
        jnp.full((s_n,), -1, jnp.int32),
        jnp.bool_(True),
    )
    _, r_start, _, r_mach, ok = jax.lax.fori_loop(0, params.ref_order.shape[0], body, init)
    return r_start, r_mach, ok


def cut(ref_start: jax.Array, ref_machine: jax.Array, m: jax.Array, exclude: jax.Array) -> jax.Array:
    """i32[] ``cut_m``: earliest reference start on accelerator ``m`` ignoring sub-job ``exclude``."""
    on_m = (ref_machine == m) & (jnp.arange(ref_start.shape[0]) != exclude)
    return jnp.min(jnp.where(on_m, ref_start, INF))


def certify(
    params: RTParams, t: jax.Array, ref_start: jax.Array, ref_machine: jax.Array, x: jax.Array, m: jax.Array
) -> jax.Array:
    """bool[] the prefix-replacement test (C1)-(C3) for starting sub-job ``x`` on ``m`` at ``t``."""
    f = t + params.exec_us[x, m]
    c1 = f <= cut(ref_start, ref_machine, m, x)
    in_ref = (ref_machine >= 0) & (jnp.arange(ref_start.shape[0]) != x)
    succ = params.pred_mask & (params.preds == x) & in_ref[:, None]  # [S, P]: y has x as pred
    need = f + jnp.where(ref_machine[:, None] != m, params.xfer_us, 0)
    c2 = jnp.all(~succ | (need <= ref_start[:, None]))
    c3 = ~params.is_hrt[x] | (f <= params.deadline[x])
    return c1 & c2 & c3


def certify_all(params: RTParams, t: jax.Array, ref_start: jax.Array, ref_machine: jax.Array) -> jax.Array:
    """bool[S, M] :func:`certify` of every pair (used by the oracle adversary in tests/baselines)."""
    s_n, m_n = params.exec_us.shape
    xs = jnp.repeat(jnp.arange(s_n), m_n)
    ms = jnp.tile(jnp.arange(m_n), s_n)
    ok = jax.vmap(lambda x, m: certify(params, t, ref_start, ref_machine, x, m))(xs, ms)
    return ok.reshape(s_n, m_n)
