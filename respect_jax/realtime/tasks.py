"""Task model: DNN jobs split into layer-group sub-jobs, HRT tasks, SRT clients, scenarios.

Modelling choices (stated here because the paper text is not available):

* A **job** is one inference of a DNN from ``data/models/*.json``. The graph's node order (by depth
  from the sources, ties by id) is topological; the job is split into ``G`` **sub-jobs** =
  contiguous groups of that order with about equal mean execution time (:func:`split_layers`).
  Sub-job ``b`` depends on sub-job ``a`` (``a < b``) iff some layer edge goes from group ``a`` to group
  ``b``; so sub-jobs form a chain for plain CNNs and a DAG when a tensor skips a group (residual or
  dense connections crossing two cuts). The transfer volume of edge ``a -> b`` is the output tensors
  of the group-``a`` layers that group ``b`` reads (each tensor once).
* Sub-jobs are **non-preemptive**: once started on an accelerator they run to completion.
* **HRT tasks** are strictly periodic with a known offset: job ``k`` of task ``i`` is released at
  ``offset_i + k * period_i`` and must finish by ``release + deadline_i`` (constrained deadline,
  ``deadline_i <= period_i``). Because the releases are known in advance, every HRT job of the
  episode is part of the "released HRT work" the safety layer plans for (a later HRT release is
  known at time 0, so the safety layer can keep room for it).
* **SRT requests** come from ``C`` clients. Client ``c`` runs one model, sends sporadic requests
  (inter-arrival = ``min_gap + Exp``, never closer than ``min_gap``) and each request has a
  relative QoS deadline. An SRT miss lowers QoS but the request is still served to completion.
* A **scenario** is a finite episode: every job released before the horizon, all of them run to
  completion.
* Padded layout for JAX (:class:`Sizes`): ``J_H`` HRT job slots, then ``J_S`` SRT job slots, each
  with ``G`` sub-job slots; sub-job ``s`` belongs to job ``s // G`` and is group ``s % G``.

Up-front detection of HRT task sets the safety layer cannot guarantee (:func:`check_task_set`, one-line
:class:`InfeasibleTaskSet` messages; :func:`pack` records its verdict in ``RTParams.certified``).

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

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from respect_jax.graphs.graph import load_graph
from respect_jax.realtime.platform import Platform, group_exec_us, layer_times_us, op_class, transfer_us
from respect_jax.realtime.reference import PyScenario, py_reference_schedule
from respect_jax.realtime.types import INF, RTParams
from respect_jax.resources import data_path

MODELS_DIR = data_path("models")


@dataclass(frozen=True, eq=False)
class JobTemplate:
    """One DNN split into sub-jobs, with its costs on one platform.

    Attributes:
        model: model name (file stem under ``data/models``).
        exec_us: int64[G, M] execution time of each sub-job on each accelerator.
        preds: G tuples of predecessor sub-job indices (all smaller).
        xfer_us: int64[G, G] transfer delay of edge ``a -> b`` when the two sub-jobs run on different
            accelerators (0 where there is no edge).
        layers: G arrays of the layer ids (in the graph's topological order) in each sub-job.
    """

    model: str
    exec_us: np.ndarray
    preds: tuple[tuple[int, ...], ...]
    xfer_us: np.ndarray
    layers: tuple[np.ndarray, ...] = field(repr=False)

    @property
    def num_groups(self) -> int:
        return len(self.preds)

    @property
    def best_work_us(self) -> int:
        """Sum over sub-jobs of the fastest accelerator's time (a lower bound on machine time)."""
        return int(self.exec_us.min(axis=1).sum())

    @property
    def mean_work_us(self) -> float:
        """Sum over sub-jobs of the mean time over accelerators (the utilisation unit)."""
        return float(self.exec_us.mean(axis=1).sum())

    @property
    def critical_path_us(self) -> int:
        """Longest precedence path with each sub-job at its fastest time and no transfers.

        A lower bound on the response time of one job on an otherwise idle platform.
        """
        best = self.exec_us.min(axis=1)
        finish = np.zeros(self.num_groups, np.int64)
        for g in range(self.num_groups):
            finish[g] = best[g] + max((finish[p] for p in self.preds[g]), default=0)
        return int(finish.max())


def split_layers(weights: np.ndarray, groups: int) -> list[np.ndarray]:
    """Cut ``0..L-1`` into ``groups`` non-empty contiguous ranges of about equal total weight.

    Args:
        weights: f64[L] per-layer weight (here: mean execution time over accelerators).
    Returns:
        ``groups`` int arrays of layer ids.
    """
    n = len(weights)
    if not 1 <= groups <= n:
        raise ValueError(f"cannot split {n} layers into {groups} groups")
    cum = np.cumsum(np.asarray(weights, np.float64))
    total = cum[-1] if cum[-1] > 0 else 1.0
    cuts, prev = [], 0
    for g in range(1, groups):
        c = int(np.searchsorted(cum, total * g / groups, side="left")) + 1
        c = min(max(c, prev + 1), n - (groups - g))  # keep every group non-empty
        cuts.append(c)
        prev = c
    bounds = [0, *cuts, n]
    return [np.arange(bounds[i], bounds[i + 1]) for i in range(groups)]


def build_template(model: str, groups: int, platform: Platform) -> JobTemplate:
    """Load ``data/models/<model>.json`` (or a path) and split it into ``groups`` sub-jobs."""
    return _build_template_cached(str(model), int(groups), platform)


@lru_cache(maxsize=256)
def _build_template_cached(model: str, groups: int, platform: Platform) -> JobTemplate:
    path = Path(model) if model.endswith(".json") else MODELS_DIR / f"{model}.json"
    if not path.is_file():
        choices = sorted(p.stem for p in MODELS_DIR.glob("*.json"))
        raise FileNotFoundError(f"unknown model {model!r}: no {path}; choose one of {', '.join(choices)}")
    graph = load_graph(path)
    lt = layer_times_us(graph.macs, graph.params, graph.output_size, [op_class(o) for o in graph.ops], platform)
    layers = split_layers(lt.mean(axis=1), groups)
    group_of = np.empty(graph.num_nodes, np.int64)
    for g, ids in enumerate(layers):
        group_of[ids] = g
    preds: list[set[int]] = [set() for _ in range(groups)]
    tensors: dict[tuple[int, int], set[int]] = {}
    for u, v in graph.edges:
        a, b = int(group_of[u]), int(group_of[v])
        if a != b:
            preds[b].add(a)
            tensors.setdefault((a, b), set()).add(int(u))
    xfer = np.zeros((groups, groups), np.int64)
    for (a, b), producers in tensors.items():
        xfer[a, b] = transfer_us(float(graph.output_size[list(producers)].sum()) * platform.act_bytes, platform)
    return JobTemplate(
        model=graph.name,
        exec_us=group_exec_us(lt, layers, platform),
        preds=tuple(tuple(sorted(p)) for p in preds),
        xfer_us=xfer,
        layers=tuple(layers),
    )


@dataclass(frozen=True)
class HRTTask:
    """Periodic hard real-time task (times in microseconds)."""

    model: str
    period_us: int
    deadline_us: int
    offset_us: int = 0


@dataclass(frozen=True)
class SRTClient:
    """Sporadic soft real-time client: mean inter-arrival, minimum gap and QoS deadline (us)."""

    model: str
    mean_gap_us: float
    min_gap_us: int
    deadline_us: int


@dataclass(frozen=True)
class Job:
    """One released job. ``source`` is the HRT task index or the SRT client index."""

    template: int
    release: int
    deadline: int
    hrt: bool
    source: int


@dataclass(frozen=True, eq=False)
class Scenario:
    """One episode on one platform: templates, HRT tasks, SRT clients and the released jobs."""

    platform: Platform
    groups: int
    templates: tuple[JobTemplate, ...]
    hrt_tasks: tuple[HRTTask, ...]
    clients: tuple[SRTClient, ...]
    jobs: tuple[Job, ...]
    horizon_us: int
    hrt_template: tuple[int, ...] = ()
    client_template: tuple[int, ...] = ()
    certified: bool | None = None  # set by the generator / check_task_set; None = not checked

    @property
    def hrt_jobs(self) -> list[Job]:
        return [j for j in self.jobs if j.hrt]

    @property
    def srt_jobs(self) -> list[Job]:
        return [j for j in self.jobs if not j.hrt]

    def demand(self) -> dict:
        """Offered load relative to the platform (mean-work units, see :mod:`.generator`)."""
        m = self.platform.num_machines
        hrt = sum(self.templates[self.hrt_template[i]].mean_work_us / t.period_us for i, t in enumerate(self.hrt_tasks))
        srt = sum(
            self.templates[self.client_template[c]].mean_work_us / cl.mean_gap_us for c, cl in enumerate(self.clients)
        )
        return {
            "hrt_utilisation": float(hrt / m),
            "srt_utilisation": float(srt / m),
            "utilisation": float((hrt + srt) / m),
        }


def make_scenario(
    platform: Platform,
    groups: int,
    hrt_tasks: list[HRTTask],
    clients: list[SRTClient],
    horizon_us: int,
    rng: np.random.Generator | None = None,
    srt_releases: list[list[int]] | None = None,
) -> Scenario:
    """Release every HRT job and SRT request before ``horizon_us``.

    SRT arrivals are drawn from ``rng`` (first arrival ``U[0, mean_gap)``, then ``min_gap + Exp``)
    unless ``srt_releases`` gives them per client.
    """
    names = sorted({t.model for t in hrt_tasks} | {c.model for c in clients})
    templates = tuple(build_template(n, groups, platform) for n in names)
    index = {n: i for i, n in enumerate(names)}
    jobs: list[Job] = []
    for i, task in enumerate(hrt_tasks):
        if task.period_us <= 0 or task.deadline_us <= 0:
            raise ValueError(f"HRT task {i} ({task.model}): period and deadline must be > 0")
        r = task.offset_us
        while r < horizon_us:
            jobs.append(Job(index[task.model], int(r), int(r + task.deadline_us), True, i))
            r += task.period_us
    for c, client in enumerate(clients):
        if srt_releases is not None:
            releases = [int(r) for r in srt_releases[c] if r < horizon_us]
        else:
            if rng is None:
                raise ValueError("make_scenario needs rng or srt_releases for SRT clients")
            releases, r = [], float(rng.uniform(0, client.mean_gap_us))
            while r < horizon_us:
                releases.append(int(r))
                r += client.min_gap_us + rng.exponential(max(client.mean_gap_us - client.min_gap_us, 1e-9))
        jobs += [Job(index[client.model], r, r + client.deadline_us, False, c) for r in releases]
    jobs.sort(key=lambda j: (not j.hrt, j.release, j.source))
    return Scenario(
        platform=platform,
        groups=groups,
        templates=templates,
        hrt_tasks=tuple(hrt_tasks),
        clients=tuple(clients),
        jobs=tuple(jobs),
        horizon_us=int(horizon_us),
        hrt_template=tuple(index[t.model] for t in hrt_tasks),
        client_template=tuple(index[c.model] for c in clients),
    )


@dataclass(frozen=True)
class Sizes:
    """Static padded sizes of the JAX environment (one compilation per Sizes).

    ``S = (hrt_jobs + srt_jobs) * groups`` sub-job slots, ``P = groups - 1`` predecessor slots.
    """

    hrt_jobs: int
    srt_jobs: int
    groups: int
    machines: int
    clients: int

    @property
    def jobs(self) -> int:
        return self.hrt_jobs + self.srt_jobs

    @property
    def subjobs(self) -> int:
        return self.jobs * self.groups

    @property
    def hrt_subjobs(self) -> int:
        return self.hrt_jobs * self.groups

    @property
    def preds(self) -> int:
        return max(self.groups - 1, 1)


def sizes_for(scenarios: list[Scenario]) -> Sizes:
    """The smallest :class:`Sizes` holding every scenario of the list."""
    s0 = scenarios[0]
    return Sizes(
        hrt_jobs=max(1, max(len(s.hrt_jobs) for s in scenarios)),
        srt_jobs=max(1, max(len(s.srt_jobs) for s in scenarios)),
        groups=s0.groups,
        machines=s0.platform.num_machines,
        clients=max(1, max(len(s.clients) for s in scenarios)),
    )


def rank_upward(template: JobTemplate) -> np.ndarray:
    """f64[G] HEFT upward rank: mean time + max over successors of (mean transfer + their rank)."""
    g_count = template.num_groups
    mean = template.exec_us.mean(axis=1)
    rank = np.zeros(g_count)
    for g in reversed(range(g_count)):
        succ = [b for b in range(g + 1, g_count) if g in template.preds[b]]
        rank[g] = mean[g] + max((template.xfer_us[g, b] + rank[b] for b in succ), default=0.0)
    return rank


def critical_path_after(template: JobTemplate) -> np.ndarray:
    """int64[G] longest path from the end of each sub-job to the end of its job, at fastest times, no transfers.

    ``tail[g] = max over successors b of (fastest time of b + tail[b])``, 0 for sub-jobs without successors.
    """
    g_count = template.num_groups
    best = template.exec_us.min(axis=1)
    tail = np.zeros(g_count, np.int64)
    for g in reversed(range(g_count)):
        succ = [b for b in range(g + 1, g_count) if g in template.preds[b]]
        tail[g] = max((int(best[b] + tail[b]) for b in succ), default=0)
    return tail


def pack(scenario: Scenario, sizes: Sizes, certified: bool | None = None) -> RTParams:
    """The padded NumPy :class:`RTParams` of one scenario (stack several with :func:`stack`).

    ``certified`` (stored in ``RTParams.certified``): None takes ``scenario.certified``, and if
    that is None too runs :func:`check_task_set` to decide it.
    """
    if certified is None:
        certified = scenario.certified
    if certified is None:
        try:
            check_task_set(scenario)
            certified = True
        except InfeasibleTaskSet:
            certified = False
    g_max, m = sizes.groups, sizes.machines
    hrt, srt = scenario.hrt_jobs, scenario.srt_jobs
    if scenario.groups != g_max or scenario.platform.num_machines != m:
        raise ValueError(
            f"scenario has G={scenario.groups}, M={scenario.platform.num_machines}; sizes want G={g_max}, M={m}"
        )
    if len(hrt) > sizes.hrt_jobs or len(srt) > sizes.srt_jobs or len(scenario.clients) > sizes.clients:
        raise ValueError(
            f"scenario has {len(hrt)} HRT jobs, {len(srt)} SRT jobs, {len(scenario.clients)} clients; sizes allow "
            f"{sizes.hrt_jobs}, {sizes.srt_jobs}, {sizes.clients}"
        )
    s_n, p_n = sizes.subjobs, sizes.preds
    exec_us = np.ones((s_n, m), np.int32)
    valid = np.zeros(s_n, bool)
    is_hrt = np.zeros(s_n, bool)
    release = np.full(s_n, INF, np.int32)
    deadline = np.full(s_n, INF, np.int32)
    client = np.full(s_n, -1, np.int32)
    source = np.full(s_n, -1, np.int32)
    preds = np.zeros((s_n, p_n), np.int32)
    pred_mask = np.zeros((s_n, p_n), bool)
    xfer = np.zeros((s_n, p_n), np.int32)
    rank_u = np.zeros(s_n, np.float32)
    cp_after = np.zeros(s_n, np.int32)
    slots = [(k, job) for k, job in enumerate(hrt)] + [(sizes.hrt_jobs + k, job) for k, job in enumerate(srt)]
    for slot, job in slots:
        tpl = scenario.templates[job.template]
        rank = rank_upward(tpl)
        tail = critical_path_after(tpl)
        for g in range(tpl.num_groups):
            s = slot * g_max + g
            exec_us[s] = tpl.exec_us[g]
            valid[s], is_hrt[s] = True, job.hrt
            release[s], deadline[s] = job.release, job.deadline
            client[s] = -1 if job.hrt else job.source
            source[s] = job.source
            rank_u[s] = rank[g]
            cp_after[s] = tail[g]
            for k, a in enumerate(tpl.preds[g]):
                preds[s, k], pred_mask[s, k] = slot * g_max + a, True
                xfer[s, k] = tpl.xfer_us[a, g]
    h_n = sizes.hrt_subjobs
    key = [(int(deadline[s]) if valid[s] else INF, 0 if valid[s] else 1, s) for s in range(h_n)]
    ref_order = np.array([k[2] for k in sorted(key)], np.int32)
    return RTParams(
        exec_us=exec_us,
        valid=valid,
        is_hrt=is_hrt,
        release=release,
        deadline=deadline,
        client=client,
        source=source,
        preds=preds,
        pred_mask=pred_mask,
        xfer_us=xfer,
        rank_u=rank_u,
        cp_after=cp_after,
        ref_order=ref_order,
        certified=np.bool_(certified),
        num_clients=np.int32(len(scenario.clients)),
        groups=g_max,
        clients=sizes.clients,
    )


def stack(params: list[RTParams]) -> RTParams:
    """Stack packed scenarios along a new leading batch axis B (NumPy leaves)."""
    import jax

    return jax.tree.map(lambda *xs: np.stack(xs), *params)


# ------------------------------------------------------------------ certification of the HRT work
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
