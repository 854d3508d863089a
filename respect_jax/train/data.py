"""Labelled datasets on the device: graphs padded per size bucket with their oracle schedules."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from respect_jax import pytree as struct
from respect_jax.costs import Hardware
from respect_jax.graphs.graph import Graph
from respect_jax.graphs.padded import PaddedGraph, bucket_shape, bucket_size, pad_graph, to_position_order
from respect_jax.labels.dataset import LabelledGraph, load_labelled_dataset, read_manifest


@struct.dataclass
class LabelledBatch:
    """Graphs of one size bucket with reference schedules (leading axis D).

    Attributes:
        graphs: PaddedGraph [D, ...].
        labels: i32[D, N] reference stage by position (0 on padding).
        reference: f32[D] objective of the reference schedule (NaN when unknown).
    """

    graphs: PaddedGraph
    labels: jax.Array
    reference: jax.Array

    @property
    def size(self) -> int:
        return int(self.labels.shape[0])


def make_batches(
    graphs: Sequence[Graph],
    assignments: Sequence[np.ndarray | None] | None = None,
    reference: Sequence[float | None] | None = None,
) -> list[tuple[LabelledBatch, list[int]]]:
    """Group graphs by node bucket and pad each group to one shape.

    Returns a list of ``(batch, indices)``: ``indices`` are the positions in ``graphs`` of the
    batch's rows. Missing assignments become all-zero labels; missing references NaN.
    """
    groups: dict[int, list[int]] = defaultdict(list)
    for i, g in enumerate(graphs):
        groups[bucket_size(g.num_nodes)].append(i)
    out = []
    for n_bucket in sorted(groups):
        idx = groups[n_bucket]
        shape = bucket_shape([graphs[i] for i in idx])
        padded = [pad_graph(graphs[i], shape) for i in idx]
        labels = np.zeros((len(idx), shape[0]), np.int32)
        ref = np.full(len(idx), np.nan, np.float32)
        for row, (i, p) in enumerate(zip(idx, padded, strict=True)):
            if assignments is not None and assignments[i] is not None:
                labels[row] = to_position_order(p, assignments[i])
            if reference is not None and reference[i] is not None:
                ref[row] = reference[i]
        stacked = jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs)), *padded)
        out.append((LabelledBatch(graphs=stacked, labels=jnp.asarray(labels), reference=jnp.asarray(ref)), idx))
    return out


def check_manifest(directory: str | Path, hw: Hardware, objective: str, lam: float) -> dict:
    """Read a labelled dataset's manifest and check it was labelled for this problem.

    Raises ValueError when its stage count, objective or lam differ from the training setting
    (labels of another problem would teach the wrong schedules).
    """
    manifest = read_manifest(directory)
    hw_m = manifest.get("hardware") or {}
    problems = []
    if "stages" in hw_m and int(hw_m["stages"]) != hw.stages:
        problems.append(f"hardware.stages={hw_m['stages']} (training uses {hw.stages})")
    if "objective" in manifest and manifest["objective"] != objective:
        problems.append(f"objective={manifest['objective']} (training uses {objective})")
    if "lam" in manifest and float(manifest["lam"]) != float(lam):
        problems.append(f"lam={manifest['lam']} (training uses {lam})")
    keys = ("param_bytes", "act_bytes")
    if objective == "latency":
        keys += ("sram_bytes", "macs_per_s", "host_bw", "link_bw", "stage_overhead_s")
    for key in keys:
        if key in hw_m and not np.isclose(float(hw_m[key]), float(getattr(hw, key))):
            problems.append(f"hardware.{key}={hw_m[key]} (training uses {getattr(hw, key)})")
    if problems:
        raise ValueError(f"labelled dataset {directory} was made for another problem: {'; '.join(problems)}")
    return manifest


def load_labelled_batches(
    directories: Sequence[str | Path], hw: Hardware, objective: str, lam: float, limit: int | None = None
) -> list[LabelledBatch]:
    """Load labelled datasets (checked against the problem) into per-bucket device batches."""
    items: list[LabelledGraph] = []
    for d in directories:
        check_manifest(d, hw, objective, lam)
        items.extend(load_labelled_dataset(d, limit=limit))
    if not items:
        raise ValueError(f"no labelled graphs found in {', '.join(map(str, directories))}")
    batches = make_batches([it.graph for it in items], [it.assignment for it in items], [it.objective for it in items])
    return [b for b, _ in batches]
