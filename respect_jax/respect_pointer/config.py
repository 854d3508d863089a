"""The settings of the RESPECT pointer baseline (``conf/policy/respect_pointer.yaml``).

Network fields rebuild the network from ``network.json``; the training fields only matter to
``respect-train``. One frozen dataclass holds both so the run folder records everything.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

REWARDS = ("cosine", "objective")
BASELINES = ("rollout", "exponential", "none")


@dataclass(frozen=True)
class PointerConfig:
    """RESPECT pointer network and its REINFORCE training.

    Network (as the RESPECT paper's: 256-d LSTM pointer network, one glimpse, ``10 * tanh`` clipping):
        embedding: width of the linear node embedding (no bias, as in the original).
        hidden: LSTM hidden width of the encoder and the decoder.
        glimpses: attention glimpses before the pointer (the original uses 1).
        tanh_clip: pointer logits are ``tanh_clip * tanh(u)`` (0: no clipping).
        max_preds: predecessor slots in the node features (6: RESPECT's 15 features).
        bisection_iters: bisection steps of the per-stage memory cap (relative precision 2^-iters).

    Training (REINFORCE, Kool et al. 2019):
        lr: Adam learning rate (null: ``train.lr``).
        reward: ``cosine`` (RESPECT: cost ``1 - cos(labels in output order, labels sorted)``, needs
            oracle labels) or ``objective`` (cost ``objective / lower bound`` of the packed and
            repaired schedule from the shared evaluator: an ablation).
        baseline: ``rollout`` (greedy rollout of a frozen copy, replaced when the policy is better on
            a paired one-sided t-test), ``exponential`` (moving average of the batch cost) or ``none``.
        bl_alpha: significance level of the replacement test.
        bl_warmup_epochs: epochs that use the exponential baseline before the rollout baseline.
        exp_beta: decay of the exponential baseline.
        bl_eval_graphs: training graphs on which candidate and baseline are compared after every epoch.
        shuffle_inputs: the encoder reads the nodes in a random order while training (RESPECT's data
            generator shuffles them); inference always reads them in the MDP order
            (by longest-path depth from the sources, ties by id).
    """

    embedding: int = 256
    hidden: int = 256
    glimpses: int = 1
    tanh_clip: float = 10.0
    max_preds: int = 6
    bisection_iters: int = 30
    lr: float | None = 1e-4
    reward: str = "cosine"
    baseline: str = "rollout"
    bl_alpha: float = 0.05
    bl_warmup_epochs: int = 1
    exp_beta: float = 0.8
    bl_eval_graphs: int = 512
    shuffle_inputs: bool = False

    def __post_init__(self):
        for name in ("embedding", "hidden", "max_preds", "bisection_iters"):
            if getattr(self, name) < 1:
                raise ValueError(f"policy.{name} must be >= 1, got {getattr(self, name)}")
        if self.glimpses < 0 or self.bl_warmup_epochs < 0 or self.bl_eval_graphs < 2:
            raise ValueError("policy.glimpses and policy.bl_warmup_epochs must be >= 0, policy.bl_eval_graphs >= 2")
        if self.tanh_clip < 0:
            raise ValueError(f"policy.tanh_clip must be >= 0, got {self.tanh_clip}")
        if self.reward not in REWARDS:
            raise ValueError(f"policy.reward must be one of {', '.join(REWARDS)}, got {self.reward!r}")
        if self.baseline not in BASELINES:
            raise ValueError(f"policy.baseline must be one of {', '.join(BASELINES)}, got {self.baseline!r}")
        if not 0 < self.bl_alpha < 1 or not 0 <= self.exp_beta < 1:
            raise ValueError("policy.bl_alpha must be in (0, 1) and policy.exp_beta in [0, 1)")
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"policy.lr must be > 0 (or null), got {self.lr}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> PointerConfig:
        """Build from a mapping (the Hydra ``policy`` node); unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known - {"name"})
        if unknown:
            raise ValueError(f"unknown policy option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**{k: v for k, v in values.items() if k in known})
