"""The crossing lower bound alone (``solvers/bounds.crossing_lower_bound``) from two or more source trees, on the same
cases, each run in a fresh process with a limit in **CPU seconds** of that process (the module's clock replaced by
``time.process_time``), the trees alternating per case. On a shared, loaded 2-core machine a wall-clock limit gives a
run whatever CPU the other jobs leave (0.6-1.8 s of a 5 s limit at load 8-10 in session 33), so variants compared
by wall time differ by the load more than by the code; a CPU limit compares what each search does with the same work.
Issue 27, session 33 (validation graphs only). Appends one JSON line per run to ``<out>.jsonl``.

    .venv/bin/python experiments/bound_trees_cpu_ab.py cases.txt 3 /tmp/ab /tmp/old,/tmp/new

``cases.txt``: one case per line, ``<graph.json> <K> <paper|latency> <upper>`` (upper: a schedule's objective, e.g.
auto's). Trees: roots of ``git archive`` checkouts (``git archive <rev> | tar -x -C <dir>``). CP-SAT's own query
limits stay in wall seconds (a quarter of the time left, at most 1 s), so a very loaded machine can still cut a query.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys, time, types, yaml
sys.path.insert(0, {tree!r})
from respect_jax.costs import hardware_from_dict
from respect_jax.graphs.graph import load_graph
from respect_jax.solvers import bounds as B
assert B.__file__.startswith({tree!r}), B.__file__
graph = load_graph({path!r})
hw = hardware_from_dict({{**yaml.safe_load(open({hw!r})), "stages": {k}}})
B.time = types.SimpleNamespace(perf_counter=time.process_time)  # the bound's deadlines in CPU seconds
wall, cpu = time.perf_counter(), time.process_time()
found = B.crossing_lower_bound(graph, hw, {objective!r}, 1.0, {upper!r}, {limit!r})
print(json.dumps(dict(bound=found["bound"], calls=found["calls"], wall=time.perf_counter() - wall,
                      cpu=time.process_time() - cpu)))
"""


def main() -> None:
    cases_file, limit, out, trees = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4].split(",")
    cases = [line.split() for line in Path(cases_file).read_text().splitlines() if line.strip()]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", JAX_PLATFORMS="cpu")
    hw = str(ROOT / "conf" / "hardware" / "coral_usb.yaml")
    with open(f"{out}.jsonl", "a") as f:
        for i, (path, k, objective, upper) in enumerate(cases):
            for tree in trees if i % 2 == 0 else trees[::-1]:
                code = CHILD.format(tree=tree, path=str(Path(path).resolve()), hw=hw, k=int(k), objective=objective,
                                    upper=float(upper), limit=limit)
                load = os.getloadavg()[0]
                proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd="/tmp",
                                      check=True)
                run = json.loads(proc.stdout.strip().splitlines()[-1])
                rec = dict(graph=Path(path).name, K=int(k), objective=objective, upper=float(upper), tree=tree,
                           cpu_limit_s=limit, load=load, **run, gap=1 - run["bound"] / float(upper))
                f.write(json.dumps(rec) + "\n")
                f.flush()
                print(f"{rec['graph']:>18} K={k} {objective:7s} {tree:16s} gap {100 * rec['gap']:7.3f} % "
                      f"queries {run['calls']:3d} cpu {run['cpu']:.2f} s load {load:.1f}", flush=True)


if __name__ == "__main__":
    main()
