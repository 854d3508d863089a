"""What the issue-30 scripts that run on VALIDATION traces share: their command-line options (agents folder, agent
seeds, trace seed, traces per cell, output), the refusal of the evaluation traces' seed, loading the agents, and the
traces of one (scenario, load) cell exactly as :func:`~respect_jax.edge_cluster.evaluation.compare` draws them.

Also the output: ``<stem>.md`` and ``<stem>.json`` (the command's arguments, the machine, the results). Used by
``edge_margin.py``, ``edge_switch_shares.py`` and ``edge_horizon_bias.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jax
import numpy as np

from respect_jax.cli.common import machine_description
from respect_jax.edge_cluster.evaluation import eval_traces, mean_ci
from respect_jax.edge_cluster.scenarios import Scenario
from respect_jax.edge_cluster.switching import load_edge_agent

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "edge"
EVALUATION_SEED = 2030  # the traces of dynamic_aset*.md / isp_aset*.md: never selected on
VALIDATION_SEED = 7


def add_validation_args(ap: argparse.ArgumentParser, *, stem: str, traces: int, agent_seeds: list[int] | None,
                        agent_seed: int | None = None) -> None:
    """Add ``--agents``, ``--agent-seeds`` (or, with ``agent_seed``, one ``--agent-seed``), ``--seed``, ``--traces``,
    ``--stem`` and ``--out`` with these defaults."""
    ap.add_argument("--agents", default=str(OUT / "agents" / "switch"), help="folder of s<seed> agent run folders")
    if agent_seed is not None:
        ap.add_argument("--agent-seed", type=int, default=agent_seed)
    else:
        ap.add_argument("--agent-seeds", type=int, nargs="+", default=agent_seeds)
    ap.add_argument("--seed", type=int, default=VALIDATION_SEED,
                    help=f"trace seed (validation; the evaluation uses {EVALUATION_SEED})")
    ap.add_argument("--traces", type=int, default=traces, help="traces per (scenario, load) cell")
    ap.add_argument("--stem", default=stem)
    ap.add_argument("--out", default=str(OUT))


def refuse_evaluation_seed(seed: int) -> None:
    """A ValueError for the evaluation traces' seed: these scripts select and diagnose on validation traces only."""
    if seed == EVALUATION_SEED:
        raise ValueError(f"--seed {EVALUATION_SEED} is the evaluation traces' seed: use validation traces "
                         f"(another seed, e.g. {VALIDATION_SEED})")


def load_agents(folder: str | Path, seeds) -> dict:
    """``{seed: agent}`` of ``folder/s<seed>`` for every seed."""
    return {s: load_edge_agent(Path(folder) / f"s{s}")[0] for s in seeds}


def cell_traces(scn: Scenario, load: str, seed: int, traces: int):
    """Trace [T, Q] of one cell: the traces ``compare(scn, ..., key=jax.random.key(seed), traces=T)`` gives at
    ``load`` (drawn from ``fold_in(key, index of the load among the scenario's loads)``)."""
    index = list(scn.loads).index(load)
    return eval_traces(scn, load, jax.random.fold_in(jax.random.key(seed), index), traces)


def write_report(out: str | Path, stem: str, lines: list[str], results: dict) -> None:
    """Write ``lines`` to ``out/<stem>.md`` and ``{"argv", **results, "machine"}`` to ``out/<stem>.json``; print the
    Markdown."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    doc = {"argv": sys.argv[1:], **results, "machine": machine_description()}
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    print("\n".join(lines))


def cells_against(doc: dict, load: str, best: str, names: list[str]) -> list[str]:
    """One table cell per policy of ``names`` in ``load``: its mean success ratio and, in brackets, the paired
    difference to policy ``best`` over the same traces (mean +- 95 % half-width)."""
    cells = []
    for p in names:
        diff = np.asarray(doc["per_trace"][p][load]) - np.asarray(doc["per_trace"][best][load])
        d, c = mean_ci(diff)
        cells.append(f"{doc['mean'][p][load]:.3f} ({d:+.3f} ± {c:.3f})")
    return cells
