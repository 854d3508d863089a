"""JAX's persistent compilation cache: compiled programs written to disk and reused by later processes.

A second ``respect-schedule solver=policy`` call on a graph of the same size bucket (and the same hardware,
objective and decoding) then loads the decoder's executable instead of compiling it again; tracing still
runs in every process. The commands turn the cache on through :func:`enable_compilation_cache` (the
``jax_cache`` config value, see :func:`resolve_cache_dir`).

The cache is trusted code: JAX runs what it finds there, so it lives in the user's own cache folder.
"""

from __future__ import annotations

import os
from pathlib import Path

#: environment variable that overrides the cache folder of the commands (a path, or ``off``)
CACHE_ENV = "RESPECT_JAX_CACHE"
#: values of the ``jax_cache`` setting / :data:`CACHE_ENV` that turn the cache off
OFF_VALUES = ("off", "none", "null", "false", "0", "")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/respect-jax/jax``, or ``~/.cache/respect-jax/jax`` without XDG_CACHE_HOME."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "respect-jax" / "jax"


def resolve_cache_dir(setting: str | os.PathLike | None) -> Path | None:
    """The cache folder a ``jax_cache`` setting names (None: the cache is off).

    ``auto``: the folder in :data:`CACHE_ENV` if set (``off`` there turns the cache off), else JAX's own
    ``JAX_COMPILATION_CACHE_DIR`` if set, else :func:`default_cache_dir`; ``off`` (or None, ``false``, ...):
    no cache; anything else: that folder.
    """
    value = "" if setting is None else str(setting).strip()
    if value.lower() in OFF_VALUES:
        return None
    if value.lower() != "auto":
        return Path(value).expanduser()
    env = os.environ.get(CACHE_ENV)
    if env is not None and env.strip().lower() != "auto":
        return resolve_cache_dir(env)
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return Path(os.environ["JAX_COMPILATION_CACHE_DIR"]).expanduser()
    return default_cache_dir()


def enable_compilation_cache(
    path: str | os.PathLike | None, min_compile_time_s: float = 0.5, min_entry_size_bytes: int = 0
) -> Path | None:
    """Turn JAX's persistent compilation cache on in ``path`` (created if missing); None turns it off.

    Call it before the first compilation that should be cached. Programs whose compilation took less than
    ``min_compile_time_s`` seconds, or whose executable is smaller than ``min_entry_size_bytes``, are not
    written (reading small entries back costs about as much as compiling them). Returns the folder.
    """
    import jax

    if path is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    folder = Path(path).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_s))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", int(min_entry_size_bytes))
    _reset_if_initialised()
    return folder


def _reset_if_initialised() -> None:
    """JAX picks the cache folder at its first compilation; a later change needs the cache object reset."""
    try:
        from jax.experimental.compilation_cache import compilation_cache as cc

        cc.reset_cache()
    except (ImportError, AttributeError):  # pragma: no cover - older/newer JAX without the helper
        pass
