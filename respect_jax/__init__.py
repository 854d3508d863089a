"""respect-jax: learning to schedule DNN graphs onto pipelined edge accelerators.

The Python API (:mod:`respect_jax.api`)::

    import respect_jax as rj

    g = rj.load_graph("data/models/resnet50.json")
    res = rj.schedule(g, rj.hardware("coral_usb", stages=4), solver="cpsat", objective="latency")
    print(res.objective, res.optimal, res.gap)

Importing the package is light: JAX, the solvers and the learned policies load on first use.
"""

from respect_jax.api import (
    ScheduleMetrics,
    ScheduleResult,
    from_keras,
    from_onnx,
    from_tflite,
    hardware,
    hardware_presets,
    load_graph,
    schedule,
    solvers,
)

__version__ = "0.1.0"

__all__ = [
    "ScheduleMetrics",
    "ScheduleResult",
    "__version__",
    "from_keras",
    "from_onnx",
    "from_tflite",
    "hardware",
    "hardware_presets",
    "load_graph",
    "schedule",
    "solvers",
]
