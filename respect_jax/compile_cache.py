"""JAX's persistent compilation cache: compiled programs written to disk and reused by later processes.

A second ``respect-schedule solver=policy`` call on a graph of the same size bucket (and the same hardware,
objective and decoding) then loads the decoder's executable instead of compiling it again. JAX's own cache
still traces and lowers the function in every process (about a second for the policy's forward pass and its
local search); :func:`cached_compile` skips that too for the functions that use it: it stores the compiled
executable itself (``<cache folder>/executables``), keyed by everything that determines it, and loads it back
without tracing. The commands turn both on through :func:`enable_compilation_cache` (the ``jax_cache`` config
value, see :func:`resolve_cache_dir`).

The cache is trusted code: JAX runs what it finds there, so it lives in the user's own cache folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
import threading
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

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
        _EXECUTABLES["folder"] = None
        return None
    folder = Path(path).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_s))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", int(min_entry_size_bytes))
    _reset_if_initialised()
    _EXECUTABLES["folder"] = folder / EXECUTABLES_SUBDIR
    return folder


def _reset_if_initialised() -> None:
    """JAX picks the cache folder at its first compilation; a later change needs the cache object reset."""
    try:
        from jax.experimental.compilation_cache import compilation_cache as cc

        cc.reset_cache()
    except (ImportError, AttributeError):  # pragma: no cover - older/newer JAX without the helper
        pass


#: sub-folder of the cache folder holding :func:`cached_compile`'s executables
EXECUTABLES_SUBDIR = "executables"
_EXECUTABLES: dict[str, Any] = {"folder": None}  # set by enable_compilation_cache (None: off)
_COMPILED: dict[str, Callable] = {}  # key -> executable, this process
#: executables kept in memory per process (the oldest is dropped beyond; jax.jit's own cache is as large)
MEMORY_ENTRIES = 4096
_FINGERPRINT: list[str] = []  # the package's source fingerprint, computed once
_CPU: list[str] = []  # the host CPU description, read once
_VERSION: list[str] = []  # code_version(), computed once
_KEYS: dict[tuple, str] = {}  # in-process signature of a call (:func:`_call_signature`) -> its executable_key


def executables_dir() -> Path | None:
    """Folder of :func:`cached_compile`'s stored executables (None: only compiled in memory)."""
    return _EXECUTABLES["folder"]


def source_fingerprint() -> str:
    """SHA-256 of every ``.py`` file of the ``respect_jax`` package (paths and contents): a stored executable
    is only reused by the code that compiled it."""
    if not _FINGERPRINT:
        root = Path(__file__).resolve().parent
        digest = hashlib.sha256()
        for file in sorted(root.rglob("*.py")):
            digest.update(str(file.relative_to(root)).encode())
            digest.update(file.read_bytes())
        _FINGERPRINT.append(digest.hexdigest())
    return _FINGERPRINT[0]


def code_version() -> str:
    """16 hex digits naming this package source and JAX / jaxlib release: stored executables of another code
    version are stale (:func:`cached_compile` removes them when it stores a newer one of the same name)."""
    if not _VERSION:
        import jax
        import jaxlib

        text = f"{source_fingerprint()} {jax.__version__} {jaxlib.__version__}"
        _VERSION.append(hashlib.sha256(text.encode()).hexdigest()[:16])
    return _VERSION[0]


def executable_key(name: str, static_key: Hashable, args: tuple) -> str:
    """``<name>-<code version>-<sha256>`` of everything that determines the executable of ``name`` on ``args``:
    the static key, the argument tree and every leaf's shape and dtype, the package source, JAX's version and
    options that change programs (``XLA_FLAGS`` included), the backend and the host CPU (a cache folder shared by
    the nodes of a cluster never hands one CPU code compiled for another's instruction set)."""
    import jax
    import jaxlib

    leaves, treedef = jax.tree.flatten(args)
    device = jax.devices()[0]
    parts = (
        name, repr(static_key), str(treedef), [repr(jax.typeof(x)) for x in leaves],
        source_fingerprint(), jax.__version__, jaxlib.__version__, device.platform, device.device_kind,
        getattr(device.client, "platform_version", ""), bool(jax.config.jax_enable_x64),
        str(jax.config.jax_default_matmul_precision), os.environ.get("XLA_FLAGS", ""), host_cpu(),
    )
    return f"{name}-{code_version()}-{hashlib.sha256(repr(parts).encode()).hexdigest()}"


def _leaf_signature(x) -> tuple:
    """What of one argument leaf enters its abstract value: type, shape, dtype and weak type for an array; the type
    alone for a Python scalar (its JAX type follows from it)."""
    shape = getattr(x, "shape", None)
    if shape is None:
        return (type(x),)
    return (type(x), tuple(shape), x.dtype, bool(getattr(x, "weak_type", False)))


def _call_signature(name: str, static_key: Hashable, args: tuple) -> tuple:
    """A cheap in-process key standing for :func:`executable_key` of the same call: the name, the static key's
    ``repr``, the argument tree, every leaf's :func:`_leaf_signature` and the options that change programs. Computing
    ``executable_key`` formats every leaf's abstract value and hashes it all (about 3 ms for a network's parameters:
    a tenth of a greedy schedule's time); this reuses its value when the signature was seen in this process."""
    import jax

    leaves, treedef = jax.tree.flatten(args)
    return (name, repr(static_key), treedef, tuple(_leaf_signature(x) for x in leaves),
            bool(jax.config.jax_enable_x64), str(jax.config.jax_default_matmul_precision),
            os.environ.get("XLA_FLAGS", ""))


def host_cpu() -> str:
    """The host CPU's model and instruction-set flags (Linux: ``/proc/cpuinfo``; elsewhere the platform's
    processor string)."""
    if not _CPU:
        import platform

        text = f"{platform.machine()} {platform.processor()}"
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
                wanted = {}
                for line in handle:
                    key, _, value = line.partition(":")
                    if key.strip() in ("model name", "flags", "Features") and key.strip() not in wanted:
                        wanted[key.strip()] = value.strip()
                    if len(wanted) == 2:
                        break
            text += " " + " ".join(f"{k}={v}" for k, v in sorted(wanted.items()))
        except OSError:
            pass
        _CPU.append(text)
    return _CPU[0]


#: serialises the compilations behind a store (each turns JAX's persistent cache off process-wide for its duration)
_STORE_LOCK = threading.RLock()


@contextlib.contextmanager
def _persistent_cache_off():
    """JAX's persistent cache off for one compilation: an executable read back from it cannot be serialized
    again on CPU (its fused functions are missing from the copy: running the stored file fails with "Function
    ... not found"). JAX decides once per process whether the cache is used, so the switch resets that decision
    (:func:`_reset_if_initialised`) on the way in and on the way out."""
    import jax

    with _STORE_LOCK:
        was = bool(jax.config.jax_enable_compilation_cache)
        jax.config.update("jax_enable_compilation_cache", False)
        _reset_if_initialised()
        try:
            yield
        finally:
            jax.config.update("jax_enable_compilation_cache", was)
            _reset_if_initialised()


def _fresh_compile(fn: Callable, args: tuple):
    """``jax.jit(fn)`` compiled for ``args`` by XLA now: traced through a new function object, so that no
    in-process cache of JAX (keyed by the function) hands back an executable this process read from the persistent
    cache."""
    import jax

    def program(*a):
        return fn(*a)

    return jax.jit(program).lower(*args).compile()


def is_ready(name: str, args: tuple, static_key: Hashable = ()) -> bool:
    """True when :func:`cached_compile` of ``name`` on ``args`` would compile nothing: its executable is in this
    process's memory or stored in :func:`executables_dir` (a file there is trusted to load; an unreadable one is only
    found out when loaded)."""
    signature = _call_signature(name, static_key, args)
    key = _KEYS.get(signature) or executable_key(name, static_key, args)
    if key in _COMPILED:
        return True
    folder = executables_dir()
    return folder is not None and (folder / f"{key}.pkl").is_file()


def cached_compile(name: str, fn: Callable, args: tuple, static_key: Hashable = ()) -> Callable:
    """The compiled ``jax.jit(fn)`` for the shapes and dtypes of ``args`` (a tuple of pytrees of arrays or Python
    scalars, as ``jax.jit`` takes them): from this process's memory, else from :func:`executables_dir` (no tracing,
    no lowering), else compiled and stored there. Call the result with arguments of the same shapes, dtypes and tree
    structure as ``args``.

    ``static_key`` must name every value ``fn`` closes over that changes its program (a network's config, static
    options): the stored executable is found by ``name``, ``static_key``, the arguments' structure, the package
    source and the JAX version and backend (:func:`executable_key`), never by ``fn`` itself. An unreadable file
    is compiled again and replaced; storing one removes the files of ``name`` from other code versions, so the
    folder holds one code version per name. With the cache off (``enable_compilation_cache(None)``) this is
    ``jax.jit(fn)`` compiled once per key in memory.
    """
    import jax

    signature = _call_signature(name, static_key, args)
    key = _KEYS.get(signature)
    if key is None:
        key = executable_key(name, static_key, args)
        if len(_KEYS) >= MEMORY_ENTRIES:
            _KEYS.pop(next(iter(_KEYS)))
        _KEYS[signature] = key
    compiled = _COMPILED.get(key)
    if compiled is not None:
        return compiled
    folder = executables_dir()
    file = None if folder is None else folder / f"{key}.pkl"
    if file is not None and file.is_file():
        compiled = _load_executable(file)
    if compiled is None and file is None:
        compiled = jax.jit(fn).lower(*args).compile()
    elif compiled is None:
        with _persistent_cache_off():
            compiled = _fresh_compile(fn, args)
        _store_executable(compiled, file)
        _remove_stale(folder, name)
    if len(_COMPILED) >= MEMORY_ENTRIES:
        _COMPILED.pop(next(iter(_COMPILED)))
    _COMPILED[key] = compiled
    return compiled


def _remove_stale(folder: Path, name: str) -> None:
    """Delete the stored executables of ``name`` compiled by another code version (:func:`code_version`)."""
    current = f"{name}-{code_version()}-"
    for old in folder.glob(f"{name}-*.pkl"):
        if not old.name.startswith(current) and old.name.count("-") == 2:
            with contextlib.suppress(OSError):
                old.unlink()


def _load_executable(file: Path) -> Callable | None:
    """The executable stored in ``file``, or None (removed) when it cannot be read back."""
    from jax.experimental.serialize_executable import deserialize_and_load

    try:
        with open(file, "rb") as handle:
            payload, in_tree, out_tree = pickle.load(handle)
        return deserialize_and_load(payload, in_tree, out_tree)
    except Exception as err:  # noqa: BLE001 - any unreadable entry is only a cache miss
        print(f"note: compiled-executable cache: {file.name} unreadable ({type(err).__name__}); compiling again",
              file=sys.stderr)
        with contextlib.suppress(OSError):
            file.unlink()
        return None


def _store_executable(compiled, file: Path) -> None:
    """Write ``compiled`` to ``file`` (atomically); a backend that cannot serialize it only skips the store."""
    from jax.experimental.serialize_executable import serialize

    try:
        payload = pickle.dumps(serialize(compiled))
    except (ValueError, NotImplementedError, TypeError, pickle.PicklingError):
        return
    store_bytes(file, payload)


def store_bytes(file: Path, payload: bytes) -> bool:
    """Write ``payload`` to ``file`` atomically (a process reading it sees the old file or the new one, never a part),
    creating its folder; False when the folder cannot be written (a cache store is then only skipped)."""
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(payload)
        tmp.replace(file)
    except OSError:
        return False
    return True
