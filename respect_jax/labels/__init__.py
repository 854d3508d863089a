"""Labelled datasets (graphs + oracle schedules) and the ``respect-label`` pipeline."""

from respect_jax.labels.dataset import (
    LabelledGraph,
    load_labelled_dataset,
    read_manifest,
    shard_paths,
    write_manifest,
    write_shard,
)

__all__ = ["LabelledGraph", "load_labelled_dataset", "read_manifest", "shard_paths", "write_manifest", "write_shard"]
