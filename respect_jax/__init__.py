"""respect-jax: learning to schedule DNN graphs onto pipelined edge accelerators."""

__version__ = "0.1.0"
