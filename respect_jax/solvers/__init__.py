"""Non-learned schedulers behind one signature (see :mod:`respect_jax.solvers.base`).

Importing this package registers every solver module listed here.
"""

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
