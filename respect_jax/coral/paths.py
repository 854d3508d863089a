"""Files of the Coral commands: outputs checked before any work and written all at once; JSON inputs read
with one-line errors (:func:`read_json`).

A command checks every place it will write (:func:`check_output_file`, :func:`check_output_dir`)
before it loads a model or imports TensorFlow, so a bad path fails in one line and nothing is
written. Files are written atomically (:func:`~respect_jax.graphs.graph.write_text_atomic`), and a
segment folder is built in a hidden staging folder next to ``out_dir`` and renamed into place only
when complete (:class:`StagedDir`), so a failed run leaves no ``out_dir`` (or the previous one unchanged).
Errors are ``ValueError`` with one line (the CLI prints it and exits 2).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from respect_jax.graphs.graph import current_umask

SEGMENT_MANIFEST = "manifest.json"


def nearest_existing(path: Path) -> Path:
    """``path`` itself or its closest ancestor that exists."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _probe_writable(folder: Path, target: Path) -> None:
    """Create and delete a file in ``folder`` (``os.access`` says yes to root even on /sys)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".respect_probe_", dir=folder)
    except OSError as err:
        raise ValueError(f"cannot write {target}: {folder} is not writable ({err.strerror})") from None
    os.close(fd)
    os.unlink(tmp)


def check_output_file(path: str | os.PathLike, what: str = "output") -> Path:
    """Raise ``ValueError`` unless ``path`` can be written as a file (parents may be missing)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what} {path} is a folder, expected a file name")
    base = nearest_existing(path.parent)
    if not base.is_dir():
        raise ValueError(f"cannot write {what} {path}: {base} is not a folder")
    _probe_writable(base, path)
    return path


def check_output_dir(path: str | os.PathLike) -> Path:
    """Raise ``ValueError`` unless ``path`` can become a segment folder.

    An existing ``path`` must be a folder that is empty or holds a previous ``manifest.json``
    (it will be replaced as a whole); any other folder is refused, so no unrelated files are lost.
    """
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"out_dir {path} exists and is not a folder")
        if any(path.iterdir()) and not (path / SEGMENT_MANIFEST).is_file():
            raise ValueError(
                f"out_dir {path} is a non-empty folder without {SEGMENT_MANIFEST}; "
                "choose a new or empty folder (a previous segment folder is replaced)"
            )
    base = nearest_existing(path.parent)
    if not base.is_dir():
        raise ValueError(f"cannot write out_dir {path}: {base} is not a folder")
    _probe_writable(base, path)
    return path


def _make_parents(folder: Path) -> list[Path]:
    """``mkdir -p folder``; returns the folders it created, outermost first."""
    missing = []
    p = Path(os.path.abspath(folder))
    while not p.exists():
        missing.append(p)
        p = p.parent
    for p in reversed(missing):
        p.mkdir()
    return list(reversed(missing))


class StagedDir:
    """Build a folder next to ``out`` and put it in place of ``out`` only on success.

    ``with StagedDir(out) as tmp: ...write into tmp...``: on a normal exit the previous ``out``
    (if any) is renamed aside, ``tmp`` renamed to ``out`` and the old one deleted; on an exception
    ``tmp`` and any parent folders created for it are removed and ``out`` is left as it was.
    """

    def __init__(self, out: str | os.PathLike) -> None:
        self.out = Path(os.path.abspath(out))

    def __enter__(self) -> Path:
        check_output_dir(self.out)
        self._created = _make_parents(self.out.parent)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.staging-", dir=self.out.parent))
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            try:
                self._publish()
                return False
            except BaseException:
                self._cleanup()
                raise
        self._cleanup()
        return False

    def _publish(self) -> None:
        old = None
        if self.out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.old-", dir=self.out.parent))
            old.rmdir()
            os.rename(self.out, old)
        try:
            os.rename(self.tmp, self.out)
        except BaseException:
            if old is not None:
                os.rename(old, self.out)
            raise
        os.chmod(self.out, 0o777 & ~current_umask())
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def _cleanup(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
        for folder in reversed(self._created):  # innermost first; only if still empty
            try:
                folder.rmdir()
            except OSError:
                break


def read_json(path: str | os.PathLike, what: str):
    """The JSON document in ``path``; ``ValueError`` naming the file if it cannot be read or parsed."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as err:
        raise ValueError(f"{path}: cannot read {what} ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err.reason})") from None
