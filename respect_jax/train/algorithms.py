"""Training losses: imitation (parallel teacher forcing), REINFORCE (POMO / greedy baselines) and
self-improvement (imitation of the policy's own best sampled schedule after local search).

Both are pure functions of ``(params, batch, key)`` returning ``(loss, metrics)``; ``hw`` is shared by
the batch or per-graph (fields f32[B], :mod:`respect_jax.train.hardware`). The update step
(:mod:`respect_jax.train.step`) differentiates them.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from respect_jax.costs import Hardware, objective_lower_bound
from respect_jax.graphs.padded import PaddedGraph
from respect_jax.local_search import improve
from respect_jax.policy.decoding import candidates
from respect_jax.policy.model import (
    SchedulingPolicy,
    beam_search,
    hw_axis,
    log_probs_and_entropy,
    rollout,
    rollout_recorded,
    schedule_objectives,
)
from respect_jax.train.config import ImitationConfig, ReinforceConfig, SelfImprovementConfig


def imitation_loss(
    model: SchedulingPolicy,
    graphs: PaddedGraph,
    labels: jax.Array,
    hw: Hardware,
    objective: str,
    lam: float,
    cfg: ImitationConfig,
    feats: jax.Array | None = None,
) -> tuple[jax.Array, dict]:
    """Mean per-node cross-entropy of the teacher-forced stage logits to the labels.

    Args:
        graphs: batch of B graphs; labels: i32[B, N] reference stages by position.
        feats: optional precomputed node features f32[B, N, F].
    Returns:
        the loss and metrics ``loss``, ``accuracy`` (per node) and ``exact`` (whole schedule).
    """
    h, g = model.encode(graphs, feats)
    return teacher_cross_entropy(model, graphs, h, g, labels, hw, objective, lam, cfg.label_smoothing)


def teacher_cross_entropy(
    model: SchedulingPolicy,
    graphs: PaddedGraph,
    h: jax.Array,
    g: jax.Array,
    labels: jax.Array,
    hw: Hardware,
    objective: str,
    lam: float,
    label_smoothing: float,
) -> tuple[jax.Array, dict]:
    """Cross-entropy of the teacher-forced logits to labels i32[B, N] given embeddings h, g."""
    logits = model.teacher_logits(graphs, h, g, labels[:, None], hw, objective, lam)[:, 0]  # [B, N, K]
    logp = jax.nn.log_softmax(logits, axis=-1)
    k = logits.shape[-1]
    onehot = jax.nn.one_hot(labels, k)
    if label_smoothing:
        allowed = (logits > -1e8).astype(jnp.float32)
        spread = allowed / jnp.maximum(jnp.sum(allowed, axis=-1, keepdims=True), 1.0)
        target = (1.0 - label_smoothing) * onehot + label_smoothing * spread
    else:
        target = onehot
    ce = -jnp.sum(jnp.where(target > 0, target * logp, 0.0), axis=-1)  # [B, N]
    mask = graphs.node_mask
    count = jnp.maximum(jnp.sum(mask), 1)
    loss = jnp.sum(jnp.where(mask, ce, 0.0)) / count
    hit = (jnp.argmax(logits, axis=-1) == labels) | ~mask
    metrics = {
        "loss": loss,
        "accuracy": jnp.sum(jnp.where(mask, hit, False)) / count,
        "exact": jnp.mean(jnp.all(hit, axis=-1).astype(jnp.float32)),
    }
    return loss, metrics


def reinforce_loss(
    model: SchedulingPolicy,
    frozen: SchedulingPolicy,
    graphs: PaddedGraph,
    key: jax.Array,
    hw: Hardware,
    objective: str,
    lam: float,
    cfg: ReinforceConfig,
    feats: jax.Array | None = None,
) -> tuple[jax.Array, dict]:
    """REINFORCE on S sampled schedules per graph; reward ``-objective / lower_bound``.

    ``frozen`` is the same network with gradients stopped (``stop_gradient`` of the parameters):
    it decodes the rollouts step by step and records the parameter-free decoder inputs of every
    step; the log-probabilities of the sampled schedules then come from one parallel pass of
    ``model`` over them (:meth:`SchedulingPolicy.replay_logits`, the only differentiated pass; the
    same logits as teacher forcing without recomputing the state quantities).
    """
    h, g = model.encode(graphs, feats)
    hs, gs = jax.lax.stop_gradient(h), jax.lax.stop_gradient(g)
    k_sample, k_greedy = jax.random.split(key)
    stage, inputs = rollout_recorded(
        frozen, graphs, hs, gs, hw, objective, lam, k_sample, cfg.samples, False, cfg.temperature
    )
    obj, valid = schedule_objectives(graphs, stage, hw, objective, lam)
    bound = jax.vmap(objective_lower_bound, in_axes=(0, hw_axis(hw), None))(graphs, hw, objective)
    reward = -obj / bound[:, None]  # [B, S]
    metrics = {}
    if cfg.baseline == "pomo":
        baseline = jnp.mean(reward, axis=1, keepdims=True)
    elif cfg.baseline == "greedy":
        g_stage = rollout(frozen, graphs, hs, gs, hw, objective, lam, k_greedy, 1, True)
        g_obj, _ = schedule_objectives(graphs, g_stage, hw, objective, lam)
        baseline = -g_obj / bound[:, None]
        metrics["greedy_ratio"] = jnp.mean(g_obj[:, 0] / bound)
    elif cfg.baseline == "mean":
        baseline = jnp.mean(reward)
    else:
        baseline = jnp.zeros(())
    adv = reward - baseline
    if cfg.leader_weight != 1.0:
        leader = jax.nn.one_hot(jnp.argmax(reward, axis=1), reward.shape[1], dtype=bool)
        adv = jnp.where(leader, cfg.leader_weight * adv, adv)
    if cfg.normalise_advantage:
        adv = adv / (jnp.std(adv) + 1e-8)
    adv = jax.lax.stop_gradient(adv)
    logits = model.replay_logits(graphs, h, g, stage, inputs, hw) / cfg.temperature
    logp, ent = log_probs_and_entropy(logits, stage, graphs.node_mask)
    entropy = jnp.mean(ent)
    loss = -jnp.mean(adv * logp) - cfg.entropy * entropy
    ratio = obj / bound[:, None]
    metrics.update(
        loss=loss,
        ratio=jnp.mean(ratio),
        best_ratio=jnp.mean(jnp.min(ratio, axis=1)),
        entropy=entropy,
        valid=jnp.mean(valid.astype(jnp.float32)),
    )
    return loss, metrics


def self_improvement_targets(
    frozen: SchedulingPolicy,
    graphs: PaddedGraph,
    h: jax.Array,
    g: jax.Array,
    key: jax.Array,
    hw: Hardware,
    objective: str,
    lam: float,
    cfg: SelfImprovementConfig,
) -> dict:
    """The policy's own improved schedule of every graph of the batch (no gradient).

    ``frozen`` decodes ``cfg.samples`` schedules per graph (the greedy one first when
    ``cfg.include_greedy``; with ``cfg.teacher == "beam"`` the greedy one and the ``cfg.samples``
    beams of a beam search) from embeddings h f32[B, N, d], g f32[B, d]; the best by the shared
    evaluator is hill-climbed for at most ``cfg.local_search`` moves.

    Returns ``target`` i32[B, N] (valid schedule by position, 0 on padding), ``teacher`` f32[B] (its
    objective), ``sample`` f32[B] (best sample before the local search), ``greedy`` f32[B] (NaN
    without ``include_greedy``) and ``valid`` bool[B] (every sample was valid).
    """
    k_sample = jax.random.split(key)[1]  # the sampling stream of the shipped runs
    if cfg.teacher == "beam":
        stage = beam_search(frozen, graphs, h, g, hw, objective, lam, cfg.samples)
        if cfg.include_greedy:
            greedy_stage = rollout(frozen, graphs, h, g, hw, objective, lam, k_sample, 1, greedy=True)
            stage = jnp.concatenate([greedy_stage, stage], axis=1)
    else:
        stage = candidates(
            frozen, graphs, h, g, hw, objective, lam, k_sample, cfg.samples, cfg.include_greedy, cfg.temperature
        )  # [B, S, N]
    obj, valid = schedule_objectives(graphs, stage, hw, objective, lam)
    obj = jnp.where(valid, obj, jnp.inf)
    best = jnp.argmin(obj, axis=1)
    target = jnp.take_along_axis(stage, best[:, None, None], axis=1)[:, 0]
    sample = jnp.min(obj, axis=1)
    teacher = sample
    if cfg.local_search:
        polish = lambda graph, s, hw: improve(graph, s, hw, objective, lam, cfg.local_search)[:2]
        target, teacher = jax.vmap(polish, in_axes=(0, 0, hw_axis(hw)))(graphs, target, hw)
    greedy = obj[:, 0] if cfg.include_greedy else jnp.full_like(sample, jnp.nan)
    out = {"target": target, "teacher": teacher, "sample": sample, "greedy": greedy, "valid": jnp.all(valid, axis=1)}
    return jax.lax.stop_gradient(out)


def self_improvement_loss(
    model: SchedulingPolicy,
    frozen: SchedulingPolicy,
    graphs: PaddedGraph,
    key: jax.Array,
    hw: Hardware,
    objective: str,
    lam: float,
    cfg: SelfImprovementConfig,
    feats: jax.Array | None = None,
) -> tuple[jax.Array, dict]:
    """Cross-entropy towards :func:`self_improvement_targets` (one parallel teacher-forced pass).

    Metrics: imitation ``loss``/``accuracy``/``exact``, and the mean ratio to the lower bound of the
    label (``teacher_ratio``), of the best sample before the local search (``sample_ratio``) and of
    the greedy schedule (``greedy_ratio``, with ``include_greedy``).
    """
    h, g = model.encode(graphs, feats)
    hs, gs = jax.lax.stop_gradient(h), jax.lax.stop_gradient(g)
    t = self_improvement_targets(frozen, graphs, hs, gs, key, hw, objective, lam, cfg)
    loss, metrics = teacher_cross_entropy(model, graphs, h, g, t["target"], hw, objective, lam, cfg.label_smoothing)
    bound = jax.vmap(objective_lower_bound, in_axes=(0, hw_axis(hw), None))(graphs, hw, objective)
    metrics.update(
        teacher_ratio=jnp.mean(t["teacher"] / bound),
        sample_ratio=jnp.mean(t["sample"] / bound),
        valid=jnp.mean(t["valid"].astype(jnp.float32)),
    )
    if cfg.include_greedy:
        metrics["greedy_ratio"] = jnp.mean(t["greedy"] / bound)
    return loss, metrics


def frozen_copy(graphdef: nnx.GraphDef, params) -> SchedulingPolicy:
    """The network with gradients stopped at its parameters (for rollouts inside a loss)."""
    return nnx.merge(graphdef, jax.lax.stop_gradient(params))


LossFn = Callable[..., tuple[jax.Array, dict]]
