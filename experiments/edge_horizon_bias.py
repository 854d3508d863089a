"""Is the switching agent's predicted gain of a rule biased by the rollout horizon it was trained on? (issue 30
diagnostic, on VALIDATION traces: seed 7 by default; the evaluation seed 2030 is refused.)

The agent follows its greedy policy (margin spec ``--margin``) over a trace; every ``--stride`` queries the
simulator is forked as in training (:func:`~respect_jax.edge_cluster.switching.branch_values`: this query by each
rule, the next H by ``fastest_expected``) at the training horizon and at a longer one. Per (scenario, load) cell and
rule: how often the network predicts a gain above ``--threshold``, and in those states the mean predicted gain and
the mean rollout gain at each horizon. A rollout gain at the long horizon well below the short one's means the
training targets (short horizon) reward switches whose cost comes later.

    python experiments/edge_horizon_bias.py --cells isp_diurnal:overload isp_netdrift:high --agent-seed 0
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from respect_jax.cli.common import machine_description
from respect_jax.edge_cluster.evaluation import eval_traces
from respect_jax.edge_cluster.scenarios import load_preset
from respect_jax.edge_cluster.simulator import dispatch, features, init_sim
from respect_jax.edge_cluster.switching import (
    branch_values,
    greedy_rule,
    load_edge_agent,
    parse_margin,
    rule_margin_vector,
)
from respect_jax.edge_cluster.types import query_at

ROOT = Path(__file__).resolve().parents[1]


def forked_gains(scn, agent, margins, trace, stride: int, samples: int, horizons: tuple[int, ...]):
    """For ``samples`` states ``stride`` queries apart along the agent's own run over one trace: the predicted gains
    f32[N, R], the rollout gains f32[len(horizons), N, R] (branch minus base branch) and the validity bool[N]."""
    cfg = agent.config
    graphdef, params = agent.graphdef, agent.params
    base_pos = cfg.rules.index(cfg.base)
    vec = jnp.asarray(margins, jnp.float32)
    q = trace.valid.shape[0]

    def own(carry, _):
        sim, i = carry
        query = query_at(trace, jnp.minimum(i, q - 1))
        query = query.replace(valid=query.valid & (i < q))
        net = nnx.merge(graphdef, params)
        x = features(scn.params, sim, query)
        action = jax.lax.optimization_barrier(net.rule_actions(x)[greedy_rule(net(x), base_pos, vec)])
        sim, _ = dispatch(scn.params, sim, query, action)
        return (sim, i + 1), None

    def sample(carry, _):
        carry, _ = jax.lax.scan(own, carry, None, length=stride)
        sim, i = carry
        query = query_at(trace, jnp.minimum(i, q - 1))
        x = features(scn.params, sim, query.replace(valid=query.valid & (i < q)))
        pred = nnx.merge(graphdef, params)(x)
        gains = []
        for h in horizons:
            v = branch_values(scn.params, trace, sim, i, cfg.rules, cfg.base, h)
            gains.append(v - v[base_pos])
        return carry, (pred, jnp.stack(gains), i < trace.num_valid)

    _, out = jax.lax.scan(sample, (init_sim(scn.params, scn.ring), jnp.int32(0)), None, length=samples)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", nargs="+", default=["isp_diurnal:overload", "isp_netdrift:high"])
    ap.add_argument("--agents", default=str(ROOT / "experiments" / "results" / "edge" / "agents" / "switch"))
    ap.add_argument("--agent-seed", type=int, default=0)
    ap.add_argument("--margin", default="0.5,closest=0.1", help="the policy followed: M or M,rule=m,...")
    ap.add_argument("--threshold", type=float, default=0.1, help="count states with a predicted gain above this")
    ap.add_argument("--horizons", type=int, nargs="+", default=[128, 1024])
    ap.add_argument("--stride", type=int, default=32)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--traces", type=int, default=2)
    ap.add_argument("--stem", default="horizon_bias_val")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "edge"))
    args = ap.parse_args()
    if args.seed == 2030:
        raise ValueError("--seed 2030 is the evaluation traces' seed: diagnose on another seed")
    t_start = time.perf_counter()
    agent = load_edge_agent(Path(args.agents) / f"s{args.agent_seed}")[0]
    rules = agent.config.rules
    margins = rule_margin_vector(rules, *parse_margin(args.margin))
    rows = []
    for cell in args.cells:
        name, load = cell.split(":")
        scn = load_preset(name)
        traces = eval_traces(scn, load, jax.random.fold_in(jax.random.key(args.seed), list(scn.loads).index(load)),
                             args.traces)
        run = jax.jit(jax.vmap(lambda t, s=scn: forked_gains(s, agent, margins, t, args.stride, args.samples,
                                                             tuple(args.horizons))))
        pred, gains, valid = (np.asarray(a) for a in run(traces))  # [T, N, R], [T, N, H, R], [T, N]
        pred, valid = pred.reshape(-1, len(rules)), valid.reshape(-1)
        gains = gains.reshape(-1, len(args.horizons), len(rules))
        for r, rule in enumerate(rules):
            if rule == agent.config.base:
                continue
            m = valid & (pred[:, r] > args.threshold)
            row = {"scenario": name, "load": load, "rule": rule, "states": int(valid.sum()),
                   "predicted_above": int(m.sum()),
                   "mean_predicted": float(pred[m, r].mean()) if m.any() else None,
                   "mean_rollout": {str(h): (float(gains[m, k, r].mean()) if m.any() else None)
                                    for k, h in enumerate(args.horizons)},
                   "mean_rollout_all_states": {str(h): float(gains[valid, k, r].mean())
                                               for k, h in enumerate(args.horizons)}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    hs = args.horizons
    lines = ["# Rollout horizon and the switching agent's predicted gains (validation traces)", "",
             f"Generated by `python experiments/edge_horizon_bias.py {' '.join(sys.argv[1:])}` (trace seed {args.seed},"
             f" {args.traces} traces per cell, a fork every {args.stride} queries of the agent's own run, "
             f"{args.samples} per trace; agent seed {args.agent_seed} following margin {args.margin}; shared "
             f"{os.cpu_count()}-core CPU, load average {os.getloadavg()[0]:.1f} at the end, "
             f"{time.perf_counter() - t_start:.0f} s).", "",
             f"States where the network predicts a gain above {args.threshold:g} for the rule: their mean predicted "
             "gain"
             " and "
             "their mean rollout gain (successes of the branch minus the base branch, common random numbers) at each "
             "horizon H (queries dispatched by `fastest_expected` after the forked one); the agents were trained on "
             "H = 128.", "",
             "| scenario | load | rule | states | predicted > threshold | mean predicted | "
             + " | ".join(f"mean rollout H={h}" for h in hs) + " | " + " | ".join(f"all states H={h}" for h in hs)
             + " |", "|---|---|---|---|---|---|" + "---|" * (2 * len(hs))]
    fmt = lambda v: "-" if v is None else f"{v:+.3f}"  # noqa: E731
    for row in rows:
        lines.append(f"| {row['scenario']} | {row['load']} | {row['rule']} | {row['states']} | "
                     f"{row['predicted_above']} | {fmt(row['mean_predicted'])} | "
                     + " | ".join(fmt(row["mean_rollout"][str(h)]) for h in hs) + " | "
                     + " | ".join(fmt(row["mean_rollout_all_states"][str(h)]) for h in hs) + " |")
    out = Path(args.out)
    (out / f"{args.stem}.md").write_text("\n".join(lines) + "\n")
    (out / f"{args.stem}.json").write_text(json.dumps({"argv": sys.argv[1:], "rows": rows,
                                                       "machine": machine_description()}, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
