"""The heterogeneous multi-accelerator platform and THE dataflow-aware execution-time model.

Everything here is host-side NumPy and written once: the environment, the reference simulator,
the baselines and the up-front feasibility check all read execution and transfer times from the
integer tables built by :func:`group_exec_us` and :func:`transfer_us`.

Time is an integer number of **microseconds** everywhere in :mod:`respect_jax.realtime`, so the
JAX environment and the plain-Python reference simulator compare times exactly.

Modelling choices (the paper's own cost model is not available; these are ours):

* An accelerator has a dataflow type (:data:`DATAFLOWS`), a peak MAC rate, a memory bandwidth and
  a fixed launch overhead per sub-job.
* Layers fall into four operator classes (:func:`op_class`): dense convolutions, depthwise
  convolutions, separable convolutions (depthwise + pointwise fused in one Keras layer) and
  element-wise/pooling/normalisation layers ("elem").
* A layer's time on accelerator ``a`` is a per-layer roofline::

      t = max(macs / (peak_a * eff[dataflow_a, class]),
              (params * b_p * w_traffic[dataflow_a] + output_size * b_a * a_traffic[dataflow_a]) / bw_a)

  ``eff`` (:data:`EFFICIENCY`) is the fraction of the peak a dataflow sustains on a class, after
  the qualitative findings of the dataflow literature (Eyeriss/row-stationary, TPU-like
  weight-stationary systolic arrays, ShiDianNao-like output-stationary): weight-stationary arrays
  excel at dense convolutions but idle most PEs on depthwise layers (no input-channel reduction
  to map onto the array); output-stationary keeps partial sums local and suits depthwise and
  element-wise layers; row-stationary is balanced. The traffic factors say how many times weights
  (``w_traffic``) and activations (``a_traffic``) cross the memory interface per inference under
  each dataflow (weights fetched once when stationary, partial sums spilled when not). The numbers
  are choices, not measurements; change them in :data:`EFFICIENCY` / :data:`TRAFFIC`.
* A sub-job (a group of layers) takes ``overhead + sum of its layers' times``, rounded up to
  whole microseconds (at least 1).
* Consecutive sub-jobs of one job on *different* accelerators pay a transfer delay
  ``link_latency + bytes / link_bw`` on the precedence edge (the producer's output tensors that
  the consumer group reads). The transfer uses a DMA link and occupies no accelerator; on the same
  accelerator the tensors stay in local memory (no delay).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

DATAFLOWS = ("ws", "os", "rs")
DATAFLOW_NAMES = {"ws": "weight-stationary", "os": "output-stationary", "rs": "row-stationary"}
OP_CLASSES = ("conv", "dw", "sep", "elem")

# fraction of peak MAC rate sustained, [dataflow][op class]
EFFICIENCY: dict[str, dict[str, float]] = {
    "ws": {"conv": 0.85, "dw": 0.20, "sep": 0.40, "elem": 0.30},
    "os": {"conv": 0.55, "dw": 0.65, "sep": 0.60, "elem": 0.70},
    "rs": {"conv": 0.75, "dw": 0.45, "sep": 0.55, "elem": 0.50},
}
# (weight traffic, activation traffic) multipliers per dataflow
TRAFFIC: dict[str, tuple[float, float]] = {"ws": (1.0, 2.0), "os": (2.0, 1.0), "rs": (1.3, 1.3)}


def op_class(op: str) -> str:
    """Operator class of a Keras layer type name (see the module docstring)."""
    if op == "DepthwiseConv2D":
        return "dw"
    if op == "SeparableConv2D":
        return "sep"
    if op in ("Conv2D", "Conv1D", "Conv3D", "Conv2DTranspose", "Dense"):
        return "conv"
    return "elem"


@dataclass(frozen=True)
class Accelerator:
    """One accelerator. Units: TMAC/s, GB/s, microseconds."""

    name: str
    dataflow: str
    peak_tmacs: float
    mem_gbs: float
    overhead_us: float

    def __post_init__(self) -> None:
        if self.dataflow not in DATAFLOWS:
            raise ValueError(
                f"accelerator {self.name!r}: unknown dataflow {self.dataflow!r}; choose one of {', '.join(DATAFLOWS)}"
            )
        for f in ("peak_tmacs", "mem_gbs"):
            if not getattr(self, f) > 0:
                raise ValueError(f"accelerator {self.name!r}: {f} must be > 0, got {getattr(self, f)}")
        if self.overhead_us < 0:
            raise ValueError(f"accelerator {self.name!r}: overhead_us must be >= 0")


@dataclass(frozen=True)
class Platform:
    """M heterogeneous accelerators joined by a DMA link; bytes per weight/activation element."""

    accelerators: tuple[Accelerator, ...]
    link_gbs: float = 4.0
    link_latency_us: float = 20.0
    param_bytes: float = 1.0
    act_bytes: float = 1.0

    def __post_init__(self) -> None:
        if not self.accelerators:
            raise ValueError("platform needs at least one accelerator")
        if not self.link_gbs > 0 or self.link_latency_us < 0:
            raise ValueError("platform: link_gbs must be > 0 and link_latency_us >= 0")

    @property
    def num_machines(self) -> int:
        return len(self.accelerators)

    def to_dict(self) -> dict:
        return {
            "accelerators": [asdict(a) for a in self.accelerators],
            "link_gbs": self.link_gbs,
            "link_latency_us": self.link_latency_us,
            "param_bytes": self.param_bytes,
            "act_bytes": self.act_bytes,
        }

    def describe(self) -> str:
        parts = [f"{a.name}:{a.dataflow}@{a.peak_tmacs:g}TMAC/s" for a in self.accelerators]
        return ", ".join(parts)


def platform_from_dict(doc: dict) -> Platform:
    """Build a :class:`Platform` from a mapping (e.g. the ``platform`` node of ``conf/rt.yaml``)."""
    accs = doc.get("accelerators")
    if not accs:
        raise ValueError("platform config needs a non-empty 'accelerators' list")
    accelerators = tuple(
        Accelerator(
            name=str(a.get("name", f"acc{i}")),
            dataflow=str(a["dataflow"]),
            peak_tmacs=float(a["peak_tmacs"]),
            mem_gbs=float(a["mem_gbs"]),
            overhead_us=float(a.get("overhead_us", 0.0)),
        )
        for i, a in enumerate(accs)
    )
    rest = {k: float(doc[k]) for k in ("link_gbs", "link_latency_us", "param_bytes", "act_bytes") if k in doc}
    return Platform(accelerators=accelerators, **rest)


def layer_times_us(
    macs: np.ndarray, params: np.ndarray, output_size: np.ndarray, classes: list[str], platform: Platform
) -> np.ndarray:
    """f64[L, M] roofline time in microseconds of each layer on each accelerator (no overhead).

    Args:
        macs, params, output_size: int[L] per-layer counts (the graph JSON's node fields).
        classes: L operator classes (:func:`op_class`).
    """
    macs = np.asarray(macs, np.float64)
    w_bytes = np.asarray(params, np.float64) * platform.param_bytes
    a_bytes = np.asarray(output_size, np.float64) * platform.act_bytes
    out = np.zeros((len(macs), platform.num_machines))
    for m, acc in enumerate(platform.accelerators):
        eff = np.array([EFFICIENCY[acc.dataflow][c] for c in classes])
        w_t, a_t = TRAFFIC[acc.dataflow]
        compute = macs / (acc.peak_tmacs * 1e6 * eff)  # MAC / (MAC per us)
        memory = (w_bytes * w_t + a_bytes * a_t) / (acc.mem_gbs * 1e3)  # bytes / (bytes per us)
        out[:, m] = np.maximum(compute, memory)
    return out


def group_exec_us(layer_us: np.ndarray, groups: list[np.ndarray], platform: Platform) -> np.ndarray:
    """int64[G, M] execution time of each layer group (sub-job) on each accelerator.

    ``overhead + sum of layer times``, rounded up to whole microseconds, at least 1.
    """
    overhead = np.array([a.overhead_us for a in platform.accelerators])
    out = np.zeros((len(groups), platform.num_machines), np.int64)
    for g, layers in enumerate(groups):
        total = overhead + layer_us[layers].sum(axis=0)
        out[g] = np.maximum(1, np.ceil(total - 1e-9)).astype(np.int64)
    return out


def transfer_us(num_bytes: float, platform: Platform) -> int:
    """Transfer delay (integer microseconds) of ``num_bytes`` between two different accelerators."""
    if num_bytes <= 0:
        return 0
    return int(math.ceil(platform.link_latency_us + num_bytes / (platform.link_gbs * 1e3) - 1e-9))
