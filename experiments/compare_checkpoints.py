"""Model selection without the held-out test set: checkpoints side by side on fresh generated graphs.

Every checkpoint schedules the same freshly generated graphs (a seed no labelled set uses) greedily and
best-of-N. No optimum is needed: the table gives each one's mean ratio to the objective's lower bound
and, against the first checkpoint, the mean per-graph objective ratio and on how many graphs it is
better or worse. This is how `data/checkpoints/respect_k4_paper_si_ft` was chosen (data/checkpoints/README.md).

    .venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si \
        data/checkpoints/respect_k4_paper_si_ft --out experiments/results/compare_si_ft
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from respect_jax.cli.common import machine_description, user_errors_exit  # noqa: E402
from respect_jax.costs import hardware_from_dict, objective_lower_bound  # noqa: E402
from respect_jax.experiments.report import result_stem, with_extension  # noqa: E402
from respect_jax.graphs import GeneratorConfig, make_jax_generator  # noqa: E402
from respect_jax.graphs.graph import write_json_atomic  # noqa: E402
from respect_jax.policy.decoding import Decoding, make_decoder  # noqa: E402
from respect_jax.train.checkpoints import find_run_dir, load_policy, read_network  # noqa: E402


def decodings(samples: int, temperatures: list[float], beam: int = 0, sbs: int = 0) -> list[tuple[str, Decoding]]:
    """Greedy, best-of-``samples`` at each sampling temperature (``best_of_N`` at 1.0, else
    ``best_of_N_tT``), with ``beam`` > 0 beam search of that width (``beam_W``) and with ``sbs`` > 0
    the best of that many distinct samples (stochastic beam search, ``sbs_W``)."""
    out = [("greedy", Decoding("greedy"))]
    for t in temperatures:
        name = f"best_of_{samples}" if t == 1.0 else f"best_of_{samples}_t{t:g}"
        out.append((name, Decoding("best_of", samples=samples, temperature=t)))
    if beam:
        out.append((f"beam_{beam}", Decoding("beam", samples=beam)))
    if sbs:
        out.append((f"sbs_{sbs}", Decoding("sbs", samples=sbs)))
    return out


def decode_all(
    path: str, graphs, samples: int, batch: int, temperatures: list[float], beam: int = 0, sbs: int = 0
) -> tuple[dict, dict[str, np.ndarray]]:
    """The checkpoint's network document and its objectives f32[G] per decoding (all schedules valid)."""
    model, doc = load_policy(path)
    hw = hardware_from_dict(doc["hardware"])
    count = graphs.params.shape[0]
    out = {}
    for name, dec in decodings(samples, temperatures, beam, sbs):
        run, params = make_decoder(model, hw, doc["objective"], doc["lam"], dec)
        objs = []
        for i in range(0, count, batch):
            result = run(params, jax.tree.map(lambda x, i=i: x[i : i + batch], graphs), jax.random.PRNGKey(i))
            if not bool(jnp.all(result.valid)):
                raise SystemExit(f"compare_checkpoints: {path} decoded an invalid schedule ({name})")
            objs.append(np.asarray(result.objective))
        out[name] = np.concatenate(objs)
    return doc, out


@user_errors_exit("compare_checkpoints")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+", help="run folders or step folders; the first is the reference")
    parser.add_argument("--graphs", type=int, default=1024)
    parser.add_argument("--nodes", type=int, default=50, help="nodes per generated graph (respect mode)")
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument(
        "--temperatures",
        type=float,
        nargs="+",
        default=[1.0],
        help="sampling temperatures of best-of-N (model selection of the decoding)",
    )
    parser.add_argument("--beam", type=int, default=0, help="also beam search of this width (0: none)")
    parser.add_argument("--sbs", type=int, default=0, help="also the best of this many distinct samples (0: none)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--out", default=None, help="write <out>.json and <out>.md")
    args = parser.parse_args()
    if args.graphs < 1 or args.batch < 1 or args.samples < 1:
        raise SystemExit(
            f"compare_checkpoints: --graphs, --batch and --samples must be >= 1, got {args.graphs}, {args.batch}, "
            f"{args.samples}"
        )
    if any(not t > 0 for t in args.temperatures):
        raise SystemExit(f"compare_checkpoints: --temperatures must be > 0, got {args.temperatures}")
    if args.beam < 0 or args.sbs < 0:
        raise SystemExit(f"compare_checkpoints: --beam and --sbs must be >= 0, got {args.beam} and {args.sbs}")
    if args.graphs % args.batch:
        raise SystemExit(f"compare_checkpoints: --graphs ({args.graphs}) must be a multiple of --batch ({args.batch})")
    docs = [read_network(find_run_dir(path)) for path in args.checkpoints]
    problems = [(d["objective"], d["lam"], d["hardware"]) for d in docs]
    for path, problem in zip(args.checkpoints[1:], problems[1:], strict=True):  # before decoding anything
        if problem != problems[0]:
            raise SystemExit(f"compare_checkpoints: {path} was trained for another objective, lam or hardware")
    gen = make_jax_generator(GeneratorConfig(mode="respect", min_nodes=args.nodes, max_nodes=args.nodes))
    graphs = jax.jit(jax.vmap(gen))(jax.random.split(jax.random.PRNGKey(args.seed), args.graphs))
    rows, ref = [], None
    for path in args.checkpoints:
        doc, objs = decode_all(path, graphs, args.samples, args.batch, args.temperatures, args.beam, args.sbs)
        hw = hardware_from_dict(doc["hardware"])
        bound = np.asarray(jax.vmap(objective_lower_bound, in_axes=(0, None, None))(graphs, hw, doc["objective"]))
        ref = ref or (doc, objs)
        for name, obj in objs.items():
            r = obj / ref[1][name]
            rows.append(
                {
                    "checkpoint": path,
                    "decoding": name,
                    "ratio_to_bound": float(np.mean(obj / bound)),
                    "ratio_to_first": float(np.mean(r)),
                    "better_pct": 100 * float(np.mean(r < 1 - 1e-6)),
                    "worse_pct": 100 * float(np.mean(r > 1 + 1e-6)),
                }
            )
            print(rows[-1], flush=True)
    m = machine_description()
    lines = [
        f"# Checkpoints on {args.graphs} fresh generated {args.nodes}-node graphs (seed {args.seed})",
        "",
        "| checkpoint | decoding | mean ratio to bound | mean ratio to first | better % | worse % |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r['checkpoint']} | {r['decoding']} | {r['ratio_to_bound']:.4f} | {r['ratio_to_first']:.4f} "
            f"| {r['better_pct']:.1f} | {r['worse_pct']:.1f} |"
            for r in rows
        ),
        "",
        f"Machine: {m['processor']}, {m['cpu_count']} CPUs, JAX {m['jax']} ({m['jax_backend']}). "
        "Quality only: the figures do not depend on the machine's load.",
    ]
    print("\n".join(lines))
    if args.out:
        out = result_stem(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic({"args": vars(args), "machine": m, "rows": rows}, with_extension(out, ".json"))
        with_extension(out, ".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
