"""Coral entry points (need the ``coral`` extra): segment, run a pipeline, calibrate, deploy.

``respect-segment``: Keras model + schedule -> per-stage ``.tflite`` files + ``manifest.json``; or an
existing (int8) ``.tflite`` cut into ``<model>_segment_<k>_of_<K>.tflite`` files (Edge TPU compiler
naming; :mod:`respect_jax.coral.tflite_segment`)::

    respect-segment model=mobilenetv2 solver=compiler hardware.stages=4 out_dir=segments/mnv2_k4
    respect-segment model=resnet50 schedule=result.json out_dir=segments/r50   # RESULT.json of respect-schedule
    respect-segment model=model_int8.tflite schedule=result.json out_dir=segments/mine  # graph: respect-export

``respect-pipeline``: run a manifest as a pipeline (pycoral on Edge TPUs if present, else LiteRT with
the ``libedgetpu.so.1`` delegate if present, else LiteRT CPU threads; the choice is printed), compare
with the unsegmented model, time each stage alone (``profile``)::

    respect-pipeline manifest=segments/mnv2_k4 variant=int8 num_inputs=50 out=segments/mnv2_k4/report_int8.json

``respect-calibrate``: fit ``macs_per_s``/``host_bw``/``link_bw``/``stage_overhead_s`` to the
stage profiles of one or more pipeline reports; writes a hardware YAML (``conf/hardware`` format)::

    respect-calibrate reports=[a/report_float32.json,b/report_float32.json] base=cpu out=litert_cpu.yaml

``respect-deploy``: schedule + segment + run in one::

    respect-deploy model=mobilenetv2 solver=compiler hardware.stages=4 out_dir=deploy/mnv2

Every config is registered in Python (Hydra ConfigStore) and composes the ``hardware`` and
``solver`` groups of ``conf/``. Errors (bad arguments, missing packages, unwritable outputs) print
one line and exit 2; arguments and output locations are checked before TensorFlow is imported, and
a failed run writes nothing (a segment folder is built aside and renamed into place). A pipeline
whose equality check FAILS exits 1 after its report is written (INCONCLUSIVE does not fail).
``bn_stats=null`` (default) re-estimates BatchNorm statistics for bundled random-weight models only.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path

import hydra
import numpy as np
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, ListConfig, OmegaConf

from respect_jax.cli.common import CONF_DIR, check_group_choices, hardware_from_cfg, user_errors_exit
from respect_jax.coral._deps import CoralDependencyError
from respect_jax.graphs.graph import write_json_atomic

_QUIET = [
    {"override hydra/job_logging": "none"},
    {"override hydra/hydra_logging": "none"},
    {"override hydra/help": "respect"},  # --help: the layout of conf/hydra/help/respect.yaml
]
_HYDRA = {"run": {"dir": "."}, "output_subdir": None}


def _hydra(app_name: str, header: str) -> dict:
    """The ``hydra`` node of a command: output in place, and its ``--help`` text (usage line and footer:
    conf/hydra/help/respect.yaml; ``${...}`` show the current values)."""
    return {**_HYDRA, "help": {"app_name": app_name, "header": header}}


_SEGMENT = {
    "model": "???",  # bundled name (respect_jax.coral.keras_export.MODELS) or a .keras file
    "include_top": False,
    "input_size": None,
    "schedule": None,  # RESULT.json of respect-schedule; null = run solver= with hardware=
    "objective": "paper",
    "lam": 1.0,
    "out_dir": "???",
    "variants": ["float32", "int8"],
    "samples": 16,  # representative inputs (int8 calibration), generated, seeded
    "seed": 0,
    "input_range": [-1.0, 1.0],
    # BatchNorm moving statistics from the generated data: null = only for bundled (random-weight)
    # models, never for a .keras file (its trained statistics are kept); true/false = always/never
    "bn_stats": None,
    "compile": None,  # null: edgetpu_compiler if on PATH; false: never; true: required
}
_PIPELINE = {
    "manifest": "???",
    "variant": "float32",
    "num_inputs": 50,
    "warmup": 2,
    "backend": "auto",  # auto | pycoral | edgetpu (LiteRT + libedgetpu delegate) | litert (CPU)
    "queue_size": 2,
    "num_threads": 1,
    "compare": True,  # also run the unsegmented model and compare outputs
    "profile": True,  # time each stage alone (calibration data)
    "profile_inputs": 5,
    "profile_repeats": 3,
    "seed": 1,
    "out": None,
}
_CALIBRATE = {
    "reports": "???",  # list of respect-pipeline report JSON files with a stage profile
    "base": "cpu",  # cpu (LiteRT, nothing spills) | hardware (the composed hardware group)
    "fit": ["stage_overhead_s", "macs_per_s", "host_bw", "link_bw"],
    "weighting": "absolute",  # absolute | relative squared errors
    "out": None,  # .yaml (conf/hardware format) or .json
}

# --help of each command (hydra.help.header; the usage line and the footer: conf/hydra/help/respect.yaml).
# No dollar sign but the ${...} interpolations of current values: Hydra substitutes $NAME into the help.
_HARDWARE = "coral_pcie, coral_usb, litert_cpu [${hydra.runtime.choices.hardware}]   (hardware.stages=4, ...)"
_SOLVER = (
    "auto, compiler, contiguous, cpsat, greedy, gumbel, milp, order_policy, policy, profiling,\n"
    "                      respect_label, respect_pointer, single_stage [${hydra.runtime.choices.solver}]\n"
    "                      (solver.options.time_limit_s=120, ...)"
)
_GROUPS = "Config groups (group=choice, current in brackets; a group's fields: group.key=value):"

_SEGMENT_HELP = f"""\
Keras model + schedule -> per-stage .tflite files + manifest.json in out_dir (needs the coral extra). The
schedule is a RESULT.json of respect-schedule, or solver= is run on hardware= first. A .tflite model (e.g.
int8) is cut as it is into <model>_segment_<k>_of_<K>.tflite (schedule of respect-export's graph of it).

Main options (key=value; current values in brackets):
  model               (required) a bundled name (respect_jax.coral.keras_export.MODELS), a .keras/.h5 or .tflite file
  out_dir             (required) the segment folder, built aside and renamed into place
  schedule            RESULT.json of respect-schedule (default: run solver= with hardware=)
  objective           paper | latency [${{objective}}]
  variants            a list of float32 | int8; default: [float32,int8]
  samples             representative inputs (int8 calibration), generated, seeded [${{samples}}]
  compile             edgetpu_compiler: true required, false never (default: used if on PATH)

{_GROUPS}
  hardware            {_HARDWARE}
  solver              {_SOLVER}

Examples:
  respect-segment model=mobilenetv2 solver=compiler hardware.stages=4 out_dir=segments/mnv2_k4
  respect-segment model=resnet50 schedule=result.json out_dir=segments/r50   # RESULT.json of respect-schedule
  respect-segment model=model_int8.tflite schedule=result.json out_dir=segments/mine"""

_PIPELINE_HELP = """\
Run a segment folder as a pipeline (pycoral on Edge TPUs if present, else LiteRT with the libedgetpu.so.1
delegate if present, else LiteRT CPU threads; the choice is printed), compare it with the unsegmented model
(outputs and the tensor before an output activation; a constant reference output is INCONCLUSIVE), time each
stage alone. Exits 1 after writing the report if the outputs differ.

Main options (key=value; current values in brackets):
  manifest            (required) a segment folder written by respect-segment
  variant             float32 | int8 [${variant}]
  num_inputs          inputs run through the pipeline [${num_inputs}]
  backend             auto | pycoral | edgetpu | litert [${backend}]
  compare             false: do not run the unsegmented model for the comparison
  profile             false: do not time each stage alone (the data of respect-calibrate)
  out                 report JSON path (default: print the report to stdout)

Config groups: none.

Examples:
  respect-pipeline manifest=segments/mnv2_k4 variant=int8 num_inputs=50 out=segments/mnv2_k4/report_int8.json
  respect-pipeline manifest=segments/mnv2_k4 backend=litert compare=false"""

_CALIBRATE_HELP = f"""\
Fit macs_per_s, host_bw, link_bw and stage_overhead_s to the stage profiles of respect-pipeline reports;
writes a hardware YAML (conf/hardware format, with a .json twin) or a JSON.

Main options (key=value; current values in brackets):
  reports             (required) a list of respect-pipeline report JSON files with a stage profile
  base                cpu (LiteRT, nothing spills) | hardware (the hardware group below) [${{base}}]
  fit                 the fitted parameters, a list; default: all four
  weighting           absolute | relative squared errors [${{weighting}}]
  out                 .yaml or .json path (default: print the fit to stdout)

{_GROUPS}
  hardware            {_HARDWARE}

Examples:
  respect-calibrate reports=[a/report_float32.json,b/report_float32.json] base=cpu out=litert_cpu.yaml
  respect-calibrate reports=[segments/mnv2_k4/report_float32.json] base=hardware hardware=coral_usb"""

_DEPLOY_HELP = f"""\
Schedule + segment + run in one: respect-segment into out_dir, then respect-pipeline on every variant
(out_dir/report_<variant>.json). Exits 1 after writing the reports if a pipeline's outputs differ.

Main options (key=value; current values in brackets):
  model               (required) a bundled name (respect_jax.coral.keras_export.MODELS) or a .keras/.h5 file
  out_dir             (required) the segment folder and its reports
  schedule            RESULT.json of respect-schedule (default: run solver= with hardware=)
  variants            a list of float32 | int8; default: [float32,int8]
  num_inputs          inputs run through each pipeline [${{num_inputs}}]
  backend             auto | pycoral | edgetpu | litert [${{backend}}]

{_GROUPS}
  hardware            {_HARDWARE}
  solver              {_SOLVER}

Examples:
  respect-deploy model=mobilenetv2 solver=compiler hardware.stages=4 out_dir=deploy/mnv2
  respect-deploy model=resnet50 solver=cpsat hardware=coral_pcie out_dir=deploy/r50 variants=[int8]"""

_store = ConfigStore.instance()
_store.store(
    name="respect_segment",
    node={
        "defaults": [{"hardware": "coral_usb"}, {"solver": "compiler"}, "_self_", *_QUIET],
        **_SEGMENT,
        "hydra": _hydra("respect-segment", _SEGMENT_HELP),
    },
)
_store.store(
    name="respect_pipeline",
    node={"defaults": ["_self_", *_QUIET], **_PIPELINE, "hydra": _hydra("respect-pipeline", _PIPELINE_HELP)},
)
_store.store(
    name="respect_calibrate",
    node={
        "defaults": [{"hardware": "coral_usb"}, "_self_", *_QUIET],
        **_CALIBRATE,
        "hydra": _hydra("respect-calibrate", _CALIBRATE_HELP),
    },
)
_store.store(
    name="respect_deploy",
    node={
        "defaults": [{"hardware": "coral_usb"}, {"solver": "compiler"}, "_self_", *_QUIET],
        **_SEGMENT,
        **{k: v for k, v in _PIPELINE.items() if k not in ("manifest", "variant", "out", "seed")},
        "run_seed": 1,
        "hydra": _hydra("respect-deploy", _DEPLOY_HELP),
    },
)


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


def _as_list(value) -> list:
    return list(value) if isinstance(value, list | tuple | ListConfig) else [value]


# ----------------------------------------------------------------------------- segment


def check_model_arg(model: str, tflite: bool = False) -> None:
    """A bundled name or an existing ``.keras``/``.h5`` file (``tflite``: or a ``.tflite`` file), else
    ``ValueError`` (no TensorFlow needed)."""
    from respect_jax.cli.export import check_model_file
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


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _read_json(path: str, what: str):
    """The JSON document in ``path``; ``ValueError`` naming the file if it cannot be read or parsed."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as err:
        raise ValueError(f"{path}: cannot read {what} ({err.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not valid JSON ({getattr(err, 'msg', err.reason)})") from None


def read_schedule(path: str) -> dict:
    """Read and check a schedule file (``RESULT.json`` of respect-schedule), before any model work.

    Returns ``{"assignment": [int, ...], "stages": int | None, "info": {...}}``; ``stages`` is the
    file's ``hardware.stages`` if it has one. Raises ``ValueError`` (one line naming the file).
    """
    result = _read_json(path, "schedule")
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


def segment(cfg: DictConfig, cli_stages: int | None = None) -> dict:
    """Check every argument, build the model, get its schedule (file or solver), segment it.

    ``cli_stages``: ``hardware.stages`` if given on the command line (checked against a schedule
    file). Returns the manifest.
    """
    from respect_jax.coral.paths import check_output_dir
    from respect_jax.coral.segment import check_compiler

    if Path(str(cfg.model)).suffix == ".tflite":
        return segment_tflite(cfg, cli_stages)
    # everything that can be checked without TensorFlow, before it is imported
    variants = _check_variants([str(v) for v in _as_list(cfg.variants)])
    check_compiler(cfg.compile)
    check_model_arg(str(cfg.model))
    bn_stats = resolve_bn_stats(cfg.bn_stats, str(cfg.model))
    check_output_dir(str(cfg.out_dir))
    schedule = read_schedule(str(cfg.schedule)) if cfg.schedule else None
    stages = schedule_stages(schedule, cli_stages) if schedule else None

    from respect_jax.coral.keras_export import graph_from_keras
    from respect_jax.coral.segment import representative_inputs, segment_keras_model, set_batchnorm_statistics

    model, name = load_keras_model(str(cfg.model), bool(cfg.include_top), cfg.input_size, cfg.seed)
    graph = graph_from_keras(model, name=name)
    assignment, solver_stages, info = _schedule_of(cfg, graph, schedule)
    stages = stages or solver_stages
    lo, hi = (float(v) for v in cfg.input_range)
    if bn_stats:
        set_batchnorm_statistics(model, representative_inputs(model, int(cfg.samples), int(cfg.seed) + 7, (lo, hi)))
    return segment_keras_model(
        model,
        assignment,
        cfg.out_dir,
        num_stages=stages,
        variants=variants,
        samples=int(cfg.samples),
        seed=int(cfg.seed),
        input_range=(lo, hi),
        compile_edgetpu_segments=cfg.compile,
        name=name,
        schedule_info=info,
    )


def _schedule_of(cfg: DictConfig, graph, schedule: dict | None) -> tuple[list[int], int | None, dict]:
    """(assignment, K or None, provenance): the schedule file's, or ``solver=`` run on ``graph``."""
    if schedule:
        assignment = schedule["assignment"]
        if len(assignment) != graph.num_nodes:
            raise ValueError(
                f"{cfg.schedule}: assignment must list a stage for each of the {graph.num_nodes} nodes of "
                f"{graph.name}, it has {len(assignment)}"
            )
        return assignment, None, schedule["info"]
    from respect_jax.solvers import run_solver

    hw = hardware_from_cfg(cfg.hardware)
    options = OmegaConf.to_container(cfg.solver.options, resolve=True) if cfg.solver.get("options") else {}
    result = run_solver(cfg.solver.name, graph, hw, cfg.objective, float(cfg.lam), **options)
    info = {k: result[k] for k in ("solver", "objective_name", "objective", "optimal", "gap", "metrics")}
    return result["assignment"], hw.stages, info


def segment_tflite(cfg: DictConfig, cli_stages: int | None = None) -> dict:
    """``model=<file>.tflite``: cut the file itself by the schedule (:mod:`respect_jax.coral.tflite_segment`).

    The schedule's nodes are those of ``respect-export model=<file>.tflite`` (inputs, then operators).
    ``variants``, ``samples``, ``input_range`` and ``bn_stats`` do not apply: the file is already
    converted (its variant is named after its tensors: int8 or float32). Needs LiteRT only.
    """
    from respect_jax.coral.paths import check_output_dir
    from respect_jax.coral.segment import check_compiler

    check_compiler(cfg.compile)
    check_model_arg(str(cfg.model), tflite=True)
    check_output_dir(str(cfg.out_dir))
    schedule = read_schedule(str(cfg.schedule)) if cfg.schedule else None
    stages = schedule_stages(schedule, cli_stages) if schedule else None

    from respect_jax.coral.tflite_import import import_tflite
    from respect_jax.coral.tflite_segment import segment_tflite_model

    path = Path(str(cfg.model))
    graph = import_tflite(path, name=path.stem)
    assignment, solver_stages, info = _schedule_of(cfg, graph, schedule)
    return segment_tflite_model(
        path,
        assignment,
        cfg.out_dir,
        num_stages=stages or solver_stages,
        graph=graph,
        name=path.stem,
        schedule_info=info,
        compile_edgetpu_segments=cfg.compile,
    )


def _cli_overrides() -> list[str]:
    """The command-line overrides of the running Hydra job (empty outside Hydra)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def _print_manifest(manifest: dict, out_dir: str) -> None:
    for st in manifest["stages"]:
        print(
            f"stage {st['index']}: {st['num_nodes']} nodes, params={st['params']:,} macs={st['macs']:,} "
            f"in={st['inputs']} out={st['outputs']}",
            file=sys.stderr,
        )
    print(f"edgetpu_compiler: {manifest['edgetpu_compiler']['status']}", file=sys.stderr)
    print(f"manifest -> {Path(out_dir) / 'manifest.json'}", file=sys.stderr)


@hydra.main(config_path=CONF_DIR, config_name="respect_segment", version_base="1.3")
@user_errors_exit("respect-segment")
@_coral_errors("respect-segment")
def _segment_main(cfg: DictConfig) -> None:
    _print_manifest(segment(cfg, stages_override(_cli_overrides())), cfg.out_dir)


def segment_main() -> None:
    """Console script ``respect-segment``."""
    check_group_choices("respect-segment", ("hardware", "solver"), config="respect_segment")
    _segment_main()


# ----------------------------------------------------------------------------- pipeline


_RUN_INT_MINIMUM = {
    "num_inputs": 1,
    "warmup": 0,
    "queue_size": 1,
    "num_threads": 1,
    "profile_inputs": 1,
    "profile_repeats": 1,
}


def check_run_ints(values: dict) -> None:
    """``ValueError`` unless every pipeline count is an integer at least its minimum."""
    for key, value in values.items():
        least = _RUN_INT_MINIMUM[key]
        if not _is_int(value) or value < least:
            raise ValueError(f"{key} must be an integer >= {least}, got {value!r}")


def pipeline_report(
    manifest_path: str,
    variant: str,
    num_inputs: int,
    warmup: int = 2,
    backend: str = "auto",
    queue_size: int = 2,
    num_threads: int = 1,
    compare: bool = True,
    profile: bool = True,
    profile_inputs: int = 5,
    profile_repeats: int = 3,
    seed: int = 1,
) -> dict:
    """Run a manifest, optionally against the unsegmented model and stage by stage alone."""
    from respect_jax.coral.runner import (
        check_equality,
        load_manifest,
        probe_pre_activations,
        profile_stages,
        random_inputs,
        run_manifest,
        run_single,
    )

    check_run_ints(
        {
            "num_inputs": num_inputs,
            "warmup": warmup,
            "queue_size": queue_size,
            "num_threads": num_threads,
            "profile_inputs": profile_inputs,
            "profile_repeats": profile_repeats,
        }
    )
    manifest, root = load_manifest(manifest_path)
    if variant not in manifest["variants"]:
        raise ValueError(f"variant {variant!r} was not built; the manifest has {', '.join(manifest['variants'])}")
    xs = random_inputs(manifest, int(num_inputs), int(seed))
    piped = run_manifest(manifest_path, xs, variant, backend, int(queue_size), int(num_threads), int(warmup))
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
    if compare:
        single = run_single(
            root / manifest["full"]["files"][variant], manifest, xs, variant, int(num_threads), int(warmup)
        )
        reference = None
        if variant != "float32" and "float32" in manifest["variants"]:
            reference = run_single(root / manifest["full"]["files"]["float32"], manifest, xs, "float32").outputs
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
    if profile and piped.report["backend"] == "litert":
        prof = profile_stages(
            manifest, root, xs[: int(profile_inputs)], variant, int(num_threads), int(profile_repeats)
        )
        report["profile"] = prof
    return report


def verdict(ok: bool | None) -> str:
    """The word printed for an equality result (None: inconclusive, see runner.check_equality)."""
    return "INCONCLUSIVE" if ok is None else ("OK" if ok else "FAILED")


def equality_failed(report: dict) -> bool:
    """Whether the report's equality check ran and failed (``ok`` is False, not None)."""
    return report.get("equality", {}).get("ok") is False


def _print_report(report: dict) -> None:
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
    print(line, file=sys.stderr)
    if p.get("stages"):
        print(
            "stage service median ms: " + ", ".join(f"{1e3 * s['median_s']:.2f}" for s in p["stages"]), file=sys.stderr
        )
    if report.get("profile"):
        print(
            "stage alone median ms:   " + ", ".join(f"{1e3 * s['median_s']:.2f}" for s in report["profile"]),
            file=sys.stderr,
        )
    print(f"backend: {p['backend']}: {p.get('backend_note', '')}", file=sys.stderr)


def _pipeline_from_cfg(cfg: DictConfig, manifest: str, variant: str, seed: int) -> dict:
    return pipeline_report(
        manifest,
        variant,
        cfg.num_inputs,
        cfg.warmup,
        cfg.backend,
        cfg.queue_size,
        cfg.num_threads,
        bool(cfg.compare),
        bool(cfg.profile),
        cfg.profile_inputs,
        cfg.profile_repeats,
        seed,
    )


@hydra.main(config_path=CONF_DIR, config_name="respect_pipeline", version_base="1.3")
@user_errors_exit("respect-pipeline")
@_coral_errors("respect-pipeline")
def _pipeline_main(cfg: DictConfig) -> None:
    from respect_jax.coral.paths import check_output_file

    if cfg.out:
        check_output_file(str(cfg.out), "out")
    report = _pipeline_from_cfg(cfg, str(cfg.manifest), str(cfg.variant), int(cfg.seed))
    _print_report(report)
    if cfg.out:
        write_json_atomic(report, cfg.out)
        print(f"report -> {cfg.out}", file=sys.stderr)
    else:
        print(json.dumps(report, indent=1))
    _exit_if_unequal("respect-pipeline", [report])


def _exit_if_unequal(prog: str, reports: list[dict]) -> None:
    """Exit 1 (after everything was written) if an equality check failed: a broken pipeline must
    not look successful. An inconclusive check (``ok`` None) does not fail."""
    failed = [r["variant"] for r in reports if equality_failed(r)]
    if failed:
        print(
            f"{prog}: error: equality FAILED for {', '.join(failed)}: the pipeline does not compute the "
            "unsegmented model's outputs (see the report)",
            file=sys.stderr,
        )
        sys.exit(1)


def pipeline_main() -> None:
    """Console script ``respect-pipeline``."""
    check_group_choices("respect-pipeline", (), config="respect_pipeline")
    _pipeline_main()


# ----------------------------------------------------------------------------- calibrate


_REPORT_KEYS = ("variant", "model", "num_stages", "stage_features", "pipeline")


def read_report(path: str) -> dict:
    """A respect-pipeline report (JSON object with its keys), else ``ValueError`` naming the file."""
    doc = _read_json(path, "report")
    missing = [k for k in _REPORT_KEYS if k not in doc] if isinstance(doc, dict) else list(_REPORT_KEYS)
    if missing:
        raise ValueError(f"{path}: not a respect-pipeline report (no {missing[0]!r})")
    return doc


def calibrate(report_paths: list[str], base: dict, fit: list[str], weighting: str = "absolute") -> dict:
    """Fit the hardware config to the stage profiles of pipeline reports (one variant)."""
    from respect_jax.coral.calibrate import fit_hardware, predict_times, stage_samples

    if not report_paths:
        raise ValueError("reports is empty; give one or more respect-pipeline report files")
    reports = [read_report(path) for path in report_paths]
    variants = {r["variant"] for r in reports}
    if len(variants) != 1:
        raise ValueError(f"reports mix variants {sorted(variants)}; calibrate one variant at a time")
    variant = variants.pop()
    base = {**base, "param_bytes": 1.0 if variant == "int8" else 4.0, "act_bytes": 1.0 if variant == "int8" else 4.0}
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


@hydra.main(config_path=CONF_DIR, config_name="respect_calibrate", version_base="1.3")
@user_errors_exit("respect-calibrate")
@_coral_errors("respect-calibrate")
def _calibrate_main(cfg: DictConfig) -> None:
    from respect_jax.coral.calibrate import CPU_BASE, hardware_yaml
    from respect_jax.coral.paths import check_output_file
    from respect_jax.graphs.graph import write_text_atomic

    out = Path(cfg.out) if cfg.out else None
    as_yaml = out is not None and out.suffix in (".yaml", ".yml")
    if out is not None:
        check_output_file(out, "out")
        if as_yaml:
            check_output_file(out.with_suffix(".json"), "out (its .json)")
    if cfg.base == "cpu":
        base = dict(CPU_BASE)
    elif cfg.base == "hardware":
        base = {k: float(v) for k, v in hardware_from_cfg(cfg.hardware).to_dict().items() if k != "stages"}
    else:
        raise ValueError(f"base must be cpu or hardware, got {cfg.base!r}")
    reports = [str(p) for p in _as_list(cfg.reports)]
    result = calibrate(reports, base, [str(f) for f in _as_list(cfg.fit)], str(cfg.weighting))
    hw = result["hardware"]
    print(
        f"fitted ({result['variant']}, {result['num_samples']} stages): "
        + ", ".join(f"{k}={v:.4g}" for k, v in result["fitted"].items())
        + f"; R^2={result['r2']:.4f}, median rel. err {100 * result['median_rel_err']:.1f}%",
        file=sys.stderr,
    )
    for k, why in result["kept"].items():
        print(f"kept {k}={hw[k]:.4g}: {why}", file=sys.stderr)
    for v in result["validation"]:
        if "predicted_throughput_per_s" in v:
            print(
                f"{v['report']}: predicted bottleneck {1e3 * v['predicted_bottleneck_s']:.2f} ms "
                f"({v['predicted_throughput_per_s']:.1f}/s), measured slowest stage alone "
                f"{1e3 * v['measured_alone_bottleneck_s']:.2f} ms, "
                f"pipeline {v['measured_pipeline_throughput_per_s']:.1f}/s",
                file=sys.stderr,
            )
    if out is None:
        print(json.dumps(result, indent=1))
        return
    if as_yaml:
        note = (
            f"Fitted by respect-calibrate from {result['num_samples']} measured stage latencies "
            f"({result['variant']}, LiteRT stage profiles): {', '.join(_as_list(cfg.reports))}.\n"
            f"R^2={result['r2']:.4f}; kept (not fitted): "
            + (", ".join(f"{k} ({why})" for k, why in result["kept"].items()) or "none")
        )
        write_json_atomic(result, out.with_suffix(".json"))
        write_text_atomic(hardware_yaml(hw, int(cfg.hardware.stages), note), out)
    else:
        write_json_atomic(result, out)
    print(f"calibration -> {out}", file=sys.stderr)


def calibrate_main() -> None:
    """Console script ``respect-calibrate``."""
    check_group_choices("respect-calibrate", ("hardware",), config="respect_calibrate")
    _calibrate_main()


# ----------------------------------------------------------------------------- deploy


@hydra.main(config_path=CONF_DIR, config_name="respect_deploy", version_base="1.3")
@user_errors_exit("respect-deploy")
@_coral_errors("respect-deploy")
def _deploy_main(cfg: DictConfig) -> None:
    _check_run_args(cfg)
    manifest = segment(cfg, stages_override(_cli_overrides()))
    _print_manifest(manifest, cfg.out_dir)
    reports = []
    for variant in manifest["variants"]:
        report = _pipeline_from_cfg(cfg, str(cfg.out_dir), variant, int(cfg.run_seed))
        _print_report(report)
        path = Path(cfg.out_dir) / f"report_{variant}.json"
        write_json_atomic(report, path)
        print(f"report -> {path}", file=sys.stderr)
        reports.append(report)
    _exit_if_unequal("respect-deploy", reports)


def _check_run_args(cfg: DictConfig) -> None:
    """The pipeline arguments of respect-deploy, checked before the (long) segmentation."""
    check_run_ints({key: cfg[key] for key in _RUN_INT_MINIMUM})


def deploy_main() -> None:
    """Console script ``respect-deploy``."""
    check_group_choices("respect-deploy", ("hardware", "solver"), config="respect_deploy")
    _deploy_main()
