"""REINFORCE training of :class:`~.policy.RTPolicy` in the HRT/SRT environment.

The real-time policy supplies its pure update step, its initial state and its network document; the shared
harness (:mod:`respect_jax.train.harness`) does the rest, as for every trainer:

* :func:`make_update` returns one pure ``(state, pool) -> (state, metrics)`` step: draw ``batch``
  scenarios from the device-resident pool, roll each out ``samples`` times (``lax.scan`` over
  ``max_steps`` decisions, actions sampled by Gumbel-max), REINFORCE with the mean return of the
  ``samples`` rollouts of the same scenario as baseline (POMO-style shared baseline), Adam with
  global-norm clipping. All randomness comes from ``fold_in(state.key, state.step)``.
* an epoch is a jitted ``lax.scan`` of ``updates_per_epoch`` steps (train state donated);
* :func:`fit` runs the shared host loop: a metrics record and a progress line per epoch, a checkpoint per
  epoch, resume from the latest checkpoint of the run folder (refused when it holds another network).

Return of an episode = SRT jobs meeting their deadline / SRT jobs (in [0, 1]) minus
``hrt_penalty`` x the fraction of HRT jobs missed minus ``override_penalty`` per rejected proposal.

``algorithm=ppo`` swaps the update for the clipped-surrogate one of :mod:`respect_jax.realtime.ppo` (same network,
pool, reward and baseline).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from respect_jax.realtime.environment import RTEnv, episode_metrics
from respect_jax.realtime.policy import RTPolicy, RTPolicyConfig, choose
from respect_jax.realtime.types import RTParams
from respect_jax.train.config import from_values
from respect_jax.train.harness import LoopConfig, TrainState, host_loop, make_optimizer, scanned_epoch
from respect_jax.train.run_folder import NETWORK_FILE

FORMAT = "respect-jax-rt-policy/1"


@dataclass(frozen=True)
class RTTrainConfig:
    """Training knobs (``train`` node of ``conf/rt.yaml``)."""

    seed: int = 0
    updates: int = 100
    updates_per_epoch: int = 10
    batch: int = 8
    samples: int = 4
    lr: float = 1e-3
    grad_clip: float = 1.0
    max_steps: int = 0  # decisions per episode; 0 = 2 * S + 16
    safety: bool = True
    override_penalty: float = 0.01
    hrt_penalty: float = 4.0
    entropy: float = 0.0
    algorithm: str = "reinforce"  # or "ppo" (respect_jax.realtime.ppo): same network, pool, reward and baseline
    ppo_epochs: int = 4  # PPO: passes over each batch of rollouts
    ppo_minibatches: int = 2  # PPO: Adam steps per pass (batch * samples episodes split evenly)
    ppo_clip: float = 0.2  # PPO: clip range of the probability ratio
    util_reward: float = 0.0  # episode-end bonus util_reward x utilisation (busy / (M x makespan)); issue 31 trial

    @classmethod
    def from_dict(cls, doc: dict) -> RTTrainConfig:
        return from_values(cls, doc, "train")

    def __post_init__(self) -> None:
        if self.updates < 1 or self.updates_per_epoch < 1 or self.updates % self.updates_per_epoch:
            raise ValueError(f"train.updates ({self.updates}) must be a positive multiple of train.updates_per_epoch")
        if self.batch < 1:
            raise ValueError(f"train.batch must be >= 1, got {self.batch}")
        if self.samples < 2:
            raise ValueError(f"train.samples must be >= 2 (the shared baseline needs two rollouts), got {self.samples}")
        if self.algorithm not in ("reinforce", "ppo"):
            raise ValueError(f"train.algorithm must be reinforce or ppo, got {self.algorithm!r}")
        if self.ppo_epochs < 1 or self.ppo_minibatches < 1 or (self.batch * self.samples) % self.ppo_minibatches:
            raise ValueError(
                f"train.ppo_epochs must be >= 1 and train.ppo_minibatches >= 1 dividing batch * samples "
                f"({self.batch * self.samples}), got {self.ppo_epochs} and {self.ppo_minibatches}"
            )
        if not self.util_reward >= 0.0:
            raise ValueError(f"train.util_reward must be >= 0, got {self.util_reward}")
        if not 0.0 < self.ppo_clip < 1.0:
            raise ValueError(f"train.ppo_clip must be in (0, 1), got {self.ppo_clip}")


def episode_steps(params: RTParams, cfg: RTTrainConfig) -> int:
    return cfg.max_steps or 2 * params.valid.shape[-1] + 16


def make_env(cfg: RTTrainConfig) -> RTEnv:
    return RTEnv(safety=cfg.safety, override_penalty=cfg.override_penalty, hrt_penalty=cfg.hrt_penalty)


def sampled_returns(
    model: RTPolicy, env: RTEnv, params: RTParams, key: jax.Array, steps: int, util_reward: float = 0.0
) -> dict:
    """Roll out a batch (axis B) with sampled actions; returns per-episode sums (``return`` plus ``util_reward`` x
    the episode's utilisation).

    Returns: ``return`` f32[B], ``logp`` f32[B] (sum of log-probabilities of the decisions, with
    gradient), ``entropy`` f32[B], ``done`` bool[B], ``overrides``/``decisions`` i32[B],
    ``srt_met``/``srt_jobs``/``hrt_missed`` i32[B].
    """
    b = params.valid.shape[0]
    state, ts = env.batch_reset(params)

    def body(carry, k):
        state, obs, ret, logp, ent = carry
        active = ~state.done
        prio, pair = jax.vmap(model)(obs)
        mask = jax.vmap(model.mask)(obs)
        action, _, _, lp = jax.vmap(choose)(prio, pair, mask, jax.random.split(k, b))
        pm = jnp.where(mask, pair, -1e9)
        p_pair = jax.nn.softmax(pm, axis=-1)
        ent_step = -jnp.sum(p_pair * jax.nn.log_softmax(pm, axis=-1), axis=(-1, -2)) / pair.shape[-1]
        state, ts = env.batch_step(state, jax.lax.stop_gradient(action))
        return (
            state,
            ts.observation,
            ret + ts.reward,
            logp + jnp.where(active, lp, 0.0),
            ent + jnp.where(active, ent_step, 0.0),
        ), None

    zeros = jnp.zeros((b,), jnp.float32)
    (state, _, ret, logp, ent), _ = jax.lax.scan(
        body, (state, ts.observation, zeros, zeros, zeros), jax.random.split(key, steps)
    )
    m = jax.vmap(episode_metrics)(state)
    return {
        "return": ret + util_reward * m["utilisation"] if util_reward else ret,  # 0: the same program as before
        "logp": logp,
        "entropy": ent,
        "done": state.done,
        "overrides": m["overrides"],
        "decisions": m["decisions"],
        "srt_met": m["srt_met"],
        "srt_jobs": m["srt_jobs"],
        "hrt_missed": m["hrt_missed"],
    }


def draw_batch(pool: RTParams, key: jax.Array, batch: int, samples: int) -> RTParams:
    """``batch`` scenarios of ``pool`` (axis N) drawn with ``key``, each repeated ``samples`` times in a row (the
    rollouts that share a baseline): axis ``batch * samples``."""
    idx = jax.random.randint(key, (batch,), 0, pool.valid.shape[0])
    return jax.tree.map(lambda x: jnp.repeat(x[idx], samples, axis=0), pool)


def baseline_advantage(ret: jax.Array, samples: int) -> jax.Array:
    """f32[B * samples] advantages: each episode's return ``ret`` (f32[B * samples], a scenario's rollouts in a row)
    minus the mean return of its scenario's ``samples`` rollouts (the shared baseline)."""
    ret = ret.reshape(-1, samples)
    return (ret - ret.mean(axis=1, keepdims=True)).reshape(-1)


def update_metrics(ret: jax.Array, done: jax.Array, m: dict) -> dict:
    """An update's logged figures from its rollouts: mean ``ret``, SRT rate, override rate, HRT misses and the share
    of finished episodes (``m``: per-episode ``srt_met``, ``srt_jobs``, ``overrides``, ``decisions``,
    ``hrt_missed``)."""
    return {
        "return": ret.mean(),
        "srt_rate": m["srt_met"].sum() / jnp.maximum(m["srt_jobs"].sum(), 1),
        "override_rate": m["overrides"].sum() / jnp.maximum(m["decisions"].sum(), 1),
        "hrt_missed": m["hrt_missed"].sum(),
        "finished": done.mean(),
    }


def rt_optimizer(cfg: RTTrainConfig) -> optax.GradientTransformation:
    """Adam at ``lr`` after global-norm clipping to ``grad_clip``."""
    return make_optimizer(cfg.lr, cfg.grad_clip)


def make_update(graphdef: nnx.GraphDef, cfg: RTTrainConfig, steps: int):
    """The pure update ``(state, pool) -> (state, metrics)`` (pool: RTParams with axis N)."""
    env = make_env(cfg)
    opt = rt_optimizer(cfg)
    b, k = cfg.batch, cfg.samples

    def loss_fn(params, batch, key):
        model = nnx.merge(graphdef, params)
        out = sampled_returns(model, env, batch, key, steps, cfg.util_reward)
        adv = jax.lax.stop_gradient(baseline_advantage(out["return"], k))
        loss = -jnp.mean(adv * out["logp"]) - cfg.entropy * jnp.mean(out["entropy"])
        return loss, {"loss": loss, **update_metrics(out["return"], out["done"], out)}

    def update(state: TrainState, pool: RTParams):
        key = jax.random.fold_in(state.key, state.step)
        k_idx, k_roll = jax.random.split(key)
        batch = draw_batch(pool, k_idx, b, k)
        (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, batch, k_roll)
        updates, opt_state = opt.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics["grad_norm"] = optax.tree.norm(grads)
        return state.replace(params=params, opt_state=opt_state, step=state.step + 1), metrics

    return update


def init_state(model: RTPolicy, cfg: RTTrainConfig) -> tuple[nnx.GraphDef, TrainState]:
    graphdef, params = nnx.split(model)
    state = TrainState(
        params=params,
        opt_state=rt_optimizer(cfg).init(params),
        step=jnp.int32(0),
        key=jax.random.PRNGKey(cfg.seed),
    )
    return graphdef, state


#: network.json keys that are not part of the network: the training knobs and the training pool
NOT_NETWORK = ("train", "presets", "pool")


def network_doc(policy: RTPolicyConfig, cfg: RTTrainConfig, extra: dict) -> dict:
    """network.json: format, policy, ``extra`` (platform, sizes, presets, pool statistics) and the training knobs."""
    return {"format": FORMAT, "policy": policy.to_dict(), **extra, "train": asdict(cfg)}


def fit(
    pool: RTParams,
    policy_cfg: RTPolicyConfig,
    cfg: RTTrainConfig,
    run_dir: str | Path,
    extra: dict | None = None,
    log: Callable[[str], None] = print,
    resolved_config: str | None = None,
) -> tuple[RTPolicy, list[dict]]:
    """Train (resuming from ``run_dir`` if it holds checkpoints of the same network); returns the model and the
    epoch records.

    Args:
        pool: packed training scenarios, RTParams with leading axis N (moved to the device once).
        extra: written into ``network.json`` (platform, sizes, scenario presets...); a folder whose network.json
            differs in other keys than :data:`NOT_NETWORK` is refused.
        resolved_config: the command's resolved config, written to ``config.yaml``.
    """
    model = RTPolicy(policy_cfg, rngs=nnx.Rngs(cfg.seed))
    graphdef, state = init_state(model, cfg)
    pool = jax.tree.map(jnp.asarray, pool)
    if cfg.algorithm == "ppo":
        from respect_jax.realtime.ppo import make_update as make_ppo_update

        update = make_ppo_update(graphdef, cfg, episode_steps(pool, cfg))
    else:
        update = make_update(graphdef, cfg, episode_steps(pool, cfg))
    epoch = scanned_epoch(update, cfg.updates_per_epoch)

    def run_epoch(state: TrainState) -> tuple[TrainState, dict]:
        state, metrics = epoch(state, pool)
        return state, {k: float(jnp.mean(v)) for k, v in metrics.items()}

    loop = LoopConfig(cfg.updates, max_to_keep=2, items_per_step=cfg.batch * cfg.samples, rate="episodes_per_s")
    result = host_loop(run_dir, loop, init_state=lambda: state, run_epoch=run_epoch,
                       network=network_doc(policy_cfg, cfg, extra or {}), ignore=NOT_NETWORK,
                       resolved_config=resolved_config, log=log, progress=False)
    return nnx.merge(graphdef, result.state.params), result.history


def load_policy(run_dir: str | Path) -> tuple[RTPolicy, dict]:
    """The trained policy of a run folder and its ``network.json`` document."""
    from respect_jax.train.checkpoints import Checkpointer

    run_dir = Path(run_dir)
    path = run_dir / NETWORK_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: not an RT policy run (no {NETWORK_FILE})")
    doc = json.loads(path.read_text())
    if doc.get("format") != FORMAT:
        raise ValueError(f"{path}: unknown format {doc.get('format')!r} (expected {FORMAT})")
    model = RTPolicy(RTPolicyConfig.from_dict(doc["policy"]), rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model)
    ckpt = Checkpointer(run_dir, max_to_keep=None)
    try:
        if ckpt.latest_step() is None:
            raise FileNotFoundError(f"{run_dir}: no checkpoint to restore")
        params, _ = ckpt.restore(params, None)
        doc["step"] = ckpt.latest_step()
    finally:
        ckpt.close()
    return nnx.merge(graphdef, params), doc
