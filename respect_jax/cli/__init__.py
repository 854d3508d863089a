"""Hydra entry points (the only place that reads configs). See ``conf/`` for every option."""
