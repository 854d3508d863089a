"""The Coral adapter: real models in, pipelined Edge TPU (or LiteRT CPU) segments out.

* :mod:`~respect_jax.coral.keras_export`: ``keras.applications`` models and saved ``.keras``/``.h5`` files -> graph JSON
  (:class:`~respect_jax.graphs.graph.Graph`: nodes with params/MACs/output sizes, edges).
* :mod:`~respect_jax.coral.tflite_import`: ``.tflite`` operator graphs -> graphs of the same format.
* :mod:`~respect_jax.coral.segment`: a Keras model + a schedule -> one ``.tflite`` per stage and a
  manifest (optionally compiled with ``edgetpu_compiler``).
* :mod:`~respect_jax.coral.tflite_segment`: an existing (int8) ``.tflite`` + a schedule -> the file cut
  into ``<model>_segment_<k>_of_<K>.tflite`` stages (Edge TPU compiler naming) and a manifest.
* :mod:`~respect_jax.coral.runner`: runs a manifest as a pipeline (Google's pycoral
  ``PipelinedModelRunner`` on Edge TPUs, else LiteRT with the ``libedgetpu.so.1`` delegate, else
  LiteRT interpreters on CPU threads).
* :mod:`~respect_jax.coral.calibrate`: fits the hardware config to measured stage latencies (also those
  of respect-pipeline reports).
* :mod:`~respect_jax.coral.export`: model arguments (bundled names, ``.keras``/``.h5``/``.tflite``/``.onnx``
  files) checked without TensorFlow, then exported to graph JSON files (``respect-export``).
* :mod:`~respect_jax.coral.deploy`: the flows of ``respect-segment`` (checks, model, schedule file or solver,
  segmentation), ``respect-pipeline`` and ``respect-deploy`` (a pipeline report).
* :mod:`~respect_jax.coral.options`: the commands' options as dataclasses (their defaults are the commands').
* :mod:`~respect_jax.coral.paths`: output locations checked before any work, staged folders, JSON inputs.

TensorFlow, LiteRT, ``tflite`` and pycoral are imported lazily inside functions only; importing
this package needs none of them. A missing one raises
:class:`~respect_jax.coral._deps.CoralDependencyError` ("install the coral extra: pip install -e
.[coral]").
"""

from respect_jax.coral._deps import INSTALL_HINT, CoralDependencyError

__all__ = ["INSTALL_HINT", "CoralDependencyError"]
