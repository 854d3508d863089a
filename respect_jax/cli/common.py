"""Helpers shared by the Hydra entry points: config location, user-error reporting, conversions."""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import omegaconf
from omegaconf import DictConfig, OmegaConf

from respect_jax.costs import Hardware, hardware_from_dict
from respect_jax.graphs.graph import GraphError

CONF_DIR = str(Path(__file__).resolve().parents[2] / "conf")
USER_ERRORS = (GraphError, ValueError, FileNotFoundError, KeyError, omegaconf.errors.OmegaConfBaseException)


def user_errors_exit(prog: str) -> Callable:
    """Decorator: a user error (bad input/argument) prints ``prog: error: <one line>`` and exits 2.

    Anything else is a bug and keeps its traceback.
    """

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except USER_ERRORS as err:
                msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                print(f"{prog}: error: {msg}", file=sys.stderr)
                sys.exit(2)

        return inner

    return wrap


SWEEP_MARKER = "sweep_job.json"  # which job of which Hydra sweep trains in a run folder


def job_run_dir(cfg: DictConfig, key: str = "run_dir") -> Path:
    """The run folder of this job, made safe for Hydra sweeps (``-m``); sets ``cfg[key]`` to it.

    Outside a sweep it is ``cfg[key]``. In a sweep, a ``key`` left at the value of the command's config
    file (neither the command line nor a preset such as ``conf/ablation/*`` sets it) becomes the job's own
    folder ``<hydra.sweep.dir>/<hydra.sweep.subdir>`` (by default ``multirun/<time>/<job number>``; pass the
    same ``hydra.sweep.dir`` again to resume a killed sweep). A folder that another job of the same
    sweep already trains in (a literal ``run_dir=runs/x`` shared by every job, which would make the later
    jobs resume the earlier one's checkpoints) is a one-line error; the job's claim is the file
    ``SWEEP_MARKER`` in the folder.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return Path(cfg[key])
    hc = HydraConfig.get()
    default = OmegaConf.load(Path(CONF_DIR) / f"{hc.job.config_name}.yaml").get(key)
    chosen = OmegaConf.to_container(cfg, resolve=False).get(key)  # a preset's run_dir (conf/ablation) counts
    run_dir = Path(cfg[key]) if chosen != default else Path(hc.sweep.dir) / str(hc.sweep.subdir)
    OmegaConf.update(cfg, key, str(run_dir), force_add=True)
    claim = {"sweep_dir": str(Path(hc.sweep.dir).resolve()), "job": int(hc.job.num)}
    marker = run_dir / SWEEP_MARKER
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        owner = _read_claim(marker)
        if owner.get("sweep_dir") == claim["sweep_dir"] and owner.get("job") != claim["job"]:
            raise ValueError(
                f"{key}={run_dir} is already the {key} of job {owner.get('job')} of this sweep; give every job its "
                f"own, e.g. {key}='runs/sweep_${{hydra:job.num}}', or leave {key} out"
            ) from None
        marker.write_text(json.dumps(claim) + "\n")  # a folder of an earlier sweep, or this job's own
        return run_dir
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(claim) + "\n")
    return run_dir


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

    Hydra itself would report these over many lines; SPEC section 4 wants one. The composition check
    is skipped for multiruns (``-m``: sweep values are expanded per job) and leaves ``hydra`` keys to Hydra.
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
    if config is None or any(a in ("-m", "--multirun") for a in args) or any(a.startswith("-") for a in args):
        return
    overrides = [a for a in args if not a.lstrip("+~").startswith("hydra")]
    message = composition_error(config, overrides)
    if message:
        print(f"{prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


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
