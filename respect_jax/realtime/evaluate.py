"""Run methods (policy x safety layer on/off) over scenario batches and summarise the figures.

A **method** is a policy name (:data:`.baselines.POLICIES` or ``rl``) plus whether the safety
layer runs. One compiled rollout per safety setting serves every policy (``lax.switch`` on a
traced policy index), so adding methods costs no compilation.

Figures per method (:func:`summarise`):

* ``hrt_schedulability`` -- fraction of scenarios with no HRT deadline miss;
* ``srt_satisfaction`` -- SRT jobs finished by their deadline / SRT jobs (pooled over scenarios; None
  when the scenarios release no SRT job);
* ``jain`` -- mean over scenarios of Jain's index of the per-client SRT satisfaction rates;
* ``utilisation`` -- mean over scenarios and accelerators of busy time / makespan;
* ``work_utilisation`` -- mean over scenarios of the scenario's work (mean accelerator time of its sub-jobs) /
  (M x makespan): issue 31's second reading, which does not reward running the same jobs on slower accelerators;
* ``override_rate`` -- rejected proposals / decisions (0 without the safety layer);
* the safety layer's cost per decision -- measured separately (:func:`safety_overhead_py`,
  :func:`safety_overhead_jax`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from respect_jax.realtime.baselines import POLICIES
from respect_jax.realtime.environment import RTEnv, rollout
from respect_jax.realtime.policy import RTPolicy, as_policy
from respect_jax.realtime.reference import PY_POLICIES, PySim
from respect_jax.realtime.types import RTParams


@dataclass(frozen=True)
class Method:
    """A policy and whether the safety layer certifies its proposals."""

    name: str
    policy: str
    safety: bool


def parse_method(spec: str) -> Method:
    """``"edf"`` -> EDF without the safety layer; ``"rl+safety"`` -> RL with it."""
    policy, _, suffix = spec.partition("+")
    if suffix not in ("", "safety"):
        raise ValueError(f"method {spec!r}: the only suffix is '+safety'")
    if policy not in POLICIES and policy != "rl":
        raise ValueError(f"method {spec!r}: unknown policy {policy!r}; choose one of {', '.join([*POLICIES, 'rl'])}")
    return Method(spec, policy, suffix == "safety")


class Runner:
    """Compiled batched rollouts of several policies, with and without the safety layer.

    Args:
        policies: policy names (``rl`` needs ``model``).
        max_steps: decision cap per episode (episodes that hit it are reported as unfinished).
        model: the trained :class:`RTPolicy` (greedy decoding).
    """

    def __init__(self, policies: Sequence[str], max_steps: int, model: RTPolicy | None = None):
        self.policies = tuple(dict.fromkeys(policies))
        if "rl" in self.policies and model is None:
            raise ValueError("policy 'rl' needs a trained model (set model=...)")
        self.max_steps = int(max_steps)
        self.graphdef, self.model_state = nnx.split(model) if model is not None else (None, None)
        self._jit: dict[bool, object] = {}

    def _compiled(self, safety: bool):
        if safety not in self._jit:
            env = RTEnv(safety=safety)
            names, graphdef = self.policies, self.graphdef

            def run(params: RTParams, key: jax.Array, idx: jax.Array, model_state):
                fns = []
                for n in names:
                    if n == "rl":
                        fns.append(as_policy(nnx.merge(graphdef, model_state), greedy=True))
                    else:
                        fns.append(POLICIES[n])

                def policy(obs, state, k):
                    return jax.lax.switch(idx, [lambda o, s, kk, f=f: f(o, s, kk) for f in fns], obs, state, k)

                state, metrics = rollout(env, params, policy, key, self.max_steps)
                return state, metrics

            self._jit[safety] = jax.jit(run)
        return self._jit[safety]

    def run(self, params: RTParams, policy: str, safety: bool, seed: int = 0) -> tuple[object, dict]:
        """Final states and per-scenario metrics (NumPy, axis B) of one method on a batch."""
        fn = self._compiled(safety)
        state, metrics = fn(
            jax.tree.map(jnp.asarray, params),
            jax.random.key(seed),
            jnp.int32(self.policies.index(policy)),
            self.model_state,
        )
        jax.block_until_ready(metrics)
        return state, {k: np.asarray(v) for k, v in metrics.items()}


def summarise(metrics: dict) -> dict:
    """Figures of one method from per-scenario metrics (see the module docstring)."""
    srt_jobs = float(metrics["srt_jobs"].sum())
    decisions = float(metrics["decisions"].sum())
    return {
        "scenarios": int(len(metrics["hrt_jobs"])),
        "hrt_schedulability": float(np.mean(metrics["hrt_missed"] == 0)),
        "hrt_jobs": int(metrics["hrt_jobs"].sum()),
        "hrt_missed": int(metrics["hrt_missed"].sum()),
        "srt_satisfaction": float(metrics["srt_met"].sum() / srt_jobs) if srt_jobs else None,  # None: no SRT job
        "jain": float(np.mean(metrics["jain"])),
        "utilisation": float(np.mean(metrics["utilisation"])),
        "work_utilisation": float(np.mean(metrics["work_utilisation"])),
        "override_rate": float(metrics["overrides"].sum() / decisions) if decisions else 0.0,
        "decisions": int(decisions),
        "unfinished": int((~metrics["finished"]).sum()),
        "violations": int(metrics["violation"].sum()),
    }


# per-scenario metrics of the grid evaluation (each a mean over the scenarios, with a 95% CI)
GRID_METRICS = ("srt_satisfaction", "jain", "utilisation", "work_utilisation", "override_rate")


def per_scenario(metrics: dict) -> dict[str, np.ndarray]:
    """f64[B] per-scenario values of :data:`GRID_METRICS` (NaN: a scenario without SRT jobs has no SRT rate).

    ``srt_satisfaction`` = SRT jobs met / SRT jobs of the scenario; ``override_rate`` = rejected proposals /
    decisions of the scenario; ``jain``, ``utilisation`` and ``work_utilisation`` as in
    :func:`.environment.episode_metrics`.
    """
    srt = metrics["srt_jobs"].astype(np.float64)
    dec = metrics["decisions"].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "srt_satisfaction": np.where(srt > 0, metrics["srt_met"] / srt, np.nan),
            "jain": metrics["jain"].astype(np.float64),
            "utilisation": metrics["utilisation"].astype(np.float64),
            "work_utilisation": metrics["work_utilisation"].astype(np.float64),
            "override_rate": np.where(dec > 0, metrics["overrides"] / np.maximum(dec, 1), 0.0),
        }


def mean_ci(x: np.ndarray, level: float = 0.95) -> tuple[float, float, int]:
    """Mean, half-width of the Student-t ``level`` confidence interval and n over the finite entries of ``x``.

    The half-width is 0 for n = 1 and NaN for n = 0 (mean NaN too).
    """
    from scipy import stats

    x = np.asarray(x, np.float64)
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return float("nan"), float("nan"), 0
    if n == 1:
        return float(x[0]), 0.0, 1
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * x.std(ddof=1) / np.sqrt(n))
    return float(x.mean()), half, n


def grid_row(values: dict[str, np.ndarray], reference: dict[str, np.ndarray] | None) -> dict:
    """Means and 95% CIs of one method on one cell; with ``reference`` (another method's per-scenario values on
    the same scenarios) also the paired difference ``method - reference`` with its CI."""
    row = {}
    for k in GRID_METRICS:
        mean, half, n = mean_ci(values[k])
        row[k] = {"mean": mean, "ci95": half, "n": n}
        if reference is not None:
            dm, dh, dn = mean_ci(values[k] - reference[k])
            row[k]["diff"] = {"mean": dm, "ci95": dh, "n": dn}
    return row


def grid_targets(rows: list[dict], per: dict, learner: str = "rl+safety", reference: str = "edf+safety") -> dict:
    """Issue 31's targets on a grid evaluation.

    Args:
        rows: :func:`grid_row` rows with ``preset`` and ``method``.
        per: ``{(preset, method): per_scenario values}`` (the same scenarios for every method).
    Returns:
        per baseline ``b`` (every other ``+safety`` method but ``learner``): the cells where the learner's SRT
        satisfaction is below ``b``'s beyond the 95% CI of the paired difference (``losses``), and the paired
        difference over every scenario of the grid (``grid_diff``: mean, ci95; "strictly better" = its CI
        above 0); the cells where the learner's override rate is not below ``reference``'s
        (``override_not_below``) and where its Jain, utilisation or work utilisation is below ``reference``'s
        beyond the paired CI (``jain_worse``, ``utilisation_worse``, ``work_utilisation_worse``).
    """
    cells = list(dict.fromkeys(r["preset"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    out: dict = {"learner": learner, "reference": reference, "baselines": {}}
    if learner not in methods:
        return out

    def diff(cell, other, key):
        return per[(cell, learner)][key] - per[(cell, other)][key]

    for b in methods:
        if b == learner or not b.endswith("+safety"):
            continue
        losses = []
        for c in cells:
            m, h, _ = mean_ci(diff(c, b, "srt_satisfaction"))
            if m + h < 0:
                losses.append(c)
        pooled = np.concatenate([diff(c, b, "srt_satisfaction") for c in cells])
        gm, gh, gn = mean_ci(pooled)
        out["baselines"][b] = {"losses": losses, "grid_diff": {"mean": gm, "ci95": gh, "n": gn}}
    if reference in methods:
        out["override_not_below"] = [c for c in cells if not mean_ci(diff(c, reference, "override_rate"))[0] < 0]
        for key in ("jain", "utilisation", "work_utilisation"):
            worse = []
            for c in cells:
                m, h, _ = mean_ci(diff(c, reference, key))
                if m + h < 0:
                    worse.append(c)
            out[f"{key}_worse"] = worse
    return out


def safety_at_scale(
    configs: Sequence,
    platform,
    count: int,
    policies: Sequence[str],
    seed: int = 0,
    chunk: int = 500,
    max_steps: int = 400,
    model: RTPolicy | None = None,
    validate_every: int = 50,
    log=None,
) -> dict:
    """The certified-safety property on ``count`` random certified scenarios, every policy behind the layer.

    Scenarios cycle through ``configs`` (e.g. a utilisation x HRT-share grid), drawn from the SeedSequence
    ``(seed, chunk index)`` in chunks of ``chunk`` (one compiled rollout serves every chunk and policy). Per
    policy: HRT jobs, HRT misses, invariant violations, unfinished episodes, overrides/decisions; every
    ``validate_every``-th executed schedule is re-checked by :func:`.reference.validate_schedule`.

    Returns:
        ``{"scenarios", "rejected_draws", "policies": {name: counts}, "validated", "invalid"}``.
    """
    from respect_jax.realtime.generator import generate
    from respect_jax.realtime.reference import validate_schedule
    from respect_jax.realtime.tasks import Sizes, pack, stack

    sizes = Sizes(
        hrt_jobs=max(c.max_hrt_jobs for c in configs),
        srt_jobs=max(c.max_srt_jobs for c in configs),
        groups=configs[0].groups,
        machines=platform.num_machines,
        clients=max(max(c.num_clients for c in configs), 1),
    )
    runner = Runner(policies, max_steps, model)
    keys = ("hrt_jobs", "hrt_missed", "overrides", "decisions")
    totals = {p: {k: 0 for k in (*keys, "violations", "unfinished")} for p in policies}
    done = rejected = validated = 0
    invalid: list[str] = []
    k = 0
    while done < count:
        n = min(chunk, count - done)
        scs = []
        for j, cfg in enumerate(configs):  # an equal share of the chunk per config (the first ones get the rest)
            m = n // len(configs) + (j < n % len(configs))
            if m:
                drawn, st = generate(cfg, platform, m, seed=(seed, k, j))
                scs += drawn
                rejected += st["rejected_draws"]
        packed = [pack(s, sizes) for s in scs]
        batch = stack(packed)
        for p in policies:
            state, met = runner.run(batch, p, True, seed=seed + k)
            t = totals[p]
            for key in keys:
                t[key] += int(met[key].sum())
            t["violations"] += int(met["violation"].sum())
            t["unfinished"] += int((~met["finished"]).sum())
            for i in range(0, len(packed), validate_every):
                errs = validate_schedule(packed[i], state.start[i], state.finish[i], state.machine[i])
                validated += 1
                invalid += [f"{p} chunk {k} scenario {i}: {e}" for e in errs]
        done += len(scs)
        k += 1
        if log:
            log(f"{done}/{count} scenarios: " + ", ".join(f"{p} {totals[p]['hrt_missed']} missed" for p in policies))
    return {
        "scenarios": done,
        "rejected_draws": rejected,
        "policies": totals,
        "validated": validated,
        "invalid": invalid[:20],
    }


def fuzz_redrawn_adversary(scenarios: Sequence, seed: int = 0) -> dict:
    """The counterexample search that found the held-accelerator bug: plain-Python episodes in which every step
    proposes a pair the layer rejects whenever one exists (else random priorities); after every decision no
    reference start may lie in the past. Returns episodes, decisions, HRT misses and the first violations."""
    import random

    from respect_jax.realtime.reference import py_certify
    from respect_jax.realtime.tasks import pack, sizes_for

    rng = random.Random(seed)
    out = {"episodes": 0, "decisions": 0, "hrt_missed": 0, "violations": []}
    for i, s in enumerate(scenarios):
        sim = PySim(pack(s, sizes_for([s])), safety=True)
        while not sim.done:
            priority = [rng.random() for _ in range(sim.sc.S)]
            pref = [[rng.random() for _ in range(sim.sc.M)] for _ in range(sim.sc.S)]
            rejected = [(x, m) for x, m in sim.pairs() if not py_certify(sim.sc, sim.t, sim.plan, x, m)]
            if rejected:
                x, m = rng.choice(rejected)
                priority[x], pref[x][m] = 10.0, 10.0
            sim.step(priority, pref)
            if any(start < sim.t for start, _ in sim.plan.values()) and len(out["violations"]) < 10:
                out["violations"].append(f"scenario {i}: a reference start before t={sim.t}")
        m = sim.metrics()
        out["episodes"] += 1
        out["decisions"] += m["decisions"]
        out["hrt_missed"] += m["hrt_missed"]
        if m["violation"] and len(out["violations"]) < 10:
            out["violations"].append(f"scenario {i}: invariant violation flagged")
    return out


def learner_vs_best(rows: list[dict], per: dict, learner: str, reference: str) -> list[dict]:
    """Per cell: the learner's SRT satisfaction, the best other ``+safety`` method's (by mean), the paired
    difference learner - best with its 95% CI and a verdict (``win``: CI above 0, ``loss``: below, else
    ``tie``), and both override rates (learner, ``reference``)."""
    out = []
    for cell in dict.fromkeys(r["preset"] for r in rows):
        here = {r["method"]: r for r in rows if r["preset"] == cell}
        if learner not in here:
            continue
        others = [m for m in here if m != learner and m.endswith("+safety")]
        best = max(others, key=lambda m: here[m]["srt_satisfaction"]["mean"])
        d, h, _ = mean_ci(per[(cell, learner)]["srt_satisfaction"] - per[(cell, best)]["srt_satisfaction"])
        out.append(
            {
                "cell": cell,
                "learner_srt": here[learner]["srt_satisfaction"],
                "best": best,
                "best_srt": here[best]["srt_satisfaction"],
                "diff": {"mean": d, "ci95": h},
                "verdict": "win" if d - h > 0 else ("loss" if d + h < 0 else "tie"),
                "learner_overrides": here[learner]["override_rate"]["mean"],
                "reference_overrides": here[reference]["override_rate"]["mean"] if reference in here else None,
            }
        )
    return out


def idle_while_ready_us(params: RTParams, start: np.ndarray, finish: np.ndarray, machine: np.ndarray) -> int:
    """Accelerator time (us, summed over accelerators) spent idle while some sub-job could have started there.

    For one finished episode (``params`` one unbatched scenario, NumPy or jnp leaves; ``start``, ``finish``,
    ``machine``: i32[S] of the executed schedule). Sub-job ``s`` *waits for* accelerator ``m`` on
    ``[ready(s, m), start(s))``, where ``ready(s, m) = max(release, finish(p) + transfer if p ran elsewhere)``
    over its predecessors ``p`` (the environment's readiness rule); accelerator ``m`` counts as idle-while-ready
    at every instant of ``[0, makespan)`` where it runs nothing and some sub-job waits for it. Idle time the
    safety layer imposes (an accelerator held for the reference) is included: this measures how much an
    accelerator is left idle while work exists, whatever the reason.
    """
    ex = np.asarray(params.exec_us)
    valid = np.asarray(params.valid)
    preds, pmask, xfer = np.asarray(params.preds), np.asarray(params.pred_mask), np.asarray(params.xfer_us)
    release = np.asarray(params.release).astype(np.int64)
    start, finish, machine = (np.asarray(a).astype(np.int64) for a in (start, finish, machine))
    total = 0
    for m in range(ex.shape[1]):
        arrive = finish[preds] + np.where(machine[preds] != m, xfer, 0)  # [S, P]
        ready = np.maximum(release, np.max(np.where(pmask, arrive, 0), axis=1))
        w = valid & (ready < start)
        waits = np.stack([ready[w], start[w]], axis=1)
        b = valid & (machine == m)
        runs = np.stack([start[b], finish[b]], axis=1)
        pts = np.unique(np.concatenate([waits.ravel(), runs.ravel()]))
        if pts.size < 2:
            continue
        lo, hi = pts[:-1], pts[1:]
        waiting = np.any((waits[None, :, 0] <= lo[:, None]) & (lo[:, None] < waits[None, :, 1]), axis=1)
        running = np.any((runs[None, :, 0] <= lo[:, None]) & (lo[:, None] < runs[None, :, 1]), axis=1)
        total += int(np.sum(np.where(waiting & ~running, hi - lo, 0)))
    return total


def makespan_lower_bound_us(params: RTParams) -> np.ndarray:
    """i64[...] a makespan no schedule of the scenario(s) beats: the latest ``release + fastest time + cp_after``
    over the real sub-jobs (each sub-job's job released, then a precedence path from it to its job's end at the
    fastest times, with no transfer and no waiting). ``params``: one scenario or a batch (leading axes kept)."""
    ex = np.asarray(params.exec_us).astype(np.int64)
    valid = np.asarray(params.valid)
    ends = np.asarray(params.release).astype(np.int64) + ex.min(axis=-1) + np.asarray(params.cp_after)
    return np.max(np.where(valid, ends, 0), axis=-1)


def utilisation_parts(params: RTParams, state) -> dict[str, np.ndarray]:
    """Per-scenario pieces of the utilisation figure of a batch of finished episodes (leading axis B).

    ``utilisation = busy_ms / (M * makespan_ms)`` (:func:`.environment.episode_metrics`), so a method's
    utilisation can fall because it finishes later (``makespan_ms`` up) or because it spends less accelerator
    time on the same jobs (``busy_ms`` down: sub-jobs on faster accelerators). Returns f64[B] each:
    ``busy_ms`` (execution time dispatched, summed over accelerators), ``makespan_ms``, ``idle_ready_ms``
    (:func:`idle_while_ready_us`), ``makespan_lb_ms`` (:func:`makespan_lower_bound_us`: no schedule finishes
    earlier) and ``slowdown`` (mean over sub-jobs of time on the chosen accelerator / time
    on its fastest one, minus 1).
    """
    ex = np.asarray(params.exec_us).astype(np.float64)
    valid = np.asarray(params.valid)
    start, finish, machine = (np.asarray(a) for a in (state.start, state.finish, state.machine))
    chosen = np.take_along_axis(ex, np.maximum(machine, 0)[..., None], axis=-1)[..., 0]
    slow = np.where(valid, chosen / np.maximum(ex.min(axis=-1), 1.0) - 1.0, 0.0)
    n = np.maximum(valid.sum(axis=-1), 1)
    idle = [
        idle_while_ready_us(jax.tree.map(lambda x, b=b: np.asarray(x)[b], params), start[b], finish[b], machine[b])
        for b in range(valid.shape[0])
    ]
    return {
        "busy_ms": np.where(valid, chosen, 0.0).sum(axis=-1) / 1e3,
        "makespan_lb_ms": makespan_lower_bound_us(params) / 1e3,
        "makespan_ms": np.max(np.where(valid, finish, 0), axis=-1).astype(np.float64) / 1e3,
        "idle_ready_ms": np.asarray(idle, np.float64) / 1e3,
        "slowdown": slow.sum(axis=-1) / n,
    }


def safety_overhead_py(packed: Sequence[RTParams], policy: str = "edf", refresh: bool = True) -> dict:
    """Per-decision wall time of the plain-Python safety layer (certify + fallback + refresh).

    What a runtime implementation in Python would pay per decision, in microseconds.
    """
    samples = []
    for p in packed:
        sim = PySim(p, safety=True, refresh=refresh, timing=True)
        sim.run(PY_POLICIES[policy])
        samples += sim.safety_seconds
    arr = np.asarray(samples) * 1e6
    return {
        "decisions": int(arr.size),
        "mean_us": float(arr.mean()) if arr.size else 0.0,
        "p50_us": float(np.percentile(arr, 50)) if arr.size else 0.0,
        "p99_us": float(np.percentile(arr, 99)) if arr.size else 0.0,
    }


def safety_overhead_jax(params: RTParams, policy: str = "edf", inner: int = 100, repeats: int = 7) -> dict:
    """Batched JAX cost of the safety layer for one decision, isolated from the rest of the step.

    On the first decision point of every scenario of ``params`` (all HRT work still pending: the
    most expensive refresh), run exactly what :meth:`RTEnv.step` runs for the layer --
    :meth:`RTEnv.safety_decision` on the policy's proposal plus the reference refresh -- ``inner``
    times in a ``lax.scan`` (time offsets fed as data so nothing is hoisted), jitted and vmapped over
    the batch. Reports the best of ``repeats`` timings divided by ``inner * B``.
    """
    from respect_jax.realtime.environment import pair_mask
    from respect_jax.realtime.safety import reference_schedule

    env = RTEnv(safety=True)
    params = jax.tree.map(jnp.asarray, params)
    state, ts = jax.jit(env.batch_reset)(params)
    b = int(params.valid.shape[0])
    action = jax.vmap(POLICIES[policy])(ts.observation, state, jax.random.split(jax.random.key(0), b))

    def layer(st, act, dt):
        st = st.replace(t=st.t + dt)
        mask = pair_mask(st)
        j, m = env.propose(mask, act)
        accepted, x, mx, dispatch, _ = env.safety_decision(st, mask, j, m)
        r_start, r_mach, ok = reference_schedule(st.params, st.t, st.free_at, st.finish, st.machine)
        return accepted.astype(jnp.int32) + x + mx + dispatch + ok + r_start[0] + r_mach[0]

    @jax.jit
    def run(st, act, offsets):
        def body(acc, dt):
            return acc + jnp.sum(jax.vmap(layer, in_axes=(0, 0, None))(st, act, dt)), None

        return jax.lax.scan(body, jnp.int32(0), offsets)[0]

    offsets = jnp.zeros((inner,), jnp.int32)
    jax.block_until_ready(run(state, action, offsets))
    best = float("inf")
    for _ in range(repeats):
        tic = time.perf_counter()
        jax.block_until_ready(run(state, action, offsets))
        best = min(best, time.perf_counter() - tic)
    return {"batch": b, "inner": inner, "us_per_decision": best / (inner * b) * 1e6}
