"""The Hydra configs of the Coral commands (``respect-segment``, ``-pipeline``, ``-calibrate``, ``-deploy``),
registered in Python (ConfigStore) when this module is imported: each node holds the defaults of an option
dataclass of :mod:`respect_jax.coral.options`, composes the ``hardware`` (and ``solver``) groups of ``conf/``
and carries the command's ``--help`` header (the usage line and footer: conf/hydra/help/respect.yaml).
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from respect_jax.coral.options import REQUIRED, CalibrateConfig, PipelineOptions, SegmentConfig, defaults

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

_PIPELINE = {"manifest": REQUIRED, "variant": "float32", **defaults(PipelineOptions), "out": None}
_store = ConfigStore.instance()
_store.store(
    name="respect_segment",
    node={
        "defaults": [{"hardware": "coral_usb"}, {"solver": "compiler"}, "_self_", *_QUIET],
        **defaults(SegmentConfig),
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
        **defaults(CalibrateConfig),
        "hydra": _hydra("respect-calibrate", _CALIBRATE_HELP),
    },
)
_store.store(
    name="respect_deploy",
    node={
        "defaults": [{"hardware": "coral_usb"}, {"solver": "compiler"}, "_self_", *_QUIET],
        **defaults(SegmentConfig),
        **{k: v for k, v in _PIPELINE.items() if k not in ("manifest", "variant", "out", "seed")},
        "run_seed": 1,
        "hydra": _hydra("respect-deploy", _DEPLOY_HELP),
    },
)
