"""``solver=respect_pointer``: the RESPECT-faithful baseline behind the common solver signature.

Importing this module registers it (the CLI imports it when the solver is named). Options
(``conf/solver/respect_pointer.yaml``): ``checkpoint`` (a run folder of ``respect-train
policy=respect_pointer``; default the shipped one), ``decoding`` (``greedy`` | ``sample`` |
``best_of``), ``samples``, ``temperature``, ``seed``. The permutation is packed under the
bisection-searched cap of the caller's K and repaired, so the schedule is always valid.
"""

from __future__ import annotations

import functools

from respect_jax.costs import Hardware
from respect_jax.policy.config import Decoding
from respect_jax.policy.solver import checkpoint_solver
from respect_jax.resources import data_path
from respect_jax.solvers.base import register_solver

DEFAULT_CHECKPOINT = data_path("checkpoints", "respect_pointer_k4_paper")


@functools.lru_cache(maxsize=8)
def _load(checkpoint: str):
    from respect_jax.respect_pointer.checkpoints import load_pointer

    return load_pointer(checkpoint)


@functools.lru_cache(maxsize=32)
def _decoder(checkpoint: str, hw: Hardware, objective: str, lam: float, decoding: Decoding):
    from respect_jax.respect_pointer.decoding import make_decoder  # the network (flax) only when this solver runs

    model, _ = _load(checkpoint)
    return make_decoder(model, hw, objective, lam, decoding)


solve_respect_pointer = register_solver("respect_pointer")(
    checkpoint_solver(
        DEFAULT_CHECKPOINT,
        _load,
        _decoder,
        "Schedule ``graph`` with a trained RESPECT pointer network (never claims optimality).",
    )
)
