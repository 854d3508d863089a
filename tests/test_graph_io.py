"""Loading and saving the SPEC JSON graph format, with full validation."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from respect_jax.graphs import Graph, GraphError, load_graph, save_graph

GOOD = {
    "name": "tiny",
    "source": "hand-written",
    "nodes": [
        {"id": 0, "name": "in", "op": "InputLayer", "params": 0, "output_size": 12, "macs": 0},
        {"id": 1, "name": "conv", "op": "Conv2D", "params": 30, "output_size": 8, "macs": 240},
        {"id": 2, "name": "bn", "op": "BatchNormalization", "params": 4, "output_size": 8, "macs": 16},
        {"id": 3, "name": "add", "op": "Add", "params": 0, "output_size": 8, "macs": 8},
    ],
    "edges": [[0, 1], [1, 2], [2, 3], [1, 3]],
}


def write(tmp_path, doc, name="g.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def mutate(fn):
    doc = json.loads(json.dumps(GOOD))
    fn(doc)
    return doc


def test_roundtrip(tmp_path):
    graph = load_graph(write(tmp_path, GOOD))
    assert graph.num_nodes == 4 and graph.num_edges == 4
    assert graph.params.tolist() == [0, 30, 4, 0]
    assert graph.depth().tolist() == [0, 1, 2, 3]
    assert graph.height().tolist() == [3, 2, 1, 0]
    out = tmp_path / "out" / "copy.json"
    save_graph(graph, out)
    again = load_graph(out)
    assert again.to_dict() == graph.to_dict()
    assert graph.to_dict()["edges"] == GOOD["edges"]


def test_nodes_may_be_listed_in_any_order(tmp_path):
    doc = mutate(lambda d: d["nodes"].reverse())
    assert load_graph(write(tmp_path, doc)).node_names == ("in", "conv", "bn", "add")


BAD = [
    ("cycle", lambda d: d["edges"].append([3, 1]), "has a cycle through node"),
    ("self_loop", lambda d: d["edges"].append([2, 2]), "edge [2, 2] is a self-loop"),
    ("dangling_edge", lambda d: d["edges"].append([2, 9]), "edge [2, 9] refers to a node outside 0..3"),
    ("duplicate_edge", lambda d: d["edges"].append([0, 1]), "edge [0, 1] appears more than once"),
    ("duplicate_id", lambda d: d["nodes"][3].update(id=2), "node id 2 is duplicated"),
    ("id_out_of_range", lambda d: d["nodes"][3].update(id=7), "node entry 3 has id 7"),
    ("negative", lambda d: d["nodes"][1].update(params=-5), "node 1 has params=-5"),
    ("non_integer", lambda d: d["nodes"][2].update(macs=1.5), "node 2 has macs=1.5"),
    ("too_big", lambda d: d["nodes"][1].update(params=10**30), "node 1 has params=" + str(10**30)),
    ("bool_count", lambda d: d["nodes"][2].update(output_size=True), "node 2 has output_size=True"),
    ("missing_field", lambda d: d["nodes"][1].pop("output_size"), "node id 1 is missing field 'output_size'"),
    ("missing_top", lambda d: d.pop("edges"), "missing top-level field 'edges'"),
    ("bad_edge_shape", lambda d: d["edges"].append([1, 2, 3]), "edge [1, 2, 3] is not a [producer, consumer] pair"),
    ("empty", lambda d: d.update(nodes=[], edges=[]), "'nodes' must be a non-empty list"),
]


@pytest.mark.parametrize("case,change,message", BAD, ids=[b[0] for b in BAD])
def test_rejects_bad_files_with_one_line_naming_file(tmp_path, case, change, message):
    path = write(tmp_path, mutate(change), name=f"{case}.json")
    with pytest.raises(GraphError) as info:
        load_graph(path)
    text = str(info.value)
    assert message in text
    assert str(path) in text
    assert "\n" not in text


def test_rejects_unreadable_and_non_json(tmp_path):
    with pytest.raises(GraphError, match="cannot read"):
        load_graph(tmp_path / "missing.json")
    with pytest.raises(GraphError, match="not valid JSON"):
        load_graph(write(tmp_path, "{oops", name="broken.json"))


def test_save_is_atomic_and_failure_writes_nothing(tmp_path, monkeypatch):
    graph = load_graph(write(tmp_path, GOOD))
    target = tmp_path / "saved.json"
    save_graph(graph, target)
    before = target.read_text()

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(os, "replace", boom)  # the temporary file is written, its rename fails
    with pytest.raises(RuntimeError):
        save_graph(graph, target)
    assert target.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json", "saved.json"]


def test_graph_object_validation():
    with pytest.raises(GraphError, match="negative params"):
        Graph(name="x", params=[1, -1], output_size=[0, 0], macs=[0, 0], edges=[[0, 1]])
    with pytest.raises(GraphError, match="cycle"):
        Graph(name="x", params=[1, 1], output_size=[0, 0], macs=[0, 0], edges=[[0, 1], [1, 0]])
    g = Graph(name="x", params=[1, 2], output_size=[0, 0], macs=[0, 0], edges=np.zeros((0, 2)))
    assert g.num_edges == 0 and g.topological_order().tolist() == [0, 1]


def test_an_integer_beyond_pythons_digit_limit_names_the_file(tmp_path):
    path = tmp_path / "huge.json"
    node = '{"id": 0, "name": "a", "op": "X", "params": ' + "9" * 5000 + ', "output_size": 1, "macs": 1}'
    path.write_text('{"name": "huge", "nodes": [' + node + '], "edges": []}')
    with pytest.raises(GraphError, match=f"^{path}: not valid JSON"):
        load_graph(path)
