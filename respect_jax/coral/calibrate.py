"""Fit the hardware config of the cost model to measured per-stage latencies.

The cost model (:mod:`respect_jax.costs`) predicts stage k's time as

    T_k = tau + macs_k / R + spill_k / H + in_k / L,
    spill_k = max(0, param_bytes * params_k - sram_bytes),  in_k = act_bytes * in_elements_k,

which is linear in ``(tau, 1/R, 1/H, 1/L)``. Given measured stage times (from
:func:`respect_jax.coral.runner.profile_stages`, i.e. each segment timed alone, as libcoral's
profiling partitioner measures them, or from Edge TPU benchmark logs converted to the same
samples), :func:`fit_hardware` solves a non-negative least-squares problem for those four
coefficients (absolute errors by default, as the bottleneck stage decides throughput; columns
scaled to unit norm first). A coefficient is *kept* at its base value
(and the output says why) when its column is all zero (e.g. no stage spills on a CPU, or only
one stage, so no boundary traffic) or when the fit drives it to 0 (the term is too small to
measure: its rate would be infinite). Kept terms' predicted contribution is subtracted from the
measurements before fitting the rest.

For the LiteRT CPU case there is no parameter cache: :data:`CPU_BASE` sets ``sram_bytes`` so
large that nothing spills (``host_bw`` is then not identifiable and stays as given), and
``param_bytes``/``act_bytes`` follow the measured variant (4 for float32, 1 for int8).

Defaults' sources: ``conf/hardware/coral_usb.yaml`` and ``coral_pcie.yaml`` cite public Coral
figures for every value (coral.ai benchmarks and compiler docs); calibrating replaces them by a
specific host's numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from respect_jax.coral.options import CalibrateConfig, as_list
from respect_jax.coral.paths import check_output_file, read_json

if TYPE_CHECKING:
    from respect_jax.costs import Hardware

REPORT_KEYS = ("variant", "model", "num_stages", "stage_features", "pipeline")  # of a respect-pipeline report
FIT_FIELDS = ("stage_overhead_s", "macs_per_s", "host_bw", "link_bw")
VARIANT_BYTES = {"float32": 4.0, "int8": 1.0}

# A CPU running LiteRT has no on-chip parameter cache to overflow: nothing spills.
CPU_BASE = {
    "sram_bytes": 1.0e15,
    "param_bytes": 4.0,
    "act_bytes": 4.0,
    "macs_per_s": 1.0e10,
    "host_bw": 1.0e10,
    "link_bw": 1.0e9,
    "stage_overhead_s": 1.0e-4,
}


def stage_samples(manifest: dict, times_s: Sequence[float], hardware: dict, variant: str | None = None) -> list[dict]:
    """Cost-model features + measured time of every stage of a manifest.

    ``hardware`` supplies ``sram_bytes``, ``param_bytes``, ``act_bytes`` (the latter two are
    replaced by the variant's element size when ``variant`` is given).
    """
    if len(times_s) != len(manifest["stages"]):
        raise ValueError(f"{len(times_s)} times for {len(manifest['stages'])} stages")
    pb = VARIANT_BYTES[variant] if variant else float(hardware["param_bytes"])
    ab = VARIANT_BYTES[variant] if variant else float(hardware["act_bytes"])
    out = []
    for st, t in zip(manifest["stages"], times_s, strict=True):
        mem = pb * st["params"]
        out.append(
            {
                "model": manifest.get("model"),
                "stage": st["index"],
                "num_stages": manifest["num_stages"],
                "macs": float(st["macs"]),
                "spill_bytes": max(0.0, mem - float(hardware["sram_bytes"])),
                "in_bytes": ab * st["in_elements"],
                "time_s": float(t),
            }
        )
    return out


def predict_times(samples: Sequence[dict], hardware: dict) -> np.ndarray:
    """T_k of each sample under ``hardware`` (the formula of the module docstring)."""
    x = _design(samples)
    coef = np.array(
        [
            hardware["stage_overhead_s"],
            1.0 / hardware["macs_per_s"],
            1.0 / hardware["host_bw"],
            1.0 / hardware["link_bw"],
        ]
    )
    return x @ coef


def _design(samples: Sequence[dict]) -> np.ndarray:
    return np.array([[1.0, s["macs"], s["spill_bytes"], s["in_bytes"]] for s in samples], dtype=np.float64)


def fit_hardware(
    samples: Sequence[dict], base: dict, fit: Sequence[str] = FIT_FIELDS, weighting: str = "absolute"
) -> dict:
    """Fit ``fit`` fields of ``base`` to the samples' times (module docstring).

    ``weighting``: ``relative`` minimises the squared *relative* errors (stage times often span
    two orders of magnitude; a plain fit would ignore the short stages), ``absolute`` the squared
    errors in seconds.

    Returns ``{"hardware": fitted config, "fitted": {field: value}, "kept": {field: reason},
    "r2", "rmse_s", "max_rel_err", "num_samples", "samples": [... with "predicted_s"]}``.
    """
    from scipy.optimize import nnls

    if len(samples) < 2:
        raise ValueError("calibration needs at least 2 measured stages")
    if weighting not in ("relative", "absolute"):
        raise ValueError(f"weighting must be relative or absolute, got {weighting!r}")
    unknown = [f for f in fit if f not in FIT_FIELDS]
    if unknown:
        raise ValueError(f"cannot fit {unknown[0]!r}; fittable: {', '.join(FIT_FIELDS)}")
    x = _design(samples)
    y = np.array([s["time_s"] for s in samples], dtype=np.float64)
    base_coef = np.array(
        [base["stage_overhead_s"], 1.0 / base["macs_per_s"], 1.0 / base["host_bw"], 1.0 / base["link_bw"]]
    )
    kept: dict[str, str] = {}
    free = []
    for j, field in enumerate(FIT_FIELDS):
        if field not in fit:
            kept[field] = "not requested"
        elif not np.any(x[:, j] > 0):
            kept[field] = "not identifiable: its feature is 0 in every measured stage"
        else:
            free.append(j)
    fixed = [j for j in range(4) if j not in free]
    target = y - x[:, fixed] @ base_coef[fixed]
    coef = base_coef.copy()
    if free:
        w = 1.0 / np.maximum(y, 1e-12) if weighting == "relative" else np.ones_like(y)
        cols = x[:, free] * w[:, None]
        norms = np.linalg.norm(cols, axis=0)
        sol, _ = nnls(cols / norms, target * w)
        coef[free] = sol / norms
    fitted: dict[str, float] = {}
    hardware = dict(base)
    for j in free:
        field = FIT_FIELDS[j]
        if j == 0:
            hardware[field] = float(coef[0])
            fitted[field] = float(coef[0])
        elif coef[j] <= 0:
            kept[field] = "fit gave 0 s per unit (too small to measure here); kept the base value"
            coef[j] = base_coef[j]
        else:
            hardware[field] = float(1.0 / coef[j])
            fitted[field] = float(1.0 / coef[j])
    pred = x @ coef
    resid = y - pred
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else float("nan")
    rel = np.abs(resid) / np.maximum(y, 1e-12)
    return {
        "hardware": hardware,
        "fitted": fitted,
        "kept": kept,
        "r2": r2,
        "rmse_s": float(math.sqrt(np.mean(resid**2))),
        "max_rel_err": float(rel.max()),
        "median_rel_err": float(np.median(rel)),
        "num_samples": len(samples),
        "weighting": weighting,
        "samples": [{**s, "predicted_s": float(p)} for s, p in zip(samples, pred, strict=True)],
    }


def hardware_yaml(hardware: dict, stages: int, note: str) -> str:
    """A ``conf/hardware/*.yaml`` document for the fitted values (comments say where they came from)."""
    lines = [f"# {line}" for line in note.splitlines()]
    lines.append(f"stages: {int(stages)}")
    for field in ("sram_bytes", "param_bytes", "act_bytes", "macs_per_s", "host_bw", "link_bw", "stage_overhead_s"):
        lines.append(f"{field}: {float(hardware[field]):.6g}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- from pipeline reports


def read_report(path: str) -> dict:
    """A respect-pipeline report (JSON object with its keys), else ``ValueError`` naming the file."""
    doc = read_json(path, "report")
    missing = [k for k in REPORT_KEYS if k not in doc] if isinstance(doc, dict) else list(REPORT_KEYS)
    if missing:
        raise ValueError(f"{path}: not a respect-pipeline report (no {missing[0]!r})")
    return doc


def calibrate_reports(report_paths: list[str], base: dict, fit: Sequence[str], weighting: str = "absolute") -> dict:
    """Fit the hardware config to the stage profiles of pipeline reports (one variant, whose element size sets
    ``param_bytes``/``act_bytes``): :func:`fit_hardware`'s result plus ``variant`` and ``validation`` (per
    report: the predicted bottleneck and throughput beside the measured ones)."""
    if not report_paths:
        raise ValueError("reports is empty; give one or more respect-pipeline report files")
    reports = [read_report(path) for path in report_paths]
    variants = {r["variant"] for r in reports}
    if len(variants) != 1:
        raise ValueError(f"reports mix variants {sorted(variants)}; calibrate one variant at a time")
    variant = variants.pop()
    if variant not in VARIANT_BYTES:
        raise ValueError(f"reports are of variant {variant!r}; calibrate {' or '.join(VARIANT_BYTES)} reports")
    base = {**base, "param_bytes": VARIANT_BYTES[variant], "act_bytes": VARIANT_BYTES[variant]}
    samples = []
    for path, r in zip(report_paths, reports, strict=True):
        if not r.get("profile"):
            raise ValueError(f"{path}: has no stage profile (run respect-pipeline with profile=true)")
        manifest = {
            "model": r["model"],
            "num_stages": r["num_stages"],
            "stages": [{"index": f["stage"], **f} for f in r["stage_features"]],
        }
        samples += [{**x, "report": path} for x in stage_samples(manifest, [p["median_s"] for p in r["profile"]], base)]
    result = fit_hardware(samples, base, fit, weighting)
    result["variant"] = variant
    validation = []
    for path, r in zip(report_paths, reports, strict=True):
        feats = [s for s in result["samples"] if s["report"] == path]
        pred = predict_times(feats, result["hardware"]) if feats else np.zeros(0)
        entry = {"report": path, "model": r["model"], "num_stages": r["num_stages"]}
        if len(pred):
            entry["predicted_bottleneck_s"] = float(pred.max())
            entry["predicted_throughput_per_s"] = float(1.0 / pred.max())
        entry["measured_pipeline_throughput_per_s"] = r["pipeline"]["throughput_per_s"]
        entry["measured_alone_bottleneck_s"] = max(p["median_s"] for p in r["profile"])
        validation.append(entry)
    result["validation"] = validation
    return result


def calibrate(config: CalibrateConfig, hardware: Hardware | None = None) -> dict:
    """:func:`calibrate_reports` of ``config``: base ``cpu`` is :data:`CPU_BASE`, base ``hardware`` is
    ``hardware`` (required then)."""
    if config.base == "cpu":
        base = dict(CPU_BASE)
    elif config.base == "hardware":
        if hardware is None:
            raise ValueError("base=hardware needs a hardware config")
        base = {k: float(v) for k, v in hardware.to_dict().items() if k != "stages"}
    else:
        raise ValueError(f"base must be cpu or hardware, got {config.base!r}")
    reports = [str(p) for p in as_list(config.reports)]
    return calibrate_reports(reports, base, [str(f) for f in as_list(config.fit)], str(config.weighting))


def check_calibration_out(out: str | None) -> Path | None:
    """The output path of a calibration (None: none), checked writable before any work, with the ``.json``
    twin of a ``.yaml``."""
    if not out:
        return None
    path = check_output_file(out, "out")
    if path.suffix in (".yaml", ".yml"):
        check_output_file(path.with_suffix(".json"), "out (its .json)")
    return path


def calibration_lines(result: dict) -> list[str]:
    """What a calibration prints: the fitted values and fit quality, the kept ones and why, and per report
    the predicted bottleneck beside the measured times."""
    hw = result["hardware"]
    lines = [
        f"fitted ({result['variant']}, {result['num_samples']} stages): "
        + ", ".join(f"{k}={v:.4g}" for k, v in result["fitted"].items())
        + f"; R^2={result['r2']:.4f}, median rel. err {100 * result['median_rel_err']:.1f}%"
    ]
    lines += [f"kept {k}={hw[k]:.4g}: {why}" for k, why in result["kept"].items()]
    for v in result["validation"]:
        if "predicted_throughput_per_s" in v:
            lines.append(
                f"{v['report']}: predicted bottleneck {1e3 * v['predicted_bottleneck_s']:.2f} ms "
                f"({v['predicted_throughput_per_s']:.1f}/s), measured slowest stage alone "
                f"{1e3 * v['measured_alone_bottleneck_s']:.2f} ms, "
                f"pipeline {v['measured_pipeline_throughput_per_s']:.1f}/s"
            )
    return lines


def write_calibration(result: dict, out: Path, stages: int, reports: Sequence[str]) -> None:
    """Write ``result`` to ``out``: a ``.yaml`` gets the hardware config (:func:`hardware_yaml`, ``stages``
    stages, a comment naming the ``reports``) and the whole result in its ``.json`` twin; any other name the
    result as JSON. Files are written atomically."""
    from respect_jax.graphs.graph import write_json_atomic, write_text_atomic

    out = Path(out)
    if out.suffix not in (".yaml", ".yml"):
        write_json_atomic(result, out)
        return
    note = (
        f"Fitted by respect-calibrate from {result['num_samples']} measured stage latencies "
        f"({result['variant']}, LiteRT stage profiles): {', '.join(reports)}.\n"
        f"R^2={result['r2']:.4f}; kept (not fitted): "
        + (", ".join(f"{k} ({why})" for k, why in result["kept"].items()) or "none")
    )
    write_json_atomic(result, out.with_suffix(".json"))
    write_text_atomic(hardware_yaml(result["hardware"], stages, note), out)
