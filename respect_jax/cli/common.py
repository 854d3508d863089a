"""Helpers shared by the Hydra entry points: the config folder, one-line user errors, config -> typed value
adapters (hardware, counts, the compilation cache) and path helpers. Command-line checks before Hydra runs are
in :mod:`respect_jax.cli.compose`, the paths of sweep jobs in :mod:`respect_jax.cli.sweep`."""

from __future__ import annotations

import functools
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import omegaconf
from omegaconf import DictConfig, OmegaConf

from respect_jax import resources

# imported from here by the command lines and the experiment scripts
from respect_jax.cli.compose import check_group_choices, run_command  # noqa: F401  (re-exported for the command files)
from respect_jax.cli.sweep import in_sweep, job_file, job_path  # noqa: F401
from respect_jax.reporting import machine_description  # noqa: F401

if TYPE_CHECKING:
    from respect_jax.costs import Hardware

CONF_DIR = str(resources.conf_dir())  # the Hydra config folder: the repository's conf/, or the installed package's


def escape_help_dollars(text: str) -> str:
    """``text`` with every ``$`` doubled, so Hydra's help (a ``string.Template`` substitution of the resolved
    ``hydra.help.template``) prints the current values of overrides such as ``objective=$x`` as given, instead
    of failing with a KeyError on ``$x``. Registered as the OmegaConf resolver ``help_escape``
    (``conf/hydra/help/respect.yaml``)."""
    return str(text).replace("$", "$$")


if not OmegaConf.has_resolver("help_escape"):
    OmegaConf.register_new_resolver("help_escape", escape_help_dollars)
#: errors that are the user's (a bad graph file is a GraphError, a ValueError); OSError: a path
USER_ERRORS = (ValueError, OSError, KeyError, omegaconf.errors.OmegaConfBaseException)


def user_errors_exit(prog: str) -> Callable:
    """Decorator: a user error (bad input/argument) prints ``prog: error: <one line>`` and exits 2.

    In a Hydra sweep it prints ``prog: error in job N (overrides): <one line>`` and raises :class:`JobError`
    instead, so the other jobs still run (Hydra then names the failed job and exits 1). Anything else is a bug
    and keeps its traceback.
    """

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            _drop_closed_loop_reports()
            try:
                return fn(*args, **kwargs)
            except USER_ERRORS as err:
                msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                if in_sweep():  # the sweep's other jobs still run; Hydra reports this one at the end (exit 1)
                    from hydra.core.hydra_config import HydraConfig

                    job = HydraConfig.get().job
                    print(f"{prog}: error in job {job.num} ({job.override_dirname}): {msg}", file=sys.stderr)
                    raise JobError(msg) from None
                _silence_background_errors()
                print(f"{prog}: error: {msg}", file=sys.stderr)
                sys.exit(2)

        return inner

    return wrap


def _is_closed_loop_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` is asyncio's "Event loop is closed": what the reads still in flight of a failed orbax restore
    raise from TensorStore's threads once orbax has closed its event loop."""
    return isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed"


def _drop_closed_loop_reports() -> None:
    """For a command's process: the reports of :func:`_is_closed_loop_error` errors raised where nobody can catch
    them (``sys.unraisablehook``, ``threading.excepthook``, ``sys.excepthook``) are dropped; every other report goes to
    the hook installed before. They come from the background reads of a damaged checkpoint, whose failure the command
    reports in one line, and may be printed before that line is (so dropping them only after it is too late)."""
    if getattr(sys.unraisablehook, "drops_closed_loop", False):
        return
    unraisable_hook, thread_hook, except_hook = sys.unraisablehook, threading.excepthook, sys.excepthook

    def unraisable(report) -> None:
        if not _is_closed_loop_error(report.exc_value):
            unraisable_hook(report)

    def thread(report) -> None:
        if not _is_closed_loop_error(report.exc_value):
            thread_hook(report)

    def uncaught(kind, value, tb) -> None:
        if not _is_closed_loop_error(value):
            except_hook(kind, value, tb)

    unraisable.drops_closed_loop = True
    sys.unraisablehook, threading.excepthook, sys.excepthook = unraisable, thread, uncaught


def _silence_background_errors() -> None:
    """On a reported user error, before the process exits: drop what background work still raises (orbax's reads
    of a damaged checkpoint finish after its event loop closed: "Event loop is closed" tracebacks in threads, and
    asyncio's "Task exception was never retrieved" log records for the reads whose errors nobody awaited)."""
    import logging

    sys.unraisablehook = lambda unraisable: None
    threading.excepthook = lambda args: None
    logging.getLogger("asyncio").disabled = True


class JobError(Exception):
    """A user error inside one job of a Hydra sweep: already printed as one line; raised (not exited) so that
    the launcher runs the sweep's other jobs and reports the failed one at the end."""


def shipped_path(path: str | Path) -> Path:
    """``path``, or the shipped file of that relative name (``data/checkpoints/...``, ``data/labels/...``) when
    ``path`` is missing from the working directory: see :func:`respect_jax.resources.shipped_path`."""
    return resources.shipped_path(path)


def hydra_argv(args: list[str], *overrides: str) -> list[str]:
    """``args`` (Hydra flags and overrides, in the user's order) with ``overrides`` added next to the user's
    first override: argparse takes one run of overrides only, so ``respect-rt train seed=0,1 -m`` and
    ``respect-rt train -m seed=0,1`` both keep their overrides together."""
    first = next((i for i, a in enumerate(args) if not a.startswith("-") and "=" in a), None)
    if first is None:
        return [*args, *overrides]
    return [*args[: first + 1], *overrides, *args[first + 1 :]]


def check_counts(node: DictConfig, prefix: str, keys: tuple[str, ...], low: int = 1) -> None:
    """One-line ValueError unless every ``<prefix>.<key>`` is an integer >= ``low``."""
    for key in keys:
        value = node[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{prefix}.{key} must be an integer >= {low}, got {value!r}")


def setup_compilation_cache(cfg: DictConfig) -> Path | None:
    """Turn JAX's persistent compilation cache on as the command's config says; returns its folder (None: off).

    ``jax_cache``: ``auto`` (default when the key is absent: ``$RESPECT_JAX_CACHE``, else
    ``$JAX_COMPILATION_CACHE_DIR``, else ``$XDG_CACHE_HOME/respect-jax/jax`` or ``~/.cache/respect-jax/jax``),
    ``off``, or a folder; ``jax_cache_min_compile_s``: programs that compiled faster are not stored (default 0.5).
    An ``auto`` folder that cannot be created only turns the cache off (a note on stderr); a folder given
    explicitly that cannot be created is a user error.
    """
    from respect_jax.compile_cache import enable_compilation_cache, resolve_cache_dir

    setting = cfg.get("jax_cache", "auto")
    min_s = cfg.get("jax_cache_min_compile_s", 0.5)
    if not isinstance(min_s, int | float) or isinstance(min_s, bool) or min_s < 0:
        raise ValueError(f"jax_cache_min_compile_s must be a number >= 0, got {min_s!r}")
    folder = resolve_cache_dir(setting)
    try:
        return enable_compilation_cache(folder, min_compile_time_s=float(min_s))
    except OSError as err:
        if str(setting).strip().lower() != "auto":
            raise OSError(f"jax_cache={setting}: cannot create the folder ({err.strerror})") from None
        print(f"note: JAX compilation cache off: cannot create {folder} ({err.strerror})", file=sys.stderr)
        return enable_compilation_cache(None)


def hardware_presets_named(names, option: str) -> list[Hardware]:
    """The :class:`Hardware` of each name in ``names`` (conf/hardware/<name>.yaml); one-line ValueError naming the
    config ``option`` for an unknown one."""
    presets = []
    for name in names:
        path = Path(CONF_DIR) / "hardware" / f"{name}.yaml"
        if not path.is_file():
            raise ValueError(f"{option}: no hardware preset {name!r} in conf/hardware")
        presets.append(hardware_from_cfg(OmegaConf.load(path)))
    return presets


def hardware_from_cfg(node: DictConfig) -> Hardware:
    """Resolved :class:`Hardware` from a ``hardware`` config group node."""
    from respect_jax.costs import hardware_from_dict

    return hardware_from_dict(OmegaConf.to_container(node, resolve=True))


def dump_json(doc) -> str:
    return json.dumps(doc, indent=1)


def experiment_from_cfg(cfg: DictConfig) -> tuple:
    """(the experiment's typed config, its :class:`~respect_jax.experiments.Setting`) of a ``conf/paper.yaml``
    config: :func:`respect_jax.experiments.run_experiment` takes them."""
    from respect_jax.experiments import Setting, experiment_config

    config = experiment_config(OmegaConf.to_container(cfg.experiment, resolve=True))
    setting = Setting(hardware_from_cfg(cfg.hardware), cfg.objective, cfg.lam, Path(cfg.out_dir), bool(cfg.progress))
    return config, setting
