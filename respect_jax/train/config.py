"""Plain dataclasses for training settings (the CLI builds them from Hydra; tests build them directly)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

ALGORITHMS = (
    "imitation",
    "reinforce",
    "self_improvement",
    "imitation_then_reinforce",
    "imitation_then_self_improvement",
)
#: what an update step does; a two-phase algorithm runs ``imitation`` first, then its second phase
PHASES = ("imitation", "reinforce", "self_improvement")
BASELINES = ("pomo", "greedy", "mean", "none")
SCHEDULES = ("constant", "cosine")


def from_values(cls, values: dict | None, where: str):
    """``cls(**values)`` for a dataclass ``cls``; unknown keys are a one-line ValueError naming the config node
    ``where`` and the known keys."""
    values = dict(values or {})
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown {where} option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return cls(**values)


@dataclass(frozen=True)
class ImitationConfig:
    """Cross-entropy to oracle stage labels with parallel teacher forcing.

    label_smoothing: weight moved from the label to the other *allowed* stages.
    lr: learning rate of this phase (null: ``optimizer.lr``).
    """

    label_smoothing: float = 0.0
    lr: float | None = None

    def __post_init__(self):
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"imitation.label_smoothing must be in [0, 1), got {self.label_smoothing}")


@dataclass(frozen=True)
class ReinforceConfig:
    """REINFORCE with reward ``-objective / lower_bound`` per graph.

    samples: schedules sampled per graph (POMO-style shared baseline needs >= 2).
    baseline: ``pomo`` (mean reward of the graph's samples), ``greedy`` (reward of the current
        policy's greedy schedule of the same graph: RESPECT's greedy-rollout baseline, self-critical
        form), ``mean`` (batch mean) or ``none``.
    entropy: weight of the mean per-step entropy bonus.
    temperature: sampling temperature of the rollouts (log-probs use the same temperature).
    normalise_advantage: divide advantages by their batch standard deviation.
    leader_weight: the advantage of each graph's best sample is multiplied by this (1: plain
        REINFORCE; > 1: "leader reward", Wang et al. 2024, which trains for the best of the
        samples rather than their mean, i.e. for best-of-N decoding).
    lr: learning rate of this phase (null: ``optimizer.lr``).
    """

    samples: int = 8
    baseline: str = "pomo"
    entropy: float = 0.01
    temperature: float = 1.0
    normalise_advantage: bool = False
    leader_weight: float = 1.0
    lr: float | None = None

    def __post_init__(self):
        if self.baseline not in BASELINES:
            raise ValueError(f"reinforce.baseline must be one of {', '.join(BASELINES)}, got {self.baseline!r}")
        if self.samples < 1 or (self.baseline == "pomo" and self.samples < 2):
            raise ValueError(f"reinforce.samples must be >= 1 (>= 2 for the pomo baseline), got {self.samples}")
        if not self.temperature > 0:
            raise ValueError(f"reinforce.temperature must be > 0, got {self.temperature}")
        if not self.leader_weight >= 0:
            raise ValueError(f"reinforce.leader_weight must be >= 0, got {self.leader_weight}")


@dataclass(frozen=True)
class SelfImprovementConfig:
    """Self-improvement (expert iteration): imitate the policy's own improved schedules.

    Every step draws fresh graphs, decodes ``samples`` schedules per graph with the current policy
    (the greedy one among them when ``include_greedy``) at ``temperature`` (``teacher: sample``), or
    the greedy one plus a beam search of width ``samples`` (``teacher: beam``; see
    :func:`respect_jax.policy.model.beam_search`), keeps the best (shared evaluator), hill-climbs it
    for at most ``local_search`` moves (:func:`respect_jax.local_search.improve`) and takes
    one cross-entropy step towards it (parallel teacher forcing, as imitation). The teacher is never
    worse than the greedy schedule, so the greedy policy chases its own sampled-and-polished best.

    label_smoothing: as :class:`ImitationConfig`. lr: learning rate of this phase (null: ``train.lr``).
    """

    samples: int = 16
    temperature: float = 1.0
    include_greedy: bool = True
    local_search: int = 50
    teacher: str = "sample"
    label_smoothing: float = 0.0
    lr: float | None = None

    def __post_init__(self):
        if self.samples < 1:
            raise ValueError(f"self_improvement.samples must be >= 1, got {self.samples}")
        if not self.temperature > 0:
            raise ValueError(f"self_improvement.temperature must be > 0, got {self.temperature}")
        if self.local_search < 0:
            raise ValueError(f"self_improvement.local_search must be >= 0, got {self.local_search}")
        if self.teacher not in ("sample", "beam"):
            raise ValueError(f"self_improvement.teacher must be sample or beam, got {self.teacher!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"self_improvement.label_smoothing must be in [0, 1), got {self.label_smoothing}")


@dataclass(frozen=True)
class AlgorithmConfig:
    """Which phases run: ``imitation``, ``reinforce``, ``self_improvement``, or imitation then one of
    the other two (``imitation_then_reinforce``, ``imitation_then_self_improvement``).

    imitation_steps: length of the imitation phase of a two-phase algorithm (a multiple of
        ``train.steps_per_epoch``).
    """

    name: str = "imitation"
    imitation_steps: int = 0
    imitation: ImitationConfig = field(default_factory=ImitationConfig)
    reinforce: ReinforceConfig = field(default_factory=ReinforceConfig)
    self_improvement: SelfImprovementConfig = field(default_factory=SelfImprovementConfig)

    def __post_init__(self):
        if self.name not in ALGORITHMS:
            raise ValueError(f"algorithm.name must be one of {', '.join(ALGORITHMS)}, got {self.name!r}")

    @classmethod
    def from_dict(cls, values: dict) -> AlgorithmConfig:
        values = dict(values)
        imitation = from_values(ImitationConfig, values.pop("imitation", None), "algorithm.imitation")
        reinforce = from_values(ReinforceConfig, values.pop("reinforce", None), "algorithm.reinforce")
        improvement = from_values(
            SelfImprovementConfig, values.pop("self_improvement", None), "algorithm.self_improvement"
        )
        phases = {"imitation": imitation, "reinforce": reinforce, "self_improvement": improvement}
        return from_values(cls, {**values, **phases}, "algorithm")

    @property
    def two_phase(self) -> bool:
        return self.name.startswith("imitation_then_")

    def phase(self, step: int) -> str:
        """One of :data:`PHASES`: what the update at global step ``step`` does."""
        if self.two_phase:
            return "imitation" if step < self.imitation_steps else self.name.removeprefix("imitation_then_")
        return self.name

    @property
    def needs_labels(self) -> bool:
        return self.name == "imitation" or self.two_phase

    @property
    def needs_generator(self) -> bool:
        return self.name != "imitation"

    def to_dict(self) -> dict:
        return asdict(self)


HARDWARE_RATES = ("sram_bytes", "param_bytes", "act_bytes", "macs_per_s", "host_bw", "link_bw", "stage_overhead_s")


@dataclass(frozen=True)
class ConditioningConfig:
    """Training across K and hardware (``conditioning`` node of conf/train.yaml).

    With ``enabled``, every epoch of the generator phases (reinforce, self-improvement) draws its K
    uniformly from ``stages_min..stages_max`` (one compiled epoch per K: K fixes array shapes), and
    every graph of every step draws its hardware: one of the presets (uniformly), each field named in
    ``perturb_fields`` multiplied by ``exp(U(-log perturb, log perturb))`` (log-uniform within a factor
    ``perturb``; 1: the presets as they are). Imitation epochs keep the labels' K and hardware.

    stages_choices: when given, K is drawn uniformly from this list instead (fewer compiled epochs:
        every K compiles its own, minutes each on a loaded CPU; the inputs are continuous in K).
    eval_stages: the K values of the periodic greedy evaluation (base hardware, generated graphs of
        a separate seed); its ``ratio_to_bound`` is their mean.
    """

    enabled: bool = False
    stages_min: int = 2
    stages_max: int = 8
    stages_choices: tuple[int, ...] | None = None
    perturb: float = 2.0
    perturb_fields: tuple[str, ...] = HARDWARE_RATES
    eval_stages: tuple[int, ...] = (2, 4, 8)

    def __post_init__(self):
        object.__setattr__(self, "perturb_fields", tuple(self.perturb_fields))
        object.__setattr__(self, "eval_stages", tuple(int(k) for k in self.eval_stages))
        if self.stages_choices is not None:
            object.__setattr__(self, "stages_choices", tuple(int(k) for k in self.stages_choices))
            if not self.stages_choices or min(self.stages_choices) < 1:
                raise ValueError(
                    f"conditioning.stages_choices must be a non-empty list of K >= 1, got {self.stages_choices}"
                )
        if not 1 <= self.stages_min <= self.stages_max:
            raise ValueError(
                f"conditioning.stages_min ({self.stages_min}) must be >= 1 and <= stages_max ({self.stages_max})"
            )
        if not self.perturb >= 1.0:
            raise ValueError(f"conditioning.perturb must be >= 1 (a factor), got {self.perturb}")
        bad = sorted(set(self.perturb_fields) - set(HARDWARE_RATES))
        if bad:
            raise ValueError(
                f"conditioning.perturb_fields: unknown {', '.join(bad)}; known: {', '.join(HARDWARE_RATES)}"
            )
        if not self.eval_stages or min(self.eval_stages) < 1:
            raise ValueError(f"conditioning.eval_stages must be a non-empty list of K >= 1, got {self.eval_stages}")

    @classmethod
    def from_dict(cls, values: dict | None) -> ConditioningConfig:
        return from_values(cls, values, "conditioning")

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class TrainConfig:
    """Loop, optimiser and checkpoint settings (``train`` node of conf/train.yaml).

    Every step count that ends an epoch (``steps``, ``checkpoint_every``, ``eval_every``, the
    imitation phase) must be a multiple of ``steps_per_epoch``: one epoch is one compiled
    ``lax.scan`` and checkpoints are written between epochs.
    """

    steps: int = 1000
    batch_size: int = 128
    steps_per_epoch: int = 50
    checkpoint_every: int = 500
    eval_every: int = 500
    eval_graphs: int = 256  # generated evaluation graphs when no eval set is given (0: no evaluation)
    seed: int = 0
    lr: float = 1e-3
    warmup_steps: int = 0
    schedule: str = "constant"
    clip_norm: float = 1.0
    weight_decay: float = 0.0
    max_to_keep: int = 3

    def __post_init__(self):
        for name in ("steps", "batch_size", "steps_per_epoch", "checkpoint_every", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"train.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("steps", "checkpoint_every", "eval_every"):
            if getattr(self, name) % self.steps_per_epoch:
                raise ValueError(
                    f"train.{name} ({getattr(self, name)}) must be a multiple of train.steps_per_epoch "
                    f"({self.steps_per_epoch})"
                )
        if self.schedule not in SCHEDULES:
            raise ValueError(f"train.schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if not self.lr > 0:
            raise ValueError(f"train.lr must be > 0, got {self.lr}")

    @classmethod
    def from_dict(cls, values: dict) -> TrainConfig:
        return from_values(cls, values, "train")

    def to_dict(self) -> dict:
        return asdict(self)


def flatten(doc: dict, prefix: str = "") -> dict:
    """Nested dict -> {'a.b.c': value}; lists are kept as values (config.yaml comparisons and tables)."""
    out = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out
