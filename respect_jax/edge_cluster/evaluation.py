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

from respect_jax.edge_cluster.policies import STATIC_POLICIES, get_policy
from respect_jax.edge_cluster.scenarios import Scenario
from respect_jax.edge_cluster.simulator import Policy, simulate
from respect_jax.edge_cluster.traces import make_traces
from respect_jax.edge_cluster.types import OUTCOMES, SUCCESS, Trace


def history_ring(scn: Scenario, policy: Policy) -> int:
    """L the policy needs: the scenario's ring for the agent (``policy.needs_history``), else 0."""
    return scn.ring if getattr(policy, "needs_history", False) else 0


def batched_counts(scn: Scenario, policy: Policy):
    """Jitted ``Trace [B, Q] -> i32[B, A, 5]`` outcome counts of ``policy`` (vmap over traces)."""
    params, ring = scn.params, history_ring(scn, policy)

    def one(trace: Trace) -> jax.Array:
        return simulate(params, trace, policy, ring)[0].counts  # per-query outcomes are dead code here

    return jax.jit(jax.vmap(one))


def static_counts(scn: Scenario, names: Sequence[str]):
    """Jitted ``Trace [B, Q] -> i32[P, B, A, 5]``: every named static policy in one compiled function.

    The policies are branches of a ``lax.switch`` vmapped over the policy index, so a comparison
    compiles once instead of once per policy (each step then evaluates every policy's rule).
    """
    branches = [get_policy(n) for n in names]
    params = scn.params

    def one(trace: Trace, index: jax.Array) -> jax.Array:
        policy = lambda p, sim, q: jax.lax.switch(index, branches, p, sim, q)  # noqa: E731
        return simulate(params, trace, policy, 0)[0].counts

    run = jax.jit(jax.vmap(jax.vmap(one, in_axes=(0, None)), in_axes=(None, 0)))
    return lambda traces: run(traces, jnp.arange(len(branches)))


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
) -> dict:
    """Evaluate every policy at every load level on shared traces.

    Returns a JSON-friendly document: ``success[policy][load]`` (pooled), ``per_app[policy][load][app]``,
    ``counts[policy][load]`` (A x 5 lists, codes in :data:`OUTCOMES` order), ``std[policy][load]``
    (standard deviation of the per-trace success ratios), ``queries[load]`` and ``eval_s``.
    """
    loads = list(loads or scn.loads)
    key = jax.random.key(12345) if key is None else key
    doc = {"scenario": scn.name, "loads": {name: scn.load_factor(name) for name in loads}, "traces": traces,
           "apps": list(scn.app_names), "outcomes": list(OUTCOMES), "policies": list(policies),
           "success": {}, "std": {}, "per_app": {}, "counts": {}, "queries": {}, "eval_s": {}}
    trace_sets = {load: eval_traces(scn, load, jax.random.fold_in(key, i), traces) for i, load in enumerate(loads)}
    static = [n for n, p in policies.items() if p is STATIC_POLICIES.get(n)]
    runs = {}
    if static:
        fn = static_counts(scn, static)
        t0 = time.perf_counter()
        per_load = {load: np.asarray(fn(trace_sets[load])) for load in loads}  # [P, T, A, 5]
        for i, name in enumerate(static):
            runs[name] = ({load: per_load[load][i] for load in loads}, (time.perf_counter() - t0) / len(static))
    for name, policy in policies.items():
        if name not in runs:
            fn = batched_counts(scn, policy)
            t0 = time.perf_counter()
            counts = {load: np.asarray(fn(trace_sets[load])) for load in loads}
            runs[name] = (counts, time.perf_counter() - t0)
    for name in policies:
        counts_by_load, seconds = runs[name]
        doc["success"][name], doc["std"][name], doc["per_app"][name], doc["counts"][name] = {}, {}, {}, {}
        for load in loads:
            counts = counts_by_load[load]  # [T, A, 5]
            pooled = counts.sum(axis=0)
            per_trace = counts[:, :, SUCCESS].sum(axis=1) / np.maximum(counts.sum(axis=(1, 2)), 1)
            doc["success"][name][load] = float(pooled[:, SUCCESS].sum() / max(pooled.sum(), 1))
            doc["std"][name][load] = float(per_trace.std())
            doc["per_app"][name][load] = {
                app: float(pooled[a, SUCCESS] / max(pooled[a].sum(), 1)) for a, app in enumerate(scn.app_names)
            }
            doc["counts"][name][load] = pooled.tolist()
            doc["queries"][load] = int(pooled.sum())
        doc["eval_s"][name] = seconds
    return doc


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
    lines = [f"Success ratio on scenario `{doc['scenario']}` "
             f"({doc['traces']} traces per load, same traces for every policy; ± is the standard deviation of the "
             "per-trace success ratios)",
             "", "| policy | " + " | ".join(f"{ld} (x{doc['loads'][ld]:g})" for ld in loads) + " |",
             "|---|" + "---|" * len(loads)]
    for p in doc["policies"]:
        cells = []
        for ld in loads:
            best = max(doc["success"][q][ld] for q in doc["policies"])
            v = doc["success"][p][ld]
            text = f"{v:.3f} ± {doc['std'][p][ld]:.3f}"
            cells.append(f"**{text}**" if v >= best - tie else text)
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines += ["", "Per application:", "", "| policy | app | " + " | ".join(loads) + " |",
              "|---|---|" + "---|" * len(loads)]
    for p in doc["policies"]:
        for app in doc["apps"]:
            lines.append(f"| {p} | {app} | " + " | ".join(f"{doc['per_app'][p][ld][app]:.3f}" for ld in loads) + " |")
    lines += ["", "Queries per load: " + ", ".join(f"{ld} {doc['queries'][ld]:,}" for ld in loads)]
    return "\n".join(lines)


def plot(doc: dict, path: str | Path) -> None:
    """Grouped bars: success ratio per load level for every policy, overall and per app."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads, policies, apps = list(doc["loads"]), doc["policies"], doc["apps"]
    panels = [("all apps", lambda p, ld: doc["success"][p][ld])] + [
        (app, lambda p, ld, app=app: doc["per_app"][p][ld][app]) for app in apps
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), sharey=True, squeeze=False)
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
    plt.close(fig)


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


def queries_per_second(scn: Scenario, policy: Policy, load: str | float, batch: int, key: jax.Array,
                       repeats: int = 3) -> dict:
    """Simulated queries per second of the jitted, vmapped simulator over ``batch`` traces (compile excluded)."""
    traces = eval_traces(scn, load, key, batch, fit=True)
    fn = batched_counts(scn, policy)
    t0 = time.perf_counter()
    jax.block_until_ready(fn(traces))
    compile_s = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(traces))
        best = min(best, time.perf_counter() - t0)
    n = int(jnp.sum(traces.valid))
    return {"queries": n, "time_s": best, "queries_per_s": n / best, "compile_s": compile_s, "batch": batch}
