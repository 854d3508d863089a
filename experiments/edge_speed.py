"""ASET figure: simulated queries per second, pure-JAX simulator vs the plain-Python reference (issue 7).

Both simulate the same model on traces of the same scenario and load ("high") with the same static
policy and give identical per-query outcomes (tests/test_edge_reference.py, tests/test_edge_lanes.py). JAX engines:
``vmap``: jit(vmap(scan)) of :func:`~respect_jax.edge_cluster.simulator.simulate` (what agents use), ``lanes``:
:func:`~respect_jax.edge_cluster.lanes.simulate_lanes` (batch on the last axis; its traces laid out once before the
timed calls, the layout's time reported apart); ``--batch`` traces, compilation excluded, best of ``--repeats``.
A (scenario, batch) whose traces would take more than ``--max-gib`` is skipped (reported as not fitting).
Python: the discrete-event reference on ``--ref-traces`` traces, one after another. Both wall-clock and CPU time (all
threads of the process) are reported: on a shared machine CPU time is the steadier of the two; ``--one-core`` pins the
process to one core first (XLA's worker threads then do not spin on the other core).

    python experiments/edge_speed.py                     # -> experiments/results/edge/speed.{md,png,json}
    python experiments/edge_speed.py --batch 64 1024 --scenarios small
    python experiments/edge_speed.py --one-core --engines vmap lanes --batch 1024 4096 --stem speed_lanes

``--compiler-option NAME=VALUE`` (repeatable) compiles the JAX engines with those XLA options (e.g.
``xla_cpu_prefer_vector_width=512``: AVX-512 vectors where the CPU has them; XLA's default prefers 256 bits); the
options are written into the report. Default: none (XLA's defaults).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np

from respect_jax.cli.common import machine_description, user_errors_exit
from respect_jax.edge_cluster.evaluation import batched_counts, eval_traces
from respect_jax.edge_cluster.lanes import LANE_POLICIES, simulate_lanes, to_lanes
from respect_jax.edge_cluster.policies import STATIC_POLICIES
from respect_jax.edge_cluster.reference import ReferenceSimulator
from respect_jax.edge_cluster.scenarios import load_preset

ROOT = Path(__file__).resolve().parents[1]


def timed(fn, repeats: int) -> tuple[float, float]:
    """Best wall and best CPU seconds of ``fn()`` over ``repeats`` calls."""
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu


@user_errors_exit("edge_speed")
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", nargs="+", default=["small", "isp"])
    ap.add_argument("--policies", nargs="+", default=["closest", "fastest_expected"])
    ap.add_argument("--batch", nargs="+", type=int, default=[64, 512])
    ap.add_argument("--load", default="high")
    ap.add_argument("--ref-traces", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "edge"))
    ap.add_argument("--engines", nargs="+", default=["vmap"], choices=["vmap", "lanes"])
    ap.add_argument("--max-gib", type=float, default=4.0, help="skip a batch whose traces need more memory")
    ap.add_argument("--one-core", action="store_true", help="pin the process to one CPU core before JAX starts")
    ap.add_argument("--stem", default="speed", help="output file stem")
    ap.add_argument("--compiler-option", action="append", default=[], metavar="NAME=VALUE",
                    help="an XLA compile option of the JAX engines (repeatable), e.g. xla_cpu_prefer_vector_width=512")
    args = ap.parse_args()
    options = {}
    for item in args.compiler_option:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--compiler-option {item!r}: expected NAME=VALUE")
        options[name] = value
    if args.one_core:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    unknown = sorted(set(args.policies) - set(STATIC_POLICIES))
    if unknown:
        raise ValueError(f"--policies: unknown {', '.join(unknown)}; choose from {', '.join(sorted(STATIC_POLICIES))}")

    rows = []
    for name in args.scenarios:
        scn = load_preset(name)
        ref_traces = jax.device_get(eval_traces(scn, args.load, jax.random.key(7), args.ref_traces, fit=True))
        ref_queries = int(np.sum(ref_traces.valid))
        sim = ReferenceSimulator(scn.params)
        for policy in args.policies:
            def run_ref(policy=policy, sim=sim, ref_traces=ref_traces):
                for b in range(args.ref_traces):
                    sim.run(jax.tree.map(lambda x, b=b: x[b], ref_traces), policy)

            ref_wall, ref_cpu = timed(run_ref, max(3, args.repeats))  # best of: short runs, noisy machine
            for engine in args.engines:
                for batch in args.batch:
                    gib = batch * ref_traces.time_us.shape[-1] * (7 + 2 * scn.params.num_sites) * 4 / 2**30
                    traces = None
                    if gib > args.max_gib:
                        print(f"{name} B={batch}: traces need {gib:.1f} GiB > --max-gib {args.max_gib}: skipped")
                        continue
                    traces = eval_traces(scn, args.load, jax.random.key(8), batch, fit=True)
                    queries = int(np.sum(np.asarray(traces.valid)))
                    layout_s = 0.0
                    if engine == "vmap":
                        fn = batched_counts(scn, STATIC_POLICIES[policy])
                    else:
                        w0 = time.perf_counter()
                        traces = jax.block_until_ready(jax.jit(to_lanes)(traces))
                        layout_s = time.perf_counter() - w0

                        def fn(t, policy=policy, scn=scn):
                            return simulate_lanes(scn.params, t, LANE_POLICIES[policy], laid_out=True)[0]

                        fn = jax.jit(fn)
                    c0 = time.perf_counter()
                    if options:  # both engines' functions are jitted: compile them ahead with the options
                        fn = fn.lower(traces).compile(compiler_options=options)
                    jax.block_until_ready(fn(traces))
                    compile_s = time.perf_counter() - c0
                    wall, cpu = timed(lambda t=traces, fn=fn: jax.block_until_ready(fn(t)), args.repeats)
                    row = {"scenario": name, "policy": policy, "engine": engine, "batch": batch, "queries": queries,
                           "traces_gib": gib, "layout_s": layout_s,
                           "jax_qps_wall": queries / wall, "jax_qps_cpu": queries / cpu, "first_call_s": compile_s,
                           "ref_queries": ref_queries, "ref_qps_wall": ref_queries / ref_wall,
                           "ref_qps_cpu": ref_queries / ref_cpu}
                    row["speedup_wall"] = row["jax_qps_wall"] / row["ref_qps_wall"]
                    row["speedup_cpu"] = row["jax_qps_cpu"] / row["ref_qps_cpu"]
                    rows.append(row)
                    del traces
                    print(f"{name} {policy} {engine} B={batch}: JAX {row['jax_qps_wall']:,.0f} q/s "
                          f"({row['jax_qps_cpu']:,.0f} per CPU-s), "
                          f"Python {row['ref_qps_wall']:,.0f} q/s ({row['ref_qps_cpu']:,.0f} per CPU-s): "
                          f"x{row['speedup_wall']:,.0f} wall, x{row['speedup_cpu']:,.0f} CPU", flush=True)

    machine = {**machine_description(), "load_average": os.getloadavg(),
               "pinned_cores": sorted(os.sched_getaffinity(0))}  # machine_description has the CPU model
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.stem}.json").write_text(json.dumps({"rows": rows, "machine": machine, "load": args.load,
                                                        "compiler_options": options, "argv": sys.argv[1:]}, indent=1))
    lines = [
        "# Simulated queries per second: pure-JAX simulator vs the Python discrete-event reference", "",
        f"Generated by `python experiments/edge_speed.py {' '.join(sys.argv[1:])}` at load `{args.load}` on "
        f"{machine['cpu_count']} CPU cores ({machine['cpu_model']}; the process pinned to cores "
        f"{machine['pinned_cores']}) shared with other jobs (load average {machine['load_average'][0]:.1f} when it "
        "finished; "
        f"JAX {machine['jax']}, "
        f"backend {machine['jax_backend']}; XLA compile options of the JAX engines: "
        f"{', '.join(f'`{k}={v}`' for k, v in options.items()) or 'none (defaults)'}). "
        "JAX over B traces, compilation excluded: `vmap` = jit(vmap(scan)) of the "
        "agents' simulator, `lanes` = the batch-last simulator of the static policies (traces laid out once before "
        "the timed calls; that layout took `layout s`). "
        "Python: the reference simulator, one trace after another. Same model, same per-query outcomes.", "",
        "| scenario | policy | engine | B | layout s | JAX q/s | JAX q/CPU-s | Python q/s | Python q/CPU-s "
        "| speed-up (wall) | speed-up (CPU) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['scenario']} | {r['policy']} | {r['engine']} | {r['batch']} | {r['layout_s']:.2f} "
                     f"| {r['jax_qps_wall']:,.0f} "
                     f"| {r['jax_qps_cpu']:,.0f} | {r['ref_qps_wall']:,.0f} | {r['ref_qps_cpu']:,.0f} "
                     f"| x{r['speedup_wall']:,.0f} | x{r['speedup_cpu']:,.0f} |")
    best = max(rows, key=lambda r: r["speedup_cpu"])
    lines += ["", f"Best: x{best['speedup_cpu']:,.0f} per CPU-second "
              f"({best['scenario']}, {best['policy']}, {best['engine']}, B={best['batch']}); "
              f"the issue's target is x1,000: "
              f"{'met' if best['speedup_cpu'] >= 1000 else 'NOT met on this machine'}.", "",
              f"![speed]({args.stem}.png)", ""]
    (out / f"{args.stem}.md").write_text("\n".join(lines))
    print(next(line for line in lines if line.startswith("Best: ")),
          f"(load average {machine['load_average'][0]:.1f})", flush=True)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    labels = [f"{r['scenario']}\n{r['policy']}\n{r['engine']} B={r['batch']}" for r in rows]
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["jax_qps_cpu"] for r in rows], 0.4, label="JAX (jit+vmap+scan)")
    ax.bar(x + 0.2, [r["ref_qps_cpu"] for r in rows], 0.4, label="Python reference")
    for i, r in enumerate(rows):
        ax.text(i, r["jax_qps_cpu"] * 1.15, f"x{r['speedup_cpu']:,.0f}", ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("simulated queries per CPU-second")
    ax.set_xticks(x, labels, fontsize=6)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / f"{args.stem}.png", dpi=120)
    plt.close(fig)
    print(f"wrote {out / (args.stem + '.md')}")


if __name__ == "__main__":
    main()
