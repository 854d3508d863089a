"""Task/platform model, scenario generator and the up-front infeasibility check (no JAX compile)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from conftest import RT_TEST_PLATFORM
from hypothesis import given, settings
from hypothesis import strategies as st

from respect_jax.realtime.generator import ScenarioConfig, generate, uunifast
from respect_jax.realtime.platform import EFFICIENCY, Accelerator, Platform, op_class, platform_from_dict, transfer_us
from respect_jax.realtime.tasks import (
    HRTTask,
    InfeasibleTaskSet,
    Sizes,
    SRTClient,
    build_template,
    check_task_set,
    make_scenario,
    pack,
    split_layers,
)
from respect_jax.realtime.types import INF

PLATFORM = platform_from_dict(RT_TEST_PLATFORM)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 100), min_size=1, max_size=60), st.integers(1, 8))
def test_split_layers_is_a_partition_into_contiguous_nonempty_groups(weights, groups):
    if groups > len(weights):
        with pytest.raises(ValueError):
            split_layers(np.array(weights), groups)
        return
    parts = split_layers(np.array(weights), groups)
    assert len(parts) == groups and all(len(p) for p in parts)
    assert np.array_equal(np.concatenate(parts), np.arange(len(weights)))


@pytest.mark.parametrize("model", ["mobilenetv2", "resnet50", "densenet121", "inception_v3", "vgg16"])
def test_template_from_real_graph(model):
    tpl = build_template(model, 4, PLATFORM)
    assert tpl.exec_us.shape == (4, 3) and (tpl.exec_us >= 1).all()
    assert sum(len(x) for x in tpl.layers) > 4
    for g, preds in enumerate(tpl.preds):
        assert all(p < g for p in preds)
        assert all(tpl.xfer_us[p, g] > 0 for p in preds)
    assert tpl.preds[1] == (0,)  # consecutive groups of a connected DNN are linked
    assert tpl.best_work_us >= tpl.critical_path_us >= tpl.exec_us.min(axis=1).max()


def test_fine_split_of_a_real_graph_is_a_dag():
    """Coarse contiguous splits of these Keras models are chains; with 12 groups Xception has a
    residual tensor crossing two cuts, so sub-job 3 reads from sub-jobs 2 and 3's predecessor."""
    assert all(len(p) <= 1 for p in build_template("resnet50", 4, PLATFORM).preds)
    tpl = build_template("xception", 12, PLATFORM)
    multi = [g for g, p in enumerate(tpl.preds) if len(p) > 1]
    assert multi, tpl.preds
    g = multi[0]
    assert all(tpl.xfer_us[p, g] > 0 for p in tpl.preds[g])


def test_dataflow_matters():
    """Depthwise-heavy MobileNet gains relative to conv-heavy VGG on the output-stationary
    accelerator, the weight-stationary one is best on VGG (EFFICIENCY is what drives it)."""
    assert op_class("DepthwiseConv2D") == "dw" and op_class("Conv2D") == "conv" and op_class("Add") == "elem"
    assert EFFICIENCY["ws"]["conv"] > EFFICIENCY["os"]["conv"] and EFFICIENCY["os"]["dw"] > EFFICIENCY["ws"]["dw"]
    vgg = build_template("vgg16", 1, PLATFORM).exec_us[0]
    mob = build_template("mobilenet", 1, PLATFORM).exec_us[0]
    assert np.argmin(vgg) == 0
    assert mob[2] / mob[0] < vgg[2] / vgg[0]


def test_transfer_and_platform_validation():
    assert transfer_us(0, PLATFORM) == 0
    assert transfer_us(4000, PLATFORM) == 20 + 1  # latency + 4000 B / 4 GB/s
    with pytest.raises(ValueError, match="dataflow"):
        Accelerator("x", "weird", 1.0, 1.0, 0.0)
    with pytest.raises(ValueError):
        Platform(accelerators=())


def test_uunifast_sums():
    rng = np.random.default_rng(0)
    u = uunifast(5, 2.5, rng)
    assert u.min() >= 0 and u.sum() == pytest.approx(2.5)


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("num_clients", -2, ">= 0"),
        ("num_hrt_tasks", -1, ">= 0"),
        ("horizon_ms", 0.0, "a finite number > 0"),
        ("utilisation", float("inf"), "a finite number > 0"),
        ("min_gap_factor", 1.0, "in [0, 1)"),
        ("deadline_factor", (1.0, 0.5), "0 < low <= high"),
        ("qos_factor", (0.0, 0.0), "0 < low <= high"),
        ("qos_factor", (1.0,), "0 < low <= high"),
        ("srt_models", (), "non-empty when there are SRT clients"),
        ("hrt_models", (), "non-empty when HRT tasks are drawn"),
        ("max_tries", 0, ">= 1"),
    ],
)
def test_scenario_fields_out_of_range_are_errors_naming_the_field(field, value, rule):
    with pytest.raises(ValueError, match=rf"scenario custom: {field} must be .*{re.escape(rule)}"):
        ScenarioConfig(**{field: value})


def test_scenarios_without_srt_clients_report_no_srt_rate():
    """num_clients=0 is a valid HRT-only distribution: its SRT satisfaction is None (n/a), not NaN."""
    from respect_jax.realtime.evaluate import summarise
    from respect_jax.realtime.report import markdown_table

    metrics = {
        "hrt_jobs": np.array([3, 2]), "hrt_missed": np.array([0, 1]), "srt_jobs": np.array([0, 0]),
        "srt_met": np.array([0, 0]), "jain": np.array([1.0, 1.0]), "utilisation": np.array([0.4, 0.5]),
        "work_utilisation": np.array([0.3, 0.4]),
        "overrides": np.array([0, 0]), "decisions": np.array([6, 4]), "finished": np.array([True, True]),
        "violation": np.array([0, 0]),
    }
    row = summarise(metrics)
    assert row["srt_satisfaction"] is None and row["hrt_schedulability"] == 0.5
    table = markdown_table([{"preset": "p", "utilisation_target": 0.5, "hrt_share": 1.0, "method": "edf", **row}])
    assert "| 50.0 | 1 / 5 | n/a | 1.000 |" in table


def test_generator_is_seeded_and_certified():
    cfg = ScenarioConfig(utilisation=0.8, hrt_share=0.5, max_hrt_jobs=6, max_srt_jobs=6, horizon_ms=12)
    a, stats = generate(cfg, PLATFORM, 20, seed=3)
    b, _ = generate(cfg, PLATFORM, 20, seed=3)
    assert [s.jobs for s in a] == [s.jobs for s in b]
    assert stats["generated"] == 20
    for s in a:
        assert len(s.hrt_jobs) <= 6 and len(s.srt_jobs) <= 6
        check_task_set(s)
        assert all(j.release < s.horizon_us for j in s.jobs)


def test_pack_layout():
    cfg = ScenarioConfig(utilisation=0.6, max_hrt_jobs=6, max_srt_jobs=6, horizon_ms=12)
    (s,), _ = generate(cfg, PLATFORM, 1, seed=0)
    sizes = Sizes(6, 6, 3, 3, 3)
    p = pack(s, sizes)
    assert p.exec_us.shape == (36, 3) and p.ref_order.shape == (18,)
    assert p.is_hrt[: 3 * len(s.hrt_jobs)].all() and not p.is_hrt[18:].any()
    assert p.valid.sum() == 3 * len(s.jobs)
    assert (p.release[~p.valid] == INF).all()
    hrt_real = [int(x) for x in p.ref_order if p.valid[x]]
    assert [p.deadline[x] for x in hrt_real] == sorted(p.deadline[x] for x in hrt_real)
    with pytest.raises(ValueError, match="sizes allow"):
        pack(s, dataclasses.replace(sizes, srt_jobs=0))


def _explicit(tasks, horizon_ms=20):
    return make_scenario(
        PLATFORM,
        3,
        tasks,
        [SRTClient("mobilenet", 2000.0, 600, 4000)],
        int(horizon_ms * 1000),
        rng=np.random.default_rng(0),
    )


def test_infeasible_deadline_below_best_case_latency():
    sc = _explicit([HRTTask("resnet50", 3000, 3000)])
    with pytest.raises(InfeasibleTaskSet) as err:
        check_task_set(sc)
    msg = str(err.value)
    assert "\n" not in msg and "HRT task 0 (resnet50)" in msg and "best-case latency" in msg
    assert not bool(pack(sc, Sizes(10, 10, 3, 3, 1)).certified)  # pack runs the check when not told


def test_infeasible_demand_above_platform():
    tasks = [HRTTask("resnet50", 6000, 6000, offset_us=100 * i) for i in range(5)]
    with pytest.raises(
        InfeasibleTaskSet, match="HRT demand at best-case speed is .* accelerators but the platform has 3"
    ):
        check_task_set(_explicit(tasks))


def test_not_certifiable_by_reference():
    tasks = [
        HRTTask("resnet50", 10000, 6000, 0),
        HRTTask("resnet50", 10000, 6000, 0),
        HRTTask("resnet50", 10000, 6000, 0),
        HRTTask("resnet50", 10000, 6000, 0),
    ]
    with pytest.raises(InfeasibleTaskSet, match="no certified reference schedule"):
        check_task_set(_explicit(tasks))


def test_constrained_deadline_required():
    with pytest.raises(InfeasibleTaskSet, match="must be in"):
        check_task_set(_explicit([HRTTask("mobilenet", 5000, 6000)]))


def test_feasible_explicit_set_passes():
    rep = check_task_set(_explicit([HRTTask("resnet50", 8000, 7000), HRTTask("mobilenetv2", 4000, 4000, 1000)]))
    assert rep["reference_slack_us"] >= 0
