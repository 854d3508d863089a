"""The pure jitted update step, the scanned epoch, and the host loop (log, evaluate, checkpoint).

* :meth:`Trainer.update_step` is one pure function ``(state, data) -> (state, metrics)``: draw a
  minibatch (imitation: rows of the device-resident labelled bucket; reinforce: fresh graphs from
  the JAX generator), differentiate the loss, apply the optax update. Every random choice comes
  from ``fold_in(state.key, state.step)``, so a run is a pure function of its seed.
* An epoch is ``lax.scan`` of ``steps_per_epoch`` update steps, jitted once per (phase, bucket),
  with the train state donated.
* :meth:`Trainer.fit` hands the epoch, the evaluation and the network document to the shared host loop
  (:func:`respect_jax.train.harness.host_loop`), which logs, evaluates and checkpoints between epochs and resumes
  exactly from the latest checkpoint of the run folder.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from respect_jax.costs import Hardware
from respect_jax.graphs.generators import GeneratorConfig, make_jax_generator
from respect_jax.policy.config import PolicyConfig
from respect_jax.policy.decoding import Decoding, make_decoder
from respect_jax.policy.model import SchedulingPolicy, batch_features
from respect_jax.train.algorithms import frozen_copy, imitation_loss, reinforce_loss, self_improvement_loss
from respect_jax.train.checkpoints import network_doc
from respect_jax.train.config import PHASES, AlgorithmConfig, ConditioningConfig, TrainConfig
from respect_jax.train.data import LabelledBatch
from respect_jax.train.evaluation import decode_set, summarise
from respect_jax.train.hardware import sample_hardware, stack_presets, stages_of_epoch
from respect_jax.train.harness import (
    FitResult,
    TrainState,
    host_loop,
    loop_config,
    lr_schedule,
    make_optimizer,
    restore_state,
    scanned_epoch,
)
from respect_jax.train.sharding import check_batch_size, constrain_batch, make_mesh, replicated


def policy_optimizer(tcfg: TrainConfig, algo: AlgorithmConfig) -> optax.GradientTransformation:
    """Adam(W) with global-norm clipping; the learning rate of each phase (a two-phase algorithm switches at
    ``imitation_steps``), optional linear warm-up and cosine decay to 10 % at ``train.steps``."""
    phase_lr = {
        phase: getattr(algo, phase).lr if getattr(algo, phase).lr is not None else tcfg.lr for phase in PHASES
    }
    if algo.two_phase:
        values = (phase_lr["imitation"], phase_lr[algo.phase(algo.imitation_steps)])
        boundaries = (algo.imitation_steps,)
    else:
        values, boundaries = (phase_lr[algo.name],), ()
    decay = tcfg.steps if tcfg.schedule == "cosine" else 0
    schedule = lr_schedule(values, boundaries, tcfg.warmup_steps, decay)
    return make_optimizer(schedule, tcfg.clip_norm, tcfg.weight_decay)


class Trainer:
    """Trains a :class:`SchedulingPolicy` on one problem (hardware, objective, lam).

    Args:
        generators: RL graph distributions, one per size bucket (epochs cycle through them).
        datasets: labelled buckets for imitation (epochs cycle through them).
        eval_sets: labelled buckets (reference = oracle objective) evaluated greedily; empty: a
            fixed batch of ``train.eval_graphs`` generated graphs (reference unknown).
        conditioning: training across K and hardware (:class:`ConditioningConfig`; None or not
            ``enabled``: every step uses ``hw``). Generator epochs then draw K, and every graph its
            hardware from ``presets`` (perturbed); ``hw`` (with each of ``conditioning.eval_stages``
            as K) is the evaluation hardware.
    """

    def __init__(
        self,
        policy: PolicyConfig,
        hw: Hardware,
        objective: str,
        lam: float,
        algo: AlgorithmConfig,
        tcfg: TrainConfig,
        generators: Sequence[GeneratorConfig] = (),
        datasets: Sequence[LabelledBatch] = (),
        eval_sets: Sequence[LabelledBatch] = (),
        mesh=None,
        init_params=None,
        conditioning: ConditioningConfig | None = None,
        presets: Sequence[Hardware] = (),
    ):
        if algo.needs_labels and not datasets:
            raise ValueError(f"algorithm {algo.name} needs labelled datasets (set datasets=[...])")
        if algo.needs_generator and not generators:
            raise ValueError(f"algorithm {algo.name} needs a graph generator")
        if algo.two_phase:
            if algo.imitation_steps % tcfg.steps_per_epoch or not 0 < algo.imitation_steps < tcfg.steps:
                raise ValueError(
                    f"algorithm.imitation_steps ({algo.imitation_steps}) must be a multiple of "
                    f"train.steps_per_epoch ({tcfg.steps_per_epoch}) between 0 and train.steps ({tcfg.steps})"
                )
        self.policy_cfg, self.hw, self.objective, self.lam = policy, hw, objective, float(lam)
        self.conditioning = conditioning if conditioning is not None and conditioning.enabled else None
        if self.conditioning is not None:
            if policy.feature_version < 2:
                raise ValueError(
                    "conditioning.enabled trains across K and hardware: the policy needs feature_version=2"
                    " (policy.feature_version=2, or init_feature_version=2 with init_from)"
                )
            self.presets = stack_presets(list(presets) if presets else [hw])
        self.algo, self.tcfg = algo, tcfg
        self.generators = list(generators)
        self.mesh = make_mesh() if mesh is None else mesh
        check_batch_size(tcfg.batch_size, self.mesh)
        self.datasets = [jax.device_put(d, replicated(self.mesh)) for d in datasets]
        self.eval_sets = list(eval_sets)
        model = SchedulingPolicy(policy, rngs=nnx.Rngs(tcfg.seed))
        self.graphdef, self._init_params = nnx.split(model)
        if init_params is not None:  # fine-tuning: start from trained parameters of the same architecture
            self._init_params = jax.tree.map(jnp.asarray, init_params)
        self.optimizer = policy_optimizer(tcfg, algo)
        self.trace_counts: Counter = Counter()
        self._epochs: dict[tuple[str, int, int], Callable] = {}
        self._decoders: dict[int, tuple] = {}

    # ------------------------------------------------------------------ pure functions
    def init_state(self) -> TrainState:
        # a copy: epochs donate the state's buffers, the initial parameters must survive for the next run
        params = jax.tree.map(jnp.copy, self._init_params)
        state = TrainState(
            params=params,
            opt_state=self.optimizer.init(params),
            step=jnp.int32(0),
            key=jax.random.PRNGKey(self.tcfg.seed),
        )
        return jax.device_put(state, replicated(self.mesh))

    def conditioned(self, phase: str) -> bool:
        """Whether ``phase``'s steps draw K and per-graph hardware (generator phases of a conditioned run)."""
        return self.conditioning is not None and phase != "imitation"

    def stages_of(self, phase: str, epoch_index: int) -> int:
        """K of an epoch: drawn for the generator phases of a conditioned run, else ``hw.stages``."""
        if self.conditioned(phase):
            return stages_of_epoch(self.conditioning, self.tcfg.seed, epoch_index)
        return self.hw.stages

    def update_step(self, phase: str, bucket: int, stages: int | None = None) -> Callable:
        """The pure update ``(state, data) -> (state, metrics)`` of ``phase`` on ``bucket`` (K =
        ``stages``, default ``hw.stages``; per-graph hardware drawn every step when conditioned)."""
        graphdef, objective, lam = self.graphdef, self.objective, self.lam
        stages = self.hw.stages if stages is None else stages
        conditioned = self.conditioned(phase)
        b = self.tcfg.batch_size
        generator = make_jax_generator(self.generators[bucket]) if phase != "imitation" else None
        rl_loss = {"reinforce": reinforce_loss, "self_improvement": self_improvement_loss}.get(phase)

        def loss_fn(params, data, feats, key, hw):
            model = nnx.merge(graphdef, params)
            if phase == "imitation":
                graphs, labels = data
                return imitation_loss(model, graphs, labels, hw, objective, lam, self.algo.imitation, feats)
            frozen = frozen_copy(graphdef, params)
            return rl_loss(model, frozen, data, key, hw, objective, lam, getattr(self.algo, phase), feats)

        def step(state: TrainState, data):
            self.trace_counts[(phase, bucket)] += 1  # runs at trace time only
            key = jax.random.fold_in(state.key, state.step)
            k_data, k_loss = jax.random.split(key)
            if phase == "imitation":
                d = data.labels.shape[0]
                idx = jax.random.permutation(k_data, d)[:b] if d >= b else jax.random.randint(k_data, (b,), 0, d)
                batch = constrain_batch((jax.tree.map(lambda x: x[idx], data.graphs), data.labels[idx]), self.mesh)
            else:
                keys = constrain_batch(jax.random.split(k_data, b), self.mesh)
                batch = constrain_batch(jax.vmap(generator)(keys), self.mesh)
            if conditioned:  # one preset per graph, perturbed (its own stream: the unconditioned runs are unchanged)
                k_hw = jax.random.fold_in(k_data, 0x4857)
                hw = constrain_batch(sample_hardware(k_hw, self.presets, stages, b, self.conditioning), self.mesh)
            else:
                hw = self.hw
            feats = batch_features(batch[0] if phase == "imitation" else batch)
            loss = lambda params, batch, feats, key: loss_fn(params, batch, feats, key, hw)
            (_, metrics), grads = jax.value_and_grad(loss, has_aux=True)(state.params, batch, feats, k_loss)
            updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
            params = optax.apply_updates(state.params, updates)
            metrics = {**metrics, "grad_norm": optax.tree.norm(grads)}
            return state.replace(params=params, opt_state=opt_state, step=state.step + 1), metrics

        return step

    def epoch_fn(self, phase: str, bucket: int, stages: int | None = None) -> Callable:
        """Jitted ``(state, data) -> (state, metrics[steps_per_epoch])``: a lax.scan of update steps
        (compiled once per phase, bucket and K)."""
        stages = self.hw.stages if stages is None else stages
        if (phase, bucket, stages) not in self._epochs:
            step = self.update_step(phase, bucket, stages)
            jitted = scanned_epoch(step, self.tcfg.steps_per_epoch, out_shardings=replicated(self.mesh))
            self._epochs[(phase, bucket, stages)] = jitted
        return self._epochs[(phase, bucket, stages)]

    def run_epoch(self, state: TrainState) -> tuple[TrainState, dict, str, int]:
        """One epoch from ``state.step``; returns the new state, mean metrics, phase and bucket."""
        step = int(state.step)
        epoch_index = step // self.tcfg.steps_per_epoch
        phase = self.algo.phase(step)
        if phase == "imitation":
            bucket = epoch_index % len(self.datasets)
            data = self.datasets[bucket]
        else:
            bucket = epoch_index % len(self.generators)
            data = None
        stages = self.stages_of(phase, epoch_index)
        state, metrics = self.epoch_fn(phase, bucket, stages)(state, data)
        means = {k: float(np.mean(np.asarray(v))) for k, v in metrics.items()}
        if self.conditioned(phase):
            means["stages"] = stages
        return state, means, phase, bucket

    def conditioning_doc(self) -> dict | None:
        """What network.json records of a conditioned run (K range, presets, perturbation), else None."""
        if self.conditioning is None:
            return None
        presets = [{f: float(v[i]) for f, v in self.presets.items()} for i in range(len(self.presets["sram_bytes"]))]
        return {**self.conditioning.to_dict(), "presets": presets}

    # ------------------------------------------------------------------ evaluation
    @property
    def evaluates(self) -> bool:
        """False when there is nothing to evaluate on (no eval sets and ``train.eval_graphs = 0``)."""
        return bool(self.eval_sets) or self.tcfg.eval_graphs > 0

    def evaluation_sets(self) -> list[LabelledBatch]:
        if not self.eval_sets:
            gen = make_jax_generator(self.generators[0] if self.generators else GeneratorConfig())
            keys = jax.random.split(jax.random.PRNGKey(self.tcfg.seed + 1_000_003), self.tcfg.eval_graphs)
            graphs = jax.jit(jax.vmap(gen))(keys)
            n = graphs.params.shape[-1]
            self.eval_sets = [
                LabelledBatch(
                    graphs=graphs,
                    labels=jnp.zeros((self.tcfg.eval_graphs, n), jnp.int32),
                    reference=jnp.full((self.tcfg.eval_graphs,), jnp.nan, jnp.float32),
                )
            ]
        return self.eval_sets

    def evaluate(self, params) -> dict:
        """Greedy decoding of the evaluation set with ``params``: ratio to bound, gap, % optimal.

        Conditioned runs evaluate at every K of ``conditioning.eval_stages`` (hardware ``hw``):
        ``k<K>_ratio_to_bound`` each, and their mean as ``ratio_to_bound``.
        """
        if self.conditioning is None:
            return self._evaluate_at(params, self.hw)
        out, ratios = {}, []
        for k in self.conditioning.eval_stages:
            res = self._evaluate_at(params, self.hw.replace(stages=k))
            ratios.append(res["ratio_to_bound"])
            out.update({f"k{k}_{name}": v for name, v in res.items() if name in ("ratio_to_bound", "valid_pct")})
        return {"ratio_to_bound": float(np.mean(ratios)), **out}

    def _evaluate_at(self, params, hw: Hardware) -> dict:
        if hw.stages not in self._decoders:
            model = nnx.merge(self.graphdef, params)
            self._decoders[hw.stages] = make_decoder(model, hw, self.objective, self.lam, Decoding("greedy"))
        run, _ = self._decoders[hw.stages]
        greedy, key = Decoding("greedy"), jax.random.PRNGKey(0)
        decoded = [
            decode_set(None, data, hw, self.objective, self.lam, greedy, 256, key, (run, params))
            for data in self.evaluation_sets()
        ]
        return summarise(decoded)

    # ------------------------------------------------------------------ host loop
    def fit(self, run_dir: str | Path, **options) -> FitResult:
        """Train until ``train.steps``, checkpointing into ``run_dir``; resume from its latest checkpoint.
        ``options``: :func:`~respect_jax.train.harness.host_loop`'s ``resume``, ``resolved_config``, ``log``,
        ``progress`` and ``on_record`` (sees every new metrics record, e.g. a TensorBoard writer)."""

        def restore(ckpt, like: TrainState, step: int) -> TrainState:
            return jax.device_put(restore_state(ckpt, like, step), replicated(self.mesh))

        def epoch(state: TrainState) -> tuple[TrainState, dict]:
            state, means, phase, bucket = self.run_epoch(state)
            return state, {"phase": phase, "bucket": bucket, **means}

        return host_loop(
            run_dir,
            loop_config(self.tcfg),
            init_state=self.init_state,
            run_epoch=epoch,
            network=network_doc(self.policy_cfg, self.hw, self.objective, self.lam, self.conditioning_doc()),
            evaluate=self.evaluate if self.evaluates else None,
            restore=restore,
            **options,
        )
