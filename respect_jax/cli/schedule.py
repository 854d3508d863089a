"""``respect-schedule``: schedule one graph with one solver and write RESULT.json (SPEC section 4).

Example::

    respect-schedule graph=data/models/resnet50.json solver=cpsat hardware.stages=4 \
        objective=paper out=result.json
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from respect_jax.cli.common import (
    CONF_DIR,
    check_group_choices,
    dump_json,
    hardware_from_cfg,
    job_file,
    user_errors_exit,
)
from respect_jax.costs import OBJECTIVES
from respect_jax.graphs.graph import load_graph, write_json_atomic


def schedule(cfg: DictConfig) -> dict:
    """Run the configured solver on the configured graph; return the RESULT.json document."""
    from respect_jax.solvers import run_solver

    if cfg.solver.name == "policy":  # registered by the policy package (solvers never import it)
        import respect_jax.policy.solver  # noqa: F401
    if cfg.solver.name == "respect_pointer":
        import respect_jax.respect_pointer.solver  # noqa: F401

    if cfg.objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {cfg.objective!r}")
    hw = hardware_from_cfg(cfg.hardware)
    graph = load_graph(cfg.graph)
    options = OmegaConf.to_container(cfg.solver.options, resolve=True) if cfg.solver.get("options") else {}
    return run_solver(cfg.solver.name, graph, hw, cfg.objective, float(cfg.lam), **options)


def training_mismatch(result: dict) -> str | None:
    """A learned solver's checkpoint trained for another objective, lam or stage count than it scheduled for
    (it still schedules, validly; the results of such transfers are usually worse): one line, else None."""
    trained = (result.get("info") or {}).get("trained_on")
    if not trained:
        return None
    differ = []
    if trained["objective"] != result["objective_name"]:
        differ.append(f"objective {trained['objective']} (here {result['objective_name']})")
    if result["objective_name"] == "paper" and float(trained["lam"]) != float(result["lam"]):
        differ.append(f"lam {trained['lam']} (here {result['lam']})")
    if int(trained["hardware"]["stages"]) != int(result["hardware"]["stages"]):
        differ.append(f"K={trained['hardware']['stages']} (here K={result['hardware']['stages']})")
    if not differ:
        return None
    return f"the checkpoint was trained for {', '.join(differ)}; a checkpoint trained for this problem may do better"


@hydra.main(config_path=CONF_DIR, config_name="schedule", version_base="1.3")
@user_errors_exit("respect-schedule")
def _main(cfg: DictConfig) -> None:
    out = job_file(cfg, "out", None)  # in a sweep: an out two jobs would share is refused up front
    result = schedule(cfg)
    note = training_mismatch(result)
    if note:
        print(f"respect-schedule: note: {note}", file=sys.stderr)
    if out is not None:
        write_json_atomic(result, out)
        print(
            f"{result['solver']} on {result['graph']} ({result['num_nodes']} nodes, K={result['hardware']['stages']}): "
            f"{result['objective_name']}={result['objective']:.6g} optimal={result['optimal']} "
            f"time={result['solve_time_s']:.3f}s -> {out}",
            file=sys.stderr,
        )
    else:
        print(dump_json(result))


def main() -> None:
    check_group_choices("respect-schedule", ("hardware", "solver"), config="schedule")
    _main()


if __name__ == "__main__":
    main()
