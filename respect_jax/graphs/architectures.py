"""Synthetic DNN architectures (generator mode ``arch``): layer graphs composed of real network motifs.

A graph is a **program of blocks**: a stem, then ``S`` stages of blocks (a first, downsampling block
and ``r_s`` repeated blocks), optional filler units and an optional classifier head. Every block type
expands to a fixed **template** of Keras-style layer nodes with a fixed local edge pattern (so the
pure-JAX generator has fixed shapes). The motif families are

* ``plain`` (VGG: fused conv chains, max pooling between stages), ``basic`` and ``bottleneck``
  residual blocks (ResNet-18/50), ``preact`` pre-activation bottlenecks (ResNetV2), ``dwsep``
  depthwise-separable (MobileNet), ``mbconv`` inverted residual (MobileNetV2) and ``mbconv_se``
  with a squeeze-excite side branch (EfficientNet), ``xception`` separable residual blocks,
  ``inception`` multi-branch modules joined by concat with reduction modules, ``incres``
  Inception-ResNet blocks, ``dense`` blocks with transitions, ``nas0..nas2`` NAS-style cells (two
  inputs: the previous and the one before; fixed random "searched" cells), ``transformer`` blocks
  (Q/K/V branches, attention matmuls, MLP, residual adds; Swin-style patch merging between stages).

One graph uses the stem of its first family and one family, or (with probability ``p_hybrid``) two
families: the second takes over from a random stage on (as conv-then-attention hybrids do).
Resolution halves at every stage after the first and widths grow by ``gamma`` per stage (times
``widen`` for the inception families; dense blocks grow by the growth rate per layer and halve in
transitions).

Per-node sizes follow the layer formulas of ``data/models`` (the Keras exporter, batch 1): conv
``k x k``: params ``k^2 cin cout (+ cout)``, MACs ``H W k^2 cin cout``, output ``H W cout``;
depthwise ``k^2 c``; separable ``k^2 cin + cin cout``; batch norm ``4 c`` params and one MAC per
element; dense ``cin cout + cout``; layer norm ``2 c``; pooling ``window`` MACs per output element;
add/multiply one MAC per element; activations, concat, padding and reshape have no params or MACs.
Attention over ``T = H W`` tokens attends within windows of ``min(T, 196)`` tokens.

Node count: a target ``n ~ U{min_nodes..max_nodes}`` sets the budget. The first family is drawn
among those whose stem and one block fit (plain chains only up to ``plain_max_nodes``); stages are
dropped from the end while their down blocks do not fit; the rest of the budget is shared among the
stages in random proportions (the second-to-last stage weighted ``deep_stage_weight``) in whole
blocks, one more block per stage where it still fits; ``conv-bn-act`` / activation filler units
(at the last stage's resolution and width, before the head) top the graph up to ``min_nodes`` if it
fell short. So ``min_nodes <= n <= max_nodes`` (exactly ``n`` when ``min_nodes = max_nodes``).

Two twins sample the same distribution:

* :func:`generate_arch_numpy` (NumPy RNG): draws the program, then builds the graph block by block
  with plain Python loops (the obviously-correct expansion);
* :func:`make_arch_jax_generator` (``key -> PaddedGraph``, jit/vmap-able, fixed shapes): draws the
  same program with ``jax.random`` and expands it by gathering every padded node position's block
  and template row at once, then relabels into SPEC order.

The program (:func:`draw_program`) is one function written for ``xp`` in ``{numpy, jax.numpy}`` that
maps a vector of ``NUM_UNIFORMS`` uniform variates to the block sequence. What differs between the
twins: the random stream (NumPy ``rng.random``, float64, vs ``jax.random.uniform``, float32), the
expansion (loops vs gathers), and the count arithmetic (float64 rounded to int64 vs float32, so JAX
counts above 2**24 carry float32 rounding, as every PaddedGraph does). Fed the same variates they
build the same graph (tests/test_architectures.py checks nodes, edges and counts).

Knobs: :class:`ArchConfig` (family weights, hybrid / head probabilities, input resolutions, width
multipliers, per-stage growth, expansion ratios, dense growth rates); ``GeneratorConfig(mode="arch")``
uses its defaults (its ``min_nodes`` / ``max_nodes`` set the range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.graphs.graph import Graph

# ============================================================================ layer formulas

KINDS = (
    "input", "conv", "dwconv", "sepconv", "bn", "act", "eltwise", "concat", "pool", "pad", "gap",
    "reshape", "dense", "layernorm", "attn_scores", "softmax", "attn_apply", "posemb",
)  # fmt: skip
K = {name: i for i, name in enumerate(KINDS)}
ATTN_WINDOW = 196  # tokens a query attends to (ViT-B/16 at 224: 14 x 14 tokens; larger maps use windows)
HEAD_DIM = 64
NUM_CLASSES = 1000


def layer_counts(kind, k, h, cin, cout, bias, xp=np):
    """(params, output_size, macs) of layers, elementwise over arrays; ``xp`` is ``np`` or ``jnp``.

    kind: index into KINDS; k: kernel / window (padding amount for ``pad``); h: output resolution
    (tokens ``T = h^2`` for transformer layers); cin, cout: channels; bias: 0/1.
    """
    f = xp.float64 if xp is np else jnp.float32
    k, h, cin, cout, bias = (xp.asarray(a).astype(f) for a in (k, h, cin, cout, bias))
    hw, ksq = h * h, k * k
    window = xp.minimum(hw, float(ATTN_WINDOW))
    heads = xp.maximum(xp.floor(cin / HEAD_DIM), 1.0)
    zero = xp.zeros_like(hw)
    kinds = [kind == K[name] for name in KINDS]
    params = xp.select(
        kinds,
        [
            zero, ksq * cin * cout + bias * cout, ksq * cin + bias * cin, ksq * cin + cin * cout + bias * cout,
            4 * cin, zero, zero, zero, zero, zero, zero,
            zero, cin * cout + cout, 2 * cin, zero, zero, zero, hw * cin,
        ],
    )  # fmt: skip
    out = xp.select(
        kinds,
        [
            hw * cin, hw * cout, hw * cin, hw * cout,
            hw * cin, hw * cin, hw * cin, hw * cout, hw * cin, (h + k) ** 2 * cin, cin,
            hw * cin, hw * cout, hw * cin, hw * window * heads, hw * window * heads, hw * cin, hw * cin,
        ],
    )  # fmt: skip
    macs = xp.select(
        kinds,
        [
            zero, hw * ksq * cin * cout, hw * ksq * cin, hw * (ksq * cin + cin * cout),
            hw * cin, zero, hw * cin, zero, hw * cin * ksq, zero, hw * cin,
            zero, hw * cin * cout, hw * cin, hw * window * cin, zero, hw * window * cin, hw * cin,
        ],
    )  # fmt: skip
    return params, out, macs


OP_KIND = {
    "InputLayer": "input", "Conv2D": "conv", "DepthwiseConv2D": "dwconv", "SeparableConv2D": "sepconv",
    "BatchNormalization": "bn", "Activation": "act", "ReLU": "act", "Add": "eltwise", "Multiply": "eltwise",
    "CustomScaleLayer": "eltwise", "Concatenate": "concat", "MaxPooling2D": "pool", "AveragePooling2D": "pool",
    "ZeroPadding2D": "pad", "GlobalAveragePooling2D": "gap", "Reshape": "reshape", "Dense": "dense",
    "LayerNormalization": "layernorm", "AttentionScores": "attn_scores", "Softmax": "softmax",
    "AttentionApply": "attn_apply", "PositionEmbedding": "posemb",
}  # fmt: skip

# ============================================================================ templates

# widths of a block: linear in the basis (c_in, c_out, c_in * t, g, 1) (floored, at least 1)
WIDTHS = ("in", "out", "mid", "se", "br", "br2", "br3", "rgb", "cls")
RES = ("in", "out", "g", "h2", "h4")  # block input / output resolution, 1 x 1, input / 2, input / 4
X, XX = -1, -2  # predecessor codes: the block's input (previous block's output), the block before that
NONE = -9
PRED_SLOTS = 6


@dataclass
class Template:
    """A block type: nodes in a topological order, the last one the block's output.

    nodes: (op, preds, k, res, cin, cout, bias) with preds local indices or X / XX.
    widths: coefficients of the extra width names over (c_in, c_out, c_in * t, g, 1).
    """

    name: str
    widths: dict = field(default_factory=dict)
    nodes: list = field(default_factory=list)

    def add(self, op, preds, k=1, res="out", cin="out", cout=None, bias=False) -> int:
        """Append a node reading ``preds`` (ints or X/XX); returns its local index."""
        preds = [preds] if isinstance(preds, int) else list(preds)
        self.nodes.append((op, preds, k, res, cin, cin if cout is None else cout, int(bias)))
        return len(self.nodes) - 1

    def cba(self, pred, k, cin, cout, res="out", act="Activation", bias=False) -> int:
        """conv -> batch norm -> activation; returns the activation's index."""
        c = self.add("Conv2D", pred, k, res, cin, cout, bias)
        b = self.add("BatchNormalization", c, res=res, cin=cout)
        return self.add(act, b, res=res, cin=cout)


def _stems() -> dict[str, Template]:
    t = {}
    s = t["stem_vgg"] = Template("stem_vgg")  # stride 1
    s.add("InputLayer", [], res="in", cin="rgb")
    s = t["stem_resnet"] = Template("stem_resnet", {"mid": (0, 0, 0, 0, 0)})  # stride 4
    s.add("InputLayer", [], res="in", cin="rgb")
    p = s.add("ZeroPadding2D", 0, k=6, res="in", cin="rgb")
    a = s.cba(p, 7, "rgb", "out", res="h2", bias=True)
    p = s.add("ZeroPadding2D", a, k=2, res="h2", cin="out")
    s.add("MaxPooling2D", p, k=3, res="out", cin="out")
    s = t["stem_mobile"] = Template("stem_mobile")  # stride 2
    s.add("InputLayer", [], res="in", cin="rgb")
    s.cba(0, 3, "rgb", "out", act="ReLU")
    s = t["stem_inception"] = Template(  # stride 8 (InceptionV3: 32, 32, 64, pool, 80, 192, pool)
        "stem_inception", {"mid": (0, 1 / 6, 0, 0, 0), "br": (0, 1 / 3, 0, 0, 0), "br2": (0, 80 / 192, 0, 0, 0)}
    )
    s.add("InputLayer", [], res="in", cin="rgb")
    a = s.cba(0, 3, "rgb", "mid", res="h2")
    a = s.cba(a, 3, "mid", "mid", res="h2")
    a = s.cba(a, 3, "mid", "br", res="h2")
    p = s.add("MaxPooling2D", a, k=3, res="h4", cin="br")
    a = s.cba(p, 1, "br", "br2", res="h4")
    a = s.cba(a, 3, "br2", "out", res="h4")
    s.add("MaxPooling2D", a, k=3, res="out", cin="out")
    s = t["stem_patch"] = Template("stem_patch")  # stride 4 (Swin patch embedding: 4 x 4 patches)
    s.add("InputLayer", [], res="in", cin="rgb")
    c = s.add("Conv2D", 0, k=4, res="out", cin="rgb", cout="out", bias=True)
    r = s.add("Reshape", c)
    s.add("PositionEmbedding", r)
    return t


def _conv_families() -> dict[str, Template]:
    t = {}
    b = t["plain_rep"] = Template("plain_rep")
    b.add("Conv2D", X, 3, cin="in", cout="out", bias=True)
    b = t["plain_down"] = Template("plain_down")
    p = b.add("MaxPooling2D", X, k=2, cin="in")
    b.add("Conv2D", p, 3, cin="in", cout="out", bias=True)

    b = t["basic_rep"] = Template("basic_rep")
    a = b.cba(X, 3, "in", "out")
    c = b.add("Conv2D", a, 3, cin="out", cout="out")
    n = b.add("BatchNormalization", c)
    s = b.add("Add", [X, n])
    b.add("Activation", s)
    b = t["basic_down"] = Template("basic_down")
    a = b.cba(X, 3, "in", "out")
    c = b.add("Conv2D", a, 3, cin="out", cout="out")
    n = b.add("BatchNormalization", c)
    sc = b.add("Conv2D", X, 1, cin="in", cout="out")
    sn = b.add("BatchNormalization", sc)
    s = b.add("Add", [sn, n])
    b.add("Activation", s)

    for down in (False, True):
        b = t[f"bottleneck_{'down' if down else 'rep'}"] = Template("bottleneck", {"mid": (0, 0.25, 0, 0, 0)})
        a = b.cba(X, 1, "in", "mid", bias=True)
        a = b.cba(a, 3, "mid", "mid", bias=True)
        c = b.add("Conv2D", a, 1, cin="mid", cout="out", bias=True)
        n = b.add("BatchNormalization", c)
        short = X
        if down:
            sc = b.add("Conv2D", X, 1, cin="in", cout="out", bias=True)
            short = b.add("BatchNormalization", sc)
        s = b.add("Add", [short, n])
        b.add("Activation", s)

    for down in (False, True):  # ResNetV2: pre-activation bottleneck, conv shortcut from the pre-activation
        b = t[f"preact_{'down' if down else 'rep'}"] = Template("preact", {"mid": (0, 0.25, 0, 0, 0)})
        n = b.add("BatchNormalization", X, res="in", cin="in")
        pre = b.add("Activation", n, res="in", cin="in")
        short = b.add("Conv2D", pre, 1, cin="in", cout="out", bias=True) if down else X
        a = b.cba(pre, 1, "in", "mid", res="in")
        p = b.add("ZeroPadding2D", a, k=2, res="in", cin="mid")
        a = b.cba(p, 3, "mid", "mid")
        c = b.add("Conv2D", a, 1, cin="mid", cout="out", bias=True)
        b.add("Add", [short, c])

    b = t["dwsep_rep"] = Template("dwsep_rep")
    d = b.add("DepthwiseConv2D", X, 3, cin="in")
    n = b.add("BatchNormalization", d, cin="in")
    a = b.add("ReLU", n, cin="in")
    b.cba(a, 1, "in", "out", act="ReLU")
    b = t["dwsep_down"] = Template("dwsep_down")
    p = b.add("ZeroPadding2D", X, k=1, res="in", cin="in")
    d = b.add("DepthwiseConv2D", p, 3, cin="in")
    n = b.add("BatchNormalization", d, cin="in")
    a = b.add("ReLU", n, cin="in")
    b.cba(a, 1, "in", "out", act="ReLU")

    for se in (False, True):
        for down in (False, True):
            name = f"mbconv{'_se' if se else ''}_{'down' if down else 'rep'}"
            b = t[name] = Template(name, {"mid": (0, 0, 1, 0, 0), "se": (0.25, 0, 0, 0, 0)})
            res = "in" if down else "out"
            a = b.cba(X, 1, "in", "mid", res=res, act="ReLU")
            if down:
                a = b.add("ZeroPadding2D", a, k=1, res="in", cin="mid")
            d = b.add("DepthwiseConv2D", a, 3, cin="mid")
            n = b.add("BatchNormalization", d, cin="mid")
            a = b.add("ReLU", n, cin="mid")
            if se:
                g = b.add("GlobalAveragePooling2D", a, cin="mid")
                r = b.add("Reshape", g, res="g", cin="mid")
                c = b.add("Conv2D", r, 1, res="g", cin="mid", cout="se", bias=True)
                c = b.add("Activation", c, res="g", cin="se")
                c = b.add("Conv2D", c, 1, res="g", cin="se", cout="mid", bias=True)
                c = b.add("Activation", c, res="g", cin="mid")
                a = b.add("Multiply", [a, c], cin="mid")
            c = b.add("Conv2D", a, 1, cin="mid", cout="out")
            n = b.add("BatchNormalization", c)
            if not down:
                b.add("Add", [X, n])

    b = t["xception_rep"] = Template("xception_rep")
    prev = X
    for i in range(3):
        a = b.add("Activation", prev, cin="in" if i == 0 else "out")
        s = b.add("SeparableConv2D", a, 3, cin="in" if i == 0 else "out", cout="out")
        prev = b.add("BatchNormalization", s)
    b.add("Add", [X, prev])
    b = t["xception_down"] = Template("xception_down")
    a = b.add("Activation", X, res="in", cin="in")
    s = b.add("SeparableConv2D", a, 3, res="in", cin="in", cout="out")
    n = b.add("BatchNormalization", s, res="in")
    a = b.add("Activation", n, res="in")
    s = b.add("SeparableConv2D", a, 3, res="in", cin="out", cout="out")
    n = b.add("BatchNormalization", s, res="in")
    m = b.add("MaxPooling2D", n, k=3)
    sc = b.add("Conv2D", X, 1, cin="in", cout="out")
    sn = b.add("BatchNormalization", sc)
    b.add("Add", [m, sn])
    return t


def _branchy_families() -> dict[str, Template]:
    t = {}
    b = t["inception_rep"] = Template("inception_rep", {"br": (0, 0.25, 0, 0, 0), "mid": (0, 0.1875, 0, 0, 0)})
    b1 = b.cba(X, 1, "in", "br")
    a = b.cba(X, 1, "in", "mid")
    b2 = b.cba(a, 5, "mid", "br")
    a = b.cba(X, 1, "in", "br")
    a = b.cba(a, 3, "br", "br")
    b3 = b.cba(a, 3, "br", "br")
    p = b.add("AveragePooling2D", X, k=3, cin="in")
    b4 = b.cba(p, 1, "in", "br")
    b.add("Concatenate", [b1, b2, b3, b4])
    b = t["inception_down"] = Template("inception_down", {"br": (0, 0.25, 0, 0, 0), "mid": (0, 0.125, 0, 0, 0)})
    b1 = b.cba(X, 3, "in", "br")
    a = b.cba(X, 1, "in", "mid", res="in")
    a = b.cba(a, 3, "mid", "br", res="in")
    b2 = b.cba(a, 3, "br", "br")
    b3 = b.add("MaxPooling2D", X, k=3, cin="in")
    b.add("Concatenate", [b1, b2, b3])

    widths = {"br": (0, 0.1, 0, 0, 0), "br2": (0, 0.15, 0, 0, 0), "br3": (0, 0.2, 0, 0, 0), "mid": (0, 0.4, 0, 0, 0)}
    b = t["incres_rep"] = Template("incres_rep", widths)
    b1 = b.cba(X, 1, "in", "br")
    a = b.cba(X, 1, "in", "br")
    b2 = b.cba(a, 3, "br", "br")
    a = b.cba(X, 1, "in", "br")
    a = b.cba(a, 3, "br", "br2")
    b3 = b.cba(a, 3, "br2", "br3")
    cat = b.add("Concatenate", [b1, b2, b3], cin="mid")
    c = b.add("Conv2D", cat, 1, cin="mid", cout="out", bias=True)
    s = b.add("CustomScaleLayer", [X, c])
    b.add("Activation", s)

    b = t["dense_rep"] = Template("dense_rep", {"br": (0, 0, 0, 1, 0), "br2": (0, 0, 0, 4, 0)})
    n = b.add("BatchNormalization", X, cin="in")
    a = b.add("Activation", n, cin="in")
    a = b.cba(a, 1, "in", "br2")
    c = b.add("Conv2D", a, 3, cin="br2", cout="br")
    b.add("Concatenate", [X, c])
    b = t["dense_down"] = Template("dense_down")
    n = b.add("BatchNormalization", X, res="in", cin="in")
    a = b.add("Activation", n, res="in", cin="in")
    c = b.add("Conv2D", a, 1, res="in", cin="in", cout="out")
    b.add("AveragePooling2D", c, k=2)

    b = t["transformer_rep"] = Template("transformer_rep", {"mid": (0, 4, 0, 0, 0)})
    ln = b.add("LayerNormalization", X, cin="in")
    q, k_, v = (b.add("Dense", ln, cin="in", cout="out") for _ in range(3))
    rq, rk, rv = (b.add("Reshape", x) for x in (q, k_, v))
    sc = b.add("AttentionScores", [rq, rk])
    sm = b.add("Softmax", sc)
    av = b.add("AttentionApply", [sm, rv])
    r = b.add("Reshape", av)
    o = b.add("Dense", r, cin="out", cout="out")
    s = b.add("Add", [X, o])
    ln = b.add("LayerNormalization", s)
    d = b.add("Dense", ln, cin="out", cout="mid")
    a = b.add("Activation", d, cin="mid")
    d = b.add("Dense", a, cin="mid", cout="out")
    b.add("Add", [s, d])
    b = t["transformer_down"] = Template("transformer_down", {"br2": (4, 0, 0, 0, 0)})  # patch merging
    r = b.add("Reshape", X, cin="br2")
    ln = b.add("LayerNormalization", r, cin="br2")
    b.add("Dense", ln, cin="br2", cout="out")
    return t


NAS_VARIANTS = 3
NAS_OPS = ("sep3", "sep5", "avg3", "max3", "identity")
NAS_OP_PROBS = (0.3, 0.2, 0.15, 0.15, 0.2)


def _nas_cell(variant: int, reduce: bool) -> Template:
    """A NAS-style cell (NASNet/DARTS): fixed random 'searched' wiring, seeded by the variant.

    Inputs: the previous cell (X) and the one before (XX), each adjusted by act-conv1x1-bn. Each of
    ``B`` intermediate states adds two ops (separable convs, pooling, identity) applied to two
    distinct earlier states; the cell concatenates all intermediate states. In a reduction cell the
    ops reading the cell inputs have stride 2 (identity becomes a strided 1x1 conv).
    """
    rng = np.random.default_rng(7919 * variant + 11)
    num = 4 + variant % 2
    b = Template(f"nas{variant}_{'down' if reduce else 'rep'}", {"br": (0, 1 / num, 0, 0, 0)})
    in_res = "in"
    states = []
    for src in (XX, X):
        a = b.add("Activation", src, res=in_res, cin="in")
        c = b.add("Conv2D", a, 1, res=in_res, cin="in", cout="br")
        states.append(b.add("BatchNormalization", c, res=in_res, cin="br"))
    inputs = set(states)
    added = []
    for i in range(num):
        picks = [0, 1] if i == 0 else rng.choice(len(states), size=2, replace=False).tolist()
        outs = []
        for pick in picks:
            src = states[pick]
            op = NAS_OPS[rng.choice(len(NAS_OPS), p=NAS_OP_PROBS)]
            strided = reduce and src in inputs
            if op in ("sep3", "sep5"):
                k = 3 if op == "sep3" else 5
                a = b.add("Activation", src, res=in_res if strided else "out", cin="br")
                s = b.add("SeparableConv2D", a, k, cin="br", cout="br")
                n = b.add("BatchNormalization", s, cin="br")
                a = b.add("Activation", n, cin="br")
                s = b.add("SeparableConv2D", a, k, cin="br", cout="br")
                outs.append(b.add("BatchNormalization", s, cin="br"))
            elif op in ("avg3", "max3"):
                outs.append(b.add("AveragePooling2D" if op == "avg3" else "MaxPooling2D", src, k=3, cin="br"))
            elif strided:
                c = b.add("Conv2D", src, 1, cin="br", cout="br")
                outs.append(b.add("BatchNormalization", c, cin="br"))
            else:
                outs.append(src)
        s = b.add("Add", outs, cin="br")
        states.append(s)
        added.append(s)
    b.add("Concatenate", added, cin="out")
    return b


def _misc() -> dict[str, Template]:
    t = {"empty": Template("empty")}
    b = t["fill3"] = Template("fill3")
    b.cba(X, 1, "in", "out")
    b = t["fill1"] = Template("fill1")
    b.add("Activation", X, cin="in")
    b = t["head"] = Template("head")
    g = b.add("GlobalAveragePooling2D", X, res="in", cin="in")
    b.add("Dense", g, res="g", cin="in", cout="cls", bias=True)
    return t


def _all_templates() -> dict[str, Template]:
    t = _misc()  # "empty" first: type 0 has no nodes
    t.update(_stems())
    t.update(_conv_families())
    t.update(_branchy_families())
    for v in range(NAS_VARIANTS):
        t[f"nas{v}_rep"] = _nas_cell(v, reduce=False)
        t[f"nas{v}_down"] = _nas_cell(v, reduce=True)
    return t


TEMPLATES: dict[str, Template] = _all_templates()
TYPE_NAMES: tuple[str, ...] = tuple(TEMPLATES)
TYPE = {name: i for i, name in enumerate(TYPE_NAMES)}


@dataclass(frozen=True)
class Family:
    """A motif family: its stem, whether stage 0 opens with its down block, stage-0 width (x the
    width multiplier), dense growth (widths grow per layer, transitions halve), extra widening."""

    name: str
    stem: str
    stage0_down: bool
    base_width: int
    dense: bool = False
    widen: float = 1.0  # extra growth per stage (InceptionV3: 288, 768, 2048; Inception-ResNet-v2: 320, 1088, 2080)


FAMILIES: tuple[Family, ...] = (
    Family("plain", "stem_vgg", False, 64),
    Family("basic", "stem_resnet", False, 64),
    Family("bottleneck", "stem_resnet", True, 256),
    Family("preact", "stem_resnet", True, 256),
    Family("dwsep", "stem_mobile", False, 64),
    Family("mbconv", "stem_mobile", True, 24),
    Family("mbconv_se", "stem_mobile", True, 24),
    Family("xception", "stem_mobile", True, 128),
    Family("inception", "stem_inception", False, 288, widen=1.3),
    Family("incres", "stem_inception", False, 320, widen=1.3),
    Family("dense", "stem_resnet", False, 64, dense=True),
    *(Family(f"nas{v}", "stem_mobile", False, 264) for v in range(NAS_VARIANTS)),  # NASNet-A Mobile: 264, 528, 1056
    Family("transformer", "stem_patch", False, 96),  # Swin-T: 96, 192, 384, 768,
)
FAMILY_NAMES = tuple(f.name for f in FAMILIES)
STEM_STRIDE = {"stem_vgg": 1, "stem_resnet": 4, "stem_mobile": 2, "stem_inception": 8, "stem_patch": 4}
STEM_WIDTH = {"stem_vgg": 3, "stem_resnet": 64, "stem_mobile": 32, "stem_inception": 192, "stem_patch": 0}
S_MAX = 5  # stages at most
MAX_WIDTH = 4096


def _down_name(f: Family) -> str:
    return "inception_down" if f.name == "incres" else f"{f.name}_down"


@dataclass(frozen=True)
class ArchConfig:
    """Knobs of the architecture distribution (defaults from typical ImageNet models).

    * family_weights: relative frequency of each family of FAMILIES as first family (the three NAS
      variants share one weight; used as integers, multiples of max / 1024);
    * p_hybrid: probability of a second family from a random stage on;
    * p_head: probability of a classifier head (GAP + dense);
    * p_fewer_stages: probability of one stage less than the stem's resolution allows (down to
      about 7 x 7);
    * plain_max_nodes: largest node target that may draw the plain family (VGG-style chains
      without normalisation stop at ~20 layers);
    * deep_stage_weight: how many times more blocks the second-to-last stage gets on average
      (ResNet 3-4-6-3, DenseNet 6-12-24-16, MobileNetV2: the 14 x 14 stage is the deepest);
    * input_res, width_mults, gammas (width growth per stage), expansions (inverted-residual t),
      dense_growths: uniform choices.
    """

    family_weights: tuple[float, ...] = (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 / 3, 1 / 3, 1 / 3, 1)
    p_hybrid: float = 0.25
    p_head: float = 0.25
    p_fewer_stages: float = 0.25
    plain_max_nodes: int = 64
    deep_stage_weight: float = 2.0
    input_res: tuple[int, ...] = (192, 224, 256)
    width_mults: tuple[float, ...] = (0.75, 1.0, 1.0, 1.5)
    gammas: tuple[float, ...] = (1.5, 2.0, 2.0)
    expansions: tuple[int, ...] = (3, 4, 6)
    dense_growths: tuple[int, ...] = (16, 32, 48)

    def __post_init__(self):
        if len(self.family_weights) != len(FAMILIES) or min(self.family_weights) < 0 or sum(self.family_weights) <= 0:
            raise ValueError(f"arch family_weights: need {len(FAMILIES)} non-negative weights, not all zero")
        if not (0 <= self.p_hybrid <= 1 and 0 <= self.p_head <= 1):
            raise ValueError("arch p_hybrid and p_head must be probabilities")


MIN_ARCH_NODES = 8


MAX_ARCH_RANGE = 1 << 15  # max_nodes - min_nodes: the node-count draw stays in int32 arithmetic


def check_arch_nodes(min_nodes: int, max_nodes: int | None = None) -> None:
    """Raise a one-line ValueError when the node range does not suit an architecture."""
    if min_nodes < MIN_ARCH_NODES:
        raise ValueError(f"graphs.min_nodes must be >= {MIN_ARCH_NODES} for mode arch, got {min_nodes}")
    if max_nodes is not None and max_nodes - min_nodes >= MAX_ARCH_RANGE:
        raise ValueError(f"graphs: max_nodes - min_nodes must be < {MAX_ARCH_RANGE} for mode arch")


# ---------------------------------------------------------------------------- dense tables


def _tables():
    """Template tables [num_types, T_max(, ...)] shared by the vectorised (JAX) expansion."""
    tmax = max(len(t.nodes) for t in TEMPLATES.values())
    nt = len(TEMPLATES)
    size = np.zeros(nt, np.int32)
    kind = np.zeros((nt, tmax), np.int32)
    kk = np.zeros((nt, tmax), np.int32)
    res = np.zeros((nt, tmax), np.int32)
    cin = np.zeros((nt, tmax), np.int32)
    cout = np.zeros((nt, tmax), np.int32)
    bias = np.zeros((nt, tmax), np.int32)
    preds = np.full((nt, tmax, PRED_SLOTS), NONE, np.int32)
    coef = np.zeros((nt, len(WIDTHS), 5))
    for ti, t in enumerate(TEMPLATES.values()):
        size[ti] = len(t.nodes)
        coef[ti] = _width_coefs(t)
        for j, (op, ps, k, r, ci, co, bi) in enumerate(t.nodes):
            kind[ti, j] = K[OP_KIND[op]]
            kk[ti, j], res[ti, j], bias[ti, j] = k, RES.index(r), bi
            cin[ti, j], cout[ti, j] = WIDTHS.index(ci), WIDTHS.index(co)
            preds[ti, j, : len(ps)] = ps
    return dict(size=size, kind=kind, k=kk, res=res, cin=cin, cout=cout, bias=bias, preds=preds, coef=coef)


def _width_coefs(t: Template) -> np.ndarray:
    base = {"in": (1, 0, 0, 0, 0), "out": (0, 1, 0, 0, 0), "rgb": (0, 0, 0, 0, 3), "cls": (0, 0, 0, 0, NUM_CLASSES)}
    coefs = {**base, **t.widths}
    return np.array([coefs.get(w, (0, 0, 0, 0, 1)) for w in WIDTHS], float)


TABLES = _tables()
T_MAX = TABLES["kind"].shape[1]
_FAM = dict(
    stem=np.array([TYPE[f.stem] for f in FAMILIES], np.int32),
    stem_size=np.array([len(TEMPLATES[f.stem].nodes) for f in FAMILIES], np.int32),
    stem_stride=np.array([STEM_STRIDE[f.stem] for f in FAMILIES], np.int32),
    stem_width=np.array([STEM_WIDTH[f.stem] for f in FAMILIES], float),
    down=np.array([TYPE[_down_name(f)] for f in FAMILIES], np.int32),
    rep=np.array([TYPE[f"{f.name}_rep"] for f in FAMILIES], np.int32),
    stage0_down=np.array([f.stage0_down for f in FAMILIES]),
    base=np.array([f.base_width for f in FAMILIES], float),
    dense=np.array([f.dense for f in FAMILIES]),
    widen=np.array([f.widen for f in FAMILIES]),
    patch=np.array([f.stem == "stem_patch" for f in FAMILIES]),
    vgg=np.array([f.stem == "stem_vgg" for f in FAMILIES]),
)
_FAM["down_size"] = TABLES["size"][_FAM["down"]]
_FAM["rep_size"] = TABLES["size"][_FAM["rep"]]
HEAD_SIZE = len(TEMPLATES["head"].nodes)
NUM_UNIFORMS = 12 + S_MAX


# ============================================================================ the program (shared)


Q_BITS = 16  # uniforms are quantised to 16-bit integers: every discrete draw is exact integer arithmetic,
Q = 1 << Q_BITS  # so the NumPy (float64) and JAX (float32) programs make the same choices from the same variates
WEIGHT_SCALE = 1024  # family weights are rounded to multiples of max(weight) / 1024


def _choice(q, options, xp):
    """options[floor(q * len / Q)] for a quantised uniform ``q`` in [0, Q)."""
    return xp.asarray(options)[(q * len(options)) >> Q_BITS]


def _below(q, p: float):
    """True with probability ``p`` (q quantised uniform)."""
    return q < int(round(p * Q))


def _categorical(q, weights, xp):
    """Index drawn with probabilities ``weights / sum`` (integer weights) by inversion of ``q``."""
    total = xp.sum(weights)
    return xp.minimum(xp.sum((xp.cumsum(weights) <= (q * total) >> Q_BITS).astype(xp.int32)), len(weights) - 1)


def _integer_weights(weights) -> tuple[int, ...]:
    """Family weights as integers (multiples of max / WEIGHT_SCALE)."""
    top = max(weights)
    return tuple(int(round(w / top * WEIGHT_SCALE)) for w in weights)


def _width_tables(arch: ArchConfig) -> tuple[np.ndarray, np.ndarray]:
    """Stem output widths f[F, M] and nominal stage widths f[F, M, G, S_MAX] for every family F,
    width multiplier M and growth G: ``round8(base * mult * (gamma * widen) ** stage)``, capped."""
    mult = np.asarray(arch.width_mults, float)
    stem = np.where(_FAM["vgg"][:, None], 3.0, _round8(_FAM["stem_width"][:, None] * mult, np))
    stem = np.where(_FAM["patch"][:, None], _round8(_FAM["base"][:, None] * mult, np), stem)
    growth = np.asarray(arch.gammas, float)[None, :] * _FAM["widen"][:, None]  # [F, G]
    per_stage = growth[:, :, None] ** np.arange(S_MAX)  # [F, G, S]
    nominal = _FAM["base"][:, None, None, None] * mult[None, :, None, None] * per_stage[:, None]
    return stem, np.minimum(_round8(nominal, np), MAX_WIDTH)


def _round8(x, xp):
    return xp.maximum(xp.round(x / 8.0) * 8.0, 8.0)


def draw_program(u, min_nodes: int, max_nodes: int, arch: ArchConfig, xp=np) -> dict:
    """The block program of one graph from uniform variates ``u`` (f[NUM_UNIFORMS]).

    Returns per-slot arrays of length ``max_nodes`` (a slot is a block; slots past the last block
    have type ``empty``): type, c_in, c_out, t (expansion), g (growth), h_in, h_out; and ``num_nodes``.
    """
    fam = {k: xp.asarray(v) for k, v in _FAM.items()}
    size = xp.asarray(TABLES["size"])
    i32 = xp.int32
    q = xp.floor(u * Q).astype(i32)  # exact in float32 and float64
    n_target = min_nodes + ((q[0] * (max_nodes - min_nodes + 1)) >> Q_BITS)
    head = _below(q[1], arch.p_head).astype(i32)
    head_size = head * HEAD_SIZE
    weights = xp.asarray(_integer_weights(arch.family_weights), dtype=i32)
    capped = fam["vgg"] & (n_target > arch.plain_max_nodes)
    fit1 = (fam["stem_size"] + fam["rep_size"] + head_size <= n_target) & ~capped
    w1 = weights * fit1
    f1 = _categorical(q[2], xp.where(xp.sum(w1) > 0, w1, weights), xp)  # nothing fits: the weights alone
    stem_size = fam["stem_size"][f1]
    fit2 = (stem_size + fam["down_size"] + fam["rep_size"] + head_size <= n_target) & ~capped
    fit2 = fit2 & (xp.arange(len(FAMILIES)) != f1)
    f2 = _categorical(q[4], weights * fit2, xp)
    # geometry: stage resolutions halve after the stem's stride; as many stages as reach ~7 x 7
    res_in = _choice(q[6], arch.input_res, xp)
    h_stem = -(-res_in // fam["stem_stride"][f1])  # ceil
    s_hi = xp.clip(xp.sum((h_stem >= 7 * 2 ** xp.arange(S_MAX)).astype(i32)), 1, S_MAX)  # 1 + floor(log2(h / 7))
    s_lo = xp.maximum(s_hi - 1, 1)
    stages = xp.where(_below(q[9], arch.p_fewer_stages), s_lo, s_hi)
    hybrid = _below(q[3], arch.p_hybrid) & (stages >= 2) & xp.any(fit2)
    switch = 1 + xp.minimum((q[5] * (stages - 1)) >> Q_BITS, xp.maximum(stages - 2, 0))
    mult_idx = (q[7] * len(arch.width_mults)) >> Q_BITS
    gamma_idx = (q[8] * len(arch.gammas)) >> Q_BITS
    t_exp = _choice(q[10], arch.expansions, xp)
    growth = _choice(q[11], arch.dense_growths, xp) * 1.0

    sigma = xp.arange(S_MAX)
    fs = xp.where(hybrid & (sigma >= switch), f2, f1)
    in_stage = sigma < stages
    down_tent = in_stage & ((sigma > 0) | fam["stage0_down"][f1])
    budget = n_target - stem_size - head_size
    dsize = xp.where(down_tent, fam["down_size"][fs], 0)
    active = in_stage & (xp.cumsum(dsize) <= budget)
    has_down = down_tent & active
    dsize = xp.where(has_down, dsize, 0)
    rsize = fam["rep_size"][fs]
    rest = budget - xp.sum(dsize)
    num_active = xp.sum(active.astype(i32))
    # stage weights U[0.5, 1.5) (x deep_stage_weight for the 14 x 14 stage, the deepest) in 1/1024 steps
    profile = xp.where(sigma == num_active - 2, int(round(4 * arch.deep_stage_weight)), 4)
    w = xp.where(active, (512 + (q[12 : 12 + S_MAX] >> (Q_BITS - 10))) * profile, 0)
    alloc = (rest * w) // xp.maximum(xp.sum(w), 1)
    reps = xp.where(active, alloc // rsize, 0).astype(i32)
    left = rest - xp.sum(reps * rsize)
    for s in range(S_MAX):  # one greedy pass: one more block where it still fits
        more = active[s] & (rsize[s] <= left)
        reps = _set(reps, s, reps[s] + more.astype(i32), xp)
        left = left - more.astype(i32) * rsize[s]
    n_blocks = stem_size + xp.sum(dsize) + xp.sum(reps * rsize) + head_size
    fill = xp.maximum(min_nodes - n_blocks, 0)

    # widths and resolutions per stage
    stem_table, nominal_table = _width_tables(arch)  # float64 NumPy: the same widths in both twins
    stem_w = xp.asarray(stem_table)[f1, mult_idx]
    h_out = xp.maximum(xp.ceil(h_stem / (2.0**sigma)), 1).astype(i32)
    h_in = xp.concatenate([h_stem[None], h_out[:-1]])
    dense = fam["dense"][fs]
    c_nom = xp.asarray(nominal_table)[fs, mult_idx, gamma_idx, sigma]
    x_in, y_in, exit_w = [], [], []
    x = stem_w
    for s in range(S_MAX):
        y = xp.where(has_down[s], xp.where(dense[s], _round8(0.5 * x, xp), c_nom[s]), x)
        out = xp.where(dense[s], y + reps[s] * growth, xp.where(has_down[s] | (reps[s] > 0), c_nom[s], x))
        out = xp.where(active[s], out, x)
        x_in.append(x)
        y_in.append(y)
        exit_w.append(out)
        x = out
    x_in, y_in = xp.stack(x_in), xp.stack(y_in)
    g = xp.where(dense, growth, 0.0)

    # segments: stem, (down, repeats) per stage, fill3, fill1, head; per-segment columns
    fl = float if xp is np else jnp.float32
    last_h = h_out[xp.maximum(xp.sum(active.astype(i32)) - 1, 0)]

    def column(stem, down, rep, tail):
        """stem value, per-stage down / repeat values (f[S_MAX]), value of the three tail segments."""
        stages_ = xp.stack([xp.asarray(down, fl), xp.asarray(rep, fl)], axis=1).reshape(-1)
        return xp.concatenate([xp.asarray(stem, fl)[None], stages_, xp.full(3, tail, fl)])

    zeros = xp.zeros(S_MAX, fl)
    tail_count = xp.stack([fill // 3, fill % 3, head]).astype(i32)
    seg_count = xp.concatenate(
        [xp.ones(1, i32), xp.stack([has_down.astype(i32), reps.astype(i32)], axis=1).reshape(-1), tail_count]
    )
    seg_type = xp.concatenate([
        fam["stem"][f1][None].astype(i32),
        xp.stack([fam["down"][fs], fam["rep"][fs]], axis=1).reshape(-1).astype(i32),
        xp.asarray([TYPE["fill3"], TYPE["fill1"], TYPE["head"]], i32),
    ])  # fmt: skip
    seg_cin0 = column(3.0, x_in, y_in, x)
    seg_cin1 = column(3.0, x_in, xp.where(dense, y_in, c_nom), x)
    seg_cout0 = column(stem_w, xp.where(dense, y_in, c_nom), xp.where(dense, y_in + g, c_nom), x)
    seg_g = column(0.0, zeros, g, 0.0)
    seg_hin = column(res_in, h_in, h_out, last_h)
    seg_hout = column(h_stem, h_out, h_out, last_h)
    seg_end = xp.cumsum(seg_count)
    slot = xp.arange(max_nodes)
    seg = xp.minimum(_searchsorted_right(seg_end, slot, xp), len(seg_type) - 1)
    j = (slot - (seg_end[seg] - seg_count[seg])).astype(fl)
    live = slot < seg_end[-1]
    stype = xp.where(live, seg_type[seg], TYPE["empty"])
    cin = xp.where(j == 0, seg_cin0[seg], seg_cin1[seg]) + j * seg_g[seg]
    cout = seg_cout0[seg] + j * seg_g[seg]
    return dict(
        type=stype.astype(i32),
        c_in=cin,
        c_out=cout,
        t=xp.full(max_nodes, t_exp, dtype=fl),
        g=seg_g[seg],
        h_in=seg_hin[seg],
        h_out=seg_hout[seg],
        num_nodes=xp.sum(size[stype]),
        family=f1,
        family2=xp.where(hybrid, f2, -1),
    )


def _searchsorted_right(sorted_values, queries, xp):
    """searchsorted(side="right"), as a comparison count for a short sorted array (compiles fast)."""
    return xp.sum((sorted_values[None, :] <= queries[:, None]).astype(xp.int32), axis=1)


def _set(arr, i, value, xp):
    if xp is np:
        arr = arr.copy()
        arr[i] = value
        return arr
    return arr.at[i].set(value)


def block_widths(t, c_in, c_out, t_exp, g, xp=np):
    """f[..., len(WIDTHS)] widths of blocks of types ``t`` (floored linear forms, at least 1)."""
    basis = xp.stack([c_in, c_out, c_in * t_exp, g, xp.ones_like(c_in)], axis=-1)
    coef = xp.asarray(TABLES["coef"])[t]  # [..., W, 5]
    return xp.maximum(xp.floor(xp.einsum("...wb,...b->...w", coef, basis) + 1e-3), 1.0)  # 1e-3: 192 / 6 is 32


def node_resolution(code, h_in, h_out, xp=np):
    """Resolution of a node from its RES code and its block's input/output resolution."""
    return xp.select(
        [code == 0, code == 1, code == 2, code == 3],
        [h_in, h_out, xp.ones_like(h_in), xp.ceil(h_in / 2.0)],
        xp.ceil(h_in / 4.0),
    )


# ============================================================================ NumPy twin


def generate_arch_numpy(min_nodes: int, max_nodes: int, rng: np.random.Generator, name: str = "arch",
                        arch: ArchConfig = ArchConfig(), source: str = "") -> Graph:  # fmt: skip
    """Draw one architecture graph with NumPy; built block by block (ids in creation order).

    The caller relabels into SPEC order (``generators.relabel_spec_order``).
    """
    check_arch_nodes(min_nodes, max_nodes)
    return build_arch_numpy(rng.random(NUM_UNIFORMS), min_nodes, max_nodes, name, arch, source)


def build_arch_numpy(u, min_nodes: int, max_nodes: int, name: str = "arch", arch: ArchConfig = ArchConfig(),
                     source: str = "") -> Graph:  # fmt: skip
    """The graph of the program drawn from uniforms ``u`` (f[NUM_UNIFORMS]), built with Python loops."""
    prog = draw_program(np.asarray(u, float), min_nodes, max_nodes, arch, np)
    kinds, ks, hs, cins, couts, biases, ops, names, edges = [], [], [], [], [], [], [], [], []
    outputs: list[int] = []  # output node id of every block so far
    for s in range(max_nodes):
        t_name = TYPE_NAMES[int(prog["type"][s])]
        if t_name == "empty":
            break
        tpl = TEMPLATES[t_name]
        widths = dict(zip(WIDTHS, block_widths(
            np.array(TYPE[t_name]), prog["c_in"][s], prog["c_out"][s], prog["t"][s], prog["g"][s]
        ), strict=True))  # fmt: skip
        h_in, h_out = prog["h_in"][s], prog["h_out"][s]
        res = {"in": h_in, "out": h_out, "g": 1.0, "h2": math.ceil(h_in / 2), "h4": math.ceil(h_in / 4)}
        base = len(kinds)
        for j, (op, preds, k, r, ci, co, bi) in enumerate(tpl.nodes):
            kinds.append(K[OP_KIND[op]])
            ks.append(k)
            hs.append(res[r])
            cins.append(widths[ci])
            couts.append(widths[co])
            biases.append(bi)
            ops.append(op)
            names.append(f"b{s}_{t_name}_{j}")
            sources = set()
            for p in preds:
                if p == X:
                    sources.add(outputs[-1])
                elif p == XX:
                    sources.add(outputs[-2] if len(outputs) >= 2 else outputs[-1])
                else:
                    sources.add(base + p)
            edges.extend((u, base + j) for u in sorted(sources))
        outputs.append(len(kinds) - 1)
    params, out, macs = layer_counts(np.array(kinds), np.array(ks), np.array(hs), np.array(cins),
                                     np.array(couts), np.array(biases), np)  # fmt: skip
    return Graph(
        name=name,
        params=np.round(params).astype(np.int64),
        output_size=np.round(out).astype(np.int64),
        macs=np.round(macs).astype(np.int64),
        edges=np.array(edges, dtype=np.int64).reshape(-1, 2),
        node_names=tuple(names),
        ops=tuple(ops),
        source=source,
    )


# ============================================================================ JAX twin


def arch_jax_arrays(u: jax.Array, min_nodes: int, max_nodes: int, n_pad: int, arch: ArchConfig = ArchConfig()):
    """The architecture of uniforms ``u`` (f32[NUM_UNIFORMS]) as arrays over creation positions.

    Every padded position looks up its block (``searchsorted`` over the blocks' cumulative sizes)
    and its template row at once. Creation order is topological, not yet SPEC order.
    Returns (preds i32[n_pad, PRED_SLOTS], pred_mask bool[n_pad, PRED_SLOTS], params f32[n_pad],
    output_size f32[n_pad], macs f32[n_pad], n i32[]).
    """
    prog = draw_program(u, min_nodes, max_nodes, arch, jnp)
    tab = {k: jnp.asarray(v) for k, v in TABLES.items()}
    sizes = tab["size"][prog["type"]]
    end = jnp.cumsum(sizes)
    start = end - sizes
    n = end[-1]
    pos = jnp.arange(n_pad)
    s = jnp.minimum(jnp.searchsorted(end, pos, side="right"), max_nodes - 1)
    j = jnp.clip(pos - start[s], 0, T_MAX - 1)
    t = prog["type"][s]
    real = pos < n
    widths = block_widths(prog["type"], prog["c_in"], prog["c_out"], prog["t"], prog["g"], jnp)[s]  # [n_pad, W]
    cin = jnp.take_along_axis(widths, tab["cin"][t, j][:, None], axis=1)[:, 0]
    cout = jnp.take_along_axis(widths, tab["cout"][t, j][:, None], axis=1)[:, 0]
    h = node_resolution(tab["res"][t, j], prog["h_in"][s], prog["h_out"][s], jnp)
    kind = tab["kind"][t, j]
    params, out, macs = layer_counts(kind, tab["k"][t, j], h, cin, cout, tab["bias"][t, j], jnp)
    code = tab["preds"][t, j]  # [n_pad, PRED_SLOTS]
    x_out = (start[s] - 1)[:, None]
    xx_out = jnp.where(s >= 2, start[jnp.maximum(s - 1, 0)] - 1, start[s] - 1)[:, None]
    preds = jnp.where(code >= 0, start[s][:, None] + code, jnp.where(code == X, x_out, xx_out))
    mask = (code != NONE) & real[:, None]
    preds = jnp.where(mask, preds, 0)
    dup = jnp.zeros_like(mask)
    for a in range(1, PRED_SLOTS):  # the same source twice (X and XX of an early block) counts once
        dup = dup.at[:, a].set(jnp.any(mask[:, :a] & (preds[:, :a] == preds[:, a : a + 1]), axis=1))
    mask = mask & ~dup
    preds = jnp.where(mask, preds, 0).astype(jnp.int32)
    zero = jnp.zeros_like(params)
    return (
        preds,
        mask,
        jnp.where(real, jnp.round(params), zero),
        jnp.where(real, jnp.round(out), zero),
        jnp.where(real, jnp.round(macs), zero),
        n.astype(jnp.int32),
    )


def make_arch_jax_generator(min_nodes: int, max_nodes: int, n_pad: int, p_pad: int, arch: ArchConfig = ArchConfig()):
    """A pure function ``key -> PaddedGraph`` (fixed shapes ``n_pad`` x ``p_pad``; SPEC order)."""
    from respect_jax.graphs.generators import _assemble, _relabel_jax

    check_arch_nodes(min_nodes, max_nodes)
    if p_pad < PRED_SLOTS or n_pad < max_nodes:
        raise ValueError(f"arch generator: need n_pad >= {max_nodes} and p_pad >= {PRED_SLOTS}")

    def from_uniforms(u: jax.Array):
        preds, mask, params, out, macs, n = arch_jax_arrays(u, min_nodes, max_nodes, n_pad, arch)
        return _relabel_jax(_assemble(preds, mask, params, out, macs, n, p_pad))

    def generate(key: jax.Array):
        return from_uniforms(jax.random.uniform(key, (NUM_UNIFORMS,)))

    generate.from_uniforms = from_uniforms  # the same graph as build_arch_numpy(u) (tests)
    return generate
