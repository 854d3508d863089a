"""The pure jitted update step, the scanned epoch, and the host loop (log, evaluate, checkpoint).

* :meth:`Trainer.update_step` is one pure function ``(state, data) -> (state, metrics)``: draw a
  minibatch (imitation: rows of the device-resident labelled bucket; reinforce: fresh graphs from
  the JAX generator), differentiate the loss, apply the optax update. Every random choice comes
  from ``fold_in(state.key, state.step)``, so a run is a pure function of its seed.
* An epoch is ``lax.scan`` of ``steps_per_epoch`` update steps, jitted once per (phase, bucket),
  with the train state donated.
* :meth:`Trainer.fit` is the host loop: it only logs, evaluates and checkpoints between epochs, and
  resumes exactly from the latest checkpoint of the run folder.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx, struct

from respect_jax.costs import Hardware
from respect_jax.graphs.generators import GeneratorConfig, make_jax_generator
from respect_jax.policy.config import PolicyConfig
from respect_jax.policy.decoding import Decoding, make_decoder
from respect_jax.policy.model import SchedulingPolicy, batch_features
from respect_jax.train.algorithms import frozen_copy, imitation_loss, reinforce_loss, self_improvement_loss
from respect_jax.train.checkpoints import CONFIG_FILE, METRICS_FILE, NETWORK_FILE, Checkpointer, write_network
from respect_jax.train.config import PHASES, AlgorithmConfig, ConditioningConfig, TrainConfig, flatten
from respect_jax.train.data import LabelledBatch
from respect_jax.train.evaluation import decode_set, summarise
from respect_jax.train.hardware import sample_hardware, stack_presets, stages_of_epoch
from respect_jax.train.sharding import check_batch_size, constrain_batch, make_mesh, replicated

TIMING_KEYS = ("wall_s", "graphs_per_s", "time_s")


@struct.dataclass
class TrainState:
    """Everything a resumed run needs: params (nnx.State), optax state, step i32[], key u32[2]."""

    params: Any
    opt_state: Any
    step: jax.Array
    key: jax.Array


def make_optimizer(tcfg: TrainConfig, algo: AlgorithmConfig) -> optax.GradientTransformation:
    """Adam(W) with global-norm clipping; per-phase learning rates, optional warmup and cosine decay."""
    phase_lr = {
        phase: getattr(algo, phase).lr if getattr(algo, phase).lr is not None else tcfg.lr for phase in PHASES
    }

    def schedule(step):
        if algo.two_phase:
            second = phase_lr[algo.phase(algo.imitation_steps)]
            lr = jnp.where(step < algo.imitation_steps, phase_lr["imitation"], second).astype(jnp.float32)
        else:
            lr = jnp.float32(phase_lr[algo.name])
        if tcfg.warmup_steps:
            lr = lr * jnp.minimum(1.0, (step + 1.0) / tcfg.warmup_steps)
        if tcfg.schedule == "cosine":
            lr = lr * (0.55 + 0.45 * jnp.cos(jnp.pi * jnp.minimum(step / tcfg.steps, 1.0)))
        return lr

    adam = optax.adamw(schedule, weight_decay=tcfg.weight_decay) if tcfg.weight_decay else optax.adam(schedule)
    return optax.chain(optax.clip_by_global_norm(tcfg.clip_norm), adam)


@dataclass
class FitResult:
    state: TrainState
    history: list[dict] = field(default_factory=list)


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
        self.optimizer = make_optimizer(tcfg, algo)
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
            steps = self.tcfg.steps_per_epoch

            def epoch(state, data):
                return jax.lax.scan(lambda s, _: step(s, data), state, None, length=steps)

            jitted = jax.jit(epoch, donate_argnums=0, out_shardings=replicated(self.mesh))
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
    def fit(
        self,
        run_dir: str | Path,
        resume: bool = True,
        resolved_config: str | None = None,
        log: Callable[[str], None] | None = None,
        progress: bool = True,
        on_record: Callable[[dict], None] | None = None,
    ) -> FitResult:
        """Train until ``train.steps``, checkpointing into ``run_dir``; resume from its latest checkpoint.
        ``on_record`` sees every new metrics record (e.g. a TensorBoard writer, :mod:`respect_jax.train.run_logs`)."""

        def restore(ckpt: Checkpointer, state: TrainState, step: int) -> TrainState:
            train_like = {"opt_state": state.opt_state, "step": state.step, "key": state.key}
            params, train = ckpt.restore(state.params, train_like, step)
            return jax.device_put(
                TrainState(params=params, opt_state=train["opt_state"], step=train["step"], key=train["key"]),
                replicated(self.mesh),
            )

        def epoch(state: TrainState) -> tuple[TrainState, dict]:
            state, means, phase, bucket = self.run_epoch(state)
            return state, {"phase": phase, "bucket": bucket, **means}

        state, history = host_loop(
            run_dir,
            self.tcfg,
            init_state=self.init_state,
            write_network=lambda d: write_network(
                d, self.policy_cfg, self.hw, self.objective, self.lam, self.conditioning_doc()
            ),
            restore=restore,
            run_epoch=epoch,
            evaluate=self.evaluate if self.evaluates else None,
            train_item=lambda st: {"opt_state": st.opt_state, "step": st.step, "key": st.key},
            resume=resume,
            resolved_config=resolved_config,
            log=log,
            progress=progress,
            on_record=on_record,
        )
        return FitResult(state=state, history=history)


def host_loop(
    run_dir: str | Path,
    tcfg: TrainConfig,
    *,
    init_state: Callable[[], Any],
    write_network: Callable[[Path], None],
    restore: Callable[[Checkpointer, Any, int], Any],
    run_epoch: Callable[[Any], tuple[Any, dict]],
    evaluate: Callable[[Any], dict] | None,
    train_item: Callable[[Any], dict],
    resume: bool = True,
    resolved_config: str | None = None,
    log: Callable[[str], None] | None = None,
    progress: bool = True,
    on_record: Callable[[dict], None] | None = None,
) -> tuple[Any, list[dict]]:
    """The host side of training, shared by every trainer: run folder, resume, epochs, logs, checkpoints.

    ``state`` is any pytree with ``params`` and ``step``; ``run_epoch(state) -> (state, fields)`` runs
    one compiled epoch (``fields``: its metrics); ``restore(ckpt, template, step)`` rebuilds a state
    from a checkpoint; ``train_item(state)`` is what is checkpointed beside the parameters;
    ``evaluate(params)`` (None: never) runs every ``eval_every`` steps and at the end. Returns the
    final state and the metrics history (earlier records of a resumed run included). ``on_record(record)``
    (process 0 only) is called with every new record, after it is appended to ``metrics.jsonl``.
    """
    main = jax.process_index() == 0  # a multi-process run: process 0 alone writes the folder's files and logs
    log = (log or (lambda msg: print(msg, file=sys.stderr))) if main else (lambda msg: None)
    progress = progress and main
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt = Checkpointer(run_dir, max_to_keep=tcfg.max_to_keep)
    state = init_state()
    latest = ckpt.latest_step()
    metrics_path = run_dir / METRICS_FILE
    history, before, error = [], None, None
    if main:
        try:
            history, before = _check_run_dir(run_dir, latest, resume, write_network)
        except ValueError as err:  # the folder is as it was
            error = err
    if jax.process_count() > 1 and not _all_agree(error is None):
        error = error or ValueError(f"{run_dir}: process 0 refused this run folder (its error is in its log)")
    if error is not None:
        ckpt.close()
        raise error
    if latest is not None:
        try:
            state = restore(ckpt, state, latest)
        except ValueError:
            if main and before is None:
                (run_dir / NETWORK_FILE).unlink(missing_ok=True)
            ckpt.close()
            raise
        log(f"resumed from {ckpt.directory}/{latest}")
    if main:
        if latest is not None:
            _write_jsonl(metrics_path, history)
        else:
            if ckpt.directory.is_dir() and any(ckpt.directory.iterdir()):
                log(f"{ckpt.directory} holds no complete checkpoint; training starts from step 0")
            metrics_path.unlink(missing_ok=True)
        if resolved_config is not None:
            _write_config(run_dir, resolved_config, latest, log)
    bar = _progress(tcfg.steps, int(state.step), progress)
    try:
        while int(state.step) < tcfg.steps:
            t0 = time.perf_counter()
            state, fields = run_epoch(state)
            jax.block_until_ready(state.params)
            wall = time.perf_counter() - t0
            step = int(state.step)
            record = {"step": step, **fields}
            record.update(wall_s=wall, graphs_per_s=tcfg.steps_per_epoch * tcfg.batch_size / wall)
            if evaluate is not None and (step % tcfg.eval_every == 0 or step == tcfg.steps):
                record["eval"] = evaluate(state.params)
            history.append(record)
            if main:
                _append_jsonl(metrics_path, record)
                if on_record is not None:
                    on_record(record)
            if bar is not None:
                bar.update(tcfg.steps_per_epoch)
                bar.set_postfix_str(_short(record))
            if "eval" in record:
                log(f"step {step} [{record.get('phase', '')}] {_short(record)} eval: {_short(record['eval'])}")
            if step % tcfg.checkpoint_every == 0 or step == tcfg.steps:
                ckpt.save(step, state.params, train_item(state))
                if tcfg.kill_after_step is not None and step == tcfg.kill_after_step:
                    ckpt.wait()
                    os.kill(os.getpid(), signal.SIGKILL)
        ckpt.wait()
    finally:
        if bar is not None:
            bar.close()
        ckpt.close()
    return state, history


def _check_run_dir(
    run_dir: Path, latest: int | None, resume: bool, write_network: Callable[[Path], None]
) -> tuple[list[dict], str | None]:
    """Check that this command may train into ``run_dir`` (latest checkpoint ``latest``) and write its
    network.json: ``(metrics records up to latest, the network.json it had)``. A ValueError leaves the folder
    as it was: checkpoints without ``resume``, checkpoints of another network, a damaged metrics file."""
    if latest is not None and not resume:
        raise ValueError(f"{run_dir} already holds checkpoints (step {latest}); use resume=true or a new run_dir")
    network_path = run_dir / NETWORK_FILE
    before = network_path.read_text() if latest is not None and network_path.is_file() else None
    history = metrics_up_to(run_dir / METRICS_FILE, latest) if latest is not None else []
    write_network(run_dir)
    old, new = (json.loads(before), json.loads(network_path.read_text())) if before is not None else ({}, {})
    differ = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    if differ:
        network_path.write_text(before)  # the folder keeps describing its checkpoints
        raise ValueError(
            f"{run_dir} holds checkpoints of another network ({', '.join(differ)} differ from this command's); "
            "use a new run_dir"
        )
    return history, before


def _all_agree(ok: bool) -> bool:
    """Whether process 0 found ``ok`` (every process of a multi-process run gets its answer)."""
    from jax.experimental import multihost_utils

    return bool(multihost_utils.broadcast_one_to_all(np.int32(ok)))


def _progress(total: int, start: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=start, unit="step", file=sys.stderr, dynamic_ncols=True)


def _short(record: dict) -> str:
    keys = (
        "loss", "accuracy", "ratio", "best_ratio", "greedy_ratio", "teacher_ratio",
        "entropy", "cost", "baseline", "bl_candidate", "graphs_per_s",
        "ratio_to_bound", "gap_mean_pct", "valid_pct",
    )
    return " ".join(f"{k}={record[k]:.4g}" for k in keys if isinstance(record.get(k), float))


def _append_jsonl(path: Path, record: dict) -> None:
    with path.open("a") as fh:
        fh.write(json.dumps(record) + "\n")


def metrics_up_to(path: Path, step: int, key: str = "step") -> list[dict]:
    """The metrics records whose ``key`` is at most ``step`` (a resumed run rewrites what came after); a
    damaged line is a one-line error naming the file and line, except an unterminated last line (a write cut
    by a kill; the records after ``step`` are rewritten anyway), which is dropped."""
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.splitlines()
    kept = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            if number == len(lines) and not text.endswith("\n"):
                break
            message = f"{path}:{number}: not a JSON metrics record ({err.msg}); fix or remove the line"
            raise ValueError(message) from None
        if not isinstance(record, dict) or not isinstance(record.get(key), int):
            raise ValueError(f"{path}:{number}: a metrics record needs an integer '{key}'; fix or remove the line")
        if record[key] <= step:
            kept.append(record)
    return kept


def _write_config(run_dir: Path, resolved: str, resumed_at: int | None, log: Callable[[str], None]) -> None:
    """Write ``config.yaml``; a resumed run whose command differs keeps the run's ``config.yaml`` (what
    trained its checkpoints) and saves the new one as ``config.resumed_<step>.yaml``, naming what differs."""
    import yaml

    path = run_dir / CONFIG_FILE
    if resumed_at is None or not path.is_file():
        path.write_text(resolved)
        return
    try:
        old = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        old = None
    old, new = (flatten(d) if isinstance(d, dict) else {} for d in (old, yaml.safe_load(resolved)))
    differ = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    if not differ:
        return
    side = run_dir / f"config.resumed_{resumed_at}.yaml"
    side.write_text(resolved)
    shown = ", ".join(differ[:6]) + (f" (+{len(differ) - 6} more)" if len(differ) > 6 else "")
    log(f"note: resuming at step {resumed_at} with a config that differs in {shown}; {CONFIG_FILE} keeps the "
        f"run's, this one is {side.name}")


def _write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def without_timing(record: dict) -> dict:
    """A metrics record without wall-clock fields (for comparing runs)."""
    out = {}
    for k, v in record.items():
        if k in TIMING_KEYS:
            continue
        out[k] = without_timing(v) if isinstance(v, dict) else v
    return out
