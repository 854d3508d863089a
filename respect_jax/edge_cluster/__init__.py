"""ASET: reinforcement-learning dispatch of DNN inference queries across distributed edge clusters.

After Castellano et al., arXiv 2301.13618. The paper text is not available here, so
this package builds the system its abstract describes; **every modelling choice below is ours**.

File map (the roles of :mod:`respect_jax.env`'s files first; a sibling of the graph scheduler)::

    environment.py  EdgeEnv: reset(key, params)/step(state, action), specs, batch_*; Jumanji-style
    types.py        EdgeParams, Trace, Dynamics, SimState, Outcome, Observation, State, TimeStep (pytrees);
                    Policy and the dispatcher's small helpers (action_mask, backlog_estimate, first_argmin)
    generator.py    seeded workload traces (Poisson / MMPP / diurnal, dynamics), pure JAX
    reference.py    plain-Python discrete-event reference (heapq), same outcomes as the JAX simulator
    scenarios.py    YAML/dict -> Scenario (validated, one-line errors), model variants from data/models
    simulator.py    the pure-JAX event simulator (lax.scan, one step per query), observation features
    policies.py     static baselines (closest, fastest_expected, most_accurate, least_loaded, random)
    dqn.py          the ASET agent: double DQN, replay buffer, target network, orbax checkpoints
    switching.py    the policy-switching ASET agent: per query, which static rule dispatches it;
                    learned from simulator rollouts (one branch per rule, common random numbers)
    agent_runs.py   the run folders of both agents: episodes through the shared host loop, whole-state
                    checkpoints and their restore, summary.json, parameters-only folders for shipping
    evaluation.py   shared-trace comparisons, Markdown table + PNG plot

Entry point: ``respect-edge train|eval`` (:mod:`respect_jax.cli.edge`, ``conf/edge.yaml``,
presets in ``conf/edge_scenario/``). Figures: ``experiments/edge_success.py`` and
``experiments/edge_speed.py`` -> ``experiments/results/edge/``.

Modelling choices
=================

Network and sites
-----------------
* **Tiers.** Sites are far edge, near edge or cloud. Sources (cell sites, access points) and sites
  belong to metro *regions*; a site is local to its region(s), or to every source (``region: null``).
* **Network delay.** Each (source, site) pair has a nominal round trip ``rtt`` (``local_ms`` or
  ``remote_ms`` of the site's tier, times a fixed per-source factor ``1 +- source_spread/2``) and a
  jitter scale ``jitter * rtt``. A query's round trip is ``rtt + jitter_scale * e`` with one
  Exp(1) draw ``e`` per query shared by all paths (congestion at the source's access link); half of
  it (rounded down) is spent before processing, the rest after. Payload size is not modelled
  separately: it is part of the round trip.
* **Processing.** Each site has ``workers`` identical workers with an effective speed
  ``gmacs_per_ms`` and a per-inference ``overhead_ms``. The nominal time of variant ``v`` is
  ``overhead + GMACs(v) / speed``; each query multiplies it by ``1 + cv*(Exp(1) - 1)`` (clipped to
  [0.1, 10]). One query uses one worker; no batching, no pre-emption, no model loading time
  (every variant is resident at every site).
* **Queueing.** One FIFO per site in *dispatch order*: a query cannot start before the query
  dispatched to the same site just before it has left the queue, before it has arrived, or before
  a worker is free; it takes the worker that frees first (lowest index on ties). This is the
  multi-server FCFS (Kiefer-Wolfowitz) recursion extended with network delay. It is not
  work-conserving when jitter reorders queries in flight (a later-dispatched query that arrives
  first waits behind an earlier one still travelling), the price of resolving every query in
  one scan step; the reference simulator reproduces it event by event.
* **Drops.** A queued query leaves unserved when it has waited ``max_wait_ms`` at the site
  (DROPPED: the site's admission/queue limit) or when its deadline passes (EXPIRED), whichever
  is first; it uses no worker time.

Applications, variants, success
-------------------------------
* **Applications** (AR/VR, cognitive assistance, video analytics in the ``isp`` preset) have an
  end-to-end deadline (dispatch at the source to answer back at the source) and a minimum
  accuracy, and a family of allowed model variants.
* **Variants** are the Keras models of ``data/models/`` (MobileNet, MobileNetV2, NASNetMobile,
  ResNet50/101/152, DenseNet121/169/201, InceptionV3, Xception, ...): compute = the sum of the
  layers' MACs in the graph JSON, accuracy = the published ImageNet top-1 of keras.applications
  (:data:`~respect_jax.edge_cluster.scenarios.TOP1_ACCURACY`, cited there).
* **Success** iff the answer is back by the deadline *and* the variant's accuracy reaches the
  app's minimum. Failures are LOW_ACCURACY, LATE (served after the deadline), EXPIRED, DROPPED;
  every arrived query gets exactly one outcome (the simulation drains after the horizon), and at
  any time ``arrived = resolved (per outcome) + in flight`` (tested). Success ratio = successes /
  arrived queries.

Workload
--------
* Arrivals per (source, app) with rate ``rate`` (queries/s at load 1.0) times the load level
  (``low/medium/high/overload`` = x0.5/1/1.5/2.5 by default), as a Poisson process, a two-state
  MMPP per source (calm/burst, exponential sojourns, mean rate preserved), or a diurnal sine
  (a compressed "day" of ``period_s`` seconds; per-source phases spread by ``phase_spread``).
  Generated by thinning in JAX; **every random number of both simulators is pre-drawn in the
  trace** (arrival times, source, app, jitter draw, processing noise, the random policy's draw),
  so the JAX and Python simulators consume identical randomness.
* Times are **integer microseconds** (int32, horizon <= 1000 s) in both simulators: outcomes
  are bit-identical, not just close.
* **Conditions that change within a trace** (issue 30; a scenario's optional ``dynamics`` block,
  :class:`~respect_jax.edge_cluster.types.Dynamics`): per-app rate profiles (diurnal ramps, piecewise linear
  over the horizon) and bursts (random windows of ``burst_factor`` x the rate), per-site network-delay profiles and
  random spikes (a factor on the RTT and jitter scale of every path to the site), per-site processing slow-downs
  (degradation; a large factor is a failure: queries wait out their limit). Each trace starts its profiles at a
  random phase (``shift``) and draws its own bursts and spikes. The generator writes the network and processing
  factors in force at each query's dispatch into the trace (``net_pct``, ``slow_pct`` per site), which both
  simulators apply to that query (its round trip, its processing time); a query keeps the factors of its dispatch
  time. No static rule is told about them (their estimates stay nominal); the agent sees what has been measured.
  Presets: ``isp_diurnal``, ``isp_netdrift``, ``isp_failure``, ``isp_nearsat`` (the isp topology),
  ``small_ramp`` (the learning test).

Dispatcher, observation, policies
---------------------------------
* **Decision** per query at its arrival: a flat action ``site * V + variant`` over every site and
  the app's variant family (variants below the app's accuracy are allowed, and fail).
* **What a dispatcher knows** at time ``t`` (no future information): the scenario's nominal
  numbers; a *virtual clock* per site of the nominal work it has sent (advanced by
  ``ceil(proc/workers)`` per query: the estimated backlog is ``max(0, vclock - t)``; saturates at
  100 s); the number of its last L queries per site still pending (queue length); recent arrival
  rates per app (its last L arrivals); success ratios per app of the last L queries whose answers
  are already back.
* **Static policies** (:mod:`~respect_jax.edge_cluster.policies`): closest site; fastest
  expected response (RTT + estimated backlog + processing; the load-aware greedy rule); most
  accurate variant whose nominal response meets the deadline; least loaded site (smallest
  estimated backlog); uniform random. Site-only rules use the cheapest accurate-enough variant.
* **ASET agent** (:mod:`~respect_jax.edge_cluster.dqn`): double DQN on the continuous
  observation of :func:`~respect_jax.edge_cluster.simulator.features` (app/source one-hots, per-site
  backlog, queue length, pending work and RTT, per-action estimated slack, per-variant
  feasibility, which action each deterministic static rule would pick, per-app arrival rate and
  success ratio; and, measured from answers already back at the source: per-site recent queueing delay,
  round trip and processing time relative to the nominal ones, age of the newest measurement, a per-action
  slack re-estimated with them, per-app recent deadline slack), n-step returns (``n_step``), hard or soft
  (``tau``) target updates, training over a mixture of presets (``mixture``: each environment draws a preset and
  a load level with every new trace), a factored Q-network (a global MLP embedding
  plus one small scorer shared by every (site, variant) action, fed with that action's own
  features), a replay buffer and a hard-updated target network; reward 1 per successful query
  (so the return measures the success ratio, ASET's objective), discount 0.9 per dispatch;
  trained on traces whose load level is drawn per environment and episode so one agent adapts
  to every load. Exploration (epsilon-greedy) takes uniform actions or, with probability
  ``explore_rules``, the action of a random static rule, so the replay buffer also covers
  sustained load under sensible dispatching. The reward is credited to
  the dispatch that caused it even though the source learns it later: the simulator resolves a
  query's fate at dispatch (offline training on simulated outcomes); the agent's observation is
  causal. No policy-gradient agent; the DQN supplies its scanned episodes to the shared training harness
  (:mod:`respect_jax.train.harness`: run folder, resume-or-refuse, metrics, checkpoints).

* **Policy-switching agent** (:mod:`~respect_jax.edge_cluster.switching`, issue 30): the action is which
  deterministic static rule dispatches the query; the network predicts each rule's advantage over a base rule
  (``fastest_expected``) and the agent follows the base unless a predicted advantage exceeds ``margin`` (an
  untrained agent *is* the base rule). Targets come from forking the simulator at states the agent visits: one
  branch per rule (that rule for the query, the base rule for the next ``horizon`` queries of the same trace), the
  advantage being the difference of the branches' successes (common random numbers). One step of approximate
  policy iteration over the base rule (Bertsekas' rollout with a learned Q). Options: discounted branch values
  (``discount``), several futures per state re-drawn from the trace itself (``rollouts``), and a head that
  predicts the advantage's spread over them (``spread_head``; ``spread_weight`` scales the margin by it).

Reference simulator
-------------------
:mod:`~respect_jax.edge_cluster.reference` is an independent discrete-event implementation
(heap of DISPATCH/ARRIVE/FINISH/REMOVE/RESPOND events, per-site deques, per-worker free times) of
the same rules, with explicit tie-breaking at equal times; it runs the static policies itself or
replays given actions. Tests assert identical per-query outcomes (code, site, variant, start,
done, resolve) on shared traces for every static policy and for random replayed actions, on both
presets (Poisson and MMPP traces; the arrival pattern only changes the trace, not the dynamics),
with ties, queue-limit drops and a batch of different scenarios under one vmap.
"""

from respect_jax.edge_cluster.environment import EdgeEnv, episode_success
from respect_jax.edge_cluster.generator import generate_trace, make_traces
from respect_jax.edge_cluster.scenarios import Scenario, TraceConfig, load_preset, scenario_from_dict
from respect_jax.edge_cluster.simulator import dispatch, features, init_sim, replay, simulate
from respect_jax.edge_cluster.types import (
    DROPPED,
    EXPIRED,
    LATE,
    LOW_ACCURACY,
    OUTCOMES,
    SUCCESS,
    EdgeParams,
    Observation,
    Outcome,
    SimState,
    State,
    TimeStep,
    Trace,
)

__all__ = [
    "EdgeEnv", "episode_success", "Scenario", "TraceConfig", "load_preset", "scenario_from_dict", "dispatch",
    "features", "init_sim", "replay", "simulate", "generate_trace", "make_traces", "SUCCESS", "LOW_ACCURACY",
    "LATE", "EXPIRED", "DROPPED", "OUTCOMES", "EdgeParams", "Observation", "Outcome", "SimState", "State",
    "TimeStep", "Trace",
]
