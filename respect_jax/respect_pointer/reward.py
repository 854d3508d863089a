"""RESPECT's imitation cost: ``1 - cos(labels in output order, the same labels sorted)``.

``labels`` are the oracle stages (by position). They enter as ``stage + 1`` so that stage-0 nodes
count (a 0 would vanish from the dot product). The sorted vector is ascending (stage 0 first), the
order in which :mod:`~respect_jax.respect_pointer.packing` fills stages; the cost is 0 exactly when
the permutation lists the nodes stage by stage. Padding (chosen after every real node) is 0 in
both vectors. ``cos = x.y / max(|x| |y|, 1e-6)`` as ``torch.nn.CosineSimilarity(eps=1e-6)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def cosine_cost(labels: jax.Array, order: jax.Array, node_mask: jax.Array) -> jax.Array:
    """f32[] cost of one permutation ``order`` (i32[N] positions) given ``labels`` (i32[N])."""
    lab = jnp.where(node_mask, labels + 1, 0).astype(jnp.float32)
    learned = lab[order]
    ranked = jnp.sort(jnp.where(node_mask, lab, jnp.inf))
    ranked = jnp.where(jnp.isfinite(ranked), ranked, 0.0)
    norm = jnp.sqrt(jnp.sum(learned**2)) * jnp.sqrt(jnp.sum(ranked**2))
    return 1.0 - jnp.sum(learned * ranked) / jnp.maximum(norm, 1e-6)
