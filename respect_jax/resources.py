"""Where the shipped files are: the Hydra configs and presets (``conf/``) and the shipped data (``data/``:
the model graphs and the default checkpoints).

Every path look-up of a shipped file goes through this module. The repository keeps ``conf/`` and ``data/``
at its top level; a wheel (``pip install .``) carries them inside the package as ``respect_jax/conf`` and
``respect_jax/data`` (package data, mapped by ``setup.py``). :func:`conf_dir` and :func:`data_dir` find the
package's copy through :mod:`importlib.resources` when it is there (an installed wheel) and the
repository's top-level folder otherwise (a source checkout or an editable install).
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

#: the shipped top-level folders
SHIPPED = ("conf", "data")


@functools.cache
def shipped_dir(name: str) -> Path:
    """The folder ``name`` (``conf`` or ``data``) of the installed package, else of the source checkout.

    Raises ValueError for another name; OSError when neither exists (a broken installation).
    """
    if name not in SHIPPED:
        raise ValueError(f"shipped folder must be one of {', '.join(SHIPPED)}, got {name!r}")
    packaged = resources.files("respect_jax") / name  # an installed wheel: package data
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[1] / name  # the repository's top-level folder
    if checkout.is_dir():
        return checkout
    raise OSError(f"respect-jax: the shipped folder {name}/ is missing (neither {packaged} nor {checkout})")


def conf_dir() -> Path:
    """The Hydra config folder (``conf/``): every command's config and the presets (``conf/hardware/*.yaml``)."""
    return shipped_dir("conf")


def data_dir() -> Path:
    """The shipped data folder (``data/``): ``models/*.json`` graphs and the default checkpoints."""
    return shipped_dir("data")


def conf_path(*parts: str) -> Path:
    """A path inside ``conf/``, e.g. ``conf_path("hardware", "coral_usb.yaml")`` (not checked to exist)."""
    return conf_dir().joinpath(*parts)


def data_path(*parts: str) -> Path:
    """A path inside ``data/``, e.g. ``data_path("checkpoints", "respect_k4_paper_cut")`` (not checked to exist)."""
    return data_dir().joinpath(*parts)


def shipped_path(path: str | Path) -> Path:
    """``path``, or the shipped file of that name when ``path`` is relative, starts with ``conf/`` or ``data/``,
    is missing from the working directory and is shipped (``data/checkpoints/...``, ``data/models/x.json``):
    config defaults and examples name shipped files relative to the repository root, and work from any
    directory and from an installed wheel. Anything else is returned unchanged."""
    path = Path(path)
    if path.is_absolute() or path.exists() or not path.parts or path.parts[0] not in SHIPPED:
        return path
    try:
        shipped = shipped_dir(path.parts[0]).joinpath(*path.parts[1:])
    except OSError:
        return path
    return shipped if shipped.exists() else path
