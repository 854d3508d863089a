"""``solver=policy``: the learned scheduler behind the common solver signature.

Importing this module registers it (``respect_jax.solvers`` never imports the policy; the CLI
imports this module before looking solvers up). ``checkpoint`` names a run folder of either learned family,
recognised by its ``network.json``:

* the **order policy** (the default, ``data/checkpoints/order_policy``; :mod:`respect_jax.policy.order_solver`):
  one network for every K, hardware and objective scores the nodes, the scores give topological orders and the
  exact contiguous programme splits them. ``decoding``: ``sample`` (the default: the greedy order and
  ``samples`` = 32 orders of the scores plus Gaussian noise of deviation ``noise`` = 0.2, the best kept) or
  ``greedy`` (the greedy order alone); ``local_search`` hill-climbing moves then polish the best split (default
  :data:`ORDER_DEFAULT_LOCAL_SEARCH`; 0: none) with the neighbourhood ``ls_moves`` (default ``single``: one node to
  an adjacent stage, plus at most ``ls_escapes`` screened closure moves out of local optima, the best of
  ``ls_screen``; see :func:`respect_jax.local_search.polish`); compiled ahead, its compilation in ``compile_s``.
  The default decoding was chosen on the validation architectures (``data/models_val``; never on the bundled
  models, the test set): ``experiments/results/order_policy_decoding_val.md`` (orders, noise) and
  ``experiments/results/order_policy_polish_val.md`` (the polish).
* the **step-by-step GNN policy** of ``respect-train`` (e.g. ``data/checkpoints/respect_k4_paper_cut``, the
  earlier default): ``decoding`` ``greedy`` (its default) | ``sample`` | ``best_of`` | ``beam`` | ``sbs``;
  ``samples`` (best_of and sbs candidates, beam width; default 64); ``temperature``; ``local_search``
  (hill-climbing moves on every candidate, 0: none); ``pair_escapes`` (pair moves out of the local optima of
  the best ``pair_candidates`` candidates, 0: none; see :mod:`respect_jax.local_search`).

The step policy runs under the caller's hardware and objective (its features are normalised per graph and
hardware), even when they differ from those it was trained on; ``info.trained_on`` records both. The order
policy takes K, the hardware and the objective as inputs. ``info.family`` says which family scheduled.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import numpy as np

from respect_jax.compile_cache import cached_compile
from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import (
    PaddedGraph,
    bucket_shape,
    bucket_size,
    pad_graph,
    to_original_order,
)
from respect_jax.policy.config import MULTI_STRATEGIES, Decoding
from respect_jax.policy.order import is_order_checkpoint
from respect_jax.policy.order_solver import (  # at import: not timed
    DEFAULT_ORDER_CHECKPOINT,
    WINDOW_OPTION_NAMES,
    forward_ready_for,
    solve_order_policy,
    window_options,
)
from respect_jax.resources import data_path
from respect_jax.solvers.base import SolveResult, register_solver

# the step policy's shipped run: what ``checkpoint_solver`` falls back to (``solver=policy`` passes a folder)
DEFAULT_CHECKPOINT = data_path("checkpoints", "respect_k4_paper_cut")
ORDER_DECODINGS = ("sample", "greedy")
# the order policy's default decoding, chosen on data/models_val (experiments/results/order_policy_decoding_val.md)
ORDER_DEFAULT_SAMPLES = 32
ORDER_DEFAULT_NOISE = 0.2
# ... then the polish, chosen on data/models_val (experiments/results/order_policy_polish_val.md)
ORDER_DEFAULT_LOCAL_SEARCH = 100
ORDER_DEFAULT_LS_MOVES = "single"
ORDER_DEFAULT_LS_SCREEN = 16
ORDER_DEFAULT_LS_ESCAPES = 10
STEP_DEFAULT_SAMPLES = 64


@functools.lru_cache(maxsize=8)
def _load(checkpoint: str):
    """(policy, network document) of a run folder (:func:`respect_jax.policy.checkpoints.load_policy`: built
    abstractly, so loading runs no random initialisation: 34 jitted initialisers, over 1 s of a CPU command's
    start)."""
    from respect_jax.policy.checkpoints import load_policy

    return load_policy(checkpoint)


@functools.lru_cache(maxsize=32)
def _decoder(checkpoint: str, hw: Hardware, objective: str, lam: float, decoding: Decoding):
    from respect_jax.policy.decoding import make_decoder  # the network (flax) only when this solver runs

    model, _ = _load(checkpoint)
    return make_decoder(model, hw, objective, lam, decoding)


def grouped_by_bucket(graphs: Sequence[Graph]) -> dict[tuple[int, int, int], list[int]]:
    """Indices of ``graphs`` grouped by padded shape (N, E, P): by node bucket first, then the edge and
    predecessor padding that fits every graph of that node bucket (one compilation per group)."""
    by_nodes: dict[int, list[int]] = {}
    for i, graph in enumerate(graphs):
        by_nodes.setdefault(bucket_size(graph.num_nodes), []).append(i)
    return {bucket_shape([graphs[i] for i in idx]): idx for idx in by_nodes.values()}


def checkpoint_solver(default_checkpoint: Path, load: Callable, decoder: Callable, summary: str) -> Callable:
    """The solver function of a learned model family (shared by ``policy`` and ``respect_pointer``).

    ``load(checkpoint) -> (model, doc)`` and ``decoder(checkpoint, hw, objective, lam, Decoding) ->
    (run, params)`` are the family's cached loader and batched decoder factory (``run`` a ``jax.jit``
    function ``(params, graphs, key) -> DecodeResult``); ``summary`` becomes the solver's docstring. The
    options are those of ``conf/solver/policy.yaml``.

    The returned ``solve`` reports its set-up in ``info`` apart from the scheduling (see
    :data:`respect_jax.solvers.base.SETUP_KEYS`): ``load_s`` (reading the checkpoint; 0 once this
    process has it) and ``compile_s`` (tracing and compiling the decoder for the graph's bucket shape
    ahead of the call, or loading it from JAX's persistent compilation cache; 0 once this process has
    it). Its ``many`` attribute schedules a list of graphs in batches (:func:`run_solver_many`).
    """
    compiled: dict[tuple, Callable] = {}

    def prepare(checkpoint, hw, objective, lam, decoding, samples, temperature, local_search, pair_escapes,
                pair_candidates) -> tuple[str, Decoding, dict, float]:
        """(checkpoint path, Decoding, checkpoint doc, seconds spent loading it)."""
        checkpoint = str(Path(checkpoint if checkpoint else default_checkpoint).resolve())
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
        dec = Decoding(
            strategy=decoding,
            samples=int(samples) if decoding in MULTI_STRATEGIES else 1,
            temperature=temperature,
            local_search=int(local_search),
            pair_escapes=int(pair_escapes),
            pair_candidates=int(pair_candidates),
        )
        start = time.perf_counter()
        _, doc = load(checkpoint)
        return checkpoint, dec, doc, time.perf_counter() - start

    def executable(checkpoint: str, hw: Hardware, objective: str, lam: float, dec: Decoding, batch: PaddedGraph,
                   key: jax.Array) -> tuple[Callable, object, float]:
        """(compiled decoder for ``batch``'s shapes, params, seconds spent tracing and compiling it now)."""
        run, params = decoder(checkpoint, hw, objective, float(lam), dec)
        shapes = tuple((x.shape, str(x.dtype)) for x in jax.tree.leaves(batch))
        cache_key = (checkpoint, hw, objective, float(lam), dec, shapes)
        start = time.perf_counter()
        if cache_key not in compiled:
            _, doc = load(checkpoint)
            # what ``run`` closes over: the network's architecture (its format and config), the hardware, objective,
            # lam and decoding; the parameters are arguments, so checkpoints of one architecture share the executable
            static = (doc.get("format"), json.dumps(doc["policy"], sort_keys=True), hw, objective, float(lam), dec)
            compiled[cache_key] = cached_compile("checkpoint_decode", run, (params, batch, key), static_key=static)
        return compiled[cache_key], params, time.perf_counter() - start

    def info_of(checkpoint: str, doc: dict, dec: Decoding, temperature, local_search, pair_escapes,
                pair_candidates) -> dict:
        return {
            "checkpoint": checkpoint,
            "checkpoint_step": doc.get("step"),
            "decoding": dec.label,
            "temperature": temperature,
            "local_search": int(local_search),
            "pair_escapes": int(pair_escapes),
            "pair_candidates": int(pair_candidates),
            "trained_on": {"objective": doc["objective"], "lam": doc["lam"], "hardware": doc["hardware"],
                           "trained_across": doc.get("trained_across")},
        }

    def solve(
        graph: Graph,
        hw: Hardware,
        objective: str = "paper",
        lam: float = 1.0,
        checkpoint: str | None = None,
        decoding: str = "greedy",
        samples: int = 64,
        temperature: float = 1.0,
        seed: int = 0,
        local_search: int = 0,
        pair_escapes: int = 0,
        pair_candidates: int = 1,
    ) -> SolveResult:
        checkpoint, dec, doc, load_s = prepare(
            checkpoint, hw, objective, lam, decoding, samples, temperature, local_search, pair_escapes, pair_candidates
        )
        padded = pad_graph(graph)
        batch = jax.tree.map(lambda x: np.asarray(x)[None], padded)
        key = jax.random.PRNGKey(seed)
        run, params, compile_s = executable(checkpoint, hw, objective, lam, dec, batch, key)
        out = jax.device_get(run(params, batch, key))
        assignment = to_original_order(padded, np.asarray(out.stage)[0])
        info = info_of(checkpoint, doc, dec, temperature, local_search, pair_escapes, pair_candidates)
        info.update(load_s=load_s, compile_s=compile_s, bucket=list(bucket_shape([graph])))
        return SolveResult(assignment=assignment, optimal=None, gap=None, info=info)

    def many(
        graphs: Sequence[Graph],
        hw: Hardware,
        objective: str = "paper",
        lam: float = 1.0,
        batch_size: int = 256,
        checkpoint: str | None = None,
        decoding: str = "greedy",
        samples: int = 64,
        temperature: float = 1.0,
        seed: int = 0,
        local_search: int = 0,
        pair_escapes: int = 0,
        pair_candidates: int = 1,
    ) -> list[SolveResult]:
        """Schedule every graph of ``graphs`` (in order), ``batch_size`` graphs of one size bucket per
        compiled call (one compilation per bucket shape; a bucket's last, partial batch is padded with
        copies of its graphs so that it reuses the compilation).

        Every result's ``info`` holds ``schedule_s`` (its share of its batch's wall time: stacking,
        decoding, copying back), ``compile_s`` and ``load_s`` (the set-up of its bucket, spent once for
        all the bucket's graphs; not in ``schedule_s``), ``bucket`` (the padded shape N, E, P) and
        ``batch_graphs`` (real graphs in its batch). Every batch decodes with the key of ``seed``, so
        sampled schedules depend on the batching; greedy and beam decoding do not (deterministic).
        """
        if not graphs:
            raise ValueError("no graphs to schedule")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        checkpoint, dec, doc, load_s = prepare(
            checkpoint, hw, objective, lam, decoding, samples, temperature, local_search, pair_escapes, pair_candidates
        )
        base_info = info_of(checkpoint, doc, dec, temperature, local_search, pair_escapes, pair_candidates)
        results: list[SolveResult | None] = [None] * len(graphs)
        key = jax.random.PRNGKey(seed)
        for shape, indices in grouped_by_bucket(graphs).items():
            size = min(int(batch_size), len(indices))
            run = None
            for lo in range(0, len(indices), size):
                chunk = indices[lo : lo + size]
                start = time.perf_counter()
                padded = [pad_graph(graphs[chunk[j % len(chunk)]], shape) for j in range(size)]
                batch = jax.tree.map(lambda *xs: np.stack(xs), *padded)
                stacking_s = time.perf_counter() - start
                if run is None:  # timed apart: set-up, not scheduling
                    run, params, compile_s = executable(checkpoint, hw, objective, lam, dec, batch, key)
                start = time.perf_counter()
                stages = np.asarray(jax.device_get(run(params, batch, key).stage))
                assignments = [to_original_order(padded[j], stages[j]) for j in range(len(chunk))]
                share = (stacking_s + time.perf_counter() - start) / len(chunk)
                for i, assignment in zip(chunk, assignments, strict=True):
                    info = {
                        **base_info,
                        "schedule_s": share,
                        "compile_s": compile_s,
                        "load_s": load_s,
                        "bucket": list(shape),
                        "batch_graphs": len(chunk),
                    }
                    results[i] = SolveResult(assignment=assignment, optimal=None, gap=None, info=info)
        return results

    solve.__doc__ = summary
    solve.many = many
    return solve


solve_step_policy = checkpoint_solver(
    DEFAULT_CHECKPOINT,
    _load,
    _decoder,
    "Schedule ``graph`` with a trained step-by-step policy (valid by construction; not a proof of optimality).",
)


def _route(
    *,
    checkpoint: str | None = None,
    decoding: str | None = None,
    samples: int | None = None,
    noise: float = ORDER_DEFAULT_NOISE,
    temperature: float = 1.0,
    seed: int = 0,
    local_search: int | None = None,
    ls_moves: str | None = None,
    ls_screen: int | None = None,
    ls_escapes: int | None = None,
    ls_boundaries: int | None = None,
    ls_rebalance: int | None = None,
    pair_escapes: int = 0,
    pair_candidates: int = 1,
    threads: int | None = None,
    **ls_window_options,
) -> tuple[Callable, dict]:
    """(solver function of the checkpoint's family, its options) for ``solver=policy``'s options (the
    options of ``conf/solver/policy.yaml``; ``decoding`` / ``samples`` / ``local_search`` None: the family's
    default; ``ls_moves`` / ``ls_screen`` / ``ls_escapes``: the order policy's only, None: its default;
    ``threads``: the order policy's decoding threads over many graphs (:func:`_many_policy`; None: its default),
    not an option of one graph's call; ``ls_window_options``: the order policy's ``ls_window*`` options,
    :func:`~respect_jax.policy.order_solver.window_options`)."""
    unknown = sorted(set(ls_window_options) - set(WINDOW_OPTION_NAMES))
    if unknown:
        raise TypeError(f"solver policy: unexpected option(s) {', '.join(unknown)}")
    path = checkpoint if checkpoint else DEFAULT_ORDER_CHECKPOINT
    if not Path(path).exists():
        raise ValueError(f"checkpoint {path} does not exist")
    if is_order_checkpoint(path):
        decoding = decoding or "sample"
        if decoding not in ORDER_DECODINGS:
            raise ValueError(f"decoding={decoding} needs a step-policy checkpoint (e.g. checkpoint="
                             f"{DEFAULT_CHECKPOINT}); the order policy decodes {' or '.join(ORDER_DECODINGS)}")
        if int(pair_escapes) > 0:
            raise ValueError("pair_escapes needs a step-policy checkpoint; the order policy takes local_search only")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be an integer >= 1 or null, got {threads!r}")
        order_samples = 0 if decoding == "greedy" else (ORDER_DEFAULT_SAMPLES if samples is None else int(samples))
        # greedy alone means greedy alone: the polish belongs to the default (sampled) decoding
        default_ls = 0 if decoding == "greedy" else ORDER_DEFAULT_LOCAL_SEARCH
        return solve_order_policy, {
            "checkpoint": str(path), "samples": order_samples, "noise": noise, "seed": seed,
            "local_search": default_ls if local_search is None else int(local_search),
            "ls_moves": ORDER_DEFAULT_LS_MOVES if ls_moves is None else ls_moves,
            "ls_screen": ORDER_DEFAULT_LS_SCREEN if ls_screen is None else int(ls_screen),
            "ls_escapes": ORDER_DEFAULT_LS_ESCAPES if ls_escapes is None else int(ls_escapes),
            "ls_boundaries": ls_boundaries, "ls_rebalance": ls_rebalance, **ls_window_options,
            **({} if threads is None else {"threads": threads})}
    if any(x is not None for x in (ls_moves, ls_screen, ls_escapes, ls_boundaries, ls_rebalance, threads,
                                   *ls_window_options.values())):
        raise ValueError("ls_moves, ls_screen, ls_escapes, ls_boundaries, ls_rebalance, ls_window, ls_window_limit, "
                         "ls_window_free, ls_window_widths, ls_window_max_nodes, ls_window_escalate*, "
                         "ls_window_probing, ls_window_presolve "
                         "and threads need an order-policy checkpoint; the step policy takes local_search and "
                         "pair_escapes")
    local_search = 0 if local_search is None else local_search
    return solve_step_policy, {
        "checkpoint": str(path), "decoding": decoding or "greedy",
        "samples": STEP_DEFAULT_SAMPLES if samples is None else samples, "temperature": temperature, "seed": seed,
        "local_search": local_search, "pair_escapes": pair_escapes, "pair_candidates": pair_candidates}


def _family(solve: Callable) -> str:
    return "step" if solve is solve_step_policy else "order"


@register_solver("policy")
def solve_policy(graph: Graph, hw: Hardware, objective: str = "paper", lam: float = 1.0, **options) -> SolveResult:
    """Schedule ``graph`` with a trained policy of either family (valid by construction; not a proof of
    optimality); ``options``: those of :func:`_route`."""
    solve, routed = _route(**options)
    routed.pop("threads", None)  # one graph: nothing to spread over threads
    result = solve(graph, hw, objective, lam, **routed)
    result.info["family"] = _family(solve)
    return result


def _many_policy(graphs: Sequence[Graph], hw: Hardware, objective: str = "paper", lam: float = 1.0,
                 batch_size: int | None = None, **options) -> list[SolveResult]:
    """Every graph of ``graphs`` in batches of one size bucket (the family's ``many`` form; ``batch_size`` None: the
    family's own default)."""
    solve, routed = _route(**options)
    batching = {} if batch_size is None else {"batch_size": batch_size}
    results = solve.many(graphs, hw, objective, lam, **batching, **routed)
    for result in results:
        result.info["family"] = _family(solve)
    return results


solve_policy.forwards_to = _route
_route.forwards_to = window_options  # the ``ls_window*`` options _route passes on (the option check's names)
solve_policy.many = _many_policy
# the order family's readiness (solver=auto's early start); a step-policy checkpoint is never ready
solve_policy.ready = forward_ready_for
