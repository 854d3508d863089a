"""``solver=policy``: the learned scheduler behind the common solver signature.

Importing this module registers it (``respect_jax.solvers`` never imports the policy; the CLI
imports this module before looking solvers up). Options (conf/solver/policy.yaml):

* ``checkpoint``: a run folder written by ``respect-train`` (default: the shipped checkpoint);
* ``decoding``: ``greedy`` | ``sample`` | ``best_of`` | ``beam`` | ``sbs``; ``samples`` (best_of and sbs
  candidates, beam width); ``temperature``; ``seed``;
  ``local_search`` (hill-climbing moves on every candidate, 0: none); ``pair_escapes`` (pair moves
  out of the local optima of the best ``pair_candidates`` candidates, 0: none; see
  :mod:`respect_jax.solvers.local_search`).

The policy runs under the caller's hardware and objective (its features are normalised per
graph and hardware), even when they differ from those it was trained on; ``info`` records both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from respect_jax.costs import OBJECTIVES, Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import pad_graph, to_original_order
from respect_jax.policy.decoding import MULTI_STRATEGIES, Decoding, make_decoder
from respect_jax.solvers.base import SolveResult, register_solver

DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[2] / "data" / "checkpoints" / "respect_k4_paper_cut"


@functools.lru_cache(maxsize=8)
def _load(checkpoint: str):
    from respect_jax.train.checkpoints import load_policy

    return load_policy(checkpoint)


@functools.lru_cache(maxsize=32)
def _decoder(checkpoint: str, hw: Hardware, objective: str, lam: float, decoding: Decoding):
    model, _ = _load(checkpoint)
    return make_decoder(model, hw, objective, lam, decoding)


def checkpoint_solver(default_checkpoint: Path, load: Callable, decoder: Callable, summary: str) -> Callable:
    """The solver function of a learned model family (shared by ``policy`` and ``respect_pointer``).

    ``load(checkpoint) -> (model, doc)`` and ``decoder(checkpoint, hw, objective, lam, Decoding) ->
    (run, params)`` are the family's cached loader and batched decoder factory; ``summary`` becomes the
    solver's docstring. The options are those of ``conf/solver/policy.yaml``.
    """

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
        _, doc = load(checkpoint)
        run, params = decoder(checkpoint, hw, objective, float(lam), dec)
        padded = pad_graph(graph)
        batch = jax.tree.map(lambda x: np.asarray(x)[None], padded)
        out = jax.device_get(run(params, batch, jax.random.PRNGKey(seed)))
        assignment = to_original_order(padded, np.asarray(out.stage)[0])
        info = {
            "checkpoint": checkpoint,
            "checkpoint_step": doc.get("step"),
            "decoding": dec.label,
            "temperature": temperature,
            "local_search": int(local_search),
            "pair_escapes": int(pair_escapes),
            "pair_candidates": int(pair_candidates),
            "trained_on": {"objective": doc["objective"], "lam": doc["lam"], "hardware": doc["hardware"]},
        }
        return SolveResult(assignment=assignment, optimal=None, gap=None, info=info)

    solve.__doc__ = summary
    return solve


solve_policy = register_solver("policy")(
    checkpoint_solver(
        DEFAULT_CHECKPOINT,
        _load,
        _decoder,
        "Schedule ``graph`` with a trained policy (valid by construction; not a proof of optimality).",
    )
)
