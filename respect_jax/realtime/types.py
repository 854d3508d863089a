"""Types of the real-time environment (Jumanji-style pytrees; leaves are NumPy or jnp arrays).

Shapes: ``S`` sub-job slots, ``M`` accelerators, ``P`` predecessor slots, ``S_H`` HRT sub-job slots
(the first ``S_H`` of the ``S``). Times are int32 microseconds; :data:`INF` means "never/none".
"""

from __future__ import annotations

import jax

from respect_jax import pytree as struct
from respect_jax.env.types import FIRST, LAST, MID, TimeStep  # noqa: F401  (shared with the graph env)

INF = 1 << 29  # "no time"; INF + any execution/transfer time still fits in int32
SLACK_NONE = 1 << 24  # observed slack of a sub-job / accelerator the reference does not constrain


@struct.dataclass
class RTParams:
    """One scenario, padded (the environment's explicit params; vmap over a leading axis B).

    Attributes:
        exec_us: i32[S, M] execution time of each sub-job on each accelerator.
        valid: bool[S] real sub-job (False = padding).
        is_hrt: bool[S] sub-job of a hard real-time job.
        release: i32[S] release time of the sub-job's job (INF for padding).
        deadline: i32[S] absolute deadline of the sub-job's job (INF for padding).
        client: i32[S] SRT client index (-1 for HRT and padding).
        source: i32[S] HRT task or SRT client index (-1 for padding).
        preds: i32[S, P] predecessor sub-job indices (0 where masked).
        pred_mask: bool[S, P] which predecessor slots are real.
        xfer_us: i32[S, P] transfer delay from each predecessor when it ran on another accelerator.
        rank_u: f32[S] HEFT upward rank (mean time to the end of the job).
        cp_after: i32[S] critical path after the sub-job: longest precedence path from its end to the end of
            its job, every later sub-job at its fastest time, no transfers (0 for the last sub-job and padding).
        ref_order: i32[S_H] order of the reference scheduler (HRT sub-jobs by deadline, job, group).
        certified: bool[] the reference scheduler met every HRT deadline at time 0.
        num_clients: i32[] number of SRT clients in this scenario.
        groups: static G, sub-job slots per job (sub-job ``s`` is group ``s % G`` of job ``s // G``).
        clients: static C, SRT client slots.
    """

    exec_us: jax.Array
    valid: jax.Array
    is_hrt: jax.Array
    release: jax.Array
    deadline: jax.Array
    client: jax.Array
    source: jax.Array
    preds: jax.Array
    pred_mask: jax.Array
    xfer_us: jax.Array
    rank_u: jax.Array
    cp_after: jax.Array
    ref_order: jax.Array
    certified: jax.Array
    num_clients: jax.Array
    groups: int = struct.field(pytree_node=False, default=1)
    clients: int = struct.field(pytree_node=False, default=1)


@struct.dataclass
class RTState:
    """Environment state of one episode.

    Attributes:
        params: the scenario.
        t: i32[] current time (a decision point).
        start, finish: i32[S] dispatch and completion times (INF = not dispatched).
        machine: i32[S] accelerator of each dispatched sub-job (-1 = not dispatched).
        free_at: i32[M] time each accelerator becomes idle.
        busy_us: i32[M] total execution time dispatched to each accelerator.
        ref_start: i32[S] start time of each not-yet-dispatched HRT sub-job in the reference
            schedule (INF for the others).
        ref_machine: i32[S] its accelerator in the reference schedule (-1 for the others).
        blocked: bool[M] accelerators held idle until the next event after a rejected proposal.
        done: bool[] every real sub-job has been dispatched.
        steps, proposals, overrides, fallbacks, refresh_failures: i32[] counters (decisions made,
            policy proposals certified, proposals rejected, rejected proposals replaced by a
            reference dispatch, reference refreshes that failed the exact check).
        violation: bool[] an internal invariant broke (never expected; tests assert it stays False).
    """

    params: RTParams
    t: jax.Array
    start: jax.Array
    finish: jax.Array
    machine: jax.Array
    free_at: jax.Array
    busy_us: jax.Array
    ref_start: jax.Array
    ref_machine: jax.Array
    blocked: jax.Array
    done: jax.Array
    steps: jax.Array
    proposals: jax.Array
    overrides: jax.Array
    fallbacks: jax.Array
    refresh_failures: jax.Array
    violation: jax.Array


@struct.dataclass
class Observation:
    """What a policy sees at a decision point, including what the safety layer would say.

    Attributes:
        time: i32[] current time.
        pair_mask: bool[S, M] (sub-job, accelerator) pairs that may start now: sub-job released,
            not dispatched, predecessors finished and their tensors transferred to that
            accelerator; accelerator idle and not blocked.
        exec_us: i32[S, M], release: i32[S], deadline: i32[S], is_hrt: bool[S], client: i32[S],
            rank_u: f32[S]: as in :class:`RTParams`.
        valid: bool[S] real sub-jobs; dispatched: bool[S] already dispatched.
        job_remaining_us: i32[S] fastest-accelerator time of the not-yet-dispatched sub-jobs of the
            sub-job's job (for laxity).
        free_in_us: i32[M] time until each accelerator is idle (0 if idle).
        client_met: f32[C] SRT jobs of each client finished by their deadline so far;
            client_done: f32[C] SRT jobs of each client whose finish time is known.
        cp_after_us: i32[S] as ``RTParams.cp_after``.
        certifiable: bool[S, M] the pairs of ``pair_mask`` the safety layer's prefix-replacement test
            (:func:`.safety.certify`) accepts now; the others would be overridden. Without the layer's
            reference (safety off) only (C3) can fail.
        ref_slack_us: i32[S] ``s_R(y) - t`` for the HRT sub-jobs in the certified reference schedule (how long
            each may still wait before the reference starts it), :data:`SLACK_NONE` for the others.
        cut_in_us: i32[M] ``cut_m - t``: time until the reference's next start on each accelerator
            (:data:`SLACK_NONE` if none).
    """

    time: jax.Array
    pair_mask: jax.Array
    exec_us: jax.Array
    release: jax.Array
    deadline: jax.Array
    is_hrt: jax.Array
    client: jax.Array
    rank_u: jax.Array
    valid: jax.Array
    dispatched: jax.Array
    job_remaining_us: jax.Array
    free_in_us: jax.Array
    client_met: jax.Array
    client_done: jax.Array
    cp_after_us: jax.Array
    certifiable: jax.Array
    ref_slack_us: jax.Array
    cut_in_us: jax.Array


@struct.dataclass
class Action:
    """The policy's output at a decision point.

    The environment starts the ready sub-job of highest ``priority`` (among those with at least
    one allowed accelerator) on its allowed accelerator of highest ``machine_pref``; ties go to the
    lowest index.

    Attributes:
        priority: f32[S] priority of every sub-job.
        machine_pref: f32[S, M] accelerator preference of every sub-job.
    """

    priority: jax.Array
    machine_pref: jax.Array


# The real-time environment returns the project's shared TimeStep (respect_jax.env.types).
# Result of reset/step (``step_type`` FIRST/MID/LAST = 0/1/2).
#
# ``reward``: for every job whose last sub-job was dispatched by this step (its finish time is
# then known): ``+1 / #SRT jobs`` if an SRT job meets its deadline, ``-hrt_penalty / #HRT jobs`` if
# an HRT job misses; minus ``override_penalty`` when the safety layer rejected the proposal.
# ``extras``: ``proposed`` i32[2] (sub-job, accelerator) the policy proposed, ``dispatched``
# i32[2] what ran (-1 when nothing), ``accepted`` / ``override`` bool[], and on the LAST step the
# episode metrics of :func:`respect_jax.realtime.environment.episode_metrics` (zeros before).
