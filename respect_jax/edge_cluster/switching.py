"""The policy-switching ASET agent (issue 30): per query, *which static rule* dispatches it.

The action is a rule of :data:`SwitchConfig.rules` (by default the deterministic static policies ``closest``,
``fastest_expected``, ``most_accurate``, ``least_loaded``); the query goes where that rule sends it. One rule is the
*base* (``fastest_expected``): the network outputs, for every other rule, its predicted **advantage** over the base
(in successful queries), and the agent follows the base unless some rule's predicted advantage exceeds ``margin``.
"Always the base rule" is the zero network, which is where training starts (the output layer is zero-initialised),
so the agent only has to learn when to switch.

Why not the one-step TD targets of the DQN (:mod:`~respect_jax.edge_cluster.dqn`): a dispatch's own reward (did
*this* query succeed) hardly differs between sensible actions; what separates them is the queueing delay they
impose on the next dozens of queries, a small signal under the trace's noise that a bootstrapped per-query value
does not pick up in the training budget of this CPU (the DQN's near-greedy success fell as epsilon decayed).

How it learns (approximate policy iteration with simulator rollouts, Bertsekas' *rollout* + a learned Q):
the pure simulator can be forked. From states visited by the agent itself (epsilon-greedy over the rules), every
environment branches once per rule: the current query is dispatched by that rule, the next ``horizon`` queries of the
same trace by the base rule; the branch's value is its number of successes (current query included). All branches
share the trace (arrival times, jitter, processing noise: common random numbers), so the difference of two branches
is exactly the effect of that one decision, without the noise of the rest of the trace. The network regresses
``value(rule) - value(base)`` (mean squared error) on the observation of
:func:`~respect_jax.edge_cluster.simulator.features`. The greedy agent is then one step of policy improvement over
the base rule (exact values would make it at least as good as the base in every state); the samples come from the
agent's own visits, so it is trained on the states it produces. Branches run without the history ring (the rules
need none), which makes a branch step as cheap as a static policy's.

Targets over longer horizons (issue 30, session 25): at overload a switch's queueing cost can show only hundreds of
queries later, and thresholding noisy predictions selects the states whose gains are over-predicted. So the branch
value can be discounted (``discount``: the k-th query's success counts ``discount ** k``, which lets ``horizon``
grow without the far, noisy tail dominating), each sampled state can be rolled out under several futures
(``rollouts``: the trace itself and futures re-drawn from it by :func:`redraw_future`, a bootstrap of its own next
queries; the target is the mean advantage), and a second head (``spread_head``) can regress the spread of the
advantage over those futures, so that the greedy agent switches only when ``gain - spread_weight * spread`` clears
the margin. The defaults (one rollout, no discount, no head) are the recipe of session 21.

Everything is pure JAX: a chunk of episodes is one jitted ``lax.scan`` over vectorised environments (traces drawn
per environment from the main scenario and ``mixture``'s presets at a load from ``loads``, renewed when used up, as
in the DQN); the shared harness (:func:`respect_jax.train.harness.host_loop`) writes metrics, orbax checkpoints and
``network.json``; :func:`load_edge_agent` loads this agent or a DQN agent by the folder's format.
"""

from __future__ import annotations

import json
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
from respect_jax.edge_cluster.dqn import Layout, fresh_environments, training_trace_config
from respect_jax.edge_cluster.environment import EdgeEnv
from respect_jax.edge_cluster.policies import STATIC_POLICIES
from respect_jax.edge_cluster.scenarios import Scenario, scenario_from_dict
from respect_jax.edge_cluster.simulator import HINT_POLICIES, SITE_FEATURES, dispatch, features, num_features
from respect_jax.edge_cluster.types import SUCCESS, EdgeParams, Policy, SimState, State, TimeStep, Trace, query_at
from respect_jax.graphs.graph import write_json_atomic
from respect_jax.train import run_folder
from respect_jax.train.checkpoints import Checkpointer
from respect_jax.train.config import from_values
from respect_jax.train.harness import make_optimizer
from respect_jax.train.run_folder import METRICS_FILE, NETWORK_FILE

FORMAT = "respect-jax-edge-switch/1"


@dataclass(frozen=True)
class SwitchConfig:
    """Settings of :func:`make_train` (the CLI's ``switch`` node).

    rules: the static rules the agent chooses among (names of :data:`HINT_POLICIES`); base: the one it follows
        unless another is predicted better (must be among ``rules``).
    hidden: widths of the MLP; lr, max_grad_norm: Adam with global-norm clipping.
    lr_final: the learning rate at the end of training as a fraction of ``lr`` (cosine decay over the
        ``episodes * episode_steps / stride * updates_per_sample`` updates; 1: constant, the earlier recipe).
    num_envs: environments stepped together; episode_steps: the agent's own dispatches per environment per episode.
    stride: own dispatches between two rollout samples of an environment (``episode_steps`` a multiple of it).
    horizon: queries the base rule dispatches after the branched query (how far a decision's effect is counted).
    discount: weight ``discount ** k`` of the k-th query's success after the branched one (1: the plain count).
    rollouts: futures per sampled state: the trace itself and ``rollouts - 1`` re-drawn ones
        (:func:`redraw_future`); the target is the mean advantage over them.
    spread_head: a second output that regresses the spread of the target (the standard deviation of the advantage
        over the rollouts; with one rollout, the absolute error of the first head).
    spread_weight: the greedy agent switches to a rule only if ``predicted gain - spread_weight * predicted spread``
        exceeds the rule's margin (0: the spread is not used; needs ``spread_head``).
    episodes; loads: load multipliers drawn per environment and trace (empty: the scenario's named levels);
        trace_horizon_s: simulated seconds of a training trace (null: the scenario's); mixture: further presets
        (same topology) drawn per trace, as in the DQN; mixture_weights: relative weights of drawing the main
        scenario and each ``mixture`` preset (in that order; empty: uniform, the earlier recipe).
    buffer_size, batch_size: replay of (observation, advantages) samples; updates_per_sample: gradient updates
        per sampling round (each round adds ``num_envs`` samples).
    explore: probability that a dispatch of the agent's own trajectory follows a uniformly drawn rule (coverage).
    margin: the greedy agent leaves the base rule only for a predicted gain above this (successful queries).
    rule_margins: per-rule overrides of ``margin`` (``{rule: margin}``; a rule not named, or None, keeps ``margin``):
        a switch to rule r needs a predicted gain above its margin, and among the rules that clear theirs the one
        furthest above its margin is taken.
    ema: decay of an exponential moving average of the parameters over the gradient updates, which becomes the
        agent (what is checkpointed, kept and acts at evaluation); training still learns and acts with the online
        parameters. Update t (1, 2, ...) uses the decay ``min(ema, (1 + t) / (10 + t))``, so the start does not
        weigh on it. 0 (the default): off, the earlier recipe.
    """

    rules: tuple[str, ...] = HINT_POLICIES
    base: str = "fastest_expected"
    hidden: tuple[int, ...] = (128, 128)
    lr: float = 1e-3
    lr_final: float = 1.0
    num_envs: int = 32
    episode_steps: int = 256
    stride: int = 8
    horizon: int = 64
    discount: float = 1.0
    rollouts: int = 1
    spread_head: bool = False
    spread_weight: float = 0.0
    episodes: int = 20
    loads: tuple[float, ...] = ()
    trace_horizon_s: float | None = None
    mixture: tuple[str, ...] = ()
    mixture_weights: tuple[float, ...] = ()
    buffer_size: int = 16384
    batch_size: int = 256
    updates_per_sample: int = 2
    explore: float = 0.2
    margin: float = 0.0
    rule_margins: dict = field(default_factory=dict)
    max_grad_norm: float = 10.0
    ema: float = 0.0
    seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "rule_margins", {str(k): float(v) for k, v in dict(self.rule_margins or {}).items()
                                                  if v is not None})  # None: the rule keeps ``margin``
        for name in ("rules", "mixture"):
            object.__setattr__(self, name, tuple(str(x) for x in getattr(self, name)))
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        object.__setattr__(self, "loads", tuple(float(x) for x in self.loads))
        object.__setattr__(self, "mixture_weights", tuple(float(x) for x in self.mixture_weights))
        checks = [
            ("rules", len(self.rules) >= 2 and set(self.rules) <= set(HINT_POLICIES)
             and len(set(self.rules)) == len(self.rules), f"two or more distinct names of {', '.join(HINT_POLICIES)}"),
            ("base", self.base in self.rules, "one of switch.rules"),
            ("hidden", len(self.hidden) >= 1 and all(h >= 1 for h in self.hidden), "a non-empty list of widths >= 1"),
            ("lr", self.lr > 0, "> 0"),
            ("lr_final", 0.0 <= self.lr_final <= 1.0, "in [0, 1]"),
            ("num_envs", self.num_envs >= 1, ">= 1"),
            ("stride", self.stride >= 1, ">= 1"),
            ("episode_steps", self.episode_steps >= self.stride and self.episode_steps % self.stride == 0,
             "a positive multiple of switch.stride"),
            ("horizon", self.horizon >= 0, ">= 0"),
            ("discount", 0.0 < self.discount <= 1.0, "in (0, 1]"),
            ("rollouts", self.rollouts >= 1, ">= 1"),
            ("spread_weight", self.spread_weight >= 0.0 and (self.spread_head or self.spread_weight == 0.0),
             ">= 0, and 0 unless switch.spread_head"),
            ("episodes", self.episodes >= 1, ">= 1"),
            ("loads", all(x > 0 for x in self.loads), "positive numbers"),
            ("trace_horizon_s", self.trace_horizon_s is None or 0 < self.trace_horizon_s <= 1000,
             "in (0, 1000] or null"),
            ("mixture_weights", not self.mixture_weights or (
                len(self.mixture_weights) == 1 + len(self.mixture) and all(w >= 0 for w in self.mixture_weights)
                and sum(self.mixture_weights) > 0), "empty or one weight >= 0 for the main scenario and each "
             "switch.mixture preset, not all 0"),
            ("buffer_size", self.buffer_size >= self.num_envs, ">= num_envs"),
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("updates_per_sample", self.updates_per_sample >= 1, ">= 1"),
            ("explore", 0.0 <= self.explore <= 1.0, "in [0, 1]"),
            ("margin", self.margin >= 0.0, ">= 0"),
            ("rule_margins", set(self.rule_margins) <= set(self.rules) - {self.base}
             and all(m >= 0.0 for m in self.rule_margins.values()), "a mapping of non-base rules to margins >= 0"),
            ("max_grad_norm", self.max_grad_norm > 0, "> 0"),
            ("ema", 0.0 <= self.ema < 1.0, "in [0, 1) (0: off)"),
        ]
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"switch.{name} must be {rule}, got {getattr(self, name)!r}")

    @classmethod
    def from_dict(cls, values: dict | None) -> SwitchConfig:
        return from_values(cls, values, "switch")

    def to_dict(self) -> dict:
        doc = asdict(self)
        doc = {**doc, **{k: list(getattr(self, k)) for k in ("rules", "hidden", "loads", "mixture",
                                                              "mixture_weights")},
               "rule_margins": dict(self.rule_margins)}
        if not self.rule_margins:  # as written before the knob existed: older run folders still resume
            del doc["rule_margins"]
        for name, old in (("discount", 1.0), ("rollouts", 1), ("spread_head", False), ("spread_weight", 0.0),
                          ("lr_final", 1.0), ("mixture_weights", []), ("ema", 0.0)):
            if doc[name] == old:  # likewise: the recipe of session 21 writes the same document as before
                del doc[name]
        return doc

    def margins(self) -> tuple[float, ...]:
        """Per-rule decision margins in the order of ``rules`` (the base's is unused)."""
        return rule_margin_vector(self.rules, self.margin, self.rule_margins)


def rule_margin_vector(rules: tuple[str, ...], margin: float, rule_margins: dict | None = None) -> tuple[float, ...]:
    """``margin`` for every rule of ``rules``, but the rules named in ``rule_margins`` (a ValueError for another
    name or a negative margin)."""
    over = dict(rule_margins or {})
    unknown = sorted(set(over) - set(rules))
    if unknown:
        raise ValueError(f"rule margins name {', '.join(unknown)}, not among the agent's rules {', '.join(rules)}")
    out = tuple(float(over.get(r, margin)) for r in rules)
    if not all(m >= 0.0 for m in out):
        raise ValueError(f"decision margins must be >= 0, got {dict(zip(rules, out, strict=True))}")
    return out


def parse_margin(spec: str | float) -> tuple[float, dict[str, float]]:
    """A decision-margin spec: a number (every rule) or ``"M,rule=m,..."`` (margin M, but m for a switch to that
    rule): ``"0.5,closest=0.1"`` -> ``(0.5, {"closest": 0.1})``. A malformed spec is a one-line ValueError."""
    if isinstance(spec, int | float):
        return float(spec), {}
    head, *rest = str(spec).split(",")
    try:
        over = {}
        for item in rest:
            rule, sep, value = item.partition("=")
            if not sep:
                raise ValueError
            over[rule.strip()] = float(value)
        return float(head), over
    except ValueError:
        raise ValueError(f"margin {spec!r}: expected a number M or M,rule=m,... (e.g. 0.5,closest=0.1)") from None


def rule_indices(cfg: SwitchConfig) -> tuple[int, ...]:
    """Positions of ``cfg.rules`` in :data:`HINT_POLICIES` (their blocks of the observation's hints)."""
    return tuple(HINT_POLICIES.index(r) for r in cfg.rules)


class SwitchNetwork(nnx.Module):
    """``f32[..., F] -> f32[..., R]`` predicted advantage of each rule over the base (0 for the base itself).

    Input: the observation's per-query and per-site blocks (app and source one-hots, per-app rate, success and
    measured slack, every site's 8 load features) and, for every rule, what it would do with this query (the
    estimated and the measured slack of its action, the 8 features of its site, whether it agrees with the base).
    """

    def __init__(self, layout: Layout, rules: tuple[int, ...], base: int, hidden: tuple[int, ...], *, rngs: nnx.Rngs,
                 spread_head: bool = False):
        self.layout, self.rules, self.base = layout, rules, base
        a, n, s = layout.num_apps, layout.num_sources, layout.num_sites
        per_rule = 2 + SITE_FEATURES + 1
        sizes = (n + 4 * a + SITE_FEATURES * s + per_rule * len(rules), *hidden)
        self.layers = nnx.List([nnx.Linear(i, o, rngs=rngs) for i, o in zip(sizes[:-1], sizes[1:], strict=True)])
        self.out = nnx.Linear(hidden[-1], len(rules), kernel_init=nnx.initializers.zeros, rngs=rngs)
        self.spread_out = (nnx.Linear(hidden[-1], len(rules), kernel_init=nnx.initializers.zeros, rngs=rngs)
                           if spread_head else None)

    def rule_actions(self, x: jax.Array) -> jax.Array:
        """i32[..., R] the action (site * V + variant) each rule takes for the observed query."""
        hint = self.layout.split(x)["hint"]
        hint = hint.reshape(*hint.shape[:-1], len(HINT_POLICIES), hint.shape[-1] // len(HINT_POLICIES))
        return jnp.argmax(hint[..., jnp.asarray(self.rules), :], axis=-1).astype(jnp.int32)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.heads(x)[0]

    def heads(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(predicted advantage f32[..., R], predicted spread f32[..., R]: the spread head's linear output, zeros
        without one; 0 for the base rule in both)."""
        lay = self.layout
        s, v = lay.num_sites, lay.num_variants
        b = lay.split(x)
        names = ("backlog", "queue", "work", "rtt", "m_queue", "m_net", "m_proc", "m_age")
        site = jnp.stack([b[k] for k in names], axis=-1)  # [..., S, 8]
        acts = self.rule_actions(x)  # [..., R]
        hot = jax.nn.one_hot(acts, s * v)  # [..., R, S*V]
        site_hot = jax.nn.one_hot(acts // v, s)  # [..., R, S]
        per_rule = jnp.concatenate([
            jnp.sum(hot * b["slack"][..., None, :], -1, keepdims=True),
            jnp.sum(hot * b["m_slack"][..., None, :], -1, keepdims=True),
            jnp.einsum("...rs,...sf->...rf", site_hot, site),
            (acts == acts[..., self.rules.index(self.base)][..., None]).astype(jnp.float32)[..., None],
        ], axis=-1)  # [..., R, 11]
        h = jnp.concatenate([b["app"], b["source"], b["rate"], b["success"], b["app_slack"],
                             site.reshape(*site.shape[:-2], SITE_FEATURES * s),
                             per_rule.reshape(*per_rule.shape[:-2], -1)], -1)  # [..., N + 4A + 8S + 11R]
        for layer in self.layers:
            h = jax.nn.relu(layer(h))
        not_base = jnp.arange(len(self.rules)) != self.rules.index(self.base)
        adv = jnp.where(not_base, self.out(h), 0.0)
        spread = (jnp.where(not_base, self.spread_out(h), 0.0) if self.spread_out is not None
                  else jnp.zeros_like(adv))
        return adv, spread

    def score(self, x: jax.Array, spread_weight: float | jax.Array = 0.0) -> jax.Array:
        """f32[..., R] what the margins are compared with: predicted advantage - ``spread_weight`` * spread."""
        adv, spread = self.heads(x)
        return adv - spread_weight * jnp.maximum(spread, 0.0)


def greedy_rule(adv: jax.Array, base_pos: int, margin: float | jax.Array) -> jax.Array:
    """i32[...] position (in the rules) of the chosen rule from ``adv`` f32[..., R]: the rule whose predicted
    advantage exceeds its margin (``margin`` f32[] for every rule or f32[R] per rule) the most, else the base rule.
    With one margin for all rules this is the best predicted advantage if above the margin."""
    score = jnp.where(jnp.arange(adv.shape[-1]) == base_pos, 0.0, adv - margin)
    best = jnp.argmax(score, axis=-1)
    return jnp.where(jnp.max(score, axis=-1) > 0.0, best, base_pos).astype(jnp.int32)


def strip_history(sim: SimState) -> SimState:
    """The same cluster without the observation's history ring (the dispatch dynamics do not read it)."""
    s, a = sim.hol_us.shape[0], sim.app_pos.shape[0]
    ring_s = lambda x: jnp.zeros((s, 0), x.dtype)  # noqa: E731
    return sim.replace(ring_done_us=ring_s(sim.ring_done_us), ring_work_us=ring_s(sim.ring_work_us),
                       ring_resolve_us=ring_s(sim.ring_resolve_us), ring_queue_us=ring_s(sim.ring_queue_us),
                       ring_net_pct=ring_s(sim.ring_net_pct), ring_proc_pct=ring_s(sim.ring_proc_pct),
                       app_arrival_us=jnp.zeros((a, 0), jnp.int32), app_resolve_us=jnp.zeros((a, 0), jnp.int32),
                       app_ok=jnp.zeros((a, 0), bool), app_slack_us=jnp.zeros((a, 0), jnp.int32))


def branch_values(params: EdgeParams, trace: Trace, sim: SimState, index: jax.Array, rules: tuple[str, ...],
                  base: str, horizon: int, discount: float = 1.0) -> jax.Array:
    """f32[R] successes of each branch: query ``index`` of ``trace`` dispatched by ``rules[r]``, the next ``horizon``
    queries by ``base`` (one environment, unbatched; slots past the trace are padding and count nothing). With
    ``discount`` < 1 the success of the k-th query after the branched one counts ``discount ** k``."""
    branches = [STATIC_POLICIES[r] for r in rules]
    base_rule = STATIC_POLICIES[base]
    q = trace.valid.shape[0]
    lean = strip_history(sim)

    def one(r: jax.Array) -> jax.Array:
        def body(carry, k):
            sim_, total, weight = carry
            i = index + k
            query = query_at(trace, jnp.minimum(i, q - 1))
            query = query.replace(valid=query.valid & (i < q))
            first = jax.lax.switch(r, branches, params, sim_, query)
            act = jnp.where(k == 0, first, base_rule(params, sim_, query))
            sim_, out = dispatch(params, sim_, query, act)
            total = total + weight * (out.code == SUCCESS).astype(jnp.float32)
            return (sim_, total, weight * jnp.float32(discount)), None

        (_, total, _), _ = jax.lax.scan(body, (lean, jnp.float32(0.0), jnp.float32(1.0)), jnp.arange(horizon + 1))
        return total

    return jax.vmap(one)(jnp.arange(len(rules)))


def _window_permutation(key: jax.Array, start: jax.Array, width: int, num_valid: jax.Array) -> jax.Array:
    """i32[width] trace positions ``start + perm``: a uniform permutation of the valid positions of the window
    ``[start, start + width)``, invalid ones (past ``num_valid``) left in place (they are the window's tail)."""
    pos = start + jnp.arange(width)
    u = jnp.where(pos < num_valid, jax.random.uniform(key, (width,)), 2.0 + jnp.arange(width))
    return start + jnp.argsort(u).astype(jnp.int32)


def redraw_future(trace: Trace, index: jax.Array, horizon: int, key: jax.Array) -> Trace:
    """Another future of the same trace after query ``index``, drawn from the trace itself (a bootstrap of its own
    next ``horizon`` queries, so the load and the mix stay those of the trace at that time):

    * the queries ``index + 1 .. index + horizon`` (valid ones) arrive in a random order: their rows (source, app,
      random number) and their inter-arrival gaps are permuted together, the arrival times rebuilt from
      ``time_us[index]`` (the window ends at the same time);
    * the processing noise (``service_pct``) and the network jitter (``jitter_pct``) of the queries ``index ..
      index + horizon`` are each permuted independently (the branched query's own included: the dispatcher does not
      know them either).

    The per-site factors of the dynamics (``net_pct``, ``slow_pct``) stay by position, queries before ``index`` and
    after the window are untouched, so a rollout on it is a rollout of the same state under another future."""
    q = trace.valid.shape[0]
    n = trace.num_valid
    k_rows, k_jit, k_svc = jax.random.split(key, 3)
    take = lambda x, p: jnp.take(x, p, axis=0, mode="clip")  # noqa: E731
    put = lambda x, p, v: x.at[p].set(v, mode="drop")  # noqa: E731
    first = index + 1
    rows = _window_permutation(k_rows, first, horizon, n)
    pos = first + jnp.arange(horizon)
    gaps = take(trace.time_us, pos) - take(trace.time_us, pos - 1)
    new_gaps = take(gaps, rows - first)
    times = take(trace.time_us, index) + jnp.cumsum(new_gaps)
    keep = pos < jnp.minimum(n, q)
    times = jnp.where(keep, times, take(trace.time_us, pos))
    out = trace.replace(time_us=put(trace.time_us, pos, times))
    for name in ("source", "app", "rand"):
        col = getattr(trace, name)
        out = out.replace(**{name: put(col, pos, take(col, rows))})
    noise_pos = index + jnp.arange(horizon + 1)
    for name, k in (("jitter_pct", k_jit), ("service_pct", k_svc)):
        col = getattr(trace, name)
        perm = _window_permutation(k, index, horizon + 1, n)
        out = out.replace(**{name: put(col, noise_pos, take(col, perm))})
    return out


def branch_returns(params: EdgeParams, trace: Trace, sim: SimState, index: jax.Array, rules: tuple[str, ...],
                   base: str, horizon: int, discount: float = 1.0, rollouts: int = 1,
                   key: jax.Array | None = None) -> jax.Array:
    """f32[N, R] :func:`branch_values` under ``N = rollouts`` futures: the trace itself (rollout 0) and
    :func:`redraw_future` of it with ``fold_in(key, j)`` (rollout j >= 1). Within a rollout every rule sees the same
    future (common random numbers), so the advantage of a rule is a difference inside one row."""
    values = [branch_values(params, trace, sim, index, rules, base, horizon, discount)]
    if rollouts > 1:
        futures = jax.vmap(lambda j: redraw_future(trace, index, horizon, jax.random.fold_in(key, j)))(
            jnp.arange(1, rollouts))
        values.append(jax.vmap(lambda tr: branch_values(params, tr, sim, index, rules, base, horizon, discount))(
            futures))
        return jnp.concatenate([values[0][None], values[1]], axis=0)
    return values[0][None]


@struct.dataclass
class Samples:
    """Replay of rollout samples (leading axis = capacity)."""

    obs: jax.Array  # f32[C, F]
    target: jax.Array  # f32[C, R] value(rule) - value(base) (mean over the rollouts)
    spread: jax.Array  # f32[C, R] its standard deviation over the rollouts (zeros without a spread head: orbax
    #                  does not save zero-size arrays)
    valid: jax.Array  # bool[C]
    pos: jax.Array  # i32[]
    size: jax.Array  # i32[]


@struct.dataclass
class Carry:
    params: Any  # the agent's parameters: the online ones, or (``ema`` > 0) their moving average
    online: Any  # ``ema`` > 0: the online parameters (trained and acting during training); else None
    updates: Any  # ``ema`` > 0: i32[] gradient updates so far; else None
    opt_state: Any
    samples: Samples
    env: State  # [E]
    timestep: TimeStep  # [E]
    load: jax.Array  # f32[E]
    key: jax.Array


def trained_params(carry: Carry) -> Any:
    """The parameters training updates and acts with: the online ones (``carry.params`` unless ``ema`` > 0)."""
    return carry.params if carry.online is None else carry.online


def ema_decay(updates: jax.Array, decay: float) -> jax.Array:
    """f32[] the decay of the moving average at update ``updates`` (1, 2, ...): ``min(decay, (1 + t) / (10 + t))``."""
    t = jnp.asarray(updates, jnp.float32)
    return jnp.minimum(jnp.float32(decay), (1.0 + t) / (10.0 + t))


def ema_step(average: Any, online: Any, updates: jax.Array, decay: float) -> Any:
    """The moving average after update ``updates``: ``d * average + (1 - d) * online``, d = :func:`ema_decay`."""
    d = ema_decay(updates, decay)
    return jax.tree.map(lambda a, o: d * a + (1.0 - d) * o, average, online)


def learning_rate(cfg: SwitchConfig) -> float | optax.Schedule:
    """``cfg.lr``, or (``lr_final`` < 1) a cosine decay from it to ``lr * lr_final`` over the training's updates
    (``episodes * episode_steps / stride * updates_per_sample``; the first rounds, before the replay holds a batch,
    make none, so the last update runs a little above the final rate)."""
    if cfg.lr_final == 1.0:
        return cfg.lr
    updates = cfg.episodes * (cfg.episode_steps // cfg.stride) * cfg.updates_per_sample
    return optax.cosine_decay_schedule(cfg.lr, updates, alpha=cfg.lr_final)


def make_train(scn: Scenario, cfg: SwitchConfig) -> tuple[SwitchNetwork, Callable, Callable]:
    """Build the agent and its pure training functions ``init(key) -> Carry`` and ``run(carry, episodes) -> (carry,
    metrics)`` (metrics f32[episodes]: ``success`` of the agent's own dispatches, ``loss``, ``gain`` mean of the
    best rule's rollout advantage over the base, ``switch`` share of own dispatches that left the base rule,
    ``load``). ``run`` is pure: jit it with ``static_argnums=1``."""
    params_env: EdgeParams = scn.params
    env = EdgeEnv(training_trace_config(scn, cfg), scn.ring)
    obs_size = num_features(params_env)
    layout = Layout.of(params_env)
    rules = rule_indices(cfg)
    base_pos = cfg.rules.index(cfg.base)
    model = SwitchNetwork(layout, rules, HINT_POLICIES.index(cfg.base), cfg.hidden, rngs=nnx.Rngs(cfg.seed),
                          spread_head=cfg.spread_head)
    graphdef, init_params = nnx.split(model)
    optimizer = make_optimizer(learning_rate(cfg), cfg.max_grad_norm)
    fresh = fresh_environments(env, scn, cfg)
    e, r_count = cfg.num_envs, len(cfg.rules)
    not_base = jnp.arange(r_count) != base_pos

    def heads_of(params, obs):
        return nnx.merge(graphdef, params).heads(obs)

    def init(key: jax.Array) -> Carry:
        state, timestep, load = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), jax.eval_shape(fresh, key))
        c = cfg.buffer_size
        samples = Samples(obs=jnp.zeros((c, obs_size), jnp.float32), target=jnp.zeros((c, r_count), jnp.float32),
                          spread=jnp.zeros((c, r_count), jnp.float32),
                          valid=jnp.zeros((c,), bool), pos=jnp.int32(0), size=jnp.int32(0))
        ema_on = cfg.ema > 0.0
        return Carry(params=jax.tree.map(jnp.copy, init_params),
                     online=jax.tree.map(jnp.copy, init_params) if ema_on else None,
                     updates=jnp.int32(0) if ema_on else None, opt_state=optimizer.init(init_params),
                     samples=samples, env=state, timestep=timestep, load=load, key=key)

    def loss_fn(params, batch):
        adv, spread = heads_of(params, batch["obs"])
        err = (adv - batch["target"]) ** 2  # [B, R]
        if cfg.spread_head:  # the spread over the rollouts, or (one rollout) the first head's absolute error
            want = (batch["spread"] if cfg.rollouts > 1
                    else jnp.abs(jax.lax.stop_gradient(adv) - batch["target"]))
            err = err + (spread - want) ** 2
        w = (batch["valid"][:, None] & not_base[None, :]).astype(jnp.float32)
        return jnp.sum(err * w) / jnp.maximum(jnp.sum(w), 1.0)

    def update(carry: Carry, key: jax.Array) -> tuple[Carry, jax.Array]:
        smp = carry.samples
        idx = jax.random.randint(key, (cfg.batch_size,), 0, jnp.maximum(smp.size, 1))
        batch = {"obs": smp.obs[idx], "target": smp.target[idx], "spread": smp.spread[idx], "valid": smp.valid[idx]}
        online = trained_params(carry)
        loss, grads = jax.value_and_grad(loss_fn)(online, batch)
        upd, opt_state = optimizer.update(grads, carry.opt_state, online)
        online = optax.apply_updates(online, upd)
        if cfg.ema == 0.0:
            return carry.replace(params=online, opt_state=opt_state), loss
        updates = carry.updates + 1
        return carry.replace(params=ema_step(carry.params, online, updates, cfg.ema), online=online,
                             updates=updates, opt_state=opt_state), loss

    def own_step(inner, _):
        carry, state, timestep = inner
        key, k_eps, k_rule = jax.random.split(carry.key, 3)
        obs = timestep.observation.features
        net = nnx.merge(graphdef, trained_params(carry))
        chosen = greedy_rule(net.score(obs, cfg.spread_weight), base_pos, jnp.asarray(cfg.margins(), jnp.float32))
        explore = jax.random.uniform(k_eps, (e,)) < cfg.explore
        chosen = jnp.where(explore, jax.random.randint(k_rule, (e,), 0, r_count), chosen)
        action = jnp.take_along_axis(net.rule_actions(obs), chosen[:, None], axis=1)[:, 0]
        valid = state.index < state.trace.num_valid
        state, nxt = env.batch_step(state, action)
        left = (action != net.rule_actions(obs)[:, base_pos]) & valid
        return (carry.replace(key=key), state, nxt), (jnp.sum(nxt.reward * valid), jnp.sum(valid), jnp.sum(left))

    def sample_round(inner, _):
        (carry, state, timestep), (succ, count, left) = jax.lax.scan(own_step, inner, None, length=cfg.stride)
        key = carry.key
        if cfg.rollouts > 1:  # (one rollout draws nothing: the stream of the session-21 recipe is unchanged)
            key, k_fut = jax.random.split(key)
            values = jax.vmap(lambda p, tr, sim, i, k: branch_returns(
                p, tr, sim, i, cfg.rules, cfg.base, cfg.horizon, cfg.discount, cfg.rollouts, k))(
                state.params, state.trace, state.sim, state.index, jax.random.split(k_fut, e))  # [E, N, R]
        else:
            values = jax.vmap(lambda p, tr, sim, i: branch_returns(
                p, tr, sim, i, cfg.rules, cfg.base, cfg.horizon, cfg.discount))(
                state.params, state.trace, state.sim, state.index)  # [E, 1, R]
        advantage = values - values[:, :, base_pos:base_pos + 1]
        target = jnp.mean(advantage, axis=1)
        valid = state.index < state.trace.num_valid
        smp = carry.samples
        idx = (smp.pos + jnp.arange(e)) % cfg.buffer_size
        if cfg.spread_head:
            smp = smp.replace(spread=smp.spread.at[idx].set(jnp.std(advantage, axis=1, ddof=min(1, cfg.rollouts - 1))))
        smp = smp.replace(obs=smp.obs.at[idx].set(timestep.observation.features), target=smp.target.at[idx].set(target),
                          valid=smp.valid.at[idx].set(valid), pos=(smp.pos + e) % cfg.buffer_size,
                          size=jnp.minimum(smp.size + e, cfg.buffer_size))
        key, k_upd = jax.random.split(key)
        carry = carry.replace(samples=smp, key=key)

        def do_updates(c):
            c, losses = jax.lax.scan(update, c, jax.random.split(k_upd, cfg.updates_per_sample))
            return c, jnp.mean(losses)

        ready = carry.samples.size >= cfg.batch_size
        carry, loss = jax.lax.cond(ready, do_updates, lambda c: (c, jnp.float32(jnp.nan)), carry)
        gain = jnp.sum(jnp.max(target, axis=1) * valid) / jnp.maximum(jnp.sum(valid), 1)
        return (carry, state, timestep), (jnp.sum(succ), jnp.sum(count), jnp.sum(left), loss, gain)

    def episode(carry: Carry, _):
        key, k_env = jax.random.split(carry.key)
        renew = carry.env.trace.num_valid - carry.env.index < cfg.episode_steps + cfg.horizon
        new_state, new_timestep, new_load = fresh(k_env)

        def pick(new, old):
            return jnp.where(renew.reshape((e,) + (1,) * (new.ndim - 1)), new, old)

        state = jax.tree.map(pick, new_state, carry.env)
        timestep = jax.tree.map(pick, new_timestep, carry.timestep)
        load = jnp.where(renew, new_load, carry.load)
        (carry, state, timestep), (succ, count, left, loss, gain) = jax.lax.scan(
            sample_round, (carry.replace(key=key), state, timestep), None, length=cfg.episode_steps // cfg.stride)
        carry = carry.replace(env=state, timestep=timestep, load=load)
        n = jnp.maximum(jnp.sum(count), 1)
        return carry, {"success": jnp.sum(succ) / n, "switch": jnp.sum(left) / n, "loss": jnp.nanmean(loss),
                       "gain": jnp.mean(gain), "load": jnp.mean(load)}

    def run(carry: Carry, num_episodes: int) -> tuple[Carry, dict]:
        return jax.lax.scan(episode, carry, None, length=num_episodes)

    return model, init, run


# ------------------------------------------------------------------------------ agent as a policy
def switch_policy(graphdef: nnx.GraphDef, params: Any, margin: float | tuple[float, ...] = 0.0,
                  spread_weight: float = 0.0) -> Policy:
    """The greedy switching policy of trained parameters: the action of the rule whose predicted advantage over the
    base (less ``spread_weight`` times its predicted spread, :meth:`SwitchNetwork.score`) exceeds its margin the
    most (the base's when none does); ``margin`` one for every rule or one per rule (in the order of the agent's
    rules, e.g. :meth:`SwitchConfig.margins`)."""
    net = nnx.merge(graphdef, params)
    if spread_weight and net.spread_out is None:
        raise ValueError(f"a spread weight ({spread_weight:g}) needs an agent trained with switch.spread_head=true")
    vec = jnp.broadcast_to(jnp.asarray(margin, jnp.float32), (len(net.rules),))
    return _bundle_policy(graphdef, {"net": params, "margin": vec, "spread_weight": jnp.float32(spread_weight)})


def agent_switch_policy(agent: SwitchAgent, margin: str | float | None = None) -> Policy:
    """The agent's greedy policy with a decision-margin spec (None: its own settings): ``M``, ``M,rule=m,...``, and
    ``spread=k`` among the items for the spread weight (e.g. ``"0.5,spread=1"``; not named: the agent's own)."""
    if margin is None:
        return agent.policy
    head, over = parse_margin(margin)
    weight = over.pop("spread", agent.config.spread_weight)
    return switch_policy(agent.graphdef, agent.params, rule_margin_vector(agent.config.rules, head, over), weight)


def _bundle_policy(graphdef: nnx.GraphDef, bundle: dict) -> Policy:
    """:func:`switch_policy` of ``{"net": parameters, "margin": f32[R], "spread_weight": f32[]}`` (margins and
    weight are traced: agents of one network share one compiled evaluation whatever their margins)."""

    def policy(env_params: EdgeParams, sim: SimState, query: Trace) -> jax.Array:
        net = nnx.merge(graphdef, bundle["net"])
        x = features(env_params, sim, query)
        chosen = greedy_rule(net.score(x, bundle["spread_weight"]), net.rules.index(net.base), bundle["margin"])
        return jnp.take(net.rule_actions(x), chosen)

    policy.needs_history = True
    policy.graphdef, policy.params = graphdef, bundle
    policy.build, policy.build_key = _bundle_policy, "switch"
    return policy


@dataclass
class SwitchAgent:
    graphdef: nnx.GraphDef
    params: Any
    config: SwitchConfig
    scenario_doc: dict
    history: list[dict] = field(default_factory=list)
    train_time_s: float = 0.0
    trained_from: int = 0

    @property
    def policy(self) -> Policy:
        return switch_policy(self.graphdef, self.params, self.config.margins(), self.config.spread_weight)


def _network_doc(scn: Scenario, cfg: SwitchConfig) -> dict:
    return {"format": FORMAT, "switch": cfg.to_dict(), "obs_size": num_features(scn.params),
            "layout": asdict(Layout.of(scn.params)), "scenario": scn.doc}


def train_switch(scn: Scenario, cfg: SwitchConfig, run_dir: str | Path | None = None, chunk: int = 5,
                 log: Callable[[str], None] | None = None, overwrite: bool = False,
                 resolved_config: str | None = None, keep_every: int = 0) -> SwitchAgent:
    """Train on a scenario (and ``cfg.mixture``); with ``run_dir``, write network.json, metrics.jsonl, orbax
    checkpoints (one per ``chunk`` episodes, the whole training state) and summary.json. A folder with checkpoints of
    the same settings (but ``episodes``) is resumed; other settings are refused unless ``overwrite``. ``keep_every``
    > 0: also keep the parameters every that many episodes (:func:`~.agent_runs.train_episodes`, :func:`kept_agent`)."""
    run = train_episodes(
        make_train(scn, cfg), cfg.episodes, cfg.episode_steps * cfg.num_envs, cfg.seed, run_dir, chunk=chunk,
        network=_network_doc(scn, cfg), ignore=("switch.episodes",), state_key="samples", log=log,
        overwrite=overwrite, resolved_config=resolved_config, keep_every=keep_every,
    )
    agent = SwitchAgent(run.graphdef, run.params, cfg, scn.doc, run.history, run.train_time_s, run.resumed_at)
    if run_dir is not None and run.resumed_at != cfg.episodes:
        write_json_atomic({"scenario": scn.name, "episodes": cfg.episodes,
                           "own_dispatches": cfg.episodes * cfg.episode_steps * cfg.num_envs,
                           "branch_dispatches": cfg.episodes * (cfg.episode_steps // cfg.stride) * cfg.num_envs
                           * len(cfg.rules) * (cfg.horizon + 1) * cfg.rollouts,
                           "train_time_s": agent.train_time_s, "resumed_from_episode": run.resumed_at,
                           "final_success": run.history[-1]["success"]}, Path(run_dir) / SUMMARY_FILE)
    return agent


def keep_parameters_only(run_dir: str | Path) -> None:
    """Shrink a finished run folder to the last checkpoint's parameters (what :func:`load_switch_agent` needs)."""
    agent, _ = load_switch_agent(run_dir)
    agent_runs.keep_parameters_only(run_dir, agent.params)


def load_switch_agent(path: str | Path, step: int | None = None) -> tuple[SwitchAgent, Scenario]:
    """Rebuild a switching agent (and its scenario) from a run folder written by :func:`train_switch`."""
    run_dir = Path(path)
    if not (run_dir / NETWORK_FILE).is_file():
        raise FileNotFoundError(f"{run_dir}: not an edge agent run folder (no {NETWORK_FILE})")
    doc = json.loads((run_dir / NETWORK_FILE).read_text())
    if doc.get("format") != FORMAT:
        raise ValueError(f"{run_dir}/{NETWORK_FILE}: format {doc.get('format')!r} is not {FORMAT}")
    cfg = SwitchConfig.from_dict(doc["switch"])
    scn = scenario_from_dict(doc["scenario"])
    model = SwitchNetwork(Layout(**doc["layout"]), rule_indices(cfg), HINT_POLICIES.index(cfg.base), cfg.hidden,
                          rngs=nnx.Rngs(0), spread_head=cfg.spread_head)
    graphdef, params = nnx.split(model)
    ckpt = Checkpointer(run_dir, max_to_keep=None)
    try:
        params, _ = ckpt.restore(params, None, step)
    finally:
        ckpt.close()
    history = run_folder.read_metrics(run_dir / METRICS_FILE)
    summary = json.loads((run_dir / SUMMARY_FILE).read_text()) if (run_dir / SUMMARY_FILE).is_file() else {}
    return SwitchAgent(graphdef, params, cfg, doc["scenario"], history,
                       float(summary.get("train_time_s", 0.0))), scn


def kept_agent(run_dir: str | Path, episode: int) -> SwitchAgent:
    """The switching agent of ``run_dir`` with the parameters kept after ``episode`` (training's ``keep_every``)."""
    agent, _ = load_switch_agent(run_dir)
    return replace(agent, params=agent_runs.kept_params(run_dir, agent.params, episode))


def load_edge_agent(path: str | Path, step: int | None = None):
    """Either kind of ASET agent from its run folder (by network.json's format): ``(agent, scenario)``."""
    run_dir = Path(path)
    doc = json.loads((run_dir / NETWORK_FILE).read_text()) if (run_dir / NETWORK_FILE).is_file() else {}
    if doc.get("format") == FORMAT:
        return load_switch_agent(run_dir, step)
    from respect_jax.edge_cluster.dqn import load_agent

    return load_agent(run_dir, step)
