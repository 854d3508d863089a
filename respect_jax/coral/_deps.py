"""Lazy access to the optional heavy dependencies of :mod:`respect_jax.coral`.

TensorFlow/Keras, LiteRT (``ai-edge-litert``) and the ``tflite`` flatbuffer parser are imported
only inside the functions below, so ``import respect_jax`` (and ``import respect_jax.coral``) works
without them. A missing package raises :class:`CoralDependencyError` with one line that says what
to install.

Google's ``pycoral`` (the Coral Python API: ``pycoral.pipeline``, ``pycoral.utils.edgetpu``) is
not on PyPI. The PyPI package that is called ``pycoral`` is an unrelated coral-reef tool, so
:func:`google_pycoral` first inspects the installed ``pycoral`` package on disk, without
executing it, and imports it only if it has Google's modules.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

INSTALL_HINT = "install the coral extra: pip install -e .[coral]"


class CoralDependencyError(ImportError):
    """An optional dependency of the Coral adapter is missing (message is one line)."""


def _import(module: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise CoralDependencyError(f"{what} is not available ({err}); {INSTALL_HINT}") from None


def quiet_native_logs() -> None:
    """Silence TensorFlow's and LiteRT's C++ start-up lines (set before their first import).

    ``TF_CPP_MIN_LOG_LEVEL=3`` drops the absl warning and the CPU-feature notice (TF 2.21 prints
    them at level 2); ``TF_ENABLE_ONEDNN_OPTS=0`` drops the oneDNN notice (and its reordered float
    rounding). A value the user already set is kept. LiteRT's XNNPACK INFO line ignores both
    without TensorFlow: :class:`quiet_fds` around interpreter creation silences it.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


def import_tensorflow() -> ModuleType:
    """``tensorflow`` (quiet C++ logging), or :class:`CoralDependencyError`."""
    quiet_native_logs()
    return _import("tensorflow", "TensorFlow (tensorflow-cpu)")


def import_keras() -> ModuleType:
    """``keras`` (Keras 3, TensorFlow backend), or :class:`CoralDependencyError`."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import_tensorflow()
    return _import("keras", "Keras")


def litert_interpreter_class() -> type:
    """``ai_edge_litert.interpreter.Interpreter``, or :class:`CoralDependencyError`."""
    quiet_native_logs()
    return _import("ai_edge_litert.interpreter", "LiteRT (ai-edge-litert)").Interpreter


def litert_load_delegate():
    """``ai_edge_litert.interpreter.load_delegate`` (loads a delegate library such as libedgetpu)."""
    quiet_native_logs()
    return _import("ai_edge_litert.interpreter", "LiteRT (ai-edge-litert)").load_delegate


def import_tflite_parser() -> ModuleType:
    """The ``tflite`` flatbuffer parser package, or :class:`CoralDependencyError`."""
    return _import("tflite", "the tflite parser package (tflite)")


def flatbuffer_utils() -> ModuleType:
    """TensorFlow's mutable flatbuffer helpers (``tensorflow.lite.tools.flatbuffer_utils``)."""
    import_tensorflow()
    return _import("tensorflow.lite.tools.flatbuffer_utils", "TensorFlow Lite flatbuffer tools")


def litert_flatbuffers() -> tuple[ModuleType, ModuleType]:
    """LiteRT's flatbuffer helpers and schema (``ai_edge_litert.tools.flatbuffer_utils``,
    ``ai_edge_litert.schema_py_generated``): read, edit and write ``.tflite`` files without TensorFlow."""
    quiet_native_logs()
    fbu = _import("ai_edge_litert.tools.flatbuffer_utils", "LiteRT (ai-edge-litert) flatbuffer tools")
    return fbu, _import("ai_edge_litert.schema_py_generated", "LiteRT (ai-edge-litert) schema")


EDGETPU_LIBRARY = "libedgetpu.so.1"  # Coral's LiteRT delegate (Linux; libedgetpu.1.dylib / edgetpu.dll elsewhere)


def edgetpu_library_present(library: str = EDGETPU_LIBRARY) -> tuple[bool, str]:
    """(present, reason): can the Edge TPU runtime library be loaded? Loads it with ctypes, runs nothing."""
    import ctypes

    try:
        ctypes.CDLL(library)
    except OSError as err:
        return False, f"{library} is not installed ({str(err).splitlines()[0]})"
    return True, f"{library} found"


def google_pycoral() -> ModuleType | None:
    """Google's pycoral (``pycoral.pipeline`` + ``pycoral.utils.edgetpu``) if installed, else None.

    Never imports the unrelated PyPI ``pycoral``: the package directory is checked for Google's
    module files before anything is executed.
    """
    try:
        spec = importlib.util.find_spec("pycoral")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    roots = [Path(p) for p in spec.submodule_search_locations]
    needed = ("pipeline/pipelined_model_runner.py", "utils/edgetpu.py")
    if not any(all((root / rel).is_file() for rel in needed) for root in roots):
        return None
    try:
        importlib.import_module("pycoral.pipeline.pipelined_model_runner")
        return importlib.import_module("pycoral.utils.edgetpu")
    except Exception:  # a broken install (e.g. libedgetpu missing) is reported as "not available"
        return None


def edgetpu_compiler_path() -> str | None:
    """Path of ``edgetpu_compiler`` if it is on PATH, else None."""
    return shutil.which("edgetpu_compiler")


class quiet_fds:
    """Silence C++ chatter on fds 1/2 (restored afterwards; Python errors still raise).

    For the TFLite converter and for LiteRT interpreters, whose XNNPACK delegate prints an INFO line
    on creation whatever ``TF_CPP_MIN_LOG_LEVEL`` says when TensorFlow is not imported.
    """

    def __enter__(self):
        self._saved = [os.dup(1), os.dup(2)]
        self._null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(self._null, 1)
        os.dup2(self._null, 2)
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        for fd in (*self._saved, self._null):
            os.close(fd)
        return False
