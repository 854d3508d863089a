"""``solver=auto``: the best schedule a time budget buys, with a certified gap.

A portfolio in one process within ``time_budget_s`` (wall clock from the call):

1. **The exact best contiguous split** (``contiguous``, NumPy, milliseconds on real models): the first
   incumbent. Every member's schedule is scored in float64 NumPy (:mod:`respect_jax.solvers.numpy_eval`), so the
   first incumbent waits for no JAX compilation (``info['first_incumbent_s']``: seconds from the call to it).
1b. **The downset programme** (``lattice_downsets``): a graph with a unique topological order (many CNNs: every
   valid schedule is then a contiguous split, so the exact contiguous split is the optimum) is proven optimal here;
   otherwise :func:`respect_jax.solvers.lattice.search_lattice` (an exact dynamic programme over the downsets that
   can be a stage boundary of a schedule better than a probed limit, enumerated module by module; at most
   ``lattice_downsets`` of them kept, at most :data:`LATTICE_SHARE` of the budget) either proves the optimum, and
   nothing else runs, or leaves a certified lower bound (a limit no schedule meets) and, where its heuristic
   programme (the downsets of least crossing) beat the incumbent, a schedule (``portfolio['lattice_heuristic']``).
1c. **The learned member** (``policy``, by default the shipped order policy: its own sampled orders, exactly split,
   polished and re-cut at its stage boundaries; ``order_policy`` is accepted as a member name too), when its forward
   pass for the graph's bucket is compiled in this process or stored in the executable cache (:func:`learned_ready`;
   otherwise it runs in turn as in 3.), starts in a thread of its own :data:`EARLY_AFTER_S` into the downset
   programme unless that has proven the optimum by then (or at once where there is no programme to run; never on a
   unique-order graph), so its decoding runs beside the programme, the exact solver and the bound. Its schedule is
   offered when it is done (the exact solver's hint when done by the time that starts); it looks at a stop (the
   deadline less :data:`STOP_LEAD_S`, a proof) between its steps and then returns its schedule so far (``stopped`` in
   its entry names the first step skipped); a compiled call in progress is not interrupted (abandoned at the
   deadline as below).
2. **The exact solver** (``exact``: ``cpsat``, ``milp`` or ``auto``: CP-SAT, whose incumbents stream to the live
   line) starts in a thread with the incumbent as its complete hint / warm start and runs until the deadline
   or a proof of optimality; it runs alone for ``head_start_s`` first.
3. **Meanwhile, the other fast members** run in the main thread, cheapest first (local search on the
   contiguous split, then ``gumbel`` (and ``policy`` where it did not start early), which polish with their own
   ``local_search`` option, so a learned member's figure is its own decoding
   (plus local search), never seeded by another solver). A member is
   not started once ``fast_share`` of the budget is spent, once the exact solver has proved the optimum, or
   when the graph is larger than its ``max_nodes`` (``member_options.<name>.max_nodes``). ``gumbel`` runs in
   chunks of :data:`GUMBEL_CHUNK_STEPS` steps that look at the stop signal between compiled calls, and starts only
   when its estimated cost (:func:`gumbel_need_s`: compilation unless done in this process, one chunk and its
   local search) fits in the time left; the learned members
   are skipped when they are not registered (:func:`respect_jax.api.register_solvers` registers them; the CLI
   and the API do it). Running them beside the exact solver, not before it, keeps a cold JAX
   compilation from eating the exact solver's budget; the price is that the exact solver's hint is the
   contiguous split, not the members' schedules (which still win when they are better).
1a. **Live-byte orders** (``orders``: sink weights by objective, by default three under ``latency`` and none under
   ``paper``; graphs of at least ``orders_min_nodes`` nodes): the exact contiguous splits of the list orders of
   :func:`respect_jax.solvers.orders.live_order` (few live bytes at each prefix: on random layered graphs the SPEC
   order's prefixes keep many tensors live, and their transfers dominate its split's stage times), host Python,
   0.05-0.3 s each at 10,000 nodes (``portfolio['orders']``); with them the MACs-first order's split (``macs_order``)
   and the hull order's (``hull_order``: the downsets on the lower convex hull of (MACs, bytes crossing) first,
   ``hull_max_cuts`` parametric minimum cuts, until :data:`ORDERS_SHARE` of the budget); the best of them starts the
   contiguous line (3b.) when it beats the SPEC split.
3b. **The rebalancing of the contiguous line** (``rebalance``: cycles by objective, by default 8 under ``latency``
   and none under ``paper``; graphs of at least ``rebalance_min_nodes`` nodes): before the contiguous split's
   local search, the stage-boundary re-cuts and the rebalancing steps of :mod:`respect_jax.solvers.rebalance`
   (leximax re-cuts, the exact re-split of stage-major orders: host NumPy, while the local search compiles in a
   thread started with the early members), then the local search, then cycles of re-cuts, re-splits and polish
   (:func:`rebalance_until`: the order policy's decoding steps applied to the contiguous split), until
   :data:`REBALANCE_SHARE` of the budget; each better schedule is offered as it comes
   (``portfolio['contiguous+rebalance']``). The crossing bound then starts after this line, not beside it (both
   are host Python work and share the interpreter).
4. **Bound**: after the head start, the crossing bound of :mod:`respect_jax.solvers.bounds` (one downset per
   stage boundary: parametric minimum cuts first, then small CP-SAT problems where they pay) searches in a thread
   of its own until it settles, the deadline, or the exact solver's proof (``crossing_bound: false`` skips it).
   At K >= ``bound_refine_min_stages`` on graphs that cannot spill, once no fast member runs or can start, its
   chains then run again on finer buckets (``bound_paper_refine_max`` / ``bound_latency_refine_max``).
   The bound reported is the best of it, the analytic bounds and the exact solver's proven bound; certified gap
   ``(objective - bound) / objective``.

Every member's own result (objective, time, or why it did not run) is in ``info['portfolio']``; the
winner's name in ``info['winner']``. The returned schedule is the best of all members (never worse than any
of them). ``optimal`` is True when the exact solver proved the winner optimal or the bound meets it.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import sys
import threading
import time

import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph, has_unique_order
from respect_jax.local_search import BOUNDARY_ROUNDS, compile_polish, polish, refine_boundaries
from respect_jax.solvers.base import (
    OPTIMAL_RTOL,
    SolveResult,
    available_solvers,
    check_solver_options,
    get_solver,
    register_solver,
)
from respect_jax.solvers.boundary_cuts import RECUT_STEPS, interval_sweep, jump_move
from respect_jax.solvers.bounds import analytic_lower_bound, crossing_lower_bound, no_spill
from respect_jax.solvers.host_polish import host_polish
from respect_jax.solvers.lattice import MAX_DOWNSETS, search_lattice
from respect_jax.solvers.numpy_eval import objective_np
from respect_jax.solvers.orders import (
    SINK_WEIGHTS,
    hull_downsets,
    live_order,
    live_splits,
    macs_first_split,
    split_of_order,
)
from respect_jax.solvers.orders import hull_order as hull_order_of
from respect_jax.solvers.rebalance import rebalance_many, rebalance_step
from respect_jax.solvers.stopping import Stopped, StopSignal

#: Fast members accepted (``order_policy``: the order policy alone; ``policy`` runs it by default too).
FAST_MEMBERS = ("contiguous", "order_policy", "policy", "gumbel")
#: Fast members run by default (``policy`` dispatches to the shipped order policy).
DEFAULT_MEMBERS = ("contiguous", "policy", "gumbel")
EXACT = ("cpsat", "milp")
#: A member's default ``max_nodes`` (larger graphs skip it): the Gumbel solver took 18 s and 1.0 GB at 1,000 nodes
#: and was killed at 600 s and 10 GB at 5,000 before its sparse path (issue 27); not measured since.
MEMBER_MAX_NODES = {"gumbel": 3000}
#: Seconds past the deadline auto waits, in all, for its worker threads to return once it has set their stop
#: signal (CP-SAT's search stops at once, model builders and search loops at their next look at the signal); a
#: worker still running then (a JAX call, which cannot be interrupted) is abandoned and named in
#: ``info['running_after_return']``.
JOIN_GRACE_S = 0.5
#: Seconds before the deadline the exact solver's and the bound's own time limits end: a CP-SAT search took
#: 0.2-1 s to return after its stop (2-core CPU at load ~5), so they aim earlier and are back by the deadline.
STOP_LEAD_S = 0.3
#: ... and for the exact solver, at least this many seconds per node of the graph: at 5k-10k nodes CP-SAT came back
#: 0.5-2 s after its own limit under load (one instrumented 60 s run at 10k, load 8: 0.57 s; at load 13-15 and in
#: niced 600 s runs later than the lead and the grace together, so its result was dropped in 3 of 8 validation runs of
#: 60 s and in both 600 s references; ``experiments/results/auto_scale_val_s34_summary.md``, section 4). 10k: 1.5 s.
EXACT_LEAD_S_PER_NODE = 1.5e-4


def exact_lead_s(num_nodes: int, time_budget_s: float) -> float:
    """Seconds before auto's deadline the exact solver's own time limit ends: :data:`STOP_LEAD_S`, or
    :data:`EXACT_LEAD_S_PER_NODE` per node on large graphs, at most a tenth of the budget."""
    return min(max(STOP_LEAD_S, EXACT_LEAD_S_PER_NODE * int(num_nodes)), 0.1 * float(time_budget_s))


#: Local-search moves per call of the contiguous split's polish: the signal is checked between calls.
POLISH_CHUNK = 10
#: Larger graphs get the single-node moves in that polish, not the precedence-closed ones: a call of 25 closure
#: moves took 6.7-8.9 s on a 1,000-node layered graph once compiled (it scores 2 N full schedules per move),
#: 0.02 s with single-node moves (0.3-0.6 s and 0.01 s on densenet169's 595 nodes at load ~5; 10 closure moves
#: 1.1 s on a 500-node layered graph at load 9; 2-core CPU), so a stop signal would wait seconds between looks.
POLISH_CLOSURE_MAX_NODES = 300
#: Seconds the exact models take to build per (node + edge) x (K - 1) (``exact_build_s_per_unit``): the exact solver is
#: skipped when its estimated build would overrun the time left. Measured with the scalar ``cp_model`` build on a
#: 1,000-node layered graph, K = 4, on the 2-core CPU of experiments/bench_scale.py: 1.7 s for 11,553 units, with the
#: CPU shared. Since session 32 the model is written as protobuf text (:func:`respect_jax.solvers.cpsat._build_model`):
#: 0.3 s at 1k, 0.7 s at 5k, 1.6 s at 10k nodes at load ~9 (2-5e-5 per unit), so the value is now a gate rather than an
#: estimate: it keeps CP-SAT off 5k-10k-node graphs within 10 s (8.8 / 17 s "to build" against the ~4 s left). On
#: validation (own seeds 3201-3206, 5k / 10k nodes, K = 4, latency, 10 s, load 6-11) a gate of 3e-5, which lets CP-SAT
#: start there at 0.6 of the budget beside the line, never gave the winner in 32 runs and cost the line CPU: x1.019
#: with 2 workers (8 graphs), x1.017 started at 0.4, x0.999 with 1 worker, x1.04 with the line's restarts off
#: (``experiments/results/auto_scale_val_s32_summary.md``).
BUILD_S_PER_UNIT = 1.5e-4
#: Steps per call of the Gumbel member (its ``chunk_steps``; the member's restart period, so a chunk ends where
#: its logits restart anyway): the stop signal is looked at between calls.
GUMBEL_CHUNK_STEPS = 10
#: How much slower a member runs inside auto than alone: it shares the CPU with CP-SAT's two workers and the bound
#: (2-core CPU). The Gumbel member starts only when its estimate (:func:`respect_jax.solvers.gumbel.estimated_seconds`:
#: compilation, one chunk and its local search) times this fits in the time left.
CONTENTION = 2.0
#: Share of the budget the downset programme (:func:`respect_jax.solvers.lattice.search_lattice`) may take before
#: it gives up with its lower bound (when it proves the optimum nothing else runs after it). Its proofs on the
#: generated validation graphs took at most 2.2 s of 10 at load ~8; the rest goes to the exact solver and bounds.
LATTICE_SHARE = 0.3
#: The downset programme's search is skipped on graphs of more than this many nodes (``lattice_max_nodes``; a graph
#: with a unique topological order is still proven at once; None: never skipped). On 10,000-node layered graphs it
#: proved nothing and took 1.5-4.1 s (load 8-11), delaying the contiguous line (dense: past ``fast_share``, so the line
#: never ran); skipped there auto was better on 11 of 12 (own seeds 3100-3105, K = 4, latency, 10 s: dense x0.970,
#: sparse x0.985); at 5,000 nodes (0.7-1.2 s) no clear effect (x0.993 / x1.000), so kept there
#: (``experiments/results/auto_scale_val_s31_lattice*.md``). 6,000: between the two validated sizes.
LATTICE_MAX_NODES = 6000
#: Cycles of the rebalancing of the contiguous split's polished schedule (:func:`rebalance_until`) by objective
#: (``rebalance`` option): chosen on generated layered graphs of seeds of our own
#: (``experiments/results/auto_rebalance_s26.md``).
REBALANCE_CYCLES = {"latency": 8, "paper": 0}
#: Smaller graphs are not rebalanced (``rebalance_min_nodes``): up to :data:`POLISH_CLOSURE_MAX_NODES` nodes the
#: polish takes the precedence-closed moves, the exact solvers prove many such graphs, and the cold learned member
#: that runs after the contiguous line won on the generated validation NAS graphs (150 nodes) in session 25.
REBALANCE_MIN_NODES = 301
#: Sink weights of the live-byte orders (:func:`respect_jax.solvers.orders.best_live_split`) whose exact contiguous
#: splits auto tries after the SPEC order's, by objective (``orders`` option; graphs of at least ``orders_min_nodes``
#: nodes); the best of them and the SPEC split starts the contiguous line. Chosen on generated layered graphs of seeds
#: of our own (``experiments/results/auto_orders_val_s28.md``).
ORDER_SINK_WEIGHTS = {"latency": list(SINK_WEIGHTS), "paper": []}
#: Moves of the contiguous line's first polish by objective on graphs of more than :data:`POLISH_CLOSURE_MAX_NODES`
#: nodes (``line_moves``; objectives not named: ``polish_moves``), in calls of :data:`LINE_CHUNK` moves: at 5,000
#: nodes a single-node move took ~1.2 ms once compiled and a live-byte split kept improving past 1,000 moves
#: (``experiments/results/auto_orders_val_s28.md``).
LINE_MOVES = {"latency": 3000}
#: Single-node moves per polish call of the contiguous line when ``line_moves`` applies (the stop signal is looked
#: at between calls: ~0.1 s at 5,000 nodes, ~0.3 s at 10,000).
LINE_CHUNK = 100
#: Share of the budget after which no further live-byte order is started (each takes 0.05-0.34 s at 10,000 nodes).
ORDERS_SHARE = 0.2
#: Whether the exact split of the MACs-first order (:func:`respect_jax.solvers.orders.macs_first_order`) joins the
#: live-byte splits, by objective (``macs_order``; the best of them starts the contiguous line, the others restart it).
MACS_ORDER = {"latency": True, "paper": False}
#: Whether the exact split of the hull order (:func:`respect_jax.solvers.orders.hull_order` of the
#: :func:`~respect_jax.solvers.orders.hull_downsets` of the MACs under ``latency``, the parameters under ``paper``; ties
#: by the best live-byte order) joins the live-byte splits, by objective (``hull_order``): its prefixes include downsets
#: on the lower convex hull of (MACs, bytes crossing), the boundaries a stage time of compute plus incoming tensors
#: favours. Validation (session 33, with the host line at 10k and the faster host polish; own seeds 3304-3306, K = 4,
#: latency, 10 s, load 7-9, arms alternating): 1k x0.965, 5k x0.959, 10k x0.962 (14 of 18 graphs better, 2 worse by
#: <= 1 %; sparse graphs gain most: x0.94); at 60 s (seeds 3307-3308, 5k-10k) x0.981, 5 of 6 better, dense 10k 2 %
#: worse once (``experiments/results/auto_scale_val_s33_summary.md``). ``paper``: not validated, off.
HULL_ORDER = {"latency": True, "paper": False}
#: Parametric minimum cuts (one max flow each, 0.02-0.1 s at 5k-10k nodes under load) of the hull order
#: (``hull_max_cuts``; widest hull edge first: on own seeds' 1k-10k layered graphs 8 cuts gave the split of 16 to 128,
#: 4 slightly worse).
HULL_MAX_CUTS = 8
#: Smaller graphs get no hull order (``hull_min_nodes``): on the validation models (data/models_val and its generated
#: NAS / residual graphs, 33 graphs of 301-1,039 nodes, K = 4 and 8) its split never beat the other splits, and its cuts
#: (with OR-tools' max-flow import, 0.2-0.4 s cold under load) would only delay the exact solver there.
HULL_MIN_NODES = 1000
#: Whether the contiguous line runs the interval re-cuts (:func:`respect_jax.solvers.boundary_cuts.interval_sweep`: a
#: stage boundary re-chosen among all downsets between its neighbours by a bisection of parametric minimum cuts) and the
#: host polish alternately (:func:`cuts_until`) after its first polish and after each round of its host rebalancing, by
#: objective (``interval_cuts``; ``latency`` only: the re-cuts balance two stage times). On dense layered graphs the
#: line's contiguous splits and single-node moves left the stage boundaries where a split of one order put them
#: (session 34, own seed 3400, 10 s line schedules: dense 5k 0.021271 -> 0.020266, dense 10k 0.043044 -> 0.040448).
#: Validation (own seeds 3401-3405, K = 4, latency, 10 s, load 10-15, arms alternating; against session 33's code):
#: 5k-10k x0.970 (18 of 20 graphs better, dense 10k x0.954, dense 5k x0.964), 1k x0.944 (5 of 6; dense x0.907)
#: (``experiments/results/auto_scale_val_s34_summary.md``).
INTERVAL_CUTS = {"latency": True, "paper": False}
#: Smaller graphs get no interval re-cuts (``interval_cuts_min_nodes``; validated at 1,000-10,000 nodes only).
INTERVAL_CUTS_MIN_NODES = 1000
#: On graphs whose contiguous line runs on the host (``host_line_min_nodes``) up to this many nodes, once the line's
#: first interval re-cuts have converged (returned before the deadline), the exact solver starts at once without the
#: build gate (``exact_after_cuts_max_nodes``; None: never): its real build is 0.3-0.7 s at 5,000 nodes, the gate
#: (``exact_build_s_per_unit``) estimated 8.9 s and kept it off dense 5k graphs whose line had converged at 4-5 s of 10
#: (session 35: CP-SAT hinted with such a schedule, 4.5 s alone: -0.8 %). Off by default: at 6000, inside auto 10 s
#: (own seeds 3501-3506, 5k, K = 4, latency, load 7-9, arms alternating; 9 graphs) 4 better by 0.1-0.9 %, 3 equal,
#: 2 worse: dense 3502 by 5.1 % (CP-SAT took the CPU of the restarts, one of which had won), geometric mean x1.0035.
EXACT_AFTER_CUTS_MAX_NODES = None
#: Bisection steps (max flows) per interval re-cut in the restarts of the host line (``restart_cut_steps``; None:
#: ``interval_cut_steps``). The restarts are a lottery over basins: on dense 5k graphs (own seeds 3500 and 3502) the
#: line's pipeline (host rebalancing, polish, re-cuts to convergence) ended 7-11 % apart from one split to another, the
#: best rarely from the best split, and 4 steps instead of 12 ended within 0.3 % of the 12-step value in a third to a
#: fifth of the re-cuts' time. Inside auto 10 s it changed nothing measurable (session 35, own seeds 3507-3512, 5k and
#: 10k, load 4.5-5.7: 11 of 13 graphs identical, 2 worse by <= 0.2 %; the restarts' time is mostly their host
#: rebalancing and polish), so the default keeps the line's steps.
RESTART_CUT_STEPS = None
#: On graphs of at least this many nodes the line's interval re-cuts (:func:`cuts_until`) go on from the best jump move
#: (one node across two or more stages, :func:`respect_jax.solvers.boundary_cuts.jump_move`) when a sweep changes
#: nothing (``jump_moves_min_nodes``; None: never). CP-SAT's improvements of converged dense 1k / 5k line schedules
#: moved nodes from stage 3 to stage 1 past stage 2; from converged dense 5k schedules (own seeds 3500 / 3502) jump
#: rounds reached -0.35 % / -0.74 % in 1.4 / 2.9 s. Validation inside auto 10 s (session 35, own seeds 3513-3518, K = 4,
#: latency, load 6.6-8, arms alternating): dense 5k x0.9991 (3 better by 0.05-0.34 %, 3 identical), 10k dense 0.9996,
#: sparse 1.0000; at 1k x1.006 (dense 3514 3.2 % worse: the longer re-cuts delayed CP-SAT's start from 1.8 to 3.0 s),
#: hence the limit (the host line's graphs, where no CP-SAT waits for the re-cuts). Then off by default: on fresh seeds
#: 3540-3545 at 5k, quiet (load 1.2-1.8), the jumps at 3,000 against none gave sparse x1.0059 (two graphs 1.5 / 2.2 %
#: worse: the jumps' scoring took the time of a restart or a rebalancing round that won without them) and dense x1.0010
#: (3 better, 2 worse); ``experiments/results/auto_scale_val_s35_lead_jumps_5k.md``.
JUMP_MOVES_MIN_NODES = None
#: The line's interval re-cuts first converge with this many bisection steps (max flows) per re-cut, then go on with
#: ``interval_cut_steps`` (``coarse_cut_steps``; None: never): at dense 10k the re-cuts' max flows are ~70 % of a sweep
#: and the first re-cuts were still improving at the deadline of a 10 s budget (session 35). Off by default: at 4,
#: inside auto 10 s (session 36, own seeds 3600-3616, K = 4, latency, load 1-10, arms alternating; 34 graphs) x0.9989
#: (17 better, 13 worse, all within 0.5 %): dense x0.9981 (5k x0.9958, 10k x0.9993), sparse x0.9997 (CP-SAT's noise
#: at 1k-5k); the coarse phase often ends in another basin (the 10k cuts' end 0.2-0.3 % worse on 2 of 7), and 60 s at
#: dense 10k gave x1.0011 (3 graphs, CP-SAT the winner); experiments/results/auto_scale_val_s36_summary.md.
COARSE_CUT_STEPS = None
#: Restarts of the rebalanced contiguous line by objective (``line_restarts``): when the line is done before
#: :data:`REBALANCE_SHARE` of the budget (1,000-node graphs: after 1.5-3 s of 10), it runs again (polish and
#: rebalancing, :func:`restart_line`) from the other splits (the SPEC one, the other live-byte orders, best first),
#: then from the live-byte orders of :data:`RESTART_SINK_WEIGHTS`, until :data:`RESTART_SHARE` of the budget; at most
#: this many restarts.
LINE_RESTARTS = {"latency": 6, "paper": 0}
#: Share of the budget after which the line's restarts stop (the exact solver and the bound run beside them).
RESTART_SHARE = 0.85
#: Further sink weights of the line's restarts (built only when reached).
RESTART_SINK_WEIGHTS = (6.0, 10.0)
#: Smaller graphs get no live-byte orders (``orders_min_nodes``; validated at 1,000-10,000 nodes only).
ORDERS_MIN_NODES = 301
#: CP-SAT presolves the model of graphs up to this many nodes (``cpsat_presolve_max_nodes``; larger: presolve off,
#: ``solve_cpsat(presolve=False)``; None: always on). On a 1,000-node layered graph (K = 4, latency, 2 workers, load
#: ~7) CP-SAT's first solution came after 14 s with its presolve and 3.6 s without, so inside auto's 10 s it mostly
#: returned nothing (and ran past the deadline); without it, on generated graphs of own seeds at 1k-5k nodes and the
#: two validation models above 900 nodes, auto's CP-SAT member was better in 28 of 35 pairs (worse in 2), auto itself
#: 0.4-1.7 % better in geometric mean, within the run-to-run noise of its contiguous line (load 7-9;
#: ``experiments/results/auto_scale_val_s29_presolve_summary.md``). Real models below this (the bundled ones: at most
#: 780 nodes) keep it: CP-SAT proves most of them.
CPSAT_PRESOLVE_MAX_NODES = 900
#: On graphs of more than this many nodes whose contiguous line is rebalanced (``latency``), the exact solver starts
#: once the line's first polish and rebalancing are done, hinted with their schedule (``exact_after_line_min_nodes``;
#: None: always at once, with its head start).
EXACT_AFTER_LINE_MIN_NODES = 900
#: ... and at this share of the budget at the latest.
EXACT_WAIT_SHARE = 0.6
#: On such graphs with at least this many edges per node, the waiting exact solver starts once the line's first polish
#: is done (the rebalancing then runs beside it), hinted with the polished schedule; sparser graphs wait for the
#: rebalancing too (``exact_after_polish_min_edges_per_node``; None: always the rebalancing too). Off by default:
#: on validation (own seeds 3106-3123, 1,000 nodes, K = 4, latency, 10 s, load 7-12, arms alternating) starting after
#: the polish alone was better on 11 of 18 dense graphs (~2.9 edges per node), worse on 6, geometric mean x0.9996, and
#: worse on 7 of 12 sparse ones (x1.006): no clear gain (``experiments/results/auto_scale_val_s31_summary.md``).
EXACT_AFTER_POLISH_MIN_EDGES_PER_NODE = None
#: The contiguous line's first polish makes its moves on the host (:mod:`respect_jax.solvers.host_polish`) while the
#: compiled polish is still compiling (``host_polish_moves``).
HOST_POLISH = True
#: With the host polish, on graphs up to this many nodes, while the compiled polish compiles: the line polishes its
#: split first and rebalances on the host after; on larger ones it rebalances on the host first and polishes after, as
#: without it (``host_polish_first_max_nodes``; None: always polish first). Validation (own seeds 3001-3002, load
#: 9-13): polish first better at 1k (the host polish is fast there), the host rebalancing first at 10k (the host polish
#: of 10k nodes is slow: ~10 ms a move under load), one each way at 5k.
HOST_POLISH_FIRST_MAX_NODES = 3000
#: The crossing bound starts beside the contiguous line's restarts on graphs up to this many nodes, after them on
#: larger ones (``bound_early_max_nodes``; None: always beside them).
BOUND_EARLY_MAX_NODES = None
#: The crossing bound's finer chain passes (``bound_paper_refine_max`` / ``bound_latency_refine_max``, session 35) run
#: only at K >= BOUND_REFINE_MIN_STAGES (``bound_refine_min_stages``; None: any K), only on graphs that cannot spill
#: (``bound_refine_spill`` False), and only once the fast members are done (``bound_refine_after_members``: the
#: contiguous line with its restarts and the members run in turn returned, the learned members' threads ended); the
#: bound's other passes run as before. Session 35 (HC), auto 10 s on no-spill NAS-cell validation graphs: the finer
#: passes from the start of the bound's spare time lifted the bound, but at load 6-8 the bound thread that no longer
#: ended early took the CPU that CP-SAT needed for its proofs at K = 4 and the learned member for its schedule at K = 8.
#: CP-SAT proved none of those K = 8 cases within 10 s, so there the CPU left once the members are done goes to the
#: finer passes (session 36: experiments/results/auto_bounds_val_s36.md).
BOUND_REFINE_MIN_STAGES = 6
#: On graphs of more than HOST_LINE_MIN_NODES and at most HOST_LINE_MAX_NODES nodes the rebalanced contiguous line runs
#: on the host only (``host_line_min_nodes`` / ``host_line_max_nodes``; None: never / no upper limit): no warm compile
#: of the polish (3-6 s of CPU under load at 5k nodes, beside the host rebalancing) and no compiled polish or
#: rebalancing, which at 5k-10k nodes never completed a rebalancing cycle within 10 s. Validation (own seeds, K = 4,
#: latency, 10 s, load 4-9, arms alternating): 5k x0.986 (16 of 18 better; on sparse graphs the line is done early
#: enough for CP-SAT, hinted with it, to start and win), 5k K = 8 x0.978 (5 of 6), 10k x1.026 (5 of 6 worse: the host
#: polish of 10k nodes is still running at the deadline) (``experiments/results/auto_scale_val_s32_summary.md``).
#: Since session 33 the host polish keeps its scan's state from move to move (2-3x faster at 5k-10k nodes), and the line
#: at 10k runs on the host too (no upper limit): with the hull order, 10k x0.962 over 6 graphs, 6 better
#: (``experiments/results/auto_scale_val_s33_summary.md``); larger graphs were not run (the compiled polish only gets
#: slower there).
HOST_LINE_MIN_NODES = 3000
HOST_LINE_MAX_NODES = None
#: Share of the budget after which the rebalancing stops (and the crossing bound, started after it, gets the rest).
REBALANCE_SHARE = 0.6
#: Members started early, in a thread of their own, right after the contiguous split (:func:`start_early`): the
#: learned order policy, whose first call in a process compiles its forward pass and polish (1.6-3.5 s on a 150-node
#: NAS graph, 3-14 s at 1,000-10,000 nodes on the 2-core CPU; 0.4-0.8 s with a warm persistent cache), so that its
#: compilation and decoding run beside the downset programme, the exact solver and the bound instead of after them.
EARLY_MEMBERS = ("policy", "order_policy")


def learned_ready(graph: Graph, hw: Hardware, objective: str, options: dict, name: str = "policy") -> bool:
    """True when the learned member ``name`` with ``options`` needs no compilation of its forward pass for ``graph``'s
    bucket: its solver's readiness hook (``ready``, e.g. the order policy's compiled-or-stored check) says so; a solver
    without one is never ready. A cold member is not started early: on the generated NAS validation graphs its
    compilation (forward pass and polish, serialised with the other members' compilations by the executable cache's
    store lock) then held up the contiguous split's polish and the final re-scoring past the budget
    (``experiments/results/auto_policy_early_val_s25.md``)."""
    ready = getattr(get_solver(name), "ready", None)  # by name: the learned solvers sit above this layer
    return ready is not None and bool(ready(graph, hw, objective, **options))


#: Seconds the downset programme runs alone before an early member starts: a graph it proves at once (the bundled
#: and validation CNNs: <= 0.01 s) starts no compilation that it would then abandon.
EARLY_AFTER_S = 0.25
#: The downset programme's probing stops after this many probes in a row gave up (0: never), so that the crossing
#: bound gets the time: on the generated validation graphs its ``paper`` bounds at K = 8 beat further probes; for
#: ``latency`` the probes' bounds were the better ones.
LATTICE_PATIENCE = {"paper": 2, "latency": 0}


def estimated_build_s(graph: Graph, stages: int, per_unit: float | None = BUILD_S_PER_UNIT) -> float:
    """Seconds an exact model of ``graph`` with ``stages`` stages is expected to take to build, at ``per_unit``
    seconds per (node + edge) x (K - 1) (None: 0, never skipped for its build)."""
    if per_unit is None:
        return 0.0
    return float(per_unit) * (graph.num_nodes + len(graph.edges)) * max(stages - 1, 0)


def gumbel_need_s(graph: Graph, stages: int, options: dict, polish_moves: int) -> tuple[float, str]:
    """Seconds the Gumbel member needs at least inside auto (its compilation where not yet done in this process,
    one chunk and its local search, times :data:`CONTENTION`) and how that splits, for ``options`` (its
    ``member_options``; ``steps``, ``samples``, ``local_search`` and ``chunk_steps`` default to the member's)."""
    from respect_jax.solvers.gumbel import estimated_seconds  # JAX: imported when the member is considered

    chunk = int(options.get("chunk_steps", GUMBEL_CHUNK_STEPS))
    est = estimated_seconds(graph, stages, int(options.get("steps", 100)), int(options.get("samples", 64)),
                            int(options.get("local_search", polish_moves)), chunk)
    first = est["chunk"] if chunk > 0 else est["steps"]
    need = CONTENTION * (est["start"] + first + est["local_search"])
    what = (f"compile {est['start']:.1f} + first steps {first:.1f} + local search {est['local_search']:.1f}, "
            f"x{CONTENTION:g} for the shared CPU")
    return need, what


#: Worker threads abandoned at a deadline; joined when the interpreter exits (a daemon thread killed inside
#: JAX or OR-tools C++ code at exit aborts the process: "FATAL: exception not rethrown").
_ABANDONED: list[threading.Thread] = []


@atexit.register
def _join_abandoned() -> None:
    for thread in _ABANDONED:
        thread.join()


def abandon(thread: threading.Thread) -> None:
    """Leave ``thread`` running (its result is dropped); the process waits for it only when it exits."""
    _ABANDONED[:] = [t for t in _ABANDONED if t.is_alive() and t is not thread] + [thread]


def join_abandoned(timeout_s: float | None = None) -> float:
    """Wait (at most ``timeout_s`` s in all; None: no limit) for the threads earlier calls abandoned (a JAX
    member cannot be interrupted); returns the seconds waited. A batch of timed runs calls it between runs so
    that one run's leftovers do not slow the next."""
    start = time.perf_counter()
    for thread in list(_ABANDONED):
        left = None if timeout_s is None else max(timeout_s - (time.perf_counter() - start), 0.0)
        thread.join(timeout=left)
    _ABANDONED[:] = [t for t in _ABANDONED if t.is_alive()]
    return time.perf_counter() - start


#: Seconds between two looks at ``stop()`` while a member runs (:func:`run_until`).
POLL_S = 0.05


def run_until(fn, deadline: float, name: str, stop=None, workers: list | None = None) -> tuple[bool, object]:
    """Run ``fn()`` in a daemon thread until it returns, ``deadline`` (``time.perf_counter()``) passes or
    ``stop()`` (optional, polled every :data:`POLL_S` s) returns True.

    Returns ``(True, its value)``, or ``(False, None)`` when it is still running then: its value is dropped, so
    a slow member (a cold JAX compilation) cannot hold the call past its budget, nor past the exact solver's
    proof. The thread is appended to ``workers`` (the caller joins it after setting its stop signal) or, without
    ``workers``, abandoned (it finishes in the background). An exception of ``fn`` is raised here.
    """
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001  (re-raised in the caller's thread)
            box["error"] = err

    thread = threading.Thread(target=target, name=f"auto-{name}", daemon=True)
    thread.start()
    while thread.is_alive() and time.perf_counter() < deadline and not (stop is not None and stop()):
        thread.join(timeout=max(min(POLL_S, deadline - time.perf_counter()), 0.0))
    if thread.is_alive():
        if workers is None:
            abandon(thread)
        else:
            workers.append(thread)
        return False, None
    if "error" in box:
        raise box["error"]
    return True, box["value"]


def _late(t0: float, proved: bool = False) -> str:
    when = "when the exact solver proved the optimum" if proved else "at the deadline"
    return f"still running {when} after {time.perf_counter() - t0:.1f} s; its result is dropped"


def polish_until(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray, moves: int,
                 stop, chunk: int = POLISH_CHUNK, offer=None, host=None) -> np.ndarray:
    """int64[N] ``assignment`` after local search (:func:`respect_jax.local_search.polish`) in calls of
    ``chunk`` moves (``ceil(moves / chunk)`` calls at most), each from the best schedule so far
    (single-node moves above :data:`POLISH_CLOSURE_MAX_NODES` nodes, the precedence-closed ones up to it);
    ``stop()`` is checked between calls, and a call that does not improve ends the search (the next one would
    repeat it). Each better schedule is passed to ``offer`` (optional) as it comes, so a caller that abandons this
    at its deadline keeps them. ``host()`` (optional): True before a call runs that call's moves on the host instead
    (:func:`respect_jax.solvers.host_polish.host_polish`: the same single-node moves in float64 NumPy, no
    compilation; ``solver=auto`` while the compiled polish is still compiling). Never worse than ``assignment``."""
    best = np.asarray(assignment, np.int64)
    value = objective_np(graph, best, hw, objective, lam)
    kind = "closure" if graph.num_nodes <= POLISH_CLOSURE_MAX_NODES else "single"
    for _ in range(-(-int(moves) // int(chunk))):
        if stop():
            break
        if host is not None and kind == "single" and host():
            candidate = host_polish(graph, hw, objective, lam, best, int(chunk), stop=stop)
        else:
            candidate = np.asarray(polish(graph, hw, objective, lam, best, int(chunk), kind=kind), np.int64)
        candidate_value = objective_np(graph, candidate, hw, objective, lam)
        if not candidate_value < value:
            break
        best, value = candidate, candidate_value
        if offer is not None:
            offer(best)
    return best


def rebalance_host(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray, cycles: int,
                   stop, offer=None) -> np.ndarray:
    """int64[N]: ``assignment`` after the stage-boundary re-cuts (:func:`respect_jax.local_search.refine_boundaries`,
    :data:`~respect_jax.local_search.BOUNDARY_ROUNDS` rounds) and up to ``cycles`` rebalancing steps
    (:func:`respect_jax.solvers.rebalance.rebalance_step`: leximax re-cuts under ``latency``, the exact re-split of
    stage-major orders) until one changes nothing or ``stop()``: host NumPy only, no compilation, so it runs while
    the local search compiles. Each step's schedule is kept when it is not worse (a step that keeps the objective
    lowers the sorted stage times) and passed to ``offer`` (optional). Never worse."""
    best = np.asarray(assignment, np.int64)
    value = objective_np(graph, best, hw, objective, lam)
    if hw.stages < 2 or stop():
        return best
    current = refine_boundaries(graph, hw, objective, lam, best, BOUNDARY_ROUNDS, stop=stop)
    for _ in range(int(cycles) + 1):
        current_value = objective_np(graph, current, hw, objective, lam)
        if current_value > value:
            break
        if not np.array_equal(current, best):
            best, value = np.asarray(current, np.int64), current_value
            if offer is not None:
                offer(best)
        if stop():
            break
        current = rebalance_step(graph, hw, objective, lam, best, BOUNDARY_ROUNDS)
        if np.array_equal(current, best):
            break
    return best


def rebalance_until(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray, moves: int,
                    cycles: int, stop, offer=None) -> tuple[np.ndarray, int]:
    """(int64[N] schedule, improving cycles): the order policy's decoding steps after its polish, applied to
    ``assignment``: the stage-boundary re-cuts (:func:`respect_jax.local_search.refine_boundaries`) and
    :func:`polish_until` where they changed it, then up to ``cycles`` cycles of the rebalancing
    (:func:`respect_jax.solvers.rebalance.rebalance_many`: leximax re-cuts under ``latency``, the exact re-split of
    stage-major orders, ``moves`` single-node moves of polish). Stops at the first cycle that improves nothing or
    once ``stop()``; each better schedule is passed to ``offer`` (optional) as it comes, so a caller that abandons
    this at its deadline keeps them. Never worse."""
    best = np.asarray(assignment, np.int64)
    value = objective_np(graph, best, hw, objective, lam)

    def keep(candidate: np.ndarray) -> None:
        nonlocal best, value
        candidate_value = objective_np(graph, candidate, hw, objective, lam)
        if candidate_value <= value and not np.array_equal(candidate, best):
            best, value = np.asarray(candidate, np.int64), candidate_value
            if offer is not None:
                offer(best)

    if hw.stages < 2 or stop():
        return best, 0
    recut = refine_boundaries(graph, hw, objective, lam, best, BOUNDARY_ROUNDS, stop=stop)
    if not np.array_equal(recut, best):
        keep(polish_until(graph, hw, objective, lam, recut, moves, stop))
    current, improved = best, 0
    for _ in range(int(cycles)):
        if stop():
            break
        (current,), (gain,) = rebalance_many([graph], hw, objective, lam, [current], int(moves), {"kind": "single"},
                                             BOUNDARY_ROUNDS, 1, stop=stop)
        if not gain:
            break
        improved += 1
        keep(current)
    return best, improved


def restart_line(graph: Graph, hw: Hardware, objective: str, lam: float, starts: list, moves: int, chunk: int,
                 polish_moves: int, cycles: int, stop, offer) -> int:
    """Restarts of the contiguous line (no host rebalancing): for each of ``starts`` (callables returning an int64[N]
    schedule, so that a further order is built only when reached) until ``stop()``: :func:`polish_until` (``moves``
    in calls of ``chunk``), then :func:`rebalance_until` (``polish_moves`` moves, ``cycles`` cycles); the polished
    schedule and each better one are passed to ``offer``. Returns the restarts completed."""
    completed = 0
    for make in starts:
        if stop():
            break
        polished = polish_until(graph, hw, objective, lam, make(), moves, stop, chunk)
        offer(polished)
        rebalance_until(graph, hw, objective, lam, polished, polish_moves, cycles, stop, offer)
        completed += 1
    return completed


def host_rounds(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray, starts: list,
                cycles: int, moves: int, chunk: int, stop, offer, restart_offer,
                refine=None) -> tuple[np.ndarray, int, int]:
    """The contiguous line after its first polish, on the host only (``host_line_min_nodes``: no compiled search):
    rounds of :func:`rebalance_host` (``cycles``) and :func:`polish_until` with the host moves from the best schedule
    while a round improves it, then restarts from ``starts`` (callables returning an int64[N] schedule), each
    rebalanced and polished the same way, until ``stop()``. Better schedules go to ``offer`` (the rounds) and
    ``restart_offer`` (the restarts) as they come. ``refine(schedule, offer)`` (optional; never worse, e.g. the
    interval re-cuts of :func:`cuts_until`) runs after each round's and each restart's polish. Returns (the rounds'
    best schedule, improving rounds, restarts completed)."""
    best = np.asarray(assignment, np.int64)
    value = objective_np(graph, best, hw, objective, lam)
    rounds = 0
    while not stop():
        out = rebalance_host(graph, hw, objective, lam, best, cycles, stop, offer)
        out = polish_until(graph, hw, objective, lam, out, moves, stop, chunk, offer, lambda: True)
        if refine is not None:
            out = refine(out, offer)
        out_value = objective_np(graph, out, hw, objective, lam)
        if not out_value < value:
            break
        best, value, rounds = out, out_value, rounds + 1
    completed = 0
    for make in starts:
        if stop():
            break
        out = rebalance_host(graph, hw, objective, lam, make(), cycles, stop, restart_offer)
        out = polish_until(graph, hw, objective, lam, out, moves, stop, chunk, restart_offer, lambda: True)
        restart_offer(out if refine is None else refine(out, restart_offer))
        completed += 1
    return best, rounds, completed


def cuts_until(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray, moves: int, chunk: int,
               stop, offer=None, memo: set | None = None, steps: int = RECUT_STEPS, jumps: bool = False,
               coarse_steps: int | None = None, coarse_memo: set | None = None) -> np.ndarray:
    """int64[N]: ``assignment`` after rounds of the interval re-cuts
    (:func:`respect_jax.solvers.boundary_cuts.interval_sweep`, ``memo`` kept across rounds) and :func:`polish_until`
    with the host moves (``moves`` in calls of ``chunk``), while a round lowers the objective, until ``stop()``
    (``steps``: max flows per re-cut, :data:`~respect_jax.solvers.boundary_cuts.RECUT_STEPS`). ``jumps``: when a
    sweep changes nothing, the round goes on from the best jump move instead
    (:func:`respect_jax.solvers.boundary_cuts.jump_move`: one node across two or more stages), if there is a
    leximax-better one. ``coarse_steps`` (optional, fewer than ``steps``): the rounds first run with that many max
    flows per re-cut (their own ``coarse_memo``: a memo entry holds for one step count only) until they change
    nothing, then go on with ``steps``. Each better schedule goes to ``offer`` (optional) as it comes. Never worse (a
    round that only lowers the sorted stage times is kept too, and ends the rounds)."""
    best = np.asarray(assignment, np.int64)
    if coarse_steps is not None and int(coarse_steps) < int(steps):
        best = cuts_until(graph, hw, objective, lam, best, moves, chunk, stop, offer,
                          set() if coarse_memo is None else coarse_memo, int(coarse_steps), False)
    value = objective_np(graph, best, hw, objective, lam)
    memo = set() if memo is None else memo
    while not stop():
        swept = interval_sweep(graph, hw, best, steps=int(steps), stop=stop, offer=offer, memo=memo)
        if np.array_equal(swept, best) and jumps and not stop():
            swept = jump_move(graph, hw, best, stop)
        if np.array_equal(swept, best):
            break
        out = polish_until(graph, hw, objective, lam, swept, moves, stop, chunk, offer, lambda: True)
        out_value = objective_np(graph, out, hw, objective, lam)
        if out_value > value:  # not reached: both steps are never worse
            break
        improved = out_value < value
        best, value = out, out_value
        if not improved:
            break
    return best


def _score(graph: Graph, hw: Hardware, objective: str, lam: float, assignment: np.ndarray) -> float:
    """The member's objective in float64 NumPy (:mod:`respect_jax.solvers.numpy_eval`: no JAX compilation, so
    the first incumbent comes in milliseconds); ``run_solver`` re-scores the winner with the shared evaluator."""
    try:
        return objective_np(graph, assignment, hw, objective, lam)
    except ValueError:
        raise ValueError(f"solver auto: a member returned an invalid schedule for graph {graph.name!r}") from None


class _Live:
    """The live line on stderr: elapsed time, incumbent (and its method), bound, certified gap."""

    def __init__(self, enabled: bool, start: float):
        self.enabled, self.start, self.last = enabled, start, None

    def show(self, what: str, best: float, method: str, bound: float) -> None:
        if not self.enabled or (what.endswith("incumbent") and self.last == (best, bound)):
            return
        self.last = (best, bound)
        gap = (best - bound) / best if best > 0 and np.isfinite(best) else float("nan")
        print(
            f"auto [{time.perf_counter() - self.start:7.2f}s] {what:<22} incumbent {best:.6g} ({method})  "
            f"bound {bound:.6g}  gap {100 * gap:.3g}%",
            file=sys.stderr,
            flush=True,
        )


def choose_exact(exact: str) -> str | None:
    """The exact solver to run (``auto``: CP-SAT, whose incumbents stream to the live line; on the bundled
    models at a 10 s limit neither it nor the MILP proved more); ``none``: none."""
    if exact == "none":
        return None
    if exact == "auto":
        return "cpsat"
    if exact not in EXACT:
        raise ValueError(f"solver auto: exact must be auto, none or one of {', '.join(EXACT)}, got {exact!r}")
    return exact


def _check_node_limit(name: str, value) -> None:
    """A node-count option: an integer >= 0 or None (one-line ValueError otherwise)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"solver auto: {name} must be an integer >= 0 or null, got {value!r}")


@register_solver("auto")
def solve_auto(
    graph: Graph,
    hw: Hardware,
    objective: str = "paper",
    lam: float = 1.0,
    time_budget_s: float = 10.0,
    members: list[str] | tuple[str, ...] = DEFAULT_MEMBERS,
    exact: str = "auto",
    polish_moves: int = 200,
    fast_share: float = 0.5,
    head_start_s: float = 1.0,
    member_options: dict | None = None,
    progress: bool = True,
    crossing_bound: bool = True,
    lattice_downsets: int = MAX_DOWNSETS,
    lattice_max_nodes: int | None = LATTICE_MAX_NODES,
    rebalance: dict | None = None,
    rebalance_min_nodes: int = REBALANCE_MIN_NODES,
    warm_polish: bool | None = None,
    orders: dict | None = None,
    orders_min_nodes: int = ORDERS_MIN_NODES,
    macs_order: dict | None = None,
    hull_order: dict | None = None,
    hull_max_cuts: int = HULL_MAX_CUTS,
    hull_min_nodes: int | None = HULL_MIN_NODES,
    line_moves: dict | None = None,
    line_restarts: dict | None = None,
    cpsat_presolve_max_nodes: int | None = CPSAT_PRESOLVE_MAX_NODES,
    exact_after_line_min_nodes: int | None = EXACT_AFTER_LINE_MIN_NODES,
    exact_after_polish_min_edges_per_node: float | None = EXACT_AFTER_POLISH_MIN_EDGES_PER_NODE,
    host_polish_moves: bool = HOST_POLISH,
    bound_early_max_nodes: int | None = BOUND_EARLY_MAX_NODES,
    host_polish_first_max_nodes: int | None = HOST_POLISH_FIRST_MAX_NODES,
    exact_build_s_per_unit: float | None = BUILD_S_PER_UNIT,
    exact_wait_share: float | None = None,
    host_line_min_nodes: int | None = HOST_LINE_MIN_NODES,
    host_line_max_nodes: int | None = HOST_LINE_MAX_NODES,
    interval_cuts: dict | None = None,
    interval_cuts_min_nodes: int | None = INTERVAL_CUTS_MIN_NODES,
    interval_cut_steps: int = RECUT_STEPS,
    exact_after_cuts_max_nodes: int | None = EXACT_AFTER_CUTS_MAX_NODES,
    restart_cut_steps: int | None = RESTART_CUT_STEPS,
    jump_moves_min_nodes: int | None = JUMP_MOVES_MIN_NODES,
    coarse_cut_steps: int | None = COARSE_CUT_STEPS,
    bound_paper_refine_max: int | None = 72,
    bound_latency_refine_max: int | None = 63,
    bound_refine_min_stages: int | None = BOUND_REFINE_MIN_STAGES,
    bound_refine_after_members: bool = True,
    bound_refine_spill: bool = False,
) -> SolveResult:
    """The best schedule ``time_budget_s`` buys, its certified gap and every member's result (module docstring).

    Args:
        graph, hw, objective, lam: the problem.
        time_budget_s: wall-clock budget (s) of the whole call (> 0); the exact solver and the bound stop at it,
            a fast member still running then is abandoned (:func:`run_until`; ``portfolio[name]["abandoned"]``).
        members: fast members, in the order they run (a subset of contiguous, order_policy, policy, gumbel;
            ``policy`` runs the shipped order policy, so ``order_policy`` beside it would repeat it).
        exact: ``auto`` | ``cpsat`` | ``milp`` | ``none``.
        polish_moves: local-search moves on the contiguous split (the policy and Gumbel members take their
            own ``local_search`` option, default this value).
        fast_share: fast members are not started after this share of the budget (the contiguous line, the polish and
            rebalancing of the contiguous member's split, is: it stops at the deadline with its schedules so far).
        head_start_s: seconds the exact solver runs alone before the other members start (it proves small
            and chain-like instances in less, and the members are then skipped).
        member_options: ``{member: {option: value}}`` passed to a member (its solver's own options, plus
            ``max_nodes``: skip the member on larger graphs).
        progress: print the live line on stderr.
        crossing_bound: search the crossing lower bound (in a thread, beside the members) until the deadline.
        lattice_downsets: after the contiguous split, the downset programme (:mod:`respect_jax.solvers.lattice`,
            :data:`LATTICE_SHARE` of the budget) keeping at most this many downsets per probe; a graph with a unique
            topological order is proven at once (the contiguous split is then optimal); 0: never.
        lattice_max_nodes: the downset programme's search is skipped on graphs of more than this many nodes (not the
            proof of a unique topological order; :data:`LATTICE_MAX_NODES`; None: never skipped).
        rebalance: ``{objective: cycles}`` (missing objectives: :data:`REBALANCE_CYCLES`): after the contiguous
            split's polish, the re-cuts and up to this many cycles of the rebalancing (:func:`rebalance_until`)
            until :data:`REBALANCE_SHARE` of the budget; 0: none.
        rebalance_min_nodes: no rebalancing on smaller graphs.
        warm_polish: compile the contiguous line's single-node polish in a thread (graphs of more than
            :data:`POLISH_CLOSURE_MAX_NODES` nodes), from :data:`EARLY_AFTER_S` into the downset programme unless it
            has proven the optimum by then, beside it and the exact solver's head start; None: when the line is
            rebalanced.
        orders: ``{objective: [sink weights]}`` (missing objectives: :data:`ORDER_SINK_WEIGHTS`): after the
            contiguous split, the exact contiguous splits of the live-byte orders of these sink weights
            (:func:`respect_jax.solvers.orders.best_live_split`, ``portfolio['orders']``); the best of them starts the
            contiguous line when it beats the SPEC split; []: none.
        orders_min_nodes: no live-byte orders on smaller graphs.
        macs_order: ``{objective: bool}`` (missing objectives: :data:`MACS_ORDER`): with the live-byte orders, also
            the exact split of the MACs-first order (``portfolio['orders']['sink_weight']`` ``"macs"`` when it is the
            best).
        hull_order: ``{objective: bool}`` (missing objectives: :data:`HULL_ORDER`): with the live-byte orders, also
            the exact split of the hull order (``portfolio['orders']['sink_weight']`` ``"hull"`` when it is the best).
        hull_max_cuts: parametric minimum cuts of the hull order's downsets (:data:`HULL_MAX_CUTS`; 0: no hull order).
        hull_min_nodes: smaller graphs get no hull order (:data:`HULL_MIN_NODES`; None: any size from
            ``orders_min_nodes``).
        line_restarts: ``{objective: count}`` (missing objectives: :data:`LINE_RESTARTS`): restarts of the
            rebalanced line from the other splits while it has time left (:func:`restart_line`,
            ``portfolio['contiguous+restart']``); 0: none.
        cpsat_presolve_max_nodes: CP-SAT presolves graphs up to this many nodes, not larger ones
            (:data:`CPSAT_PRESOLVE_MAX_NODES`; None: always; ``member_options['cpsat']['presolve']`` overrides it).
        exact_after_line_min_nodes: on graphs of more than this many nodes whose contiguous line is rebalanced, the
            exact solver starts after the line's polish and rebalancing (at :data:`EXACT_WAIT_SHARE` of the budget at
            the latest; no head start), hinted with the best schedule then (:data:`EXACT_AFTER_LINE_MIN_NODES`; None:
            always at once). ``portfolio[exact]['started_s']``: when it started.
        exact_after_polish_min_edges_per_node: such a waiting exact solver starts after the line's first polish
            only (not its rebalancing) on graphs with at least this many edges per node
            (:data:`EXACT_AFTER_POLISH_MIN_EDGES_PER_NODE`; None: always after the rebalancing too).
        bound_early_max_nodes: the crossing bound starts beside the line's restarts on graphs up to this many nodes,
            after them on larger ones (:data:`BOUND_EARLY_MAX_NODES`; None: always beside them).
        host_polish_moves: the contiguous line's first polish makes its moves on the host (:func:`host_polish`, float64
            NumPy) while the compiled polish is still compiling in its warm-up thread, the compiled one after.
        host_polish_first_max_nodes: with ``host_polish_moves``, on graphs up to this many nodes the line polishes
            its split first (on the host while the compile runs) and rebalances after; on larger ones it rebalances on
            the host first (:data:`HOST_POLISH_FIRST_MAX_NODES`; None: always polish first).
        line_moves: ``{objective: moves}`` (None: :data:`LINE_MOVES`): the contiguous line's first polish on graphs
            of more than :data:`POLISH_CLOSURE_MAX_NODES` nodes takes up to this many single-node moves (in calls of
            :data:`LINE_CHUNK`, until a call improves nothing or the stop) instead of ``polish_moves``.
        exact_build_s_per_unit: the exact solver is skipped when its model's estimated build, this many seconds per
            (node + edge) x (K - 1) (:data:`BUILD_S_PER_UNIT`), exceeds the time left (None: never skipped for it).
        exact_wait_share: a waiting exact solver (``exact_after_line_min_nodes``) starts at this share of the budget
            at the latest (None: :data:`EXACT_WAIT_SHARE`).
        host_line_min_nodes, host_line_max_nodes: on graphs of more than ``host_line_min_nodes`` and at most
            ``host_line_max_nodes`` nodes the rebalanced contiguous line runs on the host only (:func:`host_rounds`): no
            compiled polish, no warm compile (:data:`HOST_LINE_MIN_NODES`, :data:`HOST_LINE_MAX_NODES`; None: never /
            no upper limit). ``portfolio['contiguous+rebalance']['host_only']`` says so.
        interval_cuts: ``{objective: bool}`` (missing objectives: :data:`INTERVAL_CUTS`): the contiguous line runs the
            interval re-cuts and the host polish alternately (:func:`cuts_until`) after its first polish
            (``portfolio['contiguous+cuts']``) and after each round and restart of its host rebalancing.
        interval_cuts_min_nodes: smaller graphs get no interval re-cuts (:data:`INTERVAL_CUTS_MIN_NODES`; None: any
            size).
        interval_cut_steps: bisection steps (max flows) per interval re-cut
            (:data:`~respect_jax.solvers.boundary_cuts.RECUT_STEPS`).
        exact_after_cuts_max_nodes: on host-line graphs (``host_line_min_nodes``) up to this many nodes, the exact
            solver starts without the build gate (``exact_build_s_per_unit``) once the line's first interval re-cuts
            have converged before the deadline (:data:`EXACT_AFTER_CUTS_MAX_NODES`; None: never).
            ``portfolio[exact]['ungated']`` says so.
        restart_cut_steps: bisection steps per interval re-cut in the host line's restarts
            (:data:`RESTART_CUT_STEPS`; None: ``interval_cut_steps``); their re-cuts keep a memo of their own.
        jump_moves_min_nodes: on graphs of at least this many nodes the line's interval re-cuts go on from the best
            jump move when a sweep changes nothing (:data:`JUMP_MOVES_MIN_NODES`; None: never).
        coarse_cut_steps: the line's interval re-cuts (its first ones, its rounds' and its restarts' unless
            ``restart_cut_steps``) first converge with this many
            bisection steps per re-cut, then go on with ``interval_cut_steps`` (:func:`cuts_until`'s
            ``coarse_steps``; :data:`COARSE_CUT_STEPS`; None: never; not below ``interval_cut_steps`` either).
        bound_paper_refine_max, bound_latency_refine_max: the crossing bound's finer chain passes
            (:func:`~respect_jax.solvers.bounds.crossing_lower_bound`'s ``paper_refine_max`` / ``latency_refine_max``;
            None: its defaults, 24 buckets per boundary / no latency pass). Larger values lift the bound alone on
            graphs that cannot spill, but inside a 10 s budget on a loaded 2-core CPU they took CPU from CP-SAT
            (``experiments/results/auto_bounds_val_s35.md``), hence the rule below.
        bound_refine_min_stages, bound_refine_after_members, bound_refine_spill: those finer passes run only at
            K >= ``bound_refine_min_stages`` (:data:`BOUND_REFINE_MIN_STAGES`; None: any K), only once the fast members
            are done (``bound_refine_after_members``: the bound's thread waits for them, sleeping, before its finer
            passes; False: at once) and only on graphs that cannot spill unless ``bound_refine_spill``; elsewhere the
            bound runs with its module defaults (no finer pass).
    """
    start = time.perf_counter()
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if not time_budget_s > 0:
        raise ValueError(f"solver auto: time_budget_s must be > 0, got {time_budget_s}")
    unknown = sorted(set(members) - set(FAST_MEMBERS))
    if unknown:
        raise ValueError(f"solver auto: unknown member(s) {', '.join(unknown)}; choose from {', '.join(FAST_MEMBERS)}")
    exact_name = choose_exact(exact)
    rebalance = {**REBALANCE_CYCLES, **(rebalance or {})}
    orders = {**ORDER_SINK_WEIGHTS, **(orders or {})}
    line_moves = dict(LINE_MOVES if line_moves is None else line_moves)
    line_restarts = {**LINE_RESTARTS, **(line_restarts or {})}
    macs_order = {**MACS_ORDER, **(macs_order or {})}
    if set(macs_order) - set(OBJECTIVES) or any(not isinstance(v, bool) for v in macs_order.values()):
        raise ValueError(f"solver auto: macs_order must map objectives ({', '.join(OBJECTIVES)}) to true or false, "
                         f"got {macs_order}")
    hull_order = {**HULL_ORDER, **(hull_order or {})}
    if set(hull_order) - set(OBJECTIVES) or any(not isinstance(v, bool) for v in hull_order.values()):
        raise ValueError(f"solver auto: hull_order must map objectives ({', '.join(OBJECTIVES)}) to true or false, "
                         f"got {hull_order}")
    interval_cuts = {**INTERVAL_CUTS, **(interval_cuts or {})}
    if set(interval_cuts) - set(OBJECTIVES) or any(not isinstance(v, bool) for v in interval_cuts.values()):
        raise ValueError(f"solver auto: interval_cuts must map objectives ({', '.join(OBJECTIVES)}) to true or false, "
                         f"got {interval_cuts}")
    if isinstance(interval_cut_steps, bool) or not isinstance(interval_cut_steps, int) or interval_cut_steps < 1:
        raise ValueError(f"solver auto: interval_cut_steps must be an integer >= 1, got {interval_cut_steps!r}")
    if restart_cut_steps is not None and (isinstance(restart_cut_steps, bool) or not isinstance(restart_cut_steps, int)
                                          or restart_cut_steps < 1):
        raise ValueError(f"solver auto: restart_cut_steps must be an integer >= 1 or null, got {restart_cut_steps!r}")
    if coarse_cut_steps is not None and (isinstance(coarse_cut_steps, bool) or not isinstance(coarse_cut_steps, int)
                                         or coarse_cut_steps < 1):
        raise ValueError(f"solver auto: coarse_cut_steps must be an integer >= 1 or null, got {coarse_cut_steps!r}")
    if isinstance(hull_max_cuts, bool) or not isinstance(hull_max_cuts, int) or hull_max_cuts < 0:
        raise ValueError(f"solver auto: hull_max_cuts must be an integer >= 0, got {hull_max_cuts!r}")
    if set(line_restarts) - set(OBJECTIVES) or any(int(c) < 0 for c in line_restarts.values()):
        raise ValueError(f"solver auto: line_restarts must map objectives ({', '.join(OBJECTIVES)}) to counts >= 0, "
                         f"got {line_restarts}")
    if set(line_moves) - set(OBJECTIVES) or any(int(m) < 0 for m in line_moves.values()):
        raise ValueError(f"solver auto: line_moves must map objectives ({', '.join(OBJECTIVES)}) to moves >= 0, "
                         f"got {line_moves}")
    if set(orders) - set(OBJECTIVES) or any(not float(w) > 0 for ws in orders.values() for w in ws):
        raise ValueError(f"solver auto: orders must map objectives ({', '.join(OBJECTIVES)}) to lists of sink "
                         f"weights > 0, got {orders}")
    if set(rebalance) - set(OBJECTIVES) or any(int(c) < 0 for c in rebalance.values()):
        raise ValueError(f"solver auto: rebalance must map objectives ({', '.join(OBJECTIVES)}) to cycles >= 0, "
                         f"got {rebalance}")
    for name, limit in (("cpsat_presolve_max_nodes", cpsat_presolve_max_nodes),
                        ("exact_after_line_min_nodes", exact_after_line_min_nodes),
                        ("bound_early_max_nodes", bound_early_max_nodes),
                        ("host_polish_first_max_nodes", host_polish_first_max_nodes),
                        ("lattice_max_nodes", lattice_max_nodes),
                        ("host_line_min_nodes", host_line_min_nodes),
                        ("host_line_max_nodes", host_line_max_nodes),
                        ("hull_min_nodes", hull_min_nodes),
                        ("interval_cuts_min_nodes", interval_cuts_min_nodes),
                        ("exact_after_cuts_max_nodes", exact_after_cuts_max_nodes),
                        ("jump_moves_min_nodes", jump_moves_min_nodes),
                        ("bound_paper_refine_max", bound_paper_refine_max),
                        ("bound_latency_refine_max", bound_latency_refine_max),
                        ("bound_refine_min_stages", bound_refine_min_stages)):
        _check_node_limit(name, limit)
    for name, flag in (("bound_refine_after_members", bound_refine_after_members),
                       ("bound_refine_spill", bound_refine_spill)):
        if not isinstance(flag, bool):
            raise ValueError(f"solver auto: {name} must be true or false, got {flag!r}")
    per_unit = exact_build_s_per_unit
    if per_unit is not None and (isinstance(per_unit, bool) or not isinstance(per_unit, (int, float))
                                 or not 0 <= per_unit < float("inf")):
        raise ValueError(f"solver auto: exact_build_s_per_unit must be a number >= 0 or null, got {per_unit!r}")
    wait_share = EXACT_WAIT_SHARE if exact_wait_share is None else exact_wait_share
    if isinstance(wait_share, bool) or not isinstance(wait_share, (int, float)) or not 0 <= wait_share <= 1:
        raise ValueError(f"solver auto: exact_wait_share must be a number in [0, 1] or null, got {exact_wait_share!r}")
    density = exact_after_polish_min_edges_per_node
    if density is not None and (isinstance(density, bool) or not isinstance(density, (int, float))
                                or not 0 <= density < float("inf")):
        raise ValueError(f"solver auto: exact_after_polish_min_edges_per_node must be a number >= 0 or null, "
                         f"got {density!r}")
    after_polish = density is not None and graph.num_edges >= float(density) * max(graph.num_nodes, 1)
    if not isinstance(host_polish_moves, bool):
        raise ValueError(f"solver auto: host_polish_moves must be true or false, got {host_polish_moves!r}")
    opts = {name: dict(o or {}) for name, o in (member_options or {}).items()}
    for name, o in opts.items():
        if name not in FAST_MEMBERS + EXACT:
            raise ValueError(f"solver auto: member_options names {name!r}, not a member or exact solver")
        if name in available_solvers():  # policy: checked only once registered
            check_solver_options(name, {k: v for k, v in o.items() if k != "max_nodes"})
    deadline = start + float(time_budget_s)
    signal = StopSignal(deadline)  # set at the deadline or at the exact solver's proof: every worker stops
    workers: list[threading.Thread] = []  # the cooperative workers: stopped by the signal, joined before return
    jax_calls: list[threading.Thread] = []  # members in one JAX call each: named in running_after_return if alive
    bound = analytic = analytic_lower_bound(graph, hw, objective, lam)
    live = _Live(progress, start)
    portfolio: dict[str, dict] = {}
    best, best_obj, winner = None, np.inf, None
    lock = threading.Lock()
    schedules: dict[str, np.ndarray] = {}
    first_incumbent: dict[str, float] = {}

    def offer(name: str, assignment: np.ndarray) -> float:
        nonlocal best, best_obj, winner
        value = _score(graph, hw, objective, lam, assignment)
        with lock:
            if value < best_obj:
                best, best_obj, winner = np.asarray(assignment, np.int64), value, name
            first_incumbent.setdefault("s", time.perf_counter() - start)
        return value

    def run_member(name: str, o: dict, guarded: bool = True) -> None:
        t0 = time.perf_counter()
        if name in ("policy", "gumbel"):
            o.setdefault("local_search", polish_moves)
        if name == "gumbel":  # in chunks: it looks at the signal between compiled calls (joined like a worker)
            o.setdefault("chunk_steps", GUMBEL_CHUNK_STEPS)
            o["stop"] = signal
            # and plans its last chunk and local search to end STOP_LEAD_S before the deadline (as the exact solver
            # does): ending *at* the deadline, its return (evaluation, result) came after it and was dropped
            lead = min(STOP_LEAD_S, 0.1 * time_budget_s)
            left = max(deadline - lead - time.perf_counter(), 0.01)
            o["time_limit_s"] = min(float(o.get("time_limit_s") or np.inf), left)
        call = functools.partial(get_solver(name), graph, hw, objective, lam, **o)
        # a JAX member in one compiled call does not look at the signal: abandoned at once, not waited for
        pool = workers if name == "gumbel" and o["chunk_steps"] > 0 else jax_calls
        done, result = run_until(call, deadline, name, signal, pool) if guarded else (True, call())
        if not done:
            portfolio[name] = {"abandoned": _late(t0, proved())}
            return
        schedules[name] = np.asarray(result.assignment, np.int64)
        entry = {"objective": offer(name, result.assignment), "time_s": time.perf_counter() - t0}
        for key in ("compile_s", "chunks_run", "chunks", "local_search_run"):
            if key in result.info:
                entry[key] = result.info[key]
        portfolio[name] = entry
        live.show(name, best_obj, winner, bound)

    def skip_reason(name: str, o: dict, share: bool = True) -> str | None:
        """Why member ``name`` does not start now (None: it starts); ``share``: the ``fast_share`` rule applies."""
        max_nodes = o.pop("max_nodes", MEMBER_MAX_NODES.get(name))
        if name in ("policy", "order_policy") and name not in available_solvers():
            return "the learned solvers are not registered (respect_jax.api.register_solvers())"
        if max_nodes is not None and graph.num_nodes > int(max_nodes):
            return f"{graph.num_nodes} nodes > max_nodes {int(max_nodes)}"
        if exact_run.get("optimal"):
            return f"{exact_name} proved the optimum first"
        if best_obj <= bound * (1 + OPTIMAL_RTOL):
            return "the incumbent is proven optimal"
        if share and time.perf_counter() - start > fast_share * time_budget_s:
            return f"fast_share {fast_share} of the budget spent"
        if name == "gumbel":
            need, what = gumbel_need_s(graph, hw.stages, o, polish_moves)
            left = deadline - time.perf_counter()
            if need > left:
                return f"estimated {need:.1f} s ({what}); {left:.1f} s left"
        return None

    # 1. the contiguous split (NumPy, milliseconds): the exact solver's first hint
    exact_run: dict = {}

    def proved() -> bool:
        return bool(exact_run.get("optimal"))

    if "contiguous" in members:
        run_member("contiguous", {}, guarded=False)  # NumPy, O(K n log n): the incumbent every budget gets
    line_start = schedules.get("contiguous")  # where the contiguous line (polish, rebalancing) starts
    restarts: list = []  # callables returning the schedules the line restarts from (:func:`restart_line`)
    weights = [float(w) for w in orders.get(objective, ())]
    if "contiguous" in members and weights and graph.num_nodes >= int(orders_min_nodes) and hw.stages > 1 \
            and not has_unique_order(graph):
        t0 = time.perf_counter()
        orders_end = start + ORDERS_SHARE * float(time_budget_s)
        live_orders: dict = {}
        splits = live_splits(graph, hw, objective, lam, weights,
                             stop=lambda: signal() or time.perf_counter() >= orders_end, keep=live_orders)
        if macs_order[objective] and not signal():
            split, value = macs_first_split(graph, hw, objective, lam)
            splits.append(("macs", split, value))
        if hull_order[objective] and int(hull_max_cuts) > 0 and graph.num_nodes >= int(hull_min_nodes or 0) \
                and not signal():  # its cuts until ORDERS_SHARE too
            downsets = hull_downsets(graph, (graph.macs if objective == "latency" else graph.params).astype(np.int64),
                                     int(hull_max_cuts), stop=lambda: signal() or time.perf_counter() >= orders_end)
            if downsets:  # ties by the best live-byte order
                weight = min((x for x in splits if not isinstance(x[0], str)), key=lambda x: x[2],
                             default=(SINK_WEIGHTS[-1],))[0]
                ties = live_orders.get(float(weight))
                order = hull_order_of(graph, downsets, live_order(graph, float(weight)) if ties is None else ties)
                split, value = split_of_order(graph, hw, objective, lam, order)
                splits.append(("hull", split, value))
        if splits:
            weight, split, _ = min(splits, key=lambda x: x[2])  # the first of equals
            value = offer("orders", split)
            portfolio["orders"] = {"objective": value, "sink_weight": weight, "time_s": time.perf_counter() - t0}
            if line_start is None or value < portfolio["contiguous"]["objective"]:
                line_start = split
            live.show("orders", best_obj, winner, bound)
            # the line's restarts (:func:`restart_line`): the other splits, best first, then further sink weights
            others = [(v, a) for _, a, v in splits]
            if "contiguous" in schedules:
                others.append((portfolio["contiguous"]["objective"], schedules["contiguous"]))
            others = sorted((x for x in others if x[1] is not line_start), key=lambda x: x[0])
            restarts = [functools.partial(lambda a: a, a) for _, a in others]
            restarts += [functools.partial(lambda w: live_splits(graph, hw, objective, lam, [w])[0][1], float(w))
                         for w in RESTART_SINK_WEIGHTS if float(w) not in weights]
            restarts = restarts[:int(line_restarts.get(objective, 0))]
    cycles = int(rebalance[objective]) if "contiguous" in members and polish_moves > 0 else 0
    if graph.num_nodes < int(rebalance_min_nodes) or has_unique_order(graph):
        cycles = 0
    warm_up = cycles > 0 if warm_polish is None else bool(warm_polish)
    warm_up = bool(warm_up and "contiguous" in members and polish_moves > 0 and hw.stages > 1
                   and graph.num_nodes > POLISH_CLOSURE_MAX_NODES and not has_unique_order(graph))
    host_line = bool(host_line_min_nodes is not None and graph.num_nodes > int(host_line_min_nodes) and cycles > 0
                     and (host_line_max_nodes is None or graph.num_nodes <= int(host_line_max_nodes))
                     and graph.num_nodes > POLISH_CLOSURE_MAX_NODES)
    if host_line:  # nothing compiled for the line: its polish and rebalancing stay on the host
        warm_up = False

    def start_warm() -> None:
        """The contiguous line's polish compiles (seconds at 1k-10k nodes) from now on, in a thread: its polish then
        waits less. Started with the early members, i.e. not on a graph the downset programme proves at once."""
        nonlocal warm_up
        if not warm_up:
            return
        warm_up = False
        def compile_and_mark() -> None:
            try:
                compile_polish(graph, hw, objective, lam, POLISH_CHUNK, "single")
            finally:
                compiled.set()

        warm = threading.Thread(target=compile_and_mark, name="auto-polish-compile", daemon=True)
        compiling.set()
        warm.start()
        jax_calls.append(warm)

    compiling, compiled = threading.Event(), threading.Event()  # the warm compile: started / done

    def on_host() -> bool:
        """The line's first polish runs its moves on the host (:func:`host_polish`) while the warm compile runs."""
        return host_line or (bool(host_polish_moves) and compiling.is_set() and not compiled.is_set())
    rebalanced: dict = {}  # the contiguous line's rebalancing: its best objective and cycles

    def rebalance_offer(a: np.ndarray) -> None:
        rebalanced["objective"] = offer("contiguous+rebalance", a)

    rebalance_end = start + REBALANCE_SHARE * float(time_budget_s)
    restarted: dict = {}  # the line's restarts: their best objective
    restart_end = start + RESTART_SHARE * float(time_budget_s)

    def restart_stop() -> bool:
        return signal() or time.perf_counter() >= restart_end

    def restart_offer(a: np.ndarray) -> None:
        value = offer("contiguous+restart", a)
        restarted["objective"] = min(value, restarted.get("objective", np.inf))

    def rebalance_stop() -> bool:
        return signal() or time.perf_counter() >= rebalance_end

    early_stop = threading.Event()  # set when the downset programme proves the optimum: an early member stops
    early: dict[str, tuple[threading.Thread, dict, float]] = {}

    def start_early() -> None:
        """The learned members whose forward pass is compiled or stored (:func:`learned_ready`), each in a thread
        from now on (:data:`EARLY_MEMBERS`): its schedule is offered as soon as it is done (so the exact solver's
        hint has it when it is done by then)."""
        for name in members:
            o = dict(opts.get(name, {}))
            if name not in EARLY_MEMBERS or name in early or skip_reason(name, o) is not None:
                continue
            if not learned_ready(graph, hw, objective, o, name):  # cold: run in turn, as the other members
                continue
            early[name] = early_member(name, o)

    def early_member(name: str, o: dict) -> tuple[threading.Thread, dict, float]:
        t0 = time.perf_counter()
        o.setdefault("local_search", polish_moves)
        lead = min(STOP_LEAD_S, 0.1 * time_budget_s)

        def stop() -> bool:  # back by the deadline with its schedule so far (the polish and re-cuts look at it)
            return signal() or early_stop.is_set() or time.perf_counter() >= deadline - lead

        if name == "policy":  # the order policy's options routed as solver=policy does; its stop passed on
            solve, routed = get_solver("policy").forwards_to(**o)
            routed.pop("threads", None)
            if "stop" in inspect.signature(solve).parameters:  # the order family (the step policy has none)
                routed["stop"] = stop
            call = functools.partial(solve, graph, hw, objective, lam, **routed)
        else:
            call = functools.partial(get_solver(name), graph, hw, objective, lam, **o, stop=stop)
        box: dict = {}

        def target() -> None:
            try:
                result = call()
                box["time_s"] = time.perf_counter() - t0
                box["objective"] = offer(name, result.assignment)
                box["result"] = result
                live.show(name, best_obj, winner, bound)
            except Stopped:
                box["stopped"] = True
            except BaseException as err:  # noqa: BLE001  (re-raised in the caller's thread)
                box["error"] = err

        thread = threading.Thread(target=target, name=f"auto-{name}", daemon=True)
        thread.start()
        workers.append(thread)  # it looks at its stop between its steps: joined (with the grace) before return
        return thread, box, t0

    def early_entry(name: str) -> dict:
        thread, box, t0 = early[name]
        if "error" in box:
            raise box["error"]
        if "result" not in box:
            if box.get("stopped") or not thread.is_alive():
                why = "the optimum was proven first" if early_stop.is_set() or proved() else "out of time"
                return {"stopped": f"stopped before its first schedule ({why}) after {time.perf_counter() - t0:.1f} s"}
            return {"abandoned": _late(t0, proved())}
        result = box["result"]
        entry = {"objective": box["objective"], "time_s": box["time_s"], "started_s": t0 - start}
        for key in ("compile_s", "stopped", "recut"):
            if key in result.info:
                entry[key] = result.info[key]
        return entry

    # 1b. graphs with few downsets: their optimum at once (every valid schedule is a chain of downsets)
    unique = "contiguous" in portfolio and has_unique_order(graph)  # the contiguous split is then the optimum
    lattice_capped = lattice_downsets > 0 and not unique and lattice_max_nodes is not None \
        and graph.num_nodes > int(lattice_max_nodes)
    if lattice_capped:
        portfolio["lattice"] = {"skipped": f"{graph.num_nodes} nodes > lattice_max_nodes {int(lattice_max_nodes)}"}
    if lattice_downsets > 0 and not lattice_capped:
        t0 = time.perf_counter()
        if unique:
            bound = max(bound, portfolio["contiguous"]["objective"])
            portfolio["lattice"] = {"optimal": True, "downsets": graph.num_nodes + 1,
                                    "time_s": time.perf_counter() - t0,
                                    "why": "a unique topological order: the exact contiguous split is the optimum"}
        else:
            # in a thread, so that after EARLY_AFTER_S the learned members start beside it
            lattice_run: dict = {}

            def run_lattice() -> None:
                try:
                    lattice_run["found"] = search_lattice(
                        graph, hw, objective, lam, int(lattice_downsets),
                        deadline=start + LATTICE_SHARE * float(time_budget_s), upper=best_obj, lower=bound,
                        patience=LATTICE_PATIENCE[objective])
                except BaseException as err:  # noqa: BLE001  (re-raised in the caller's thread)
                    lattice_run["error"] = err

            lattice_thread = threading.Thread(target=run_lattice, name="auto-lattice", daemon=True)
            lattice_thread.start()
            lattice_thread.join(timeout=EARLY_AFTER_S)
            if lattice_thread.is_alive() or "value" not in lattice_run.get("found", {}):
                start_early()
                start_warm()
            lattice_thread.join()
            if "error" in lattice_run:
                raise lattice_run["error"]
            found = lattice_run["found"]
            if "value" not in found:
                bound = max(bound, found["lower"])
                if "incumbent" in found:  # the heuristic programme's schedule
                    portfolio["lattice_heuristic"] = {"objective": offer("lattice", found["incumbent"]["assignment"])}
                portfolio["lattice"] = {"optimal": False, "lower_bound": found["lower"],
                                        "time_s": time.perf_counter() - t0, "probes": len(found["probes"]),
                                        "why": found["probes"][-1][1] if found["probes"] else "out of time"}
            else:
                value = offer("lattice", found["assignment"])
                bound = max(bound, min(found["value"], value))
                early_stop.set()  # proven: an early member's schedule cannot be better
                portfolio["lattice"] = {"objective": value, "optimal": True, "downsets": found["downsets"],
                                        "time_s": time.perf_counter() - t0}
        live.show("lattice", best_obj, winner, bound)
    elif not unique:
        start_early()
        start_warm()
    # 2. the exact solver in a thread until the deadline or a proof, hinted with the best schedule so far; on graphs of
    # more than exact_after_line_min_nodes nodes with a rebalanced line, once that line's polish and rebalancing are
    # done (at EXACT_WAIT_SHARE of the budget at the latest): beside it, CP-SAT's workers and its model build took the
    # CPU the line needed (validation sparse 1k / 5k: the line alone reached 0.0030 / 0.0151 in ~4 s, inside auto its
    # polish came at 10 s or never), and its hint is then the line's schedule instead of the raw split
    thread = None
    exact_opts: dict = {}  # the options it ran with
    exact_state = {"started": False}
    exact_lock = threading.Lock()

    def start_exact(gated: bool = True) -> None:
        """Start the exact solver unless it has started (or been skipped) already; ``gated``: skip it when its
        estimated build (``exact_build_s_per_unit``) exceeds the time left."""
        with exact_lock:  # whole: the timer's call and the main thread's are not interleaved
            _start_exact(gated)

    def _start_exact(gated: bool) -> None:
        nonlocal thread
        if exact_state["started"]:
            return
        exact_state["started"] = True
        exact_state["started_s"] = time.perf_counter() - start
        exact_state["ungated"] = not gated
        if exact_name is None:
            portfolio["exact"] = {"skipped": "exact=none"}
        elif best_obj <= bound * (1 + OPTIMAL_RTOL):
            portfolio[exact_name] = {"skipped": "the bound already proves the incumbent optimal"}
        elif signal():
            portfolio[exact_name] = {"skipped": "not started before the deadline"}
        elif gated and (build := estimated_build_s(graph, hw.stages, per_unit)) > deadline - time.perf_counter():
            left = deadline - time.perf_counter()
            portfolio[exact_name] = {"skipped": f"its model takes about {build:.1f} s to build; {left:.1f} s left"}
        else:
            o = {k: v for k, v in opts.get(exact_name, {}).items() if k != "max_nodes"}
            lead = exact_lead_s(graph.num_nodes, time_budget_s)
            left = max(deadline - lead - time.perf_counter(), 0.01)
            o["time_limit_s"] = min(float(o.get("time_limit_s") or np.inf), left)
            o["deadline"] = deadline - lead
            if exact_name == "cpsat":
                o["stop"] = signal
                # its improving solutions as they come: kept if it is still running at the deadline (below)
                o["on_solution"] = functools.partial(exact_run.__setitem__, "incumbent")
                if cpsat_presolve_max_nodes is not None and graph.num_nodes > cpsat_presolve_max_nodes:
                    o.setdefault("presolve", False)  # its presolve alone outlasted a 10 s budget at 1,000 nodes
            o["hint" if exact_name == "cpsat" else "warm_start"] = best if best is not None else "auto"
            if exact_name == "cpsat" and progress:
                o["progress"] = lambda obj, bnd: live.show("cpsat incumbent", min(obj, best_obj), "cpsat",
                                                           max(bnd, bound))

            def run_exact() -> None:
                t0 = time.perf_counter()
                try:
                    result = get_solver(exact_name)(graph, hw, objective, lam, **o)
                except Exception as err:  # surfaced in the main thread
                    exact_run["error"] = err
                    return
                exact_run.update(result=result, time_s=time.perf_counter() - t0, optimal=bool(result.optimal))
                if result.optimal:
                    signal.set()  # proved: the bound and the members stop

            exact_opts.update(o)
            thread = threading.Thread(target=run_exact, name=f"auto-{exact_name}", daemon=True)
            thread.start()
            workers.append(thread)

    exact_waits = bool(exact_after_line_min_nodes is not None and graph.num_nodes > int(exact_after_line_min_nodes)
                       and cycles > 0)
    exact_timer = None
    if not exact_waits:
        start_exact()
        if thread is not None:
            thread.join(timeout=max(min(float(head_start_s), deadline - time.perf_counter()), 0.0))
    else:  # started by the contiguous line (below), or by this timer at the latest
        exact_timer = threading.Timer(max(start + float(wait_share) * float(time_budget_s) - time.perf_counter(), 0.0),
                                      start_exact)
        exact_timer.daemon = True
        exact_timer.start()
    # 3. the crossing bound in a thread until the deadline (or the exact solver's proof), searched up to the best
    # objective so far; with the rebalancing on, once the contiguous line is done (its host work and the bound's
    # share the interpreter: beside the bound the rebalancing ran 4x slower on a 10,000-node graph)
    bound_thread, bound_run = None, {}
    members_done = threading.Event()  # the main thread's members are done (set after the members' loop below)
    in_turn = threading.Event()  # a fast member runs in turn (in the members' loop below)
    finer = bool(bound_refine_min_stages is None or hw.stages >= int(bound_refine_min_stages)) \
        and (bool(bound_refine_spill) or no_spill(graph, hw))

    def refine_ready() -> bool:
        """The bound's finer passes may start (``bound_refine_after_members``): no learned member's thread runs, no
        member runs in turn, and none can start any more (the members' loop is done or ``fast_share`` is spent; the
        contiguous line's restarts may still run)."""
        ready = not bound_refine_after_members or (
            (members_done.is_set() or time.perf_counter() - start > fast_share * time_budget_s)
            and not in_turn.is_set() and not any(e[0].is_alive() for e in list(early.values())))
        if ready:
            bound_run.setdefault("finer_from_s", time.perf_counter() - start)
        return ready

    def start_bound() -> None:
        nonlocal bound_thread
        if bound_thread is not None or bound_run.get("started"):
            return
        bound_run["started"] = True
        if not (crossing_bound and best is not None and best_obj > bound * (1 + OPTIMAL_RTOL) and not proved()):
            return
        upper = best_obj

        def run_bound() -> None:
            try:
                left = deadline - min(STOP_LEAD_S, 0.1 * time_budget_s) - time.perf_counter()
                bound_run["found"] = crossing_lower_bound(
                    graph, hw, objective, lam, upper, left, stop=signal,
                    paper_refine_max=bound_paper_refine_max if finer else None,
                    latency_refine_max=bound_latency_refine_max if finer else None,
                    refine_when=refine_ready if finer else None)
            except Exception as err:  # surfaced in the main thread
                bound_run["error"] = err

        bound_thread = threading.Thread(target=run_bound, name="auto-bound", daemon=True)
        bound_thread.start()
        workers.append(bound_thread)

    if cycles <= 0:
        start_bound()
    moves, chunk = polish_moves, POLISH_CHUNK  # the contiguous line's first polish
    if graph.num_nodes > POLISH_CLOSURE_MAX_NODES and objective in line_moves:  # single-node moves: ~1 ms each
        moves, chunk = int(line_moves[objective]), LINE_CHUNK

    polished_so_far: dict = {}  # the contiguous line's first polish: its best objective so far
    cuts = bool(objective == "latency" and interval_cuts[objective] and hw.stages > 1
                and graph.num_nodes >= int(interval_cuts_min_nodes or 0) and not has_unique_order(graph))
    cut_memo: set = set()  # the interval re-cuts that kept nothing (:func:`interval_sweep`)
    cut_run: dict = {}

    def cuts_offer(a: np.ndarray) -> None:
        cut_run["objective"] = min(offer("contiguous+cuts", a), cut_run.get("objective", np.inf))

    restart_memo: set = set()  # the restarts' re-cuts (restart_cut_steps) that kept nothing
    coarse_memo: set = set()  # the coarse re-cuts (coarse_cut_steps) that kept nothing
    jump_moves = jump_moves_min_nodes is not None and graph.num_nodes >= int(jump_moves_min_nodes)

    def refine(a: np.ndarray, to=None) -> np.ndarray:  # the line's rounds and restarts: their schedules to `to`
        if to is restart_offer and restart_cut_steps is not None:  # a restart: fewer bisection steps, its own memo
            return cuts_until(graph, hw, objective, lam, a, moves, chunk, restart_stop, to, restart_memo,
                              int(restart_cut_steps), jump_moves)
        return cuts_until(graph, hw, objective, lam, a, moves, chunk, restart_stop, to, cut_memo, interval_cut_steps,
                          jump_moves, coarse_cut_steps, coarse_memo)

    def polish_offer(a: np.ndarray) -> None:
        polished_so_far["objective"] = offer("contiguous+ls", a)

    def contiguous_line(split: np.ndarray, cycles: int) -> None:
        """The contiguous split's local search (``contiguous+ls``) and, with ``cycles`` > 0, the rebalancing
        (``contiguous+rebalance``): first on the host (:func:`rebalance_host`, while the local search compiles; the
        polish then starts from its schedule), then with the polish in between (:func:`rebalance_until`), until the
        deadline or a proof; every better schedule is offered as it comes."""
        t0 = time.perf_counter()
        start_from = split
        cuts_converged = False  # the first interval re-cuts (below) returned before the deadline
        # with host_polish_moves, while the compiled polish compiles: the polish first (on the host), the host
        # rebalancing after it (below); otherwise the host rebalancing fills the compile time before the polish
        host_first = on_host() and (host_polish_first_max_nodes is None
                                    or graph.num_nodes <= int(host_polish_first_max_nodes))
        if cycles > 0 and not host_first:
            call = functools.partial(rebalance_host, graph, hw, objective, lam, split, cycles, rebalance_stop,
                                     rebalance_offer)
            done, out = run_until(call, deadline, "contiguous+rebalance", signal, workers)
            if not done:
                portfolio["contiguous+rebalance"] = {"stopped": "at the deadline (its schedules so far kept)"}
                return
            start_from = out
        t1 = time.perf_counter()
        # each better chunk offered as it comes: at 1,000 nodes under load the long first polish can still be
        # running at the deadline, and its progress was dropped
        call = functools.partial(polish_until, graph, hw, objective, lam, start_from, moves, signal, chunk,
                                 polish_offer, on_host)
        done, polished = run_until(call, deadline, "contiguous+ls", signal, workers)
        if not done:
            portfolio["contiguous+ls"] = {"abandoned": _late(t1, proved())}
            if "objective" in polished_so_far:
                portfolio["contiguous+ls"]["objective"] = polished_so_far["objective"]
            if cycles > 0:
                portfolio["contiguous+rebalance"] = {"time_s": t1 - t0}
            return
        value = offer("contiguous+ls", polished)
        portfolio["contiguous+ls"] = {"objective": value, "time_s": time.perf_counter() - t1}
        live.show("contiguous+ls", best_obj, winner, bound)
        if cuts and not proved() and best_obj > bound * (1 + OPTIMAL_RTOL):
            t3 = time.perf_counter()
            call = functools.partial(cuts_until, graph, hw, objective, lam, polished, moves, chunk, signal, cuts_offer,
                                     cut_memo, interval_cut_steps, jump_moves, coarse_cut_steps, coarse_memo)
            done, out = run_until(call, deadline, "contiguous+cuts", signal, workers)
            portfolio["contiguous+cuts"] = {"time_s": time.perf_counter() - t3}
            cuts_converged = done and not signal()
            if "objective" in cut_run:
                portfolio["contiguous+cuts"]["objective"] = cut_run["objective"]
            if not done:
                portfolio["contiguous+cuts"]["stopped"] = "at the deadline (its schedules so far kept)"
                return
            polished = out
            live.show("contiguous+cuts", best_obj, winner, bound)
        if after_polish:  # a waiting exact solver starts now (dense graphs), hinted with the polished schedule
            start_exact()
        if cycles <= 0:
            return
        if proved() or best_obj <= bound * (1 + OPTIMAL_RTOL):
            portfolio["contiguous+rebalance"] = {"time_s": t1 - t0}
            return
        if host_line:
            # the line's re-cuts converged on a graph of at most exact_after_cuts_max_nodes nodes: the exact solver
            # starts now whatever its build gate says (hinted with the line's schedule)
            start_exact(not (cuts_converged and exact_after_cuts_max_nodes is not None
                             and graph.num_nodes <= int(exact_after_cuts_max_nodes)))
            if bound_early_max_nodes is None or graph.num_nodes <= int(bound_early_max_nodes):
                start_bound()
            t2 = time.perf_counter()
            call = functools.partial(host_rounds, graph, hw, objective, lam, polished, restarts, cycles, moves, chunk,
                                     restart_stop, rebalance_offer, restart_offer, refine if cuts else None)
            done, out = run_until(call, deadline, "contiguous+rebalance", signal, workers)
            entry = portfolio["contiguous+rebalance"] = {"time_s": time.perf_counter() - t0, "host_only": True}
            if done:
                entry["cycles"] = out[1]
                portfolio["contiguous+restart"] = {"time_s": time.perf_counter() - t2, "restarts": out[2]}
                if "objective" in restarted:
                    portfolio["contiguous+restart"]["objective"] = restarted["objective"]
            else:
                entry["stopped"] = "at the deadline (its schedules so far kept)"
            live.show("contiguous+rebalance", best_obj, winner, bound)
            return
        if host_first and not compiled.is_set():  # the host rebalancing until the compile is done, then a polish
            call = functools.partial(rebalance_host, graph, hw, objective, lam, polished, cycles,
                                     lambda: rebalance_stop() or compiled.is_set(), rebalance_offer)
            done, out = run_until(call, deadline, "contiguous+rebalance", signal, workers)
            if not done:
                portfolio["contiguous+rebalance"] = {"stopped": "at the deadline (its schedules so far kept)"}
                return
            if not np.array_equal(out, polished):
                call = functools.partial(polish_until, graph, hw, objective, lam, out, moves, signal, chunk,
                                         polish_offer, on_host)
                done, polished = run_until(call, deadline, "contiguous+ls", signal, workers)
                if not done:
                    portfolio["contiguous+rebalance"] = {"stopped": "at the deadline (its schedules so far kept)"}
                    return
            # the rebalancing below polishes with the compiled search: wait for the warm compile rather than compile
            # it a second time here
            compiled.wait(timeout=max(min(rebalance_end, deadline) - time.perf_counter(), 0.0))
        call = functools.partial(rebalance_until, graph, hw, objective, lam, polished, polish_moves, cycles,
                                 rebalance_stop, rebalance_offer)
        done, out = run_until(call, deadline, "contiguous+rebalance", signal, workers)
        entry = portfolio["contiguous+rebalance"] = {"time_s": time.perf_counter() - t0}
        if done:
            entry["cycles"] = out[1]
        else:
            entry["stopped"] = "at the deadline (its schedules so far kept)"
        live.show("contiguous+rebalance", best_obj, winner, bound)
        start_exact()  # when it waited for the line (exact_after_line_min_nodes): hinted with the line's schedule
        # the crossing bound starts here, beside the restarts (started after them it got ~1 s of 10 and stopped at
        # the hull value on the validation NAS graphs at K = 8: HC, session 29); on graphs of more than
        # bound_early_max_nodes nodes after them (its host work slowed the restarts there)
        if bound_early_max_nodes is None or graph.num_nodes <= int(bound_early_max_nodes):
            start_bound()
        if not done or not restarts or restart_stop() or proved() or best_obj <= bound * (1 + OPTIMAL_RTOL):
            return
        t2 = time.perf_counter()
        call = functools.partial(restart_line, graph, hw, objective, lam, restarts, moves, chunk, polish_moves,
                                 cycles, restart_stop, restart_offer)
        done, count = run_until(call, deadline, "contiguous+restart", signal, workers)
        entry = portfolio["contiguous+restart"] = {"time_s": time.perf_counter() - t2}
        entry["restarts"] = count if done else "stopped at the deadline (its schedules so far kept)"
        if "objective" in restarted:
            entry["objective"] = restarted["objective"]
        live.show("contiguous+restart", best_obj, winner, bound)

    # 4. the other fast members, concurrently (the local-search polish of the contiguous split first)
    for name in members:
        o = dict(opts.get(name, {}))
        # the contiguous line starts whenever its split is ready (it offers each better schedule as it comes and stops
        # at the deadline): at 10k nodes under load (~10) the orders could end past fast_share, and the line was skipped
        if name != "contiguous":  # before its fast_share check: the bound's finer passes wait (refine_ready)
            in_turn.set()
        try:
            reason = skip_reason(name, o, share=name != "contiguous")
            if name == "contiguous":
                if polish_moves > 0 and reason is None and best is not None:
                    contiguous_line(line_start, cycles)
                start_exact()
                start_bound()
                continue
            if name in early:  # running since the start (:func:`start_early`); collected at the end
                continue
            if reason is not None:
                portfolio[name] = {"skipped": reason}
                continue
            run_member(name, o)
        finally:
            in_turn.clear()
    start_exact()  # when it waited for a line that did not run
    if exact_timer is not None:
        exact_timer.cancel()
    start_bound()  # when the contiguous line did not run
    members_done.set()  # the bound's finer passes wait for this (and the learned members' threads)
    # 5. wait for the exact solver and the bound until the deadline (or the proof), stop every worker, join them
    for t in (thread, bound_thread, *(e[0] for e in early.values())):
        if t is not None:
            t.join(timeout=max(deadline - time.perf_counter(), 0.0))
    signal.set()
    grace_end = time.perf_counter() + JOIN_GRACE_S
    for t in workers:
        t.join(timeout=max(grace_end - time.perf_counter(), 0.0))
    running = sorted({t.name for t in workers + jax_calls if t.is_alive()})
    for t in workers + jax_calls:
        if t.is_alive():
            abandon(t)
    for name in early:
        portfolio[name] = early_entry(name)
    if "contiguous+rebalance" in portfolio and "objective" in rebalanced:  # its schedules offered as they came
        portfolio["contiguous+rebalance"]["objective"] = rebalanced["objective"]
    if bound_thread is not None:
        if "error" in bound_run:
            raise bound_run["error"]
        if "found" not in bound_run:  # still running after the grace: abandoned (its result is dropped)
            portfolio["bound"] = {"abandoned": "the crossing bound was still running at the deadline"}
        else:
            found = bound_run["found"]
            portfolio["bound"] = {"crossing": found["bound"], "calls": found["calls"], "cuts": found["cuts"],
                                  "time_s": found["time_s"]}
            if finer:  # when its finer passes could start (None: the bound ended or stopped first)
                portfolio["bound"]["finer_from_s"] = bound_run.get("finer_from_s")
            if "before_finer" in found:  # its bound when they started
                portfolio["bound"]["before_finer"] = found["before_finer"]
            bound = max(bound, found["bound"])
            live.show("crossing bound", best_obj, winner, bound)
    optimal = best_obj <= bound * (1 + OPTIMAL_RTOL)
    if thread is not None and thread.is_alive():  # still running after the grace: abandoned above
        kept = exact_run.get("incumbent")  # CP-SAT's best solution and bound so far, reported by its search
        if kept is None:
            portfolio[exact_name] = {"abandoned": "still running at the deadline, no solution yet; nothing kept"}
        else:
            bound = max(bound, float(kept.bound))
            portfolio[exact_name] = {"abandoned": "still running at the deadline; its best solution so far is kept",
                                     "objective": offer(exact_name, kept.assignment()), "bound": float(kept.bound)}
    elif thread is not None:
        if "error" in exact_run:
            raise exact_run["error"]
        result = exact_run["result"]
        value = offer(exact_name, result.assignment)
        exact_bound = result.info.get("best_bound", result.info.get("dual_bound"))
        if exact_bound is not None:
            exact_bound = float(exact_bound) - float(result.info.get("rounding_error_bound") or 0.0)
            bound = max(bound, exact_bound)
        if result.optimal:  # its proven optimum: nothing is better, whichever member found it
            bound = max(bound, min(value, best_obj))
            optimal = True
        portfolio[exact_name] = {
            "objective": value,
            "time_s": exact_run["time_s"],
            "status": result.info.get("status"),
            "bound": exact_bound,
            "optimal": result.optimal,
        }
        if exact_name == "cpsat":
            portfolio[exact_name]["presolve"] = bool(exact_opts.get("presolve", True))
        if exact_waits:
            portfolio[exact_name]["started_s"] = exact_state["started_s"]
        if exact_state.get("ungated"):
            portfolio[exact_name]["ungated"] = True
        live.show(f"{exact_name} done", best_obj, winner, bound)

    bound = min(bound, best_obj)  # float noise: a bound never claims more than the incumbent
    gap = max((best_obj - bound) / best_obj, 0.0) if best_obj > 0 else 0.0
    optimal = bool(optimal or gap <= OPTIMAL_RTOL)
    info = {
        "winner": winner,
        "lower_bound": bound,
        "analytic_lower_bound": analytic,
        "certified_gap": gap,
        "time_budget_s": float(time_budget_s),
        "elapsed_s": time.perf_counter() - start,
        "first_incumbent_s": first_incumbent.get("s"),
        "running_after_return": running,
        "portfolio": portfolio,
    }
    return SolveResult(best, optimal=optimal, gap=gap, info=info)
