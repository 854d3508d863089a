"""Issue 31: why is rl+safety's utilisation below edf+safety's in some low-load grid cells?

Re-runs the grid's task sets (the same cells, seeds and methods as ``respect-rt grid`` with ``conf/rt.yaml``) and
splits every method's utilisation ``busy / (M * makespan)`` into its pieces, per task set
(:func:`respect_jax.realtime.evaluate.utilisation_parts`): accelerator time spent (busy), makespan, accelerator time
left idle while a sub-job was ready for it (idle-while-ready), and the mean slow-down of the chosen accelerators over
each sub-job's fastest one. Paired differences to edf+safety with 95 % Student-t intervals. The script also checks
that its utilisation values equal the recorded grid's (``--recorded``)::

    .venv/bin/python experiments/rt_util_diagnosis.py              # -> experiments/results/rt/grid/rt_util_diagnosis.*
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import numpy as np
from omegaconf import OmegaConf

from respect_jax.graphs.graph import write_json_atomic
from respect_jax.realtime import experiment
from respect_jax.realtime.evaluate import Runner, mean_ci, parse_method, utilisation_parts
from respect_jax.realtime.generator import generate
from respect_jax.realtime.platform import platform_from_dict
from respect_jax.realtime.tasks import pack, stack
from respect_jax.reporting import machine_description, markdown_table

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("utilisation", "busy_ms", "makespan_ms", "idle_ready_ms", "slowdown", "util_at_lb")


def _fmt(mean: float, half: float, scale: float = 1.0, digits: int = 2) -> str:
    return f"{mean * scale:+.{digits}f} ± {half * scale:.{digits}f}"


def _table(dicts: list[dict]) -> str:
    return markdown_table(list(dicts[0]), [list(d.values()) for d in dicts]) if dicts else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default=str(ROOT / "experiments/results/rt/policy_safety"))
    ap.add_argument("--methods", nargs="+", default=["edf+safety", "rl+safety", "cpls_cert+safety", "cpls+safety"])
    ap.add_argument("--cells", nargs="*", default=None, help="grid cells (default: all)")
    ap.add_argument("--recorded", default=str(ROOT / "experiments/results/rt/grid/rt_grid.json"))
    ap.add_argument("--out", default=str(ROOT / "experiments/results/rt/grid/rt_util_diagnosis"))
    args = ap.parse_args(argv)
    tic = time.perf_counter()
    cfg = OmegaConf.load(ROOT / "conf/rt.yaml")
    platform = platform_from_dict(OmegaConf.to_container(cfg.platform, resolve=True))
    g = cfg.grid
    presets = experiment.grid_presets(str(g.base), list(g.utilisations), list(g.hrt_shares), int(g.max_tries))
    sizes = experiment.common_sizes(presets, platform)
    methods = [parse_method(m) for m in args.methods]
    reference = methods[0].name
    model = experiment.load_rl(args.policy, platform)[0] if any(m.policy == "rl" for m in methods) else None
    runner = Runner([m.policy for m in methods], int(g.max_steps), model)
    recorded = json.loads(Path(args.recorded).read_text())["per_scenario"] if Path(args.recorded).is_file() else {}
    rows, per_cell, max_dev = [], {}, 0.0
    for i, p in enumerate(presets):
        if args.cells and p.name not in args.cells:
            continue
        scs, _ = generate(p, platform, int(g.scenarios), seed=experiment.eval_seed(int(g.seed), i))
        batch = stack([pack(s, sizes) for s in scs])
        vals = {}
        for m in methods:
            state, metrics = runner.run(batch, m.policy, m.safety, seed=int(g.seed))
            parts = utilisation_parts(batch, jax.tree.map(np.asarray, state))
            parts["utilisation"] = metrics["utilisation"].astype(np.float64)
            parts["util_at_lb"] = parts["busy_ms"] / (platform.num_machines * parts["makespan_lb_ms"])
            vals[m.name] = parts
            rec = recorded.get(f"{p.name}|{m.name}")
            if rec is not None:
                max_dev = max(max_dev, float(np.max(np.abs(np.asarray(rec["utilisation"]) - parts["utilisation"]))))
        per_cell[p.name] = {m: {k: v.tolist() for k, v in d.items()} for m, d in vals.items()}
        for m in methods:
            row = {"cell": p.name, "method": m.name}
            for k in PARTS:
                mean, half, _ = mean_ci(vals[m.name][k])
                row[k] = {"mean": mean, "ci95": half}
                if m.name != reference:
                    # util_at_lb: against the reference's actual utilisation (could the method reach it at all?)
                    ref = vals[reference]["utilisation" if k == "util_at_lb" else k]
                    dm, dh, _ = mean_ci(vals[m.name][k] - ref)
                    row[k]["diff"] = {"mean": dm, "ci95": dh}
            rows.append(row)
        print(f"{p.name}: done ({time.perf_counter() - tic:.0f} s)", file=sys.stderr)
    doc = {
        "command": "python experiments/rt_util_diagnosis.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine_description(load_average=True),
        "policy": args.policy,
        "reference": reference,
        "max_abs_dev_from_recorded_grid_utilisation": max_dev if recorded else None,
        "wall_s": time.perf_counter() - tic,
        "rows": rows,
        "per_scenario": per_cell,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(doc, out.with_suffix(".json"))
    table = []
    for r in rows:
        if r["method"] == reference:
            continue
        d = {k: r[k]["diff"] for k in PARTS}
        table.append(
            {
                "cell": r["cell"],
                "method": r["method"],
                f"Δ util. % vs {reference}": _fmt(d["utilisation"]["mean"], d["utilisation"]["ci95"], 100),
                "Δ busy ms": _fmt(d["busy_ms"]["mean"], d["busy_ms"]["ci95"]),
                "Δ makespan ms": _fmt(d["makespan_ms"]["mean"], d["makespan_ms"]["ci95"]),
                "Δ idle-while-ready ms": _fmt(d["idle_ready_ms"]["mean"], d["idle_ready_ms"]["ci95"]),
                "Δ slow-down %": _fmt(d["slowdown"]["mean"], d["slowdown"]["ci95"], 100, 1),
                f"util. % at the makespan bound - {reference}'s util. %": _fmt(
                    d["util_at_lb"]["mean"], d["util_at_lb"]["ci95"], 100
                ),
            }
        )
    absolute = [
        {
            "cell": r["cell"],
            "method": r["method"],
            "util. %": f"{100 * r['utilisation']['mean']:.2f}",
            "busy ms": f"{r['busy_ms']['mean']:.2f}",
            "makespan ms": f"{r['makespan_ms']['mean']:.2f}",
            "idle-while-ready ms": f"{r['idle_ready_ms']['mean']:.3f}",
            "slow-down %": f"{100 * r['slowdown']['mean']:.1f}",
            "util. % at the makespan bound": f"{100 * r['util_at_lb']['mean']:.2f}",
        }
        for r in rows
    ]
    text = [
        "# Utilisation of the grid's methods, split into its pieces (issue 31)\n",
        f"`{doc['command'].strip()}`; wall {doc['wall_s']:.0f} s; machine: {json.dumps(doc['machine'])}.\n",
        f"Policy `{args.policy}`; the grid's task sets ({g.scenarios} per cell, seed {g.seed}). utilisation = busy / "
        "(M x makespan); busy = accelerator time spent on the task set's sub-jobs (summed over the M accelerators); "
        "idle-while-ready = accelerator time left idle while some sub-job could have started on it (including holds "
        "the safety layer imposes); slow-down = mean over sub-jobs of time on the chosen accelerator / time on its "
        "fastest one - 1; util. at the makespan bound = busy / (M x the makespan lower bound: latest release + fastest "
        "critical path, no transfer), the utilisation the method's accelerator time would give if it finished as early "
        f"as any schedule can. Δ: paired difference to {reference} on the same task sets, mean ± 95 % CI.\n",
        "Largest deviation of this run's per-task-set utilisation from the recorded grid (`rt_grid.json`): "
        + (f"{max_dev:.2e}.\n" if recorded else "no recorded grid.\n"),
        "## Paired differences\n",
        _table(table),
        "\n## Means\n",
        _table(absolute),
    ]
    out.with_suffix(".md").write_text("\n".join(text) + "\n")
    print(f"-> {out}.md/.json in {time.perf_counter() - tic:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
