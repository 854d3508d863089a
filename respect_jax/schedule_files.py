"""Scheduling many graph files at once, and what a command line tells about a result: which files a path or a
glob names, the per-graph summary row and one-line summary of a batch, and the note when a learned solver's
checkpoint was trained for another problem than the one it scheduled."""

from __future__ import annotations

import glob
import json
from pathlib import Path

from respect_jax.graphs.graph import write_json_atomic, write_text_atomic

#: characters that make ``graph=`` a glob pattern
GLOB_CHARS = "*?["
#: file name of the per-graph summary written beside the RESULT files of many graphs
SUMMARY_NAME = "summary.jsonl"


def is_many(graph: str) -> bool:
    """Whether ``graph=`` names many graphs: a folder or a glob pattern."""
    return Path(graph).is_dir() or any(c in graph for c in GLOB_CHARS)


def graph_files(graph: str) -> list[Path]:
    """The graph files ``graph=`` names, sorted: a file, the ``*.json`` files of a folder, or a glob's matches.

    One-line ValueError when there are none or two share a file name (their RESULT files would collide).
    """
    path = Path(graph)
    if path.is_dir():
        files = sorted(p for p in path.glob("*.json") if p.is_file())
        if not files:
            raise ValueError(f"graph folder {graph} holds no .json graph files")
    elif any(c in graph for c in GLOB_CHARS):
        files = sorted(Path(p) for p in glob.glob(graph) if Path(p).is_file())
        if not files:
            raise ValueError(f"graph pattern {graph} matches no files")
    else:
        files = [path]
    stems: dict[str, Path] = {}
    for f in files:
        if f.stem in stems:
            raise ValueError(f"two graph files are named {f.name} ({stems[f.stem].parent}, {f.parent}): their "
                             "RESULT files would collide")
        stems[f.stem] = f
    return files


def summary_row(file: Path, result: dict) -> dict:
    """One line of ``summary.jsonl``: which file, the objective, and the times of its RESULT."""
    info = result.get("info") or {}
    return {
        "file": str(file),
        "result": f"{file.stem}.json",
        "graph": result["graph"],
        "num_nodes": result["num_nodes"],
        "solver": result["solver"],
        "objective_name": result["objective_name"],
        "objective": result["objective"],
        "optimal": result["optimal"],
        "solve_time_s": result["solve_time_s"],
        "compile_s": info.get("compile_s"),
    }


def write_many(results: list[dict], files: list[Path], out_dir: Path | None) -> None:
    """``out_dir/<graph file stem>.json`` per graph and ``out_dir/summary.jsonl``; without ``out_dir``,
    every RESULT document as one JSON line on stdout."""
    if out_dir is None:
        for result in results:
            print(json.dumps(result))
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    for file, result in zip(files, results, strict=True):
        write_json_atomic(result, out_dir / f"{file.stem}.json")
    lines = [json.dumps(summary_row(f, r)) for f, r in zip(files, results, strict=True)]
    write_text_atomic("\n".join(lines) + "\n", out_dir / SUMMARY_NAME)


def many_summary(results: list[dict], out_dir: Path | None) -> str:
    """One line for stderr: how many graphs, the scheduling and the set-up time."""
    solve = sum(r["solve_time_s"] for r in results)
    compiles = {}
    for r in results:  # a bucket's compile time is shared by its graphs: count it once per bucket
        info = r.get("info") or {}
        if info.get("compile_s") is not None:
            compiles[tuple(info.get("bucket") or ())] = float(info["compile_s"])
    compile_part = f", compile {sum(compiles.values()):.2f}s ({len(compiles)} bucket(s))" if compiles else ""
    where = f" -> {out_dir}" if out_dir is not None else ""
    return (
        f"{results[0]['solver']} on {len(results)} graphs (K={results[0]['hardware']['stages']}): schedule "
        f"{solve:.3f}s ({1000 * solve / len(results):.2f} ms/graph, {len(results) / max(solve, 1e-12):.0f} graphs/s)"
        f"{compile_part}{where}"
    )


def _within_trained_k(trained: dict, result: dict) -> bool:
    """The checkpoint was trained across stage counts (``trained_across``) spanning the K scheduled for."""
    across = trained.get("trained_across") or {}
    ks = across.get("stages_choices") or [across.get("stages_min"), across.get("stages_max")]
    ks = [int(k) for k in ks if k is not None]
    return bool(ks) and min(ks) <= int(result["hardware"]["stages"]) <= max(ks)


def training_mismatch(result: dict) -> str | None:
    """A learned solver's checkpoint trained for another objective, lam or stage count than it scheduled for
    (it still schedules, validly; the results of such transfers are usually worse): one line, else None."""
    trained = (result.get("info") or {}).get("trained_on")
    if not trained:
        return None
    differ = []
    if trained["objective"] != result["objective_name"]:
        differ.append(f"objective {trained['objective']} (here {result['objective_name']})")
    if result["objective_name"] == "paper" and float(trained["lam"]) != float(result["lam"]):
        differ.append(f"lam {trained['lam']} (here {result['lam']})")
    k_here = int(result["hardware"]["stages"])
    if int(trained["hardware"]["stages"]) != k_here and not _within_trained_k(trained, result):
        differ.append(f"K={trained['hardware']['stages']} (here K={result['hardware']['stages']})")
    if not differ:
        return None
    return f"the checkpoint was trained for {', '.join(differ)}; a checkpoint trained for this problem may do better"


def setup_text(result: dict) -> str:
    """`` (compile 1.23s, not in time)`` when the solver reported compilation (not in ``solve_time_s``), else empty."""
    compile_s = (result.get("info") or {}).get("compile_s")
    return f" (compile {compile_s:.2f}s, not in time)" if compile_s is not None else ""
