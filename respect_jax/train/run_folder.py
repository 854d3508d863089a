"""The files of a run folder, shared by every trainer (GNN policy, RESPECT pointer, real-time policy, ASET DQN,
order policy)::

    <run>/network.json     what rebuilds the network (each trainer's own document, with a ``format`` key)
    <run>/config.yaml      the resolved config of the command that trained the checkpoints (provenance)
    <run>/metrics.jsonl    one JSON record per epoch (or per episode), keyed by an integer step
    <run>/checkpoints/<step>/{params,train}/   orbax: parameters; the rest of the training state

Resume-or-refuse (:func:`check_resume`): a folder that holds checkpoints is resumed only by a command whose
network document is the folder's (up to the keys a trainer names as not part of the network); anything else is a
one-line ValueError and the folder is left as it was. Nothing here knows about a particular network.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from respect_jax.graphs.graph import write_json_atomic
from respect_jax.policy.checkpoints import CHECKPOINT_DIR, CONFIG_FILE, METRICS_FILE, NETWORK_FILE  # noqa: F401
from respect_jax.train.config import flatten


def write_network(run_dir: str | Path, doc: dict) -> dict:
    """Write ``doc`` as the folder's network.json (atomically); returns ``doc``."""
    write_json_atomic(doc, Path(run_dir) / NETWORK_FILE)
    return doc


def _as_json(doc: dict) -> dict:
    """``doc`` as it reads back from network.json (tuples become lists, keys strings)."""
    return json.loads(json.dumps(doc))


def network_differences(old: dict, new: dict, ignore: Sequence[str] = ()) -> list[str]:
    """The keys in which two network documents differ, sorted. ``ignore``: keys (``"train"``) or dotted keys one
    level down (``"dqn.episodes"``) that are not part of the network; a top-level key holding an ignored dotted key
    is compared field by field and its differences are named dotted (``dqn.lr``)."""
    old, new = _as_json(old), _as_json(new)
    top = {k for k in ignore if "." not in k}
    inner: dict[str, set[str]] = {}
    for key in ignore:
        if "." in key:
            head, tail = key.split(".", 1)
            inner.setdefault(head, set()).add(tail)
    differ = []
    for key in sorted(old.keys() | new.keys()):
        if key in top or old.get(key) == new.get(key):
            continue
        a, b = old.get(key), new.get(key)
        if key in inner and isinstance(a, dict) and isinstance(b, dict):
            differ += [f"{key}.{k}" for k in sorted(a.keys() | b.keys())
                       if k not in inner[key] and a.get(k) != b.get(k)]
        else:
            differ.append(key)
    return differ


def check_resume(
    run_dir: Path,
    latest: int | None,
    resume: bool,
    network: dict,
    ignore: Sequence[str] = (),
    hint: str = "",
) -> None:
    """Whether this command may train into ``run_dir`` whose latest checkpoint is ``latest`` (None: none) with
    the network document ``network``. Raises a one-line ValueError (and changes nothing) when the folder holds
    checkpoints and ``resume`` is false, or holds checkpoints of another network (``hint``: appended to the
    advice, e.g. an overwrite option)."""
    if latest is None:
        return
    if not resume:
        raise ValueError(f"{run_dir} already holds checkpoints (step {latest}); use resume=true or a new run_dir")
    path = run_dir / NETWORK_FILE
    if not path.is_file():  # checkpoints without a description: this command's network describes them
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        old = None
    if not isinstance(old, dict):
        raise ValueError(f"{path} is not a JSON object, so its checkpoints cannot be checked; use a new run_dir{hint}")
    differ = network_differences(old, network, ignore)
    if differ:
        raise ValueError(f"{run_dir} holds checkpoints of another network ({', '.join(differ)} differ from this "
                         f"command's); use a new run_dir{hint}")


def clear(run_dir: Path, extra: Iterable[str] = ()) -> None:
    """Remove what a trainer wrote into ``run_dir`` (checkpoints, network.json, metrics.jsonl, config.yaml and
    the files named in ``extra``): an explicit overwrite."""
    shutil.rmtree(run_dir / CHECKPOINT_DIR, ignore_errors=True)
    for name in (NETWORK_FILE, METRICS_FILE, CONFIG_FILE, *extra):
        (run_dir / name).unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------ metrics.jsonl
def append_metrics(path: Path, records: Iterable[dict]) -> None:
    """Append records (one JSON line each) to ``path``."""
    with path.open("a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)


def write_metrics(path: Path, records: Iterable[dict]) -> None:
    """Replace ``path`` by the records (one JSON line each)."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def read_metrics(path: Path) -> list[dict]:
    """Every record of a metrics file (empty when there is none)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def metrics_up_to(path: Path, step: int, key: str = "step") -> list[dict]:
    """The metrics records whose ``key`` is at most ``step`` (a resumed run rewrites what came after); a
    damaged line is a one-line error naming the file and line, except an unterminated last line (a write cut
    by a kill; the records after ``step`` are rewritten anyway), which is dropped."""
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.splitlines()
    kept = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            if number == len(lines) and not text.endswith("\n"):
                break
            message = f"{path}:{number}: not a JSON metrics record ({err.msg}); fix or remove the line"
            raise ValueError(message) from None
        if not isinstance(record, dict) or not isinstance(record.get(key), int):
            raise ValueError(f"{path}:{number}: a metrics record needs an integer '{key}'; fix or remove the line")
        if record[key] <= step:
            kept.append(record)
    return kept


# ------------------------------------------------------------------------------------------ config.yaml
def write_config(run_dir: Path, resolved: str, resumed_at: int | None, log: Callable[[str], None]) -> None:
    """Write ``config.yaml``; a resumed run whose command differs keeps the run's ``config.yaml`` (what
    trained its checkpoints) and saves the new one as ``config.resumed_<step>.yaml``, naming what differs."""
    import yaml

    path = run_dir / CONFIG_FILE
    if resumed_at is None or not path.is_file():
        path.write_text(resolved)
        return
    try:
        old = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        old = None
    old, new = (flatten(d) if isinstance(d, dict) else {} for d in (old, yaml.safe_load(resolved)))
    differ = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    if not differ:
        return
    side = run_dir / f"config.resumed_{resumed_at}.yaml"
    side.write_text(resolved)
    shown = ", ".join(differ[:6]) + (f" (+{len(differ) - 6} more)" if len(differ) > 6 else "")
    log(f"note: resuming at step {resumed_at} with a config that differs in {shown}; {CONFIG_FILE} keeps the "
        f"run's, this one is {side.name}")
