"""Up-front detection of HRT task sets the safety layer cannot guarantee (one-line messages).

Checks, in order (each raises :class:`InfeasibleTaskSet` with one line naming the culprit):

1. constrained deadlines: ``0 < deadline <= period`` for every HRT task;
2. per task: the deadline is at least the job's best-case latency (critical path at the fastest
   accelerator, no transfers) -- otherwise **no** schedule can meet it (necessary condition);
3. platform: HRT demand at best-case speed ``sum_i best_work_i / period_i <= M`` (necessary);
4. certification: the deterministic reference scheduler (:func:`.reference.py_reference_schedule`,
   the same algorithm as :func:`.safety.reference_schedule`) meets every HRT deadline of the
   episode from time 0. Deciding feasibility of non-preemptive DAG scheduling on heterogeneous
   machines is NP-hard; this is a *sufficient* test, so a set failing only (4) might be feasible
   for a cleverer scheduler, but the safety layer cannot certify it, and the message says so.
"""

from __future__ import annotations

from respect_jax.realtime.reference import PyScenario, py_reference_schedule
from respect_jax.realtime.tasks import Scenario, pack, sizes_for
from respect_jax.realtime.types import INF


class InfeasibleTaskSet(ValueError):
    """The HRT task set cannot be guaranteed (message is one line)."""


def _ms(us: float) -> str:
    return f"{us / 1000:.3f} ms"


def check_task_set(scenario: Scenario) -> dict:
    """Raise :class:`InfeasibleTaskSet` unless the scenario's HRT work is certified.

    Returns:
        a small report: ``hrt_demand_best`` (best-case HRT demand / M) and ``reference_slack_us``
        (smallest ``deadline - finish`` over HRT jobs in the reference schedule at time 0).
    """
    m = scenario.platform.num_machines
    demand = 0.0
    for i, task in enumerate(scenario.hrt_tasks):
        tpl = scenario.templates[scenario.hrt_template[i]]
        if not 0 < task.deadline_us <= task.period_us:
            raise InfeasibleTaskSet(
                f"HRT task {i} ({task.model}): deadline {_ms(task.deadline_us)} must be in "
                f"(0, period {_ms(task.period_us)}]"
            )
        if tpl.critical_path_us > task.deadline_us:
            raise InfeasibleTaskSet(
                f"HRT task {i} ({task.model}): deadline {_ms(task.deadline_us)} is shorter than its best-case latency "
                f"{_ms(tpl.critical_path_us)} on this platform"
            )
        demand += tpl.best_work_us / task.period_us
    if demand > m:
        raise InfeasibleTaskSet(f"HRT demand at best-case speed is {demand:.2f} accelerators but the platform has {m}")
    if not scenario.hrt_jobs:
        return {"hrt_demand_best": demand / m, "reference_slack_us": None}
    sc = PyScenario(pack(scenario, sizes_for([scenario]), certified=False))
    plan, ok, misses = py_reference_schedule(sc, 0, [0] * sc.M, [INF] * sc.S, [-1] * sc.S)
    if not ok:
        s, fin, dl = misses[0]
        job = scenario.hrt_jobs[s // sc.G]
        raise InfeasibleTaskSet(
            f"no certified reference schedule: the deterministic EDF list scheduler finishes HRT task {job.source} "
            f"({scenario.hrt_tasks[job.source].model}) job released at {_ms(job.release)} at {_ms(fin)}, after its "
            f"deadline {_ms(dl)}; the safety layer cannot guarantee this task set"
        )
    slack = min(sc.deadline[s] - (st + sc.exec[s][mm]) for s, (st, mm) in plan.items())
    return {"hrt_demand_best": demand / m, "reference_slack_us": int(slack)}
