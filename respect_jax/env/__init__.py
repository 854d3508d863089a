"""Pure-JAX pipeline-scheduling environment (SPEC section 3)."""

from respect_jax.env.environment import SchedulingEnv, random_rollout
from respect_jax.env.types import FIRST, LAST, MID, Observation, State, TimeStep

__all__ = ["SchedulingEnv", "random_rollout", "Observation", "State", "TimeStep", "FIRST", "MID", "LAST"]
