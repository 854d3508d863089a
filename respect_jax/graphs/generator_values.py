"""A :class:`~respect_jax.graphs.generators.GeneratorConfig` from plain values (a config file's mapping).

The ``graphs`` config group (``conf/graphs/*.yaml``) holds the fields of ``GeneratorConfig``; a command line
turns the composed node into a plain ``dict`` and calls :func:`generator_config_from_values`, which checks the
field names and value types (one-line ``ValueError``) before ``GeneratorConfig`` checks the ranges.
"""

from __future__ import annotations

from collections.abc import Mapping

from respect_jax.graphs.generators import GeneratorConfig

INTEGER_FIELDS = ("min_nodes", "max_nodes", "min_levels", "max_levels", "max_preds", "num_resolutions")


def generator_config_from_values(values: Mapping[str, object], what: str = "graphs") -> GeneratorConfig:
    """``GeneratorConfig(**values)`` after checking them: known field names, numbers (``mode`` a name), whole
    numbers for the integer fields (``3.0`` is taken as 3). ``what`` names the mapping in error messages."""
    values = dict(values)
    known = set(GeneratorConfig.__dataclass_fields__)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{what} has no field {', '.join(unknown)}; fields: {', '.join(sorted(known))}")
    for key, value in values.items():
        if key != "mode" and value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"{what}.{key} must be a number, got {value!r}")
        if key in INTEGER_FIELDS:
            if value is not None and value != int(value):
                raise ValueError(f"{what}.{key} must be an integer, got {value!r}")
            values[key] = None if value is None else int(value)
    return GeneratorConfig(**values)
