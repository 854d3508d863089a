"""Hard/soft real-time DNN inference on heterogeneous accelerators (issue 8).

An online scheduler (RL or heuristic) picks which ready sub-job runs next and on which
accelerator; a deterministic safety layer certifies each proposal against a feasible reference
schedule of the HRT work (schedulability-preserving prefix replacement with per-machine cuts), so
every HRT deadline of a certified task set is met whatever the policy proposes.

File map (the roles of :mod:`respect_jax.env`'s files, and the model around them)::

    environment.py  RTEnv: reset(key, params)/step(state, action), specs, batch_*, event rules, metrics, rollout
    types.py        RTParams (a packed scenario: the env's params), RTState, Observation, Action, TimeStep
    generator.py    seeded random scenarios at a utilisation level and HRT/SRT mix (certified ones)
    reference.py    plain-Python simulator of the same rules, schedule validator, Python heuristics
    platform.py     accelerators and the execution-time / transfer model
    tasks.py        DNN jobs split into layer-group sub-jobs, HRT tasks, SRT clients, packing, and the
                    up-front check of the HRT task set (check_task_set, InfeasibleTaskSet)
    safety.py       the safety layer (reference scheduler, certification) and its proof
    baselines.py    heuristic policies; policy.py / train.py the RL policy and its training
    evaluate.py     batched evaluation of methods; report.py the figures and tables

See ``README.md`` in this folder.
"""

from respect_jax.realtime.environment import RTEnv, episode_metrics, rollout
from respect_jax.realtime.generator import ScenarioConfig, generate
from respect_jax.realtime.platform import Accelerator, Platform, platform_from_dict
from respect_jax.realtime.tasks import InfeasibleTaskSet, Scenario, Sizes, check_task_set, pack, stack
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
