"""Time of the window re-solves of ``solver=policy``'s default decoding under ``latency``
(``respect_jax/solvers/window.py``), old vs new, on validation graphs only.

``starts``: the default decoding with ``ls_window=0`` per case (``--cases`` JSON lines of ``latency_rebalance_val.py
oracle`` and ``--graphs`` globs at ``--stages``), cached as ``<cache>/<key>.npy``. ``run``: from each cached start,
:func:`~respect_jax.solvers.window.window_search` with the decoding's default knobs (3 re-solves, escalation 2;
``--probing`` / ``--presolve``: CP-SAT's probing level / presolve level of ``window_resolve``, omitted: the tree's
defaults), timed, the schedules saved to ``--out`` (.npz).
Run ``run`` in fresh processes alternating the trees to compare (``PYTHONPATH=<tree>``: e.g. a ``git archive`` of the
old commit). ``compare A B``: schedules changed, better / worse (largest stage time), the time ratio B / A. Refuses
the bundled models (the test set).

    .venv/bin/python experiments/window_speed_val.py starts \\
        --cases experiments/results/latency_rebalance_oracle.jsonl \\
        --graphs 'data/models_val/nas_generated*/*.json' data/models_val/nasnetlarge.json --stages 2,3,4,5,6,7,8
    .venv/bin/python experiments/window_speed_val.py run --out /tmp/new.npz  (same --cases / --graphs / --stages)
    .venv/bin/python experiments/window_speed_val.py compare /tmp/old.npz /tmp/new.npz
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

import numpy as np  # noqa: E402
from latency_window_replay import case_problem, validation_cases  # noqa: E402


def _key(case: dict) -> str:
    return hashlib.sha1(f"{case['path']}|{case['K']}|{case.get('sram')}".encode()).hexdigest()[:16]


def _cases(args) -> list[dict]:
    seen, out = set(), []
    for case in validation_cases(args.cases, args.graphs, args.stages):
        if _key(case) not in seen:
            seen.add(_key(case))
            out.append(case)
    return out


def starts(args) -> None:
    import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
    from respect_jax.solvers import run_solver

    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    for case in _cases(args):
        path = cache / f"{_key(case)}.npy"
        if not path.exists():
            graph, hw = case_problem(case)
            run_solver("policy", graph, hw, "latency", 1.0, ls_window=0)  # compilation
            np.save(path, np.asarray(run_solver("policy", graph, hw, "latency", 1.0, ls_window=0)["assignment"]))


def run(args) -> None:
    from respect_jax.solvers.rebalance import stage_times_np
    from respect_jax.solvers.window import load_cp_sat, window_search

    load_cp_sat()
    extra = {} if args.probing is None else {"probing": int(args.probing)}
    extra.update({} if args.presolve is None else {"presolve": int(args.presolve)})
    out, total = {}, 0.0
    for case in _cases(args):
        path = Path(args.cache) / f"{_key(case)}.npy"
        if not path.exists():
            continue
        graph, hw = case_problem(case)
        start = time.perf_counter()
        s, _ = window_search(graph, hw, np.load(path), 3, float(args.limit), escalate=2, **extra)
        took = time.perf_counter() - start
        total += took
        out[_key(case)] = s
        out[_key(case) + "_t"] = np.array([took, float(stage_times_np(graph, s[None], hw)[0].max())])
    np.savez(args.out, **out)
    print(f"{args.out}: {len(out) // 2} cases, window step {total:.2f} s")


def compare(args) -> None:
    a, b = np.load(args.a), np.load(args.b)
    keys = [k for k in a.files if not k.endswith("_t") and k in b.files]
    changed = better = worse = 0
    ta = sum(float(a[k + "_t"][0]) for k in keys)
    tb = sum(float(b[k + "_t"][0]) for k in keys)
    for k in keys:
        if not np.array_equal(a[k], b[k]):
            changed += 1
            x, y = float(a[k + "_t"][1]), float(b[k + "_t"][1])
            better += y < x * (1 - 1e-12)
            worse += y > x * (1 + 1e-12)
    print(f"{len(keys)} cases: {changed} schedules changed ({better} better, {worse} worse); "
          f"time {ta:.2f} -> {tb:.2f} s (ratio {tb / ta:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("starts", "run"):
        p = sub.add_parser(name)
        p.add_argument("--cases", nargs="*", default=[])
        p.add_argument("--graphs", nargs="*", default=[])
        p.add_argument("--stages", default="2,3,4,5,6,7,8")
        p.add_argument("--cache", default="/tmp/window_speed_cache")
        if name == "run":
            p.add_argument("--probing", type=int, default=None)
            p.add_argument("--presolve", type=int, default=None)
            p.add_argument("--limit", type=float, default=0.2, help="deterministic limit per re-solve")
            p.add_argument("--out", required=True)
    p = sub.add_parser("compare")
    p.add_argument("a")
    p.add_argument("b")
    args = parser.parse_args()
    {"starts": starts, "run": run, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    main()
