"""A non-editable install works: build the wheel from a clean copy of the sources, install it into a fresh
virtual environment, and run ``respect-schedule`` and the README's API example from a folder outside the
repository. Offline: the wheel is built with this venv's setuptools (no build isolation) and installed without
dependencies; the fresh venv sees this venv's installed dependencies through a ``.pth`` line (a path line of a
``.pth`` file is not itself scanned for ``.pth`` files, so this checkout's editable install stays out of it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from test_api import readme_example

from respect_jax.costs import hardware_from_dict
from respect_jax.graphs import load_graph
from respect_jax.reference import reference_objective

ROOT = Path(__file__).resolve().parents[1]
#: not part of the sources (copying them would only slow the build down or leak old build output into it)
NOT_SOURCES = (".git", ".venv*", "runs", "outputs", "multirun", "build", "dist", "*.egg-info", "__pycache__",
               ".pytest_cache", ".ruff_cache", ".hypothesis")
#: large data folders the wheel does not ship (relative to the repository)
NOT_SHIPPED = ("data/labels", "data/models_val")


def ignore(folder: str, names: list[str]) -> set[str]:
    """``shutil.copytree``'s ignore: build leftovers anywhere, and the data folders the wheel does not ship."""
    skip = set(shutil.ignore_patterns(*NOT_SOURCES)(folder, names))
    rel = Path(folder).relative_to(ROOT)
    return skip | {n for n in names if (rel / n).as_posix() in NOT_SHIPPED}


def run(cmd: list[str], cwd: Path, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_repository(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["JAX_PLATFORMS"] = "cpu"
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=ignore)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w",
         str(tmp_path / "dist"), str(src)], tmp_path, env)
    (wheel,) = (tmp_path / "dist").glob("respect_jax-*.whl")

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    py = venv / "bin" / "python"
    site = Path(run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env)
                .stdout.strip())
    (site / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", str(wheel)],
        tmp_path, env)

    work = tmp_path / "elsewhere"  # no conf/ or data/ here: everything comes from the installed package
    work.mkdir()
    where = run([str(py), "-c", "import respect_jax.resources as r; print(r.conf_dir()); print(r.data_dir())"],
                work, env).stdout.split()
    assert all(Path(p).is_relative_to(site / "respect_jax") for p in where), where

    out = work / "result.json"
    run([str(venv / "bin" / "respect-schedule"), "graph=data/models/mobilenetv2.json", "solver=cpsat",
         "hardware=coral_pcie", "hardware.stages=4", "objective=latency", "solver.options.time_limit_s=60",
         f"out={out}", "jax_cache=off"], work, env)
    result = json.loads(out.read_text())
    hw = hardware_from_dict(result["hardware"])
    assert result["graph"] == "mobilenetv2" and hw.stages == 4 and hw.link_bw == 2.0e8  # the coral_pcie preset
    graph = load_graph(ROOT / "data" / "models" / "mobilenetv2.json")
    expect = reference_objective(graph, result["assignment"], hw, "latency")
    assert result["objective"] == pytest.approx(expect, rel=2e-6)

    # the default checkpoint of solver=policy is package data
    policy = work / "policy.json"
    run([str(venv / "bin" / "respect-schedule"), "graph=data/models/vgg16.json", "solver=policy", f"out={policy}",
         "jax_cache=off"], work, env)
    info = json.loads(policy.read_text())["info"]
    assert Path(info["checkpoint"]).is_relative_to(site / "respect_jax" / "data"), info["checkpoint"]

    (work / "example.py").write_text(readme_example() + "\nimport respect_jax\nprint('MODULE', respect_jax.__file__)\n")
    printed = run([str(py), "example.py"], work, env).stdout
    assert f"MODULE {site / 'respect_jax' / '__init__.py'}" in printed
    assert json.loads((work / "result.json").read_text())["solver"] == "cpsat"
    assert sorted(p.name for p in work.iterdir()) == ["example.py", "policy.json", "result.json", "result.png"]
