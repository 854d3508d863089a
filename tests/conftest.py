"""Shared fixtures: small hardware settings and random graphs/schedules for the tests."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import jax
import numpy as np
import pytest

from respect_jax.costs import Hardware
from respect_jax.graphs import GeneratorConfig, generate_numpy

CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"
COMMANDS_CACHE_ENV = "RESPECT_JAX_CACHE"  # respect_jax.compile_cache.CACHE_ENV: the commands' jax_cache=auto
# Most test time is XLA compilation of small programs run a few times: the suite compiles them with
# LLVM optimisation level 1 (XLA's default is higher), which compiles ~40% faster here and changes
# no result beyond float rounding (every test asserts against references, not stored numbers).
# Benchmarks, experiments and `make run` use XLA's default. An XLA_FLAGS that already sets the
# level wins, e.g. XLA_FLAGS=--xla_backend_optimization_level=2 make test.
TEST_OPT_LEVEL_FLAG = "--xla_backend_optimization_level=1"


def pytest_configure(config):
    """XLA flags (above) and one JAX compilation cache per test session, shared by the xdist workers and by the command
    lines the tests run as subprocesses (they inherit the environment): an identical program (the
    same policy at the same shapes in another test or CLI call) is compiled once. It is created
    empty in the controller and removed at the end, so no run depends on an earlier one; the
    commands' own cache setting (``jax_cache=auto``) points there too (``RESPECT_JAX_CACHE``), never
    at the user's ``~/.cache``. ``RESPECT_TEST_JAX_CACHE=0`` turns both off. Both are environment
    variables, set before any JAX backend starts, so the xdist workers and the CLI subprocesses
    inherit them."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {TEST_OPT_LEVEL_FLAG}".strip()
    if os.environ.get("RESPECT_TEST_JAX_CACHE", "1") == "0":
        os.environ[COMMANDS_CACHE_ENV] = "off"  # the commands' default cache (~/.cache/respect-jax) stays untouched
        return
    if not hasattr(config, "workerinput") and CACHE_ENV not in os.environ:
        config._respect_jax_cache = tempfile.mkdtemp(prefix="respect-jax-xla-cache-")
        os.environ[CACHE_ENV] = config._respect_jax_cache
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.2"
    if not hasattr(config, "workerinput"):  # the commands the tests run (jax_cache=auto) use the same folder
        os.environ[COMMANDS_CACHE_ENV] = os.environ[CACHE_ENV]
    if CACHE_ENV in os.environ:
        jax.config.update("jax_compilation_cache_dir", os.environ[CACHE_ENV])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)


# The test files that take longest in the default suite, longest first (a whole-suite run with a per-test timer, 2
# workers, session 24; test_train_learning.py from its last single-file timing, ~160 s alone). `make test` hands the
# files out in collection order (`--dist loadfile --no-loadscope-reorder`): these start first and the many short files
# fill the end, so neither worker waits long for the other to finish a long file (xdist's own order, most tests first,
# handed long files with few tests, such as test_train_learning.py, out last). A file missing here only starts later;
# the order decides no result.
LONGEST_FILES = (
    "test_policy.py",
    "test_train.py",
    "test_cli.py",
    "test_auto.py",
    "test_schedule_many.py",
    "test_train_learning.py",
    "test_experiments.py",
    "test_order_policy.py",
    "test_help.py",
    "test_local_search.py",
    "test_edge_dqn.py",
    "test_rt_cli.py",
    "test_bounds.py",
    "test_baselines.py",
)


def pytest_collection_modifyitems(config, items):
    """Move the tests of :data:`LONGEST_FILES` to the front, in that order; every file keeps its tests' order and the
    other files keep theirs (a stable sort)."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_unconfigure(config):
    cache = getattr(config, "_respect_jax_cache", None)
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
        os.environ.pop(CACHE_ENV, None)


# a setting where every term of the cost model matters for small synthetic graphs
SMALL_HW = dict(
    sram_bytes=600_000.0,
    param_bytes=1.0,
    act_bytes=1.0,
    macs_per_s=1e10,
    host_bw=4.7e8,
    link_bw=2.35e8,
    stage_overhead_s=2e-4,
)


#: the real-time tests' platform (``respect_jax.realtime.platform.platform_from_dict``): one accelerator per dataflow
RT_TEST_PLATFORM = {
    "accelerators": [
        {"name": "ws0", "dataflow": "ws", "peak_tmacs": 2.0, "mem_gbs": 25, "overhead_us": 30},
        {"name": "rs0", "dataflow": "rs", "peak_tmacs": 1.5, "mem_gbs": 20, "overhead_us": 30},
        {"name": "os0", "dataflow": "os", "peak_tmacs": 1.2, "mem_gbs": 20, "overhead_us": 30},
    ]
}


def experiment_script(name: str):
    """The module of ``experiments/<name>.py`` (the scripts are not a package), loaded from its file."""
    path = Path(__file__).resolve().parents[1] / "experiments" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_hw(stages: int = 4, **overrides) -> Hardware:
    return Hardware(stages=stages, **{**SMALL_HW, **overrides})


def random_valid_schedule(graph, k: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly-stepped random valid assignment (by id)."""
    s = np.zeros(graph.num_nodes, dtype=np.int64)
    preds = graph.predecessors()
    for v in graph.topological_order():
        low = max((s[u] for u in preds[v]), default=0)
        s[v] = rng.integers(low, k)
    return s


def random_graphs(count: int, seed: int, min_nodes: int = 5, max_nodes: int = 40) -> list:
    rng = np.random.default_rng(seed)
    graphs = []
    for i in range(count):
        mode = "respect" if i % 2 == 0 else "dnn"
        cfg = GeneratorConfig(mode=mode, min_nodes=min_nodes, max_nodes=max_nodes)
        graphs.append(generate_numpy(cfg, rng, name=f"{mode}{i}"))
    return graphs


@pytest.fixture
def hw4() -> Hardware:
    return make_hw(4)


def assert_beats_small_ramp_phase_winners(scn, agent_policy) -> dict:
    """On ``small_ramp`` (``closest`` best in the first half of every trace, ``fastest_expected`` in the second), the
    agent on fresh traces is at least about as good as the best rule of each half and beats the other clearly, and is
    above ``fastest_expected`` on the paired 95 % interval over the whole trace. Returns the comparison document."""
    from respect_jax.edge_cluster.evaluation import compare, paired_difference
    from respect_jax.edge_cluster.policies import STATIC_POLICIES

    policies = {"closest": STATIC_POLICIES["closest"], "fastest_expected": STATIC_POLICIES["fastest_expected"],
                "aset": agent_policy}
    doc = compare(scn, policies, ["medium"], jax.random.key(99), traces=4, phases=2)
    first, second = ({p: doc["phase_success"][p]["medium"][i] for p in policies} for i in (0, 1))
    assert first["closest"] > first["fastest_expected"] + 0.05, first  # the situation the agent exists for
    assert second["fastest_expected"] > second["closest"] + 0.3, second
    assert first["aset"] >= first["closest"] - 0.02 and first["aset"] > first["fastest_expected"] + 0.05, first
    assert second["aset"] >= second["fastest_expected"] - 0.03 and second["aset"] > second["closest"] + 0.3, second
    diff, ci = paired_difference(doc, "aset", "fastest_expected", "medium")
    assert diff - ci > 0, (diff, ci)  # above the better static policy on every trace pair's 95 % interval
    return doc
