"""Where and why the order policy's largest gaps remain: its schedule next to the best known one, per stage.

For each case ``--case graph:K:objective`` (graphs of ``--graphs-dir``) it schedules with ``solver=policy``'s default
decoding and with ``solver=contiguous``, polishes the policy's schedule with ``--moves`` hill-climbing moves
(:func:`respect_jax.local_search.polish`) and reads the recorded MILP schedule of the case (``--milp-records``). For
every schedule it prints the objective, the per-stage loads (memory for ``paper``, time for ``latency``), the
communication, and how many nodes sit on another stage than in the best one, by operation type and by NAS cell.
Reporting only: nothing here selects or tunes anything.

    nice -n 5 .venv/bin/python experiments/order_policy_gap_analysis.py --case nasnetmobile:5:paper \
        nasnetmobile:5:latency --milp-records experiments/results/real_models/real_models.json \
        experiments/results/real_models_latency/real_models.json \
        --out experiments/results/order_policy_test_gap_analysis.md
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

import respect_jax.policy.solver  # noqa: E402,F401  (registers solver=policy)
from respect_jax.costs import evaluate_assignment, hardware_from_dict  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.local_search import polish  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402


def cell_of(name: str) -> str:
    """The NAS cell a keras layer belongs to, from its name (``separable_conv_1_normal_left1_3`` -> ``normal 3``,
    ``reduction_add3_stem_2`` -> ``reduction stem_2``); other layers: ``other``."""
    for kind in ("normal", "reduction", "adjust"):
        if kind in name:
            tail = name.rsplit("_", 2)
            return f"{kind} {'_'.join(tail[-2:]) if tail[-2] == 'stem' else tail[-1]}"
    return "other"


def describe(graph, hw, objective, assignment) -> dict:
    m = evaluate_assignment(graph, np.asarray(assignment), hw, objective)
    loads = m["time_k"] if objective == "latency" else m["mem_k"]
    return {"objective": m["objective"], "loads": loads, "comm": m["comm_bytes"]}


def recorded_milp(paths: list[str]) -> dict:
    """(graph, K, objective) -> (assignment, proven) of the MILP records of Table 1 JSON files."""
    out = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        for rec in doc["records"]:
            if rec.get("method") == "milp":
                out[(rec["graph"], int(rec["stages"]), doc["objective"])] = (np.asarray(rec["assignment"]),
                                                                           bool(rec["optimal"]))
    return out


def case_text(graph, hw, objective, moves: int, milp: dict) -> str:
    policy = np.asarray(run_solver("policy", graph, hw, objective, 1.0)["assignment"])
    contiguous = np.asarray(run_solver("contiguous", graph, hw, objective, 1.0)["assignment"])
    schedules = {
        "policy default": policy,
        f"policy default + ls{moves}": polish(graph, hw, objective, 1.0, policy, moves),
        "contiguous": contiguous,
    }
    if (graph.name, hw.stages, objective) in milp:
        assignment, proven = milp[(graph.name, hw.stages, objective)]
        schedules["MILP (recorded, " + ("proven optimal)" if proven else "30 s incumbent)")] = assignment
    info = {k: describe(graph, hw, objective, a) for k, a in schedules.items()}
    best = min(info, key=lambda k: info[k]["objective"])
    unit = 1e3 if objective == "latency" else 1 / 2**20
    per_stage = "time ms" if objective == "latency" else "memory MiB"
    lines = [f"### {graph.name} ({graph.num_nodes} nodes), K = {hw.stages}, {objective}", "",
             f"| schedule | objective | gap to best here % | per-stage {per_stage} | comm MiB "
             "| nodes on another stage than the best |", "| --- | ---: | ---: | --- | ---: | ---: |"]
    for k, d in info.items():
        moved = int(np.sum(schedules[k] != schedules[best]))
        loads = ", ".join(f"{x * unit:.2f}" for x in d["loads"])
        lines.append(f"| {k} | {d['objective']:.6g} | {100 * (d['objective'] / info[best]['objective'] - 1):.2f} | "
                     f"{loads} | {d['comm'] / 2**20:.2f} | {moved} |")
    diff = np.flatnonzero(policy != schedules[best])
    ops = collections.Counter(graph.ops[i] for i in diff)
    cells = collections.Counter(cell_of(graph.node_names[i]) for i in diff)
    lines += ["", f"Nodes where the policy's schedule differs from the best ({best}): {len(diff)}; by op: "
              + ", ".join(f"{k} {v}" for k, v in ops.most_common(6)) + "; by block: "
              + ", ".join(f"{k} {v}" for k, v in cells.most_common(8)) + "."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", required=True, help="graph:K:objective")
    parser.add_argument("--graphs-dir", default=str(ROOT / "data" / "models"))
    parser.add_argument("--moves", type=int, default=100)
    parser.add_argument("--milp-records", nargs="*", default=[], help="Table 1 JSON files with MILP assignments")
    parser.add_argument("--hardware", default="coral_usb")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    base = yaml.safe_load((ROOT / "conf" / "hardware" / f"{args.hardware}.yaml").read_text())
    parts = []
    for case in args.case:
        name, k, objective = case.split(":")
        graph = load_graph(Path(args.graphs_dir) / f"{name}.json")
        hw = hardware_from_dict({**base, "stages": int(k)})
        parts.append(case_text(graph, hw, objective, args.moves, recorded_milp(args.milp_records)))
        print(parts[-1], flush=True)
    command = "python experiments/order_policy_gap_analysis.py " + " ".join(sys.argv[1:])
    Path(args.out).write_text(f"# Where the order policy's largest test gaps are\n\n`{command}`\n\n"
                              + "\n\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
