"""Issue 8's table and plots: train the RL scheduler (unless a policy exists) and evaluate every
method on every preset of ``conf/rt.yaml`` (``eval.presets``), writing ``experiments/results/rt/``.

It composes the same Hydra config as ``respect-rt`` and calls the same functions, so every knob is
a config override. Examples::

    .venv/bin/python experiments/rt_sweep.py                          # the committed figures
    .venv/bin/python experiments/rt_sweep.py --retrain train.updates=200
    .venv/bin/python experiments/rt_sweep.py eval.scenarios=50 eval.presets=[u50_balanced]
    .venv/bin/python experiments/rt_sweep.py --grid      # issue 31: the U x HRT-share grid with 95% CIs
                                                         # (policy: experiments/results/rt/policy_safety)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

from respect_jax.cli.common import CONF_DIR, user_errors_exit
from respect_jax.cli.rt import evaluate, grid, scenario_only, train

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / "experiments" / "results" / "rt" / "policy"
OUT_DIR = ROOT / "experiments" / "results" / "rt"
GRID_POLICY = OUT_DIR / "policy_safety"


@user_errors_exit("rt_sweep")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--retrain", action="store_true", help="train even if the run folder holds a policy")
    ap.add_argument("--grid", action="store_true", help="run `respect-rt grid` into experiments/results/rt/grid")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of conf/rt.yaml")
    args = ap.parse_args(argv)
    if args.grid:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose(
                "rt",
                overrides=[
                    "command=grid",
                    f"grid.policy={GRID_POLICY}",
                    f"grid.out_dir={OUT_DIR / 'grid'}",
                    *args.overrides,
                ],
            )
        tic = time.perf_counter()
        doc = grid(cfg)
        print(f"{len(doc['rows'])} rows -> {cfg.grid.out_dir} in {time.perf_counter() - tic:.0f} s", file=sys.stderr)
        return 0
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        overrides = ["command=eval", f"run_dir={RUN_DIR}", f"eval.out_dir={OUT_DIR}", *args.overrides]
        # as respect-rt does: a chosen rt_scenario replaces the presets it did not name (training and evaluation)
        overrides += scenario_only("train", args.overrides) + scenario_only("eval", args.overrides)
        cfg = compose("rt", overrides=overrides)
    tic = time.perf_counter()
    policy = Path(cfg.eval.policy if cfg.eval.policy is not None else cfg.run_dir)
    if args.retrain or not (policy / "network.json").is_file():
        if cfg.eval.policy is not None and not args.retrain:
            sys.exit(f"rt_sweep: eval.policy={cfg.eval.policy} holds no trained policy (network.json)")
        print(train(cfg), file=sys.stderr)
    doc = evaluate(cfg)
    print(f"{len(doc['rows'])} rows -> {cfg.eval.out_dir} in {time.perf_counter() - tic:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
