"""Hard/soft real-time DNN inference on heterogeneous accelerators (issue 8).

An online scheduler (RL or heuristic) picks which ready sub-job runs next and on which
accelerator; a deterministic safety layer certifies each proposal against a feasible reference
schedule of the HRT work (schedulability-preserving prefix replacement with per-machine cuts), so
every HRT deadline of a certified task set is met whatever the policy proposes.

Modules: ``platform`` (accelerators, dataflow-aware cost model), ``tasks`` (DNN jobs split into
layer-group sub-jobs, HRT tasks, SRT clients, packing), ``generator`` (seeded scenarios),
``feasibility`` (up-front check), ``types`` / ``environment`` (pure JAX env), ``safety`` (the
layer and its proof), ``baselines``, ``policy`` / ``train`` (RL), ``reference`` (plain-Python
simulator), ``evaluate`` / ``report`` (figures). See ``README.md`` in this folder.
"""

from respect_jax.realtime.environment import RTEnv, episode_metrics, rollout
from respect_jax.realtime.feasibility import InfeasibleTaskSet, check_task_set
from respect_jax.realtime.generator import ScenarioConfig, generate
from respect_jax.realtime.platform import Accelerator, Platform, platform_from_dict
from respect_jax.realtime.tasks import Scenario, Sizes, pack, stack
from respect_jax.realtime.types import Action, Observation, RTParams, RTState, TimeStep

__all__ = [
    "Accelerator",
    "Action",
    "InfeasibleTaskSet",
    "Observation",
    "Platform",
    "RTEnv",
    "RTParams",
    "RTState",
    "Scenario",
    "ScenarioConfig",
    "Sizes",
    "TimeStep",
    "check_task_set",
    "episode_metrics",
    "generate",
    "pack",
    "platform_from_dict",
    "rollout",
    "stack",
]
