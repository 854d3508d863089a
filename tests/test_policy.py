"""The scheduling policy: parallel teacher forcing = step-by-step decoding, aggregation paths agree,
every decoding strategy yields valid schedules scored by the shared evaluator, solver=policy."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_hw, random_graphs
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st

from respect_jax.costs import evaluate_assignment
from respect_jax.env import SchedulingEnv
from respect_jax.graphs import GeneratorConfig, generate_numpy, pad_graph, stack_graphs, to_original_order
from respect_jax.policy.config import PolicyConfig
from respect_jax.policy.decoding import MULTI_STRATEGIES, Decoding, make_decoder
from respect_jax.policy.features import features, graph_statics
from respect_jax.policy.model import (
    SchedulingPolicy,
    decoder_steps,
    rollout,
    rollout_recorded,
    schedule_objectives,
)
from respect_jax.policy.state import (
    advance,
    init_decode_state,
    prefix_quantities,
    stage_sums_before,
    step_quantities,
)
from respect_jax.reference import reference_metrics, reference_objective

SMALL = dict(width=16, decoder_width=16, layers=1, decoder_layers=1, heads=2)
SHAPE = (32, 256, 8)  # one padded bucket for the random graphs of these tests


def small_policy(seed: int = 0, **overrides) -> SchedulingPolicy:
    return SchedulingPolicy(PolicyConfig(**{**SMALL, **overrides}), rngs=nnx.Rngs(seed))


def generated(mode: str, count: int, seed: int, lo: int = 5, hi: int = 30):
    """``count`` graphs of ``mode`` drawn with NumPy, padded to :data:`SHAPE` (one bucket for every test here: the same
    compiled programs where the network and batch agree, and no generator to compile; the JAX generator has its own
    tests)."""
    rng = np.random.default_rng(seed)
    cfg = GeneratorConfig(mode=mode, min_nodes=lo, max_nodes=hi)
    return stack_graphs([generate_numpy(cfg, rng, name=f"{mode}{i}") for i in range(count)], SHAPE)


@pytest.mark.parametrize(
    "mode, decoder, cut_heads", [("respect", "mlp", 0), ("dnn", "attention", 0), ("dnn", "mlp", 2)]
)  # each mode and decoder once, and the cut attention
def test_teacher_forced_logits_equal_step_by_step_decoding(mode, decoder, cut_heads):
    """The parallel prefix-sum pass gives the logits the autoregressive decoder sees at every step, and
    so does the replay of the decoder inputs recorded during decoding (REINFORCE's pass)."""
    hw = make_hw(4)
    graphs = generated(mode, 4, seed=3)
    model = small_policy(decoder=decoder, cut_heads=cut_heads)
    h, g = nnx.jit(lambda m, x: m.encode(x))(model, graphs)
    decode = lambda m, gr, h, g, key, fn: fn(m, gr, h, g, hw, "paper", 1.0, key, 2, greedy=False)  # noqa: E731
    stage = nnx.jit(functools.partial(decode, fn=rollout))(model, graphs, h, g, jax.random.PRNGKey(1))
    stage_rec, inputs = nnx.jit(functools.partial(decode, fn=rollout_recorded))(
        model, graphs, h, g, jax.random.PRNGKey(1)
    )
    np.testing.assert_array_equal(stage_rec, stage)  # recording does not change the schedules
    parallel = nnx.jit(lambda m, gr, h, g, s: m.teacher_logits(gr, h, g, s, hw, "paper", 1.0))(
        model, graphs, h, g, stage
    )
    replay = np.asarray(
        nnx.jit(lambda m, gr, h, g, s, i: m.replay_logits(gr, h, g, s, i, hw))(model, graphs, h, g, stage, inputs)
    )
    real = np.asarray(inputs.allowed) & np.asarray(graphs.node_mask)[:, None, :, None]
    assert real.sum() > 0
    np.testing.assert_allclose(np.where(real, replay, 0), np.where(real, parallel, 0), rtol=1e-4, atol=1e-4)
    # the batched step-by-step decoder of rollout and beam search, fed the same schedules
    ds, step_logits, place = decoder_steps(model, graphs, h, g, hw, "paper", 1.0, 2)
    step_logits, place = jax.jit(step_logits), jax.jit(place)
    for t in range(int(jnp.max(graphs.num_nodes))):
        logits = np.asarray(step_logits(ds, t)[0])
        here = real[:, :, t]
        np.testing.assert_allclose(
            np.where(here, logits, 0), np.where(here, parallel[:, :, t], 0), rtol=1e-4, atol=1e-4
        )
        ds = place(ds, t, stage[:, :, t])
    if cut_heads:  # the per-graph check below calls the decoder without the cut attention's inputs
        return
    hq, he, gq = model.decoder.project_nodes(h, g)
    prefix_fn = jax.jit(prefix_quantities, static_argnums=4)

    @jax.jit
    def step(graph, statics, ds, t, hq_t, gq_b, he_t, action):
        q = step_quantities(graph, statics, ds, t)
        sf, ctx, allowed = features(q, statics, t, hw, "paper", 1.0)
        logits = model.decoder(hq_t, gq_b, ctx, sf, q.emb / jnp.maximum(q.count, 1.0)[:, None], allowed)
        return q, logits, allowed, advance(graph, statics, ds, t, action, he_t)

    for b in range(2):
        graph = jax.tree.map(lambda x, b=b: x[b], graphs)
        statics = graph_statics(graph, hw)
        prefix = prefix_fn(graph, statics, stage[b, 1], he[b], 4)
        ds = init_decode_state(graph.params.shape[0], 4, he.shape[-1])
        for t in range(int(graph.num_nodes)):
            q, logits, allowed, ds = step(graph, statics, ds, t, hq[b, t], gq[b], he[b, t], stage[b, 1, t])
            for name in ("mem", "macs", "count", "cross", "open", "predin", "low", "emb", "forced_par", "pushed_par"):
                np.testing.assert_allclose(
                    getattr(q, name), getattr(prefix, name)[t], rtol=1e-5, atol=1e-3, err_msg=f"{name} at t={t}"
                )
            np.testing.assert_allclose(
                np.where(allowed, logits, 0), np.where(allowed, parallel[b, 1, t], 0), rtol=1e-4, atol=1e-4
            )
        n = int(graph.num_nodes)
        assert np.array_equal(np.asarray(ds.stage)[:n], np.asarray(stage[b, 1, :n]))


def test_cut_features_match_the_reference_evaluator_on_prefix_cuts():
    """The cut attention's per-position quantities are what the NumPy reference evaluator charges for
    the two-stage schedule that cuts just before position j: stage-0 parameter bytes and the bytes
    forwarded across the boundary (graph outputs included)."""
    from respect_jax.policy.features import NUM_CUT_FEATURES, cut_features

    hw = make_hw(2, param_bytes=2.0, act_bytes=3.0)
    for graph in random_graphs(4, seed=31, min_nodes=6, max_nodes=25):
        padded = pad_graph(graph, SHAPE)
        st = jax.jit(graph_statics, static_argnums=1)(jax.tree.map(jnp.asarray, padded), hw)
        n = graph.num_nodes
        for j in range(1, n):
            stage = (np.arange(SHAPE[0]) >= j).astype(np.int32)
            ref = reference_metrics(graph, to_original_order(padded, stage), hw)
            assert float(st.cut_b[j]) == pytest.approx(ref["comm_bytes"], rel=1e-5)
            assert float(st.par_before[j]) == pytest.approx(ref["mem_k"][0], rel=1e-5)
        t = n // 3
        feats, valid = cut_features(st, t, hw)
        assert feats.shape == (SHAPE[0], NUM_CUT_FEATURES)
        np.testing.assert_array_equal(np.asarray(valid), (np.arange(SHAPE[0]) > t) & (np.arange(SHAPE[0]) < n))
        j = n - 1  # nodes t..n-2 join the current stage
        par = np.sum(hw.param_bytes * np.asarray(padded.params)[t:j]) / float(st.mem_scale)
        assert float(feats[j, 0]) == pytest.approx(par, rel=1e-5)
        assert float(feats[j, 4]) == pytest.approx(float(st.cut_b[j] / st.mem_scale), rel=1e-5)
        assert not np.any(np.asarray(feats)[~np.asarray(valid)])


@pytest.mark.parametrize("by_stage_rows", [True, False])
def test_stage_sums_before_equal_a_loop(by_stage_rows):
    """Both multiplications of the per-stage prefix sums (teacher forcing, replay of S schedules) equal a loop."""
    rng = np.random.default_rng(4)
    n, k, e = 12, 3, 5
    stage = rng.integers(0, k, n)
    mask = np.arange(n) < 9
    h = rng.normal(size=(n, e)).astype(np.float32)
    emb, count = stage_sums_before(
        jnp.asarray(stage), jnp.asarray(mask), jnp.asarray(h), k, by_stage_rows=by_stage_rows
    )
    ref_emb, ref_count = np.zeros((n, k, e), np.float32), np.zeros((n, k), np.float32)
    for t in range(n):
        for u in range(t):
            if mask[u]:
                ref_emb[t, stage[u]] += h[u]
                ref_count[t, stage[u]] += 1
    np.testing.assert_allclose(emb, ref_emb, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(count, ref_count)


@pytest.mark.parametrize("encoder", ["gat", "mean", "sum"])
def test_dense_and_segment_aggregation_agree(encoder):
    """Both message-passing implementations (adjacency matmuls, jraph segment ops) give the same embeddings."""
    graphs = generated("respect", 3, seed=5)
    model = small_policy(encoder=encoder, layers=2)
    h_dense, g_dense = nnx.jit(lambda m, x: m.encode(x, aggregation="dense"))(model, graphs)
    h_seg, g_seg = nnx.jit(lambda m, x: m.encode(x, aggregation="segment"))(model, graphs)
    np.testing.assert_allclose(h_dense, h_seg, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g_dense, g_seg, rtol=1e-4, atol=1e-5)


def test_decoders_encode_with_segment_ops_and_schedule_like_the_dense_encoder():
    """Decoding encodes with the jraph segment ops (INFERENCE_AGGREGATION, the faster forward pass);
    the greedy schedules equal those decoded from the dense encoder the networks are trained with."""
    from respect_jax.policy import decoding as decoding_module

    assert decoding_module.INFERENCE_AGGREGATION == "segment"
    hw = make_hw(4)
    graphs = generated("dnn", 6, seed=11, lo=20, hi=30)
    model = small_policy(layers=2, cut_heads=2, aggregation="dense")
    run, params = make_decoder(model, hw, "paper", 1.0, Decoding("greedy"))
    out = run(params, graphs, jax.random.PRNGKey(0))

    @nnx.jit
    def dense_greedy(m, graphs):
        h, g = m.encode(graphs, aggregation="dense")
        return rollout(m, graphs, h, g, hw, "paper", 1.0, jax.random.PRNGKey(0), 1, True)[:, 0]

    dense = dense_greedy(model, graphs)
    np.testing.assert_array_equal(out.stage, dense)
    obj, valid = schedule_objectives(graphs, dense[:, None], hw, "paper", 1.0)
    assert bool(jnp.all(valid))
    np.testing.assert_allclose(out.objective, obj[:, 0], rtol=1e-6)


def test_zero_layer_encoder_and_no_stage_embeddings_decode():
    graphs = generated("dnn", 3, seed=7)
    hw = make_hw(3)
    model = small_policy(layers=0, stage_embeddings=False)
    run, params = make_decoder(model, hw, "latency", 1.0, Decoding("greedy"))
    out = run(params, graphs, jax.random.PRNGKey(0))
    assert bool(jnp.all(out.valid))


# (K, strategy, objective) combinations of the property test: every strategy once, each objective with two or more
# strategies (beam search with latency through sbs, which is beam_search with a key); each combination compiles its
# own decoder (~10 s of CPU): K = 2 is decoded in test_one_conditioned_policy_schedules_k2_and_k8_validly
COMBOS = (
    (1, "greedy", "paper"),
    (3, "sample", "latency"),
    (5, "best_of", "paper"),
    (4, "beam", "paper"),
    (4, "sbs", "latency"),
)


@functools.cache
def decoder_for(k: int, strategy: str, objective: str):
    model = small_policy(seed=k)
    dec = Decoding(strategy, samples=5 if strategy in MULTI_STRATEGIES else 1, temperature=2.0)
    return make_decoder(model, make_hw(k), objective, 1.0, dec)


@settings(max_examples=16, deadline=None)
@given(seed=st.integers(0, 10_000), combo=st.sampled_from(COMBOS))
def test_every_decoding_strategy_yields_valid_schedules(seed, combo):
    """Property: any graph, K, strategy: a valid schedule whose objective is the NumPy reference evaluator's (plain
    loops; the shared JAX evaluator equals it in test_costs and compiles once per graph bucket and K)."""
    k, strategy, objective = combo
    graphs = random_graphs(4, seed=seed, min_nodes=1, max_nodes=30)
    batch = stack_graphs(graphs, SHAPE)
    run, params = decoder_for(k, strategy, objective)
    out = jax.device_get(run(params, batch, jax.random.PRNGKey(seed)))
    hw = make_hw(k)
    assert np.all(out.valid)
    for i, graph in enumerate(graphs):
        assignment = to_original_order(pad_graph(graph, SHAPE), out.stage[i])
        assert assignment.min() >= 0 and assignment.max() < k
        for u, v in graph.edges:
            assert assignment[u] <= assignment[v]
        assert reference_metrics(graph, assignment, hw)["valid"]
        assert float(out.objective[i]) == pytest.approx(reference_objective(graph, assignment, hw, objective), rel=1e-5)


def test_beam_of_width_one_is_greedy_decoding():
    graphs = generated("dnn", 6, seed=5)
    model = small_policy(seed=3)
    hw = make_hw(4)
    greedy = make_decoder(model, hw, "paper", 1.0, Decoding("greedy"))
    beam = make_decoder(model, hw, "paper", 1.0, Decoding("beam", samples=1))
    key = jax.random.PRNGKey(0)
    a, b = greedy[0](greedy[1], graphs, key), beam[0](beam[1], graphs, key)
    np.testing.assert_array_equal(np.asarray(a.stage), np.asarray(b.stage))
    assert Decoding("beam", samples=64).label == "beam_64"
    assert (
        Decoding("beam", samples=8, local_search=5, pair_escapes=2, pair_candidates=4).label == "beam_8+ls+pairs_top4"
    )


def test_wide_beam_enumerates_every_valid_schedule():
    """With more beams than valid schedules, beam search returns each valid schedule (brute force)
    and nothing else; its best is then the brute-force optimum of the shared evaluator."""
    import itertools

    from respect_jax.policy.model import beam_search

    k, width = 3, 256
    graphs = random_graphs(3, seed=21, min_nodes=4, max_nodes=5)  # at most 3^5 = 243 schedules
    batch = stack_graphs(graphs, SHAPE)
    hw = make_hw(k)
    model = small_policy(seed=1)
    h, g = nnx.jit(lambda m, x: m.encode(x))(model, batch)
    stage = nnx.jit(lambda m, gr, h, g: beam_search(m, gr, h, g, hw, "paper", 1.0, width))(model, batch, h, g)
    stage = np.asarray(stage)
    run, params = make_decoder(model, hw, "paper", 1.0, Decoding("beam", samples=width))
    out = run(params, batch, jax.random.PRNGKey(0))
    for i, graph in enumerate(graphs):
        n = graph.num_nodes
        valid = {s for s in itertools.product(range(k), repeat=n) if all(s[u] <= s[v] for u, v in graph.edges)}
        padded = pad_graph(graph, SHAPE)
        beams = {tuple(int(x) for x in to_original_order(padded, stage[i, j])) for j in range(width)}
        assert beams == valid
        best = min(evaluate_assignment(graph, np.array(s), hw, "paper")["objective"] for s in valid)
        assert float(out.objective[i]) == pytest.approx(best, rel=1e-6)


@pytest.mark.parametrize("decoder, cut_heads", [("mlp", None), ("attention", None), ("mlp", 2)])
def test_grown_decoder_computes_the_same_logits(decoder, cut_heads):
    """grow_decoder adds residual blocks (and a cut attention) that start as the identity: the same
    logits at every step."""
    from respect_jax.policy.model import grow_decoder

    hw = make_hw(3)
    graphs = generated("dnn", 3, seed=9)
    source = small_policy(seed=2, decoder=decoder)
    grown = grow_decoder(source, 3, seed=5, cut_heads=cut_heads)
    assert grown.cfg.decoder_layers == 3 and len(grown.decoder.blocks) == 3
    assert grown.cfg.cut_heads == (cut_heads or 0) and (grown.decoder.cut_attn is not None) == bool(cut_heads)

    def logits(m):
        h, g = m.encode(graphs)
        stage = rollout(m, graphs, h, g, hw, "latency", 1.0, jax.random.PRNGKey(4), 2, greedy=False)
        return stage, m.teacher_logits(graphs, h, g, stage, hw, "latency", 1.0)

    stage_s, want = nnx.jit(logits)(source)
    stage_g, got = nnx.jit(logits)(grown)
    np.testing.assert_array_equal(np.asarray(stage_g), np.asarray(stage_s))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    assert float(jnp.abs(grown.decoder.blocks[2].lin1.kernel[...]).sum()) > 0  # new blocks are trainable, not empty
    with pytest.raises(ValueError, match="init_decoder_layers"):
        grow_decoder(source, 0)
    if cut_heads:
        assert float(jnp.abs(grown.decoder.cut_attn.node_key.kernel[...]).sum()) > 0
        with pytest.raises(ValueError, match="init_cut_heads"):
            grow_decoder(grown, cut_heads=4)  # a trained cut attention is not resized


def test_rollout_objective_equals_environment_return():
    """A decoded schedule replayed through the MDP environment earns exactly -objective."""
    hw = make_hw(4)
    graphs = generated("respect", 6, seed=11)
    model = small_policy()
    h, g = nnx.jit(lambda m, x: m.encode(x))(model, graphs)
    stage = nnx.jit(lambda m, gr, h, g, key: rollout(m, gr, h, g, hw, "paper", 1.0, key, 3, greedy=False))(
        model, graphs, h, g, jax.random.PRNGKey(2)
    )
    obj, valid = schedule_objectives(graphs, stage, hw, "paper", 1.0)
    env = SchedulingEnv(hw, objective="paper", normalise=False)
    state, _ = jax.jit(env.batch_reset)(graphs)
    batch_step = jax.jit(env.batch_step)
    total = jnp.zeros(6)
    for t in range(graphs.params.shape[-1]):
        state, ts = batch_step(state, stage[:, 0, t])
        total = total + ts.reward
    np.testing.assert_array_equal(np.asarray(state.assignment) * np.asarray(graphs.node_mask), stage[:, 0])
    np.testing.assert_allclose(-np.asarray(total), np.asarray(obj[:, 0]), rtol=1e-6)
    assert bool(jnp.all(valid))


def test_policy_config_validation():
    with pytest.raises(ValueError, match="encoder"):
        PolicyConfig(encoder="lstm")
    with pytest.raises(ValueError, match="heads"):
        PolicyConfig(width=30, heads=4)
    with pytest.raises(ValueError, match="unknown policy option"):
        PolicyConfig.from_dict({"widht": 3})
    with pytest.raises(ValueError, match="strategy"):
        Decoding("viterbi")
    assert PolicyConfig.from_dict(PolicyConfig().to_dict()) == PolicyConfig()


def test_policy_solver_uses_a_checkpoint_folder(tmp_path):
    """solver=policy loads a run folder (network.json + orbax params) and returns a valid schedule."""
    import respect_jax.policy.solver  # noqa: F401  (registers solver=policy)
    from respect_jax.solvers import available_solvers, run_solver
    from respect_jax.train.checkpoints import Checkpointer, load_policy, write_network

    cfg = PolicyConfig(**SMALL)
    model = SchedulingPolicy(cfg, rngs=nnx.Rngs(4))
    hw = make_hw(3)
    write_network(tmp_path, cfg, hw, "paper", 1.0)
    ckpt = Checkpointer(tmp_path)
    ckpt.save(7, nnx.state(model), {"step": jnp.int32(7)})
    ckpt.wait()
    ckpt.close()
    loaded, doc = load_policy(tmp_path)
    assert doc["step"] == 7 and doc["objective"] == "paper"
    for a, b in zip(jax.tree.leaves(nnx.state(model)), jax.tree.leaves(nnx.state(loaded)), strict=True):
        np.testing.assert_array_equal(a, b)
    assert "policy" in available_solvers()
    graph = random_graphs(1, seed=3, min_nodes=20, max_nodes=20)[0]
    for decoding in ("greedy", "best_of"):
        result = run_solver("policy", graph, hw, "latency", 1.0, checkpoint=str(tmp_path), decoding=decoding, samples=4)
        assert result["optimal"] is None and len(result["assignment"]) == graph.num_nodes
        assert result["info"]["trained_on"]["objective"] == "paper"
        assert result["objective"] == pytest.approx(
            evaluate_assignment(graph, np.asarray(result["assignment"]), hw, "latency")["objective"]
        )


def test_stochastic_beam_search_draws_distinct_schedules_like_gumbel_top_k():
    """sbs: W schedules without replacement from the policy's distribution at the temperature.

    Reference: the exact log-probability of every valid schedule of a tiny graph (all of them from a
    wide deterministic beam, scored by teacher forcing), then the Gumbel-top-2 of complete schedules
    drawn in NumPy. The inclusion frequency of every schedule in sbs's two samples (3,000 draws)
    matches it; the two samples always differ; a wide sbs returns every valid schedule."""
    from respect_jax.policy.model import beam_search, log_probs_and_entropy

    k, temperature, draws = 3, 1.5, 3000
    graph = random_graphs(1, seed=4, min_nodes=4, max_nodes=4)[0]
    hw = make_hw(k)
    model = small_policy(seed=6)
    one = stack_graphs([graph], SHAPE)
    h, g = nnx.jit(lambda m, x: m.encode(x))(model, one)
    every = np.asarray(nnx.jit(lambda m, gr, h, g: beam_search(m, gr, h, g, hw, "paper", 1.0, 128))(model, one, h, g))
    schedules = np.unique(every[0], axis=0)  # [M, N] by position, each valid schedule once
    m = len(schedules)
    assert 6 <= m <= 40

    def exact_logp(mdl, gr, h, g, st):
        logits = mdl.teacher_logits(gr, h, g, st, hw, "paper", 1.0) / temperature
        return log_probs_and_entropy(logits, st, gr.node_mask)[0]

    logp = np.asarray(nnx.jit(exact_logp)(model, one, h, g, jnp.asarray(schedules)[None]))[0]
    np.testing.assert_allclose(np.exp(logp).sum(), 1.0, atol=1e-4)  # every schedule is there once

    rng = np.random.default_rng(0)
    top2 = np.argsort(-(logp + rng.gumbel(size=(200_000, m))), axis=1)[:, :2]
    expected = np.bincount(top2.ravel(), minlength=m) / 200_000

    batch = jax.tree.map(lambda x: jnp.repeat(x, draws, axis=0), one)
    run, params = make_decoder(model, hw, "paper", 1.0, Decoding("sbs", samples=2, temperature=temperature))
    sbs = nnx.jit(lambda mdl, gr, h, g, key: beam_search(mdl, gr, h, g, hw, "paper", 1.0, 2, key, temperature))
    h_r, g_r = jnp.repeat(h, draws, axis=0), jnp.repeat(g, draws, axis=0)
    drawn = np.asarray(sbs(model, batch, h_r, g_r, jax.random.PRNGKey(1)))  # [draws, 2, N]
    index = {row.tobytes(): i for i, row in enumerate(schedules)}
    picked = np.array([[index[drawn[r, j].tobytes()] for j in range(2)] for r in range(draws)])
    assert np.all(picked[:, 0] != picked[:, 1])
    observed = np.bincount(picked.ravel(), minlength=m) / draws
    np.testing.assert_allclose(observed, expected, atol=0.04)  # 4.4 standard errors at p = 0.5
    assert np.max(expected) > 0.3  # the test distinguishes schedules (not a flat distribution)

    out = jax.device_get(run(params, batch, jax.random.PRNGKey(2)))  # decode keeps the better one
    assert np.all(out.valid) and Decoding("sbs", samples=64).label == "sbs_64"
    objs = np.asarray(schedule_objectives(one, jnp.asarray(schedules)[None], hw, "paper", 1.0)[0])[0]
    chosen = np.array([index[row.tobytes()] for row in out.stage])
    assert np.all(out.objective <= np.sort(objs)[-2] * (1 + 1e-6))  # never the worst of two distinct

    wide = nnx.jit(lambda mdl, gr, h, g, key: beam_search(mdl, gr, h, g, hw, "paper", 1.0, 128, key, temperature))
    assert {row.tobytes() for row in np.asarray(wide(model, one, h, g, jax.random.PRNGKey(3)))[0]} == set(index)
    assert len(set(chosen)) > 1


# ============================================================================ K and hardware as inputs


def numpy_hardware_context(graph, hw) -> np.ndarray:
    """Independent NumPy form of :func:`respect_jax.policy.features.hardware_context` on a Graph (by id)."""
    k = hw.stages
    par = hw.param_bytes * graph.params.astype(np.float64)
    macs = graph.macs.astype(np.float64)
    out = hw.act_bytes * graph.output_size.astype(np.float64)
    total = par.sum()
    mem_scale = max(max(total / k, par.max()), 1.0)
    time_scale = max(hw.stage_overhead_s + max(macs.sum() / k, macs.max()) / hw.macs_per_s, 1e-9)
    succs = graph.successors()
    n = graph.num_nodes
    # bytes crossing a cut before position j of SPEC order (graph ids are SPEC order here)
    cut = [sum(out[u] for u in range(j) if not succs[u] or max(succs[u]) >= j) if j > 0 else 0.0 for j in range(n)]
    mean_cut = float(np.mean(cut))
    return np.asarray(
        [
            1.0 / k,
            np.log1p(total / max(k * hw.sram_bytes, 1.0)),
            hw.stage_overhead_s / time_scale,
            np.log1p(total / k / hw.host_bw / time_scale),
            np.log1p(mean_cut / hw.link_bw / time_scale),
            np.log1p(mean_cut / mem_scale),
            np.log(hw.host_bw / hw.link_bw) / 4.0,
            np.log(hw.act_bytes / hw.param_bytes) / 2.0,
        ]
    )


def test_hardware_context_matches_numpy_and_is_scale_free():
    """Feature version 2's hardware inputs equal a NumPy reference and do not change when every rate
    and the overhead (time unit) or every byte count and the SRAM (byte unit) are scaled together."""
    from respect_jax.graphs.generators import padded_to_graph
    from respect_jax.policy.features import graph_statics

    graphs = generated("dnn", 3, seed=11, lo=8, hi=20)
    hw = make_hw(3, sram_bytes=2e5, host_bw=3e5, link_bw=1e5, stage_overhead_s=1e-4, act_bytes=2.0)
    for i in range(3):
        g = jax.tree.map(lambda x, i=i: x[i], graphs)
        got = np.asarray(graph_statics(g, hw).hw_context)
        np.testing.assert_allclose(got, numpy_hardware_context(padded_to_graph(g), hw), rtol=2e-5, atol=1e-6)
        slower = hw.replace(
            macs_per_s=hw.macs_per_s / 8,
            host_bw=hw.host_bw / 8,
            link_bw=hw.link_bw / 8,
            stage_overhead_s=hw.stage_overhead_s * 8,
        )
        np.testing.assert_allclose(np.asarray(graph_statics(g, slower).hw_context), got, rtol=1e-5, atol=1e-6)
        wider = hw.replace(
            param_bytes=hw.param_bytes * 4,
            act_bytes=hw.act_bytes * 4,
            sram_bytes=hw.sram_bytes * 4,
            host_bw=hw.host_bw * 4,
            link_bw=hw.link_bw * 4,
        )
        np.testing.assert_allclose(np.asarray(graph_statics(g, wider).hw_context), got, rtol=1e-5, atol=1e-6)


def _valid_by_edges(graphs, stage: np.ndarray, k: int) -> bool:
    """Every real node's stage in 0..K-1 and >= each predecessor's (plain NumPy over the edge lists)."""
    ok = True
    for b in range(stage.shape[0]):
        mask = np.asarray(graphs.node_mask[b])
        s = stage[b]
        ok &= bool(np.all((s[mask] >= 0) & (s[mask] < k)))
        e = np.asarray(graphs.edge_mask[b])
        snd, rcv = np.asarray(graphs.senders[b])[e], np.asarray(graphs.receivers[b])[e]
        ok &= bool(np.all(s[rcv] >= s[snd]))
    return ok


@pytest.mark.parametrize("k, strategy", [(2, "greedy"), (8, "best_of")])
def test_one_conditioned_policy_schedules_k2_and_k8_validly(k, strategy):
    """The same feature-version-2 network decodes K = 2 (greedy) and K = 8 (best of 4 samples and the greedy
    schedule, include_greedy): every schedule is valid by the edge lists, and uses more than one stage at K = 8 on
    some graph. One decoder program per K (each compiles for tens of seconds; greedy and sampled decoding share the
    step code, and every strategy is checked against the reference evaluator in the property test above)."""
    model = small_policy(5, feature_version=2)
    graphs = generated("dnn", 6, seed=4, lo=10, hi=30)
    run, params = make_decoder(model, make_hw(k), "latency", 1.0, Decoding(strategy, samples=4))
    stage = np.asarray(run(params, graphs, jax.random.PRNGKey(0)).stage)
    assert _valid_by_edges(graphs, stage, k), strategy
    if k == 8:
        assert max(len(np.unique(s[np.asarray(m)])) for s, m in zip(stage, graphs.node_mask, strict=True)) > 1


@nnx.jit
def _step0_program(model, graphs, hw):
    h, g = model.encode(graphs)
    ds, step_logits, _ = decoder_steps(model, graphs, h, g, hw, "latency", 1.0, 1)
    logits, inputs = step_logits(ds, 3)
    return inputs.context, logits


def _step0_inputs_and_logits(model, graphs, hw):
    """The decoder's context input and logits at step 3: one compiled program for every call of the
    parametrisations below (the hardware values are traced arguments, the network structure is the same)."""
    context, logits = _step0_program(model, graphs, hw)
    return np.asarray(context), np.asarray(logits)


@pytest.mark.parametrize("field, factor", [("sram_bytes", 16.0), ("link_bw", 0.125), ("stage_overhead_s", 20.0)])
def test_hardware_rates_change_the_conditioned_policy_inputs_and_logits(field, factor):
    """Changing SRAM (or the link rate, or the overhead) changes the decoder's context input and its
    logits: fails if the hardware input were ignored."""
    model = small_policy(2, feature_version=2)
    graphs = generated("dnn", 3, seed=7, lo=12, hi=20)
    hw = make_hw(4, sram_bytes=3e5, stage_overhead_s=1e-5)
    ctx_a, logit_a = _step0_inputs_and_logits(model, graphs, hw)
    ctx_b, logit_b = _step0_inputs_and_logits(model, graphs, hw.replace(**{field: getattr(hw, field) * factor}))
    assert ctx_a.shape[-1] == 25
    hw_cols = slice(17, 25)
    assert np.max(np.abs(ctx_a[..., hw_cols] - ctx_b[..., hw_cols])) > 1e-3
    assert np.max(np.abs(logit_a - logit_b)) > 1e-4


def test_hardware_inputs_added_with_zero_weights_keep_the_logits():
    """with_hardware_inputs turns a version-1 network into version 2 with the same logits (the start
    of training across K and hardware), while a version-2 network of other weights differs."""
    from respect_jax.policy.model import with_hardware_inputs

    v1 = small_policy(3)
    v2 = with_hardware_inputs(v1)
    assert v1.cfg.feature_version == 1 and v2.cfg.feature_version == 2
    graphs = generated("dnn", 3, seed=8, lo=10, hi=20)
    hw = make_hw(5, sram_bytes=3e5)
    stage = jnp.zeros(graphs.params.shape, jnp.int32)[:, None]
    program = nnx.jit(lambda m: m.teacher_logits(graphs, *m.encode(graphs), stage, hw, "paper", 1.0))
    logits = lambda m: np.asarray(program(m))  # one compiled program per network structure (v1, v2)
    np.testing.assert_allclose(logits(v2), logits(v1), rtol=1e-6, atol=1e-6)
    other = small_policy(4, feature_version=2)
    assert np.max(np.abs(logits(other) - logits(v1))) > 1e-3


@pytest.mark.parametrize(
    "checkpoint, k, objective, runs",
    [
        ("respect_k4_latency_si", 8, "latency", [(0, 35), (1, 37), (2, 33), (3, 19), (4, 26), (5, 4)]),
        ("respect_k4_paper_cut", 4, "paper", [(0, 116), (1, 18), (2, 15), (3, 5)]),
    ],
)
def test_version_1_checkpoints_schedule_exactly_as_before(checkpoint, k, objective, runs):
    """A shipped checkpoint without feature_version (version 1) loads and gives, greedily, exactly the
    schedule it gave before K and hardware became inputs (MobileNetV2, Coral USB; recorded with the
    code of commit d2aab86 by node id, as runs of equal stages)."""
    from pathlib import Path

    import yaml

    from respect_jax.costs import hardware_from_dict
    from respect_jax.graphs.graph import load_graph
    from respect_jax.train.checkpoints import load_policy

    root = Path(__file__).resolve().parents[1]
    model, doc = load_policy(root / "data" / "checkpoints" / checkpoint)
    assert "feature_version" not in doc["policy"] and model.cfg.feature_version == 1
    hw = hardware_from_dict({**yaml.safe_load((root / "conf/hardware/coral_usb.yaml").read_text()), "stages": k})
    graph = load_graph(root / "data" / "models" / "mobilenetv2.json")
    padded = pad_graph(graph)
    run, params = make_decoder(model, hw, objective, 1.0, Decoding("greedy"))
    out = run(params, jax.tree.map(lambda x: np.asarray(x)[None], padded), jax.random.PRNGKey(0))
    got = to_original_order(padded, np.asarray(out.stage)[0])
    want = np.repeat([s for s, _ in runs], [n for _, n in runs])
    np.testing.assert_array_equal(got, want)
