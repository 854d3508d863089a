"""Data-parallel scale-out with ``jax.sharding``: one code path for 1 CPU, 1 GPU or many devices.

A 1-D mesh over every device (of every host, after :func:`maybe_initialize_distributed`) with axis
``data``: batches are split along their leading axis, parameters and optimiser state are
replicated. XLA's SPMD partitioner inserts the gradient all-reduce; nothing else changes between
1 and N devices, so results agree up to float summation order. That order matters most for the GAT's
``att_dst`` vectors: the destination score shifts every logit of one softmax equally, so their gradient is
nearly zero (only leaky_relu's kink sees it) and mostly rounding noise, which Adam's normalisation turns into
lr-sized steps. After a few steps they can differ between 1 and 2 devices by ~1e-4 (every other parameter by
< 2e-6, the metrics by < 3e-7), and the gap can grow with training.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA_AXIS = "data"


@dataclass(frozen=True)
class Launch:
    """One process of a multi-process launch: what ``jax.distributed.initialize`` needs.

    ``local_device_ids`` None: the process uses every device of its node (one task per node, the
    ``conf/hydra/launcher/slurm.yaml`` layout); ``[SLURM_LOCALID]`` when several tasks share a node (one per
    GPU)."""

    coordinator_address: str
    num_processes: int
    process_id: int
    local_device_ids: tuple[int, ...] | None = None


def first_host(nodelist: str) -> str:
    """The first host name of a SLURM node list: ``node[003-010,012],gpu7`` -> ``node003``."""
    first = nodelist.split(",", 1)[0]
    if "[" not in first:
        return first
    prefix, ranges = nodelist.split("]", 1)[0].split("[", 1)
    return prefix + ranges.split(",", 1)[0].split("-", 1)[0]


def _int(env: dict, name: str) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        raise ValueError(f"multi-process launch: {name}={env.get(name)!r} is not an integer") from None


def multi_process_launch(env: dict | None = None) -> Launch | None:
    """The launch this process belongs to, or None for a single-process run.

    Multi-process means an ``srun`` step of several tasks (the step variables ``SLURM_STEP_NUM_TASKS`` > 1,
    ``SLURM_STEP_NODELIST``, ``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_JOB_ID``: what the submitit launcher
    runs) or an explicit ``JAX_COORDINATOR_ADDRESS`` with ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``. A shell
    inside a SLURM allocation (salloc, or a batch script without srun) is single-process, whatever its
    ``SLURM_NTASKS``. The coordinator is the step's first host, port ``JAX_COORDINATOR_PORT`` or one derived
    from the job id (as JAX does)."""
    env = os.environ if env is None else env
    if env.get("JAX_COORDINATOR_ADDRESS"):
        missing = [v for v in ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID") if not env.get(v)]
        if missing:
            raise ValueError(f"JAX_COORDINATOR_ADDRESS is set but {' and '.join(missing)} not; set all three, "
                             "or none for a single-process run")
        return Launch(env["JAX_COORDINATOR_ADDRESS"], _int(env, "JAX_NUM_PROCESSES"), _int(env, "JAX_PROCESS_ID"))
    if not env.get("SLURM_STEP_NUM_TASKS") or _int(env, "SLURM_STEP_NUM_TASKS") <= 1:
        return None
    for name in ("SLURM_STEP_NODELIST", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_JOB_ID"):
        if not env.get(name):
            raise ValueError(f"an srun step of {env['SLURM_STEP_NUM_TASKS']} tasks without {name}: cannot find "
                             "the other processes")
    tasks, nodes = _int(env, "SLURM_STEP_NUM_TASKS"), int(env.get("SLURM_STEP_NUM_NODES") or 1)
    port = env.get("JAX_COORDINATOR_PORT") or str(_int(env, "SLURM_JOB_ID") % 2**12 + 65535 - 2**12 + 1)
    shared_node = tasks > nodes  # several tasks per node: one device each
    return Launch(
        coordinator_address=f"{first_host(env['SLURM_STEP_NODELIST'])}:{port}",
        num_processes=tasks,
        process_id=_int(env, "SLURM_PROCID"),
        local_device_ids=(_int(env, "SLURM_LOCALID"),) if shared_node else None,
    )


def maybe_initialize_distributed() -> bool:
    """``jax.distributed.initialize`` with the launch's explicit parameters when launched multi-process
    (:func:`multi_process_launch`); JAX's own detection is off, since it would limit a one-task-per-node
    process to one GPU of its node."""
    launch = multi_process_launch()
    if launch is None:
        return False
    jax.distributed.initialize(
        coordinator_address=launch.coordinator_address,
        num_processes=launch.num_processes,
        process_id=launch.process_id,
        local_device_ids=list(launch.local_device_ids) if launch.local_device_ids is not None else None,
        cluster_detection_method="deactivate",
    )
    return True


def refuse_multi_process(what: str) -> None:
    """A one-line error when ``what`` (a trainer without a device mesh) is launched as several processes: they
    would all train the same model into the same folder."""
    launch = multi_process_launch()
    if launch is not None:
        raise ValueError(f"{what} trains in one process, but this is process {launch.process_id} of "
                         f"{launch.num_processes}; launch one task (hydra.launcher.nodes=1 tasks_per_node=1)")


def is_main_process() -> bool:
    """Process 0 of a multi-process run (the only one that writes logs and metrics); True when single."""
    return jax.process_index() == 0


def make_mesh(devices=None) -> Mesh:
    """A 1-D ``data`` mesh over ``devices`` (default: all devices of all processes)."""
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), (DATA_AXIS,))


def batch_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec(DATA_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def constrain_batch(tree, mesh: Mesh):
    """Shard every leaf of ``tree`` along its leading (batch) axis (inside jit)."""
    sharding = batch_sharding(mesh)
    return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, sharding) if x.ndim else x, tree)


def check_batch_size(batch_size: int, mesh: Mesh) -> None:
    if batch_size % mesh.size:
        raise ValueError(f"train.batch_size ({batch_size}) must be a multiple of the device count ({mesh.size})")
