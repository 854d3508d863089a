"""Helpers shared by the Hydra entry points: config location, user-error reporting, conversions."""

from __future__ import annotations

import functools
import json
import platform
import sys
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


def check_group_choices(prog: str, groups: tuple[str, ...], argv: list[str] | None = None) -> None:
    """Exit 2 with one line if a command-line ``group=choice`` names no file in ``conf/group/``.

    Hydra itself would report this over many lines; SPEC section 4 wants one.
    """
    for arg in sys.argv[1:] if argv is None else argv:
        key, sep, value = arg.partition("=")
        key = key.lstrip("+~")
        if sep and key in groups and not (Path(CONF_DIR) / key / f"{value}.yaml").is_file():
            choices = sorted(p.stem for p in (Path(CONF_DIR) / key).glob("*.yaml"))
            print(f"{prog}: error: unknown {key} {value!r}; choose one of {', '.join(choices)}", file=sys.stderr)
            sys.exit(2)


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
