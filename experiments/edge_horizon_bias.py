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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edge_validation import (  # noqa: E402
    add_validation_args,
    cell_traces,
    load_agents,
    refuse_evaluation_seed,
    write_report,
)

from respect_jax.edge_cluster.scenarios import load_preset  # noqa: E402
from respect_jax.edge_cluster.simulator import dispatch, features, init_sim  # noqa: E402
from respect_jax.edge_cluster.switching import branch_values, greedy_rule, parse_margin, rule_margin_vector  # noqa: E402
from respect_jax.edge_cluster.types import query_at  # noqa: E402


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
    ap.add_argument("--margin", default="0.5,closest=0.1", help="the policy followed: M or M,rule=m,...")
    ap.add_argument("--threshold", type=float, default=0.1, help="count states with a predicted gain above this")
    ap.add_argument("--horizons", type=int, nargs="+", default=[128, 1024])
    ap.add_argument("--stride", type=int, default=32)
    ap.add_argument("--samples", type=int, default=256)
    add_validation_args(ap, stem="horizon_bias_val", traces=2, agent_seeds=None, agent_seed=0)
    args = ap.parse_args()
    refuse_evaluation_seed(args.seed)
    t_start = time.perf_counter()
    agent = load_agents(args.agents, [args.agent_seed])[args.agent_seed]
    rules = agent.config.rules
    margins = rule_margin_vector(rules, *parse_margin(args.margin))
    rows = []
    for cell in args.cells:
        name, load = cell.split(":")
        scn = load_preset(name)
        traces = cell_traces(scn, load, args.seed, args.traces)
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
    write_report(args.out, args.stem, lines, {"rows": rows})


if __name__ == "__main__":
    main()
