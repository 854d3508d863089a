"""``respect-tables``: gather the runs of a sweep into one table.

Example::

    respect-train -m +ablation=encoder_depth          # writes runs/ablation/encoder_depth/<job>/
    respect-tables runs=runs/ablation/encoder_depth   # -> runs/ablation/encoder_depth/summary.{md,json}

A run is any folder under ``runs`` holding ``config.yaml`` and ``metrics.jsonl`` (what
``respect-train`` writes). Columns: the config values that differ between the runs (the swept
knobs, found automatically; bookkeeping keys such as ``run_dir`` are left out), then the run's final
figures: steps, wall time, last training loss, peak training graphs/s and every value of its last
evaluation. Rows are sorted by the swept values. The table is :mod:`respect_jax.experiments.sweep_summary`'s.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from respect_jax.cli.common import CONF_DIR, run_command, user_errors_exit
from respect_jax.experiments.sweep_summary import gather, render

PROG = "respect-tables"


@hydra.main(config_path=CONF_DIR, config_name="tables", version_base=None)
@user_errors_exit(PROG)
def _main(cfg: DictConfig) -> None:
    from respect_jax.graphs.graph import write_json_atomic

    root = Path(cfg.runs)
    if not root.is_dir():
        raise ValueError(f"runs={root}: not a folder")
    table = gather(root)
    out = Path(cfg.out) if cfg.out else root / "summary.md"
    md = render(table)
    write_json_atomic(table, out.with_suffix(".json"))
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text(md + "\n")
    tmp.replace(out.with_suffix(".md"))
    print(md)
    print(f"{PROG}: {len(table['rows'])} runs -> {out.with_suffix('.md')}", file=sys.stderr)


def main() -> None:
    run_command(PROG, (), "tables", _main)


if __name__ == "__main__":
    main()
