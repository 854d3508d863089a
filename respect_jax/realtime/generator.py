"""Seeded random scenarios at a target utilisation and HRT/SRT mix (host NumPy).

Modelling choices:

* **Utilisation** ``U`` = offered demand / platform capacity, with a job's demand counted as its
  *mean* work (sum over sub-jobs of the mean time over accelerators) and capacity ``M`` -- what a
  platform of M "average" accelerators could serve. ``hrt_share`` of it is HRT, the rest SRT.
* **HRT tasks**: UUniFast splits ``U * hrt_share * M`` among ``num_hrt_tasks`` tasks, each running
  a model drawn from ``hrt_models``; ``period = mean_work / u_i``, ``deadline = f * period`` with
  ``f ~ U[deadline_factor]``, offset ``~ U[0, period)``.
* **SRT clients**: Dirichlet(4) shares of ``U * (1 - hrt_share) * M``, a model from
  ``srt_models``; mean inter-arrival ``mean_work / share``, minimum gap ``min_gap_factor`` of it;
  QoS deadline ``q * critical path`` with ``q ~ U[qos_factor]``.
* The episode releases jobs in ``[0, horizon)``; if more HRT/SRT jobs than the padded sizes allow
  would be released, the horizon is shortened to the first release that does not fit.
* A draw whose HRT set fails :func:`.tasks.check_task_set` is redrawn (counted in the
  returned statistics) -- so generated scenarios are *certified*.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from respect_jax.realtime.platform import Platform
from respect_jax.realtime.tasks import (
    HRTTask,
    InfeasibleTaskSet,
    Scenario,
    SRTClient,
    build_template,
    check_task_set,
    make_scenario,
)


@dataclass(frozen=True)
class ScenarioConfig:
    """Distribution of scenarios (one ``conf/rt_scenario/*.yaml`` preset)."""

    name: str = "custom"
    utilisation: float = 0.5
    hrt_share: float = 0.5
    num_hrt_tasks: int = 2
    num_clients: int = 3
    hrt_models: tuple[str, ...] = ("mobilenetv2", "resnet50")
    srt_models: tuple[str, ...] = ("mobilenet", "mobilenetv2", "resnet50")
    groups: int = 3
    horizon_ms: float = 20.0
    deadline_factor: tuple[float, float] = (0.7, 1.0)
    qos_factor: tuple[float, float] = (2.0, 4.0)
    min_gap_factor: float = 0.3
    max_hrt_jobs: int = 8
    max_srt_jobs: int = 8
    max_tries: int = 200
    hrt_tasks: tuple[dict, ...] | None = None  # explicit HRT tasks (then no random HRT draw)

    def __post_init__(self) -> None:
        def bad(field: str, rule: str, value) -> ValueError:
            return ValueError(f"scenario {self.name}: {field} must be {rule}, got {value!r}")

        if not 0 < self.utilisation < math.inf:
            raise bad("utilisation", "a finite number > 0", self.utilisation)
        if not 0 <= self.hrt_share <= 1:
            raise bad("hrt_share", "in [0, 1]", self.hrt_share)
        if not 0 < self.horizon_ms < math.inf:
            raise bad("horizon_ms", "a finite number > 0", self.horizon_ms)
        if not 0 <= self.min_gap_factor < 1:
            rule = "in [0, 1) (the minimum gap is a fraction of the mean gap)"
            raise bad("min_gap_factor", rule, self.min_gap_factor)
        for field in ("num_hrt_tasks", "num_clients"):
            if getattr(self, field) < 0:
                raise bad(field, ">= 0", getattr(self, field))
        for field in ("groups", "max_hrt_jobs", "max_srt_jobs", "max_tries"):
            if getattr(self, field) < 1:
                raise bad(field, ">= 1", getattr(self, field))
        for field in ("deadline_factor", "qos_factor"):
            pair = getattr(self, field)
            if len(pair) != 2 or not 0 < pair[0] <= pair[1] < math.inf:
                raise bad(field, "[low, high] with 0 < low <= high", list(pair))
        draws_hrt = self.hrt_tasks is None and self.num_hrt_tasks > 0 and self.hrt_share > 0
        if draws_hrt and not self.hrt_models:
            raise bad("hrt_models", "non-empty when HRT tasks are drawn", list(self.hrt_models))
        if self.num_clients > 0 and self.hrt_share < 1 and not self.srt_models:
            raise bad("srt_models", "non-empty when there are SRT clients", list(self.srt_models))

    @classmethod
    def from_dict(cls, doc: dict) -> ScenarioConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise ValueError(f"unknown rt_scenario key(s): {', '.join(unknown)}")
        vals = dict(doc)
        for k in ("hrt_models", "srt_models", "deadline_factor", "qos_factor"):
            if k in vals and vals[k] is not None:
                vals[k] = tuple(vals[k])
        if vals.get("hrt_tasks") is not None:
            vals["hrt_tasks"] = tuple(dict(t) for t in vals["hrt_tasks"])
        return cls(**vals)


def uunifast(n: int, total: float, rng: np.random.Generator) -> np.ndarray:
    """f64[n] utilisations summing to ``total``, uniformly distributed (Bini and Buttazzo)."""
    out, rest = np.zeros(n), total
    for i in range(1, n):
        nxt = rest * rng.random() ** (1.0 / (n - i))
        out[i - 1], rest = rest - nxt, nxt
    out[n - 1] = rest
    return out


def explicit_hrt_tasks(cfg: ScenarioConfig) -> list[HRTTask]:
    """The preset's explicit HRT tasks (``period_ms``, ``deadline_ms`` (default = period), ``offset_ms``)."""
    tasks = []
    for i, t in enumerate(cfg.hrt_tasks or ()):
        if "model" not in t or "period_ms" not in t:
            raise ValueError(f"scenario {cfg.name}: hrt_tasks[{i}] needs 'model' and 'period_ms'")
        period = int(round(float(t["period_ms"]) * 1000))
        tasks.append(
            HRTTask(
                model=str(t["model"]),
                period_us=period,
                deadline_us=int(round(float(t.get("deadline_ms", t["period_ms"])) * 1000)),
                offset_us=int(round(float(t.get("offset_ms", 0.0)) * 1000)),
            )
        )
    return tasks


def _draw(cfg: ScenarioConfig, platform: Platform, rng: np.random.Generator) -> Scenario:
    m = platform.num_machines
    if cfg.hrt_tasks is not None:
        hrt = explicit_hrt_tasks(cfg)
    elif cfg.num_hrt_tasks > 0 and cfg.hrt_share > 0:
        us = uunifast(cfg.num_hrt_tasks, cfg.utilisation * cfg.hrt_share * m, rng)
        hrt = []
        for u in us:
            tpl = build_template(str(rng.choice(cfg.hrt_models)), cfg.groups, platform)
            period = max(1, int(np.ceil(tpl.mean_work_us / max(u, 1e-9))))
            deadline = max(1, int(period * rng.uniform(*cfg.deadline_factor)))
            hrt.append(HRTTask(tpl.model, period, deadline, int(rng.integers(0, period))))
    else:
        hrt = []
    clients = []
    srt_total = cfg.utilisation * (1 - cfg.hrt_share) * m
    if cfg.num_clients > 0 and srt_total > 0:
        shares = rng.dirichlet(np.full(cfg.num_clients, 4.0)) * srt_total
        for share in shares:
            tpl = build_template(str(rng.choice(cfg.srt_models)), cfg.groups, platform)
            mean_gap = tpl.mean_work_us / max(share, 1e-9)
            qos = int(tpl.critical_path_us * rng.uniform(*cfg.qos_factor))
            clients.append(SRTClient(tpl.model, mean_gap, int(cfg.min_gap_factor * mean_gap), max(qos, 1)))
    horizon = int(round(cfg.horizon_ms * 1000))
    sc = make_scenario(platform, cfg.groups, hrt, clients, horizon, rng=rng)
    return truncate(sc, cfg.max_hrt_jobs, cfg.max_srt_jobs)


def truncate(sc: Scenario, max_hrt: int, max_srt: int) -> Scenario:
    """Shorten the horizon to the first release that would exceed the job caps."""
    horizon = sc.horizon_us
    for jobs, cap in ((sc.hrt_jobs, max_hrt), (sc.srt_jobs, max_srt)):
        releases = sorted(j.release for j in jobs)
        if len(releases) > cap:
            horizon = min(horizon, releases[cap])
    if horizon == sc.horizon_us:
        return sc
    return dataclasses.replace(sc, jobs=tuple(j for j in sc.jobs if j.release < horizon), horizon_us=horizon)


def generate(
    cfg: ScenarioConfig, platform: Platform, count: int, seed: int | tuple[int, ...]
) -> tuple[list[Scenario], dict]:
    """``count`` certified scenarios from ``seed`` (an int or a tuple of ints: numpy SeedSequence entropy, so
    ``(a, b)`` and any int seed give unrelated streams) and statistics of the draws.

    Raises:
        InfeasibleTaskSet: explicit HRT tasks that fail the check (one line), or random draws of
        which none of ``max_tries`` in a row passed it.
    """
    rng = np.random.default_rng(seed)
    out: list[Scenario] = []
    rejected, reasons = 0, {}
    while len(out) < count:
        for _ in range(cfg.max_tries):
            sc = _draw(cfg, platform, rng)
            try:
                check_task_set(sc)
            except InfeasibleTaskSet as err:
                if cfg.hrt_tasks is not None:
                    raise InfeasibleTaskSet(f"scenario {cfg.name}: {err}") from None
                rejected += 1
                key = str(err).split(":")[0]
                reasons[key] = reasons.get(key, 0) + 1
                continue
            out.append(dataclasses.replace(sc, certified=True))
            break
        else:
            raise InfeasibleTaskSet(
                f"scenario {cfg.name}: none of {cfg.max_tries} random HRT task sets at utilisation {cfg.utilisation:g} "
                f"(hrt_share {cfg.hrt_share:g}) passed the feasibility check; lower the utilisation or the HRT share"
            )
    return out, {"generated": count, "rejected_draws": rejected, "reasons": reasons}


def grid_name(utilisation: float, hrt_share: float) -> str:
    """Preset name of one grid cell, e.g. ``u85_h25``."""
    return f"u{round(100 * utilisation):02d}_h{round(100 * hrt_share):02d}"


def grid_configs(
    base: ScenarioConfig, utilisations: list[float], hrt_shares: list[float], max_tries: int | None = None
) -> list[ScenarioConfig]:
    """One preset per (utilisation, HRT share), every other field from ``base`` (row-major: shares inner)."""
    if not utilisations or not hrt_shares:
        raise ValueError("grid: utilisations and hrt_shares must be non-empty lists")
    extra = {} if max_tries is None else {"max_tries": int(max_tries)}
    return [
        dataclasses.replace(base, name=grid_name(u, h), utilisation=float(u), hrt_share=float(h), **extra)
        for u in utilisations
        for h in hrt_shares
    ]
