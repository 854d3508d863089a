"""The order policy: scores -> topological order -> exact contiguous split (respect_jax/policy/order.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from flax import nnx

from respect_jax.costs import Hardware, evaluate_assignment, hardware_from_dict
from respect_jax.graphs.generators import GeneratorConfig, generate_numpy
from respect_jax.graphs.graph import load_graph
from respect_jax.labels import load_labelled_dataset, read_manifest
from respect_jax.policy.order import (
    NUM_ORDER_CONTEXT,
    NUM_ORDER_FEATURES,
    OrderPolicyConfig,
    decode_scores,
    order_from_scores,
    order_inputs,
    predict_scores,
    split_order,
    stage_targets,
)
from respect_jax.policy.order_model import OrderPolicy, load_order_policy, save_order_policy
from respect_jax.reference import reference_metrics

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT / "data" / "labels"


def _labelled(name: str, count: int):
    manifest = read_manifest(LABELS / name)
    return hardware_from_dict(manifest["hardware"]), manifest["objective"], load_labelled_dataset(LABELS / name)[:count]


def _is_topological(graph, order) -> bool:
    position = np.empty(graph.num_nodes, np.int64)
    position[order] = np.arange(graph.num_nodes)
    return sorted(order.tolist()) == list(range(graph.num_nodes)) and bool(
        np.all(position[graph.edges[:, 0]] < position[graph.edges[:, 1]])
    )


def test_order_from_scores_is_topological_and_follows_scores():
    graph = generate_numpy(GeneratorConfig(mode="arch", min_nodes=60, max_nodes=90), np.random.default_rng(3))
    rng = np.random.default_rng(0)
    for _ in range(5):
        scores = rng.standard_normal(graph.num_nodes)
        order = order_from_scores(graph, scores)
        assert _is_topological(graph, order)
    # SPEC positions as scores give back the SPEC order
    spec = graph.topological_order()
    assert np.array_equal(order_from_scores(graph, np.arange(graph.num_nodes, dtype=float)), spec)
    # the ready node of least score goes first: with scores falling along the SPEC order, the last source
    first = order_from_scores(graph, -np.arange(graph.num_nodes, dtype=float))[0]
    sources = [v for v in range(graph.num_nodes) if v not in set(graph.edges[:, 1].tolist())]
    assert first == max(sources, key=lambda v: int(np.where(spec == v)[0][0]))


@pytest.mark.parametrize("name", ["respect30_k4_paper", "respect30_k4_latency"])
def test_teacher_stage_scores_recover_the_proven_optimum(name):
    """Complete: scores ranking the nodes by an optimal schedule's stages give that optimum back (CP-SAT labels)."""
    hw, objective, items = _labelled(name, 12)
    for item in items:
        scores = stage_targets(item.graph, item.assignment, hw.stages)
        assignment, value, _ = decode_scores(item.graph, hw, objective, 1.0, scores)
        metrics = evaluate_assignment(item.graph, assignment, hw, objective)
        assert metrics["valid"]
        assert metrics["objective"] == pytest.approx(value, rel=1e-6)
        assert value == pytest.approx(item.objective, rel=1e-6)


def test_split_of_any_order_is_scored_by_the_shared_evaluator():
    hw = Hardware(stages=5, sram_bytes=4e5, param_bytes=1, act_bytes=1, macs_per_s=1e9, host_bw=1e8, link_bw=5e7,
                  stage_overhead_s=1e-4)
    graph = generate_numpy(GeneratorConfig(mode="respect", min_nodes=40, max_nodes=40), np.random.default_rng(5))
    rng = np.random.default_rng(1)
    spec_value = split_order(graph, hw, "paper", 1.0, graph.topological_order())[1]
    best = np.inf
    for objective in ("paper", "latency"):
        for _ in range(4):
            assignment, value = split_order(graph, hw, objective, 1.0, order_from_scores(graph, rng.random(40)))
            metrics = evaluate_assignment(graph, assignment, hw, objective)
            assert metrics["valid"] and metrics["objective"] == pytest.approx(value, rel=1e-6)
            if objective == "paper":
                best = min(best, value)
    # sampling keeps the best candidate: never worse than its greedy order
    scores = np.arange(40) / 39.0
    _, greedy, _ = decode_scores(graph, hw, "paper", 1.0, scores, samples=0)
    _, sampled, _ = decode_scores(graph, hw, "paper", 1.0, scores, samples=6, noise=0.2)
    assert greedy == pytest.approx(spec_value, rel=1e-12) and sampled <= greedy


def test_inputs_are_size_free_and_see_the_hardware():
    graph = load_graph(ROOT / "data" / "models" / "mobilenetv2.json")
    hw = hardware_from_dict({"stages": 4, "sram_bytes": 8e6, "param_bytes": 1, "act_bytes": 1, "macs_per_s": 2.4e11,
                             "host_bw": 4.7e8, "link_bw": 2.35e8, "stage_overhead_s": 2e-4})
    feats, context = order_inputs(graph, hw, "latency")
    assert feats.shape == (graph.num_nodes, NUM_ORDER_FEATURES) and context.shape == (NUM_ORDER_CONTEXT,)
    # every byte count x 10 (graph and hardware), or every rate and the overhead x 10: same inputs
    scaled = dataclasses.replace(graph, params=graph.params * 10, output_size=graph.output_size * 10)
    hw_bytes = dataclasses.replace(hw, sram_bytes=hw.sram_bytes * 10, host_bw=hw.host_bw * 10, link_bw=hw.link_bw * 10)
    f2, c2 = order_inputs(scaled, hw_bytes, "latency")
    np.testing.assert_allclose(f2, feats, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c2, context, rtol=1e-5, atol=1e-6)
    # SRAM, K and the objective are inputs: the network's scores change with each
    model = OrderPolicy(OrderPolicyConfig(layers=1, width=16, heads=2), rngs=nnx.Rngs(0))
    base = predict_scores(model, [graph], [hw], ["latency"])[0]
    for other_hw, objective in [(dataclasses.replace(hw, sram_bytes=hw.sram_bytes / 8), "latency"),
                                (dataclasses.replace(hw, stages=8), "latency"), (hw, "paper")]:
        other = predict_scores(model, [graph], [other_hw], [objective])[0]
        assert np.max(np.abs(other - base)) > 1e-4


def test_checkpoint_round_trip(tmp_path):
    model = OrderPolicy(OrderPolicyConfig(layers=2, width=16, heads=2), rngs=nnx.Rngs(1))
    save_order_policy(tmp_path / "run", model, {"note": "test"})
    loaded, doc = load_order_policy(tmp_path / "run")
    assert doc["note"] == "test" and doc["policy"]["width"] == 16
    graphs = [generate_numpy(GeneratorConfig(mode="arch", min_nodes=30, max_nodes=60), np.random.default_rng(i))
              for i in range(3)]
    hw = Hardware(stages=3, sram_bytes=8e6, param_bytes=1, act_bytes=1, macs_per_s=2.4e11, host_bw=4.7e8,
                  link_bw=2.35e8, stage_overhead_s=2e-4)
    a = predict_scores(model, graphs, [hw] * 3, ["paper"] * 3)
    b = predict_scores(loaded, graphs, [hw] * 3, ["paper"] * 3)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="not an order-policy checkpoint"):
        load_order_policy(tmp_path)


def _eval_shape_load(path: Path) -> OrderPolicy:
    """The loader before session 22 (the reference): ``nnx.eval_shape`` of the initialisation, each stored array
    restored with ``jnp.asarray``."""
    import json

    import jax
    import jax.numpy as jnp

    config = OrderPolicyConfig.from_dict(json.loads((path / "network.json").read_text())["policy"])
    model = nnx.eval_shape(lambda: OrderPolicy(config, rngs=nnx.Rngs(0)))
    with np.load(path / "params.npz") as data:
        stored = {k: data[k] for k in data.files}
    state = nnx.state(model, nnx.Param)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(nnx.to_pure_dict(state))
    names = ["/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in key_path) for key_path, _ in leaves]
    nnx.replace_by_pure_dict(state, jax.tree_util.tree_unflatten(treedef, [jnp.asarray(stored[n]) for n in names]))
    nnx.update(model, state)
    return model


@pytest.mark.parametrize("config", [None, OrderPolicyConfig(encoder="mean", layers=1, width=8, heads=1, head_layers=0)])
def test_skeleton_loader_gives_the_eval_shape_loaders_parameters_and_scores(tmp_path, config):
    """load_order_policy builds the network as a skeleton (ShapeOnlyRngs, nothing traced): the same module structure,
    bit-identical parameters and scores as the eval_shape loader, on the shipped checkpoint and on a small one."""
    import jax

    from respect_jax.policy.encoder import ShapeOnlyRngs
    from respect_jax.policy.order_solver import DEFAULT_ORDER_CHECKPOINT

    if config is None:
        path = Path(DEFAULT_ORDER_CHECKPOINT)
    else:
        path = tmp_path / "run"
        save_order_policy(path, OrderPolicy(config, rngs=nnx.Rngs(2)), {})
    load_order_policy.cache_clear()
    loaded, _ = load_order_policy(path)
    reference = _eval_shape_load(path)
    assert nnx.graphdef(loaded) == nnx.graphdef(reference)
    a, b = jax.tree.leaves(nnx.state(loaded)), jax.tree.leaves(nnx.state(reference))
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and np.array_equal(np.asarray(x), np.asarray(y))
    skeleton = OrderPolicy(loaded.config, rngs=ShapeOnlyRngs())
    assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(nnx.state(skeleton)))
    graphs = [generate_numpy(GeneratorConfig(mode="arch", min_nodes=30, max_nodes=60), np.random.default_rng(i))
              for i in range(2)]
    hw = Hardware(stages=3, sram_bytes=8e6, param_bytes=1, act_bytes=1, macs_per_s=2.4e11, host_bw=4.7e8,
                  link_bw=2.35e8, stage_overhead_s=2e-4)
    for x, y in zip(predict_scores(loaded, graphs, [hw] * 2, ["paper"] * 2),
                    predict_scores(reference, graphs, [hw] * 2, ["paper"] * 2), strict=True):
        assert np.array_equal(x, y)


def test_learning_beats_untrained_and_contiguous_on_held_out_graphs(tmp_path):
    """Tiny imitation run on proven optima (64 graphs of respect30_k4_paper, K = 4); on 32 other graphs of the set its
    greedy schedules are closer to the proven optimum than the untrained network's and the SPEC order's split."""
    from respect_jax.train.order import Instance, OrderTrainConfig, ValInstance, train_order_policy

    hw, objective, items = _labelled("respect30_k4_paper", 96)
    train = [Instance(it.graph, hw, objective, 1.0, it.assignment, it.objective, True) for it in items[:64]]
    held = items[64:]
    cases = [ValInstance("held", it.graph, hw, objective, it.objective) for it in held]
    cfg = OrderTrainConfig(steps=300, batch_size=16, lr=3e-3, generated=0, relabel_every=0, eval_every=300,
                           objectives=(objective,))
    config = OrderPolicyConfig(layers=2, width=32, heads=2, head_layers=1)
    train_order_policy(cfg, config, [hw], train, cases, tmp_path / "run", log=lambda _: None)
    trained, _ = load_order_policy(tmp_path / "run")
    untrained = OrderPolicy(config, rngs=nnx.Rngs(0))

    def mean_gap(model) -> float:
        scores = predict_scores(model, [it.graph for it in held], [hw] * len(held), [objective] * len(held))
        return float(np.mean([decode_scores(it.graph, hw, objective, 1.0, s)[1] / it.objective - 1
                              for it, s in zip(held, scores, strict=True)]))

    contiguous = float(np.mean([split_order(it.graph, hw, objective, 1.0, it.graph.topological_order())[1]
                                / it.objective - 1 for it in held]))
    learned, random_init = mean_gap(trained), mean_gap(untrained)
    assert learned < contiguous - 0.005, (learned, contiguous)
    assert learned < random_init - 0.005, (learned, random_init)


@pytest.mark.parametrize("objective", ["paper", "latency"])
def test_dense_split_programmes_equal_the_sparse_ones(objective, monkeypatch):
    """The dense O(K n^2) twins used below DENSE_SPLIT_MAX_NODES give the same float as the O(K n log n) programmes
    on random topological orders (graphs with many equal segment costs included), and valid boundaries."""
    from respect_jax.solvers import partitioners

    rng = np.random.default_rng(7)
    graphs = [generate_numpy(GeneratorConfig(mode="arch", min_nodes=40, max_nodes=120), np.random.default_rng(i))
              for i in range(4)]
    graphs.append(load_graph(ROOT / "data" / "models" / "vgg16.json"))
    for graph in graphs:
        for k in (1, 2, 5, 8):
            hw = Hardware(stages=k, sram_bytes=float(rng.choice([2e5, 8e6])), param_bytes=1, act_bytes=1,
                          macs_per_s=2.4e11, host_bw=4.7e8, link_bw=2.35e8, stage_overhead_s=2e-4)
            order = order_from_scores(graph, rng.random(graph.num_nodes))
            monkeypatch.setattr(partitioners, "DENSE_SPLIT_MAX_NODES", 10**9)
            dense_cuts, dense_value, _ = partitioners.contiguous_search(graph, hw, objective, 0.5, order)
            monkeypatch.setattr(partitioners, "DENSE_SPLIT_MAX_NODES", 0)
            sparse_cuts, sparse_value, _ = partitioners.contiguous_search(graph, hw, objective, 0.5, order)
            assert dense_value == sparse_value
            assignment = partitioners.contiguous_assignment(graph, dense_cuts, order)
            metrics = evaluate_assignment(graph, assignment, hw, objective, 0.5)
            assert metrics["valid"] and metrics["objective"] == pytest.approx(dense_value, rel=1e-6)


def test_shipped_order_policy_schedules_every_bundled_model_at_k2_and_k8():
    """solver=policy's default family (the shipped order policy, one network) on every bundled model at K = 2
    (paper, greedy: solver=order_policy's schedule) and K = 8 (latency, the default sampled decoding and polish):
    valid, scored by the shared evaluator, never below the analytic lower bound, the split value agrees (greedy) or
    is never beaten by the polish's start (default)."""
    import respect_jax.policy.solver  # noqa: F401  (registers the solvers)
    from respect_jax.solvers import run_solver
    from respect_jax.solvers.bounds import analytic_lower_bound

    base = {"sram_bytes": 8388608.0, "param_bytes": 1.0, "act_bytes": 1.0, "macs_per_s": 2.4e11, "host_bw": 4.7e8,
            "link_bw": 2.35e8, "stage_overhead_s": 2e-4}
    for path in sorted((ROOT / "data" / "models").glob("*.json")):
        graph = load_graph(path)
        for k, objective in ((2, "paper"), (8, "latency")):
            hw = Hardware(stages=k, **base)
            if k == 2:
                doc = run_solver("policy", graph, hw, objective, 1.0, decoding="greedy")
                assert doc["info"]["family"] == "order" and doc["info"]["decoding"] == "greedy"
                assert doc["assignment"] == run_solver("order_policy", graph, hw, objective, samples=0)["assignment"]
            else:
                doc = run_solver("policy", graph, hw, objective, 1.0)
                assert doc["info"]["family"] == "order" and doc["info"]["decoding"] == "sample_32+ls"
                assert doc["info"]["noise"] == 0.2
            metrics = evaluate_assignment(graph, np.asarray(doc["assignment"]), hw, objective)
            assert metrics["valid"] and doc["objective"] == pytest.approx(metrics["objective"], rel=1e-9)
            if k == 2:
                assert doc["objective"] == pytest.approx(doc["info"]["split_objective"], rel=1e-6)
            else:  # the polish after the split: never worse
                assert doc["objective"] <= doc["info"]["split_objective"] * (1 + 1e-6)
            assert doc["objective"] >= analytic_lower_bound(graph, hw, objective, 1.0) * (1 - 1e-9)
            assert max(doc["assignment"]) < k


def test_auto_runs_the_order_policy_as_a_member():
    import respect_jax.policy.order_solver  # noqa: F401  (registers the solver)
    from respect_jax.solvers import run_solver

    graph = generate_numpy(GeneratorConfig(mode="respect", min_nodes=40, max_nodes=40), np.random.default_rng(2))
    hw = Hardware(stages=4, sram_bytes=8388608.0, param_bytes=1, act_bytes=1, macs_per_s=2.4e11, host_bw=4.7e8,
                  link_bw=2.35e8, stage_overhead_s=2e-4)
    result = run_solver("auto", graph, hw, "paper", time_budget_s=30.0, exact="none", progress=False,
                        members=["contiguous", "order_policy"], member_options={"order_policy": {"samples": 4}},
                        lattice_downsets=0)  # the graph has few downsets: auto would prove it before any member
    portfolio = result["info"]["portfolio"]
    alone = run_solver("order_policy", graph, hw, "paper", samples=4)["objective"]
    assert portfolio["order_policy"]["objective"] == pytest.approx(alone, rel=1e-9)
    assert result["objective"] <= alone * (1 + 1e-9)


def test_the_order_training_preset_sets_every_option():
    """conf/algorithm/order_expert_iteration.yaml holds every field of OrderTrainConfig (so each can be overridden on
    the command line) plus the command's own keys, and nothing else."""
    import yaml

    from respect_jax.cli.train_order import VAL_KEYS
    from respect_jax.train.order import OrderTrainConfig

    doc = yaml.safe_load((ROOT / "conf" / "algorithm" / "order_expert_iteration.yaml").read_text())
    fields = {f.name for f in dataclasses.fields(OrderTrainConfig)}
    assert set(doc) == fields | set(VAL_KEYS) | {"name", "presets", "dataset_limit"}
    doc.pop("name")
    for key in (*VAL_KEYS, "presets", "dataset_limit"):
        doc.pop(key)
    OrderTrainConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc.items()})


# ------------------------------------------------------------------------------------------- the polish (local search)
POLISH_HW = {"sram_bytes": 4.0e5, "param_bytes": 1.0, "act_bytes": 1.0, "macs_per_s": 2.4e11, "host_bw": 4.7e8,
             "link_bw": 2.35e8, "stage_overhead_s": 2e-4}


def _small_graphs(count: int, seed: int, nodes: tuple[int, int] = (7, 10)):
    rng = np.random.default_rng(seed)
    config = GeneratorConfig(mode="respect", min_nodes=nodes[0], max_nodes=nodes[1])
    return [generate_numpy(config, rng) for _ in range(count)], rng


def _random_schedule(graph, k: int, rng) -> np.ndarray:
    """int64[n] a random valid schedule: each node one stage after its latest predecessor's, or on it."""
    s = np.zeros(graph.num_nodes, np.int64)
    preds = [[] for _ in range(graph.num_nodes)]
    for u, v in graph.edges.tolist():
        preds[v].append(u)
    for v in graph.topological_order():
        s[v] = min(k - 1, max((s[u] for u in preds[v]), default=0) + rng.integers(0, 2))
    return s


def _reference_score(graph, s, hw, objective: str) -> float:
    """The polish's search score, objective * (1 + 1e-3 * mean((load / max load)^4)), by the NumPy evaluator."""
    from respect_jax.local_search import TIE_BREAK
    from respect_jax.reference import reference_metrics, reference_objective

    m = reference_metrics(graph, s, hw)
    if not m["valid"]:
        return np.inf
    loads = np.asarray(m["time_k"] if objective == "latency" else m["mem_k"], float)
    balance = np.mean((loads / max(loads.max(), 1e-30)) ** 4)
    return reference_objective(graph, s, hw, objective) * (1 + TIE_BREAK * balance)


def _python_moves(graph, s, k: int, closure: bool) -> list[np.ndarray]:
    """Every valid schedule one move from ``s``: a node one stage up / down alone (``closure`` False; only where its
    predecessors and successors allow it) or with its descendants / ancestors on its stage (``closure`` True)."""
    succ = [[] for _ in range(graph.num_nodes)]
    pred = [[] for _ in range(graph.num_nodes)]
    for u, v in graph.edges.tolist():
        succ[u].append(v)
        pred[v].append(u)

    def reach(v, nbrs):
        seen, todo = {v}, [v]
        while todo:
            for w in nbrs[todo.pop()]:
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        return seen

    out = []
    for v in range(graph.num_nodes):
        for step, nbrs in ((1, succ), (-1, pred)):
            t = s.copy()
            group = [w for w in reach(v, nbrs) if s[w] == s[v]] if closure else [v]
            t[group] += step
            if t.min() >= 0 and t.max() < k and all(t[a] <= t[b] for a, b in graph.edges.tolist()):
                out.append(t)
    return out


def _python_hill_climb(graph, start, hw, objective: str, k: int) -> float | None:
    """The least objective seen by best-improvement hill climbing over the single-node moves on the search score (NumPy
    evaluator, float64; ties to the first move in the padded order, up moves before down moves, as the polish breaks
    them); None if two candidates' scores, or the best and the current one, come within 1e-5 relative (float32 may
    decide that tie either way)."""
    from respect_jax.graphs.padded import pad_graph
    from respect_jax.reference import reference_objective

    ids = [int(i) for i in pad_graph(graph).node_ids if i >= 0]
    s = np.asarray(start, np.int64).copy()
    current = _reference_score(graph, s, hw, objective)
    best = reference_objective(graph, s, hw, objective)
    for _ in range(200):
        scored = []
        for step in (1, -1):
            for v in ids:
                t = s.copy()
                t[v] += step
                if 0 <= t[v] < k and all(t[a] <= t[b] for a, b in graph.edges.tolist()):
                    scored.append((_reference_score(graph, t, hw, objective), len(scored), t))
        if not scored:
            return best
        scored.sort(key=lambda x: (x[0], x[1]))
        top = scored[0][0]
        if abs(top - current) <= 1e-5 * current or (len(scored) > 1 and 0 < scored[1][0] - top <= 1e-5 * top):
            return None
        if top >= current:
            return best
        s, current = scored[0][2], top
        best = min(best, reference_objective(graph, s, hw, objective))
    return best


@pytest.mark.parametrize("objective", ["paper", "latency"])
def test_single_node_polish_is_valid_never_worse_and_reaches_the_python_climb(objective):
    """polish(kind='single') from random valid schedules of tiny graphs: valid and never worse by the NumPy evaluator,
    and (escapes off, moves enough) it reaches the objective of a plain-Python best-improvement climb over every
    valid single-node move scored by the NumPy evaluator (climbs with a near-tie on the way are skipped); with
    closure escapes it is never worse than without (the same descent, continued)."""
    from respect_jax.local_search import polish
    from respect_jax.reference import reference_objective

    graphs, rng = _small_graphs(8, seed=3)
    improved = escaped = checked = 0
    for graph in graphs:
        for k in (3, 4):
            hw = Hardware(stages=k, **POLISH_HW)
            start = _random_schedule(graph, k, rng)
            before = reference_objective(graph, start, hw, objective)
            plain = polish(graph, hw, objective, 1.0, start, 200, kind="single")
            escapes = polish(graph, hw, objective, 1.0, start, 200, kind="single", screen=8, escapes=5)
            for out in (plain, escapes):
                assert all(out[u] <= out[v] for u, v in graph.edges.tolist()) and 0 <= out.min() <= out.max() < k
                assert reference_objective(graph, out, hw, objective) <= before * (1 + 1e-6)
            reached = _python_hill_climb(graph, start, hw, objective, k)
            if reached is not None:  # no near-tie on the way: the polish reaches what the Python climb reaches
                checked += 1
                assert reference_objective(graph, plain, hw, objective) == pytest.approx(reached, rel=1e-5)
            plain_value, escape_value = (reference_objective(graph, x, hw, objective) for x in (plain, escapes))
            assert escape_value <= plain_value * (1 + 1e-6)
            improved += plain_value < before * (1 - 1e-6)
            escaped += escape_value < plain_value * (1 - 1e-6)
    assert improved  # the polish does move on these instances
    # the closure escapes get past some single-move local optima (paper; at this latency scale they find none)
    assert escaped or objective == "latency"
    assert checked >= 8  # most climbs have no near-tie


def test_screened_closure_move_with_a_full_screen_is_the_brute_force_best_closure_move():
    """With every candidate screened in (screen = 2N), best_screened_closure_move returns the closure move of least
    search score among all enumerated in plain Python; its objective is the NumPy evaluator's. The host-built
    reachability equals the scanned one."""
    import jax
    import jax.numpy as jnp

    from respect_jax.graphs.padded import pad_graph, reachability, to_original_order, to_position_order
    from respect_jax.local_search import _Value, best_screened_closure_move, host_reachability
    from respect_jax.reference import reference_objective

    graphs, rng = _small_graphs(6, seed=5)
    for graph in graphs:
        padded = pad_graph(graph)
        reach = host_reachability(padded)
        assert np.array_equal(reach, np.asarray(reachability(jax.tree.map(jnp.asarray, padded))) > 0)
        for objective in ("paper", "latency"):
            hw = Hardware(stages=3, **POLISH_HW)
            s = _random_schedule(graph, 3, rng)
            arrays = jax.tree.map(jnp.asarray, padded)
            value = _Value(arrays, hw, jnp.bool_(objective == "latency"), 1.0)
            cand, obj, score = best_screened_closure_move(
                arrays, jnp.asarray(reach), jnp.asarray(to_position_order(padded, s)), hw, value, 2 * padded.max_nodes)
            moves = _python_moves(graph, s, 3, closure=True)
            best = min(_reference_score(graph, t, hw, objective) for t in moves)
            got = to_original_order(padded, np.asarray(cand))
            assert any(np.array_equal(got, t) for t in moves)
            assert float(score) == pytest.approx(best, rel=1e-5)
            assert float(obj) == pytest.approx(reference_objective(graph, got, hw, objective), rel=1e-5)


def test_polish_bad_options_are_one_line_errors():
    from respect_jax.local_search import polish

    graph = _small_graphs(1, seed=1)[0][0]
    hw = Hardware(stages=3, **POLISH_HW)
    start = np.zeros(graph.num_nodes, np.int64)
    with pytest.raises(ValueError, match="single"):
        polish(graph, hw, "paper", 1.0, start, 5, kind="pairs")
    with pytest.raises(ValueError, match="escapes"):
        polish(graph, hw, "paper", 1.0, start, 5, kind="single", screen=-1)


def test_default_decoding_polishes_and_greedy_does_not():
    """solver=policy's default: 32 noisy orders at noise 0.2, then 100 single-node moves with 10 screened closure
    escapes (16 candidates), chosen on validation; never worse than the split it starts from; decoding=greedy stays the
    greedy order alone; the step policy refuses the order policy's polish options."""
    import respect_jax.policy.solver as policy_solver
    from respect_jax.solvers import run_solver

    assert (policy_solver.ORDER_DEFAULT_SAMPLES, policy_solver.ORDER_DEFAULT_NOISE) == (32, 0.2)
    assert (policy_solver.ORDER_DEFAULT_LOCAL_SEARCH, policy_solver.ORDER_DEFAULT_LS_MOVES,
            policy_solver.ORDER_DEFAULT_LS_SCREEN, policy_solver.ORDER_DEFAULT_LS_ESCAPES) == (100, "single", 16, 10)
    graph = generate_numpy(GeneratorConfig(mode="respect", min_nodes=60, max_nodes=60), np.random.default_rng(4))
    hw = Hardware(stages=4, **POLISH_HW)
    doc = run_solver("policy", graph, hw, "paper", 1.0)
    info = doc["info"]
    assert info["decoding"] == "sample_32+ls" and info["local_search"] == 100
    assert (info["ls_kind"], info["ls_screen"], info["ls_escapes"]) == ("single", 16, 10)
    assert doc["objective"] <= info["split_objective"] * (1 + 1e-6)
    assert info["ls_boundaries"] == 2  # the stage-boundary re-cuts come with the single-move polish
    greedy = run_solver("policy", graph, hw, "paper", 1.0, decoding="greedy")["info"]
    assert greedy["decoding"] == "greedy" and greedy["local_search"] == 0 and "ls_boundaries" not in greedy
    with pytest.raises(ValueError, match="order-policy checkpoint"):
        policy_solver._route(checkpoint=str(policy_solver.DEFAULT_CHECKPOINT), ls_escapes=3)


@pytest.mark.slow  # ~40 s on the loaded 2-core CPU: the forward pass and the polish compile for a new shape
def test_boundary_recuts_in_the_decoding_are_never_worse():
    """The order policy with the stage-boundary re-cuts (``ls_boundaries``, default 2 rounds with the single-move
    polish) is valid and never worse than without them (``ls_boundaries=0``) on NAS-cell architectures; a negative
    count is a one-line error."""
    import respect_jax.policy.order_solver  # noqa: F401  (registers solver=order_policy)
    from respect_jax.graphs.architectures import FAMILIES, ArchConfig, generate_arch_numpy
    from respect_jax.solvers import run_solver

    weights = tuple(1.0 if f.name.startswith("nas") else 0.0 for f in FAMILIES)
    options = {"samples": 4, "noise": 0.2, "local_search": 50, "ls_moves": "single", "ls_screen": 8, "ls_escapes": 3}
    graph = generate_arch_numpy(60, 90, np.random.default_rng(2), arch=ArchConfig(family_weights=weights, p_hybrid=0.0))
    hw = Hardware(stages=4, **POLISH_HW)  # one padded shape and K: one compilation of the polish for both objectives
    for objective in ("paper", "latency"):
        plain = run_solver("order_policy", graph, hw, objective, 1.0, **options, ls_boundaries=0)
        recut = run_solver("order_policy", graph, hw, objective, 1.0, **options)
        assert recut["info"]["ls_boundaries"] == 2 and "ls_boundaries" not in plain["info"]
        assert reference_metrics(graph, recut["assignment"], hw)["valid"]
        assert recut["objective"] <= plain["objective"] * (1 + 1e-6)
    with pytest.raises(ValueError, match="ls_boundaries"):
        run_solver("order_policy", graph, hw, "paper", 1.0, **options, ls_boundaries=-1)


@pytest.fixture
def executable_cache(tmp_path):
    """The commands' executable cache on in a fresh folder for one test, then off; memory entries cleared."""
    from respect_jax import compile_cache

    compile_cache._COMPILED.clear()
    folder = compile_cache.enable_compilation_cache(tmp_path / "jax")
    yield folder
    compile_cache.enable_compilation_cache(None)
    compile_cache._COMPILED.clear()


def test_a_later_process_schedules_from_stored_executables_without_building_or_tracing(executable_cache, monkeypatch):
    """solver=policy's default on a graph stores the forward pass and the polish as executables; with this process's
    memory cleared (as a new process) the same call loads them back: neither the network module nor the polish is
    built or traced, and the schedule, its objective and the split are the same. The network-free loader gives the
    module's scores (a jit of the module itself)."""
    import jax

    from respect_jax import compile_cache, local_search
    from respect_jax.policy import order, order_model
    from respect_jax.policy.order_solver import DEFAULT_ORDER_CHECKPOINT, solve_order_policy

    graph = generate_numpy(GeneratorConfig(mode="arch", min_nodes=40, max_nodes=60), np.random.default_rng(4))
    hw = Hardware(stages=4, **POLISH_HW)
    options = {"samples": 4, "noise": 0.2, "local_search": 50, "ls_moves": "single", "ls_screen": 8, "ls_escapes": 3}
    first = solve_order_policy(graph, hw, "latency", **options)
    names = sorted(p.name.split("-")[0] for p in (executable_cache / "executables").glob("*.pkl"))
    assert names == ["order_forward", "polish_single"]
    compile_cache._COMPILED.clear()

    def untraceable(*_, **__):
        raise AssertionError("built or traced although a stored executable exists")

    monkeypatch.setattr(order_model, "restore_module", untraceable)
    monkeypatch.setattr(local_search, "_polish_single", untraceable)
    from respect_jax.policy import order_solver

    monkeypatch.setattr(order_solver, "_compiled_shapes", set())
    monkeypatch.setattr(order_solver, "_polished_shapes", set())
    again = solve_order_policy(graph, hw, "latency", **options)
    assert np.array_equal(again.assignment, first.assignment)
    assert again.info["split_objective"] == first.info["split_objective"]
    monkeypatch.undo()
    network, _ = order.load_order_network(str(DEFAULT_ORDER_CHECKPOINT))
    module, _ = load_order_policy(str(DEFAULT_ORDER_CHECKPOINT))
    batch = order.make_batch([graph], [hw], ["paper"], order.bucket_shape([graph]))
    direct = np.asarray(jax.jit(lambda g, f, c: module(g, f, c, "segment"))(batch.graphs, batch.feats, batch.context))
    via = predict_scores(network, [graph], [hw], ["paper"])[0]
    np.testing.assert_allclose(via, direct[0, : graph.num_nodes], rtol=1e-6, atol=1e-6)


def test_a_checkpoint_missing_a_parameter_is_a_one_line_error(tmp_path):
    """load_order_network reads any set of arrays; building the network (load_order_policy, or the forward pass of
    the network-free form) names the missing parameter in one line."""
    from respect_jax.policy.order import load_order_network

    save_order_policy(tmp_path / "run", OrderPolicy(OrderPolicyConfig(layers=1, width=8, heads=1), rngs=nnx.Rngs(0)),
                      {})
    with np.load(tmp_path / "run" / "params.npz") as data:
        kept = {k: data[k] for k in data.files if k != "out/bias"}
    np.savez(tmp_path / "run" / "params.npz", **kept)
    with pytest.raises(ValueError, match=r"parameter out/bias missing or of the wrong shape"):
        load_order_policy(tmp_path / "run")
    network, _ = load_order_network(tmp_path / "run")
    graph = generate_numpy(GeneratorConfig(mode="arch", min_nodes=20, max_nodes=30), np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"parameter out/bias missing"):
        predict_scores(network, [graph], [Hardware(stages=2, **POLISH_HW)], ["paper"])


def test_the_decoding_runs_with_the_cyclic_collector_paused_and_restores_it(monkeypatch):
    """One graph's decoding (solver=policy's default) runs with Python's cyclic garbage collector off, and the
    collector is back as it was afterwards: on when it was on, off when it was off (also when the decoding raises)."""
    import gc

    import respect_jax.policy.order_solver as order_solver
    from respect_jax.solvers import run_solver

    graph = generate_numpy(GeneratorConfig(mode="respect", min_nodes=60, max_nodes=60), np.random.default_rng(4))
    hw = Hardware(stages=4, **POLISH_HW)
    seen, real = [], order_solver._decode
    monkeypatch.setattr(order_solver, "_decode", lambda *a, **k: seen.append(gc.isenabled()) or real(*a, **k))
    was = gc.isenabled()
    try:
        gc.enable()
        doc = run_solver("policy", graph, hw, "paper", 1.0)
        assert seen == [False] and gc.isenabled() and doc["info"]["decoding"] == "sample_32+ls"
        gc.disable()
        run_solver("policy", graph, hw, "paper", 1.0)
        assert seen == [False, False] and not gc.isenabled()
        gc.enable()
        monkeypatch.setattr(order_solver, "_decode", lambda *a, **k: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            run_solver("policy", graph, hw, "paper", 1.0)
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
