"""Table and figure of the decoding sweep of ``experiments/order_policy_decoding.py`` (validation graphs).

Every decoding is evaluated from the recorded splits: "greedy + S samples at noise sigma" is the least of the greedy
split and the first S noisy splits (what ``decode_scores`` returns), its time the forward pass plus those splits
(``dedupe``: a noisy order that repeats one already split costs only its order, not its split). Mixtures take the
first S/2 samples of two noise levels. ``budget B`` keeps sampling at one noise level while the forward pass and the
splits so far took less than B seconds (its figures depend on the machine's load). The reference of a case is the
least objective known: every decoding here, ``solver=contiguous`` (run by this script) and the recorded best of
``--best-known`` (validation records only). Writes ``<out>.md``, ``<out>.png``.

    .venv/bin/python experiments/order_policy_decoding_report.py experiments/results/order_policy_decoding_val \
        --best-known experiments/results/models_val_baseline_best_known.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from respect_jax.costs import hardware_from_dict  # noqa: E402
from respect_jax.graphs.graph import load_graph  # noqa: E402
from respect_jax.reporting import markdown_table  # noqa: E402
from respect_jax.solvers import run_solver  # noqa: E402

SAMPLES = (2, 4, 8, 16, 32, 64, 128)
NOTE = ("Every decoding is replayed from the recorded splits of `experiments/order_policy_decoding.py` (the same "
        "numbers `decode_scores` returns). Time: the forward pass + the greedy split + the sampled splits, one graph "
        "at a time, compile excluded; 'dedupe': a noisy order that repeats one already split would cost its order "
        "only (not implemented in `decode_scores` today). Mixtures `sigma=a+b`: S/2 samples of each. `budget B`: "
        "samples while the time so far is under B. `+ ls50`: at most 50 hill-climbing moves after the decoding "
        "(its compile excluded). Gap: to the least objective known for the case (every decoding here, "
        "solver=contiguous, the validation baseline's recorded best at K = 4).")


def read(stem: Path) -> list[dict]:
    """The sweep's records, one per (graph, K, objective) (a case written twice: the last)."""
    records = {}
    for line in stem.with_suffix(".jsonl").read_text().splitlines():
        r = json.loads(line)
        records[(r["graph"], r["stages"], r["objective_name"])] = r
    return list(records.values())


def recorded_best(paths: list[str]) -> dict:
    """(graph, K, objective) -> best known objective of the validation baseline records (K = 4 there)."""
    best: dict = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        for row in doc.get("rows", []):
            stages = int(row.get("stages", 4))
            best[(row["graph"], stages, row["objective_name"])] = float(row["best_known"])
    return best


def contiguous_values(records: list[dict], graphs_dir: Path, cache: Path, hardware: str) -> dict:
    """(graph, K, objective) -> (solver=contiguous objective, seconds); cached in ``cache``."""
    rows = json.loads(cache.read_text()) if cache.exists() else []
    done = {(g, int(k), o): [v, t] for g, k, o, v, t in rows}
    base = yaml.safe_load((ROOT / "conf" / "hardware" / f"{hardware}.yaml").read_text())
    graphs: dict = {}
    for r in records:
        key = (r["graph"], r["stages"], r["objective_name"])
        if key in done:
            continue
        graph = graphs.setdefault(r["graph"], load_graph(graphs_dir / f"{r['graph']}.json"))
        doc = run_solver("contiguous", graph, hardware_from_dict({**base, "stages": r["stages"]}), key[2], 1.0)
        done[key] = [doc["objective"], doc["solve_time_s"]]
    cache.write_text(json.dumps([[g, k, o, v, t] for (g, k, o), (v, t) in done.items()]))
    return done


def decodings(rec: dict) -> dict[str, tuple[float, float, float]]:
    """label -> (objective, seconds, seconds with dedupe) of every decoding this record can replay."""
    fwd, greedy, t0 = rec["forward_s"], rec["greedy"], rec["greedy_s"]
    out = {"greedy": (greedy, fwd + t0, fwd + t0)}
    order_s = 0.1 * t0  # a repeated order costs its order only (about 10 % of an order + split, measured below)
    per_noise = {}
    for sigma, d in rec["noise"].items():
        v = np.minimum.accumulate(np.minimum(greedy, np.asarray(d["values"])))
        t = fwd + t0 + np.cumsum(d["seconds"])
        td = fwd + t0 + np.cumsum([order_s if rep else s for s, rep in zip(d["seconds"], d["repeats"], strict=True)])
        per_noise[sigma] = (v, t, td)
        for s in SAMPLES:
            if s <= len(v):
                out[f"S={s} sigma={sigma}"] = (float(v[s - 1]), float(t[s - 1]), float(td[s - 1]))
        for budget in (0.1, 0.25, 0.5):
            before = np.concatenate([[fwd + t0], t[:-1]])  # elapsed when sample i starts
            n = int(np.sum(before < budget))
            label = f"budget {budget}s sigma={sigma}"
            out[label] = (float(v[n - 1]), float(t[n - 1]), float(td[n - 1])) if n else out["greedy"]
    sigmas = sorted(per_noise, key=float)
    for i, a in enumerate(sigmas):
        for b in sigmas[i + 1:]:
            for s in (8, 16, 32):
                h = s // 2
                if h <= len(per_noise[a][0]):
                    va, ta, tda = (x[h - 1] for x in per_noise[a])
                    vb, tb, tdb = (x[h - 1] for x in per_noise[b])
                    extra = fwd + t0
                    out[f"S={s} sigma={a}+{b}"] = (float(min(va, vb)), float(ta + tb - extra), float(tda + tdb - extra))
    for key in [k for k in rec if k.startswith("ls_sample") or k == "ls_greedy"]:
        start = "greedy" if key == "ls_greedy" else f"S={key[len('ls_sample'):]} sigma={rec['ls_from_sigma']}"
        if start in out:
            ls = rec[key]
            base = out[start]
            out[f"{start} + ls{rec['ls_moves']}"] = (min(ls["value"], base[0]), base[1] + ls["seconds"],
                                                     base[2] + ls["seconds"])
    return out


def gap(value: float, reference: float) -> float:
    return 100.0 * (value / reference - 1.0)


def summarise(records: list[dict], contiguous: dict, known: dict):
    """rows per (objective, decoding) and per-case gaps."""
    per_case = []
    for r in records:
        key = (r["graph"], r["stages"], r["objective_name"])
        dec = decodings(r)
        dec["solver=contiguous"] = (contiguous[key][0], contiguous[key][1], contiguous[key][1])
        reference = min([v[0] for v in dec.values()] + [known.get(key, np.inf)])
        per_case.append((r, key, dec, reference))
    labels = list(per_case[0][2])
    table = {}
    for objective in ("latency", "paper"):
        cases = [c for c in per_case if c[1][2] == objective]
        for label in labels:
            rows = [c for c in cases if label in c[2]]
            gaps = np.array([gap(c[2][label][0], c[3]) for c in rows])
            times = np.array([c[2][label][1] for c in rows])
            dtimes = np.array([c[2][label][2] for c in rows])
            worst = rows[int(np.argmax(gaps))][1]
            table[(objective, label)] = {
                "cases": len(rows), "mean": gaps.mean(), "max": gaps.max(), "at_ref": 100 * np.mean(gaps <= 1e-6),
                "median_s": np.median(times), "max_s": times.max(), "median_dedupe_s": np.median(dtimes),
                "max_dedupe_s": dtimes.max(), "worst": f"{worst[0]} K={worst[1]}"}
    return table, per_case


def plot(table: dict, png: Path, chosen: str | None = None) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.5))
    FigureCanvasAgg(fig)
    for ax, objective in zip(fig.subplots(1, 2), ("latency", "paper"), strict=True):
        for sigma in sorted({lab.split("sigma=")[1] for (o, lab) in table if o == objective and lab.startswith("S=")
                             and "+" not in lab and "ls" not in lab}, key=float):
            pts = [(table[(objective, f"S={s} sigma={sigma}")]["median_dedupe_s"],
                    table[(objective, f"S={s} sigma={sigma}")]["max"]) for s in SAMPLES
                   if (objective, f"S={s} sigma={sigma}") in table]
            ax.plot([1e3 * p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"noise {sigma}")
            if chosen and chosen.endswith(f"sigma={sigma}") and (objective, chosen) in table:
                t = table[(objective, chosen)]
                ax.scatter([1e3 * t["median_dedupe_s"]], [t["max"]], s=160, facecolors="none", edgecolors="black",
                           zorder=4, label=f"chosen default: {chosen}")
        for label, marker in (("greedy", "s"), ("solver=contiguous", "^")):
            ax.scatter([1e3 * table[(objective, label)]["median_dedupe_s"]], [table[(objective, label)]["max"]],
                       marker=marker, s=40, label=label, zorder=3)
        for label in [lab for (o, lab) in table if o == objective and "ls" in lab]:
            ax.scatter([1e3 * table[(objective, label)]["median_dedupe_s"]], [table[(objective, label)]["max"]],
                       marker="*", s=60, label=f"{label} (K = 4, 8 only)", zorder=3)
        ax.set_xscale("log")
        ax.set_xlabel("median time per case, ms (repeated orders not re-split; shared 2-core CPU)")
        ax.set_ylabel("max gap to best known %")
        ax.set_title(f"validation (data/models_val), {objective}: S = 2..32 samples")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stem")
    parser.add_argument("--graphs-dir", default=str(ROOT / "data" / "models_val"))
    parser.add_argument("--best-known", nargs="*", default=[])
    parser.add_argument("--hardware", default="coral_usb")
    parser.add_argument("--show", nargs="*", default=None, help="decodings to list (default: all)")
    parser.add_argument("--chosen", default=None, help="the decoding chosen as the default (circled in the figure)")
    parser.add_argument("--reference-sweeps", nargs="*", default=[],
                        help="other sweeps (stems) of the same cases whose best values enter the reference")
    parser.add_argument("--notes", default=None, help="a Markdown file whose text is put before the table")
    args = parser.parse_args()
    stem = Path(args.stem)
    records = read(stem)
    contiguous = contiguous_values(records, Path(args.graphs_dir), stem.with_name(stem.name + "_contiguous.json"),
                                   args.hardware)
    known = recorded_best(args.best_known)
    for other in args.reference_sweeps:
        for r in read(Path(other)):
            key = (r["graph"], r["stages"], r["objective_name"])
            known[key] = min([known.get(key, np.inf)] + [v[0] for v in decodings(r).values()])
    table, per_case = summarise(records, contiguous, known)
    head = ["objective", "decoding", "cases", "mean gap %", "max gap %", "at best known %", "median ms",
            "max ms", "median ms (dedupe)", "max ms (dedupe)", "worst case"]
    rows = [[o, lab, t["cases"], f"{t['mean']:.3f}", f"{t['max']:.3f}", f"{t['at_ref']:.1f}",
             f"{1e3 * t['median_s']:.1f}", f"{1e3 * t['max_s']:.0f}", f"{1e3 * t['median_dedupe_s']:.1f}",
             f"{1e3 * t['max_dedupe_s']:.0f}", t["worst"]]
            for (o, lab), t in table.items() if args.show is None or lab in args.show]
    loads = [r["load1"] for r in records]
    sigma = "0.1" if "0.1" in records[0]["noise"] else next(iter(records[0]["noise"]))
    repeats = np.mean([np.mean(r["noise"][sigma]["repeats"]) for r in records if sigma in r["noise"]])
    text = (f"{len(per_case)} cases; load average during the sweep {min(loads):.1f}-{max(loads):.1f} (median "
            f"{np.median(loads):.1f}; shared 2-core CPU, times pessimistic). Share of noisy orders (noise {sigma}) "
            f"that repeat an order already split: {100 * repeats:.1f} %.\n\n" + markdown_table(head, rows))
    command = "python experiments/order_policy_decoding_report.py " + " ".join(sys.argv[1:])
    title = "# Order policy decoding sweep (validation)"
    notes = Path(args.notes).read_text().strip() + "\n\n" if args.notes else ""
    stem.with_suffix(".md").write_text(f"{title}\n\n`{command}`\n\n{notes}{NOTE}\n\n{text}\n")
    plot(table, stem.with_suffix(".png"), args.chosen)
    print(text)


if __name__ == "__main__":
    main()
