"""Per-graph hardware for training across K and hardware (pure JAX, vmappable, inside the scanned epoch).

A batch's hardware is one :class:`~respect_jax.costs.Hardware` whose fields other than ``stages`` are
f32[B] arrays (one setting per graph); the policy and the shared evaluator vmap over them
(:func:`respect_jax.policy.model.hw_axis`). K stays static (it fixes array shapes), so every graph of
a batch shares it: the training loop draws one K per epoch (one compiled epoch per K).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax.costs import Hardware
from respect_jax.train.config import HARDWARE_RATES, ConditioningConfig


def stack_presets(presets: Sequence[Hardware]) -> dict[str, np.ndarray]:
    """The presets as a table: field name -> f32[P] (``stages`` dropped: K is drawn separately)."""
    if not presets:
        raise ValueError("conditioning needs at least one hardware preset")
    return {f: np.asarray([float(getattr(hw, f)) for hw in presets], np.float32) for f in HARDWARE_RATES}


def sample_hardware(
    key: jax.Array, table: dict[str, np.ndarray], stages: int, batch: int, cfg: ConditioningConfig
) -> Hardware:
    """Hardware with f32[batch] fields: a uniformly drawn preset per graph, each field of
    ``cfg.perturb_fields`` multiplied by a log-uniform factor in ``[1/perturb, perturb]``."""
    k_pick, k_scale = jax.random.split(key)
    n_presets = len(table[HARDWARE_RATES[0]])
    pick = jax.random.randint(k_pick, (batch,), 0, n_presets)
    log_f = float(np.log(cfg.perturb))
    scale = jnp.exp(jax.random.uniform(k_scale, (len(HARDWARE_RATES), batch), minval=-log_f, maxval=log_f))
    fields = {}
    for i, name in enumerate(HARDWARE_RATES):
        value = jnp.asarray(table[name])[pick]
        fields[name] = value * scale[i] if name in cfg.perturb_fields else value
    return Hardware(stages=stages, **fields)


def stages_of_epoch(cfg: ConditioningConfig, seed: int, epoch_index: int) -> int:
    """The K of one generator epoch: uniform in ``stages_min..stages_max`` (or ``stages_choices``), a pure function of
    (seed, epoch) so a resumed run draws the same K sequence."""
    rng = np.random.default_rng([int(seed), int(epoch_index), 0x4B])
    if cfg.stages_choices is not None:
        return int(cfg.stages_choices[rng.integers(len(cfg.stages_choices))])
    return int(rng.integers(cfg.stages_min, cfg.stages_max + 1))
