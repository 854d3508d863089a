"""Issue 31, safety at scale: the certified-safety property on >= 10,000 random certified scenarios over the
utilisation x HRT-share grid of ``conf/rt.yaml`` (``grid``), every policy behind the safety layer (the
adversarial, an oracle adversary that reads the layer's reference, random, every baseline and, if given,
the trained policy), plus the plain-Python counterexample search (an adversary redrawn every step).

    .venv/bin/python experiments/rt_safety_scale.py                       # 10,000 scenarios, the committed result
    .venv/bin/python experiments/rt_safety_scale.py --count 500 --fuzz 50 # quick look

Writes ``experiments/results/rt/safety_scale.{json,md}`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

from respect_jax.cli.common import CONF_DIR, machine_description, user_errors_exit
from respect_jax.cli.rt import _platform, grid_presets

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "rt"
POLICIES = ["adversarial", "oracle_adversary", "random", "edf", "llf", "heft", "fcfs", "cpls", "edf_aff", "cpls_cert"]


@user_errors_exit("rt_safety_scale")
def main(argv: list[str] | None = None) -> int:
    from respect_jax.realtime.evaluate import fuzz_redrawn_adversary, safety_at_scale
    from respect_jax.realtime.generator import generate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=10_000, help="scenarios (spread evenly over the grid cells)")
    ap.add_argument("--chunk", type=int, default=750, help="scenarios per compiled batch")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--policy", default=None, help="run folder of a trained RL policy to include")
    ap.add_argument("--policies", nargs="+", default=POLICIES, help="policies behind the layer")
    ap.add_argument(
        "--skip", nargs="*", default=[], help="grid cells to leave out (e.g. u95_h75: ~0.2%% of draws certify)"
    )
    ap.add_argument("--fuzz", type=int, default=300, help="plain-Python adversary-redrawn episodes (0: none)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of conf/rt.yaml (e.g. grid.utilisations=[0.9])")
    args = ap.parse_args(argv)
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("rt", overrides=["command=grid", *args.overrides])
    platform = _platform(cfg)
    configs = [c for c in grid_presets(cfg) if c.name not in set(args.skip)]
    policies, model = list(args.policies), None
    if args.policy:
        from respect_jax.realtime.train import load_policy

        model, _ = load_policy(args.policy)
        policies.append("rl")
    tic = time.perf_counter()
    res = safety_at_scale(
        configs,
        platform,
        args.count,
        policies,
        seed=args.seed,
        chunk=args.chunk,
        model=model,
        log=lambda s: print(f"[{time.perf_counter() - tic:.0f} s] {s}", file=sys.stderr),
    )
    res["wall_s"] = time.perf_counter() - tic
    fuzz = None
    if args.fuzz:
        tic2 = time.perf_counter()
        from respect_jax.realtime.tasks import InfeasibleTaskSet

        # tight deadlines (0.4-0.7 x period) on the cells with U <= 0.7; a cell without certified draws is skipped
        tight = [c.__class__(**{**c.__dict__, "deadline_factor": (0.4, 0.7), "max_tries": 500}) for c in configs]
        tight = [c for c in tight if c.utilisation <= 0.7]
        scs, fuzz_cells = [], []
        for j, c in enumerate(tight):
            n = args.fuzz // len(tight) + (j < args.fuzz % len(tight))
            try:
                scs += generate(c, platform, n, seed=(args.seed, 10_000, j))[0] if n else []
                fuzz_cells.append(c.name)
            except InfeasibleTaskSet:
                continue
        fuzz = fuzz_redrawn_adversary(scs, seed=args.seed)
        fuzz["wall_s"] = time.perf_counter() - tic2
        fuzz["cells"] = fuzz_cells
    doc = {
        "command": "python experiments/rt_safety_scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine_description(),
        "cells": [c.name for c in configs],
        "scale": res,
        "fuzz": fuzz,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "safety_scale.json").write_text(json.dumps(doc, indent=1))
    lines = [
        "# Safety at scale (experiments/rt_safety_scale.py)\n",
        f"`{doc['command']}`: {res['scenarios']} certified scenarios over {len(configs)} grid cells "
        f"({', '.join(doc['cells'])}), {res['rejected_draws']} draws rejected as not certified; wall "
        f"{res['wall_s']:.0f} s on the shared CPU.\n",
        "| policy (behind the layer) | HRT jobs | HRT missed | invariant violations | unfinished | override % |",
        "|---|---|---|---|---|---|",
    ]
    for p, t in res["policies"].items():
        rate = 100 * t["overrides"] / max(t["decisions"], 1)
        lines.append(
            f"| {p} | {t['hrt_jobs']} | {t['hrt_missed']} | {t['violations']} | {t['unfinished']} | {rate:.1f} |"
        )
    lines.append(
        f"\nSchedules re-checked by the independent validator: {res['validated']}, invalid: {len(res['invalid'])}."
    )
    if fuzz:
        lines.append(
            f"\nCounterexample search (plain Python, adversary redrawn every step, deadlines 0.4-0.7 x period, cells "
            f"{', '.join(fuzz['cells'])}): "
            f"{fuzz['episodes']} episodes, {fuzz['decisions']} decisions, {fuzz['hrt_missed']} HRT misses, "
            f"{len(fuzz['violations'])} invariant violations; wall {fuzz['wall_s']:.0f} s."
        )
    (args.out / "safety_scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    bad = any(t["hrt_missed"] or t["violations"] or t["unfinished"] for t in res["policies"].values())
    return 1 if bad or res["invalid"] or (fuzz and (fuzz["hrt_missed"] or fuzz["violations"])) else 0


if __name__ == "__main__":
    sys.exit(main())
