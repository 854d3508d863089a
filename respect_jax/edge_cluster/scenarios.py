"""Scenarios: validated plain-dict configs -> :class:`Scenario` (EdgeParams + arrival rates + trace config).

A scenario document (``conf/edge_scenario/*.yaml``; the CLI resolves it, tests may build dicts)::

    name: small
    regions: 1                 # sources and sites are grouped in metro regions
    sources_per_region: 2
    horizon_s: 10.0            # simulated seconds per trace
    pattern: poisson           # poisson | mmpp | diurnal
    mmpp: {burst_factor: 3.0, mean_burst_s: 1.0, mean_calm_s: 3.0}
    diurnal: {amplitude: 0.6, period_s: 20.0, phase_spread: 0.0}
    service_cv: 0.2            # processing-time noise (coefficient of the Exp(1) term)
    loads: {low: 0.5, medium: 1.0, high: 1.5, overload: 2.5}   # multipliers of every rate
    ring: 32                   # history length of the agent's features
    max_queries: null          # query slots per trace (null: sized from the highest load)
    source_spread: 0.2         # sources of a region get RTT factors spread over 1 +- spread/2
    network:                   # round-trip ms by site tier; 'local' = same region
      far_edge: {local_ms: 2.0, remote_ms: 14.0, jitter: 0.1}
      cloud: {local_ms: 40.0, remote_ms: 40.0, jitter: 0.25}
    sites:
      - {name: edge0, tier: far_edge, region: 0, workers: 2, gmacs_per_ms: 0.3, overhead_ms: 0.5, max_wait_ms: 100}
      - {name: cloud, tier: cloud, region: null, workers: 16, gmacs_per_ms: 2.0, overhead_ms: 1.0, max_wait_ms: 500}
    apps:
      - {name: ar, deadline_ms: 25, min_accuracy: 0.70, rate: 100, variants: [mobilenetv2, mobilenet, nasnetmobile]}
    dynamics:                  # optional: conditions that change within a trace (absent: constant conditions)
      shift: 0.0               # each trace starts its profiles at a random phase in [0, shift] x horizon
      apps:                    # by app name: rate profile and bursts
        ar: {profile: [0.5, 1.0, 2.0, 1.0, 0.5], bursts: 2, burst_factor: 3.0, burst_s: 0.3}
      sites:                   # by site name: network delay profile and spikes, processing slow-down profile
        cloud: {net: [1.0, 2.0, 1.0], spikes: 1, spike_factor: 4.0, spike_s: 0.2, slow: [1, 1, 20, 20, 1]}

A profile is a list of multipliers at evenly spaced times from 0 to the horizon (linear in between); bursts and
spikes are windows placed uniformly at random over each trace's horizon (:class:`~.types.Dynamics`).

Model variants are the Keras models of ``data/models/``: compute = the sum of the graph's MACs,
accuracy = the published ImageNet top-1 of ``keras.applications`` (:data:`TOP1_ACCURACY`).
Every bad value raises a one-line :class:`ValueError` naming the field.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import jax.numpy as jnp
import numpy as np

from respect_jax.edge_cluster.types import MAX_EVENTS, MAX_TIME_US, PROFILE_KNOTS, Dynamics, EdgeParams, app_peaks
from respect_jax.resources import conf_path, data_path

MODELS_DIR = data_path("models")
PRESETS_DIR = conf_path("edge_scenario")

# ImageNet top-1 accuracy (single centre crop, validation set) of the keras.applications models, as
# published in the Keras documentation table https://keras.io/api/applications/ (same input sizes as
# data/models/: 224, or 299 for InceptionV3, InceptionResNetV2 and Xception).
TOP1_ACCURACY = {
    "xception": 0.790,
    "vgg16": 0.713,
    "vgg19": 0.713,
    "resnet50": 0.749,
    "resnet50v2": 0.760,
    "resnet101": 0.764,
    "resnet101v2": 0.772,
    "resnet152": 0.766,
    "resnet152v2": 0.780,
    "inception_v3": 0.779,
    "inception_resnet_v2": 0.803,
    "mobilenet": 0.704,
    "mobilenetv2": 0.713,
    "densenet121": 0.750,
    "densenet169": 0.762,
    "densenet201": 0.773,
    "nasnetmobile": 0.744,
}

TIERS = ("far_edge", "near_edge", "cloud")
PATTERNS = ("poisson", "mmpp", "diurnal")
LOAD_LEVELS = ("low", "medium", "high", "overload")

MAX_RTT_MS = 1000.0  # keeps jitter_us * jitter_pct < 2**31
MAX_PROC_MS = 2000.0  # keeps proc_us * service_pct < 2**31
MAX_WAIT_MS = 100_000.0
MAX_DEADLINE_MS = 10_000.0


@functools.cache
def model_gmacs(name: str) -> float:
    """Giga-MACs of one inference of ``data/models/<name>.json`` (sum over its layers)."""
    if name not in TOP1_ACCURACY:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(TOP1_ACCURACY))}")
    path = MODELS_DIR / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: model graph missing (regenerate with respect-export model={name})")
    doc = json.loads(path.read_text())
    return float(sum(int(node["macs"]) for node in doc["nodes"])) / 1e9


@dataclass(frozen=True)
class TraceConfig:
    """Static settings of the workload generator (hashable; the rates are the vmappable part).

    pattern: ``poisson``, ``mmpp`` (every source alternates calm/burst states with exponential
    sojourns; the burst rate is ``burst_factor`` x the calm rate and the long-run mean rate equals
    the configured rate) or ``diurnal`` (rate x ``1 + amplitude*sin(2*pi*t/period + phase_n)``,
    a compressed day; source phases spread over ``phase_spread`` x 2*pi).
    max_queries: Q, query slots per trace (candidates of the thinning, valid or not).
    max_switches: MMPP state changes drawn per source (enough to cover the horizon).
    """

    pattern: str = "poisson"
    horizon_s: float = 10.0
    max_queries: int = 4096
    burst_factor: float = 3.0
    mean_burst_s: float = 1.0
    mean_calm_s: float = 3.0
    amplitude: float = 0.6
    period_s: float = 20.0
    phase_spread: float = 0.0
    service_cv: float = 0.2
    max_switches: int = 64

    @property
    def burst_fraction(self) -> float:
        return self.mean_burst_s / (self.mean_burst_s + self.mean_calm_s)

    @property
    def peak_factor(self) -> float:
        """Largest rate multiplier of the pattern (the thinning envelope)."""
        if self.pattern == "mmpp":
            return self.burst_factor / (self.burst_fraction * self.burst_factor + 1.0 - self.burst_fraction)
        if self.pattern == "diurnal":
            return 1.0 + self.amplitude
        return 1.0


@dataclass(frozen=True)
class Scenario:
    """A built scenario.

    Attributes:
        params: the cluster (:class:`EdgeParams`, jnp arrays).
        base_rate: f32[N, A] arrival rate of each (source, app) at load 1.0, queries/s.
        trace: generator settings; loads: named load multipliers.
        ring: L, history length of the observation features.
        doc: the resolved scenario document (stored next to checkpoints).
    """

    name: str
    params: EdgeParams
    base_rate: np.ndarray
    trace: TraceConfig
    loads: dict
    ring: int
    site_names: tuple[str, ...]
    site_tiers: tuple[str, ...]
    source_names: tuple[str, ...]
    app_names: tuple[str, ...]
    variant_names: tuple[str, ...]
    doc: dict
    dynamics: Dynamics | None = None
    app_peak: np.ndarray | None = None  # f32[A] largest rate multiplier of each app's profile and bursts

    @property
    def envelope_rate(self) -> float:
        """Thinning candidates per second at load 1.0 (app peaks and the arrival pattern's peak included)."""
        peak = np.ones(self.base_rate.shape[1]) if self.app_peak is None else self.app_peak
        return float((self.base_rate * peak[None, :]).sum()) * self.trace.peak_factor

    @property
    def is_dynamic(self) -> bool:
        """True when some condition changes within a trace (a ``dynamics`` block that is not neutral)."""
        return bool(self.doc.get("dynamics"))

    def load_factor(self, load: str | float) -> float:
        if isinstance(load, str):
            if load not in self.loads:
                raise ValueError(f"unknown load {load!r}; choose one of {', '.join(self.loads)}")
            return float(self.loads[load])
        if not (math.isfinite(load) and load > 0):
            raise ValueError(f"load must be a finite number > 0, got {load}")
        return float(load)

    def trace_for(self, load: str | float) -> TraceConfig:
        """Trace settings with Q sized for one load (mean + 8 sigma thinning candidates), unless
        the document fixed ``max_queries``; fewer padding slots make the scan shorter."""
        if self.doc.get("max_queries") is not None:
            return self.trace
        return replace(self.trace, max_queries=query_slots(self.envelope_rate * self.load_factor(load)
                                                           * self.trace.horizon_s))

    def rate(self, load: str | float = 1.0) -> np.ndarray:
        """f32[N, A] arrival rates at a named load level or multiplier."""
        return (self.base_rate * self.load_factor(load)).astype(np.float32)


def query_slots(expected: float) -> int:
    """Q for ``expected`` thinning candidates: mean + 8 standard deviations + 64, rounded up to 128."""
    return int(math.ceil((expected + 8.0 * math.sqrt(max(expected, 0.0)) + 64.0) / 128.0) * 128)


# ---------------------------------------------------------------------------------------- checks
def _get(doc: Mapping, key: str, where: str, default=...):
    if key in doc and doc[key] is not None:
        return doc[key]
    if default is ...:
        raise ValueError(f"{where}.{key} is required")
    return default


def _number(doc: Mapping, key: str, where: str, low: float | None = None, high: float | None = None,
            strict_low: bool = False, default=...) -> float:
    value = _get(doc, key, where, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(float(value)):
        raise ValueError(f"{where}.{key} must be a finite number, got {value!r}")
    value = float(value)
    if low is not None and (value <= low if strict_low else value < low):
        raise ValueError(f"{where}.{key} must be {'>' if strict_low else '>='} {low:g}, got {value:g}")
    if high is not None and value > high:
        raise ValueError(f"{where}.{key} must be <= {high:g}, got {value:g}")
    return value


def _integer(doc: Mapping, key: str, where: str, low: int = 1, high: int | None = None, default=...) -> int:
    value = _get(doc, key, where, default)
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())):
        raise ValueError(f"{where}.{key} must be an integer, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{where}.{key} must be an integer {bound}, got {value}")
    return value


def _choice(doc: Mapping, key: str, where: str, choices: Sequence[str], default=...) -> str:
    value = _get(doc, key, where, default)
    if value not in choices:
        raise ValueError(f"{where}.{key} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _no_unknown(doc: Mapping, known: set[str], where: str) -> None:
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def _mapping(doc, where: str) -> Mapping:
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where} must be a mapping, got {type(doc).__name__}")
    return doc


def _list(doc, where: str) -> list:
    if isinstance(doc, str | bytes) or not isinstance(doc, Sequence) or not doc:
        raise ValueError(f"{where} must be a non-empty list")
    return list(doc)


_TOP = {"name", "regions", "sources_per_region", "horizon_s", "pattern", "mmpp", "diurnal", "service_cv",
        "loads", "ring", "max_queries", "source_spread", "network", "sites", "apps", "description", "dynamics"}
_SITE = {"name", "tier", "region", "workers", "gmacs_per_ms", "overhead_ms", "max_wait_ms"}
_APP = {"name", "deadline_ms", "min_accuracy", "rate", "variants", "regions"}
_NET = {"local_ms", "remote_ms", "jitter"}
_DYN = {"shift", "apps", "sites"}
_DYN_APP = {"profile", "bursts", "burst_factor", "burst_s"}
_DYN_SITE = {"net", "spikes", "spike_factor", "spike_s", "slow"}
MAX_NET_FACTOR = 50.0  # network-delay multiplier (profile x spike), traces.MAX_NET_PCT / 100
MAX_SLOW_FACTOR = 100.0  # processing multiplier, traces.MAX_SLOW_PCT / 100


def _profile(spec: Mapping, key: str, where: str, low: float, high: float) -> np.ndarray:
    """A multiplier profile (a number or a list of >= 1 numbers over the horizon) -> f32[G] on the knot grid."""
    value = spec.get(key, 1.0)
    items = [value] if isinstance(value, int | float) and not isinstance(value, bool) else value
    if isinstance(items, str) or not isinstance(items, Sequence) or not items:
        raise ValueError(f"{where}.{key} must be a number or a non-empty list of numbers, got {value!r}")
    out = []
    for x in items:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(float(x)) or not low <= x <= high:
            raise ValueError(f"{where}.{key} must hold numbers in [{low:g}, {high:g}], got {value!r}")
        out.append(float(x))
    if len(out) == 1:
        return np.full(PROFILE_KNOTS, out[0], np.float32)
    return np.interp(np.linspace(0.0, 1.0, PROFILE_KNOTS), np.linspace(0.0, 1.0, len(out)), out).astype(np.float32)


def neutral_dynamics(num_apps: int, num_sites: int) -> Dynamics:
    """Constant conditions (every multiplier 1, no bursts or spikes)."""
    return Dynamics(
        app_profile=jnp.ones((num_apps, PROFILE_KNOTS), jnp.float32), app_bursts=jnp.zeros((num_apps,), jnp.int32),
        app_burst_factor=jnp.ones((num_apps,), jnp.float32), app_burst_s=jnp.zeros((num_apps,), jnp.float32),
        site_net=jnp.ones((num_sites, PROFILE_KNOTS), jnp.float32), site_spikes=jnp.zeros((num_sites,), jnp.int32),
        site_spike_factor=jnp.ones((num_sites,), jnp.float32), site_spike_s=jnp.zeros((num_sites,), jnp.float32),
        site_slow=jnp.ones((num_sites, PROFILE_KNOTS), jnp.float32), shift=jnp.float32(0.0),
    )


def _dynamics(doc, where: str, app_names: Sequence[str], site_names: Sequence[str], horizon_s: float,
              rtt_ms: np.ndarray, proc_ms: np.ndarray) -> tuple[Dynamics, dict]:
    """Validate a ``dynamics`` block -> (Dynamics, resolved document). ``rtt_ms`` f32[N, S] nominal round trips and
    ``proc_ms`` f32[S, V] nominal processing times bound the multipliers (int32 microsecond arithmetic)."""
    n_app, n_site = len(app_names), len(site_names)
    dyn = neutral_dynamics(n_app, n_site)
    if doc is None or (isinstance(doc, Mapping) and not doc):
        return dyn, {}
    doc = _mapping(doc, where)
    _no_unknown(doc, _DYN, where)
    arrays = {k: np.array(v) for k, v in dyn.__dict__.items()}
    shift = _number(doc, "shift", where, 0.0, 1.0, default=0.0)
    apps = _mapping(_get(doc, "apps", where, {}), f"{where}.apps")
    for name, spec in apps.items():
        w = f"{where}.apps.{name}"
        if name not in app_names:
            raise ValueError(f"{w}: unknown app {name!r}; choose one of {', '.join(app_names)}")
        a = app_names.index(name)
        spec = _mapping(spec, w)
        _no_unknown(spec, _DYN_APP, w)
        arrays["app_profile"][a] = _profile(spec, "profile", w, 0.0, 100.0)
        arrays["app_bursts"][a] = _integer(spec, "bursts", w, 0, MAX_EVENTS, default=0)
        arrays["app_burst_factor"][a] = _number(spec, "burst_factor", w, 1.0, 100.0, default=1.0)
        arrays["app_burst_s"][a] = _number(spec, "burst_s", w, 0.0, MAX_TIME_US / 1e6, default=0.0)
        if arrays["app_profile"][a].max() <= 0:
            raise ValueError(f"{w}.profile must be > 0 somewhere")
    sites = _mapping(_get(doc, "sites", where, {}), f"{where}.sites")
    for name, spec in sites.items():
        w = f"{where}.sites.{name}"
        if name not in site_names:
            raise ValueError(f"{w}: unknown site {name!r}; choose one of {', '.join(site_names)}")
        s = site_names.index(name)
        spec = _mapping(spec, w)
        _no_unknown(spec, _DYN_SITE, w)
        arrays["site_net"][s] = _profile(spec, "net", w, 0.01, MAX_NET_FACTOR)
        arrays["site_spikes"][s] = _integer(spec, "spikes", w, 0, MAX_EVENTS, default=0)
        arrays["site_spike_factor"][s] = _number(spec, "spike_factor", w, 0.01, MAX_NET_FACTOR, default=1.0)
        arrays["site_spike_s"][s] = _number(spec, "spike_s", w, 0.0, MAX_TIME_US / 1e6, default=0.0)
        arrays["site_slow"][s] = _profile(spec, "slow", w, 0.01, MAX_SLOW_FACTOR)
        spike = arrays["site_spike_factor"][s] if arrays["site_spikes"][s] > 0 else 1.0
        worst_net = float(arrays["site_net"][s].max() * max(spike, 1.0))
        if worst_net > MAX_NET_FACTOR:
            raise ValueError(f"{w}: network factor up to {worst_net:g} (net x spike_factor) exceeds {MAX_NET_FACTOR:g}")
        if rtt_ms[:, s].max() * worst_net > MAX_RTT_MS:
            raise ValueError(f"{w}: a round trip reaches {rtt_ms[:, s].max() * worst_net:g} ms (> {MAX_RTT_MS:g})")
        if proc_ms[s].max() * arrays["site_slow"][s].max() > MAX_PROC_MS:
            raise ValueError(f"{w}: processing reaches {proc_ms[s].max() * arrays['site_slow'][s].max():g} ms "
                             f"(> {MAX_PROC_MS:g}) at the slow-down peak")
    dyn = Dynamics(**{k: jnp.asarray(v) for k, v in arrays.items()}).replace(shift=jnp.float32(shift))
    resolved = {"shift": shift, "apps": {k: dict(v) for k, v in apps.items()},
                "sites": {k: dict(v) for k, v in sites.items()}}
    return dyn, resolved


def _regions_of(value, regions: int, where: str) -> tuple[int, ...] | None:
    """Regions a site is local to (None: no locality, every source uses ``local_ms``)."""
    if value is None:
        return None
    items = [value] if isinstance(value, int | float) and not isinstance(value, bool) else value
    if isinstance(items, str) or not isinstance(items, Sequence):
        raise ValueError(f"{where} must be an integer, a list of integers or null, got {value!r}")
    out = []
    for r in items:
        if isinstance(r, bool) or not isinstance(r, int | float) or float(r) != int(r) or not 0 <= int(r) < regions:
            raise ValueError(f"{where} must name regions in [0, {regions - 1}], got {value!r}")
        out.append(int(r))
    return tuple(out)


def scenario_from_dict(doc: Mapping, where: str = "edge_scenario") -> Scenario:
    """Validate a scenario document and build the :class:`Scenario` (see the module docstring)."""
    doc = _mapping(doc, where)
    _no_unknown(doc, _TOP, where)
    name = str(_get(doc, "name", where, "scenario"))
    regions = _integer(doc, "regions", where, 1, 64, default=1)
    per_region = _integer(doc, "sources_per_region", where, 1, 1024, default=1)
    horizon_s = _number(doc, "horizon_s", where, 0.0, MAX_TIME_US / 1e6, strict_low=True, default=10.0)
    pattern = _choice(doc, "pattern", where, PATTERNS, default="poisson")
    mmpp = _mapping(_get(doc, "mmpp", where, {}), f"{where}.mmpp")
    _no_unknown(mmpp, {"burst_factor", "mean_burst_s", "mean_calm_s"}, f"{where}.mmpp")
    diurnal = _mapping(_get(doc, "diurnal", where, {}), f"{where}.diurnal")
    _no_unknown(diurnal, {"amplitude", "period_s", "phase_spread"}, f"{where}.diurnal")
    service_cv = _number(doc, "service_cv", where, 0.0, 5.0, default=0.2)
    ring = _integer(doc, "ring", where, 2, 1024, default=32)
    spread = _number(doc, "source_spread", where, 0.0, 1.0, default=0.0)

    default_loads = {"low": 0.5, "medium": 1.0, "high": 1.5, "overload": 2.5}
    loads = _mapping(_get(doc, "loads", where, default_loads), f"{where}.loads")
    load_values = {str(k): _number(loads, k, f"{where}.loads", 0.0, 1e3, strict_low=True) for k in loads}
    if not load_values:
        raise ValueError(f"{where}.loads must name at least one load level")

    network = _mapping(_get(doc, "network", where), f"{where}.network")
    net = {}
    for tier, spec in network.items():
        w = f"{where}.network.{tier}"
        if tier not in TIERS:
            raise ValueError(f"{w}: unknown tier {tier!r}; choose one of {', '.join(TIERS)}")
        spec = _mapping(spec, w)
        _no_unknown(spec, _NET, w)
        local = _number(spec, "local_ms", w, 0.002, MAX_RTT_MS)
        net[tier] = (local, _number(spec, "remote_ms", w, 0.002, MAX_RTT_MS, default=local),
                     _number(spec, "jitter", w, 0.0, 1.0, default=0.0))

    sites = _list(_get(doc, "sites", where), f"{where}.sites")
    site_names, site_tiers, workers, max_wait, speed, overhead, site_regions = [], [], [], [], [], [], []
    for i, site in enumerate(sites):
        w = f"{where}.sites[{i}]"
        site = _mapping(site, w)
        _no_unknown(site, _SITE, w)
        site_names.append(str(_get(site, "name", w, f"site{i}")))
        tier = _choice(site, "tier", w, TIERS)
        if tier not in net:
            raise ValueError(f"{w}: no network entry for tier {tier!r} in {where}.network")
        site_tiers.append(tier)
        site_regions.append(_regions_of(site.get("region"), regions, f"{w}.region"))
        workers.append(_integer(site, "workers", w, 1, 4096))
        speed.append(_number(site, "gmacs_per_ms", w, 0.0, 1e6, strict_low=True))
        overhead.append(_number(site, "overhead_ms", w, 0.0, MAX_PROC_MS, default=0.0))
        max_wait.append(_number(site, "max_wait_ms", w, 0.0, MAX_WAIT_MS, default=MAX_WAIT_MS))
    if len(set(site_names)) != len(site_names):
        raise ValueError(f"{where}.sites: duplicate site names")

    apps = _list(_get(doc, "apps", where), f"{where}.apps")
    app_names, deadlines, min_acc, rates, app_variants, app_regions = [], [], [], [], [], []
    variant_names: list[str] = []
    for i, app in enumerate(apps):
        w = f"{where}.apps[{i}]"
        app = _mapping(app, w)
        _no_unknown(app, _APP, w)
        app_names.append(str(_get(app, "name", w, f"app{i}")))
        deadlines.append(_number(app, "deadline_ms", w, 0.001, MAX_DEADLINE_MS))  # whole microseconds
        min_acc.append(_number(app, "min_accuracy", w, 0.0, 1.0))
        rates.append(_number(app, "rate", w, 0.0, 1e6))
        names = _list(_get(app, "variants", w), f"{w}.variants")
        for m in names:
            if m not in TOP1_ACCURACY:
                raise ValueError(f"{w}.variants: unknown model {m!r}; choose one of {', '.join(sorted(TOP1_ACCURACY))}")
            if m not in variant_names:
                variant_names.append(m)
        if not any(TOP1_ACCURACY[m] >= min_acc[-1] for m in names):
            best = max(TOP1_ACCURACY[m] for m in names)
            raise ValueError(f"{w}: no variant reaches min_accuracy {min_acc[-1]:g} (best {best:g})")
        app_variants.append(names)
        app_regions.append(_regions_of(app.get("regions"), regions, f"{w}.regions") or tuple(range(regions)))
    if len(set(app_names)) != len(app_names):
        raise ValueError(f"{where}.apps: duplicate app names")

    n_src, n_site, n_app, n_var = regions * per_region, len(sites), len(apps), len(variant_names)
    src_region = np.repeat(np.arange(regions), per_region)
    src_pos = np.tile(np.arange(per_region), regions)
    factor = 1.0 + spread * (src_pos / (per_region - 1) - 0.5) if per_region > 1 else np.ones(n_src)
    rtt = np.zeros((n_src, n_site))
    jitter = np.zeros((n_src, n_site))
    for s, (tier, reg) in enumerate(zip(site_tiers, site_regions, strict=True)):
        local_ms, remote_ms, jit = net[tier]
        local = np.ones(n_src, bool) if reg is None else np.isin(src_region, reg)
        rtt[:, s] = np.where(local, local_ms, remote_ms) * factor
        jitter[:, s] = rtt[:, s] * jit
    if rtt.max() > MAX_RTT_MS:
        raise ValueError(f"{where}: a round trip exceeds {MAX_RTT_MS:g} ms after source_spread")
    rtt_us = np.maximum(np.round(rtt * 1000.0), 2).astype(np.int64)
    jitter_us = np.round(jitter * 1000.0).astype(np.int64)

    gmacs = np.array([model_gmacs(m) for m in variant_names])
    proc_ms = np.asarray(overhead)[:, None] + gmacs[None, :] / np.asarray(speed)[:, None]
    if proc_ms.max() > MAX_PROC_MS:
        s, v = np.unravel_index(int(np.argmax(proc_ms)), proc_ms.shape)
        raise ValueError(f"{where}: {variant_names[v]} on {site_names[s]} takes {proc_ms[s, v]:g} ms "
                         f"(> {MAX_PROC_MS:g}); raise gmacs_per_ms")
    proc_us = np.maximum(np.round(proc_ms * 1000.0), 1).astype(np.int64)

    variant_mask = np.zeros((n_app, n_var), bool)
    for a, names in enumerate(app_variants):
        variant_mask[a, [variant_names.index(m) for m in names]] = True
    base_rate = np.zeros((n_src, n_app), np.float32)
    for a in range(n_app):
        base_rate[np.isin(src_region, app_regions[a]), a] = rates[a]
    if base_rate.sum() <= 0:
        raise ValueError(f"{where}: every arrival rate is zero")

    params = EdgeParams(
        slot_site=jnp.asarray(np.repeat(np.arange(n_site), workers), jnp.int32),
        max_wait_us=jnp.asarray(np.round(np.asarray(max_wait) * 1000.0), jnp.int32),
        rtt_us=jnp.asarray(rtt_us, jnp.int32),
        jitter_us=jnp.asarray(jitter_us, jnp.int32),
        proc_us=jnp.asarray(proc_us, jnp.int32),
        fluid_us=jnp.asarray(-(-proc_us // np.asarray(workers)[:, None]), jnp.int32),
        accuracy_pm=jnp.asarray([round(TOP1_ACCURACY[m] * 1000) for m in variant_names], jnp.int32),
        min_accuracy_pm=jnp.asarray(np.round(np.asarray(min_acc) * 1000.0), jnp.int32),
        deadline_us=jnp.asarray(np.round(np.asarray(deadlines) * 1000.0), jnp.int32),
        variant_mask=jnp.asarray(variant_mask),
        nominal_rate=jnp.asarray(np.maximum(base_rate.sum(axis=0), 1e-6), jnp.float32),
    )

    trace = TraceConfig(
        pattern=pattern,
        horizon_s=horizon_s,
        burst_factor=_number(mmpp, "burst_factor", f"{where}.mmpp", 1.0, 1e3, default=3.0),
        mean_burst_s=_number(mmpp, "mean_burst_s", f"{where}.mmpp", 0.0, 1e6, strict_low=True, default=1.0),
        mean_calm_s=_number(mmpp, "mean_calm_s", f"{where}.mmpp", 0.0, 1e6, strict_low=True, default=3.0),
        amplitude=_number(diurnal, "amplitude", f"{where}.diurnal", 0.0, 1.0, default=0.6),
        period_s=_number(diurnal, "period_s", f"{where}.diurnal", 0.0, 1e6, strict_low=True, default=20.0),
        phase_spread=_number(diurnal, "phase_spread", f"{where}.diurnal", 0.0, 1.0, default=0.0),
        service_cv=service_cv,
    )
    dynamics, dyn_doc = _dynamics(doc.get("dynamics"), f"{where}.dynamics", app_names, site_names, horizon_s,
                                  rtt_us / 1000.0, proc_us / 1000.0)
    app_peak = np.asarray(app_peaks(dynamics), np.float64)
    # query slots: thinning candidates at the highest load, mean + 8 sigma, rounded up
    envelope = float((base_rate * app_peak[None, :]).sum()) * trace.peak_factor
    auto_q = query_slots(envelope * max(load_values.values()) * horizon_s)
    max_queries = _integer(doc, "max_queries", where, 16, 2**24, default=auto_q)
    switches = 2 * int(math.ceil(horizon_s / (trace.mean_burst_s + trace.mean_calm_s) * 1.5)) + 16
    trace = TraceConfig(**{**trace.__dict__, "max_queries": max_queries, "max_switches": switches})

    resolved = {
        "name": name, "regions": regions, "sources_per_region": per_region, "horizon_s": horizon_s,
        "pattern": pattern, "mmpp": {"burst_factor": trace.burst_factor, "mean_burst_s": trace.mean_burst_s,
                                     "mean_calm_s": trace.mean_calm_s},
        "diurnal": {"amplitude": trace.amplitude, "period_s": trace.period_s, "phase_spread": trace.phase_spread},
        "service_cv": service_cv, "loads": load_values, "ring": ring,
        "max_queries": max_queries if doc.get("max_queries") is not None else None,
        "source_spread": spread,
        "network": {t: {"local_ms": v[0], "remote_ms": v[1], "jitter": v[2]} for t, v in net.items()},
        "sites": [dict(s) for s in sites], "apps": [dict(a) for a in apps],
    }
    if dyn_doc:
        resolved["dynamics"] = dyn_doc
    return Scenario(
        name=name, params=params, base_rate=base_rate, trace=trace, loads=load_values, ring=ring,
        site_names=tuple(site_names), site_tiers=tuple(site_tiers),
        source_names=tuple(f"src{r}.{j}" for r, j in zip(src_region, src_pos, strict=True)),
        app_names=tuple(app_names), variant_names=tuple(variant_names), doc=_plain(resolved),
        dynamics=dynamics, app_peak=app_peak,
    )


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def load_preset(name: str, **overrides) -> Scenario:
    """Build a bundled preset (``conf/edge_scenario/<name>.yaml``), top-level keys overridden."""
    import yaml

    path = PRESETS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"unknown scenario preset {name!r}; choose one of {', '.join(preset_names())}")
    return scenario_from_dict({**yaml.safe_load(path.read_text()), **overrides}, where=f"edge_scenario[{name}]")


def _plain(x):
    """JSON-friendly copy (tuples -> lists, numpy scalars -> Python)."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def describe(scn: Scenario) -> str:
    """A few lines summarising a scenario (sites, apps, nominal times)."""
    p = scn.params
    lines = [f"scenario {scn.name}: {p.num_sources} sources, {p.num_sites} sites, {p.num_apps} apps, "
             f"{p.num_variants} variants, {scn.trace.pattern} arrivals over {scn.trace.horizon_s:g} s, "
             f"Q={scn.trace.max_queries}"]
    workers = np.asarray(p.workers)
    for s, name in enumerate(scn.site_names):
        procs = ", ".join(f"{v}={int(p.proc_us[s, i]) / 1000:.1f}" for i, v in enumerate(scn.variant_names))
        lines.append(f"  site {name} ({scn.site_tiers[s]}, {workers[s]} workers): proc ms {procs}")
    for a, name in enumerate(scn.app_names):
        lines.append(f"  app {name}: deadline {int(p.deadline_us[a]) / 1000:g} ms, "
                     f"min acc {int(p.min_accuracy_pm[a]) / 1000:g}, "
                     f"rate {float(scn.base_rate[:, a].sum()):g}/s at load 1")
    dyn = scn.doc.get("dynamics")
    if dyn:
        lines.append(f"  dynamics (random phase up to {dyn.get('shift', 0):g} x horizon):")
        for name, spec in dyn.get("apps", {}).items():
            lines.append(f"    app {name}: " + ", ".join(f"{k}={v}" for k, v in spec.items()))
        for name, spec in dyn.get("sites", {}).items():
            lines.append(f"    site {name}: " + ", ".join(f"{k}={v}" for k, v in spec.items()))
    return "\n".join(lines)
