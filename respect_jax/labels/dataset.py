"""The labelled-dataset format: graphs with oracle schedules, in JSON-lines shards.

A dataset is a directory::

    <dir>/manifest.json        what produced it: generator config, hardware, objective, solver, seed...
    <dir>/shard-00000.jsonl    one record per line (below), records in index order
    <dir>/shard-00001.jsonl    ...

Each record::

    {"index": int, "graph": <graph JSON: Graph.to_dict()>, "assignment": [stage by node id],
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
    manifest = parse_json(path.read_text(), str(path))
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(manifest).__name__}")
    return manifest


def parse_json(text: str, origin: str):
    """``json.loads`` whose error names the file (and line) it came from."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{origin}: not JSON ({err})") from None


def record_to_item(record: dict, origin: str, stages: int | None = None) -> LabelledGraph:
    """One labelled record, checked: its schedule must be valid (stages in [0, ``stages``) when given, every
    edge forward) and its objective a positive finite number, since training imitates it and evaluation
    measures gaps against it."""
    if not isinstance(record, dict):
        raise GraphError(f"{origin}: expected a JSON object, got {type(record).__name__}")
    missing = [f for f in RECORD_FIELDS if f not in record]
    if missing:
        raise GraphError(f"{origin}: record is missing {', '.join(missing)}")
    graph = graph_from_dict(record["graph"], origin=origin)
    assignment = np.asarray(record["assignment"], dtype=np.int64)
    if assignment.shape != (graph.num_nodes,):
        raise GraphError(f"{origin}: assignment has {assignment.size} entries for {graph.num_nodes} nodes")
    if assignment.size and (assignment.min() < 0 or (stages is not None and assignment.max() >= stages)):
        low, high = int(assignment.min()), int(assignment.max())
        raise GraphError(f"{origin}: assignment stages must be in [0, {stages}), got {low}..{high}")
    if graph.num_edges and np.any(assignment[graph.edges[:, 0]] > assignment[graph.edges[:, 1]]):
        raise GraphError(f"{origin}: assignment puts a consumer on an earlier stage than its producer")
    if not np.isfinite(float(record["objective"])) or float(record["objective"]) <= 0:
        raise GraphError(f"{origin}: objective must be a positive finite number, got {record['objective']!r}")
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
    """All records of a dataset directory in index order (at most ``limit``); ValueError/GraphError on a bad
    record, a repeated index, or (finished datasets, no limit) fewer or more records than the manifest's summary."""
    manifest = read_manifest(directory)
    stages = (manifest.get("hardware") or {}).get("stages")
    stages = int(stages) if isinstance(stages, int) and not isinstance(stages, bool) else None
    items: list[LabelledGraph] = []
    for path in shard_paths(directory):
        with path.open() as fh:
            for line_no, line in enumerate(fh, 1):
                if line.strip():
                    origin = f"{path}:{line_no}"
                    items.append(record_to_item(parse_json(line, origin), origin=origin, stages=stages))
                if limit is not None and len(items) >= limit:
                    return _in_index_order(items, directory)
    expected = (manifest.get("summary") or {}).get("graphs")
    if isinstance(expected, int) and len(items) != expected:
        raise ValueError(f"{directory}: {len(items)} records in the shards, the manifest's summary says {expected}")
    return _in_index_order(items, directory)


def _in_index_order(items: list[LabelledGraph], directory) -> list[LabelledGraph]:
    items = sorted(items, key=lambda it: it.index)
    repeated = sorted({a.index for a, b in zip(items[:-1], items[1:], strict=True) if a.index == b.index})
    if repeated:
        raise ValueError(f"{directory}: record index {repeated[0]} appears more than once")
    return items
