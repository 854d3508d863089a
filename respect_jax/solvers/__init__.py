"""Non-learned schedulers behind one signature (see :mod:`respect_jax.solvers.base`).

Importing this package registers every solver module listed here.
"""

import sys
import types

from respect_jax.solvers import (  # noqa: F401  (importing a module registers its solvers)
    auto,
    cpsat,
    greedy,
    gumbel,
    milp,
    partitioners,
    respect_label,
)
from respect_jax.solvers.base import SolveResult, available_solvers, get_solver, register_solver, run_solver

__all__ = ["SolveResult", "available_solvers", "get_solver", "register_solver", "run_solver"]


class _CallableModule(types.ModuleType):
    """This package, callable: importing it binds it as ``respect_jax.solvers``, where the API function
    :func:`respect_jax.api.solvers` was; calling it does what that function does (every registered solver's
    name, the learned ones included), so ``rj.solvers()`` works whatever was imported before."""

    def __call__(self) -> list[str]:
        from respect_jax.api import solvers

        return solvers()


sys.modules[__name__].__class__ = _CallableModule
