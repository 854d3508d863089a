"""Non-learned schedulers behind one signature (see :mod:`respect_jax.solvers.base`).

Importing this package registers every solver module listed here.
"""

from respect_jax.solvers import partitioners  # noqa: F401  (registers compiler, single_stage)
from respect_jax.solvers.base import SolveResult, available_solvers, get_solver, register_solver, run_solver

__all__ = ["SolveResult", "available_solvers", "get_solver", "register_solver", "run_solver"]
