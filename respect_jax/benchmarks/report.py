"""The Markdown page of ``respect-bench`` results: the machine and its load, then one section per benchmark."""

from __future__ import annotations


def to_markdown(results: dict) -> str:
    """The whole page (no trailing newline) of a results document (``machine``, ``load_before``/``load_after``
    and any of ``env``, ``generator``, ``policy``, ``many``, ``order_train``)."""
    lines = ["# respect-bench", ""]
    m = results["machine"]
    load = ""
    if "load_before" in results and "load_after" in results:
        load = (
            f"; load average {results['load_before'][0]:.1f} before / {results['load_after'][0]:.1f} after "
            "(on a shared machine the figures are lower bounds)"
        )
    lines.append(f"Machine: {m['platform']}, {m['cpu_count']} CPUs, JAX {m['jax']} on {m['jax_backend']}{load}.")
    lines.append("")
    if "env" in results:
        e = results["env"]
        lines += [
            f"## Environment ({e['nodes']}-node {e['mode']} graphs, K={e['stages']}, random allowed actions)",
            "",
            "| environment | env steps/s |",
            "|---|---|",
            f"| JAX (jit+vmap+scan, {e['jax_env_batch']} graphs at once) | {e['jax_env_steps_per_s']:,.0f} |",
            f"| Python loop (one graph at a time, {e['loop_env_graphs']} graphs) | {e['loop_env_steps_per_s']:,.0f} |",
            f"| **ratio** | **{e['speedup']:,.0f}x** |",
            "",
            f"JAX compile time: {e['jax_compile_s']:.2f} s.",
            "",
        ]
    if "generator" in results:
        lines += ["## JAX graph generator", "", "| mode | nodes | graphs/s |", "|---|---|---|"]
        for mode, g in results["generator"].items():
            lines.append(f"| {mode} | {g['nodes']} | {g['graphs_per_s']:,.0f} |")
        lines.append("")
    if "policy" in results:
        lines += policy_markdown(results["policy"])
    if "many" in results:
        lines += many_markdown(results["many"])
    if "order_train" in results:
        from respect_jax.benchmarks.order import order_train_markdown

        lines += order_train_markdown(results["order_train"])
    return "\n".join(lines)


def many_markdown(m: dict) -> list[str]:
    """The "Many graphs at once" section of :func:`to_markdown` (lines)."""
    lines = [
        f"## Many graphs at once (`solver=policy`, `{m['checkpoint']}`, {m['objective']}, K={m['stages']})",
        "",
        f"{m['graphs']} generated {m['mode']} graphs of {m['nodes']} nodes, {m['batch_size']} per compiled forward "
        f"call; graphs/s of the whole batched call (`run_solver_many`: padding, forward passes, orders and splits, "
        f"the shared evaluator's batched re-scoring, one result document per graph) after compilation, best of "
        f"{m['repeats']} (median beside it), and per CPU second of the process (all threads); schedule ms: the mean "
        "`solve_time_s` per graph (its share of the solver's batched call without compilation: forward passes, "
        "orders, splits, local search); compile s: compiling the forward pass of each bucket (0 when an earlier row "
        "compiled it); first call s: the whole first call (every compilation of the row included, e.g. local "
        "search's); threads: the solver's worker threads (decoding units at a time).",
        "",
        "| decoding | graphs/s | median graphs/s | graphs per CPU s | schedule ms | mean objective | compile s "
        "| first call s | buckets | threads |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for name, r in m["rows"].items():
        buckets = ", ".join("x".join(str(v) for v in b) for b in r["buckets"])
        # results written before these columns leave them blank
        schedule = f"{r['schedule_ms_mean']:,.1f}" if "schedule_ms_mean" in r else ""
        objective = f"{r['mean_objective']:.6g}" if "mean_objective" in r else ""
        lines.append(
            f"| {name} ({r['decoding']}) | {r['graphs_per_s']:,.1f} | {r['graphs_per_s_median']:,.1f} | "
            f"{r.get('graphs_per_cpu_s', float('nan')):,.1f} | {schedule} | {objective} | {r['compile_s']:.1f} "
            f"| {r['first_call_s']:.1f} | {buckets} | {r.get('threads') or ''} |"
        )
    lines.append("")
    return lines


def policy_markdown(p: dict) -> list[str]:
    """The "Learned scheduler" section of :func:`to_markdown` (lines)."""
    label = p.get("checkpoint_label") or f"step {p['checkpoint_step']}"  # results written before the label: the step
    lines = [
        f"## Learned scheduler (`{p['checkpoint']}`, {label})",
        "",
        f"| training ({p['training_nodes']}-node graphs) | graphs/s | schedules/s | compile s | batch "
        "| schedules/graph |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in p["training"].items():
        per_graph = r["samples_per_graph"] or 1
        lines.append(
            f"| {name} | {r['graphs_per_s']:,.0f} | {r['graphs_per_s'] * per_graph:,.0f} | {r['compile_s']:.1f} | "
            f"{r['batch_size']} | {r['samples_per_graph'] or '1 (label)'} |"
        )
    c, r = p["compile_large"], p["latency"]
    lines += [
        "",
        f"Imitation update epoch compile time, {c['bucket_nodes']}-node bucket: {c['imitation_compile_s']:.1f} s.",
        "",
        f"Greedy schedule of {r['graph']} ({r['num_nodes']} nodes, bucket {r['bucket_nodes']}): "
        f"{r['greedy_ms_best']:.1f} ms best / {r['greedy_ms_median']:.1f} ms median after compilation "
        f"(compile {r['compile_s']:.1f} s).",
        "",
    ]
    return lines
