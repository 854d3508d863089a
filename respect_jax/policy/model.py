"""The scheduling policy: GNN encoder run once per graph + autoregressive stage decoder.

Two ways to run the decoder, with the same numbers (tested):

* :meth:`SchedulingPolicy.teacher_logits`: given whole schedules (oracle labels for imitation,
  or sampled schedules whose log-probabilities REINFORCE needs), the logits of every step come out
  of one parallel pass (prefix sums, :func:`respect_jax.policy.state.prefix_quantities`);
* :func:`rollout`: step-by-step decoding (``lax.while_loop`` up to the largest graph of the batch)
  for greedy decoding or sampling, S samples per graph sharing one encoder pass.

Every decoded schedule is valid by construction: stage logits below the precedence bound
``max(s(u) : u in pred(t))`` (the env's mask rule) are masked, and the chosen stage is also raised
to that bound.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from respect_jax import pytree as struct
from respect_jax.costs import Hardware, evaluate, objective_value
from respect_jax.graphs.features import node_features
from respect_jax.graphs.padded import PaddedGraph
from respect_jax.policy.config import PolicyConfig
from respect_jax.policy.decoder import CutInputs, StageDecoder
from respect_jax.policy.encoder import GraphEncoder
from respect_jax.policy.features import GraphStatics, cut_features, features, graph_statics
from respect_jax.policy.state import (
    DecodeState,
    advance,
    init_decode_state,
    prefix_quantities,
    stage_sums_before,
    step_quantities,
)


@struct.dataclass
class DecoderInputs:
    """The parameter-free decoder inputs of every step of decoded schedules, recorded by
    :func:`rollout_recorded` (entries of steps the loop did not run are 0 / False).

    Attributes:
        stage_feats: f32[B, S, N, K, NUM_STAGE_FEATURES]; context: f32[B, S, N, NUM_CONTEXT_FEATURES];
        allowed: bool[B, S, N, K] (see :func:`respect_jax.policy.features.features`).
    """

    stage_feats: jax.Array
    context: jax.Array
    allowed: jax.Array


def hw_axis(hw: Hardware) -> int | None:
    """The ``in_axes`` of ``hw`` in a vmap over the graphs of a batch: 0 when its fields are per-graph
    arrays f32[B] (training across hardware), None when they are scalars shared by the batch."""
    return 0 if jnp.ndim(hw.sram_bytes) > 0 else None


def batch_statics(graphs: PaddedGraph, hw: Hardware) -> GraphStatics:
    """:func:`~respect_jax.policy.features.graph_statics` of every graph of a batch (shared or per-graph ``hw``)."""
    return jax.vmap(graph_statics, in_axes=(0, hw_axis(hw)))(graphs, hw)


def batch_features(graphs: PaddedGraph) -> jax.Array:
    """f32[B, N, NUM_FEATURES] node features of a padded batch (no gradient flows through them)."""
    return jax.lax.stop_gradient(jax.vmap(node_features)(graphs))


class SchedulingPolicy(nnx.Module):
    """GNN + attention policy for pipeline-stage assignment (see :class:`PolicyConfig`)."""

    def __init__(self, cfg: PolicyConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.encoder = GraphEncoder(cfg.width, cfg.layers, cfg.encoder, cfg.heads, cfg.aggregation, rngs=rngs)
        self.decoder = StageDecoder(
            cfg.width,
            cfg.decoder_width or cfg.width,
            cfg.decoder,
            cfg.decoder_layers,
            cfg.heads,
            cfg.logit_clip,
            cfg.stage_embeddings,
            cfg.cut_heads,
            cfg.feature_version,
            rngs=rngs,
        )

    def features(self, q, st, t, hw: Hardware, objective: str, lam: float):
        """:func:`respect_jax.policy.features.features` of this network's ``feature_version``."""
        return features(q, st, t, hw, objective, lam, self.cfg.feature_version)

    def encode(
        self, graphs: PaddedGraph, feats: jax.Array | None = None, aggregation: str | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """Node embeddings f32[B, N, d] and graph embeddings f32[B, d] of a padded batch.

        ``feats`` f32[B, N, NUM_FEATURES] may be precomputed with :func:`batch_features` (they do not
        depend on parameters: computing them outside a differentiated loss saves work).
        """
        feats = batch_features(graphs) if feats is None else feats
        return self.encoder(graphs, feats, aggregation)

    def teacher_logits(
        self,
        graphs: PaddedGraph,
        h: jax.Array,
        g: jax.Array,
        stage: jax.Array,
        hw: Hardware,
        objective: str,
        lam: float,
    ) -> jax.Array:
        """Masked logits f32[B, S, N, K] of every step of known schedules, in one parallel pass.

        Args:
            graphs: batch of B graphs; h f32[B, N, d], g f32[B, d] from :meth:`encode`.
            stage: i32[B, S, N] S schedules per graph (by position; padding ignored).
        """
        k = hw.stages
        statics = batch_statics(graphs, hw)
        hq, he, gq = self.decoder.project_nodes(h, g)
        inner = jax.vmap(prefix_quantities, in_axes=(None, None, 0, None, None))  # over S
        q = jax.vmap(inner, in_axes=(0, 0, 0, 0, None))(graphs, statics, stage, he, k)  # leading [B, S, N]
        t = jnp.arange(stage.shape[-1])
        feat = jax.vmap(  # over B
            jax.vmap(  # over S
                jax.vmap(self.features, in_axes=(0, None, 0, None, None, None)),  # over t
                in_axes=(0, None, None, None, None, None),
            ),
            in_axes=(0, 0, None, hw_axis(hw), None, None),
        )
        stage_feats, context, allowed = feat(q, statics, t, hw, objective, lam)
        stage_emb = q.emb / jnp.maximum(q.count, 1.0)[..., None]
        cut = self.cut_inputs(h, statics, None, hw)
        return self._decode_all(hq, gq, DecoderInputs(stage_feats, context, allowed), stage_emb, cut)

    def replay_logits(
        self,
        graphs: PaddedGraph,
        h: jax.Array,
        g: jax.Array,
        stage: jax.Array,
        inputs: DecoderInputs,
        hw: Hardware,
    ) -> jax.Array:
        """The logits f32[B, S, N, K] of :meth:`teacher_logits` for schedules decoded by
        :func:`rollout_recorded`, from the decoder inputs recorded while decoding them: only the
        parameter-dependent part (the per-stage embedding sums and the decoder) is recomputed, in
        parallel. REINFORCE uses it for the log-probabilities of its sampled schedules.

        Args:
            h f32[B, N, d], g f32[B, d] from :meth:`encode`; stage i32[B, S, N] and ``inputs`` as
            :func:`rollout_recorded` returned them; ``hw`` the hardware they were decoded for.
        """
        k = inputs.allowed.shape[-1]
        hq, he, gq = self.decoder.project_nodes(h, g)
        rows = stage.shape[1] == 1  # one schedule per graph: the teacher-forcing form (stage_sums_before)
        sums_one = lambda st, m, e, k: stage_sums_before(st, m, e, k, by_stage_rows=rows)
        sums = jax.vmap(jax.vmap(sums_one, in_axes=(0, None, None, None)), in_axes=(0, 0, 0, None))
        emb, count = sums(stage, graphs.node_mask, he, k)  # [B, S, N, K, e], [B, S, N, K]
        cut = None
        if self.decoder.cut_attn is not None:
            cut = self.cut_inputs(h, batch_statics(graphs, hw), None, hw)
        return self._decode_all(hq, gq, inputs, emb / jnp.maximum(count, 1.0)[..., None], cut)

    def cut_inputs(
        self,
        h: jax.Array,
        statics: GraphStatics,
        t: jax.Array | None,
        hw: Hardware,
        projected: tuple[jax.Array, jax.Array] | None = None,
    ) -> CutInputs | None:
        """The decoder's cut-attention inputs for a batch (None without cut attention).

        Args: h f32[B, N, d] node embeddings; statics of the B graphs; ``t`` the step of every graph
        (decoding step by step: T = 1) or None for every step at once (teacher forcing: T = N);
        ``projected`` the (keys, values) of ``CutAttention.project(h)`` if already computed.
        """
        if self.decoder.cut_attn is None:
            return None
        keys, values = projected if projected is not None else self.decoder.cut_attn.project(h)
        if t is None:
            steps = jnp.arange(h.shape[1])
            per_graph = lambda st, hw: jax.vmap(cut_features, in_axes=(None, 0, None))(st, steps, hw)
            pair, valid = jax.vmap(per_graph, in_axes=(0, hw_axis(hw)))(statics, hw)
        else:
            pair, valid = jax.vmap(cut_features, in_axes=(0, None, hw_axis(hw)))(statics, t, hw)
            pair, valid = pair[:, None], valid[:, None]
        return CutInputs(keys=keys, values=values, pair=pair, valid=valid)

    def _decode_all(
        self, hq: jax.Array, gq: jax.Array, inputs: DecoderInputs, stage_emb: jax.Array, cut: CutInputs | None
    ) -> jax.Array:
        """Decoder logits f32[B, S, N, K] of every step: hq f32[B, N, d'], gq f32[B, d'] (project_nodes)."""
        s = inputs.allowed.shape[1]
        hq_b = jnp.broadcast_to(hq[:, None], (hq.shape[0], s) + hq.shape[1:])
        gq_b = jnp.broadcast_to(gq[:, None, None], hq_b.shape)
        return self.decoder(hq_b, gq_b, inputs.context, inputs.stage_feats, stage_emb, inputs.allowed, cut)


def grow_decoder(
    source: SchedulingPolicy, layers: int | None = None, seed: int = 0, cut_heads: int | None = None
) -> SchedulingPolicy:
    """``source`` with a larger decoder that computes the same logits.

    ``layers``: decoder residual blocks (at least the source's; None: unchanged). ``cut_heads``: add
    the cut attention (:class:`~respect_jax.policy.decoder.CutAttention`) with that many heads to a
    source without one (None: unchanged). Every parameter of ``source`` is copied; the extra blocks
    (and, for the ``attention`` decoder, their self-attention layers) and the added cut attention get
    zero output projections, so they start as the identity and fine-tuning adds capacity from the
    trained network's function.
    """
    cfg = source.cfg
    layers = cfg.decoder_layers if layers is None else layers
    if layers < cfg.decoder_layers:
        raise ValueError(
            f"init_decoder_layers ({layers}) must be >= the source's decoder_layers ({cfg.decoder_layers})"
        )
    add_cut = cut_heads is not None and cut_heads != cfg.cut_heads
    if add_cut and (cfg.cut_heads or cut_heads < 1):
        raise ValueError(
            f"init_cut_heads ({cut_heads}) can only add a cut attention (>= 1 heads) to a network without one"
            f" (the source has cut_heads={cfg.cut_heads})"
        )
    new_cfg = dataclasses.replace(cfg, decoder_layers=layers, cut_heads=cut_heads if add_cut else cfg.cut_heads)
    grown = SchedulingPolicy(new_cfg, rngs=nnx.Rngs(seed))
    nnx.update(grown, nnx.state(source))
    extra = range(cfg.decoder_layers, layers)
    outputs = [grown.decoder.blocks[i].lin2 for i in extra]
    if cfg.decoder == "attention":
        outputs += [grown.decoder.attn[i].out for i in extra]
    if add_cut:
        outputs.append(grown.decoder.cut_attn.out)
    for layer in outputs:
        layer.kernel[...] = jnp.zeros_like(layer.kernel[...])
        layer.bias[...] = jnp.zeros_like(layer.bias[...])
    return grown


def with_hardware_inputs(source: SchedulingPolicy, seed: int = 0) -> SchedulingPolicy:
    """``source`` (feature version 1) as a feature-version-2 network that computes the same logits.

    Every parameter is copied; the context projection gets zero weights for the appended
    :func:`~respect_jax.policy.features.hardware_context` inputs, so training across K and hardware
    starts from the trained network's function. A version-2 source is returned unchanged.
    """
    if source.cfg.feature_version == 2:
        return source
    new = SchedulingPolicy(dataclasses.replace(source.cfg, feature_version=2), rngs=nnx.Rngs(seed))
    state = nnx.state(source)
    old = state["decoder"]["context_query"]["kernel"][...]  # [C1, d]
    wide = new.decoder.context_query.kernel[...]
    state["decoder"]["context_query"]["kernel"] = nnx.Param(jnp.zeros_like(wide).at[: old.shape[0]].set(old))
    nnx.update(new, state)
    return new


def rollout(
    model: SchedulingPolicy,
    graphs: PaddedGraph,
    h: jax.Array,
    g: jax.Array,
    hw: Hardware,
    objective: str,
    lam: float,
    key: jax.Array,
    num_samples: int,
    greedy: bool,
    temperature: float = 1.0,
) -> jax.Array:
    """Decode S schedules per graph step by step; returns i32[B, S, N] stages by position (padding 0).

    ``greedy`` takes the arg-max stage (then all S schedules are equal: use S = 1), otherwise stages
    are sampled from ``softmax(logits / temperature)``. The loop runs up to the largest graph of
    the batch; shorter graphs idle through the remaining steps.
    """
    return rollout_recorded(
        model, graphs, h, g, hw, objective, lam, key, num_samples, greedy, temperature, record=False
    )[0]


def rollout_recorded(
    model: SchedulingPolicy,
    graphs: PaddedGraph,
    h: jax.Array,
    g: jax.Array,
    hw: Hardware,
    objective: str,
    lam: float,
    key: jax.Array,
    num_samples: int,
    greedy: bool,
    temperature: float = 1.0,
    *,
    record: bool = True,
) -> tuple[jax.Array, DecoderInputs | None]:
    """:func:`rollout` (the same schedules for the same key) that also returns the decoder inputs of
    every step, for :meth:`SchedulingPolicy.replay_logits` (None with ``record=False``)."""
    n_pad = graphs.params.shape[1]
    ds, step_logits, place = decoder_steps(model, graphs, h, g, hw, objective, lam, num_samples)
    if record:  # step t's inputs go to index t of an N axis after (B, S)
        shapes = jax.eval_shape(lambda ds: step_logits(ds, 0)[1], ds)
        recorded = jax.tree.map(lambda x: jnp.zeros(x.shape[:2] + (n_pad,) + x.shape[2:], x.dtype), shapes)
    else:
        recorded = None

    def body(carry):
        t, ds, recorded = carry
        logits, inputs = step_logits(ds, t)
        if greedy:
            action = jnp.argmax(logits, axis=-1)
        else:
            action = jax.random.categorical(jax.random.fold_in(key, t), logits / temperature, axis=-1)
        if record:
            recorded = jax.tree.map(lambda buf, x: buf.at[:, :, t].set(x), recorded, inputs)
        return t + 1, place(ds, t, action), recorded

    n_max = jnp.max(graphs.num_nodes)
    _, ds, recorded = jax.lax.while_loop(lambda c: c[0] < n_max, body, (jnp.int32(0), ds, recorded))
    return jnp.where(graphs.node_mask[:, None, :], ds.stage, 0), recorded


def decoder_steps(
    model: SchedulingPolicy,
    graphs: PaddedGraph,
    h: jax.Array,
    g: jax.Array,
    hw: Hardware,
    objective: str,
    lam: float,
    width: int,
) -> tuple[DecodeState, Callable, Callable]:
    """The step-by-step decoder of W = ``width`` partial schedules per graph (sampling or beams).

    Returns:
        ``ds``: the empty :class:`DecodeState` with leading axes [B, W];
        ``step_logits(ds, t) -> (logits f32[B, W, K], DecoderInputs of the step)``: the masked stage
        logits of node t for every partial schedule (and the inputs :meth:`replay_logits` needs);
        ``place(ds, t, action i32[B, W]) -> ds``: node t placed on ``action`` in every schedule.
    """
    b, n_pad = graphs.params.shape
    statics = batch_statics(graphs, hw)
    hq, he, gq = model.decoder.project_nodes(h, g)
    projected = model.decoder.cut_attn.project(h) if model.decoder.cut_attn is not None else None
    init = init_decode_state(n_pad, hw.stages, he.shape[-1])
    ds = jax.tree.map(lambda x: jnp.broadcast_to(x, (b, width) + x.shape), init)
    quantities = jax.vmap(jax.vmap(step_quantities, in_axes=(None, None, 0, None)), in_axes=(0, 0, 0, None))
    feat = jax.vmap(
        jax.vmap(model.features, in_axes=(0, None, None, None, None, None)),
        in_axes=(0, 0, None, hw_axis(hw), None, None),
    )
    advance_all = jax.vmap(jax.vmap(advance, in_axes=(None, None, 0, None, 0, 0)), in_axes=(0, 0, 0, None, 0, 0))

    def step_logits(ds: DecodeState, t) -> tuple[jax.Array, DecoderInputs]:
        q = quantities(graphs, statics, ds, t)
        stage_feats, context, allowed = feat(q, statics, t, hw, objective, lam)
        hq_t = jnp.broadcast_to(hq[:, None, t], (b, width, hq.shape[-1]))
        gq_b = jnp.broadcast_to(gq[:, None], hq_t.shape)
        stage_emb = q.emb / jnp.maximum(q.count, 1.0)[..., None]
        cut = model.cut_inputs(h, statics, t, hw, projected)
        logits = model.decoder(hq_t, gq_b, context, stage_feats, stage_emb, allowed, cut)
        return logits, DecoderInputs(stage_feats, context, allowed)

    def place(ds: DecodeState, t, action: jax.Array) -> DecodeState:
        he_t = jnp.broadcast_to(he[:, None, t], (b, width, he.shape[-1]))
        return advance_all(graphs, statics, ds, t, action, he_t)

    return ds, step_logits, place


def beam_search(
    model: SchedulingPolicy,
    graphs: PaddedGraph,
    h: jax.Array,
    g: jax.Array,
    hw: Hardware,
    objective: str,
    lam: float,
    width: int,
    key: jax.Array | None = None,
    temperature: float = 1.0,
) -> jax.Array:
    """Beam search over the policy's stage choices; returns i32[B, W, N] W = ``width`` schedules
    per graph (padding 0).

    Deterministic (``key`` None): the W most probable schedules found, by sum of log-probabilities.
    Every step expands each beam by its K stages and keeps the W best of the W*K partial schedules.

    Stochastic (``key`` given): stochastic beam search (Kool, van Hoof and Welling, ICML 2019), W
    schedules sampled *without replacement* from ``softmax(logits / temperature)``. Every partial
    schedule carries a Gumbel-perturbed log-probability; its children's perturbations are drawn
    conditioned on their maximum being the parent's (:func:`_gumbel_children`), and the W largest are
    kept, so the W complete schedules are exactly the Gumbel-top-W of the policy's distribution:
    distinct schedules, unlike W independent samples, which repeat the likely ones.

    Masked stages score -1e9 per step, so they survive only while fewer than W allowed partial
    schedules exist (then they duplicate an allowed one: the chosen stage is raised to the
    precedence bound, and the schedule stays valid). Graphs shorter than the batch's longest keep
    their beams through the remaining steps. The same decoder steps as :func:`rollout`.
    """
    b, k = graphs.params.shape[0], hw.stages
    ds, step_logits, place = decoder_steps(model, graphs, h, g, hw, objective, lam, width)
    live = jnp.where(jnp.arange(width) == 0, 0.0, -jnp.inf)[None, :].repeat(b, axis=0)  # one live beam

    def body(carry):
        t, ds, score, logp_sum = carry  # score: the ranking value (logp_sum, perturbed when stochastic)
        logits = step_logits(ds, t)[0]
        logp = jax.nn.log_softmax(logits if key is None else logits / temperature, axis=-1)
        done = (t >= graphs.num_nodes)[:, None, None]  # finished graphs: each beam continues unchanged
        logp = jnp.where(done, jnp.where(jnp.arange(k) == 0, 0.0, -jnp.inf), logp)
        child_logp = logp_sum[..., None] + logp  # [B, W, K]
        child = child_logp if key is None else _gumbel_children(jax.random.fold_in(key, t), score, child_logp)
        top, idx = jax.lax.top_k(child.reshape(b, width * k), width)
        parent, action = idx // k, idx % k
        ds = jax.tree.map(lambda x: jnp.take_along_axis(x, parent.reshape(parent.shape + (1,) * (x.ndim - 2)), 1), ds)
        logp_sum = jnp.take_along_axis(child_logp.reshape(b, width * k), idx, axis=1)
        return t + 1, place(ds, t, action), top, logp_sum

    n_max = jnp.max(graphs.num_nodes)
    _, ds, _, _ = jax.lax.while_loop(lambda c: c[0] < n_max, body, (jnp.int32(0), ds, live, live))
    return jnp.where(graphs.node_mask[:, None, :], ds.stage, 0)


def _gumbel_children(key: jax.Array, parent: jax.Array, child_logp: jax.Array) -> jax.Array:
    """Perturbed log-probabilities f32[B, W, K] of the children of W partial schedules.

    Args: parent f32[B, W] the parents' perturbed log-probabilities (-inf: no beam);
    child_logp f32[B, W, K] the children's log-probabilities. Each child gets ``child_logp +
    Gumbel(0)``; the children of one parent are then shifted so that their maximum equals the
    parent's value (the numerically stable form of ``-log(exp(-T) - exp(-Z) + exp(-g))``, Kool et al.
    2019, appendix B), which is how a Gumbel-top-k over complete schedules factorises over steps.
    """
    g = child_logp + jax.random.gumbel(key, child_logp.shape)
    z = jnp.max(g, axis=-1, keepdims=True)
    t = parent[..., None]
    finite = jnp.isfinite(g) & jnp.isfinite(t)
    g_safe, t_safe = jnp.where(finite, g, 0.0), jnp.where(finite, t, 0.0)
    a = jnp.minimum(g_safe - jnp.where(finite, z, 0.0), 0.0)
    log1mexp = jnp.where(a > -0.6931, jnp.log(-jnp.expm1(a)), jnp.log1p(-jnp.exp(a)))  # log(1 - e^a)
    v = t_safe - g_safe + log1mexp
    shifted = t_safe - jnp.maximum(v, 0.0) - jnp.log1p(jnp.exp(-jnp.abs(v)))
    return jnp.where(finite, shifted, -jnp.inf)


def schedule_objectives(
    graphs: PaddedGraph, stage: jax.Array, hw: Hardware, objective: str, lam: float
) -> tuple[jax.Array, jax.Array]:
    """Objective f32[B, S] and validity bool[B, S] of schedules i32[B, S, N] (the shared evaluator)."""
    per_graph = jax.vmap(evaluate, in_axes=(None, 0, None))
    metrics = jax.vmap(per_graph, in_axes=(0, 0, hw_axis(hw)))(graphs, stage, hw)
    return objective_value(metrics, objective, lam), metrics.valid


def log_probs_and_entropy(logits: jax.Array, stage: jax.Array, node_mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Sum of log-probabilities f32[B, S] of schedules and mean per-step entropy f32[B, S].

    Args:
        logits: f32[B, S, N, K] masked logits; stage: i32[B, S, N]; node_mask: bool[B, N].
    """
    logp_all = jax.nn.log_softmax(logits, axis=-1)
    chosen = jnp.take_along_axis(logp_all, stage[..., None], axis=-1)[..., 0]
    mask = node_mask[:, None, :]
    logp = jnp.sum(jnp.where(mask, chosen, 0.0), axis=-1)
    p = jnp.exp(logp_all)
    ent_t = -jnp.sum(jnp.where(p > 0, p * logp_all, 0.0), axis=-1)
    ent = jnp.sum(jnp.where(mask, ent_t, 0.0), axis=-1) / jnp.maximum(jnp.sum(mask, axis=-1), 1)
    return logp, ent
