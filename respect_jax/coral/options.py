"""The options of the Coral commands (``respect-segment``, ``-pipeline``, ``-calibrate``, ``-deploy``,
``respect-export``) as dataclasses: the library functions take them, and their defaults are the commands'
defaults (the command lines build their Hydra config nodes from :func:`defaults`).

Values are stored as given (the annotations say what is expected) and checked by the functions that use
them, with one-line ``ValueError``s, so a command line passes its plain values through unconverted. A list
option also takes one value (``variants=int8``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

REQUIRED = "???"  # a required field in a config node (OmegaConf's mark for a missing value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SegmentConfig:
    """``respect-segment``: a model + a schedule -> per-stage ``.tflite`` files and a manifest in ``out_dir``.

    ``model``: a bundled name (:data:`respect_jax.coral.keras_export.MODELS`), a ``.keras``/``.h5`` file or a
    ``.tflite`` file (cut as it is). ``include_top``/``input_size``: how a bundled model is built. ``schedule``:
    a ``RESULT.json`` of respect-schedule (None: a solver is run). ``objective``/``lam``: the solver's objective
    (``paper``: bottleneck stage time + ``lam`` x bytes crossing stages; ``latency``: sum of stage times).
    ``variants``: float32 and/or int8 files. ``samples``/``seed``/``input_range``: the generated representative
    inputs (int8 calibration). ``bn_stats``: re-estimate BatchNorm moving statistics from them (None: only for
    bundled, random-weight models). ``compile``: ``edgetpu_compiler`` (None: if on PATH; False: never; True:
    required).
    """

    model: str
    include_top: bool = False
    input_size: int | None = None
    schedule: str | None = None
    objective: str = "paper"
    lam: float = 1.0
    out_dir: str
    variants: Sequence[str] | str = ("float32", "int8")
    samples: int = 16
    seed: int = 0
    input_range: Sequence[float] = (-1.0, 1.0)
    bn_stats: bool | None = None
    compile: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class PipelineOptions:
    """How ``respect-pipeline`` runs a segment folder.

    ``num_inputs`` generated inputs (``seed``) go through the pipeline after ``warmup`` ones; ``backend``:
    auto | pycoral | edgetpu (LiteRT + the libedgetpu delegate) | litert (CPU threads); ``queue_size``: the
    queue between stages; ``num_threads``: interpreter threads per stage. ``compare``: also run the
    unsegmented model and compare the outputs. ``profile``: time each stage alone (calibration data) on
    ``profile_inputs`` inputs, ``profile_repeats`` times.
    """

    num_inputs: int = 50
    warmup: int = 2
    backend: str = "auto"
    queue_size: int = 2
    num_threads: int = 1
    compare: bool = True
    profile: bool = True
    profile_inputs: int = 5
    profile_repeats: int = 3
    seed: int = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class CalibrateConfig:
    """``respect-calibrate``: fit the hardware parameters to the stage profiles of pipeline reports.

    ``reports``: respect-pipeline report files with a stage profile. ``base``: ``cpu`` (LiteRT: nothing
    spills, :data:`~respect_jax.coral.calibrate.CPU_BASE`) or ``hardware`` (the command's hardware group).
    ``fit``: the fitted fields; ``weighting``: absolute | relative squared errors; ``out``: a ``.yaml``
    (conf/hardware format, with a ``.json`` twin) or ``.json`` file (None: printed).
    """

    reports: Sequence[str] | str
    base: str = "cpu"
    fit: Sequence[str] | str = ("stage_overhead_s", "macs_per_s", "host_bw", "link_bw")
    weighting: str = "absolute"
    out: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportConfig:
    """``respect-export``: models -> graph JSON files.

    ``model``: a bundled name, a ``.keras``/``.h5``/``.tflite``/``.onnx`` file, a list of these, or ``all``.
    ``include_top``/``input_size``: how bundled models are built (refused with a file). ``out_dir``: where
    ``<name>.json`` goes; ``out``: an explicit file (one model only).
    """

    model: Sequence[str] | str
    include_top: bool = False
    input_size: int | None = None
    out_dir: str = "data/models"
    out: str | None = None


def defaults(cls: type) -> dict:
    """``{field: default}`` of an options dataclass, in field order; :data:`REQUIRED` for a field without a
    default, lists for tuples (a config node's values)."""
    out = {}
    for field in dataclasses.fields(cls):
        value = REQUIRED if field.default is dataclasses.MISSING else field.default
        out[field.name] = list(value) if isinstance(value, tuple) else value
    return out


def config_from(cls: type, values: Mapping, **overrides):
    """An options dataclass from a mapping that holds (at least) its field names; ``overrides`` replace some.

    Values are taken as they are (a config's list stays list-like); a mapping that raises for a missing
    required value raises here.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    return cls(**{name: overrides[name] if name in overrides else values[name] for name in names})


def as_list(value) -> list:
    """A list option as a list: a sequence's items, or ``[value]`` for one value (a string included)."""
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
