"""The labelled-dataset format: graphs with oracle schedules, in JSON-lines shards.

A dataset is a directory::

    <dir>/manifest.json        what produced it: generator config, hardware, objective, solver, seed...
    <dir>/shard-00000.jsonl    one record per line (below), records in index order
    <dir>/shard-00001.jsonl    ...

Each record::

    {"index": int, "graph": <SPEC graph JSON>, "assignment": [stage by node id],
     "objective": float, "optimal": bool|null, "gap": float|null, "solve_time_s": float,
     "solver": str}

``objective`` is the shared evaluator's value of ``assignment`` (never the solver's own figure).
Shards are written atomically (temp file + rename), so a shard file is either complete or absent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from respect_jax.graphs.graph import Graph, GraphError, graph_from_dict, write_json_atomic

RECORD_FIELDS = ("index", "graph", "assignment", "objective", "optimal", "gap", "solve_time_s", "solver")


@dataclass(frozen=True)
class LabelledGraph:
    """One graph with its oracle schedule (assignment by node id)."""

    index: int
    graph: Graph
    assignment: np.ndarray
    objective: float
    optimal: bool | None
    gap: float | None
    solve_time_s: float
    solver: str

    def to_record(self) -> dict:
        return {
            "index": self.index,
            "graph": self.graph.to_dict(),
            "assignment": [int(x) for x in self.assignment],
            "objective": float(self.objective),
            "optimal": self.optimal,
            "gap": self.gap,
            "solve_time_s": float(self.solve_time_s),
            "solver": self.solver,
        }


def shard_name(shard: int) -> str:
    return f"shard-{shard:05d}.jsonl"


def write_shard(directory: str | Path, shard: int, items: list[LabelledGraph]) -> Path:
    """Write one shard atomically; returns its path."""
    import os
    import tempfile

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / shard_name(shard)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w") as fh:
            for item in items:
                fh.write(json.dumps(item.to_record(), separators=(",", ":")) + "\n")
        _readable(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _readable(path: str | Path) -> None:
    """Give a temp file (created 0600) the usual permissions of a new file (0666 less the umask)."""
    import os

    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def write_manifest(directory: str | Path, manifest: dict) -> None:
    """Write ``<directory>/manifest.json`` atomically."""
    path = Path(directory) / "manifest.json"
    write_json_atomic(manifest, path)
    _readable(path)


def read_manifest(directory: str | Path) -> dict:
    path = Path(directory) / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"{directory}: not a labelled dataset (no manifest.json)")
    return json.loads(path.read_text())


def record_to_item(record: dict, origin: str) -> LabelledGraph:
    missing = [f for f in RECORD_FIELDS if f not in record]
    if missing:
        raise GraphError(f"{origin}: record is missing {', '.join(missing)}")
    graph = graph_from_dict(record["graph"], origin=origin)
    assignment = np.asarray(record["assignment"], dtype=np.int64)
    if assignment.shape != (graph.num_nodes,):
        raise GraphError(f"{origin}: assignment has {assignment.size} entries for {graph.num_nodes} nodes")
    return LabelledGraph(
        index=int(record["index"]),
        graph=graph,
        assignment=assignment,
        objective=float(record["objective"]),
        optimal=record["optimal"],
        gap=record["gap"],
        solve_time_s=float(record["solve_time_s"]),
        solver=str(record["solver"]),
    )


def shard_paths(directory: str | Path) -> list[Path]:
    return sorted(Path(directory).glob("shard-*.jsonl"))


def load_labelled_dataset(directory: str | Path, limit: int | None = None) -> list[LabelledGraph]:
    """All records of a dataset directory in index order (at most ``limit``)."""
    read_manifest(directory)
    items: list[LabelledGraph] = []
    for path in shard_paths(directory):
        with path.open() as fh:
            for line_no, line in enumerate(fh, 1):
                if line.strip():
                    items.append(record_to_item(json.loads(line), origin=f"{path}:{line_no}"))
                if limit is not None and len(items) >= limit:
                    return sorted(items, key=lambda it: it.index)
    return sorted(items, key=lambda it: it.index)
