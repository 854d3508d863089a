"""Evaluate dispatch policies on shared seeded traces and write the success-ratio table and plot.

Every policy of a comparison sees the *same* traces at each load level (common random numbers),
generated from ``fold_in(key, load index)``; the success ratio of a (policy, load) cell is pooled
over all queries of its traces: successes / arrived queries (every arrived query is resolved, the
simulation drains the queues after the horizon).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.edge_cluster.generator import make_traces
from respect_jax.edge_cluster.policies import STATIC_POLICIES, get_policy
from respect_jax.edge_cluster.scenarios import Scenario
from respect_jax.edge_cluster.simulator import simulate
from respect_jax.edge_cluster.types import OUTCOMES, SUCCESS, Policy, Trace
from respect_jax.reporting import markdown_table as table


def history_ring(scn: Scenario, policy: Policy) -> int:
    """L the policy needs: the scenario's ring for the agent (``policy.needs_history``), else 0."""
    return scn.ring if getattr(policy, "needs_history", False) else 0


def phase_counts(outcome, trace: Trace, num_apps: int, phases: int, horizon_us: int) -> jax.Array:
    """i32[P, A, 5] outcome counts per phase (the horizon cut into ``phases`` equal parts by dispatch time)."""
    width = -(-horizon_us // phases)  # ceil: the last phase ends at the horizon
    phase = jnp.clip(trace.time_us // width, 0, phases - 1).astype(jnp.int32)
    hot_pa = (jax.nn.one_hot(phase, phases, dtype=jnp.int32)[:, :, None]
              * jax.nn.one_hot(trace.app, num_apps, dtype=jnp.int32)[:, None, :] * trace.valid[:, None, None])
    hot_code = jax.nn.one_hot(outcome.code, len(OUTCOMES), dtype=jnp.int32)
    return jnp.einsum("qpa,qc->pac", hot_pa, hot_code)


def _counts_of(scn: Scenario, trace: Trace, policy: Policy, ring: int, phases: int | None) -> jax.Array:
    sim, out = simulate(scn.params, trace, policy, ring)
    if phases is None:
        return sim.counts  # per-query outcomes are dead code then
    return phase_counts(out, trace, scn.params.num_apps, phases, int(round(scn.trace.horizon_s * 1e6)))


def batched_counts(scn: Scenario, policy: Policy, phases: int | None = None):
    """Jitted ``Trace [B, Q] -> i32[B, A, 5]`` outcome counts of ``policy`` (vmap over traces); with ``phases``,
    ``i32[B, P, A, 5]`` per phase of the horizon."""
    ring = history_ring(scn, policy)
    return jax.jit(jax.vmap(lambda trace: _counts_of(scn, trace, policy, ring, phases)))


def static_counts(scn: Scenario, names: Sequence[str], phases: int | None = None):
    """Jitted ``Trace [B, Q] -> i32[P, B, A, 5]`` (``i32[P, B, phases, A, 5]`` with ``phases``): every named
    static policy in one compiled function.

    The policies are branches of a ``lax.switch`` vmapped over the policy index, so a comparison
    compiles once instead of once per policy (each step then evaluates every policy's rule).
    """
    branches = [get_policy(n) for n in names]

    def one(trace: Trace, index: jax.Array) -> jax.Array:
        policy = lambda p, sim, q: jax.lax.switch(index, branches, p, sim, q)  # noqa: E731
        return _counts_of(scn, trace, policy, 0, phases)

    run = jax.jit(jax.vmap(jax.vmap(one, in_axes=(0, None)), in_axes=(None, 0)))
    return lambda traces: run(traces, jnp.arange(len(branches)))


def _agent_counts(scn: Scenario, graphdef, phases: int | None, build=None):
    """Jitted ``(agent parameters, Trace [B, Q]) -> counts`` for agents of one network (see :func:`batched_counts`);
    ``build(graphdef, params) -> Policy`` makes the policy (default: the DQN's greedy policy)."""
    if build is None:
        from respect_jax.edge_cluster.dqn import agent_policy as build

    def one(params, trace: Trace) -> jax.Array:
        return _counts_of(scn, trace, build(graphdef, params), scn.ring, phases)

    return jax.jit(jax.vmap(one, in_axes=(None, 0)))


def _network_key(graphdef):
    """Equal for agents of the same network structure (one compiled evaluation for all of them)."""
    try:
        return hash(graphdef), graphdef
    except TypeError:
        return id(graphdef)


def eval_traces(scn: Scenario, load: str | float, key: jax.Array, traces: int, fit: bool = False) -> Trace:
    """``traces`` traces at one load. ``fit``: Q sized for this load (fewer padding slots, but a
    different shape per load); otherwise the scenario's Q, shared by every load (one compilation)."""
    rates = np.broadcast_to(scn.rate(load), (traces, *scn.base_rate.shape))
    cfg = scn.trace_for(load) if fit else scn.trace
    batch, covered = make_traces(key, rates, cfg, scn.dynamics, return_covered=True)
    if not bool(np.all(np.asarray(covered))):  # the slots ran out: the rest of the horizon would be missing
        raise ValueError(
            f"{scn.name}: {cfg.max_queries} query slots per trace do not cover the {cfg.horizon_s:g} s horizon at "
            f"load {load}; raise max_queries (null sizes it from the highest named load) or lower the load"
        )
    return batch


def evaluate_policy(scn: Scenario, policy: Policy, load: str | float, key: jax.Array, traces: int = 4) -> dict:
    """Counts i32[T, A, 5] and per-trace success ratio f32[T] of one policy at one load."""
    counts = np.asarray(batched_counts(scn, policy)(eval_traces(scn, load, key, traces)))
    total = counts.sum(axis=(1, 2))
    return {"counts": counts, "success": counts[:, :, SUCCESS].sum(axis=1) / np.maximum(total, 1)}


def compare(
    scn: Scenario,
    policies: Mapping[str, Policy],
    loads: Sequence[str] | None = None,
    key: jax.Array | None = None,
    traces: int = 4,
    phases: int | None = None,
) -> dict:
    """Evaluate every policy at every load level on shared traces.

    Returns a JSON-friendly document: ``success[policy][load]`` (pooled), ``per_app[policy][load][app]``,
    ``counts[policy][load]`` (A x 5 lists, codes in :data:`OUTCOMES` order), ``std[policy][load]``
    (standard deviation of the per-trace success ratios), ``per_trace[policy][load]`` (the per-trace success
    ratios, trace order shared by every policy), ``mean``/``ci95[policy][load]`` (their mean and the half-width
    of its 95 % Student-t confidence interval), ``per_app_ci95[policy][load][app]``, ``queries[load]``, ``eval_s``;
    with ``phases``: ``phase_success[policy][load]`` (pooled success ratio in each phase of the horizon).
    """
    loads = list(loads or scn.loads)
    key = jax.random.key(12345) if key is None else key
    doc = {"scenario": scn.name, "loads": {name: scn.load_factor(name) for name in loads}, "traces": traces,
           "apps": list(scn.app_names), "outcomes": list(OUTCOMES), "policies": list(policies),
           "success": {}, "std": {}, "per_app": {}, "counts": {}, "queries": {}, "eval_s": {},
           "per_trace": {}, "mean": {}, "ci95": {}, "per_app_ci95": {}}
    trace_sets = {load: eval_traces(scn, load, jax.random.fold_in(key, i), traces) for i, load in enumerate(loads)}
    static = [n for n, p in policies.items() if p is STATIC_POLICIES.get(n)]
    runs = {}
    if static:
        fn = static_counts(scn, static, phases)
        t0 = time.perf_counter()
        per_load = {load: np.asarray(fn(trace_sets[load])) for load in loads}  # [P, T, (phases,) A, 5]
        for i, name in enumerate(static):
            runs[name] = ({load: per_load[load][i] for load in loads}, (time.perf_counter() - t0) / len(static))
    agent_fns = {}
    for name, policy in policies.items():
        if name not in runs and hasattr(policy, "graphdef"):  # trained agents: one compilation per network
            key_ = (_network_key(policy.graphdef), getattr(policy, "build_key", None))
            if key_ not in agent_fns:
                agent_fns[key_] = _agent_counts(scn, policy.graphdef, phases, getattr(policy, "build", None))
            t0 = time.perf_counter()
            counts = {load: np.asarray(agent_fns[key_](policy.params, trace_sets[load])) for load in loads}
            runs[name] = (counts, time.perf_counter() - t0)
    for name, policy in policies.items():
        if name not in runs:
            fn = batched_counts(scn, policy, phases)
            t0 = time.perf_counter()
            counts = {load: np.asarray(fn(trace_sets[load])) for load in loads}
            runs[name] = (counts, time.perf_counter() - t0)
    if phases is not None:
        doc["phases"], doc["phase_success"] = phases, {}
        for name, (counts_by_load, _) in runs.items():
            doc["phase_success"][name] = {
                load: (c.sum(axis=0)[:, :, SUCCESS].sum(axis=1) / np.maximum(c.sum(axis=(0, 2, 3)), 1)).tolist()
                for load, c in counts_by_load.items()}
            runs[name] = ({load: c.sum(axis=1) for load, c in counts_by_load.items()}, runs[name][1])
    for name in policies:
        counts_by_load, seconds = runs[name]
        for k in ("success", "std", "per_app", "counts", "per_trace", "mean", "ci95", "per_app_ci95"):
            doc[k][name] = {}
        for load in loads:
            counts = counts_by_load[load]  # [T, A, 5]
            pooled = counts.sum(axis=0)
            per_trace = counts[:, :, SUCCESS].sum(axis=1) / np.maximum(counts.sum(axis=(1, 2)), 1)
            doc["success"][name][load] = float(pooled[:, SUCCESS].sum() / max(pooled.sum(), 1))
            doc["std"][name][load] = float(per_trace.std())
            doc["per_trace"][name][load] = per_trace.tolist()
            doc["mean"][name][load], doc["ci95"][name][load] = mean_ci(per_trace)
            app_trace = counts[:, :, SUCCESS] / np.maximum(counts.sum(axis=2), 1)  # [T, A] (0 where none arrived)
            doc["per_app_ci95"][name][load] = {
                app: mean_ci(app_trace[counts[:, a].sum(axis=1) > 0, a])[1] for a, app in enumerate(scn.app_names)
            }
            doc["per_app"][name][load] = {
                app: float(pooled[a, SUCCESS] / max(pooled[a].sum(), 1)) for a, app in enumerate(scn.app_names)
            }
            doc["counts"][name][load] = pooled.tolist()
            doc["queries"][load] = int(pooled.sum())
        doc["eval_s"][name] = seconds
    return doc


def mean_ci(values) -> tuple[float, float]:
    """Mean of per-trace values f[T] and the half-width of its 95 % Student-t confidence interval (0 if T < 2)."""
    x = np.asarray(values, np.float64)
    if x.size == 0:
        return 0.0, 0.0
    if x.size < 2:
        return float(x.mean()), 0.0
    from scipy.stats import t as student_t

    return float(x.mean()), float(student_t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))


def paired_difference(doc: dict, a: str, b: str, load: str) -> tuple[float, float]:
    """Mean and 95 % CI half-width of the per-trace difference ``a - b`` at a load (same traces: a paired test)."""
    return mean_ci(np.asarray(doc["per_trace"][a][load]) - np.asarray(doc["per_trace"][b][load]))


def best_static(doc: dict, load: str, learned: Sequence[str] = ("aset",)) -> tuple[str, float]:
    """Name and success ratio of the best non-learned policy at a load."""
    scores = {p: doc["success"][p][load] for p in doc["policies"] if p not in learned}
    name = max(scores, key=scores.get)
    return name, scores[name]


def markdown_table(doc: dict, tie: float = 0.005) -> str:
    """Success ratio per policy (rows) and load (columns), then per app; the best of each column in bold.

    ``tie``: policies within this of the best are bold too (and counted as tied).
    """
    loads = list(doc["loads"])
    rows = []
    for p in doc["policies"]:
        cells = []
        for ld in loads:
            best = max(doc["success"][q][ld] for q in doc["policies"])
            v = doc["success"][p][ld]
            text = f"{v:.3f} ± {doc['ci95'][p][ld]:.3f}"
            cells.append(f"**{text}**" if v >= best - tie else text)
        rows.append([p, *cells])
    per_app = [
        [p, app, *(f"{doc['per_app'][p][ld][app]:.3f} ± {doc['per_app_ci95'][p][ld][app]:.3f}" for ld in loads)]
        for p in doc["policies"]
        for app in doc["apps"]
    ]
    lines = [f"Success ratio on scenario `{doc['scenario']}` "
             f"({doc['traces']} traces per load, same traces for every policy; pooled over the traces; ± is the "
             "half-width of the 95 % Student-t confidence interval of the mean per-trace success ratio)", "",
             table(["policy", *(f"{ld} (x{doc['loads'][ld]:g})" for ld in loads)], rows),
             "", "Per application:", "", table(["policy", "app", *loads], per_app)]
    lines += ["", "Queries per load: " + ", ".join(f"{ld} {doc['queries'][ld]:,}" for ld in loads)]
    return "\n".join(lines)


def plot(doc: dict, path: str | Path) -> None:
    """Grouped bars: success ratio per load level for every policy, overall and per app."""
    from matplotlib.figure import Figure  # the object API: no pyplot, no global backend state

    loads, policies, apps = list(doc["loads"]), doc["policies"], doc["apps"]
    panels = [("all apps", lambda p, ld: doc["success"][p][ld])] + [
        (app, lambda p, ld, app=app: doc["per_app"][p][ld][app]) for app in apps
    ]
    fig = Figure(figsize=(4.2 * len(panels), 3.6))
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)
    width = 0.8 / len(policies)
    x = np.arange(len(loads))
    for ax, (title, value) in zip(axes[0], panels, strict=True):
        for i, p in enumerate(policies):
            ax.bar(x + (i - (len(policies) - 1) / 2) * width, [value(p, ld) for ld in loads], width, label=p)
        ax.set_xticks(x, loads)
        ax.set_title(title)
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("success ratio")
    axes[0][-1].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"scenario {doc['scenario']}: success ratio per policy and load")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def policies_to_compare(
    scn: Scenario, names: Sequence[str], checkpoint: str | Path | None, run_dir: str | Path,
    margin: float | str | None = None,
) -> tuple[dict[str, Policy], list[str], str | None]:
    """(policies by name, Markdown header lines, note) of an evaluation of ``names`` on ``scn``.

    Static names come from :func:`get_policy`; ``aset`` is the trained agent (DQN or policy-switching) of
    ``checkpoint`` (or, when it is None, of ``run_dir``). Without an agent there, an explicit ``checkpoint`` is an
    error, while ``run_dir`` only drops ``aset`` and returns a one-line ``note``. ``margin`` (None: the agent's own)
    is the policy-switching agent's decision margin, a number or ``"M,rule=m,..."`` (M, but m for a switch to that
    rule); a DQN agent ignores it. An agent trained on a scenario of other shapes (features, actions) is a
    one-line ValueError, as is a list that leaves nothing to evaluate, a malformed margin or a negative margin.
    """
    from respect_jax.edge_cluster.scenarios import describe
    from respect_jax.edge_cluster.simulator import num_features
    from respect_jax.edge_cluster.switching import (
        NETWORK_FILE,
        SwitchAgent,
        agent_switch_policy,
        load_edge_agent,
        parse_margin,
    )

    if not names:
        raise ValueError("eval.policies is empty")
    spec = None if margin is None else parse_margin(margin)
    if spec is not None and not (spec[0] >= 0.0 and all(m >= 0.0 for m in spec[1].values())):  # (spread= too)
        raise ValueError(f"eval.margin must be >= 0 (or null: the agent's own), got {margin!r}")
    policies, header, note = {}, [f"Scenario `{scn.name}`:", "", "```", describe(scn), "```", ""], None
    for name in names:
        if name != "aset":
            policies[name] = get_policy(name)
            continue
        ckpt = Path(checkpoint or run_dir)
        if not (ckpt / NETWORK_FILE).is_file():
            if checkpoint:
                raise FileNotFoundError(f"eval.checkpoint={ckpt}: no trained agent there (no {NETWORK_FILE})")
            note = f"no trained agent in {ckpt} (run `respect-edge train` first); static policies only"
            continue
        agent, trained_on = load_edge_agent(ckpt)  # the DQN or the switching agent, by network.json's format
        shapes = (num_features(scn.params), scn.params.num_actions)
        if (num_features(trained_on.params), trained_on.params.num_actions) != shapes:
            raise ValueError(f"agent in {ckpt} was trained on scenario {trained_on.name!r} with other shapes; "
                             f"evaluate it on a scenario with the same sources, sites, apps and variants")
        switching = isinstance(agent, SwitchAgent)
        if switching and spec is not None:
            policies["aset"] = agent_switch_policy(agent, margin)
        else:
            policies["aset"] = agent.policy
        header.append(f"ASET agent: `{ckpt}` ({agent.config.episodes} episodes x {agent.config.num_envs} envs x "
                      f"{agent.config.episode_steps} dispatches, trained in {agent.train_time_s:.0f} s)")
        if switching:
            shown = agent.config.margin if spec is None else spec[0]
            over = agent.config.rule_margins if spec is None else spec[1]
            header.append(f"Decision margin: {shown:g}" + "".join(f", {r} {m:g}" for r, m in over.items()))
    if not policies:
        agent_dir = checkpoint or run_dir
        raise ValueError(f"eval.policies={list(names)}: nothing to evaluate (no trained agent in {agent_dir})")
    return policies, header, note


def write_report(doc: dict, out_dir: str | Path, stem: str, header: str = "") -> dict[str, str]:
    """Write ``<stem>.md``, ``<stem>.png`` and ``<stem>.json`` under ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"md": out_dir / f"{stem}.md", "png": out_dir / f"{stem}.png", "json": out_dir / f"{stem}.json"}
    text = (header + "\n\n" if header else "") + markdown_table(doc) + f"\n\n![success ratio]({stem}.png)\n"
    paths["md"].write_text(text)
    plot(doc, paths["png"])
    paths["json"].write_text(json.dumps(doc, indent=1))
    return {k: str(v) for k, v in paths.items()}
