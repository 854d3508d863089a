"""The network configuration of the scheduling policy (saved as JSON beside every checkpoint) and the options of
its decodings (:class:`Decoding`, run by :mod:`respect_jax.policy.decoding`). Plain dataclasses: importing this
module imports neither JAX nor flax, so the solver registry can name them cheaply."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

ENCODER_TYPES = ("gat", "mean", "sum")
DECODER_TYPES = ("mlp", "attention")


@dataclass(frozen=True)
class PolicyConfig:
    """Every architecture knob of :class:`~respect_jax.policy.model.SchedulingPolicy`.

    Attributes:
        encoder: message-passing type: ``gat`` (attention-weighted aggregation), ``mean`` or ``sum``.
        layers: message-passing layers (0: node embeddings are the projected features only).
        width: embedding width d.
        heads: attention heads of ``gat`` layers and of the ``attention`` decoder (d % heads == 0).
        aggregation: ``dense`` (adjacency matmuls, the faster gradients on small padded buckets) or
            ``segment`` (``jax.ops.segment_*`` on the jraph GraphsTuple); same parameters and results.
            Used by training; decoding always runs the segment path
            (:data:`respect_jax.policy.decoding.INFERENCE_AGGREGATION`, the faster forward pass).
        decoder_width: width d' of the decoder's stage tokens (null: ``width``).
        decoder: ``mlp`` (MLP over per-stage tokens with pooled cross-stage context) or
            ``attention`` (self-attention among the K stage tokens, then a pointer-style score).
        decoder_layers: residual blocks applied to every stage token.
        logit_clip: stage logits are ``clip * tanh(logit / clip)`` (null/0: no clipping).
        stage_embeddings: add the mean embedding of the nodes already placed on each stage to its token.
        cut_heads: heads of the decoder's cut attention over the later positions of the graph
            (:class:`~respect_jax.policy.decoder.CutAttention`; 0: none; decoder width % heads == 0).
        feature_version: the decoder's inputs (:func:`respect_jax.policy.features.features`): 1, those of
            every checkpoint trained at one K and hardware (a network.json without the key); 2 adds K
            and the hardware rates relative to the graph (:func:`respect_jax.policy.features.hardware_context`)
            to the context, for one policy trained across K and hardware.
    """

    encoder: str = "gat"
    layers: int = 3
    width: int = 64
    heads: int = 4
    aggregation: str = "dense"
    decoder: str = "mlp"
    decoder_width: int | None = None
    decoder_layers: int = 2
    logit_clip: float | None = 10.0
    stage_embeddings: bool = True
    cut_heads: int = 0
    feature_version: int = 1

    def __post_init__(self):
        if self.feature_version not in (1, 2):
            raise ValueError(f"policy.feature_version must be 1 or 2, got {self.feature_version!r}")
        if self.encoder not in ENCODER_TYPES:
            raise ValueError(f"policy.encoder must be one of {', '.join(ENCODER_TYPES)}, got {self.encoder!r}")
        if self.decoder not in DECODER_TYPES:
            raise ValueError(f"policy.decoder must be one of {', '.join(DECODER_TYPES)}, got {self.decoder!r}")
        if self.aggregation not in ("dense", "segment"):
            raise ValueError(f"policy.aggregation must be dense or segment, got {self.aggregation!r}")
        if self.decoder_width is not None and self.decoder_width < 1:
            raise ValueError(f"policy.decoder_width must be >= 1, got {self.decoder_width}")
        if self.layers < 0 or self.decoder_layers < 0:
            raise ValueError("policy.layers and policy.decoder_layers must be >= 0")
        if self.cut_heads < 0 or (self.cut_heads and (self.decoder_width or self.width) % self.cut_heads):
            raise ValueError(
                f"policy.cut_heads ({self.cut_heads}) must be >= 0 and divide the decoder width"
                f" ({self.decoder_width or self.width})"
            )
        if self.width < 1 or self.heads < 1 or self.width % self.heads:
            raise ValueError(f"policy.width ({self.width}) must be a positive multiple of policy.heads ({self.heads})")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> PolicyConfig:
        """Build from a mapping (e.g. a Hydra ``policy`` node); unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known - {"name"})
        if unknown:
            raise ValueError(f"unknown policy option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**{k: v for k, v in values.items() if k in known})


STRATEGIES = ("greedy", "sample", "best_of", "beam", "sbs")
#: the strategies that decode ``samples`` candidates per graph and keep the best
MULTI_STRATEGIES = ("best_of", "beam", "sbs")


@dataclass(frozen=True)
class Decoding:
    """How to turn the policy into one schedule per graph.

    Attributes:
        strategy: ``greedy`` (arg-max stage at every step), ``sample`` (one sample from
            ``softmax(logits / temperature)``), ``best_of`` (``samples`` candidates, keep the one
            with the lowest objective) or ``beam`` (beam search of width ``samples`` by sum of
            log-probabilities, :func:`respect_jax.policy.model.beam_search`; keep the beam with the
            lowest objective; no randomness, temperature ignored) or ``sbs`` (stochastic beam search:
            ``samples`` distinct schedules sampled without replacement from
            ``softmax(logits / temperature)``, keep the best; independent samples of ``best_of``
            repeat the likely schedules, experiments/results/decoding_budget_cut.md counts them).
        samples: candidates of ``best_of`` and ``sbs``, beam width of ``beam`` (ignored otherwise).
        temperature: sampling temperature.
        include_greedy: ``best_of`` makes the greedy schedule one of its ``samples`` candidates
            (``sbs`` does not: its candidates are all samples).
        local_search: at most this many hill-climbing moves on every candidate before the best is
            kept (0: none), see :func:`respect_jax.local_search.improve`; label ``+ls``.
        pair_escapes: then at most this many pair moves out of the local optima of the best
            ``pair_candidates`` candidates, each followed by hill climbing (0: none; needs
            ``local_search``); label ``+ls+pairs`` (``+ls+pairs_topC`` for C > 1 candidates).
        pair_candidates: how many of the best hill-climbed candidates get the pair escapes.
    """

    strategy: str = "greedy"
    samples: int = 1
    temperature: float = 1.0
    include_greedy: bool = True
    local_search: int = 0
    pair_escapes: int = 0
    pair_candidates: int = 1

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"decoding strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.samples < 1:
            raise ValueError(f"decoding samples must be >= 1, got {self.samples}")
        if not self.temperature > 0:
            raise ValueError(f"decoding temperature must be > 0, got {self.temperature}")
        if self.local_search < 0:
            raise ValueError(f"decoding local_search must be >= 0, got {self.local_search}")
        if self.pair_escapes < 0 or (self.pair_escapes and not self.local_search):
            raise ValueError(f"decoding pair_escapes must be >= 0 and needs local_search > 0, got {self.pair_escapes}")
        if self.pair_candidates < 1:
            raise ValueError(f"decoding pair_candidates must be >= 1, got {self.pair_candidates}")

    @property
    def label(self) -> str:
        base = f"{self.strategy}_{self.samples}" if self.strategy in MULTI_STRATEGIES else self.strategy
        if not self.local_search:
            return base
        if not self.pair_escapes:
            return f"{base}+ls"
        top = min(self.pair_candidates, self.samples if self.strategy in MULTI_STRATEGIES else 1)
        return f"{base}+ls+pairs" + (f"_top{top}" if top > 1 else "")
