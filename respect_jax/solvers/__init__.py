"""Non-learned schedulers behind one signature (see :mod:`respect_jax.solvers.base`).

Importing this package makes every solver listed in :data:`BUILTIN` known by name; a solver's module is imported
the first time the solver is looked up (:func:`~respect_jax.solvers.base.get_solver`), so a command that names one
solver imports only that solver's module.
"""

import sys
import types

from respect_jax.solvers.base import (
    SolveResult,
    available_solvers,
    get_solver,
    register_lazy,
    register_solver,
    run_solver,
)

#: every solver of this package and the module whose import registers it
BUILTIN = {
    "auto": "respect_jax.solvers.auto",
    "compiler": "respect_jax.solvers.partitioners",
    "contiguous": "respect_jax.solvers.partitioners",
    "cpsat": "respect_jax.solvers.cpsat",
    "greedy": "respect_jax.solvers.greedy",
    "gumbel": "respect_jax.solvers.gumbel",
    "milp": "respect_jax.solvers.milp",
    "profiling": "respect_jax.solvers.partitioners",
    "respect_label": "respect_jax.solvers.respect_label",
    "single_stage": "respect_jax.solvers.partitioners",
}
for _name, _module in BUILTIN.items():
    register_lazy(_name, _module)

__all__ = ["SolveResult", "available_solvers", "get_solver", "register_solver", "run_solver"]


class _CallableModule(types.ModuleType):
    """This package, callable: importing it binds it as ``respect_jax.solvers``, where the API function
    :func:`respect_jax.api.solvers` was; calling it does what that function does (every registered solver's
    name, the learned ones included), so ``rj.solvers()`` works whatever was imported before."""

    def __call__(self) -> list[str]:
        from respect_jax.api import solvers

        return solvers()


sys.modules[__name__].__class__ = _CallableModule
