"""Time of ``solver=policy``'s whole default decoding under ``latency`` per phase, old tree vs new, on validation
graphs only (the bundled models are refused: they are the test set).

``run``: for each graph of ``--graphs`` at each K of ``--stages`` (Coral USB preset), one untimed call (compilation),
then ``--reps`` timed calls of ``run_solver("policy", ...)``; saves per case the schedule, its largest stage time, the
least time of the calls and the time per phase of the last call (forward pass, orders and split, polish, re-cuts,
rebalancing, window re-solves, garbage collections; wrappers on ``respect_jax.policy.order_solver``'s imports) to
``--out`` (.npz). Run it in fresh processes alternating the trees (``PYTHONPATH=<tree>``, e.g. a ``git archive``
of the old commit).
``alternate``: in one process, per case, the decoding with session 30's exact shortcuts off (old:
``order.LATENCY_BEST_ONLY`` and ``order_solver.BOUNDARY_MEMO`` False) and on, alternating old, new, new, old (the
least time of each kept, the schedules compared), one JSON line per case to ``--out`` (the machine's load moves
both alike). ``compare A B [A2 B2 ...]``: schedules changed, better / worse (largest stage time), the time ratio
B / A in all and per phase, the slowest cases.

    PYTHONPATH=/tmp/old .venv/bin/python experiments/decoding_speed_val.py run --out /tmp/old1.npz \\
        --graphs 'data/models_val/residual_generated/*.json' data/models_val/nasnetlarge.json --stages 4,5,6
    .venv/bin/python experiments/decoding_speed_val.py run --out /tmp/new1.npz  (same --graphs / --stages)
    .venv/bin/python experiments/decoding_speed_val.py compare /tmp/old1.npz /tmp/new1.npz
"""

from __future__ import annotations

import argparse
import gc
import glob
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

import numpy as np  # noqa: E402

PHASES = (("_scores", "forward"), ("decode_many", "split"), ("polish_many", "polish"),
          ("refine_boundaries", "recut"), ("rebalance_many", "rebalance"), ("window_search", "window"), (None, "gc"))


def run(args) -> None:
    from latency_window_replay import case_problem

    import respect_jax.policy.order_solver as order_solver
    import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
    from respect_jax.solvers import run_solver
    from respect_jax.solvers.rebalance import stage_times_np
    from respect_jax.solvers.window import load_cp_sat

    spent: dict[str, float] = {}
    collecting = [0.0]

    def on_gc(phase, info):  # garbage collections inside the timed calls (phase "gc")
        if phase == "start":
            collecting[0] = time.perf_counter()
        else:
            spent["gc"] = spent.get("gc", 0.0) + time.perf_counter() - collecting[0]

    gc.callbacks.append(on_gc)

    def timed(fn, name):
        def wrapper(*a, **kw):
            start = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
        return wrapper

    for attr, name in PHASES[:-1]:
        setattr(order_solver, attr, timed(getattr(order_solver, attr), name))
    load_cp_sat()
    paths = list(dict.fromkeys(p for g in args.graphs for p in sorted(glob.glob(g))))
    if any("data/models/" in p for p in paths):
        raise SystemExit("the bundled models are the test set: not for choosing")
    out = {}
    for path in paths:
        for k in (int(x) for x in args.stages.split(",")):
            graph, hw = case_problem({"path": path, "K": k})
            run_solver("policy", graph, hw, "latency", 1.0)
            best = np.inf
            for _ in range(int(args.reps)):
                spent.clear()
                start = time.perf_counter()
                result = run_solver("policy", graph, hw, "latency", 1.0)
                best = min(best, time.perf_counter() - start)
            s = np.asarray(result["assignment"], np.int64)
            key = f"{Path(path).stem}|{k}"
            out[key] = s
            out[key + "|t"] = np.array([best, float(stage_times_np(graph, s[None], hw)[0].max())]
                                       + [spent.get(name, 0.0) for _, name in PHASES])
    np.savez(args.out, **out)
    print(f"{args.out}: {len(out) // 2} cases, {sum(float(v[0]) for k, v in out.items() if k.endswith('|t')):.2f} s")


def alternate(args) -> None:
    import json

    from latency_window_replay import case_problem

    import respect_jax.policy.order as order
    import respect_jax.policy.order_solver as order_solver
    import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
    from respect_jax.solvers import run_solver
    from respect_jax.solvers.window import load_cp_sat

    load_cp_sat()
    paths = list(dict.fromkeys(p for g in args.graphs for p in sorted(glob.glob(g))))
    if any("data/models/" in p for p in paths):
        raise SystemExit("the bundled models are the test set: not for choosing")
    with open(args.out, "w") as out:
        for path in paths:
            for k in (int(x) for x in args.stages.split(",")):
                graph, hw = case_problem({"path": path, "K": k})
                run_solver("policy", graph, hw, "latency", 1.0)
                took: dict[bool, list[float]] = {False: [], True: []}
                got = {}
                for new in (False, True, True, False):
                    order.LATENCY_BEST_ONLY = order_solver.BOUNDARY_MEMO = new
                    start = time.perf_counter()
                    result = run_solver("policy", graph, hw, "latency", 1.0)
                    took[new].append(time.perf_counter() - start)
                    got[new] = np.asarray(result["assignment"])
                out.write(json.dumps({"graph": Path(path).stem, "K": k, "nodes": graph.num_nodes,
                                      "old_s": min(took[False]), "new_s": min(took[True]),
                                      "same": bool(np.array_equal(got[False], got[True]))}) + "\n")
                out.flush()


def compare(args) -> None:
    files = [np.load(f) for f in args.files]
    pairs = list(zip(files[0::2], files[1::2], strict=True))
    keys = [k for k in pairs[0][0].files if not k.endswith("|t") and all(k in f.files for f in files)]
    changed = better = worse = 0
    ta = tb = 0.0
    pa, pb = np.zeros(len(PHASES)), np.zeros(len(PHASES))
    per = []
    for k in keys:
        a, b = pairs[0]
        if not np.array_equal(a[k], b[k]):
            changed += 1
            x, y = float(a[k + "|t"][1]), float(b[k + "|t"][1])
            better += y < x * (1 - 1e-12)
            worse += y > x * (1 + 1e-12)
        ca = sum(float(a[k + "|t"][0]) for a, _ in pairs)
        cb = sum(float(b[k + "|t"][0]) for _, b in pairs)
        ta, tb = ta + ca, tb + cb
        pa += sum(a[k + "|t"][2:] for a, _ in pairs)
        pb += sum(b[k + "|t"][2:] for _, b in pairs)
        per.append((ca / len(pairs), cb / len(pairs), k))
    print(f"{len(keys)} cases x {len(pairs)} pairs: {changed} schedules changed ({better} better, {worse} worse); "
          f"time {ta:.2f} -> {tb:.2f} s (ratio {tb / ta:.3f})")
    print("per phase: " + ", ".join(f"{name} {x:.2f} -> {y:.2f}" for (_, name), x, y in zip(PHASES, pa, pb,
                                                                                            strict=True)))
    print("slowest (mean s, old -> new): " + ", ".join(f"{k} {x:.3f} -> {y:.3f}" for x, y, k in
                                                      sorted(per, reverse=True)[: int(args.top)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("--graphs", nargs="+", required=True)
    p.add_argument("--stages", default="4,5,6")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--out", required=True)
    p = sub.add_parser("alternate")
    p.add_argument("--graphs", nargs="+", required=True)
    p.add_argument("--stages", default="4,5,6")
    p.add_argument("--out", required=True)
    p = sub.add_parser("compare")
    p.add_argument("files", nargs="+", help="old1 new1 [old2 new2 ...]")
    p.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    {"run": run, "alternate": alternate, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    main()
