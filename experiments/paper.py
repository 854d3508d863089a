"""Run one of the paper's experiments: ``python experiments/paper.py experiment=<name> [overrides]``.

Experiments are the configs in ``conf/experiment/`` (see ``conf/paper.yaml``); the code is in
:mod:`respect_jax.experiments`. Results: ``experiments/results/<name>/``.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from respect_jax.cli.common import CONF_DIR, check_group_choices, experiment_from_cfg, user_errors_exit

PROG = "experiments/paper.py"


@hydra.main(config_path=CONF_DIR, config_name="paper", version_base=None)
@user_errors_exit(PROG)
def main(cfg: DictConfig) -> None:
    from respect_jax.experiments import run_experiment

    doc = run_experiment(*experiment_from_cfg(cfg))
    print(f"{PROG}: wrote {cfg.out_dir}/{doc['experiment']}.md", file=sys.stderr)


if __name__ == "__main__":
    check_group_choices(PROG, ("experiment", "hardware"), config="paper")
    main()
