"""``make run``: the main job on a small CPU default (config: ``conf/main_job.yaml``).

1. ``respect-train``: a short imitation run of the GNN + attention policy on the bundled labelled
   30-node graphs;
2. ``respect-eval``: the trained policy (greedy and best-of-64) against the proven optima of
   held-out 50-node graphs and against the compiler-style baselines;
3. ``respect-schedule``: real Keras models from ``data/models`` scheduled by the compiler's partitioner,
   the exact best contiguous split, the policy trained here (+ local search), the shipped one
   (``solver=policy``'s default: the order policy, its default decoding), ``solver=auto`` and CP-SAT, with
   their schedule times;

then prints one summary table. Every step is a project command, printed before it runs.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from respect_jax.cli.common import CONF_DIR, user_errors_exit

BIN = Path(sys.executable).parent
console = Console(stderr=True)


def run_step(args: list[str]) -> None:
    """Run one project command (from this venv), echoing it; a failure stops the job."""
    console.print(f"[bold]$ {escape(shlex.join(args))}[/bold]")
    proc = subprocess.run([str(BIN / args[0]), *args[1:]])
    if proc.returncode != 0:
        console.print(f"make run: error: step failed with exit code {proc.returncode}: {shlex.join(args)}")
        sys.exit(proc.returncode)


def model_rows(cfg: DictConfig, run_dir: Path, out: Path) -> list[dict]:
    rows = []
    ls = f"solver.options.local_search={cfg.local_search}"
    for model in cfg.models:
        graph = Path("data/models") / f"{model}.json"
        results = {}
        for name, solver, extra in (
            ("compiler", "compiler", []),
            ("contiguous", "contiguous", []),
            ("policy", "policy", [f"solver.options.checkpoint={run_dir}", ls]),
            ("shipped", "policy", []),  # its default decoding: the greedy and 32 noisy orders, each split exactly
            ("auto", "auto", [f"solver.options.time_budget_s={cfg.auto_budget_s}"]),
            ("cpsat", "cpsat", [f"solver.options.time_limit_s={cfg.cpsat_time_limit_s}"]),
        ):
            result = out / f"{model}_{name}.json"
            run_step(["respect-schedule", f"graph={graph}", f"solver={solver}", *extra, f"out={result}"])
            results[name] = json.loads(result.read_text())
        rows.append({"model": model, **results})
    return rows


def summary_tables(cfg: DictConfig, rows: list[dict]) -> tuple[Table, Table]:
    """The final tables: each method's objective as a ratio to CP-SAT's, and each method's schedule time."""
    ls = "+ls" if cfg.local_search else ""
    names = {"compiler": "compiler", "contiguous": "contiguous", "policy": f"policy (run){ls}",
             "shipped": "policy (shipped)", "auto": f"auto {cfg.auto_budget_s:g}s", "cpsat": "CP-SAT"}
    quality = Table(title=f"Real models, K=4, paper objective: ratio to CP-SAT ({cfg.cpsat_time_limit_s} s limit)")
    times = Table(title="Schedule time in seconds (compilation excluded; auto: its whole budgeted call)")
    for col in ("model", "nodes", *names.values(), "CP-SAT proven", "auto certified gap"):
        quality.add_column(col)
    for col in ("model", *names.values()):
        times.add_column(col)
    for r in rows:
        best = r["cpsat"]["objective"]
        quality.add_row(r["model"], str(r["cpsat"]["num_nodes"]), *[f"{r[n]['objective'] / best:.3f}" for n in names],
                        str(r["cpsat"]["optimal"]), f"{100 * r['auto']['gap']:.2f} %")
        times.add_row(r["model"], *[f"{r[n]['solve_time_s']:.3f}" for n in names])
    return quality, times


@hydra.main(config_path=CONF_DIR, config_name="main_job", version_base="1.3")
@user_errors_exit("make run")
def main(cfg: DictConfig) -> None:
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / "policy"
    run_step(
        [
            "respect-train",
            f"run_dir={run_dir}",
            f"policy={cfg.policy}",
            f"algorithm={cfg.algorithm}",
            f"datasets=[{cfg.train_dataset}]",
            f"train.steps={cfg.train_steps}",
            f"train.steps_per_epoch={cfg.steps_per_epoch}",
            f"train.batch_size={cfg.batch_size}",
            f"train.checkpoint_every={cfg.train_steps}",
            f"train.eval_every={cfg.train_steps}",
        ]
    )
    eval_json = out / "eval.json"
    run_step(
        [
            "respect-eval",
            f"checkpoint={run_dir}",
            f"dataset={cfg.eval_dataset}",
            f"limit={cfg.eval_limit}",
            f"baselines=[{','.join(cfg.baselines)}]",
            f"out={eval_json}",
        ]
    )
    rows = model_rows(cfg, run_dir, out)
    quality, times = summary_tables(cfg, rows)
    Console().print((out / "eval.md").read_text() if (out / "eval.md").exists() else "")
    wide = Console(width=max(Console().width, 150))
    wide.print(quality)
    wide.print(times)
    console.print(f"[green]done[/green]: results under {out}/ (eval.json, eval.md, <model>_<solver>.json)")


if __name__ == "__main__":
    main()
