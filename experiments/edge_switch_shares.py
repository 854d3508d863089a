"""Which rule the policy-switching ASET agent follows, per training seed and (scenario, load) cell (issue 30
diagnostic, on VALIDATION traces: seed 7 by default, the evaluation seed 2030 is refused).

For every query the agent dispatches: the rule it chose (``closest``, ``most_accurate``, ``least_loaded`` or the base
``fastest_expected``) and whether that rule's action differs from the base rule's (a real switch). Per cell and
seed: the share of queries switched to each rule, the success ratio of the switched queries, the agent's and the base
rule's success on the same traces, and the same per phase of the trace (``--phases`` equal parts by arrival time).

    python experiments/edge_switch_shares.py --cells isp_failure:low isp_failure:medium isp_failure:high \
        --agent-seeds 0 1 2 --margin 0.5     # -> switch_shares_val.{md,json}
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

from respect_jax.edge_cluster.policies import STATIC_POLICIES  # noqa: E402
from respect_jax.edge_cluster.scenarios import load_preset  # noqa: E402
from respect_jax.edge_cluster.simulator import dispatch, features, init_sim, simulate  # noqa: E402
from respect_jax.edge_cluster.switching import greedy_rule, parse_margin, rule_margin_vector  # noqa: E402
from respect_jax.edge_cluster.types import SUCCESS  # noqa: E402


def agent_choices(scn, graphdef, params, margins, traces):
    """Per query of ``traces`` [T, Q]: (chosen rule position i32, switched bool, success bool) of the greedy agent."""
    net0 = nnx.merge(graphdef, params)
    base_pos = net0.rules.index(net0.base)
    vec = jnp.asarray(margins, jnp.float32)

    def one(trace):
        def body(sim, query):
            net = nnx.merge(graphdef, params)
            x = features(scn.params, sim, query)
            acts = net.rule_actions(x)
            chosen = greedy_rule(net(x), base_pos, vec)
            action = jax.lax.optimization_barrier(acts[chosen])
            sim, out = dispatch(scn.params, sim, query, action)
            return sim, (chosen, action != acts[base_pos], out.code == SUCCESS)

        return jax.lax.scan(body, init_sim(scn.params, scn.ring), trace)[1]

    return jax.jit(jax.vmap(one))(traces)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", nargs="+", default=["isp_failure:low", "isp_failure:medium", "isp_failure:high"])
    ap.add_argument("--margin", default="0.5", help="M or M,rule=m,...")
    ap.add_argument("--phases", type=int, default=4)
    add_validation_args(ap, stem="switch_shares_val", traces=4, agent_seeds=[0, 1, 2])
    args = ap.parse_args()
    refuse_evaluation_seed(args.seed)
    t_start = time.perf_counter()
    agents = load_agents(args.agents, args.agent_seeds)
    head, over = parse_margin(args.margin)
    rows, lines = [], []
    for cell_spec in args.cells:
        name, load = cell_spec.split(":")
        scn = load_preset(name)
        traces = cell_traces(scn, load, args.seed, args.traces)
        valid = np.asarray(traces.valid)
        width = -(-int(round(scn.trace.horizon_s * 1e6)) // args.phases)
        phase = np.clip(np.asarray(traces.time_us) // width, 0, args.phases - 1)
        base_run = jax.vmap(lambda t, p=scn.params: simulate(p, t, STATIC_POLICIES["fastest_expected"], 0))
        _, base_out = jax.jit(base_run)(traces)
        base_ok = (np.array(base_out.code) == SUCCESS) & valid
        for s, agent in agents.items():
            rules = agent.config.rules
            chosen, switched, ok = (np.array(a) for a in agent_choices(
                scn, agent.graphdef, agent.params, rule_margin_vector(rules, head, over), traces))
            switched &= valid
            ok &= valid
            n = valid.sum()
            row = {"scenario": name, "load": load, "agent_seed": s, "queries": int(n),
                   "agent_success": float(ok.sum() / n), "base_success": float(base_ok.sum() / n),
                   "switched": float(switched.sum() / n), "per_rule": {}, "per_phase": []}
            for r, rule in enumerate(rules):
                m = switched & (chosen == r)
                if m.any():
                    row["per_rule"][rule] = {"share": float(m.sum() / n), "success_when_switched": float(ok[m].mean()),
                                             "base_success_same_queries": float(base_ok[m].mean())}
            for p in range(args.phases):
                v = valid & (phase == p)
                row["per_phase"].append({"agent": float(ok[v].mean()), "base": float(base_ok[v].mean()),
                                         "switched": float(switched[v].mean()),
                                         **{f"to_{rule}": float((switched & (chosen == r))[v].mean())
                                            for r, rule in enumerate(rules)}})
            rows.append(row)
            print(json.dumps(row), flush=True)

    lines = ["# Which rule the switching agent follows (validation traces)", "",
             f"Generated by `python experiments/edge_switch_shares.py {' '.join(sys.argv[1:])}` (trace seed "
             f"{args.seed}, {args.traces} traces per cell; margin {args.margin}; shared {os.cpu_count()}-core CPU, "
             f"load average {os.getloadavg()[0]:.1f} at the end, {time.perf_counter() - t_start:.0f} s). Pooled over "
             "the traces. *Switched*: the chosen rule's action differs from `fastest_expected`'s; per rule: share of "
             "all queries switched to it, and the success of those queries under the agent vs under "
             "`fastest_expected` run alone on the same trace (a different trajectory: indicative only).", "",
             "| scenario | load | seed | agent | fastest_expected | switched | per rule: share (success agent / base)"
             " |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        per = "; ".join(f"{r} {d['share']:.3f} ({d['success_when_switched']:.2f} / "
                        f"{d['base_success_same_queries']:.2f})" for r, d in row["per_rule"].items())
        lines.append(f"| {row['scenario']} | {row['load']} | {row['agent_seed']} | {row['agent_success']:.3f} | "
                     f"{row['base_success']:.3f} | {row['switched']:.3f} | {per or '-'} |")
    lines += ["", f"Per phase ({args.phases} equal parts by arrival time): agent / base success, share switched "
              "(to closest, most_accurate, least_loaded)", "",
              "| scenario | load | seed | " + " | ".join(f"phase {i + 1}" for i in range(args.phases)) + " |",
              "|---|---|---|" + "---|" * args.phases]
    for row in rows:
        cells = [f"{p['agent']:.3f} / {p['base']:.3f}, {p['switched']:.3f} ("
                 + ", ".join(f"{p.get('to_' + r, 0.0):.3f}" for r in ("closest", "most_accurate", "least_loaded"))
                 + ")" for p in row["per_phase"]]
        lines.append(f"| {row['scenario']} | {row['load']} | {row['agent_seed']} | " + " | ".join(cells) + " |")
    write_report(args.out, args.stem, lines, {"rows": rows})


if __name__ == "__main__":
    main()
