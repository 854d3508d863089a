"""Decision rules over the three training seeds of the policy-switching ASET agent, on VALIDATION traces (issue 30).

The seed spread in ``isp_failure`` low comes from which rule a seed learns for the failure phases (session 30:
seed 1 switches to ``most_accurate`` where seeds 0 and 2 switch to ``closest``). This script checks, on traces of
``--seed`` (7 by default; the evaluation seed 2030 is refused):

* ``--diagnose CELL``: along one seed's own trajectory (``--diagnose-seed``, 1 by default), at every query where it
  switches, its predicted advantage of each rule and the other seeds' predictions for the same observation: whether
  the two rules are nearly tied for that seed, and what the others predict there;
* per (scenario, load) cell, beside the static policies and each seed alone: ``mean`` (the three seeds' predicted
  advantages averaged, then the usual greedy rule at the margin) and ``vote`` (each seed's greedy choice; a rule
  chosen by a majority is taken, else the base rule).

    python experiments/edge_ensemble_val.py --agents experiments/results/edge/agents/switch_f3 --agent-seeds 0 1 2 \
        --margin 0.25 --traces 4 --scenarios isp isp_diurnal isp_netdrift isp_failure isp_nearsat \
        --diagnose isp_failure:low --stem edge_ensemble_val_s31
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edge_dynamic import STATIC, best_and_tied  # noqa: E402
from edge_validation import (  # noqa: E402
    add_validation_args,
    cell_traces,
    cells_against,
    load_agents,
    refuse_evaluation_seed,
    write_report,
)

from respect_jax.edge_cluster.evaluation import compare, mean_ci  # noqa: E402
from respect_jax.edge_cluster.policies import STATIC_POLICIES  # noqa: E402
from respect_jax.edge_cluster.scenarios import load_preset  # noqa: E402
from respect_jax.edge_cluster.simulator import dispatch, features, init_sim  # noqa: E402
from respect_jax.edge_cluster.switching import agent_switch_policy, greedy_rule, parse_margin, rule_margin_vector  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _members_choice(graphdef, bundle, x, kind):
    """(chosen rule position, the rules' actions) of an ensemble bundle for observation ``x``."""
    nets = [nnx.merge(graphdef, p) for p in bundle["nets"]]
    base_pos = nets[0].rules.index(nets[0].base)
    scores = jnp.stack([n.score(x, bundle["spread_weight"]) for n in nets])  # [M, R]
    if kind == "mean":
        chosen = greedy_rule(jnp.mean(scores, axis=0), base_pos, bundle["margin"])
    else:  # vote: a rule chosen by a strict majority of the members, else the base rule
        picks = jnp.stack([greedy_rule(s, base_pos, bundle["margin"]) for s in scores])  # [M]
        votes = jnp.sum(picks[:, None] == jnp.arange(scores.shape[-1])[None, :], axis=0)  # [R]
        top = jnp.argmax(votes)
        chosen = jnp.where(2 * votes[top] > len(nets), top, base_pos).astype(jnp.int32)
    return chosen, nets[0].rule_actions(x)


def ensemble_policy(graphdef, bundle, kind):
    """A greedy switching policy over several agents of one network (``bundle``: nets, margin f32[R],
    spread_weight; ``kind`` ``mean`` or ``vote``)."""

    def policy(env_params, sim, query):
        x = features(env_params, sim, query)
        chosen, acts = _members_choice(graphdef, bundle, x, kind)
        return jnp.take(acts, chosen)

    policy.needs_history = True
    policy.graphdef, policy.params = graphdef, bundle
    policy.build = lambda g, b: ensemble_policy(g, b, kind)
    policy.build_key = f"switch_ensemble_{kind}"
    return policy


def diagnose(scn, load, agents, seed_of_traj, margins, args):
    """Along ``seed_of_traj``'s own greedy trajectory: per switched query, every seed's scores for every rule."""
    traces = cell_traces(scn, load, args.seed, args.traces)
    agent = agents[seed_of_traj]
    graphdef = agent.graphdef
    params = {s: a.params for s, a in agents.items()}
    net0 = nnx.merge(graphdef, agent.params)
    base_pos = net0.rules.index(net0.base)
    vec = jnp.asarray(margins, jnp.float32)

    def one(trace):
        def body(sim, query):
            x = features(scn.params, sim, query)
            scores = {s: nnx.merge(graphdef, p).score(x, agent.config.spread_weight) for s, p in params.items()}
            chosen = greedy_rule(scores[seed_of_traj], base_pos, vec)
            acts = nnx.merge(graphdef, agent.params).rule_actions(x)
            action = jax.lax.optimization_barrier(acts[chosen])
            sim, _ = dispatch(scn.params, sim, query, action)
            return sim, (chosen, action != acts[base_pos], jnp.stack([scores[s] for s in params]))

        return jax.lax.scan(body, init_sim(scn.params, scn.ring), trace)[1]

    chosen, switched, scores = (np.asarray(a) for a in jax.jit(jax.vmap(one))(traces))
    valid = np.asarray(traces.valid)
    rules = list(agent.config.rules)
    seeds = list(params)
    rows = []
    for r, rule in enumerate(rules):
        m = valid & switched & (chosen == r)
        if not m.any():
            continue
        own = scores[..., seeds.index(seed_of_traj), :][m]  # [n, R]
        others = {s: scores[..., seeds.index(s), :][m] for s in seeds}
        ranked = np.sort(np.where(np.arange(len(rules)) == base_pos, -np.inf, own), axis=-1)
        gap = ranked[:, -1] - ranked[:, -2]  # the chosen rule's lead over the runner-up among the other rules
        mean_scores = np.mean([others[s] for s in seeds], axis=0)
        ens = np.where(np.max(np.where(np.arange(len(rules)) == base_pos, -np.inf, mean_scores - vec[None, :]), -1)
                       > 0, np.argmax(np.where(np.arange(len(rules)) == base_pos, -np.inf, mean_scores - vec[None, :]),
                                      -1), base_pos)
        rows.append({"rule": rule, "queries": int(m.sum()), "share": float(m.sum() / valid.sum()),
                     "own_mean_score": {q: float(own[:, i].mean()) for i, q in enumerate(rules)},
                     "lead_over_runner_up": {"median": float(np.median(gap)), "p10": float(np.quantile(gap, 0.1)),
                                             "below_0.05": float(np.mean(gap < 0.05)),
                                             "below_0.1": float(np.mean(gap < 0.1))},
                     "other_seeds_mean_score": {str(s): {q: float(others[s][:, i].mean()) for i, q in enumerate(rules)}
                                                for s in seeds if s != seed_of_traj},
                     "mean_ensemble_picks": {q: float(np.mean(ens == i)) for i, q in enumerate(rules)}})
    return rows, rules


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", nargs="+", default=["isp", "isp_diurnal", "isp_netdrift", "isp_failure",
                                                        "isp_nearsat"])
    ap.add_argument("--margin", default="0.25", help="M or M,rule=m,...")
    ap.add_argument("--kinds", nargs="+", default=["mean", "vote"], choices=["mean", "vote"])
    ap.add_argument("--diagnose", default=None, help="scenario:load of the tie diagnosis (none: skipped)")
    ap.add_argument("--diagnose-seed", type=int, default=1)
    ap.add_argument("--skip-cells", action="store_true", help="only the diagnosis")
    add_validation_args(ap, stem="edge_ensemble_val", traces=4, agent_seeds=[0, 1, 2])
    args = ap.parse_args()
    refuse_evaluation_seed(args.seed)
    t_start = time.perf_counter()
    agents = load_agents(args.agents, args.agent_seeds)
    first = agents[args.agent_seeds[0]]
    head, over = parse_margin(args.margin)
    margins = rule_margin_vector(first.config.rules, head, over)
    lines = ["# Decision rules over the switching agent's three training seeds (validation traces)", ""]
    results = {}
    if args.diagnose:
        name, load = args.diagnose.split(":")
        rows, rules = diagnose(load_preset(name), load, agents, args.diagnose_seed, margins, args)
        results["diagnosis"] = {"cell": args.diagnose, "seed": args.diagnose_seed, "rows": rows}
        lines += [f"## Seed {args.diagnose_seed}'s switches in {name} {load}, along its own trajectory", "",
                  "Per rule it switches to: share of queries; its mean predicted advantage of each rule there; the "
                  "chosen rule's lead over the runner-up (median, 10 % quantile, share below 0.05 / 0.1); the other "
                  "seeds' mean predictions on the same observations; what the mean of the seeds' predictions would "
                  "pick there.", "",
                  "| switched to | share | own prediction (" + ", ".join(rules) + ") | lead median / p10 / <0.05 / <0.1"
                  " | other seeds' predictions | mean-ensemble picks |", "|---|---|---|---|---|---|"]
        for r in rows:
            own = ", ".join(f"{r['own_mean_score'][q]:+.3f}" for q in rules)
            lead = r["lead_over_runner_up"]
            oth = "; ".join(f"s{s}: " + ", ".join(f"{v[q]:+.3f}" for q in rules)
                            for s, v in r["other_seeds_mean_score"].items())
            picks = ", ".join(f"{q} {v:.2f}" for q, v in r["mean_ensemble_picks"].items() if v > 0)
            lines.append(f"| {r['rule']} | {r['share']:.3f} | {own} | {lead['median']:.3f} / {lead['p10']:.3f} / "
                         f"{lead['below_0.05']:.2f} / {lead['below_0.1']:.2f} | {oth} | {picks} |")
        lines.append("")
        print("\n".join(lines), flush=True)
    if not args.skip_cells:
        bundles = {k: {"nets": tuple(a.params for a in agents.values()), "margin": jnp.asarray(margins, jnp.float32),
                       "spread_weight": jnp.float32(first.config.spread_weight)} for k in args.kinds}
        names = [f"s{s}" for s in agents] + list(args.kinds)
        docs = {}
        for name in args.scenarios:
            scn = load_preset(name)
            policies = {p: STATIC_POLICIES[p] for p in STATIC}
            for s, agent in agents.items():
                policies[f"s{s}"] = agent_switch_policy(agent, args.margin)
            for k, b in bundles.items():
                policies[k] = ensemble_policy(first.graphdef, b, k)
            doc = compare(scn, policies, key=jax.random.key(args.seed), traces=args.traces)
            docs[name] = {k: doc[k] for k in ("loads", "mean", "ci95", "per_trace", "eval_s")}
            print(f"[{name}] " + " ".join(f"{ld}: " + ",".join(f"{p}={doc['mean'][p][ld]:.3f}" for p in
                                                                ["fastest_expected", *names])
                                          for ld in doc["loads"]), flush=True)
        lines += [f"## Per cell (margin {args.margin})", "",
                  "| scenario | load | best static | " + " | ".join(names) + " | seed spread | ", "|---|---|---|"
                  + "---|" * (len(names) + 1)]
        for name, doc in docs.items():
            for ld in doc["loads"]:
                best, _ = best_and_tied(doc, ld, STATIC)
                cells = cells_against(doc, ld, best, names)
                spread = np.ptp([doc["mean"][f"s{s}"][ld] for s in agents])
                lines.append(f"| {name} | {ld} | {best} {doc['mean'][best][ld]:.3f} | " + " | ".join(cells)
                             + f" | {spread:.3f} |")
        lines += ["", "In brackets: paired difference to the best static policy (mean ± 95 % half-width over the "
                  "traces). Seed spread: max - min of the three seeds' means.", "",
                  "| policy | average over the cells |", "|---|---|"]
        for p in [*STATIC, *names]:
            per_trace = np.mean([np.asarray(doc["per_trace"][p][ld]) for doc in docs.values()
                                 for ld in doc["loads"]], axis=0)
            m, c = mean_ci(per_trace)
            lines.append(f"| {p} | {m:.4f} ± {c:.4f} |")
        results["docs"] = docs
    lines[1:1] = ["", f"Generated by `python experiments/edge_ensemble_val.py {' '.join(sys.argv[1:])}` (trace seed "
                  f"{args.seed}, {args.traces} traces per cell, the same for every policy; shared {os.cpu_count()}-core"
                  f" CPU, load average {os.getloadavg()[0]:.1f} at the end, {time.perf_counter() - t_start:.0f} s)."]
    write_report(args.out, args.stem, lines, results)


if __name__ == "__main__":
    main()
