"""Schedule + segment + run: the flows behind ``respect-segment``, ``respect-pipeline`` and ``respect-deploy``.

:func:`segment` checks every argument that can be checked without TensorFlow (variants, ``edgetpu_compiler``,
the model argument and file content, BatchNorm option, output folder, schedule file), then builds or loads the
model, takes its schedule (a ``RESULT.json`` of respect-schedule, or a solver run on the model's graph) and
cuts it into per-stage ``.tflite`` files with a manifest (:mod:`respect_jax.coral.segment`; a ``.tflite``
model is cut as it is by :mod:`respect_jax.coral.tflite_segment`). :func:`pipeline_report` runs a segment
folder as a pipeline (:mod:`respect_jax.coral.runner`), optionally against the unsegmented model and stage by
stage alone. TensorFlow and LiteRT are imported inside the functions only. Errors are one-line ``ValueError``s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from respect_jax.coral.options import PipelineOptions, SegmentConfig, as_list
from respect_jax.coral.paths import read_json

if TYPE_CHECKING:
    from respect_jax.costs import Hardware


@dataclass(frozen=True)
class ScheduleSolver:
    """The solver that schedules a model when no schedule file is given: a registered solver name, its keyword
    options, and the hardware (its ``stages`` is K)."""

    name: str
    hardware: Hardware
    options: dict = field(default_factory=dict)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ----------------------------------------------------------------------------- segment


def check_model_arg(model: str, tflite: bool = False) -> None:
    """A bundled name or an existing ``.keras``/``.h5`` file (``tflite``: or a ``.tflite`` file), else
    ``ValueError`` (no TensorFlow needed)."""
    from respect_jax.coral.export import check_model_file
    from respect_jax.coral.keras_export import MODELS

    path = Path(model)
    suffixes = (".keras", ".h5", ".tflite") if tflite else (".keras", ".h5")
    if model not in MODELS and not (path.suffix in suffixes and path.is_file()):
        files = "an existing .keras or .tflite file" if tflite else "an existing .keras file"
        raise ValueError(f"model must be a bundled name ({', '.join(MODELS)}) or {files}, got {model!r}")
    if model not in MODELS:
        check_model_file(model)  # its content too (a zip with config.json, an HDF5 signature)


def load_keras_model(model: str, include_top: bool, input_size: int | None, seed: int):
    """A bundled application model (fresh Keras session, seeded weights) or a saved .keras file."""
    from respect_jax.coral._deps import import_keras
    from respect_jax.coral.keras_export import MODELS, build_keras_model, load_keras_file

    check_model_arg(model)
    keras = import_keras()
    if model not in MODELS:  # the loader of respect-export (same node names); a failure is one line
        loaded = load_keras_file(model)
        keras.utils.set_random_seed(int(seed))
        return loaded, Path(model).stem
    keras.backend.clear_session()
    keras.utils.set_random_seed(int(seed))
    return build_keras_model(model, include_top, input_size), model


def resolve_bn_stats(bn_stats, model: str) -> bool:
    """Whether to re-estimate BatchNorm moving statistics: ``bn_stats`` true/false, or null = auto.

    Auto re-estimates them only for a bundled model name (built with random weights, whose initial
    statistics make deep outputs ~0); a user's ``.keras`` file keeps its trained statistics.
    """
    from respect_jax.coral.keras_export import MODELS

    if bn_stats is None:
        return model in MODELS
    if isinstance(bn_stats, bool):
        return bn_stats
    raise ValueError(f"bn_stats must be true, false or null (auto), got {bn_stats!r}")


def read_schedule(path: str) -> dict:
    """Read and check a schedule file (``RESULT.json`` of respect-schedule), before any model work.

    Returns ``{"assignment": [int, ...], "stages": int | None, "info": {...}}``; ``stages`` is the
    file's ``hardware.stages`` if it has one. Raises ``ValueError`` (one line naming the file).
    """
    result = read_json(path, "schedule")
    if not isinstance(result, dict):
        raise ValueError(f"{path}: a schedule must be a JSON object with an assignment, got a {type(result).__name__}")
    assignment = result.get("assignment")
    if not isinstance(assignment, list) or not assignment:
        raise ValueError(f"{path}: assignment must be a non-empty list of stage numbers")
    bad = [v for v in assignment if not _is_int(v) or v < 0]
    if bad:
        raise ValueError(f"{path}: assignment entries must be stage numbers 0, 1, ...; got {bad[0]!r}")
    hardware = result.get("hardware", {})
    if not isinstance(hardware, dict):
        raise ValueError(f"{path}: hardware must be an object (with stages), got {hardware!r}")
    stages = hardware.get("stages")
    if stages is not None and (not _is_int(stages) or stages < 1):
        raise ValueError(f"{path}: hardware.stages must be a positive integer, got {stages!r}")
    if stages is not None and max(assignment) >= stages:
        raise ValueError(f"{path}: assignment uses stage {max(assignment)} but hardware.stages is {stages}")
    info = {k: result.get(k) for k in ("solver", "objective_name", "objective", "optimal", "gap")}
    info["file"] = str(path)
    return {"assignment": assignment, "stages": stages, "info": info}


def schedule_stages(schedule: dict, cli_stages: int | None) -> int:
    """K for a schedule file: its ``hardware.stages``, else ``hardware.stages=`` given on the command
    line, else ``max(assignment) + 1``; a command-line value that contradicts the file is refused."""
    path, stages, used = schedule["info"]["file"], schedule["stages"], max(schedule["assignment"]) + 1
    if cli_stages is not None and stages is not None and cli_stages != stages:
        raise ValueError(
            f"hardware.stages={cli_stages} conflicts with {path} (hardware.stages {stages}); drop one of them"
        )
    if stages is None and cli_stages is not None and cli_stages < used:
        raise ValueError(f"hardware.stages={cli_stages} but {path} assigns nodes to stage {used - 1}")
    return stages or cli_stages or used


def _check_variants(variants: list[str]) -> tuple[str, ...]:
    from respect_jax.coral.segment import VARIANTS

    if not variants or any(v not in VARIANTS for v in variants):
        raise ValueError(f"variants must be a non-empty list of {', '.join(VARIANTS)}, got {variants}")
    return tuple(variants)


def segment(config: SegmentConfig, solver: ScheduleSolver | None = None, cli_stages: int | None = None) -> dict:
    """Check every argument, build the model, get its schedule (file or solver), segment it.

    ``solver``: schedules the model when ``config.schedule`` is None. ``cli_stages``: ``hardware.stages``
    if given on the command line (checked against a schedule file). Returns the manifest.
    """
    from respect_jax.coral.paths import check_output_dir
    from respect_jax.coral.segment import check_compiler

    if Path(str(config.model)).suffix == ".tflite":
        return segment_tflite(config, solver, cli_stages)
    # everything that can be checked without TensorFlow, before it is imported
    variants = _check_variants([str(v) for v in as_list(config.variants)])
    check_compiler(config.compile)
    check_model_arg(str(config.model))
    bn_stats = resolve_bn_stats(config.bn_stats, str(config.model))
    check_output_dir(str(config.out_dir))
    schedule = read_schedule(str(config.schedule)) if config.schedule else None
    stages = schedule_stages(schedule, cli_stages) if schedule else None

    from respect_jax.coral.keras_export import graph_from_keras
    from respect_jax.coral.segment import representative_inputs, segment_keras_model, set_batchnorm_statistics

    model, name = load_keras_model(str(config.model), bool(config.include_top), config.input_size, config.seed)
    graph = graph_from_keras(model, name=name)
    assignment, solver_stages, info = _schedule_of(config, graph, schedule, solver)
    stages = stages or solver_stages
    lo, hi = (float(v) for v in config.input_range)
    if bn_stats:
        inputs = representative_inputs(model, int(config.samples), int(config.seed) + 7, (lo, hi))
        set_batchnorm_statistics(model, inputs)
    return segment_keras_model(
        model,
        assignment,
        config.out_dir,
        num_stages=stages,
        variants=variants,
        samples=int(config.samples),
        seed=int(config.seed),
        input_range=(lo, hi),
        compile_edgetpu_segments=config.compile,
        name=name,
        schedule_info=info,
    )


def _schedule_of(
    config: SegmentConfig, graph, schedule: dict | None, solver: ScheduleSolver | None
) -> tuple[list[int], int | None, dict]:
    """(assignment, K or None, provenance): the schedule file's, or ``solver`` run on ``graph``."""
    if schedule:
        assignment = schedule["assignment"]
        if len(assignment) != graph.num_nodes:
            raise ValueError(
                f"{config.schedule}: assignment must list a stage for each of the {graph.num_nodes} nodes of "
                f"{graph.name}, it has {len(assignment)}"
            )
        return assignment, None, schedule["info"]
    if solver is None:
        raise ValueError("no schedule: give a schedule file or a solver")
    from respect_jax.solvers import run_solver

    hw = solver.hardware
    result = run_solver(solver.name, graph, hw, config.objective, float(config.lam), **solver.options)
    info = {k: result[k] for k in ("solver", "objective_name", "objective", "optimal", "gap", "metrics")}
    return result["assignment"], hw.stages, info


def segment_tflite(config: SegmentConfig, solver: ScheduleSolver | None = None, cli_stages: int | None = None) -> dict:
    """``model=<file>.tflite``: cut the file itself by the schedule (:mod:`respect_jax.coral.tflite_segment`).

    The schedule's nodes are those of ``respect-export model=<file>.tflite`` (inputs, then operators).
    ``variants``, ``samples``, ``input_range`` and ``bn_stats`` do not apply: the file is already
    converted (its variant is named after its tensors: int8 or float32). Needs LiteRT only.
    """
    from respect_jax.coral.paths import check_output_dir
    from respect_jax.coral.segment import check_compiler

    check_compiler(config.compile)
    check_model_arg(str(config.model), tflite=True)
    check_output_dir(str(config.out_dir))
    schedule = read_schedule(str(config.schedule)) if config.schedule else None
    stages = schedule_stages(schedule, cli_stages) if schedule else None

    from respect_jax.coral.tflite_import import import_tflite
    from respect_jax.coral.tflite_segment import segment_tflite_model

    path = Path(str(config.model))
    graph = import_tflite(path, name=path.stem)
    assignment, solver_stages, info = _schedule_of(config, graph, schedule, solver)
    return segment_tflite_model(
        path,
        assignment,
        config.out_dir,
        num_stages=stages or solver_stages,
        graph=graph,
        name=path.stem,
        schedule_info=info,
        compile_edgetpu_segments=config.compile,
    )


def manifest_lines(manifest: dict, out_dir: str) -> list[str]:
    """What a segmentation prints: a line per stage, the compiler's status, where the manifest went."""
    lines = [
        f"stage {st['index']}: {st['num_nodes']} nodes, params={st['params']:,} macs={st['macs']:,} "
        f"in={st['inputs']} out={st['outputs']}"
        for st in manifest["stages"]
    ]
    lines.append(f"edgetpu_compiler: {manifest['edgetpu_compiler']['status']}")
    lines.append(f"manifest -> {Path(out_dir) / 'manifest.json'}")
    return lines


# ----------------------------------------------------------------------------- pipeline


RUN_INT_MINIMUM = {
    "num_inputs": 1,
    "warmup": 0,
    "queue_size": 1,
    "num_threads": 1,
    "profile_inputs": 1,
    "profile_repeats": 1,
}


def check_run_options(options: PipelineOptions) -> None:
    """``ValueError`` unless every pipeline count is an integer at least its minimum."""
    for key, least in RUN_INT_MINIMUM.items():
        value = getattr(options, key)
        if not _is_int(value) or value < least:
            raise ValueError(f"{key} must be an integer >= {least}, got {value!r}")


def pipeline_report(manifest_path: str, variant: str, options: PipelineOptions | None = None) -> dict:
    """Run a manifest, optionally against the unsegmented model and stage by stage alone (``options``)."""
    from respect_jax.coral.runner import (
        check_equality,
        load_manifest,
        probe_pre_activations,
        profile_stages,
        random_inputs,
        run_manifest,
        run_single,
    )

    o = options or PipelineOptions()
    check_run_options(o)
    manifest, root = load_manifest(manifest_path)
    if variant not in manifest["variants"]:
        raise ValueError(f"variant {variant!r} was not built; the manifest has {', '.join(manifest['variants'])}")
    xs = random_inputs(manifest, int(o.num_inputs), int(o.seed))
    piped = run_manifest(manifest_path, xs, variant, o.backend, int(o.queue_size), int(o.num_threads), int(o.warmup))
    report = {
        "manifest": str(Path(manifest_path)),
        "model": manifest["model"],
        "num_stages": manifest["num_stages"],
        "variant": variant,
        "pipeline": piped.report,
        "stage_features": [
            {"stage": st["index"], "params": st["params"], "macs": st["macs"], "in_elements": st["in_elements"]}
            for st in manifest["stages"]
        ],
        "schedule": manifest.get("schedule", {}),
    }
    if o.compare:
        files = manifest["full"]["files"]
        single = run_single(root / files[variant], manifest, xs, variant, int(o.num_threads), int(o.warmup))
        reference = None
        if variant != "float32" and "float32" in manifest["variants"]:
            reference = run_single(root / files["float32"], manifest, xs, "float32").outputs
        out_io = manifest["full"]["io"][variant]["outputs"]
        step = max((d["scale"] for d in out_io.values()), default=0.0)
        report["unsegmented"] = single.report
        probes = probe_pre_activations(manifest, root, xs, variant)
        report["equality"] = check_equality(
            variant,
            piped.outputs,
            single.outputs,
            reference,
            step,
            manifest["num_nodes"],
            manifest["num_stages"],
            exact=(manifest.get("source") or {}).get("kind") == "tflite",
            probes=probes,
        )
        report["speedup_vs_unsegmented"] = piped.report["throughput_per_s"] / single.report["throughput_per_s"]
    if o.profile and piped.report["backend"] == "litert":
        inputs = xs[: int(o.profile_inputs)]
        report["profile"] = profile_stages(manifest, root, inputs, variant, int(o.num_threads), int(o.profile_repeats))
    return report


def verdict(ok: bool | None) -> str:
    """The word printed for an equality result (None: inconclusive, see runner.check_equality)."""
    return "INCONCLUSIVE" if ok is None else ("OK" if ok else "FAILED")


def equality_failed(report: dict) -> bool:
    """Whether the report's equality check ran and failed (``ok`` is False, not None)."""
    return report.get("equality", {}).get("ok") is False


def report_lines(report: dict) -> list[str]:
    """What a pipeline run prints: throughput and latency, the comparison with the unsegmented model and its
    verdict, the stage times (in the pipeline and alone), the backend."""
    p = report["pipeline"]
    line = (
        f"{report['model']} K={report['num_stages']} {report['variant']} [{p['backend']}]: "
        f"throughput {p['throughput_per_s']:.1f}/s, end-to-end median {1e3 * p['end_to_end']['median_s']:.2f} ms"
    )
    if "unsegmented" in report:
        u = report["unsegmented"]
        e = report["equality"]
        line += (
            f"; unsegmented {u['throughput_per_s']:.1f}/s ({1e3 * u['end_to_end']['median_s']:.2f} ms); "
            f"vs unsegmented max |diff| {e['vs_unsegmented']['max_abs_diff']:.3g} "
            f"(outputs up to {e['vs_unsegmented']['max_abs_reference']:.3g})"
        )
        if "pipeline_vs_float" in e:
            line += (
                f"; vs float32: pipeline MAE {e['pipeline_vs_float']['mean_abs_diff']:.4g} "
                f"rel RMS {e['pipeline_vs_float']['rel_rms']:.3g}, unsegmented int8 MAE "
                f"{e['unsegmented_vs_float']['mean_abs_diff']:.4g} rel RMS {e['unsegmented_vs_float']['rel_rms']:.3g}"
            )
        for probe in e.get("pre_activation", []):
            diff = probe["vs_unsegmented"]
            line += (
                f"; before the activation of {probe['output']}: max |diff| {diff['max_abs_diff']:.3g} "
                f"(values up to {diff['max_abs_reference']:.3g})"
            )
        line += f"; equality {verdict(e['ok'])} ({e['criterion']})"
        if e.get("note"):
            line += f"; {e['note']}"
    lines = [line]
    if p.get("stages"):
        lines.append("stage service median ms: " + ", ".join(f"{1e3 * s['median_s']:.2f}" for s in p["stages"]))
    if report.get("profile"):
        lines.append("stage alone median ms:   " + ", ".join(f"{1e3 * s['median_s']:.2f}" for s in report["profile"]))
    lines.append(f"backend: {p['backend']}: {p.get('backend_note', '')}")
    return lines
