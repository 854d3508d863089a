"""Pure-JAX pipeline-scheduling environment: place a DNN graph's nodes on K pipelined accelerators.

One step places the next node (in the graph's topological order) on a stage ``>=`` the stages of its
predecessors; the last step's reward is ``-objective / norm`` from the shared evaluator
(:func:`respect_jax.costs.evaluate`). Its siblings :mod:`respect_jax.edge_cluster` (ASET query dispatch) and
:mod:`respect_jax.realtime` (HRT/SRT scheduling) share the interface of :class:`Environment`:
``reset(key, params)``, ``step(state, action)``, ``observation_spec(params)``, ``action_spec(params)``.

File map (the same roles in every environment package)::

    environment.py  SchedulingEnv (reset/step, batch_reset/batch_step, specs); place_node, the MDP's
                    transition, shared with the policy's decoding state (respect_jax.policy.state)
    types.py        State, Observation, TimeStep (FIRST/MID/LAST), DiscreteSpec, Environment (the interface)
    generator.py    instance generators key -> PaddedGraph for reset(key): RandomGraphs (a GeneratorConfig of
                    respect_jax.graphs.generators) and GraphList (a fixed list of graphs, one drawn per key)
    reference.py    LoopEnv: the same MDP in plain Python, scored by the NumPy loop evaluator (tests, benchmark)
"""

from respect_jax.env.environment import SchedulingEnv, place_node, precedence_bound, random_rollout
from respect_jax.env.generator import GraphList, RandomGraphs
from respect_jax.env.types import FIRST, LAST, MID, DiscreteSpec, Environment, Observation, State, TimeStep

__all__ = [
    "SchedulingEnv",
    "GraphList",
    "RandomGraphs",
    "place_node",
    "precedence_bound",
    "random_rollout",
    "DiscreteSpec",
    "Environment",
    "Observation",
    "State",
    "TimeStep",
    "FIRST",
    "MID",
    "LAST",
]
