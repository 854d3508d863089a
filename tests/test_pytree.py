"""``respect_jax.pytree``: frozen dataclasses that are pytrees, static fields in the tree structure, ``replace``;
the same tree (leaves, paths, structure) as ``flax.struct`` gives for the same class."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct as flax_struct

from respect_jax import pytree


def _pair(module):
    @module.dataclass
    class Pair:
        weights: jax.Array
        bias: jax.Array
        size: int = module.field(pytree_node=False, default=3)

    return Pair


def test_leaves_static_fields_and_paths_match_flax_struct():
    ours, theirs = _pair(pytree), _pair(flax_struct)
    a = ours(np.ones(2, np.float32), np.zeros(1, np.float32), 5)
    b = theirs(np.ones(2, np.float32), np.zeros(1, np.float32), 5)
    paths = lambda x: [(jax.tree_util.keystr(p), v.tolist()) for p, v in jax.tree_util.tree_leaves_with_path(x)]  # noqa: E731
    assert paths(a) == paths(b) == [(".weights", [1.0, 1.0]), (".bias", [0.0])]
    assert jax.tree.structure(a) != jax.tree.structure(ours(a.weights, a.bias, 6))  # static: part of the structure
    doubled = jax.tree.map(lambda v: 2 * v, a)
    assert isinstance(doubled, ours) and doubled.size == 5 and doubled.weights.tolist() == [2.0, 2.0]


def test_frozen_replace_and_jit_treat_static_fields_as_constants():
    Pair = _pair(pytree)
    a = Pair(jnp.ones(2), jnp.zeros(1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.size = 4
    b = a.replace(size=4)
    assert (a.size, b.size) == (3, 4) and b.weights is a.weights
    traces = []

    @jax.jit
    def scaled(p):
        traces.append(p.size)
        assert isinstance(p.size, int)  # static: a Python value inside the trace, not a tracer
        return p.weights * p.size

    assert scaled(a).tolist() == [3.0, 3.0] and scaled(b).tolist() == [4.0, 4.0] and traces == [3, 4]
    assert scaled(a.replace(weights=2 * a.weights)).tolist() == [6.0, 6.0] and traces == [3, 4]  # no retrace


def test_the_package_defines_its_pytree_dataclasses_with_this_module_only():
    import re
    from pathlib import Path

    package = Path(pytree.__file__).parent
    users = [str(f.relative_to(package)) for f in package.rglob("*.py")
             if re.search(r"^\s*(from flax import .*\bstruct\b|import flax\.struct|from flax\.struct import)",
                          f.read_text(), re.M)]
    assert users == []
