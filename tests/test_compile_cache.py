"""The compiled-executable cache (``respect_jax.compile_cache.cached_compile``): a stored executable is loaded
back without tracing, gives the same outputs as ``jax.jit``, and is keyed by everything that changes it."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from respect_jax import compile_cache
from respect_jax.compile_cache import cached_compile, enable_compilation_cache, executable_key, executables_dir


@pytest.fixture
def cache_folder(tmp_path):
    """The commands' cache turned on in a fresh folder for one test, then off again; memory entries cleared."""
    compile_cache._COMPILED.clear()
    compile_cache._KEYS.clear()
    folder = enable_compilation_cache(tmp_path / "jax")
    yield folder
    enable_compilation_cache(None)
    compile_cache._COMPILED.clear()
    compile_cache._KEYS.clear()


def _network(params: dict, x: jax.Array, scale: float) -> jax.Array:
    """A small two-layer map (f32[b, 3] -> f32[b, 2]), with a closed-over static value."""
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return scale * (hidden @ params["w2"])


def _args(seed: int = 0, rows: int = 5):
    rng = np.random.default_rng(seed)
    params = {"w1": rng.normal(size=(3, 4)).astype(np.float32), "b1": rng.normal(size=4).astype(np.float32),
              "w2": rng.normal(size=(4, 2)).astype(np.float32)}
    return params, rng.normal(size=(rows, 3)).astype(np.float32)


def _untraceable(*_):
    raise AssertionError("traced although a stored executable exists")


def test_a_stored_executable_is_loaded_back_without_tracing_and_gives_jits_outputs(cache_folder):
    params, x = _args()
    traces = []

    def fn(p, v):
        traces.append(1)
        return _network(p, v, 2.0)

    out = np.asarray(cached_compile("net", fn, (params, x), static_key=2.0)(params, x))
    assert traces == [1]
    files = list(executables_dir().glob("net-*.pkl"))
    assert len(files) == 1 and executables_dir() == cache_folder / "executables"
    compile_cache._COMPILED.clear()  # as a new process: memory empty, the file is all there is
    loaded = cached_compile("net", _untraceable, (params, x), static_key=2.0)
    np.testing.assert_array_equal(np.asarray(loaded(params, x)), out)
    np.testing.assert_array_equal(out, np.asarray(jax.jit(lambda p, v: _network(p, v, 2.0))(params, x)))
    other_params, other_x = _args(seed=1)  # same shapes: the same executable, new values
    np.testing.assert_allclose(np.asarray(loaded(other_params, other_x)),
                               np.asarray(_network(other_params, other_x, 2.0)), rtol=1e-6)


def test_the_key_changes_with_the_static_key_shapes_dtypes_tree_and_xla_flags(monkeypatch):
    params, x = _args()
    base = executable_key("net", 2.0, (params, x))
    assert base == executable_key("net", 2.0, _args(seed=3))  # values do not enter the key
    assert base != executable_key("net", 3.0, (params, x))
    assert base != executable_key("other", 2.0, (params, x))
    assert base != executable_key("net", 2.0, _args(rows=6))
    assert base != executable_key("net", 2.0, (params, x.astype(np.float16)))
    assert base != executable_key("net", 2.0, ({**params, "extra": np.zeros(1, np.float32)}, x))
    this_cpu = compile_cache.host_cpu()
    monkeypatch.setattr(compile_cache, "_CPU", ["x86_64 model name=another CPU flags=sse2"])  # another cluster node
    assert base != executable_key("net", 2.0, (params, x))
    monkeypatch.setattr(compile_cache, "_CPU", [this_cpu])
    assert base == executable_key("net", 2.0, (params, x))
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
    assert base != executable_key("net", 2.0, (params, x))


def test_each_static_key_gets_its_own_executable(cache_folder):
    params, x = _args()
    two = np.asarray(cached_compile("net", lambda p, v: _network(p, v, 2.0), (params, x), 2.0)(params, x))
    three = np.asarray(cached_compile("net", lambda p, v: _network(p, v, 3.0), (params, x), 3.0)(params, x))
    np.testing.assert_allclose(three, 1.5 * two, rtol=1e-6)
    assert len(list(executables_dir().glob("net-*.pkl"))) == 2


def test_an_unreadable_entry_is_compiled_again_and_replaced(cache_folder, capsys):
    params, x = _args()
    cached_compile("net", lambda p, v: _network(p, v, 2.0), (params, x), 2.0)
    (file,) = executables_dir().glob("net-*.pkl")
    file.write_bytes(b"not an executable")
    compile_cache._COMPILED.clear()
    out = cached_compile("net", lambda p, v: _network(p, v, 2.0), (params, x), 2.0)(params, x)
    np.testing.assert_allclose(np.asarray(out), np.asarray(_network(params, x, 2.0)), rtol=1e-6)
    assert "unreadable" in capsys.readouterr().err
    compile_cache._COMPILED.clear()
    loaded = cached_compile("net", _untraceable, (params, x), 2.0)  # the replaced file reads back
    np.testing.assert_array_equal(np.asarray(loaded(params, x)), np.asarray(out))


def test_with_the_cache_off_nothing_is_written_and_memory_still_serves(tmp_path):
    enable_compilation_cache(None)
    compile_cache._COMPILED.clear()
    params, x = _args()
    traces = []

    def fn(p, v):
        traces.append(1)
        return _network(p, v, 2.0)

    first = cached_compile("net", fn, (params, x), 2.0)
    assert cached_compile("net", fn, (params, x), 2.0) is first and traces == [1]
    assert executables_dir() is None and not list(tmp_path.iterdir())
    np.testing.assert_allclose(np.asarray(first(params, x)), np.asarray(_network(params, x, 2.0)), rtol=1e-6)
    compile_cache._COMPILED.clear()


def test_storing_removes_the_same_names_files_of_other_code_versions_only(cache_folder, monkeypatch):
    params, x = _args()
    cached_compile("net", lambda p, v: _network(p, v, 2.0), (params, x), 2.0)
    cached_compile("other", lambda p, v: _network(p, v, 3.0), (params, x), 3.0)
    (old_net,) = executables_dir().glob("net-*.pkl")
    monkeypatch.setattr(compile_cache, "code_version", lambda: "0" * 16)  # as after an edit of the package
    compile_cache._COMPILED.clear()  # and a new process (which computes its keys anew)
    compile_cache._KEYS.clear()
    cached_compile("net", lambda p, v: _network(p, v, 2.0), (params, x), 2.0)
    names = sorted(p.name for p in executables_dir().glob("*.pkl"))
    assert not old_net.exists() and len(names) == 2
    assert names[0].startswith("net-" + "0" * 16 + "-") and names[1].startswith("other-")  # another name: kept


STORE_AFTER_PERSISTENT_LOAD = """
import sys, jax, jax.numpy as jnp, numpy as np
from respect_jax.compile_cache import cached_compile, enable_compilation_cache
import respect_jax as rj
from respect_jax.costs import evaluate
from respect_jax.graphs import load_graph
from respect_jax.graphs.padded import pad_graph, to_position_order
step, folder = sys.argv[1], sys.argv[2]
enable_compilation_cache(folder, min_compile_time_s=0)
g = load_graph("{graph}")
hw = rj.hardware("coral_usb", stages=4)
padded = pad_graph(g)
stage = jnp.asarray(to_position_order(padded, np.minimum(np.arange(g.num_nodes) * 4 // g.num_nodes, 3)))
if step in ("jit", "both"):  # JAX's own persistent cache: written by the first process, read by the second
    print(float(jax.jit(evaluate)(padded, stage, hw).peak_mem_bytes))
if step in ("both", "load"):  # the second process stores the executable, the third runs it from the file
    print(float(cached_compile("evaluate", evaluate, (padded, stage, hw))(padded, stage, hw).peak_mem_bytes))
"""


def test_an_executable_stored_after_a_persistent_cache_read_runs_in_a_later_process(tmp_path):
    """A process that read a program from JAX's persistent cache and then stores it through cached_compile must store
    a freshly compiled copy: a copy of the one read back lacks its fused functions, and a later process running it
    failed with "NOT_FOUND: Function select_bitcast_fusion.1 not found" (JAX decides once per process whether its
    cache is used, so turning the config off alone did not stop the read)."""
    import subprocess
    import sys
    from pathlib import Path

    graph = Path(__file__).resolve().parents[1] / "data" / "models" / "resnet50.json"
    script = tmp_path / "step.py"
    script.write_text(STORE_AFTER_PERSISTENT_LOAD.replace("{graph}", str(graph)))
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["JAX_PLATFORMS"] = "cpu"
    values = []
    for step in ("jit", "both", "load"):
        proc = subprocess.run([sys.executable, str(script), step, str(tmp_path / "cache")], capture_output=True,
                              text=True, env=env, timeout=300)
        assert proc.returncode == 0, f"step {step}: {proc.stderr[-600:]}"
        values += [float(v) for v in proc.stdout.split()]
    assert len(values) == 4 and len(set(values)) == 1
    assert len(list((tmp_path / "cache" / "executables").glob("evaluate-*.pkl"))) == 1


def test_a_repeated_call_reuses_its_key_and_any_change_of_the_key_is_seen(cache_folder, monkeypatch):
    """In a process, a call whose arguments have the same tree, shapes, dtypes and weak types (and the same static
    key and program options) reuses the key computed before; each of those changes computes a new one, equal to
    :func:`executable_key` of that call, and gets its own executable."""
    params, x = _args()
    keys = []

    def counted(*a):
        keys.append(executable_key(*a))
        return keys[-1]

    monkeypatch.setattr(compile_cache, "executable_key", counted)
    fn = lambda p, v, s: _network(p, v, 2.0) * s  # noqa: E731
    first = cached_compile("net", fn, (params, x, np.float32(1.0)), static_key=2.0)
    other_params, other_x = _args(seed=4)
    assert cached_compile("net", fn, (other_params, other_x, np.float32(3.0)), static_key=2.0) is first
    assert len(keys) == 1
    changed = {
        "dtype": ((params, x.astype(np.float16), np.float32(1.0)), 2.0),
        "shape": ((params, x[:2], np.float32(1.0)), 2.0),
        "tree": (({**params, "extra": np.zeros(1, np.float32)}, x, np.float32(1.0)), 2.0),
        "weak type": ((params, x, 1.0), 2.0),
        "static key": ((params, x, np.float32(1.0)), 3.0),
    }
    for what, (args, static) in changed.items():
        compiled = cached_compile("net", fn, args, static_key=static)
        assert compiled is not first and keys[-1] == executable_key("net", static, args), what
    assert len(keys) == 1 + len(changed)
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_fast_math=false")
    cached_compile("net", fn, (params, x, np.float32(1.0)), static_key=2.0)
    assert len(keys) == 2 + len(changed)  # the options that change programs are part of the signature


def test_the_step_policy_and_pointer_decoders_are_stored_and_reloaded_without_tracing(cache_folder, monkeypatch):
    """The step policy's and the RESPECT pointer's decoders are stored as executables (one per network architecture,
    hardware, objective and decoding); a fresh solver with this process's memory cleared (as a new process) loads them
    back without tracing the decoder, and schedules the same."""
    from conftest import make_hw

    from respect_jax.graphs import GeneratorConfig, generate_numpy
    from respect_jax.policy import decoding as step_decoding
    from respect_jax.policy import solver as policy_solver
    from respect_jax.respect_pointer import decoding as pointer_decoding
    from respect_jax.respect_pointer import solver as pointer_solver

    graph = generate_numpy(GeneratorConfig(mode="dnn", min_nodes=20, max_nodes=30), np.random.default_rng(5))
    hw = make_hw(3)
    runs = ((policy_solver, step_decoding, "greedy"), (policy_solver, step_decoding, "best_of"),
            (pointer_solver, pointer_decoding, "greedy"))

    def fresh(module):
        return policy_solver.checkpoint_solver(module.DEFAULT_CHECKPOINT, module._load, module._decoder, "test")

    first = {}
    for module, _, decoding in runs:
        first[module, decoding] = fresh(module)(graph, hw, "paper", decoding=decoding, samples=4).assignment
    assert len(list(executables_dir().glob("checkpoint_decode-*.pkl"))) == 3  # keyed by network and decoding
    compile_cache._COMPILED.clear()
    for module, decoding_module, decoding in runs:
        monkeypatch.setattr(decoding_module, "decode", _untraceable)
        module._decoder.cache_clear()
        again = fresh(module)(graph, hw, "paper", decoding=decoding, samples=4)
        assert np.array_equal(again.assignment, first[module, decoding])
    monkeypatch.undo()
    module = policy_solver
    module._decoder.cache_clear()
    compile_cache._COMPILED.clear()
    for path in executables_dir().glob("checkpoint_decode-*.pkl"):
        path.unlink()
    with pytest.raises(AssertionError, match="traced although"):  # the check above can fail: no file, so traced
        monkeypatch.setattr(step_decoding, "decode", _untraceable)
        fresh(module)(graph, hw, "paper", decoding="greedy")
