"""ASET under conditions that change over time (issue 30): static policies (and trained agents) per scenario,
load level and phase of the trace, with 95 % confidence intervals.

Every policy sees the same seeded traces (``--traces`` per scenario and load, common random numbers); a cell is
the mean of the per-trace success ratios and the half-width of its 95 % Student-t interval. "Best static" of a cell
is the static policy with the highest mean; static policies whose paired per-trace difference to it has a 95 %
interval containing 0 are listed as tied. The phase table splits each trace into ``--phases`` equal parts by
dispatch time (pooled success ratio per part) and names the best static policy of each part.

    python experiments/edge_dynamic.py --static-only                      # -> dynamic_static.{md,json}
    python experiments/edge_dynamic.py --train --seeds 0 1 2              # train agents/dynamic/s<seed>, then evaluate
    python experiments/edge_dynamic.py --scenarios isp_diurnal isp_netdrift isp_failure isp_nearsat \
        --agents experiments/results/edge/agents/dynamic                  # + the agents -> dynamic_aset.{md,json}

Training (``--train``): one agent per seed on the four time-varying presets at once (``mixture``: every
environment draws a preset and a load level with each new trace), with the settings of :data:`AGENT` (``--kind dqn``,
the double DQN) or :data:`SWITCH` (``--kind switch``, the policy-switching agent of
:mod:`respect_jax.edge_cluster.switching`), into ``agents/dynamic`` or ``agents/switch``:

    python experiments/edge_dynamic.py --train --kind switch --seeds 0 1 2 --stem dynamic_aset_s21
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import jax
import numpy as np

from respect_jax.cli.common import machine_description
from respect_jax.edge_cluster.evaluation import compare, mean_ci, paired_difference
from respect_jax.edge_cluster.policies import STATIC_POLICIES
from respect_jax.edge_cluster.scenarios import load_preset

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("isp", "isp_diurnal", "isp_netdrift", "isp_failure", "isp_nearsat")
STATIC = ("closest", "fastest_expected", "most_accurate", "least_loaded", "random")


DYNAMIC = ("isp_diurnal", "isp_netdrift", "isp_failure", "isp_nearsat")
AGENT = dict(hidden=(128, 128), action_width=32, num_envs=16, episode_steps=256, episodes=24, n_step=3,
             target_period=250, rules_only=True, mixture=DYNAMIC[1:])
SWITCH = dict(hidden=(128, 128), num_envs=32, episode_steps=256, stride=8, horizon=128, episodes=48,
              updates_per_sample=2, explore=0.2, mixture=DYNAMIC[1:])


def parse_settings(items) -> dict:
    """``["horizon=512", "discount=0.996", "spread_head=true"]`` -> ``{"horizon": 512, ...}`` (YAML values)."""
    import yaml

    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE (a field of the agent's config)")
        out[key.strip()] = yaml.safe_load(value)
    return out


def train_agents(agents_dir: Path, seeds, episodes: int | None, kind: str = "dqn", overrides: dict | None = None,
                 keep_every: int = 0) -> list[dict]:
    """Train one mixture agent per seed into ``agents_dir/s<seed>`` (parameters only kept); their wall times.
    ``overrides``: fields of the agent's config set over :data:`SWITCH` / :data:`AGENT`. ``keep_every`` > 0: also
    keep the parameters every that many episodes in ``s<seed>/kept`` (chosen on selection traces by
    ``edge_select.py``)."""
    if kind == "switch":
        from respect_jax.edge_cluster.switching import SwitchConfig as Config
        from respect_jax.edge_cluster.switching import keep_parameters_only
        from respect_jax.edge_cluster.switching import train_switch as train
        settings = SWITCH
    else:
        from respect_jax.edge_cluster.dqn import DQNConfig as Config
        from respect_jax.edge_cluster.dqn import keep_parameters_only
        from respect_jax.edge_cluster.dqn import train_dqn as train
        settings = AGENT
    settings = {**settings, **(overrides or {})}

    rows = []
    for seed in seeds:
        cfg = Config(**{**settings, **({"episodes": episodes} if episodes else {}), "seed": seed})
        run_dir = agents_dir / f"s{seed}"
        agent = train(load_preset(DYNAMIC[0]), cfg, run_dir, chunk=8, overwrite=True,
                      log=lambda m, s=seed: print(f"[seed {s}] {m}", flush=True), keep_every=keep_every)
        keep_parameters_only(run_dir)
        rows.append({"seed": seed, "kind": kind, "episodes": cfg.episodes,
                     "own_dispatches": cfg.episodes * cfg.episode_steps * cfg.num_envs,
                     "train_time_s": agent.train_time_s, "load_average": os.getloadavg()[0],
                     **({"keep_every": keep_every} if keep_every else {}),
                     "final": agent.history[-1]})
        print(f"[seed {seed}] trained in {agent.train_time_s:.0f} s", flush=True)
    return rows


def best_and_tied(doc: dict, load: str, names) -> tuple[str, list[str]]:
    """Best policy of ``names`` by mean per-trace success, and the others statistically tied with it (paired)."""
    best = max(names, key=lambda p: doc["mean"][p][load])
    tied = []
    for p in names:
        if p != best:
            diff, ci = paired_difference(doc, best, p, load)
            if diff - ci <= 0.0:
                tied.append(p)
    return best, tied


def agent_policies(agents_dir: Path | None) -> dict:
    """``{aset_s<seed>: policy}`` for every seed folder of ``agents_dir`` (empty without one)."""
    if agents_dir is None:
        return {}
    from respect_jax.edge_cluster.switching import NETWORK_FILE, load_edge_agent

    out = {}
    for run in sorted(p for p in agents_dir.iterdir() if (p / NETWORK_FILE).is_file()):
        agent, _ = load_edge_agent(run)
        out[f"aset_{run.name}"] = agent
    return out


def agent_policy_of(agent, margin: str | None):
    """The agent's greedy policy; a switching agent's with decision ``margin`` (``M`` or ``M,rule=m,...``) if
    given."""
    from respect_jax.edge_cluster.switching import SwitchAgent, agent_switch_policy

    if margin is not None and isinstance(agent, SwitchAgent):
        return agent_switch_policy(agent, margin)
    return agent.policy


def agent_section(docs: dict, learned: list[str]) -> list[str]:
    """Per cell: the agents (one per training seed) against the best static policy (paired 95 % intervals), their
    spread across seeds; then every policy's average over all cells."""
    lines = ["", "## Agents per cell (issue 30 targets)", "",
             "Agent columns: mean over the training seeds of their per-cell means; spread = max - min across seeds; "
             "paired difference of each seed's agent to the best static policy (mean ± 95 % half-width over the "
             "shared traces); verdict: *above* if every seed's interval is above 0, *tied* if every seed's interval "
             "reaches 0 or above, else *below*.", "",
             "| scenario | load | agents (mean) | spread across seeds | best static | paired difference per seed | "
             "verdict |", "|---|---|---|---|---|---|---|"]
    verdicts = []
    for name, doc in docs.items():
        for ld in doc["loads"]:
            best, _ = best_and_tied(doc, ld, STATIC)
            means = [doc["mean"][a][ld] for a in learned]
            diffs = [paired_difference(doc, a, best, ld) for a in learned]
            if all(d - c > 0 for d, c in diffs):
                verdict = "above"
            elif all(d + c >= 0 for d, c in diffs):
                verdict = "tied"
            else:
                verdict = "below"
            verdicts.append(verdict)
            lines.append(f"| {name} | {ld} | {np.mean(means):.3f} | {max(means) - min(means):.3f} | {best} "
                         f"{doc['mean'][best][ld]:.3f} | " + ", ".join(f"{d:+.3f} ± {c:.3f}" for d, c in diffs)
                         + f" | {verdict} |")
    lines += ["", f"Cells: {verdicts.count('above')} above, {verdicts.count('tied')} tied, "
              f"{verdicts.count('below')} below the best static policy (of {len(verdicts)}).", "",
              "Average over every (scenario, load) cell (trace i of every cell averaged: mean ± 95 % half-width over "
              "the traces):", "", "| policy | average success |", "|---|---|"]
    avg = {}
    for p in list(STATIC) + learned:
        per_trace = np.mean([np.asarray(doc["per_trace"][p][ld]) for doc in docs.values() for ld in doc["loads"]],
                            axis=0)
        avg[p] = mean_ci(per_trace)
        lines.append(f"| {p} | {avg[p][0]:.4f} ± {avg[p][1]:.4f} |")
    top = max(STATIC, key=lambda p: avg[p][0])
    clear = [a for a in learned if avg[a][0] - avg[a][1] > avg[top][0] + avg[top][1]]
    lines += ["", f"Agents whose average's interval lies above the best static policy's ({top}): "
              f"{len(clear)} of {len(learned)}" + (f" ({', '.join(clear)})" if clear else "") + "."]
    return lines


def _rel(path) -> str:
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def cell(doc: dict, p: str, load: str) -> str:
    return f"{doc['mean'][p][load]:.3f} ± {doc['ci95'][p][load]:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    ap.add_argument("--traces", type=int, default=16)
    ap.add_argument("--phases", type=int, default=4)
    ap.add_argument("--seed", type=int, default=2030)
    ap.add_argument("--agents", default=None, help="folder of agent run folders (one per training seed)")
    ap.add_argument("--static-only", action="store_true")
    ap.add_argument("--train", action="store_true", help="train one agent per --seeds first (into --agents)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--episodes", type=int, default=None)
    ap.add_argument("--margin", default=None, help="decision margin of switching agents, M or M,rule=m,... "
                    "(default: their training config's); chosen on validation traces of another --seed")
    ap.add_argument("--kind", choices=("dqn", "switch"), default="dqn", help="the agent --train trains")
    ap.add_argument("--stem", default=None, help="output file stem (default: dynamic_aset / dynamic_static)")
    ap.add_argument("--training-file", default=None, help="training wall times file (default: dynamic_training"
                    "[_<kind>].json)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="--train: agent config fields over SWITCH / AGENT (e.g. horizon=512 discount=0.996)")
    ap.add_argument("--keep-every", type=int, default=0, help="--train: also keep the parameters every N episodes "
                    "(s<seed>/kept; choose one per seed with edge_select.py; 0: the last only)")
    ap.add_argument("--train-only", action="store_true", help="--train without the evaluation afterwards (choose "
                    "on validation traces first: edge_margin.py)")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "edge"))
    args = ap.parse_args()
    out = Path(args.out)
    if args.train:
        agents_dir = Path(args.agents or out / "agents" / ("switch" if args.kind == "switch" else "dynamic"))
        overrides = parse_settings(args.set)
        rows = train_agents(agents_dir, args.seeds, args.episodes, args.kind, overrides, args.keep_every)
        settings = {**(SWITCH if args.kind == "switch" else AGENT), **overrides,
                    **({"episodes": args.episodes} if args.episodes else {})}
        name = args.training_file or ("dynamic_training_switch.json" if args.kind == "switch" else
                                      "dynamic_training.json")
        (out / name).write_text(json.dumps({"kind": args.kind,
                                            "agent": {k: list(v) if isinstance(v, tuple) else v
                                                      for k, v in settings.items()}, "runs": rows,
                                            "machine": machine_description()}, indent=1))
        if args.train_only:
            return
        args.agents = str(agents_dir)
        if args.scenarios == list(SCENARIOS):
            args.scenarios = list(DYNAMIC)
    agents = {} if args.static_only else agent_policies(Path(args.agents) if args.agents else None)
    stem = args.stem or ("dynamic_static" if not agents else "dynamic_aset")
    docs, t_start = {}, time.perf_counter()
    static_docs = {}
    if agents and (out / "dynamic_static.json").is_file():  # the static policies' cells on the same traces
        saved = json.loads((out / "dynamic_static.json").read_text())["docs"]
        static_docs = {n: d for n, d in saved.items()
                       if d["traces"] == args.traces and d.get("phases") == args.phases and d.get("seed") == args.seed}
    for name in args.scenarios:
        scn = load_preset(name)
        t0 = time.perf_counter()
        policies = {k: agent_policy_of(a, args.margin) for k, a in agents.items()}
        if name not in static_docs:
            policies = {**{p: STATIC_POLICIES[p] for p in STATIC}, **policies}
        doc = compare(scn, policies, key=jax.random.key(args.seed), traces=args.traces, phases=args.phases)
        doc["seed"], doc["wall_s"] = args.seed, time.perf_counter() - t0
        if name in static_docs:  # merge: static cells reused (same seed, traces and phases), agents evaluated now
            old = static_docs[name]
            for k, v in doc.items():
                if isinstance(v, dict) and isinstance(old.get(k), dict) and set(v) <= set(agents):
                    doc[k] = {**old[k], **v}
            doc["policies"] = list(STATIC) + list(agents)
            policies = {p: None for p in doc["policies"]}
        docs[name] = doc
        print(f"[{name}] {doc['wall_s']:.0f}s " + " ".join(
            f"{ld}: " + ",".join(f"{p[:7]}={doc['mean'][p][ld]:.3f}" for p in policies) for ld in doc["loads"]),
            flush=True)

    learned = list(agents)
    lines = ["# Static dispatch policies under conditions that change over time" if not learned else
             "# ASET agents vs static dispatch policies under conditions that change over time", "",
             f"Generated by `python experiments/edge_dynamic.py{' --static-only' if not learned else ''}"
             f"{' --agents ' + _rel(args.agents) if learned else ''}{' --stem ' + args.stem if args.stem else ''}"
             f"{' --margin ' + str(args.margin) if args.margin is not None else ''}` "
             f"({args.traces} traces per scenario and load, the same traces for every policy, seed {args.seed}; "
             f"cells: mean of the per-trace success ratios ± half-width of its 95 % Student-t interval; shared "
             f"{os.cpu_count()}-core CPU, load average {os.getloadavg()[0]:.1f} at the end, "
             f"{time.perf_counter() - t_start:.0f} s in all).", "",
             "Best static: highest mean; *tied*: static policies whose paired per-trace difference to the best has a "
             "95 % interval reaching 0.", "",
             "| scenario | load | " + " | ".join(list(STATIC) + learned) + " | best static | tied with it |",
             "|---|---|" + "---|" * (len(STATIC) + len(learned)) + "---|---|"]
    winners = {}
    for name, doc in docs.items():
        for ld in doc["loads"]:
            best, tied = best_and_tied(doc, ld, STATIC)
            winners[(name, ld)] = {best, *tied}
            cells = [f"**{cell(doc, p, ld)}**" if p == best else cell(doc, p, ld) for p in list(STATIC) + learned]
            lines.append(f"| {name} | {ld} | " + " | ".join(cells) + f" | {best} | {', '.join(tied) or '-'} |")
    always = set(STATIC)
    for s in winners.values():
        always &= s
    counts = {p: sum(p in s for s in winners.values()) for p in STATIC}
    lines += ["", f"Cells where each static policy is best or tied with the best (of {len(winners)}): "
              + ", ".join(f"{p} {n}" for p, n in counts.items() if n) + ".",
              "A single static policy best (or tied) in every cell: " + (", ".join(sorted(always)) if always else
                                                                         "**none**") + ".", ""]
    lines += [f"## Per phase ({args.phases} equal parts of each trace by dispatch time; pooled success ratio)", "",
              "| scenario | load | " + " | ".join(f"phase {i + 1}: best static (success)" for i in range(args.phases))
              + " |", "|---|---|" + "---|" * args.phases]
    phase_best = set()
    for name, doc in docs.items():
        for ld in doc["loads"]:
            row = []
            for i in range(args.phases):
                scores = {p: doc["phase_success"][p][ld][i] for p in STATIC}
                b = max(scores, key=scores.get)
                phase_best.add(b)
                runner = max((p for p in STATIC if p != b), key=scores.get)
                row.append(f"{b} {scores[b]:.3f} (next {runner} {scores[runner]:.3f})")
            lines.append(f"| {name} | {ld} | " + " | ".join(row) + " |")
    lines += ["", f"Static policies best in at least one (scenario, load, phase): {', '.join(sorted(phase_best))}."]
    if learned:
        lines += agent_section(docs, learned)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    slim = {n: {k: v for k, v in d.items()} for n, d in docs.items()}
    (out / f"{stem}.json").write_text(json.dumps({"machine": machine_description(), "docs": slim}, indent=1))
    print(f"wrote {out / stem}.md")


if __name__ == "__main__":
    main()
