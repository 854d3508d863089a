"""Plain-Python reference simulator of the HRT/SRT environment (independent of the JAX code).

It implements the event rules of :mod:`respect_jax.realtime.environment` and the safety layer of
:mod:`respect_jax.realtime.safety` with Python integers and lists, so that the two can be compared
decision by decision on seeded traces (``tests/test_rt_reference.py``). It also provides

* :func:`py_reference_schedule` -- the deterministic reference scheduler, used by the up-front
  feasibility check (:func:`.tasks.check_task_set`);
* :func:`validate_schedule` -- an independent checker of a finished schedule (no overlap,
  non-preemption, releases, precedence with transfer delays);
* Python versions of the heuristic policies (:data:`PY_POLICIES`);
* per-decision timing of the safety layer (``PySim(..., timing=True)``), the overhead figure a
  runtime implementation would pay.

Inputs are one packed scenario (:class:`~.types.RTParams` with NumPy leaves, no batch axis).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from respect_jax.realtime.types import INF, RTParams

PyPolicy = Callable[[dict], tuple[list[float], list[list[float]]]]


class PyScenario:
    """Python-list view of one packed scenario."""

    def __init__(self, params: RTParams):
        p = params
        self.S, self.M = (int(x) for x in np.shape(p.exec_us))
        self.G = int(p.groups)
        self.C = int(p.clients)
        self.exec = [[int(v) for v in row] for row in np.asarray(p.exec_us)]
        self.valid = [bool(v) for v in np.asarray(p.valid)]
        self.hrt = [bool(v) for v in np.asarray(p.is_hrt)]
        self.release = [int(v) for v in np.asarray(p.release)]
        self.deadline = [int(v) for v in np.asarray(p.deadline)]
        self.client = [int(v) for v in np.asarray(p.client)]
        self.rank_u = [float(v) for v in np.asarray(p.rank_u, np.float32)]
        self.cp_after = [int(v) for v in np.asarray(p.cp_after)]
        self.preds: list[list[tuple[int, int]]] = []
        for s in range(self.S):
            row = [
                (int(q), int(d))
                for q, ok, d in zip(
                    np.asarray(p.preds)[s], np.asarray(p.pred_mask)[s], np.asarray(p.xfer_us)[s], strict=True
                )
                if ok
            ]
            self.preds.append(row)
        self.succs: list[list[tuple[int, int]]] = [[] for _ in range(self.S)]
        for s in range(self.S):
            for q, d in self.preds[s]:
                self.succs[q].append((s, d))
        self.ref_order = [int(v) for v in np.asarray(p.ref_order)]


def ready_on(sc: PyScenario, s: int, m: int, finish: list[int], machine: list[int]) -> int:
    """Earliest start of sub-job ``s`` on accelerator ``m`` (>= INF if a predecessor is pending)."""
    r = sc.release[s]
    for q, d in sc.preds[s]:
        arrive = finish[q] + (d if machine[q] != m else 0)
        r = max(r, arrive)
    return r


def py_reference_schedule(
    sc: PyScenario, t: int, free_at: list[int], finish: list[int], machine: list[int]
) -> tuple[dict[int, tuple[int, int]], bool, list[tuple[int, int, int]]]:
    """EDF list schedule of the pending HRT sub-jobs from ``t`` (see :mod:`.safety`).

    Returns:
        ``{sub-job: (start, machine)}``, whether every deadline is met, and the misses as
        ``(sub-job, finish, deadline)``.
    """
    avail = [max(a, t) for a in free_at]
    plan: dict[int, tuple[int, int]] = {}
    fin: dict[int, int] = {}
    misses = []
    for s in sc.ref_order:
        if not (sc.valid[s] and sc.hrt[s] and finish[s] >= INF):
            continue
        best = None
        for m in range(sc.M):
            ready = sc.release[s]
            for q, d in sc.preds[s]:
                if finish[q] < INF:
                    fq, mq = finish[q], machine[q]
                else:
                    fq, mq = fin[q], plan[q][1]
                ready = max(ready, fq + (d if mq != m else 0))
            est = max(avail[m], ready)
            f = est + sc.exec[s][m]
            if best is None or f < best[0]:
                best = (f, est, m)
        f, est, m = best
        plan[s], fin[s] = (est, m), f
        avail[m] = f
        if f > sc.deadline[s]:
            misses.append((s, f, sc.deadline[s]))
    return plan, not misses, misses


def py_certify(sc: PyScenario, t: int, plan: dict[int, tuple[int, int]], x: int, m: int) -> bool:
    """The prefix-replacement test (C1)-(C3) of :mod:`.safety` for ``x`` on ``m`` at ``t``."""
    f = t + sc.exec[x][m]
    for y, (sy, my) in plan.items():
        if y != x and my == m and sy < f:
            return False  # C1
    for y, d in sc.succs[x]:
        if y in plan and y != x:
            sy, my = plan[y]
            if f + (d if my != m else 0) > sy:
                return False  # C2
    return not (sc.hrt[x] and f > sc.deadline[x])  # C3


class PySim:
    """One episode of the environment in plain Python.

    Args:
        params: one packed scenario (NumPy leaves).
        safety, refresh: as :class:`~respect_jax.realtime.environment.RTEnv`.
        timing: record the wall time of every safety-layer call (certify + fallback + refresh).
    """

    def __init__(self, params: RTParams, safety: bool = True, refresh: bool = True, timing: bool = False):
        self.sc = PyScenario(params)
        self.safety, self.refresh, self.timing = safety, refresh, timing
        sc = self.sc
        self.t = 0
        self.start = [INF] * sc.S
        self.finish = [INF] * sc.S
        self.machine = [-1] * sc.S
        self.free_at = [0] * sc.M
        self.busy = [0] * sc.M
        self.blocked = [False] * sc.M
        self.plan: dict[int, tuple[int, int]] = {}
        self.trace: list[tuple[int, int, int, int, int, bool]] = []
        self.overrides = self.fallbacks = self.decisions = 0
        self.safety_seconds: list[float] = []
        self.violation = False
        if safety:
            self.plan, ok, _ = py_reference_schedule(sc, 0, self.free_at, self.finish, self.machine)
            self.certified = ok
        self.done = False
        self._advance()

    # --------------------------------------------------------------- rules
    def pairs(self) -> list[tuple[int, int]]:
        sc = self.sc
        out = []
        for s in range(sc.S):
            if not sc.valid[s] or self.finish[s] < INF:
                continue
            for m in range(sc.M):
                if (
                    self.free_at[m] <= self.t
                    and not self.blocked[m]
                    and ready_on(sc, s, m, self.finish, self.machine) <= self.t
                ):
                    out.append((s, m))
        return out

    def _pending(self) -> bool:
        return any(v and f >= INF for v, f in zip(self.sc.valid, self.finish, strict=True))

    def _advance(self) -> None:
        """Move time to the next event until a pair may start; the episode ends when every sub-job is dispatched
        or nothing is left to wait for (stuck), as in the JAX environment (a violation alone does not end it)."""
        sc = self.sc
        stuck = False
        while self._pending() and not self.pairs():
            cands = [a for a in self.free_at if a > self.t]
            for s in range(sc.S):
                if sc.valid[s] and self.finish[s] >= INF:
                    for m in range(sc.M):
                        r = ready_on(sc, s, m, self.finish, self.machine)
                        if self.t < r < INF:
                            cands.append(r)
            cands += [st for st, _ in self.plan.values() if st > self.t]
            if not cands:  # stuck: sub-jobs left and no event to wait for
                self.violation = stuck = True
                break
            self.t = min(cands)
            self.blocked = [False] * sc.M
        self.done = not self._pending() or stuck

    def _dispatch(self, x: int, m: int) -> None:
        c = self.sc.exec[x][m]
        self.start[x], self.finish[x], self.machine[x] = self.t, self.t + c, m
        self.free_at[m] = self.t + c
        self.busy[m] += c

    def step(self, priority, machine_pref) -> None:
        """One decision with the policy's priorities (len S) and preferences (S x M)."""
        sc = self.sc
        pairs = self.pairs()
        allowed: dict[int, list[int]] = {}
        for s, m in pairs:
            allowed.setdefault(s, []).append(m)
        j = -1
        for s in sorted(allowed):
            if j < 0 or priority[s] > priority[j]:
                j = s
        m = -1
        for mm in allowed[j]:
            if m < 0 or machine_pref[j][mm] > machine_pref[j][m]:
                m = mm
        self.decisions += 1
        if not self.safety:
            self._dispatch(j, m)
            self.trace.append((self.t, j, m, j, m, True))
            self._advance()
            return
        tic = time.perf_counter() if self.timing else 0.0
        accepted = py_certify(sc, self.t, self.plan, j, m)
        x, mx = (j, m) if accepted else (-1, -1)
        if not accepted:
            self.overrides += 1
            due = sorted((st, y) for y, (st, _) in self.plan.items() if st <= self.t)
            if any(st < self.t for st, _ in due):
                self.violation = True
            on_m = sorted((st, y) for y, (st, my) in self.plan.items() if my == m)
            if due:
                x = due[0][1]
                mx = self.plan[x][1]
                if (x, mx) not in pairs:
                    self.violation = True
            elif on_m and (on_m[0][1], m) in pairs and py_certify(sc, self.t, self.plan, on_m[0][1], m):
                x, mx = on_m[0][1], m
            if x >= 0:
                self.fallbacks += 1
        if x >= 0:
            self._dispatch(x, mx)
            self.plan.pop(x, None)
            if self.refresh:
                plan, ok, _ = py_reference_schedule(sc, self.t, self.free_at, self.finish, self.machine)
                if ok:
                    self.plan = plan
            self.blocked = [False] * sc.M  # the refresh may start a sub-job on a held accelerator now
        else:
            self.blocked[m] = True
        if self.timing:
            self.safety_seconds.append(time.perf_counter() - tic)
        self.trace.append((self.t, j, m, x, mx, accepted))
        self._advance()

    def run(self, policy: PyPolicy, max_steps: int = 100_000) -> dict:
        """Run to the end with ``policy(obs) -> (priority, machine_pref)``; returns :meth:`metrics`."""
        while not self.done and self.decisions < max_steps:
            self.step(*policy(self.observation()))
        return self.metrics()

    def observation(self) -> dict:
        sc = self.sc
        rem = []
        for s in range(sc.S):
            job = s // sc.G
            rem.append(
                sum(
                    min(sc.exec[q])
                    for q in range(job * sc.G, job * sc.G + sc.G)
                    if sc.valid[q] and self.finish[q] >= INF
                )
            )
        return {
            "t": self.t,
            "sc": sc,
            "job_remaining": rem,
            "dispatched": [f < INF for f in self.finish],
            "pairs": self.pairs(),
        }

    # --------------------------------------------------------------- results
    def metrics(self) -> dict:
        sc = self.sc
        jobs = sc.S // sc.G
        hrt_jobs = hrt_missed = srt_jobs = srt_met = 0
        per_client = [[0, 0] for _ in range(sc.C)]
        for job in range(jobs):
            subs = [s for s in range(job * sc.G, job * sc.G + sc.G) if sc.valid[s]]
            if not subs:
                continue
            fin = max(self.finish[s] for s in subs)
            met = fin <= sc.deadline[subs[0]]
            if sc.hrt[subs[0]]:
                hrt_jobs += 1
                hrt_missed += not met
            else:
                srt_jobs += 1
                srt_met += met
                per_client[sc.client[subs[0]]][0] += 1
                per_client[sc.client[subs[0]]][1] += met
        rates = [met / tot for tot, met in per_client if tot > 0]
        sq = sum(r * r for r in rates)
        jain = (sum(rates) ** 2 / (len(rates) * sq)) if rates and sq > 0 else 1.0
        makespan = max((self.finish[s] for s in range(sc.S) if sc.valid[s]), default=0)
        return {
            "hrt_jobs": hrt_jobs,
            "hrt_missed": hrt_missed,
            "srt_jobs": srt_jobs,
            "srt_met": srt_met,
            "jain": jain,
            "utilisation": sum(b / max(makespan, 1) for b in self.busy) / sc.M,
            "work_utilisation": sum(sum(sc.exec[s]) / sc.M for s in range(sc.S) if sc.valid[s])
            / (sc.M * max(makespan, 1)),
            "makespan": makespan,
            "decisions": self.decisions,
            "overrides": self.overrides,
            "fallbacks": self.fallbacks,
            "violation": self.violation,
        }


def validate_schedule(params: RTParams, start, finish, machine) -> list[str]:
    """Independent check of a finished schedule; returns the violations found (empty = valid).

    Checks: every real sub-job dispatched on a real accelerator; ``finish - start`` equals its
    execution time there (non-preemptive); start after release; start after every predecessor's
    finish plus the transfer delay when the accelerators differ; no overlap on any accelerator.
    Deadlines are *not* checked here (misses are metrics, not invalid schedules).
    """
    sc = PyScenario(params)
    start, finish, machine = (list(map(int, np.asarray(a))) for a in (start, finish, machine))
    errors = []
    per_m: dict[int, list[tuple[int, int, int]]] = {}
    for s in range(sc.S):
        if not sc.valid[s]:
            continue
        m = machine[s]
        if not 0 <= m < sc.M or start[s] >= INF:
            errors.append(f"sub-job {s} never dispatched")
            continue
        if finish[s] - start[s] != sc.exec[s][m]:
            errors.append(f"sub-job {s}: runs {finish[s] - start[s]} us, needs {sc.exec[s][m]} on {m}")
        if start[s] < sc.release[s]:
            errors.append(f"sub-job {s}: starts {start[s]} before release {sc.release[s]}")
        for q, d in sc.preds[s]:
            need = finish[q] + (d if machine[q] != m else 0)
            if start[s] < need:
                errors.append(f"sub-job {s}: starts {start[s]} before predecessor {q} data at {need}")
        per_m.setdefault(m, []).append((start[s], finish[s], s))
    for m, items in per_m.items():
        items.sort()
        for (s0, f0, a), (s1, _, b) in zip(items, items[1:], strict=False):
            if s1 < f0:
                errors.append(f"accelerator {m}: sub-jobs {a} [{s0},{f0}) and {b} start {s1} overlap")
    return errors


# ------------------------------------------------------------------ Python policies
def _prio(obs: dict, key: Callable[[int], float], pref: Callable[[int, int], float]):
    sc = obs["sc"]
    return [key(s) for s in range(sc.S)], [[pref(s, m) for m in range(sc.M)] for s in range(sc.S)]


def py_edf(obs: dict):
    sc = obs["sc"]
    return _prio(obs, lambda s: -float(sc.deadline[s]), lambda s, m: -float(sc.exec[s][m]))


def py_fcfs(obs: dict):
    sc = obs["sc"]
    return _prio(obs, lambda s: -float(sc.release[s]), lambda s, m: -float(sc.exec[s][m]))


def py_llf(obs: dict):
    sc, t, rem = obs["sc"], obs["t"], obs["job_remaining"]
    return _prio(obs, lambda s: -float(sc.deadline[s] - t - rem[s]), lambda s, m: -float(sc.exec[s][m]))


def py_heft(obs: dict):
    sc = obs["sc"]
    return _prio(obs, lambda s: sc.rank_u[s], lambda s, m: -float(sc.exec[s][m]))


AFFINITY_TOL = 0.25  # as baselines.AFFINITY_TOL
TIER = 1.0e7


def _allowed(obs: dict) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for s, m in obs["pairs"]:
        out.setdefault(s, []).append(m)
    return out


def py_cpls(obs: dict):
    """Critical-path slack list scheduling (see :func:`.baselines.cpls`)."""
    sc, t, allowed = obs["sc"], obs["t"], _allowed(obs)

    def key(s):
        if s not in allowed:
            return -2 * TIER
        slack = sc.deadline[s] - t - min(sc.exec[s][m] for m in allowed[s]) - sc.cp_after[s]
        return -TIER - sc.deadline[s] if (not sc.hrt[s] and slack < 0) else -float(slack)

    return _prio(obs, key, lambda s, m: -float(sc.exec[s][m]))


def py_edf_affinity(obs: dict):
    """EDF with accelerator affinity (see :func:`.baselines.edf_affinity`)."""
    sc, allowed = obs["sc"], _allowed(obs)

    def key(s):
        best = min(sc.exec[s])
        has = any(sc.exec[s][m] <= (1.0 + AFFINITY_TOL) * best for m in allowed.get(s, []))
        return (TIER if has else 0.0) - float(sc.deadline[s])

    return _prio(obs, key, lambda s, m: -float(sc.exec[s][m]))


def py_adversarial(obs: dict):
    """Starve HRT work: SRT first (longest first), then HRT latest deadline, slowest accelerator."""
    sc = obs["sc"]

    def key(s):
        longest = float(max(sc.exec[s]))
        return 1e7 + longest if not sc.hrt[s] else float(sc.deadline[s])

    return _prio(obs, key, lambda s, m: float(sc.exec[s][m]))


PY_POLICIES: dict[str, PyPolicy] = {
    "edf": py_edf,
    "fcfs": py_fcfs,
    "llf": py_llf,
    "heft": py_heft,
    "cpls": py_cpls,
    "edf_aff": py_edf_affinity,
    "adversarial": py_adversarial,
}


def static_policy(priority: np.ndarray, machine_pref: np.ndarray) -> PyPolicy:
    """A policy returning the same priorities every decision (seeded random traces)."""
    pr = [float(v) for v in np.asarray(priority, np.float32)]
    mp = [[float(v) for v in row] for row in np.asarray(machine_pref, np.float32)]
    return lambda obs: (pr, mp)
