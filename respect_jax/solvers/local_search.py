"""Moved to :mod:`respect_jax.local_search` (a layer below the solvers and the policy, which both use it).

Kept only while ``solvers/gumbel.py``, ``solvers/auto.py`` and ``train/algorithms.py`` import from here;
delete once they import :mod:`respect_jax.local_search`.
"""

from respect_jax.local_search import DENSE_LIMIT, DENSE_MAX_NODES, improve

__all__ = ["DENSE_LIMIT", "DENSE_MAX_NODES", "improve"]
