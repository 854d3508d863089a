"""Coral entry points (need the ``coral`` extra): ``respect-segment`` (a model + a schedule -> per-stage
``.tflite`` files and ``manifest.json``), ``respect-pipeline`` (run a segment folder as a pipeline, compare it
with the unsegmented model, time each stage alone), ``respect-calibrate`` (fit the hardware parameters to
pipeline reports' stage profiles) and ``respect-deploy`` (schedule + segment + run in one); each ``--help``
shows its options and examples.

This file only parses, calls the library and prints: the configs are registered by
:mod:`respect_jax.cli.coral_conf` from the option dataclasses of :mod:`respect_jax.coral.options`; the work is
done by :mod:`respect_jax.coral.deploy` and :mod:`respect_jax.coral.calibrate`. Errors (bad arguments, missing
packages, unwritable outputs) print one line and exit 2, checked before TensorFlow is imported; a failed run
writes nothing. A pipeline whose equality check FAILS exits 1 after its report is written.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

import respect_jax.cli.coral_conf  # noqa: F401  (registers the configs)
from respect_jax.cli.common import CONF_DIR, hardware_from_cfg, run_command, user_errors_exit
from respect_jax.coral._deps import CoralDependencyError
from respect_jax.coral.options import CalibrateConfig, PipelineOptions, SegmentConfig, as_list, config_from


def os_error_line(err: OSError) -> str:
    """One line for a failed file operation: ``<file>: <reason>``."""
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{err.strerror or err}".splitlines()[0]


def _coral_errors(prog: str) -> Callable:
    """Missing optional packages or a failed file operation -> one line on stderr, exit 2."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except CoralDependencyError as err:
                print(f"{prog}: error: {err}", file=sys.stderr)
                sys.exit(2)
            except OSError as err:  # e.g. an output folder that vanished or filled up during the run
                print(f"{prog}: error: {os_error_line(err)}", file=sys.stderr)
                sys.exit(2)

        return inner

    return wrap


def _values(cfg: DictConfig) -> dict:
    """The composed config as plain values (a missing required value raises, naming it)."""
    return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)


def _print(lines: list[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def stages_override(overrides) -> int | None:
    """The value of a ``hardware.stages=K`` command-line override (None if there is none)."""
    for item in overrides:
        key, _, value = str(item).lstrip("+~").partition("=")
        if key == "hardware.stages":
            try:
                return int(value)
            except ValueError:
                raise ValueError(f"hardware.stages must be an integer, got {value!r}") from None
    return None


def _cli_overrides() -> list[str]:
    """The command-line overrides of the running Hydra job (empty outside Hydra)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def _segment(cfg: DictConfig, values: dict) -> dict:
    """Segment as ``cfg`` says (the solver and hardware groups schedule the model without a schedule file);
    prints the stages; returns the manifest."""
    from respect_jax.coral.deploy import ScheduleSolver, manifest_lines, segment

    config = config_from(SegmentConfig, values)
    solver = None
    if not config.schedule:
        options = values["solver"].get("options") or {}
        solver = ScheduleSolver(values["solver"]["name"], hardware_from_cfg(cfg.hardware), options)
    manifest = segment(config, solver, stages_override(_cli_overrides()))
    _print(manifest_lines(manifest, config.out_dir))
    return manifest


@hydra.main(config_path=CONF_DIR, config_name="respect_segment", version_base="1.3")
@user_errors_exit("respect-segment")
@_coral_errors("respect-segment")
def _segment_main(cfg: DictConfig) -> None:
    _segment(cfg, _values(cfg))


def segment_main() -> None:
    """Console script ``respect-segment``."""
    run_command("respect-segment", ("hardware", "solver"), "respect_segment", _segment_main)


def _run_pipeline(manifest: str, variant: str, options: PipelineOptions, out: str | None) -> dict:
    """Run one pipeline, print its lines, write its report to ``out`` (None: print it on stdout)."""
    from respect_jax.coral.deploy import pipeline_report, report_lines
    from respect_jax.graphs.graph import write_json_atomic

    report = pipeline_report(manifest, variant, options)
    _print(report_lines(report))
    if out:
        write_json_atomic(report, out)
        print(f"report -> {out}", file=sys.stderr)
    else:
        print(json.dumps(report, indent=1))
    return report


def _exit_if_unequal(prog: str, reports: list[dict]) -> None:
    """Exit 1 (after everything was written) if an equality check failed: a broken pipeline must
    not look successful. An inconclusive check (``ok`` None) does not fail."""
    from respect_jax.coral.deploy import equality_failed

    failed = [r["variant"] for r in reports if equality_failed(r)]
    if failed:
        print(
            f"{prog}: error: equality FAILED for {', '.join(failed)}: the pipeline does not compute the "
            "unsegmented model's outputs (see the report)",
            file=sys.stderr,
        )
        sys.exit(1)


@hydra.main(config_path=CONF_DIR, config_name="respect_pipeline", version_base="1.3")
@user_errors_exit("respect-pipeline")
@_coral_errors("respect-pipeline")
def _pipeline_main(cfg: DictConfig) -> None:
    from respect_jax.coral.paths import check_output_file

    values = _values(cfg)
    if values["out"]:
        check_output_file(str(values["out"]), "out")
    options = config_from(PipelineOptions, values)
    report = _run_pipeline(str(values["manifest"]), str(values["variant"]), options, values["out"])
    _exit_if_unequal("respect-pipeline", [report])


def pipeline_main() -> None:
    """Console script ``respect-pipeline``."""
    run_command("respect-pipeline", (), "respect_pipeline", _pipeline_main)


@hydra.main(config_path=CONF_DIR, config_name="respect_calibrate", version_base="1.3")
@user_errors_exit("respect-calibrate")
@_coral_errors("respect-calibrate")
def _calibrate_main(cfg: DictConfig) -> None:
    from respect_jax.coral.calibrate import calibrate, calibration_lines, check_calibration_out, write_calibration

    config = config_from(CalibrateConfig, _values(cfg))
    out = check_calibration_out(config.out)
    result = calibrate(config, hardware_from_cfg(cfg.hardware) if config.base == "hardware" else None)
    _print(calibration_lines(result))
    if out is None:
        print(json.dumps(result, indent=1))
        return
    write_calibration(result, out, int(cfg.hardware.stages), [str(p) for p in as_list(config.reports)])
    print(f"calibration -> {out}", file=sys.stderr)


def calibrate_main() -> None:
    """Console script ``respect-calibrate``."""
    run_command("respect-calibrate", ("hardware",), "respect_calibrate", _calibrate_main)


@hydra.main(config_path=CONF_DIR, config_name="respect_deploy", version_base="1.3")
@user_errors_exit("respect-deploy")
@_coral_errors("respect-deploy")
def _deploy_main(cfg: DictConfig) -> None:
    from respect_jax.coral.deploy import check_run_options

    values = _values(cfg)
    options = config_from(PipelineOptions, values, seed=values["run_seed"])
    check_run_options(options)  # before the (long) segmentation
    manifest = _segment(cfg, values)
    reports = []
    for variant in manifest["variants"]:
        out = Path(values["out_dir"]) / f"report_{variant}.json"
        reports.append(_run_pipeline(str(values["out_dir"]), variant, options, out))
    _exit_if_unequal("respect-deploy", reports)


def deploy_main() -> None:
    """Console script ``respect-deploy``."""
    run_command("respect-deploy", ("hardware", "solver"), "respect_deploy", _deploy_main)
