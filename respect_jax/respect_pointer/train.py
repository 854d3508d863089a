"""REINFORCE with a greedy-rollout baseline for the RESPECT pointer (Kool et al. 2019, as RESPECT).

* :meth:`PointerTrainer.update_step` is one pure ``(state, data) -> (state, metrics)``: draw a
  minibatch of labelled graphs, sample one permutation per graph, score it (RESPECT's ``1 - cos``
  imitation cost, or ``objective / lower bound`` of the packed and repaired schedule), subtract the
  baseline (greedy rollout of the frozen baseline network; an exponential moving average during
  the warm-up epochs) and apply Adam with global-norm clipping. Every random choice comes from
  ``fold_in(state.key, state.step)``.
* An epoch is a jitted ``lax.scan`` of ``train.steps_per_epoch`` steps (train state donated).
* After every epoch the host compares the policy's and the baseline's greedy costs on
  ``bl_eval_graphs`` training graphs and replaces the baseline when the policy is better with a
  paired one-sided t-test ``p < bl_alpha`` (Kool et al.'s ``RolloutBaseline.epoch_callback``).
* :meth:`PointerTrainer.fit` hands the epoch to the shared host loop
  (:func:`respect_jax.train.harness.host_loop`), which logs, evaluates and writes orbax checkpoints (policy
  parameters; optimiser state, step, key, baseline parameters and moving average), and resumes exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from respect_jax import pytree as struct
from respect_jax.costs import Hardware, evaluate, objective_lower_bound, objective_value
from respect_jax.policy.decoding import Decoding
from respect_jax.respect_pointer.checkpoints import network_doc
from respect_jax.respect_pointer.config import PointerConfig
from respect_jax.respect_pointer.decoding import make_decoder, schedules
from respect_jax.respect_pointer.features import respect_features
from respect_jax.respect_pointer.model import PointerNetwork, batched_rollout
from respect_jax.respect_pointer.reward import cosine_cost
from respect_jax.train.config import TrainConfig
from respect_jax.train.data import LabelledBatch
from respect_jax.train.evaluation import decode_set, summarise
from respect_jax.train.harness import FitResult, host_loop, loop_config, make_optimizer, scanned_epoch


@struct.dataclass
class PointerState:
    """params, baseline: nnx.State; opt_state; step i32[]; key u32[2]; ema f32[] (NaN until set)."""

    params: Any
    opt_state: Any
    step: jax.Array
    key: jax.Array
    baseline: Any
    ema: jax.Array


def step_keys(key: jax.Array, step: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The (data, sampling) keys of update ``step``: ``split(fold_in(key, step))``."""
    return tuple(jax.random.split(jax.random.fold_in(key, step)))


def baseline_test_key(key: jax.Array, step: jax.Array) -> jax.Array:
    """The key of the baseline test after ``step``. With partitionable threefry (JAX's default),
    ``split(k)[i] == fold_in(k, i)``, so tag 2 keeps it apart from both keys of :func:`step_keys`."""
    return jax.random.fold_in(jax.random.fold_in(key, step), 2)

def _rows(data: LabelledBatch, idx: jax.Array) -> tuple[Any, jax.Array]:
    return jax.tree.map(lambda x: x[idx], data.graphs), data.labels[idx]


class PointerTrainer:
    """Trains a :class:`PointerNetwork` on labelled graphs of one problem (hardware, objective, lam).

    Args:
        datasets: labelled buckets (one per padded size); epochs cycle through them.
        eval_sets: labelled buckets evaluated greedily (gap to the oracle objective); empty: the
            first ``train.eval_graphs`` graphs of the first training bucket.
    """

    def __init__(
        self,
        cfg: PointerConfig,
        hw: Hardware,
        objective: str,
        lam: float,
        tcfg: TrainConfig,
        datasets: Sequence[LabelledBatch],
        eval_sets: Sequence[LabelledBatch] = (),
    ):
        if not datasets:
            raise ValueError("policy=respect_pointer trains on labelled graphs: set datasets=[...]")
        self.cfg, self.hw, self.objective, self.lam, self.tcfg = cfg, hw, objective, float(lam), tcfg
        self.datasets = list(datasets)
        self.eval_sets = list(eval_sets)
        model = PointerNetwork(cfg, rngs=nnx.Rngs(tcfg.seed))
        self.graphdef, self._init_params = nnx.split(model)
        lr = cfg.lr if cfg.lr is not None else tcfg.lr
        self.optimizer = make_optimizer(lr, tcfg.clip_norm)
        self._epochs: dict[tuple[bool, int], Callable] = {}
        self._greedy_costs = jax.jit(self.greedy_costs)
        self._decoder = None

    # ------------------------------------------------------------------ pure functions
    def init_state(self) -> PointerState:
        params = jax.tree.map(jnp.copy, self._init_params)
        return PointerState(
            params=params,
            opt_state=self.optimizer.init(params),
            step=jnp.int32(0),
            key=jax.random.PRNGKey(self.tcfg.seed),
            baseline=jax.tree.map(jnp.copy, self._init_params),
            ema=jnp.float32(jnp.nan),
        )

    def costs(self, graphs, labels: jax.Array, orders: jax.Array) -> jax.Array:
        """f32[B] cost (lower is better) of the permutations ``orders`` i32[B, N]."""
        if self.cfg.reward == "cosine":
            return jax.vmap(cosine_cost)(labels, orders, graphs.node_mask)
        stage = schedules(graphs, orders, self.hw.stages, self.cfg.bisection_iters)
        metrics = jax.vmap(evaluate, in_axes=(0, 0, None))(graphs, stage, self.hw)
        bound = jax.vmap(objective_lower_bound, in_axes=(0, None, None))(graphs, self.hw, self.objective)
        return objective_value(metrics, self.objective, self.lam) / bound

    def greedy_costs(self, params, graphs, labels: jax.Array) -> jax.Array:
        """f32[B] cost of the greedy permutations of the network ``params`` (encoder in the MDP order)."""
        model = nnx.merge(self.graphdef, params)
        order = batched_rollout(model, graphs, jax.random.PRNGKey(0), greedy=True).order
        return self.costs(graphs, labels, order)

    def update_step(self, warmup: bool) -> Callable:
        """The pure update ``(state, data) -> (state, metrics)``; ``warmup``: exponential baseline."""
        cfg, graphdef, b = self.cfg, self.graphdef, self.tcfg.batch_size
        rollout_baseline = cfg.baseline == "rollout" and not warmup
        exponential = cfg.baseline == "exponential" or (cfg.baseline == "rollout" and warmup)

        def step(state: PointerState, data: LabelledBatch):
            k_data, k_sample = step_keys(state.key, state.step)
            d = data.labels.shape[0]
            idx = jax.random.permutation(k_data, d)[:b] if d >= b else jax.random.randint(k_data, (b,), 0, d)
            graphs, labels = _rows(data, idx)
            feats = jax.vmap(lambda g: respect_features(g, cfg.max_preds))(graphs)
            if rollout_baseline:
                base = nnx.merge(graphdef, state.baseline)
                order = batched_rollout(base, graphs, k_sample, True, shuffle=cfg.shuffle_inputs, feats=feats).order
                bl = jax.lax.stop_gradient(self.costs(graphs, labels, order))
            else:
                bl = jnp.zeros(b)

            def loss_fn(params, bl):
                model = nnx.merge(graphdef, params)
                r = batched_rollout(model, graphs, k_sample, False, shuffle=cfg.shuffle_inputs, feats=feats)
                cost = jax.lax.stop_gradient(self.costs(graphs, labels, r.order))
                if exponential:
                    mean = jnp.mean(cost)
                    ema = jnp.where(jnp.isnan(state.ema), mean, cfg.exp_beta * state.ema + (1 - cfg.exp_beta) * mean)
                    bl = jnp.broadcast_to(ema, cost.shape)
                else:
                    ema = state.ema
                loss = jnp.mean((cost - bl) * r.log_prob)
                return loss, {"loss": loss, "cost": jnp.mean(cost), "baseline": jnp.mean(bl), "ema": ema}

            (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, bl)
            updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
            params = optax.apply_updates(state.params, updates)
            ema = metrics.pop("ema")
            metrics["grad_norm"] = optax.tree.norm(grads)
            new = state.replace(params=params, opt_state=opt_state, step=state.step + 1, ema=ema)
            return new, metrics

        return step

    def epoch_fn(self, warmup: bool, bucket: int) -> Callable:
        """Jitted ``(state, data) -> (state, metrics[steps_per_epoch])``."""
        if (warmup, bucket) not in self._epochs:
            self._epochs[(warmup, bucket)] = scanned_epoch(self.update_step(warmup), self.tcfg.steps_per_epoch)
        return self._epochs[(warmup, bucket)]

    # ------------------------------------------------------------------ host side
    def run_epoch(self, state: PointerState) -> tuple[PointerState, dict]:
        """One epoch from ``state.step``, then the baseline test; returns the new state and metrics."""
        epoch_index = int(state.step) // self.tcfg.steps_per_epoch
        bucket = epoch_index % len(self.datasets)
        warmup = epoch_index < self.cfg.bl_warmup_epochs
        state, metrics = self.epoch_fn(warmup, bucket)(state, self.datasets[bucket])
        means = {k: float(np.mean(np.asarray(v))) for k, v in metrics.items()}
        means.update(bucket=bucket, warmup=warmup)
        if self.cfg.baseline == "rollout":
            state, test = self.baseline_test(state, bucket)
            means.update(test)
        return state, means

    def baseline_test(self, state: PointerState, bucket: int) -> tuple[PointerState, dict]:
        """Replace the baseline by the policy when it is significantly better (one-sided paired t-test)."""
        from scipy import stats

        data = self.datasets[bucket]
        d = data.size
        key = baseline_test_key(state.key, state.step)
        idx = jax.random.permutation(key, d)[: min(self.cfg.bl_eval_graphs, d)]
        graphs, labels = _rows(data, idx)
        cand = np.asarray(self._greedy_costs(state.params, graphs, labels), np.float64)
        base = np.asarray(self._greedy_costs(state.baseline, graphs, labels), np.float64)
        out = {"bl_candidate": float(cand.mean()), "bl_value": float(base.mean()), "bl_p": None, "bl_replaced": False}
        if cand.mean() < base.mean():
            diff = cand - base
            p = 0.0 if np.all(diff == diff[0]) else float(stats.ttest_rel(cand, base).pvalue) / 2
            out["bl_p"] = p
            if p < self.cfg.bl_alpha:
                state = state.replace(baseline=jax.tree.map(jnp.copy, state.params))
                out["bl_replaced"] = True
        return state, out

    def evaluation_sets(self) -> list[LabelledBatch]:
        if not self.eval_sets and self.tcfg.eval_graphs > 0:
            data = self.datasets[0]
            idx = jnp.arange(min(self.tcfg.eval_graphs, data.size))
            self.eval_sets = [jax.tree.map(lambda x: x[idx], data)]
        return self.eval_sets

    def evaluate(self, params) -> dict:
        """Greedy decoding + packing + repair of the evaluation sets: gap, validity and mean cost."""
        greedy = Decoding("greedy")
        if self._decoder is None:
            model = nnx.merge(self.graphdef, params)
            self._decoder = make_decoder(model, self.hw, self.objective, self.lam, greedy)
        run, _ = self._decoder
        sets = self.evaluation_sets()
        key = jax.random.PRNGKey(0)
        out = summarise(
            [decode_set(None, d, self.hw, self.objective, self.lam, greedy, 256, key, (run, params)) for d in sets]
        )
        costs = [np.asarray(self._greedy_costs(params, d.graphs, d.labels)) for d in sets]
        out["cost"] = float(np.mean(np.concatenate(costs)))
        return out

    def fit(self, run_dir: str | Path, **options) -> FitResult:
        """Train until ``train.steps`` into ``run_dir``; resume from its latest checkpoint (``options``: as
        :meth:`respect_jax.train.loop.Trainer.fit`)."""

        def epoch(state: PointerState) -> tuple[PointerState, dict]:
            state, means = self.run_epoch(state)
            return state, {"phase": "reinforce", **means}

        return host_loop(
            run_dir,
            loop_config(self.tcfg),
            init_state=self.init_state,
            run_epoch=epoch,
            network=network_doc(self.cfg, self.hw, self.objective, self.lam),
            evaluate=self.evaluate if (self.tcfg.eval_graphs > 0 or self.eval_sets) else None,
            **options,
        )
