"""Immutable dataclasses that are JAX pytrees: every field is a leaf unless declared static.

``@dataclass`` makes a frozen :func:`dataclasses.dataclass`, gives it ``replace(**updates)`` (a copy with those
fields changed) and registers it with :func:`jax.tree_util.register_dataclass`; ``field(pytree_node=False)``
declares a static field (part of the tree structure: hashed, compared, never traced). This is the contract of
``flax.struct`` (same signatures, same tree paths), without importing flax: every pytree dataclass of the package
uses it, so the cost model, the graph format and the environments load without flax.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

import jax

_T = TypeVar("_T")


def field(pytree_node: bool = True, **kwargs: Any) -> Any:
    """A :func:`dataclasses.field` that is a pytree leaf (``pytree_node=True``) or static (``False``)."""
    metadata = {**kwargs.pop("metadata", {}), "pytree_node": pytree_node}
    return dataclasses.field(metadata=metadata, **kwargs)


def dataclass(cls: type[_T] | None = None, **kwargs: Any) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """Decorator: ``cls`` as a frozen dataclass (``kwargs`` go to :func:`dataclasses.dataclass`) registered as a
    pytree whose leaves are its fields except those declared ``field(pytree_node=False)``; adds ``replace``."""
    if cls is None:
        return lambda c: dataclass(c, **kwargs)
    kwargs.setdefault("frozen", True)
    data_cls = dataclasses.dataclass(**kwargs)(cls)
    data_fields, meta_fields = [], []
    for info in dataclasses.fields(data_cls):
        (data_fields if info.metadata.get("pytree_node", True) else meta_fields).append(info.name)

    def replace(self, **updates):
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **updates)

    data_cls.replace = replace
    jax.tree_util.register_dataclass(data_cls, data_fields, meta_fields)
    return data_cls
