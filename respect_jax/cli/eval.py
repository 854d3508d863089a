"""``respect-eval``: a trained policy on a dataset, against the oracle labels and baseline solvers.

The checkpoint may be a GNN policy run folder or a RESPECT-pointer one (``policy=respect_pointer``;
told apart by its ``network.json``).

Example::

    respect-eval checkpoint=data/checkpoints/respect_k4_paper dataset=data/labels/respect50_k4_paper \
        decodings=[greedy,best_of] samples=64 baselines=[compiler]

Per graph: the objective of every decoding and baseline, its gap to the reference (the dataset's
oracle objective; for unlabelled graphs the best schedule any method found), whether it matches the
reference (within 1e-6 relative: "% optimal"), validity and schedule time; aggregates per method. Writes
JSON, a Markdown table (``.md``), the per-graph rows as CSV (``.csv``) and a histogram of the gaps
(``.png``). The work is done by :mod:`respect_jax.policy_evaluation`; this file reads the config.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from respect_jax.cli.common import CONF_DIR, job_file, run_command, shipped_path, user_errors_exit
from respect_jax.policy_evaluation import CSV_FIELDS, EvalConfig, markdown, write_outputs  # noqa: F401 (CSV_FIELDS)
from respect_jax.policy_evaluation import evaluate as evaluate_policy

PROG = "respect-eval"


def solver_options(name: str) -> dict:
    """The ``options`` of ``conf/solver/<name>.yaml`` (one-line ValueError for an unknown solver)."""
    path = Path(CONF_DIR) / "solver" / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"unknown baseline solver {name!r} (no conf/solver/{name}.yaml)")
    node = OmegaConf.load(path)
    return OmegaConf.to_container(node.options, resolve=True) if node.get("options") else {}


def eval_config(cfg: DictConfig) -> EvalConfig:
    """The :class:`EvalConfig` of the command's config (the checkpoint's default works from any directory)."""
    return EvalConfig(
        checkpoint=shipped_path(cfg.checkpoint),
        dataset=str(cfg.dataset),
        limit=cfg.limit,
        decodings=tuple(str(d) for d in cfg.decodings),
        samples=int(cfg.samples),
        temperature=float(cfg.temperature),
        local_search=int(cfg.local_search),
        pair_escapes=int(cfg.pair_escapes),
        pair_candidates=int(cfg.pair_candidates),
        batch_size=int(cfg.batch_size),
        baselines={str(name): solver_options(str(name)) for name in cfg.baselines},
        objective=cfg.objective,
        lam=cfg.lam,
        hardware_from=cfg.hardware_from,
        seed=int(cfg.seed),
    )


def evaluate(cfg: DictConfig) -> dict:
    """Run the evaluation the config describes; returns the JSON document."""
    log = (lambda m: print(f"{PROG}: {m}", file=sys.stderr)) if cfg.progress else None
    return evaluate_policy(eval_config(cfg), log=log)


@hydra.main(config_path=CONF_DIR, config_name="eval", version_base="1.3")
@user_errors_exit(PROG)
def _main(cfg: DictConfig) -> None:
    doc = evaluate(cfg)
    out = job_file(cfg, "out", f"runs/eval/eval_{Path(doc['checkpoint']).name}_{Path(str(cfg.dataset)).stem}.json")
    paths = write_outputs(doc, out)
    print(markdown(doc))
    print(f"{PROG}: wrote {', '.join(map(str, paths))}", file=sys.stderr)


def main() -> None:
    run_command("respect-eval", (), "eval", _main)


if __name__ == "__main__":
    main()
