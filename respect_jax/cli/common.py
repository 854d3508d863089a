"""Helpers shared by the Hydra entry points: config location, user-error reporting, conversions."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import omegaconf
from omegaconf import DictConfig, OmegaConf

from respect_jax import resources
from respect_jax.costs import Hardware, hardware_from_dict
from respect_jax.graphs.graph import GraphError

CONF_DIR = str(resources.conf_dir())  # the Hydra config folder: the repository's conf/, or the installed package's


def escape_help_dollars(text: str) -> str:
    """``text`` with every ``$`` doubled, so Hydra's help (a ``string.Template`` substitution of the resolved
    ``hydra.help.template``) prints the current values of overrides such as ``objective=$x`` as given, instead
    of failing with a KeyError on ``$x``. Registered as the OmegaConf resolver ``help_escape``
    (``conf/hydra/help/respect.yaml``)."""
    return str(text).replace("$", "$$")


if not OmegaConf.has_resolver("help_escape"):
    OmegaConf.register_new_resolver("help_escape", escape_help_dollars)
USER_ERRORS = (GraphError, ValueError, OSError, KeyError, omegaconf.errors.OmegaConfBaseException)  # OSError: a path


def user_errors_exit(prog: str) -> Callable:
    """Decorator: a user error (bad input/argument) prints ``prog: error: <one line>`` and exits 2.

    In a Hydra sweep it prints ``prog: error in job N (overrides): <one line>`` and raises :class:`JobError`
    instead, so the other jobs still run (Hydra then names the failed job and exits 1). Anything else is a bug
    and keeps its traceback.
    """

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except USER_ERRORS as err:
                msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                if in_sweep():  # the sweep's other jobs still run; Hydra reports this one at the end (exit 1)
                    from hydra.core.hydra_config import HydraConfig

                    job = HydraConfig.get().job
                    print(f"{prog}: error in job {job.num} ({job.override_dirname}): {msg}", file=sys.stderr)
                    raise JobError(msg) from None
                print(f"{prog}: error: {msg}", file=sys.stderr)
                _silence_background_errors()
                sys.exit(2)

        return inner

    return wrap


def _silence_background_errors() -> None:
    """After a reported user error: drop what background threads still raise while the process exits (orbax's
    reads of a damaged checkpoint finish after its event loop closed: "Event loop is closed" tracebacks)."""
    import threading

    sys.unraisablehook = lambda unraisable: None
    threading.excepthook = lambda args: None


class JobError(Exception):
    """A user error inside one job of a Hydra sweep: already printed as one line; raised (not exited) so that
    the launcher runs the sweep's other jobs and reports the failed one at the end."""


def in_sweep() -> bool:
    """Whether this process runs a job of a Hydra multirun (``-m``)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _raw(doc, key: str):
    """The unresolved value at dotted ``key`` of a container (None if absent)."""
    for part in key.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _config_default(key: str):
    """The unresolved value of ``key`` in the running command's config file (``???``: mandatory)."""
    from hydra.core.hydra_config import HydraConfig

    path = Path(CONF_DIR) / f"{HydraConfig.get().job.config_name}.yaml"
    return _raw(OmegaConf.to_container(OmegaConf.load(path), resolve=False), key)


def _left_at_default(cfg: DictConfig, key: str) -> bool:
    """``cfg[key]`` (dotted) is the value of the command's config file: neither the command line nor a preset
    (``conf/ablation/*``) set it. Both are compared unresolved (``runs/edge/${edge_scenario.name}``)."""
    from hydra.core.hydra_config import HydraConfig

    if any(o.lstrip("+~").split("=", 1)[0] == key for o in HydraConfig.get().overrides.task):
        return False
    return _raw(OmegaConf.to_container(cfg, resolve=False), key) == _config_default(key)


def job_path(cfg: DictConfig, key: str, name: str | None = None) -> Path | None:
    """Where this job writes ``cfg[key]`` (a folder; with ``name``, the file ``name`` in it when ``cfg[key]``
    is left at its default), made safe for Hydra sweeps; sets ``cfg[key]`` to the folder it chose.

    Outside a sweep: ``cfg[key]`` as given (None stays None). In a sweep (``-m``), a ``key`` left at the value
    of the command's config file becomes the job's own folder ``<hydra.sweep.dir>/<hydra.sweep.subdir>`` (by
    default ``multirun/<time>/<job number>``; the same ``hydra.sweep.dir`` again resumes a killed sweep), and
    a path that another job of the same sweep already writes (a literal ``run_dir=runs/x`` shared by every
    job: the later jobs would resume, or overwrite, the earlier one's) is a one-line error. The claims are
    files in ``<hydra.sweep.dir>/.claims/``; those of an earlier sweep with other overrides do not count.
    """
    value = OmegaConf.select(cfg, key)
    if in_sweep():
        value = _job_value(cfg, key, value, "")
    if value is None:
        return None
    path = Path(value) / name if name else Path(value)
    if in_sweep():
        _claim(path, key, "runs/sweep_${hydra:job.num}")
    return path


def job_file(cfg: DictConfig, key: str, default: str | None) -> Path | None:
    """The output file ``cfg[key]`` of this job (``default`` when it is null), made safe for Hydra sweeps like
    :func:`job_path`: in a sweep, a ``key`` left at its default becomes ``<job folder>/<name of default>``
    (None without a default: nothing is written), and a file another job of the sweep writes is an error."""
    value = OmegaConf.select(cfg, key)
    if not in_sweep():
        value = value if value is not None else default
    else:
        value = _job_value(cfg, key, value, Path(default).name if default is not None else None)
    if value is None:
        return None
    path = Path(value)
    if in_sweep():
        _claim(path, key, str(path.with_name(f"{path.stem}_${{hydra:job.num}}{path.suffix}")))
    return path


def _job_value(cfg: DictConfig, key: str, value, leaf: str | None):
    """In a sweep: ``value``, or, when ``key`` is left at its default, ``<job folder>/<leaf>`` (written back
    to ``cfg``); None when it is left at its default and there is no ``leaf``."""
    from hydra.core.hydra_config import HydraConfig

    if value is not None and not _left_at_default(cfg, key):
        return value
    if leaf is None:
        return None
    hc = HydraConfig.get()
    value = str(Path(hc.sweep.dir) / str(hc.sweep.subdir) / leaf)
    OmegaConf.update(cfg, key, value, force_add=True)
    return value


def _claim(path: Path, key: str, example: str) -> None:
    """Record that this job of the sweep writes ``path`` (in ``<hydra.sweep.dir>/.claims``); an error if another
    job does (``example``: a per-job value of ``key`` to suggest)."""
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    job = int(hc.job.num)
    claims = Path(hc.sweep.dir) / ".claims"
    claims.mkdir(parents=True, exist_ok=True)
    target = str(path.resolve())
    marker = claims / (hashlib.sha1(target.encode()).hexdigest()[:16] + ".json")
    claim = {"path": target, "job": job, "sweep": _sweep_overrides(Path(hc.sweep.dir))}
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        owner = _read_claim(marker)
        if owner.get("sweep") != claim["sweep"]:  # left by an earlier sweep into the same folder: stale
            tmp = marker.with_suffix(f".{job}.tmp")
            tmp.write_text(json.dumps(claim) + "\n")
            os.replace(tmp, marker)
            return
        if owner.get("job", job) != job:
            optional = "" if _config_default(key) == "???" else f", or do not set {key}"
            raise ValueError(
                f"{key}={path} is already the {key} of job {owner['job']} of this sweep; give every job its "
                f"own, e.g. {key}='{example}'{optional}"
            ) from None
        return
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(claim) + "\n")


def _sweep_overrides(sweep_dir: Path) -> list[str] | None:
    """The command-line overrides of the sweep that owns ``sweep_dir`` now (``multirun.yaml``, which Hydra
    rewrites when a sweep starts): a claim made under other overrides was made by an earlier sweep reusing the
    folder, while the same sweep run again (a resumed one) keeps its claims."""
    try:
        return list(OmegaConf.load(sweep_dir / "multirun.yaml").hydra.overrides.task)
    except Exception:  # noqa: BLE001 - a launcher that writes no multirun.yaml: every claim counts
        return None


def _read_claim(marker: Path) -> dict:
    """The claim in ``marker`` (waiting briefly for a job that created it a moment ago to write it)."""
    for _ in range(50):
        text = marker.read_text()
        if text.strip():
            try:
                doc = json.loads(text)
            except json.JSONDecodeError:
                return {}
            return doc if isinstance(doc, dict) else {}
        time.sleep(0.02)
    return {}


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


def check_group_choices(
    prog: str, groups: tuple[str, ...], argv: list[str] | None = None, config: str | None = None
) -> None:
    """Exit 2 with one line if a command-line ``group=choice`` names no file in ``conf/group/`` (each
    choice of a sweep ``group=a,b``), or, with ``config`` (the command's top-level config name), if the
    command line does not compose: a misspelt key, a malformed override.

    Hydra itself would report these over many lines; SPEC section 4 wants one. For a multirun (``-m``) the
    composition check uses the first value of every swept key (a misspelt key fails in every job alike); it
    leaves ``hydra`` keys and Hydra's other flags (``--cfg``, ``--info``, ...) to Hydra.
    """
    args = sys.argv[1:] if argv is None else argv
    for arg in args:
        key, sep, value = arg.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in groups or "(" in value:  # choice(...), glob(...): Hydra's sweep functions
            continue
        for choice in value.split(","):
            if not (Path(CONF_DIR) / key / f"{choice}.yaml").is_file():
                choices = sorted(p.stem for p in (Path(CONF_DIR) / key).glob("*.yaml"))
                print(f"{prog}: error: unknown {key} {choice!r}; choose one of {', '.join(choices)}", file=sys.stderr)
                sys.exit(2)
    multirun = [a for a in args if a in ("-m", "--multirun")]
    if config is None or any(a.startswith("-") and a not in multirun for a in args):
        return
    overrides = [a for a in args if not a.startswith("-") and not a.lstrip("+~").startswith("hydra")]
    if multirun:
        overrides = first_job(overrides)
        if overrides is None:  # not parsable here: Hydra reports it
            return
    message = composition_error(config, overrides)
    if message:
        print(f"{prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def first_job(overrides: list[str]) -> list[str] | None:
    """The overrides of a sweep's first job (every ``key=a,b`` or sweep function at its first value); None if
    Hydra's parser does not accept them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        out = []
        for override, text in zip(parsed, overrides, strict=True):
            if override.is_sweep_override():
                first = next(iter(override.sweep_string_iterator()), None)
                if first is None:
                    return None
                text = f"{override.get_key_element()}={first}"
            out.append(text)
        return out
    except (HydraException, ValueError, TypeError):
        return None


def composition_error(config: str, overrides: list[str]) -> str | None:
    """One line saying why ``config`` with ``overrides`` does not compose (None: it does)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
            compose(config, overrides=overrides)
    except (HydraException, omegaconf.errors.OmegaConfBaseException) as err:
        lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()] or [type(err).__name__]
        if len(lines) > 1 and lines[1].startswith("To append to your config use "):
            return f"{lines[0].rstrip('.')}: no such key"
        return lines[0]
    return None


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
    return hardware_from_dict(OmegaConf.to_container(node, resolve=True))


def machine_description() -> dict:
    """Where a figure was measured: platform, CPU count and JAX backend/devices."""
    import os

    import jax

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jax_backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }


def dump_json(doc) -> str:
    return json.dumps(doc, indent=1)
