"""RESPECT-faithful baseline: an LSTM pointer network over nodes, stage packing and REINFORCE.

The original method (arXiv 2304.04716, GitHub Yu-Maryland/RESPECT) re-implemented in
JAX for an honest comparison with our policy:

* :mod:`~respect_jax.respect_pointer.features`: RESPECT's 15 node features;
* :mod:`~respect_jax.respect_pointer.model`: the pointer network (LSTM encoder, LSTM decoder, one
  glimpse, ``C * tanh`` logit clipping) whose action is a permutation of the nodes;
* :mod:`~respect_jax.respect_pointer.packing`: permutation -> stages (greedy packing under a
  bisection-searched per-stage memory cap, then a dependency repair pass);
* :mod:`~respect_jax.respect_pointer.reward`: RESPECT's ``1 - cosine`` imitation cost;
* :mod:`~respect_jax.respect_pointer.train`: REINFORCE with a greedy-rollout baseline (Kool et al.);
* :mod:`~respect_jax.respect_pointer.solver`: ``solver=respect_pointer``.

Train it with ``respect-train policy=respect_pointer algorithm=reinforce run_dir=...``.
"""

from respect_jax.respect_pointer.config import PointerConfig

__all__ = ["PointerConfig"]
