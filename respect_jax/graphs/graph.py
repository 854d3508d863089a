"""The validated computational graph (NumPy, host side) and its SPEC JSON format.

A :class:`Graph` is what every part of respect-jax agrees on (SPEC section 1): nodes ``0..N-1``
with integer ``params`` / ``output_size`` / ``macs`` and a list of ``[producer, consumer]`` edges
forming a DAG. Construction validates everything; a bad graph raises :class:`GraphError` with a
one-line message naming the file and the offending node or edge.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

NODE_FIELDS = ("id", "name", "op", "params", "output_size", "macs")
COUNT_FIELDS = ("params", "output_size", "macs")


class GraphError(ValueError):
    """A graph file or graph object violates the SPEC format (message is one line)."""


@dataclass(frozen=True)
class Graph:
    """A DNN layer graph. Arrays are read-only.

    Attributes:
        name: graph name.
        params: int64[N] weights per node.
        output_size: int64[N] output tensor elements per node (batch 1).
        macs: int64[N] multiply-accumulates per node.
        edges: int64[E, 2] ``(producer, consumer)`` pairs, unique, acyclic.
        node_names: N layer names.
        ops: N operator/layer type names.
        source: free text saying where the graph came from.
    """

    name: str
    params: np.ndarray
    output_size: np.ndarray
    macs: np.ndarray
    edges: np.ndarray
    node_names: tuple[str, ...] = field(default=())
    ops: tuple[str, ...] = field(default=())
    source: str = ""
    # depth, height and SPEC order, computed once (the graph is immutable)
    _derived: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.params)
        for attr in COUNT_FIELDS:
            arr = np.asarray(getattr(self, attr), dtype=np.int64).reshape(-1)
            if len(arr) != n:
                raise GraphError(f"graph {self.name!r}: {attr} has {len(arr)} entries, expected {n}")
            bad = np.flatnonzero(arr < 0)
            if len(bad):
                raise GraphError(f"graph {self.name!r}: node {bad[0]} has negative {attr} {arr[bad[0]]}")
            arr.setflags(write=False)
            object.__setattr__(self, attr, arr)
        edges = np.asarray(self.edges, dtype=np.int64).reshape(-1, 2)
        edges.setflags(write=False)
        object.__setattr__(self, "edges", edges)
        if not self.node_names:
            object.__setattr__(self, "node_names", tuple(f"n{i}" for i in range(n)))
        if not self.ops:
            object.__setattr__(self, "ops", tuple("Synthetic" for _ in range(n)))
        _check_edges(self.name, n, edges)

    @property
    def num_nodes(self) -> int:
        return len(self.params)

    @property
    def num_edges(self) -> int:
        return len(self.edges)

    def predecessors(self) -> list[list[int]]:
        """Predecessor ids of every node (sorted)."""
        preds: list[list[int]] = [[] for _ in range(self.num_nodes)]
        for u, v in self.edges.tolist():
            preds[v].append(u)
        return [sorted(p) for p in preds]

    def successors(self) -> list[list[int]]:
        """Successor ids of every node (sorted)."""
        succs: list[list[int]] = [[] for _ in range(self.num_nodes)]
        for u, v in self.edges.tolist():
            succs[u].append(v)
        return [sorted(s) for s in succs]

    def _cached(self, name: str, compute) -> np.ndarray:
        """A derived read-only array, computed once per graph (the graph is immutable)."""
        if name not in self._derived:
            value = np.asarray(compute())
            value.setflags(write=False)
            self._derived[name] = value
        return self._derived[name]

    def depth(self) -> np.ndarray:
        """int64[N] longest-path depth from the sources (ASAP level; sources are 0). Read-only."""
        return self._cached("depth", lambda: _longest_path(self.num_nodes, self.predecessors(),
                                                           topological_order_kahn(self)))

    def height(self) -> np.ndarray:
        """int64[N] longest-path distance to a sink (sinks are 0). Read-only."""
        return self._cached("height", lambda: _longest_path(self.num_nodes, self.successors(),
                                                            topological_order_kahn(self)[::-1]))

    def topological_order(self) -> np.ndarray:
        """int64[N] the SPEC node order: by depth from the sources, ties by id. Read-only."""
        return self._cached("topological_order", lambda: np.lexsort((np.arange(self.num_nodes), self.depth())))

    def to_dict(self) -> dict:
        """The SPEC JSON document of this graph."""
        nodes = [
            {
                "id": i,
                "name": self.node_names[i],
                "op": self.ops[i],
                "params": int(self.params[i]),
                "output_size": int(self.output_size[i]),
                "macs": int(self.macs[i]),
            }
            for i in range(self.num_nodes)
        ]
        return {
            "name": self.name,
            "source": self.source,
            "nodes": nodes,
            "edges": self.edges.tolist(),
        }


def _check_edges(name: str, n: int, edges: np.ndarray) -> None:
    if n == 0:
        raise GraphError(f"graph {name!r}: has no nodes")
    for u, v in edges.tolist():
        if not (0 <= u < n and 0 <= v < n):
            raise GraphError(f"graph {name!r}: edge [{u}, {v}] refers to a node outside 0..{n - 1}")
        if u == v:
            raise GraphError(f"graph {name!r}: edge [{u}, {v}] is a self-loop")
    keys = edges[:, 0] * n + edges[:, 1]
    uniq, counts = np.unique(keys, return_counts=True)
    if len(uniq) != len(keys):
        dup = int(uniq[np.argmax(counts > 1)])
        raise GraphError(f"graph {name!r}: edge [{dup // n}, {dup % n}] appears more than once")
    indeg = np.bincount(edges[:, 1], minlength=n) if len(edges) else np.zeros(n, np.int64)
    succs: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges.tolist():
        succs[u].append(v)
    indeg = indeg.copy()
    stack = [i for i in range(n) if indeg[i] == 0]
    seen = 0
    while stack:
        u = stack.pop()
        seen += 1
        for v in succs[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                stack.append(v)
    if seen != n:
        on_cycle = int(np.flatnonzero(indeg > 0)[0])
        raise GraphError(f"graph {name!r}: has a cycle through node {on_cycle}")


def topological_order_kahn(graph: Graph, priority: np.ndarray | None = None) -> list[int]:
    """A topological order by Kahn's algorithm: among the ready nodes, the one of least ``priority`` (int[N] by
    node id, distinct values) first; default: the smallest id. O((N + E) log N)."""
    n = graph.num_nodes
    key = list(range(n)) if priority is None else np.asarray(priority).tolist()
    indeg = np.bincount(graph.edges[:, 1], minlength=n).tolist() if graph.num_edges else [0] * n
    return kahn_order(indeg, graph.successors(), key)


def has_unique_order(graph: Graph) -> bool:
    """True when ``graph`` has one topological order only (every consecutive pair of its
    :meth:`~Graph.topological_order` is an edge): then every valid schedule is a contiguous split of that order, so the
    exact contiguous split is the optimum."""
    n = graph.num_nodes
    if n <= 1:
        return True
    if len(graph.edges) == 0:
        return False
    order = graph.topological_order().astype(np.int64)
    keys = graph.edges[:, 0].astype(np.int64) * n + graph.edges[:, 1].astype(np.int64)
    return bool(np.isin(order[:-1] * n + order[1:], keys).all())


def kahn_order(indeg: list[int], succs: list[list[int]], key: list) -> list[int]:
    """Kahn's algorithm on prepared in-degrees (consumed: pass a copy to keep them) and successor lists, the ready
    node of least ``key`` first (``key[i]`` distinct, comparable); returns the node ids in order."""
    import heapq

    heap = [(key[i], i) for i in range(len(key)) if indeg[i] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, u = heapq.heappop(heap)
        order.append(u)
        for v in succs[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, (key[v], v))
    return order


def _longest_path(n: int, incoming: list[list[int]], order) -> np.ndarray:
    level = np.zeros(n, dtype=np.int64)
    for v in order:
        if incoming[v]:
            level[v] = 1 + max(level[u] for u in incoming[v])
    return level


# ----------------------------------------------------------------------------- JSON io


MAX_COUNT = 2**53  # params, output_size, macs: exact as float64 and int64 (the exact solvers' models); the
# JAX evaluator pads them as float32, exact up to 2**24 only (README, "Precision")


def graph_from_dict(doc: dict, origin: str = "<dict>") -> Graph:
    """Build a :class:`Graph` from a SPEC JSON document; errors name ``origin``."""
    if not isinstance(doc, dict):
        raise GraphError(f"{origin}: top level must be a JSON object")
    for key in ("name", "nodes", "edges"):
        if key not in doc:
            raise GraphError(f"{origin}: missing top-level field {key!r}")
    nodes = doc["nodes"]
    if not isinstance(nodes, list) or not nodes:
        raise GraphError(f"{origin}: 'nodes' must be a non-empty list")
    n = len(nodes)
    rows: list[dict | None] = [None] * n
    for pos, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise GraphError(f"{origin}: node entry {pos} is not an object")
        for key in NODE_FIELDS:
            if key not in node:
                where = f"node id {node['id']}" if "id" in node else f"node entry {pos}"
                raise GraphError(f"{origin}: {where} is missing field {key!r}")
        nid = node["id"]
        if not _is_int(nid) or not (0 <= nid < n):
            raise GraphError(f"{origin}: node entry {pos} has id {nid!r}; ids must be 0..{n - 1}")
        if rows[nid] is not None:
            raise GraphError(f"{origin}: node id {nid} is duplicated")
        for key in COUNT_FIELDS:
            val = node[key]
            if not _is_int(val) or not 0 <= val <= MAX_COUNT:
                raise GraphError(f"{origin}: node {nid} has {key}={val!r}; must be an integer in [0, 2**53]")
        rows[nid] = node
    edges = doc["edges"]
    if not isinstance(edges, list):
        raise GraphError(f"{origin}: 'edges' must be a list of [producer, consumer] pairs")
    for e in edges:
        if not (isinstance(e, list) and len(e) == 2 and all(_is_int(x) for x in e)):
            raise GraphError(f"{origin}: edge {e!r} is not a [producer, consumer] pair of integer ids")
    try:
        return Graph(
            name=str(doc["name"]),
            params=np.array([r["params"] for r in rows], dtype=np.int64),
            output_size=np.array([r["output_size"] for r in rows], dtype=np.int64),
            macs=np.array([r["macs"] for r in rows], dtype=np.int64),
            edges=np.array(edges, dtype=np.int64).reshape(-1, 2),
            node_names=tuple(str(r["name"]) for r in rows),
            ops=tuple(str(r["op"]) for r in rows),
            source=str(doc.get("source", "")),
        )
    except GraphError as err:
        raise GraphError(f"{origin}: {err}") from None


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def load_graph(path: str | os.PathLike) -> Graph:
    """Load and validate a SPEC JSON graph file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise GraphError(f"{path}: cannot read ({err.strerror})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise GraphError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    except ValueError as err:  # e.g. an integer literal longer than Python's digit limit
        raise GraphError(f"{path}: not valid JSON ({err})") from None
    return graph_from_dict(doc, origin=str(path))


def save_graph(graph: Graph, path: str | os.PathLike) -> None:
    """Write ``graph`` as SPEC JSON atomically (temp file + rename)."""
    write_json_atomic(graph.to_dict(), path)


def write_json_atomic(doc, path: str | os.PathLike, indent: int | None = 1) -> None:
    """Write a JSON document so that ``path`` either has the full document or is untouched."""
    write_text_atomic(json.dumps(doc, indent=indent), path)


def write_text_atomic(text: str, path: str | os.PathLike) -> None:
    """Write ``text`` so that ``path`` either has all of it or is untouched (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; give the usual file mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
