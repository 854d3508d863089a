"""NAS-cell validation graphs (issue 26's max gap) and their best-known schedules.

``build``: writes generated architectures of the multi-branch families of
:mod:`respect_jax.graphs.architectures` (the NAS-style cells ``nas0..nas2`` and the inception families; fixed seeds,
one family per graph, no hybrid) to ``data/models_val/nas_generated/`` (a subfolder: the 25 exported Keras models of
``data/models_val/*.json`` stay as they are). Validation only: the bundled models of ``data/models/`` are the test set.

``oracle``: for every graph of ``--graphs`` (default: those files plus ``data/models_val/nasnetlarge.json``), K of
``--stages`` and both objectives, the best schedule known: the least of ``solver=contiguous``, ``solver=policy``'s
default decoding (whatever it is at the time of the run), that decoding's schedule after
:func:`respect_jax.local_search.refine_boundaries` and a polish, and CP-SAT (``--time-limit`` s, one worker, hinted
with the best of those). Writes ``<out>.json`` (records: graph, stages,
objective_name, objective, optimal: whether CP-SAT proved it; the format ``order_policy_models.py --best-known``
reads) and ``<out>.md``.

    .venv/bin/python experiments/nas_val.py build              # --held-out: data/models_val/nas_generated_s28
    .venv/bin/python experiments/nas_val.py oracle --stages 2,4,6,8 --time-limit 4 \\
        --out experiments/results/nas_val_best_known
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import respect_jax.policy.solver  # noqa: E402,F401  (registers solver=policy)
from respect_jax.api import hardware  # noqa: E402
from respect_jax.cli.common import machine_description  # noqa: E402
from respect_jax.graphs.architectures import FAMILIES, ArchConfig, generate_arch_numpy  # noqa: E402
from respect_jax.graphs.generators import relabel_spec_order  # noqa: E402
from respect_jax.graphs.graph import load_graph, save_graph  # noqa: E402
from respect_jax.local_search import objectives_np, polish, refine_boundaries  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402

OUT_DIR = ROOT / "data" / "models_val" / "nas_generated"
#: (file stem, family, min nodes, max nodes, seed)
GRAPHS = (
    ("nas0_a", "nas0", 150, 400, 1), ("nas0_b", "nas0", 300, 700, 2),
    ("nas1_a", "nas1", 150, 400, 3), ("nas1_b", "nas1", 300, 700, 4),
    ("nas2_a", "nas2", 150, 400, 5), ("nas2_b", "nas2", 300, 700, 6),
    ("inception_a", "inception", 150, 500, 7), ("incres_a", "incres", 150, 500, 8),
)

#: The held-out NAS-cell graphs of session 28 (``data/models_val/nas_generated_s28``, the window escalation's check
#: after its choice): the same families, seeds 2801-2808 (node ranges that reproduce the committed files byte for byte).
GRAPHS_S28 = (
    ("ha_nas0_2801", "nas0", 300, 700, 2801), ("ha_nas1_2802", "nas1", 300, 700, 2802),
    ("ha_nas2_2803", "nas2", 300, 700, 2803), ("ha_nas0_2804", "nas0", 150, 400, 2804),
    ("ha_nas1_2805", "nas1", 150, 400, 2805), ("ha_nas2_2806", "nas2", 150, 400, 2806),
    ("ha_nas2_2807", "nas2", 500, 1000, 2807), ("ha_nas0_2808", "nas0", 500, 1200, 2808),
)
OUT_DIR_S28 = ROOT / "data" / "models_val" / "nas_generated_s28"


def build(held_out: bool = False) -> list[Path]:
    """Write the :data:`GRAPHS` (with ``held_out``: :data:`GRAPHS_S28`) as SPEC JSON, ids in SPEC order, and return
    their paths."""
    return write_family_graphs(GRAPHS_S28, OUT_DIR_S28) if held_out else write_family_graphs(GRAPHS, OUT_DIR)


def write_family_graphs(graphs, out_dir: Path) -> list[Path]:
    """One generated architecture per ``(stem, family, min nodes, max nodes, seed)`` of ``graphs``, of that family
    alone (no hybrid), named ``val_<stem>``, written to ``<out_dir>/<stem>.json`` (ids in SPEC order)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for stem, family, lo, hi, seed in graphs:
        weights = tuple(1.0 if f.name == family else 0.0 for f in FAMILIES)
        graph = generate_arch_numpy(lo, hi, np.random.default_rng(seed), name=f"val_{stem}",
                                    arch=ArchConfig(family_weights=weights, p_hybrid=0.0))
        path = out_dir / f"{stem}.json"
        save_graph(relabel_spec_order(graph), path)
        paths.append(path)
        print(f"{path}: {graph.num_nodes} nodes, {graph.num_edges} edges", flush=True)
    return paths


def oracle(paths: list[str], stages: list[int], time_limit: float) -> list[dict]:
    records = []
    for path in paths:
        graph = load_graph(path)
        for k in stages:
            hw = hardware("coral_usb", stages=k)
            for objective in ("paper", "latency"):
                start = time.perf_counter()
                contiguous = run_solver("contiguous", graph, hw, objective, 1.0)
                default = run_solver("policy", graph, hw, objective, 1.0)
                refined = refine_boundaries(graph, hw, objective, 1.0, np.asarray(default["assignment"]))
                refined = polish(graph, hw, objective, 1.0, refined, 100, "single", 16, 10)
                cands = [np.asarray(contiguous["assignment"]), np.asarray(default["assignment"]), refined]
                values = objectives_np(graph, np.stack(cands), hw, objective, 1.0)
                hint = cands[int(np.argmin(values))]
                cp = run_solver("cpsat", graph, hw, objective, 1.0, time_limit_s=time_limit, workers=1, hint=hint)
                best = min(float(values.min()), cp["objective"], contiguous["objective"], default["objective"])
                records.append({"graph": graph.name, "num_nodes": graph.num_nodes, "stages": k,
                                "objective_name": objective, "objective": best, "optimal": bool(cp["optimal"]),
                                "cpsat": cp["objective"], "contiguous": contiguous["objective"],
                                "default": default["objective"], "seconds": time.perf_counter() - start})
                r = records[-1]
                print(f"{graph.name} K={k} {objective}: default {100 * (r['default'] / best - 1):.2f} % "
                      f"contiguous {100 * (r['contiguous'] / best - 1):.2f} % proven {r['optimal']}", flush=True)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build", "oracle"))
    parser.add_argument("--graphs", nargs="*", default=None)
    parser.add_argument("--stages", default="2,3,4,5,6,7,8")
    parser.add_argument("--time-limit", type=float, default=6.0)
    parser.add_argument("--out", default="experiments/results/nas_val_best_known")
    parser.add_argument("--held-out", action="store_true", help="build: the session-28 graphs (nas_generated_s28)")
    args = parser.parse_args()
    if args.command == "build":
        build(args.held_out)
        return
    paths = args.graphs or sorted(glob.glob(str(OUT_DIR / "*.json"))) + [str(ROOT / "data/models_val/nasnetlarge.json")]
    records = oracle(paths, [int(k) for k in args.stages.split(",")], args.time_limit)
    out = Path(args.out)
    command = "python experiments/nas_val.py " + " ".join(sys.argv[1:])
    doc = {"command": command, "machine": machine_description(load_average=True), "records": records}
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    lines = [f"# NAS validation: best known schedules\n\n`{command}`\n",
             "| graph | N | K | objective | best known | proven | default gap % | contiguous gap % |", "|---" * 8 + "|"]
    for r in records:
        lines.append(f"| {r['graph']} | {r['num_nodes']} | {r['stages']} | {r['objective_name']} | "
                     f"{r['objective']:.6g} | {r['optimal']} | {100 * (r['default'] / r['objective'] - 1):.3f} | "
                     f"{100 * (r['contiguous'] / r['objective'] - 1):.3f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
