"""``respect-label``: label a synthetic dataset with an exact oracle (resumable, parallel).

Example::

    respect-label out=data/labels/my_set graphs=respect30 count=2000 \
        solver=cpsat hardware=coral_usb hardware.stages=4 objective=paper workers=2

Writes ``out/manifest.json`` and ``out/shard-XXXXX.jsonl`` (format of
:mod:`respect_jax.labels.dataset`). Running the same command again after a crash or a kill resumes:
finished shards are kept and only the missing ones are solved. Graphs the oracle does not prove
optimal can go to a fallback oracle (``fallback.solver=milp``), also afterwards for a finished
dataset (``retry_unproven=true``). Bad arguments exit 2 with one line on stderr and write nothing.

On a cluster: ``shards=a:b`` labels only shards ``a .. b-1`` (``shards=k``: shard ``k``), so a Hydra
multirun over the launcher presets of ``conf/hydra/launcher/`` (or the plugin's ``submitit_local``)
runs one job per shard range, every job resuming into the same ``out`` on a shared file system::

    respect-label -m out=/shared/labels/set count=2000 shard_size=100 shards=0:5,5:10,10:15,15:20 \
        hydra/launcher=slurm hydra.launcher.gpus_per_node=0 hydra.launcher.cpus_per_task=2
    respect-label -m out=/shared/labels/set count=2000 shards='range(0,20)'   # one job per shard

The job that finds the dataset complete writes its summary into the manifest; running the same
sweep again resumes it. Ranges of one sweep must not overlap (an overlap only repeats work: shard
files are written atomically).
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from respect_jax.cli.common import CONF_DIR, hardware_from_cfg, job_path, run_command, user_errors_exit

PROG = "respect-label"
GROUPS = ("hardware", "solver", "graphs")


def generator_from_cfg(node: DictConfig):
    """:class:`~respect_jax.graphs.GeneratorConfig` from the ``graphs`` config node
    (:func:`~respect_jax.graphs.generator_values.generator_config_from_values` of its values)."""
    from respect_jax.graphs.generator_values import generator_config_from_values

    return generator_config_from_values(OmegaConf.to_container(node, resolve=True))


def _int(cfg: DictConfig, key: str) -> int:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    return value


def _options(node) -> dict:
    """A solver's ``options`` node as a plain dict (empty if it has none)."""
    return OmegaConf.to_container(node.options, resolve=True) if node.get("options") else {}


def label(cfg: DictConfig) -> dict:
    """Run the labelling pipeline for a composed ``label`` config; returns its summary."""
    from respect_jax.labels.pipeline import LabelRun, LabelSpec, label_dataset

    if not cfg.out:
        raise ValueError("out must name the dataset directory")
    lam = cfg.lam
    if isinstance(lam, bool) or not isinstance(lam, int | float):
        raise ValueError(f"lam must be a number, got {lam!r}")
    threads = cfg.solver_threads
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"solver_threads must be an integer >= 1 or null, got {threads!r}")
    options = _options(cfg.solver)
    fallback = cfg.get("fallback") or {}
    fallback_solver = fallback.get("solver")
    if fallback_solver is not None and not isinstance(fallback_solver, str):
        raise ValueError(f"fallback.solver must be a solver name or null, got {fallback_solver!r}")
    fallback_options = _options(fallback)
    if not isinstance(cfg.retry_unproven, bool):
        raise ValueError(f"retry_unproven must be true or false, got {cfg.retry_unproven!r}")
    shards = parse_shards(cfg.get("shards"))
    if shards is None:
        out = job_path(cfg, "out")  # in a sweep: a dataset folder two jobs would fill is refused up front
    else:  # one job of a cluster run: every job fills its own shards of the same dataset folder
        out = cfg.out
    spec = LabelSpec(
        generator=generator_from_cfg(cfg.graphs),
        count=_int(cfg, "count"),
        seed=_int(cfg, "seed"),
        shard_size=_int(cfg, "shard_size"),
        solver=str(cfg.solver.name),
        solver_options=options,
        hw=hardware_from_cfg(cfg.hardware),
        objective=str(cfg.objective),
        lam=float(lam),
    )
    run = LabelRun(
        workers=_int(cfg, "workers"),
        progress=bool(cfg.progress),
        solver_threads=threads,
        fallback=fallback_solver,
        fallback_options=fallback_options if fallback_solver is not None else None,
        retry_unproven=cfg.retry_unproven,
        shards=shards,
    )
    return label_dataset(str(out), spec, run)


def parse_shards(value) -> tuple[int, int] | None:
    """``shards=`` as ``(first, end)``: null -> None (all shards), ``k`` -> ``(k, k + 1)``, ``"a:b"`` -> ``(a, b)``.

    The range is checked against the dataset by :func:`~respect_jax.labels.pipeline.label_dataset`.
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value + 1
    text = str(value).replace("\\:", ":")  # Hydra's sweep escapes the colon
    first, sep, end = text.partition(":")
    try:
        if not sep:
            return int(text), int(text) + 1
        return int(first), int(end)
    except ValueError:
        message = f"shards must be null, a shard number k or a range a:b (shards a..b-1), got {value!r}"
        raise ValueError(message) from None


@hydra.main(config_path=CONF_DIR, config_name="label", version_base="1.3")
@user_errors_exit(PROG)
def _main(cfg: DictConfig) -> None:
    label(cfg)


def main() -> None:
    run_command(PROG, GROUPS, "label", _main)


if __name__ == "__main__":
    main()
