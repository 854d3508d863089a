"""The ASET agent: deep Q-learning in pure JAX (replay buffer, target network, double DQN).

PureJaxRL layout: :func:`make_train` returns pure functions; one *episode* of training is

1. give every environment whose trace has fewer than ``episode_steps`` queries left a fresh trace
   at a load multiplier drawn from ``cfg.loads`` and, with ``cfg.mixture``, on a scenario drawn from the
   main one and the mixture's presets (so the agent sees every load level and every kind of conditions and
   adapts to them); the others continue their trace, so the agent also lives through sustained load,
   not only through the first instants after an empty start,
2. ``lax.scan`` over ``episode_steps`` dispatches of ``num_envs`` environments at once
   (epsilon-greedy on the masked Q-values; an exploratory action is uniform or, with probability
   ``explore_rules``, the choice of a random static rule), writing every transition (with its ``n_step``
   return, :func:`n_step_target`) into a circular replay buffer and doing ``updates_per_step``
   double-DQN updates (Huber loss, Adam, global-norm clipping) per step once ``learning_starts`` transitions are stored,
3. a target-network update every ``target_period`` updates (a copy, or a soft one with ``tau`` < 1).

A chunk of episodes is one jitted ``lax.scan`` (the carry is donated): the DQN's epoch. :func:`train_dqn` hands
it, the initial carry and the network document to the shared host loop
(:func:`respect_jax.train.harness.host_loop`), which writes one metrics record per episode, orbax checkpoints
(the whole carry, replay buffer included) and the ``network.json`` from which :func:`load_agent` rebuilds the
agent without retraining, and resumes or refuses a used run folder like every trainer.

An "episode" here is a chunk of ``episode_steps`` dispatches; chunk boundaries are not terminal
(the last transition bootstraps from the next observation and the environment goes on). A trace
that runs out within a chunk ends (discount 0); its remaining steps are padding, masked out of
the buffer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from respect_jax import pytree as struct
from respect_jax.edge_cluster import agent_runs
from respect_jax.edge_cluster.agent_runs import SUMMARY_FILE, train_episodes
from respect_jax.edge_cluster.environment import EdgeEnv
from respect_jax.edge_cluster.generator import generate_trace
from respect_jax.edge_cluster.scenarios import Scenario, TraceConfig, query_slots, scenario_from_dict
from respect_jax.edge_cluster.simulator import HINT_POLICIES, SITE_FEATURES, features, num_features
from respect_jax.edge_cluster.types import EdgeParams, Policy, SimState, State, TimeStep, Trace, action_mask
from respect_jax.graphs.graph import write_json_atomic
from respect_jax.train import run_folder
from respect_jax.train.checkpoints import Checkpointer
from respect_jax.train.config import from_values
from respect_jax.train.harness import make_optimizer
from respect_jax.train.run_folder import METRICS_FILE, NETWORK_FILE

FORMAT = "respect-jax-edge-dqn/4"  # 4: measured per-site/per-app features (issue 30)
FORMAT_V3 = "respect-jax-edge-dqn/3"  # agents saved before them still load (Layout.measured False)


@dataclass(frozen=True)
class DQNConfig:
    """Settings of :func:`make_train` (every knob of the CLI's ``dqn`` node).

    hidden: widths of the Q-network's global MLP (ReLU); action_width: width of its per-action
        scorer (run once per action, so kept narrow).
    gamma: discount per dispatched query (the effect of a dispatch on the queues lasts a few
        dozen queries, so 0.9 looks about 10 queries ahead).
    num_envs: environments stepped together; episode_steps: dispatches per environment per episode.
    episodes: training episodes; loads: load multipliers drawn uniformly per environment and trace
        (empty: the scenario's named load levels).
    trace_horizon_s: simulated seconds of a training trace (null: the scenario's horizon); an
        environment gets a new trace (and load) when its trace runs out.
    buffer_size, batch_size, learning_starts: replay buffer (transitions).
    updates_per_step: gradient updates per environment step (each of ``num_envs`` transitions).
    target_period: updates between hard target-network copies (``tau`` = 1), or between soft updates
        ``target <- tau * online + (1 - tau) * target`` (``tau`` < 1).
    n_step: length of the multi-step return of every replayed transition (1: one-step TD).
    rules_only: the agent chooses, for every query, among the actions the deterministic static rules would take
        (:data:`~respect_jax.edge_cluster.simulator.HINT_POLICIES`; ASET's "which policy now" choice) instead of
        among every (site, variant): it cannot herd queries onto actions no rule would take.
    mixture: further scenario presets trained on together with the main scenario (same sources, sites, apps and
        variants): every environment draws one of them (uniformly) with every new trace, so one agent learns
        over the distribution of conditions of all of them.
    eps_start, eps_end, eps_fraction: linear epsilon decay over that fraction of all steps.
    explore_rules: share of the exploratory (epsilon) actions that follow a static rule of
        :data:`~respect_jax.edge_cluster.simulator.HINT_POLICIES` drawn at random (the rest are
        uniform over the allowed actions): the replay buffer then also holds the consequences of
        sensible dispatches under sustained load, not only of random ones.
    """

    hidden: tuple[int, ...] = (128, 128)
    action_width: int = 32
    lr: float = 1e-3
    gamma: float = 0.9
    num_envs: int = 16
    episode_steps: int = 256
    episodes: int = 60
    loads: tuple[float, ...] = ()
    trace_horizon_s: float | None = None
    buffer_size: int = 32768
    batch_size: int = 128
    learning_starts: int = 1024
    updates_per_step: int = 1
    target_period: int = 250
    tau: float = 1.0
    n_step: int = 3
    mixture: tuple[str, ...] = ()
    eps_start: float = 1.0
    eps_end: float = 0.02
    eps_fraction: float = 0.5
    explore_rules: float = 0.8
    rules_only: bool = False
    double: bool = True
    max_grad_norm: float = 10.0
    seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        object.__setattr__(self, "loads", tuple(float(x) for x in self.loads))
        object.__setattr__(self, "mixture", tuple(str(x) for x in self.mixture))
        checks = [
            ("hidden", len(self.hidden) >= 1 and all(h >= 1 for h in self.hidden),
             "a non-empty list of positive widths"),
            ("action_width", self.action_width >= 1, ">= 1"),
            ("lr", self.lr > 0, "> 0"),
            ("gamma", 0.0 <= self.gamma < 1.0, "in [0, 1)"),
            ("num_envs", self.num_envs >= 1, ">= 1"),
            ("episode_steps", self.episode_steps >= 1, ">= 1"),
            ("episodes", self.episodes >= 1, ">= 1"),
            ("loads", all(x > 0 and math.isfinite(x) for x in self.loads), "positive numbers"),
            ("trace_horizon_s", self.trace_horizon_s is None or 0 < self.trace_horizon_s <= 1000,
             "in (0, 1000] or null"),
            ("buffer_size", self.buffer_size >= self.num_envs, ">= num_envs"),
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("learning_starts", self.learning_starts >= 0, ">= 0"),
            ("updates_per_step", self.updates_per_step >= 1, ">= 1"),
            ("target_period", self.target_period >= 1, ">= 1"),
            ("tau", 0.0 < self.tau <= 1.0, "in (0, 1]"),
            ("n_step", 1 <= self.n_step <= 64, "an integer in [1, 64]"),
            ("eps_end", 0.0 <= self.eps_end <= self.eps_start <= 1.0, "0 <= eps_end <= eps_start <= 1"),
            ("eps_fraction", 0.0 < self.eps_fraction <= 1.0, "in (0, 1]"),
            ("explore_rules", 0.0 <= self.explore_rules <= 1.0, "in [0, 1]"),
            ("max_grad_norm", self.max_grad_norm > 0, "> 0"),
        ]
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"dqn.{name} must be {rule}, got {getattr(self, name)!r}")

    @classmethod
    def from_dict(cls, values: dict | None) -> DQNConfig:
        return from_values(cls, values, "dqn")

    def to_dict(self) -> dict:
        doc = asdict(self)
        return {**doc, "hidden": list(self.hidden), "loads": list(self.loads), "mixture": list(self.mixture)}


@dataclass(frozen=True)
class Layout:
    """Sizes that fix the blocks of the observation vector (:func:`~respect_jax.edge_cluster.simulator.features`)."""

    num_apps: int
    num_sources: int
    num_sites: int
    num_variants: int
    measured: bool = True  # the measured blocks of the observation (False: agents saved in format 3)
    rules_only: bool = False  # the agent chooses among the static rules' choices only (DQNConfig.rules_only)

    def rule_mask(self, x: jax.Array) -> jax.Array:
        """bool[..., S*V] the actions some static rule of the observation ``x`` f32[..., F] would take."""
        hint = self.split(x)["hint"]
        h = len(HINT_POLICIES)
        return jnp.any(hint.reshape(*hint.shape[:-1], h, hint.shape[-1] // h) > 0.5, axis=-2)

    def allowed(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        """The action mask the agent chooses within: ``mask``, restricted to the rules' choices if ``rules_only``."""
        return mask & self.rule_mask(x) if self.rules_only else mask

    @classmethod
    def of(cls, params: EdgeParams) -> Layout:
        return cls(params.num_apps, params.num_sources, params.num_sites, params.num_variants)

    def split(self, x: jax.Array) -> dict[str, jax.Array]:
        """The named blocks of ``x`` f32[..., F], in the order ``features`` writes them."""
        a, n, s, v = self.num_apps, self.num_sources, self.num_sites, self.num_variants
        m = 1 if self.measured else 0
        sizes = {"app": a, "source": n, "backlog": s, "queue": s, "work": s, "rtt": s, "m_queue": m * s,
                 "m_net": m * s, "m_proc": m * s, "m_age": m * s, "slack": s * v, "m_slack": m * s * v, "ok": v,
                 "hint": len(HINT_POLICIES) * s * v, "rate": a, "success": a, "app_slack": m * a}
        out, start = {}, 0
        for name, size in sizes.items():
            out[name] = x[..., start:start + size]
            start += size
        return out


class QNetwork(nnx.Module):
    """Factored Q-network ``f32[..., F] -> f32[..., S*V]`` (masking is done by the caller).

    A global MLP embeds what concerns every action (app and source one-hots, per-app arrival rate
    and success ratio, every site's load); one shared scorer then rates each action ``(s, v)``
    from that embedding and the action's own features (site s's backlog, queue length, pending
    work and RTT, the estimated slack of ``(s, v)``, whether ``v`` is accurate enough, one-hots of
    ``s`` and ``v``). Sharing the scorer across actions lets what is learnt on one site transfer
    to the others, which a flat ``F -> S*V`` head cannot do (it needed far more data on ``isp``).
    """

    def __init__(self, layout: Layout, hidden: tuple[int, ...], width: int, *, rngs: nnx.Rngs):
        self.layout = layout
        a, n, s, v = layout.num_apps, layout.num_sources, layout.num_sites, layout.num_variants
        site_f, m = (SITE_FEATURES, 1) if layout.measured else (4, 0)
        sizes = (n + (3 + m) * a + site_f * s, *hidden)
        self.glob = nnx.List([nnx.Linear(i, o, rngs=rngs) for i, o in zip(sizes[:-1], sizes[1:], strict=True)])
        self.from_action = nnx.Linear(site_f + 1 + m + 1 + len(HINT_POLICIES) + s + v, width, rngs=rngs)
        self.from_state = nnx.Linear(hidden[-1], width, use_bias=False, rngs=rngs)
        self.mix = nnx.Linear(width, width, rngs=rngs)
        self.out = nnx.Linear(width, 1, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        lay = self.layout
        s, v = lay.num_sites, lay.num_variants
        b = lay.split(x)
        names = ("backlog", "queue", "work", "rtt") + (("m_queue", "m_net", "m_proc", "m_age") if lay.measured else ())
        site = jnp.stack([b[k] for k in names], axis=-1)  # [..., S, SITE_FEATURES (4 unmeasured)]
        h = jnp.concatenate([b["app"], b["source"], b["rate"], b["success"], b["app_slack"],
                             site.reshape(*site.shape[:-2], len(names) * s)], -1)
        for layer in self.glob:
            h = jax.nn.relu(layer(h))
        batch = x.shape[:-1]
        ids = jnp.concatenate([jnp.repeat(jnp.eye(s), v, axis=0), jnp.tile(jnp.eye(v), (s, 1))], axis=-1)  # [S*V, S+V]
        per_action = jnp.concatenate([
            jnp.repeat(site, v, axis=-2),  # [..., S*V, SITE_FEATURES]
            b["slack"][..., None],
            *([b["m_slack"][..., None]] if lay.measured else []),
            jnp.tile(b["ok"], (1,) * len(batch) + (s,))[..., None],
            jnp.swapaxes(b["hint"].reshape(*batch, len(HINT_POLICIES), s * v), -1, -2),  # [..., S*V, H]
            jnp.broadcast_to(ids, (*batch, s * v, s + v)),
        ], axis=-1)
        z = jax.nn.relu(self.from_action(per_action) + self.from_state(h)[..., None, :])
        z = jax.nn.relu(self.mix(z))
        return self.out(z)[..., 0]


def masked_argmax(q: jax.Array, mask: jax.Array) -> jax.Array:
    """i32[...] best allowed action (action 0 when nothing is allowed)."""
    return jnp.argmax(jnp.where(mask, q, -jnp.inf), axis=-1).astype(jnp.int32)


@struct.dataclass
class Replay:
    """Circular buffer of transitions (leading axis = capacity)."""

    obs: jax.Array  # f32[C, F]
    action: jax.Array  # i32[C]
    reward: jax.Array  # f32[C]
    discount: jax.Array  # f32[C] gamma * (episode goes on)
    next_obs: jax.Array  # f32[C, F]
    next_mask: jax.Array  # bool[C, S*V]
    valid: jax.Array  # bool[C]
    pos: jax.Array  # i32[]
    size: jax.Array  # i32[]


@struct.dataclass
class Carry:
    params: Any
    target: Any
    opt_state: Any
    replay: Replay
    env: State  # [E] the environments (they continue across episodes)
    timestep: TimeStep  # [E] their last time step
    load: jax.Array  # f32[E] load multiplier of each environment's current trace
    window: dict  # the last n_step transitions of every environment, oldest first ([E, n, ...] arrays)
    steps: jax.Array  # i32[] environment steps so far (of each env)
    updates: jax.Array  # i32[]
    key: jax.Array


def _empty_replay(capacity: int, obs_size: int, num_actions: int) -> Replay:
    return Replay(
        obs=jnp.zeros((capacity, obs_size), jnp.float32),
        action=jnp.zeros((capacity,), jnp.int32),
        reward=jnp.zeros((capacity,), jnp.float32),
        discount=jnp.zeros((capacity,), jnp.float32),
        next_obs=jnp.zeros((capacity, obs_size), jnp.float32),
        next_mask=jnp.zeros((capacity, num_actions), bool),
        valid=jnp.zeros((capacity,), bool),
        pos=jnp.int32(0),
        size=jnp.int32(0),
    )


def _insert(replay: Replay, batch: dict) -> Replay:
    n = batch["action"].shape[0]
    capacity = replay.action.shape[0]
    idx = (replay.pos + jnp.arange(n)) % capacity
    updated = {k: getattr(replay, k).at[idx].set(v) for k, v in batch.items()}
    return replay.replace(**updated, pos=(replay.pos + n) % capacity, size=jnp.minimum(replay.size + n, capacity))


def n_step_target(reward: jax.Array, ongoing: jax.Array, gamma: float) -> tuple[jax.Array, jax.Array]:
    """Multi-step return of the oldest of ``n`` consecutive steps: rewards f32[..., n], ``ongoing`` f32[..., n]
    (1 where the episode went on after that step) -> ``(sum_k gamma^k r_k prod_{j<k} ongoing_j,
    gamma^n prod_k ongoing_k)``; the target is ``return + discount * Q(next observation after the last step)``."""
    n = reward.shape[-1]
    alive = jnp.cumprod(ongoing, axis=-1)
    before = jnp.concatenate([jnp.ones_like(alive[..., :1]), alive[..., :-1]], axis=-1)
    powers = gamma ** jnp.arange(n, dtype=jnp.float32)
    return jnp.sum(reward * before * powers, axis=-1), (gamma ** n) * alive[..., -1]


def training_scenarios(scn: Scenario, cfg: DQNConfig) -> list[Scenario]:
    """The main scenario and the presets of ``cfg.mixture`` (checked to have the main scenario's shapes and trace
    settings but the horizon and Q)."""
    from respect_jax.edge_cluster.scenarios import load_preset

    out = [scn]
    for name in cfg.mixture:
        other = load_preset(name)
        same = Layout.of(other.params) == Layout.of(scn.params)
        if not same or other.params.slot_site.shape != scn.params.slot_site.shape:
            raise ValueError(f"dqn.mixture: scenario {name!r} has other sources, sites, workers, apps or variants "
                             f"than {scn.name!r}")
        keep = ("pattern", "burst_factor", "mean_burst_s", "mean_calm_s", "amplitude", "period_s", "phase_spread",
                "service_cv")
        if any(getattr(other.trace, k) != getattr(scn.trace, k) for k in keep):
            raise ValueError(f"dqn.mixture: scenario {name!r} has another arrival pattern or service noise than "
                             f"{scn.name!r}")
        out.append(other)
    return out


def training_trace_config(scn: Scenario, cfg: DQNConfig) -> TraceConfig:
    """Trace settings of training: ``trace_horizon_s`` (default: the scenario's), at least two
    episodes' worth of queries at the lowest load (of every scenario of the mixture)."""
    loads = cfg.loads or tuple(scn.loads.values())
    scenarios = training_scenarios(scn, cfg)
    total = min(float(x.base_rate.sum()) for x in scenarios)
    horizon = max(cfg.trace_horizon_s or scn.trace.horizon_s, 2.5 * cfg.episode_steps / (total * min(loads)))
    envelope = max(x.envelope_rate for x in scenarios)
    q = max(query_slots(envelope * max(loads) * horizon), cfg.episode_steps + 128)
    switches = 2 * int(math.ceil(horizon / (scn.trace.mean_burst_s + scn.trace.mean_calm_s) * 1.5)) + 16
    return TraceConfig(**{**scn.trace.__dict__, "horizon_s": horizon, "max_queries": q, "max_switches": switches})


def draw_mixture(key: jax.Array, count: int, num_scenarios: int, weights=None) -> jax.Array:
    """i32[count] indices of the training scenarios (main first, then the mixture's), uniform without ``weights``
    (the draw of every earlier recipe), else in proportion to ``weights`` (one per scenario, >= 0, not all 0)."""
    if not weights:
        return jax.random.randint(key, (count,), 0, num_scenarios)
    if len(weights) != num_scenarios:
        raise ValueError(f"mixture_weights: {len(weights)} weights for {num_scenarios} scenarios (main + mixture)")
    p = jnp.asarray(weights, jnp.float32)
    return jax.random.choice(key, num_scenarios, (count,), p=p / jnp.sum(p)).astype(jnp.int32)


def fresh_environments(env: EdgeEnv, scn: Scenario, cfg) -> Callable[[jax.Array], tuple[State, TimeStep, jax.Array]]:
    """``fresh(key) -> (state, timestep, load f32[E])``: new traces for all E = ``cfg.num_envs`` environments, each on a
    scenario of the training mixture (:func:`training_scenarios`) at a load drawn from ``cfg.loads`` (empty: the
    scenario's named levels). ``cfg``: a :class:`DQNConfig` or any config with ``num_envs``, ``loads``, ``mixture``
    (and optionally ``mixture_weights``: relative weights of the main scenario and each mixture preset; empty:
    uniform)."""
    loads = jnp.asarray(cfg.loads or tuple(scn.loads.values()), jnp.float32)
    scenarios = training_scenarios(scn, cfg)
    stack = lambda xs: jax.tree.map(lambda *x: jnp.stack([jnp.asarray(y) for y in x]), *xs)  # noqa: E731
    all_params = stack([x.params for x in scenarios])  # [M, ...]
    all_rates = jnp.stack([jnp.asarray(x.base_rate, jnp.float32) for x in scenarios])  # [M, N, A]
    all_dyn = stack([x.dynamics for x in scenarios])
    e = cfg.num_envs
    weights = tuple(getattr(cfg, "mixture_weights", ()) or ())  # (the switching agent's; empty: uniform)

    def fresh(key: jax.Array) -> tuple[State, TimeStep, jax.Array]:
        k_load, k_trace, k_scn = jax.random.split(key, 3)
        load = loads[jax.random.randint(k_load, (e,), 0, loads.shape[0])]
        which = draw_mixture(k_scn, e, len(scenarios), weights)
        params = jax.tree.map(lambda x: x[which], all_params)
        dyn = jax.tree.map(lambda x: x[which], all_dyn)
        rates = load[:, None, None] * all_rates[which]
        traces = jax.vmap(lambda k, rt, d: generate_trace(k, rt, env.trace_cfg, d))(
            jax.random.split(k_trace, e), rates, dyn)
        state, timestep = jax.vmap(env.reset_trace)(params, traces)
        return state, timestep, load

    return fresh


def make_train(scn: Scenario, cfg: DQNConfig) -> tuple[QNetwork, Callable, Callable]:
    """Build the agent and its pure training functions.

    Returns:
        ``(model, init, run)``: ``init(key) -> Carry``; ``run(carry, num_episodes) -> (carry, metrics)``
        with metrics f32[num_episodes] arrays ``success`` (mean reward of the episode's valid steps),
        ``loss``, ``epsilon``, ``load``. ``run`` is pure: jit it with ``static_argnums=1``.
    """
    params_env: EdgeParams = scn.params
    env = EdgeEnv(training_trace_config(scn, cfg), scn.ring)
    obs_size, num_actions = num_features(params_env), params_env.num_actions
    layout = replace(Layout.of(params_env), rules_only=cfg.rules_only)
    model = QNetwork(layout, cfg.hidden, cfg.action_width, rngs=nnx.Rngs(cfg.seed))
    graphdef, init_params = nnx.split(model)
    optimizer = make_optimizer(cfg.lr, cfg.max_grad_norm)
    fresh = fresh_environments(env, scn, cfg)
    total_steps = cfg.episodes * cfg.episode_steps
    e, n_step = cfg.num_envs, cfg.n_step

    def q_values(params, obs):
        return nnx.merge(graphdef, params)(obs)

    def empty_window() -> dict:
        return {"obs": jnp.zeros((e, n_step, obs_size), jnp.float32), "action": jnp.zeros((e, n_step), jnp.int32),
                "reward": jnp.zeros((e, n_step), jnp.float32), "ongoing": jnp.zeros((e, n_step), jnp.float32),
                "valid": jnp.zeros((e, n_step), bool)}

    def push(window: dict, new: dict) -> tuple[dict, dict]:
        """Append this step's transitions ([E] arrays) to the window; return it and the n-step transitions of its
        oldest entries (``valid`` False until the window is full). Rewards after a trace's end are cut off by the
        product of the ``ongoing`` flags before them."""
        window = {k: jnp.concatenate([window[k][:, 1:], new[k][:, None]], axis=1) for k in window}
        ret, discount = n_step_target(window["reward"], window["ongoing"], cfg.gamma)
        out = {"obs": window["obs"][:, 0], "action": window["action"][:, 0], "reward": ret,
               "discount": discount, "valid": window["valid"][:, 0]}
        return window, out

    def init(key: jax.Array) -> Carry:
        # placeholder environments with empty traces (zeros): the first episode renews every one of
        # them, so trace generation is compiled once, inside ``run``, and ``init`` runs eagerly fast
        state, timestep, load = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), jax.eval_shape(fresh, key))
        return Carry(
            params=jax.tree.map(jnp.copy, init_params),
            target=jax.tree.map(jnp.copy, init_params),  # distinct buffers: the carry is donated
            opt_state=optimizer.init(init_params),
            replay=_empty_replay(cfg.buffer_size, obs_size, num_actions),
            env=state,
            timestep=timestep,
            load=load,
            window=empty_window(),
            steps=jnp.int32(0),
            updates=jnp.int32(0),
            key=key,
        )

    def loss_fn(params, target, batch):
        if cfg.double:  # one pass of the online network over obs and next_obs (a smaller program)
            both = q_values(params, jnp.concatenate([batch["obs"], batch["next_obs"]]))
            q, q_next_online = jnp.split(both, 2)
        else:
            q = q_values(params, batch["obs"])
        q_taken = jnp.take_along_axis(q, batch["action"][:, None], axis=1)[:, 0]
        q_next_target = q_values(target, batch["next_obs"])
        if cfg.double:
            best = masked_argmax(jax.lax.stop_gradient(q_next_online), batch["next_mask"])
            q_next = jnp.take_along_axis(q_next_target, best[:, None], axis=1)[:, 0]
        else:
            q_next = jnp.max(jnp.where(batch["next_mask"], q_next_target, -jnp.inf), axis=1)
        q_next = jnp.where(jnp.any(batch["next_mask"], axis=1), q_next, 0.0)
        y = batch["reward"] + batch["discount"] * jax.lax.stop_gradient(q_next)
        err = optax.huber_loss(q_taken, y)
        w = batch["valid"].astype(jnp.float32)
        return jnp.sum(err * w) / jnp.maximum(jnp.sum(w), 1.0)

    def update(carry: Carry, key: jax.Array) -> tuple[Carry, jax.Array]:
        r = carry.replay
        idx = jax.random.randint(key, (cfg.batch_size,), 0, jnp.maximum(r.size, 1))
        fields_ = ("obs", "action", "reward", "discount", "next_obs", "next_mask", "valid")
        batch = {k: getattr(r, k)[idx] for k in fields_}
        loss, grads = jax.value_and_grad(loss_fn)(carry.params, carry.target, batch)
        upd, opt_state = optimizer.update(grads, carry.opt_state, carry.params)
        params = optax.apply_updates(carry.params, upd)
        updates = carry.updates + 1
        due = updates % cfg.target_period == 0
        target = jax.tree.map(lambda t, p: jnp.where(due, cfg.tau * p + (1.0 - cfg.tau) * t, t), carry.target, params)
        return carry.replace(params=params, target=target, opt_state=opt_state, updates=updates), loss

    def epsilon(steps):
        frac = jnp.minimum(steps / (cfg.eps_fraction * total_steps), 1.0)
        return cfg.eps_start + frac * (cfg.eps_end - cfg.eps_start)

    def env_step(inner, _):
        carry, state, timestep = inner
        key, k_eps, k_rand, k_rule, k_mix, k_upd = jax.random.split(carry.key, 6)
        obs = timestep.observation
        allowed = layout.allowed(obs.features, obs.action_mask)
        greedy = masked_argmax(q_values(carry.params, obs.features), allowed)
        random_action = jax.random.categorical(k_rand, jnp.where(allowed, 0.0, -jnp.inf), axis=-1)
        random_action = jnp.where(jnp.any(allowed, axis=-1), random_action, 0).astype(jnp.int32)
        hints = layout.split(obs.features)["hint"].reshape(e, len(HINT_POLICIES), num_actions)
        rule = jax.random.randint(k_rule, (e,), 0, len(HINT_POLICIES))
        rule_action = jnp.argmax(jnp.sum(jnp.where((jnp.arange(len(HINT_POLICIES)) == rule[:, None])[..., None],
                                                   hints, 0.0), axis=1), axis=-1).astype(jnp.int32)
        random_action = jnp.where(jax.random.uniform(k_mix, (e,)) < cfg.explore_rules, rule_action, random_action)
        eps = epsilon(carry.steps)
        action = jnp.where(jax.random.uniform(k_eps, (e,)) < eps, random_action, greedy)
        valid = state.index < state.trace.num_valid
        state, nxt = env.batch_step(state, action)
        window, oldest = push(carry.window, {"obs": obs.features, "action": action, "reward": nxt.reward,
                                             "ongoing": nxt.discount, "valid": valid})
        replay = _insert(carry.replay, {**oldest, "next_obs": nxt.observation.features,
                                        "next_mask": layout.allowed(nxt.observation.features,
                                                                    nxt.observation.action_mask)})
        carry = carry.replace(replay=replay, window=window, steps=carry.steps + 1, key=key)

        def do_updates(c):
            c, losses = jax.lax.scan(update, c, jax.random.split(k_upd, cfg.updates_per_step))
            return c, jnp.mean(losses)

        ready = carry.replay.size >= max(cfg.learning_starts, cfg.batch_size)
        carry, loss = jax.lax.cond(ready, do_updates, lambda c: (c, jnp.float32(jnp.nan)), carry)
        stats = (jnp.sum(nxt.reward * valid), jnp.sum(valid), loss, eps)
        return (carry, state, nxt), stats

    def episode(carry: Carry, _):
        key, k_env = jax.random.split(carry.key)
        renew = carry.env.trace.num_valid - carry.env.index < cfg.episode_steps  # [E] trace (nearly) used up
        new_state, new_timestep, new_load = fresh(k_env)

        def pick(new, old):
            return jnp.where(renew.reshape((e,) + (1,) * (new.ndim - 1)), new, old)

        state = jax.tree.map(pick, new_state, carry.env)
        timestep = jax.tree.map(pick, new_timestep, carry.timestep)
        load = jnp.where(renew, new_load, carry.load)
        # a renewed environment's pending n-step transitions lose their continuation: drop them
        carry = carry.replace(window={**carry.window, "valid": carry.window["valid"] & ~renew[:, None]})
        (carry, state, timestep), (succ, count, loss, eps) = jax.lax.scan(
            env_step, (carry.replace(key=key), state, timestep), None, length=cfg.episode_steps
        )
        carry = carry.replace(env=state, timestep=timestep, load=load)
        metrics = {
            "success": jnp.sum(succ) / jnp.maximum(jnp.sum(count), 1),
            "loss": jnp.nanmean(loss),
            "epsilon": eps[-1],
            "load": jnp.mean(load),
        }
        return carry, metrics

    def run(carry: Carry, num_episodes: int) -> tuple[Carry, dict]:
        return jax.lax.scan(episode, carry, None, length=num_episodes)

    return model, init, run


# ------------------------------------------------------------------------------ agent as a policy
def agent_policy(graphdef: nnx.GraphDef, params: Any) -> Policy:
    """The greedy (masked argmax) policy of trained Q-network parameters."""

    def policy(env_params: EdgeParams, sim: SimState, query: Trace) -> jax.Array:
        model = nnx.merge(graphdef, params)
        x = features(env_params, sim, query, measured=model.layout.measured)
        return masked_argmax(model(x), model.layout.allowed(x, action_mask(env_params, query)) | ~query.valid)

    policy.needs_history = True  # simulate with the scenario's ring (features need it)
    policy.graphdef, policy.params = graphdef, params  # evaluation compiles once for agents of one network
    return policy


@dataclass
class Agent:
    """A trained agent: network, parameters and where they came from."""

    graphdef: nnx.GraphDef
    params: Any
    config: DQNConfig
    scenario_doc: dict
    history: list[dict] = field(default_factory=list)
    train_time_s: float = 0.0
    trained_from: int = 0  # the episode this training call started from (> 0: resumed)

    @property
    def policy(self) -> Policy:
        return agent_policy(self.graphdef, self.params)


def train_dqn(
    scn: Scenario,
    cfg: DQNConfig,
    run_dir: str | Path | None = None,
    chunk: int = 10,
    log: Callable[[str], None] | None = None,
    overwrite: bool = False,
    resolved_config: str | None = None,
    keep_every: int = 0,
) -> Agent:
    """Train on a scenario; with ``run_dir``, write network.json, metrics.jsonl (one record per episode), orbax
    checkpoints (one per chunk of ``chunk`` episodes) and summary.json.

    A ``run_dir`` that already holds checkpoints of an agent with the same scenario and settings (only
    ``episodes`` may differ) is resumed from its latest checkpoint. A checkpoint holds the whole training state
    (Q and target networks, optimiser, replay buffer, environments, step counters, PRNG key), so a killed run
    resumed with the same settings ends exactly like an uninterrupted one. Raising ``episodes`` stretches the
    epsilon schedule (it spans ``episodes``), so exploration rises again when training continues. Other settings
    are refused (ValueError, before anything changes) unless ``overwrite``, which first removes that agent's files
    and trains afresh. The first chunk includes compilation; ``train_time_s`` (this call's) and the metrics report
    both. ``resolved_config``: the command's resolved config, written to ``config.yaml``.
    """
    run = train_episodes(
        make_train(scn, cfg), cfg.episodes, cfg.episode_steps * cfg.num_envs, cfg.seed, run_dir, chunk=chunk,
        network=_network_doc(scn, cfg, num_features(scn.params)), ignore=("dqn.episodes",), state_key="replay",
        log=log, overwrite=overwrite, resolved_config=resolved_config, keep_every=keep_every,
    )
    agent = Agent(run.graphdef, run.params, cfg, scn.doc, run.history, run.train_time_s, run.resumed_at)
    if run_dir is not None and run.resumed_at != cfg.episodes:
        write_json_atomic({"scenario": scn.name, "episodes": cfg.episodes,
                           "env_steps": cfg.episodes * cfg.episode_steps * cfg.num_envs,
                           "train_time_s": agent.train_time_s, "resumed_from_episode": run.resumed_at,
                           "final_success": run.history[-1]["success"]},
                          Path(run_dir) / SUMMARY_FILE)
    return agent


def keep_parameters_only(run_dir: str | Path) -> None:
    """Shrink a finished run folder to what :func:`load_agent` needs: the last checkpoint's parameters (the
    training state, replay buffer included, is what makes a checkpoint large). For agents that are shipped."""
    agent, _ = load_agent(run_dir)
    agent_runs.keep_parameters_only(run_dir, agent.params)


def _network_doc(scn: Scenario, cfg: DQNConfig, obs_size: int) -> dict:
    return {"format": FORMAT, "dqn": cfg.to_dict(), "obs_size": obs_size, "num_actions": scn.params.num_actions,
            "layout": asdict(replace(Layout.of(scn.params), rules_only=cfg.rules_only)), "scenario": scn.doc}


def load_agent(path: str | Path, step: int | None = None) -> tuple[Agent, Scenario]:
    """Rebuild a trained agent (and its scenario) from a run folder written by :func:`train_dqn`."""
    run_dir = Path(path)
    if not (run_dir / NETWORK_FILE).is_file():
        raise FileNotFoundError(f"{run_dir}: not an edge agent run folder (no {NETWORK_FILE})")
    doc = json.loads((run_dir / NETWORK_FILE).read_text())
    if doc.get("format") not in (FORMAT, FORMAT_V3):
        raise ValueError(f"{run_dir}/{NETWORK_FILE}: unknown format {doc.get('format')!r} (expected {FORMAT})")
    cfg = DQNConfig.from_dict(doc["dqn"])
    scn = scenario_from_dict(doc["scenario"])
    layout = Layout(**{**doc["layout"], "measured": doc.get("format") == FORMAT, "rules_only": cfg.rules_only})
    model = QNetwork(layout, cfg.hidden, cfg.action_width, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model)
    ckpt = Checkpointer(run_dir, max_to_keep=None)
    try:
        params, _ = ckpt.restore(params, None, step)
    finally:
        ckpt.close()
    history = run_folder.read_metrics(run_dir / METRICS_FILE)
    summary = json.loads((run_dir / SUMMARY_FILE).read_text()) if (run_dir / SUMMARY_FILE).is_file() else {}
    return Agent(graphdef, params, cfg, doc["scenario"], history, float(summary.get("train_time_s", 0.0))), scn

