"""ONNX import (respect_jax.graphs.onnx_import) on small models built with ``onnx.helper``.

Every expected count is worked out by hand in the test (no framework, no ONNX Runtime).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from respect_jax.graphs.graph import load_graph
from respect_jax.graphs.onnx_import import graph_from_onnx, onnx_unknown_mac_operators

F = TensorProto.FLOAT


def _init(name: str, shape, dtype=np.float32):
    return numpy_helper.from_array(np.zeros(shape, dtype=dtype), name)


def _save(tmp_path, nodes, inputs, outputs, inits, name="m", custom_domain=None):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(custom_domain, 1)] if custom_domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    if not custom_domain:
        onnx.checker.check_model(model)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _edges(g) -> set[tuple[str, str]]:
    return {(g.node_names[u], g.node_names[v]) for u, v in g.edges.tolist()}


def _by_name(g, field: str) -> dict[str, int]:
    return dict(zip(g.node_names, getattr(g, field).tolist(), strict=True))


def conv_chain(tmp_path):
    """X[1,3,8,8] -> Conv 3x3 (4 out, pad 1, bias) -> Relu -> Conv 1x1 (8 out) -> Flatten -> Gemm (10)."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", kernel_shape=[1, 1]),
        helper.make_node("Flatten", ["c2"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1),
    ]
    inits = [_init("w1", (4, 3, 3, 3)), _init("b1", (4,)), _init("w2", (8, 4, 1, 1)), _init("wf", (10, 512)),
             _init("bf", (10,))]  # fmt: skip
    return _save(
        tmp_path,
        nodes,
        [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", F, [1, 10])],
        inits,
        "chain",
    )


def test_conv_chain_counts_by_hand(tmp_path):
    g = graph_from_onnx(conv_chain(tmp_path))
    assert g.name == "chain"
    assert g.node_names == ("x", "conv1", "relu1", "conv2", "fc")  # Flatten dropped
    assert g.ops == ("Input", "Conv", "Relu", "Conv", "Gemm")
    # params: conv1 4*3*3*3 + 4; conv2 8*4; fc 10*512 + 10
    assert g.params.tolist() == [0, 112, 0, 32, 5130]
    # outputs: 3*8*8; 4*8*8; 4*8*8; 8*8*8; 10
    assert g.output_size.tolist() == [192, 256, 256, 512, 10]
    # MACs: conv1 256 outputs * 3*3*3; conv2 512 * 4; Gemm 10 * K=512
    assert g.macs.tolist() == [0, 256 * 27, 0, 512 * 4, 10 * 512]
    # the Flatten's consumer gets the edge from the Flatten's producer
    assert _edges(g) == {("x", "conv1"), ("conv1", "relu1"), ("relu1", "conv2"), ("conv2", "fc")}
    assert onnx_unknown_mac_operators(g) == []


def test_residual_block_with_symbolic_batch_and_identity(tmp_path):
    """x[N,4,6,6] -> conv_a -> relu_a -> conv_b -> add(+x) -> relu -> Identity -> y."""
    nodes = [
        helper.make_node("Conv", ["x", "wa", "ba"], ["a"], name="conv_a", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["ra"], name="relu_a"),
        helper.make_node("Conv", ["ra", "wb"], ["b"], name="conv_b", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["b", "x"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["r"], name="relu_out"),
        helper.make_node("Identity", ["r"], ["y"], name="id"),
    ]
    path = _save(
        tmp_path,
        nodes,
        [helper.make_tensor_value_info("x", F, ["N", 4, 6, 6])],
        [helper.make_tensor_value_info("y", F, ["N", 4, 6, 6])],
        [_init("wa", (4, 4, 3, 3)), _init("ba", (4,)), _init("wb", (4, 4, 3, 3))],
        "res",
    )
    g = graph_from_onnx(path, name="resblock")
    assert g.name == "resblock"
    assert g.node_names == ("x", "conv_a", "relu_a", "conv_b", "add", "relu_out")  # Identity dropped
    assert _by_name(g, "params") == {"x": 0, "conv_a": 148, "relu_a": 0, "conv_b": 144, "add": 0, "relu_out": 0}
    assert set(g.output_size.tolist()) == {144}  # N -> 1: 4*6*6 everywhere
    # conv: 144 outputs * 4*3*3; add: (2 inputs - 1) * 144
    assert _by_name(g, "macs") == {"x": 0, "conv_a": 5184, "relu_a": 0, "conv_b": 5184, "add": 144, "relu_out": 0}
    assert _edges(g) == {
        ("x", "conv_a"), ("conv_a", "relu_a"), ("relu_a", "conv_b"), ("conv_b", "add"), ("x", "add"),
        ("add", "relu_out"),
    }  # fmt: skip


def test_multi_output_node_and_folded_subgraphs(tmp_path):
    """Split with two outputs (one node, sizes summed, edges to both consumers); a Dropout with its
    mask; a weight dequantised from int8 (folded, still counted); a PyTorch-style flatten whose shape
    comes from Shape -> Gather -> Unsqueeze -> Concat (dropped); a Constant feeding a MatMul."""
    nodes = [
        helper.make_node("Split", ["x", "sizes"], ["s0", "s1"], name="split", axis=1),
        helper.make_node("DequantizeLinear", ["wq", "wscale"], ["wdq"], name="deq_w"),
        helper.make_node("Conv", ["s0", "wdq"], ["c"], name="conv", kernel_shape=[1, 1]),
        helper.make_node("Dropout", ["s1"], ["d", "mask"], name="drop"),
        helper.make_node("Sigmoid", ["d"], ["g"], name="gate"),
        helper.make_node("Concat", ["c", "g"], ["cat"], name="concat", axis=1),
        helper.make_node("Shape", ["cat"], ["shp"], name="shape"),
        helper.make_node("Gather", ["shp", "zero"], ["n"], name="g0", axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"], name="unsq"),
        helper.make_node("Concat", ["n1", "minus1"], ["newshape"], name="shape_cat", axis=0),
        helper.make_node("Reshape", ["cat", "newshape"], ["flat"], name="reshape"),
        helper.make_node("Constant", [], ["wm"], name="const_w",
                         value=numpy_helper.from_array(np.ones((112, 5), np.float32))),
        helper.make_node("MatMul", ["flat", "wm"], ["y"], name="matmul"),
    ]  # fmt: skip
    inits = [
        numpy_helper.from_array(np.array([3, 3], np.int64), "sizes"),  # int64: not a weight
        _init("wq", (4, 3, 1, 1), np.int8),
        numpy_helper.from_array(np.array(0.1, np.float32), "wscale"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "ax0"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
    ]
    path = _save(
        tmp_path,
        nodes,
        [helper.make_tensor_value_info("x", F, ["batch", 6, 4, 4])],  # symbolic batch: the flatten's -1 resolves
        [helper.make_tensor_value_info("y", F, ["batch", 5])],
        inits,
        "multi",
    )
    g = graph_from_onnx(path)
    assert g.node_names == ("x", "split", "conv", "gate", "concat", "matmul")
    # Split: two outputs of 3*4*4; conv: 4*4*4; concat: (4+3)*16 = 112; matmul: 5
    assert _by_name(g, "output_size") == {"x": 96, "split": 96, "conv": 64, "gate": 48, "concat": 112, "matmul": 5}
    # conv reads the dequantised int8 weight (4*3, folded); matmul reads the Constant node's 112*5
    assert _by_name(g, "params") == {"x": 0, "split": 0, "conv": 12, "gate": 0, "concat": 0, "matmul": 560}
    # conv: 64 outputs * 3 in-channels; matmul: 5 outputs * K=112
    assert _by_name(g, "macs") == {"x": 0, "split": 0, "conv": 192, "gate": 0, "concat": 0, "matmul": 560}
    assert _edges(g) == {
        ("x", "split"), ("split", "conv"), ("split", "gate"), ("conv", "concat"), ("gate", "concat"),
        ("concat", "matmul"),
    }  # fmt: skip


def test_conv_transpose_and_pool_macs_and_unknown_ops(tmp_path):
    """ConvTranspose 2->3 channels, kernel 2, stride 2 on 4x4; MaxPool 2x2; Exp (no MAC rule); a
    custom-domain op whose output shape inference cannot know."""
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w"], ["t"], name="deconv", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("MaxPool", ["t"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Exp", ["p"], ["e"], name="exp"),
        helper.make_node("Mystery", ["e"], ["y"], name="magic", domain="my.ops"),
    ]
    path = _save(
        tmp_path,
        nodes,
        [helper.make_tensor_value_info("x", F, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", F, None)],
        [_init("w", (2, 3, 2, 2))],
        "deconv",
        custom_domain="my.ops",
    )
    unknown_shapes: list[str] = []
    g = graph_from_onnx(path, unknown_shapes=unknown_shapes)
    assert g.ops == ("Input", "ConvTranspose", "MaxPool", "Exp", "my.ops:Mystery")
    # deconv: 32 input elements * 3 out-channels * 2*2 = 384; out 3*8*8; pool: 48 outputs * 4
    assert g.output_size.tolist() == [32, 192, 48, 48, 0]
    assert g.macs.tolist() == [0, 384, 192, 0, 0]
    assert g.params.tolist() == [0, 24, 0, 0, 0]
    assert onnx_unknown_mac_operators(g) == ["exp (Exp)", "magic (my.ops:Mystery)"]
    assert unknown_shapes == ["magic (my.ops:Mystery)"]


def test_bad_files_are_one_line_value_errors(tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff\xff\xff\xff not a protobuf")
    with pytest.raises(ValueError, match="not a readable ONNX model"):
        graph_from_onnx(junk)
    with pytest.raises(ValueError, match="cannot read"):
        graph_from_onnx(tmp_path / "missing.onnx")


def test_respect_export_writes_the_onnx_graph(tmp_path):
    path = conv_chain(tmp_path)
    out = tmp_path / "g.json"
    proc = subprocess.run(
        [sys.executable, "-m", "respect_jax.cli.export", f"model={path}", f"out={out}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "chain: 5 nodes, 4 edges" in proc.stderr
    assert load_graph(out).to_dict() == graph_from_onnx(path).to_dict()
    assert json.loads(out.read_text())["name"] == "chain"


def test_respect_export_refuses_a_non_onnx_file_before_writing(tmp_path):
    from omegaconf import OmegaConf

    from respect_jax.cli.export import export

    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"onnx")
    cfg = OmegaConf.create(
        {"model": [str(conv_chain(tmp_path)), str(bad)], "include_top": False, "input_size": None,
         "out_dir": str(tmp_path / "g"), "out": None}
    )  # fmt: skip
    with pytest.raises(ValueError, match="model.onnx is not an ONNX model") as err:
        export(cfg)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "g").exists()  # the good model of the list is not written either


def test_initializers_listed_as_graph_inputs_are_weights_not_inputs(tmp_path):
    """Exporters before IR version 4 list every initializer among the graph inputs too."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    graph = helper.make_graph(
        nodes, "old", [helper.make_tensor_value_info("x", F, [1, 8]), helper.make_tensor_value_info("w", F, [8, 3])],
        [helper.make_tensor_value_info("y", F, [1, 3])], initializer=[_init("w", (8, 3))],
    )  # fmt: skip
    path = tmp_path / "old.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    g = graph_from_onnx(path)
    assert g.node_names == ("x", "mm") and g.params.tolist() == [0, 24] and g.macs.tolist() == [0, 24]


def test_the_python_api_imports_onnx(tmp_path):
    """``rj.from_onnx`` is the importer: a MatMul with a 3 x 4 initializer has 12 parameters and 12 MACs."""
    import respect_jax as rj

    node = helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")
    path = _save(tmp_path, [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [_init("W", (3, 4))])
    graph = rj.from_onnx(path)
    assert graph.to_dict() == graph_from_onnx(path).to_dict()
    assert _by_name(graph, "params")["mm"] == 12 and _by_name(graph, "macs")["mm"] == 12
