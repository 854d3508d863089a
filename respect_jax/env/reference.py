"""The pipeline-scheduling MDP in plain Python, one graph at a time: the reference of :mod:`respect_jax.env`.

Tests step :class:`~respect_jax.env.SchedulingEnv` and :class:`LoopEnv` side by side; ``respect-bench`` uses
:class:`LoopEnv` as the "one graph at a time in Python" baseline (how RESPECT's PyTorch environment works).
The final reward is scored by the loop evaluator :func:`respect_jax.reference.reference_objective`, not by
:mod:`respect_jax.costs`, so the two environments share no code.
"""

from __future__ import annotations

import numpy as np

from respect_jax.graphs.graph import Graph
from respect_jax.reference import reference_objective


class LoopEnv:
    """The SPEC MDP one graph at a time with Python loops (reference and benchmark baseline).

    ``reset(graph)`` then ``step(action)`` for each node in SPEC order; the last step returns the
    reward ``-objective`` (divided by ``norm`` if given). Actions below the precedence bound are
    raised to it, as in the JAX environment.
    """

    def __init__(self, hw, objective: str = "paper", lam: float = 1.0):
        self.hw, self.objective, self.lam = hw, objective, lam

    def reset(self, graph: Graph, norm: float = 1.0) -> dict:
        self.graph, self.norm = graph, norm
        self.order = graph.topological_order().tolist()
        self.preds = graph.predecessors()
        self.assignment = [-1] * graph.num_nodes
        self.t = 0
        return self._observation()

    def action_mask(self) -> np.ndarray:
        v = self.order[self.t]
        low = max((self.assignment[u] for u in self.preds[v]), default=0)
        return np.arange(self.hw.stages) >= low

    def _observation(self) -> dict:
        done = self.t >= self.graph.num_nodes
        mask = np.zeros(self.hw.stages, bool) if done else self.action_mask()
        return {"node": None if done else self.order[self.t], "action_mask": mask}

    def step(self, action: int):
        mask = self.action_mask()
        low = int(np.argmax(mask))
        self.assignment[self.order[self.t]] = max(int(action), low)
        self.t += 1
        done = self.t == self.graph.num_nodes
        reward = 0.0
        if done:
            obj = reference_objective(self.graph, self.assignment, self.hw, self.objective, self.lam)
            reward = -obj / self.norm
        return self._observation(), reward, done
