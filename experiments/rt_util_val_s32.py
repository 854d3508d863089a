"""Issue 31, session 32: how utilisation should be read, and REINFORCE vs PPO, on VALIDATION task sets.

Validation task sets: every cell of the ``grid`` node of ``conf/rt.yaml`` (U x HRT share), drawn like a training
pool (integer seed ``--val-seed * 1000 + cell``; 32000+ by default, disjoint from the training pools of seeds 0-2
and, being integer seeds, from the grid evaluation's SeedSequence draws, which this script never makes).

Per method and cell, paired with edf+safety on the same task sets (mean ± 95 % Student-t CI):

* ``utilisation`` -- the project's figure, busy / (M x makespan) (``episode_metrics``), unchanged;
* ``work_utilisation`` -- the task set's work W / (M x makespan), W = sum over its sub-jobs of their MEAN time over
  the accelerators (the unit of the generator's offered utilisation U): the same W for every method, so it only
  rewards finishing the same jobs earlier and does not count accelerator time spent on slow placements;
* ``busy_ms``, ``makespan_ms``, SRT satisfaction, Jain, override rate.

``edf_slow`` (defined here, not a library baseline): EDF priorities, each sub-job on the SLOWEST idle accelerator.
It is the check of what busy / makespan rewards: the same jobs, worse schedules, more accelerator time.

    .venv/bin/python experiments/rt_util_val_s32.py --policy rl_s0=experiments/results/rt/policy_safety \
        --policy ppo_s0=runs/rt_s32_ppo_s0 --out experiments/results/rt/rt_util_val_s32
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from omegaconf import OmegaConf

from respect_jax.graphs.graph import write_json_atomic
from respect_jax.realtime import experiment
from respect_jax.realtime.baselines import POLICIES
from respect_jax.realtime.evaluate import Runner, mean_ci, parse_method
from respect_jax.realtime.generator import generate
from respect_jax.realtime.platform import platform_from_dict
from respect_jax.realtime.tasks import pack, stack
from respect_jax.realtime.types import Action
from respect_jax.reporting import machine_description

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("srt_satisfaction", "jain", "utilisation", "work_utilisation", "override_rate", "busy_ms", "makespan_ms")
REFERENCE = "edf+safety"


def edf_slow(obs, state=None, key=None) -> Action:
    """EDF priorities, the slowest allowed accelerator (a deliberately worse placement)."""
    return Action(priority=-obs.deadline.astype(jnp.float32), machine_pref=obs.exec_us.astype(jnp.float32))


def per_task_set(batch, state, metrics: dict, machines: int) -> dict[str, np.ndarray]:
    ex = np.asarray(batch.exec_us).astype(np.float64)
    valid = np.asarray(batch.valid)
    machine = np.maximum(np.asarray(state.machine), 0)
    chosen = np.take_along_axis(ex, machine[..., None], axis=-1)[..., 0]
    busy = np.where(valid, chosen, 0.0).sum(-1)
    makespan = np.max(np.where(valid, np.asarray(state.finish), 0), axis=-1).astype(np.float64)
    work = np.where(valid, ex.mean(-1), 0.0).sum(-1)
    srt = metrics["srt_jobs"].astype(np.float64)
    dec = metrics["decisions"].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "srt_satisfaction": np.where(srt > 0, metrics["srt_met"] / srt, np.nan),
            "jain": metrics["jain"].astype(np.float64),
            "utilisation": metrics["utilisation"].astype(np.float64),
            "work_utilisation": work / (machines * np.maximum(makespan, 1.0)),
            "override_rate": np.where(dec > 0, metrics["overrides"] / np.maximum(dec, 1), 0.0),
            "busy_ms": busy / 1e3,
            "makespan_ms": makespan / 1e3,
        }
    # the recomputed busy / (M x makespan) must be the environment's figure (float32 there)
    dev = np.max(np.abs(busy / (machines * np.maximum(makespan, 1.0)) - out["utilisation"]))
    assert dev < 1e-5, dev
    assert int(metrics["hrt_missed"].sum()) == 0 and bool(np.all(metrics["finished"]))
    return out


def stat(x: np.ndarray) -> dict:
    m, h, n = mean_ci(x)
    return {"mean": m, "ci95": h, "n": n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", action="append", default=[], help="NAME=RUN_DIR of a trained policy (repeatable)")
    ap.add_argument("--baselines", nargs="*", default=["edf+safety", "cpls_cert+safety", "cpls+safety",
                                                       "edf_slow+safety"])  # fmt: skip
    ap.add_argument("--val-seed", type=int, default=32)
    ap.add_argument("--scenarios", type=int, default=32)
    ap.add_argument("--cells", nargs="*", default=None)
    ap.add_argument("--out", default=str(ROOT / "experiments/results/rt/rt_util_val_s32"))
    args = ap.parse_args(argv)
    tic = time.perf_counter()
    POLICIES["edf_slow"] = edf_slow  # for this script's Runner only
    cfg = OmegaConf.load(ROOT / "conf/rt.yaml")
    platform = platform_from_dict(OmegaConf.to_container(cfg.platform, resolve=True))
    g = cfg.grid
    presets = experiment.grid_presets(str(g.base), list(g.utilisations), list(g.hrt_shares), int(g.max_tries))
    sizes = experiment.common_sizes(presets, platform)
    M = platform.num_machines
    base = [parse_method(m) for m in args.baselines]
    assert base[0].name == REFERENCE
    runners = [(Runner([m.policy for m in base], int(g.max_steps)), [(m.name, m.policy) for m in base])]
    policies = {}
    for spec in args.policy:
        name, _, run = spec.partition("=")
        model, doc = experiment.load_rl(run, platform)
        policies[name] = {"run": run, "step": doc.get("step"), "train": doc.get("train")}
        runners.append((Runner(["rl"], int(g.max_steps), model), [(f"{name}+safety", "rl")]))
    methods = [n for _, ms in runners for n, _ in ms]
    per: dict[str, dict[str, dict[str, list]]] = {}
    draws = {}
    for i, p in enumerate(presets):
        if args.cells and p.name not in args.cells:
            continue
        seed = experiment.train_pool_seed(args.val_seed, i)
        scs, st = generate(p, platform, args.scenarios, seed=seed)
        draws[p.name] = {"seed": seed, **st}
        batch = stack([pack(s, sizes) for s in scs])
        per[p.name] = {}
        for runner, ms in runners:
            for name, pol in ms:
                state, metrics = runner.run(batch, pol, True, seed=0)
                per[p.name][name] = {k: v.tolist() for k, v in per_task_set(batch, state, metrics, M).items()}
        print(f"{p.name}: done ({time.perf_counter() - tic:.0f} s)", file=sys.stderr)
    rows = []
    for cell, by in per.items():
        ref = {k: np.asarray(by[REFERENCE][k]) for k in KEYS}
        for name in methods:
            v = {k: np.asarray(by[name][k]) for k in KEYS}
            row = {"cell": cell, "method": name}
            for k in KEYS:
                row[k] = stat(v[k])
                if name != REFERENCE:
                    row[k]["diff"] = stat(v[k] - ref[k])
            rows.append(row)
    # issue 31's targets for every learned policy, on both utilisation readings
    targets = {}
    for name in methods:
        if name in [m.name for m in base]:
            continue
        t = {"srt_losses": {}, "srt_pooled": {}}
        for b in [m.name for m in base if m.policy != "edf_slow"]:
            d = {c: np.asarray(per[c][name]["srt_satisfaction"]) - np.asarray(per[c][b]["srt_satisfaction"])
                 for c in per}  # fmt: skip
            t["srt_losses"][b] = [c for c in per if sum(mean_ci(d[c])[:2]) < 0]
            t["srt_pooled"][b] = stat(np.concatenate(list(d.values())))
        def diff(c, k, name=name):
            return np.asarray(per[c][name][k]) - np.asarray(per[c][REFERENCE][k])

        for k in ("jain", "utilisation", "work_utilisation"):
            worse = []
            for c in per:
                m, h, _ = mean_ci(diff(c, k))
                if m + h < 0:
                    worse.append(c)
            t[f"{k}_worse"] = worse
        t["override_not_below"] = [c for c in per if not mean_ci(diff(c, "override_rate"))[0] < 0]
        targets[name] = t
    # learned policies against each other (e.g. PPO - REINFORCE), paired on the same task sets, pooled over the grid
    learned = [n for n in methods if n not in [m.name for m in base]]
    versus = []
    for a_i, a in enumerate(learned):
        for b in learned[a_i + 1 :]:
            row = {"a": a, "b": b}
            for k in ("srt_satisfaction", "jain", "utilisation", "work_utilisation", "override_rate"):
                d = {c: np.asarray(per[c][a][k]) - np.asarray(per[c][b][k]) for c in per}
                row[k] = stat(np.concatenate(list(d.values())))
                row[k]["cells_a_better"] = [c for c in per if mean_ci(d[c])[0] - mean_ci(d[c])[1] > 0]
                row[k]["cells_b_better"] = [c for c in per if sum(mean_ci(d[c])[:2]) < 0]
            versus.append(row)
    doc = {
        "command": "python experiments/rt_util_val_s32.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine_description(load_average=True),
        "val_seed": args.val_seed,
        "scenarios": args.scenarios,
        "draws": draws,
        "policies": policies,
        "reference": REFERENCE,
        "wall_s": time.perf_counter() - tic,
        "rows": rows,
        "targets": targets,
        "learned_vs_learned": versus,
        "per_task_set": per,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(doc, out.with_suffix(".json"))
    out.with_suffix(".md").write_text(markdown(doc))
    plot(doc, out.with_suffix(".png"))
    print(json.dumps({"targets": targets, "wall_s": doc["wall_s"]}, indent=1))
    return 0


def _pm(d: dict, scale: float = 100.0, digits: int = 1, sign: bool = False) -> str:
    return f"{d['mean'] * scale:{'+' if sign else ''}.{digits}f} ± {d['ci95'] * scale:.{digits}f}"


def plot(doc: dict, path: Path) -> None:
    """Paired Δ utilisation and Δ work utilisation to the reference, per cell (95 % CI bars), one series per method."""
    from matplotlib.figure import Figure

    cells = list(dict.fromkeys(r["cell"] for r in doc["rows"]))
    methods = [m for m in dict.fromkeys(r["method"] for r in doc["rows"]) if m != doc["reference"]]
    fig = Figure(figsize=(13, 6.5))
    axes = fig.subplots(2, 1, sharex=True)
    x = np.arange(len(cells))
    readings = (("utilisation", "busy / (M x makespan)"), ("work_utilisation", "W / (M x makespan)"))
    for ax, (key, label) in zip(axes, readings, strict=True):
        for k, m in enumerate(methods):
            d = [next(r for r in doc["rows"] if r["cell"] == c and r["method"] == m)[key]["diff"] for c in cells]
            ax.errorbar(x + (k - (len(methods) - 1) / 2) * 0.8 / len(methods), [100 * v["mean"] for v in d],
                        yerr=[100 * v["ci95"] for v in d], fmt="o", ms=3, capsize=2, label=m)  # fmt: skip
        ax.axhline(0, color="k", lw=0.6)
        ax.set_ylabel(f"Δ {label}\nvs {doc['reference']} (points)", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=len(methods))
    axes[1].set_xticks(x, cells, rotation=45, fontsize=8)
    axes[0].set_title("Validation task sets: paired utilisation differences, mean and 95 % CI", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def versus_md(doc: dict) -> list[str]:
    out = ["| a | b | Δ SRT | Δ Jain x100 | Δ util. | Δ work-util. | Δ overrides | cells a better / b better (SRT) |",
           "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in doc.get("learned_vs_learned", []):
        srt = r["srt_satisfaction"]
        out.append(
            f"| {r['a']} | {r['b']} | {_pm(srt, sign=True)} | {_pm(r['jain'], sign=True)} | "
            f"{_pm(r['utilisation'], digits=2, sign=True)} | {_pm(r['work_utilisation'], digits=2, sign=True)} | "
            f"{_pm(r['override_rate'], sign=True)} | {_none(srt['cells_a_better'])} / {_none(srt['cells_b_better'])} |"
        )
    return out


def _none(cells: list[str]) -> str:
    return ", ".join(cells) or "none"


def markdown(doc: dict) -> str:
    head = ["cell", "method", "SRT %", "Δ SRT", "Jain", "util. %", "Δ util.", "work-util. %", "Δ work-util.",
            "Δ busy ms", "Δ makespan ms", "overrides %"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in doc["rows"]:
        d = {k: r[k].get("diff") for k in KEYS}
        cells = [
            r["cell"],
            r["method"],
            _pm(r["srt_satisfaction"]),
            d["srt_satisfaction"] and _pm(d["srt_satisfaction"], sign=True),
            f"{r['jain']['mean']:.3f}",
            _pm(r["utilisation"]),
            d["utilisation"] and _pm(d["utilisation"], digits=2, sign=True),
            _pm(r["work_utilisation"]),
            d["work_utilisation"] and _pm(d["work_utilisation"], digits=2, sign=True),
            d["busy_ms"] and _pm(d["busy_ms"], 1.0, 2, True),
            d["makespan_ms"] and _pm(d["makespan_ms"], 1.0, 2, True),
            _pm(r["override_rate"]),
        ]
        lines.append("| " + " | ".join(c or "-" for c in cells) + " |")
    tg = [
        "| policy | SRT losses (cells) | pooled Δ SRT vs each baseline, points | Jain worse | util. worse | "
        "work-util. worse | overrides not below |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, t in doc["targets"].items():
        pooled = ", ".join(f"{b}: {_pm(v, sign=True)}" for b, v in t["srt_pooled"].items())
        losses = sum(len(v) for v in t["srt_losses"].values())
        tg.append(
            f"| {name} | {losses} | {pooled} | {_none(t['jain_worse'])} | {_none(t['utilisation_worse'])} | "
            f"{_none(t['work_utilisation_worse'])} | {_none(t['override_not_below'])} |"
        )
    intro = (
        f"Validation task sets: {doc['scenarios']} per grid cell, integer seeds {doc['val_seed']} * 1000 + cell "
        "(training-pool style, no training pool uses them; not the grid evaluation's task sets). Every method behind "
        f"the safety layer; Δ = paired difference to {doc['reference']} on the same task sets, mean ± 95 % Student-t "
        "CI. util. = busy / (M x makespan) (the project's figure); work-util. = W / (M x makespan) with W the task "
        "set's work in mean accelerator time (the same W for every method). edf_slow = EDF on the slowest idle "
        "accelerator (a check of the metric, not a baseline).\n"
    )
    return "\n".join(
        [
            "# Issue 31 on validation task sets: utilisation read two ways, REINFORCE vs PPO (session 32)\n",
            f"`{doc['command'].strip()}`; wall {doc['wall_s']:.0f} s; machine: {json.dumps(doc['machine'])}.\n",
            intro,
            "## Targets\n",
            *tg,
            "",
            "## Learned policies against each other (a - b, paired, pooled over every task set of the grid)\n",
            *versus_md(doc),
            "",
            "## Every cell\n",
            *lines,
            "",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
