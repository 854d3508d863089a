"""ASET scenarios and CLI: presets build, model variants come from data/models, bad configs fail in one line."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import yaml

from respect_jax.cli import edge
from respect_jax.edge_cluster.dqn import DQNConfig
from respect_jax.edge_cluster.scenarios import PRESETS_DIR, TOP1_ACCURACY, load_preset, model_gmacs, scenario_from_dict

BIN = Path(sys.executable).parent
SMALL = yaml.safe_load((PRESETS_DIR / "small.yaml").read_text())


def test_presets_build_with_real_model_sizes():
    for name in ("small", "isp"):
        scn = load_preset(name)
        p = scn.params
        assert set(scn.loads) == {"low", "medium", "high", "overload"}
        assert np.all(np.asarray(p.proc_us) > 0) and np.all(np.asarray(p.deadline_us) > 0)
        # every app can meet its accuracy with one of its variants
        ok = np.asarray(p.variant_mask) & (np.asarray(p.accuracy_pm)[None] >= np.asarray(p.min_accuracy_pm)[:, None])
        assert ok.any(axis=1).all()
    isp = load_preset("isp")
    assert isp.params.num_sources >= 20 and "cloud" in isp.site_tiers and isp.site_tiers.count("far_edge") >= 3
    # compute from the Keras graphs of data/models: ResNet152 > ResNet50 > MobileNet, MobileNetV2 cheapest
    assert model_gmacs("resnet152") > model_gmacs("resnet50") > model_gmacs("mobilenet") > model_gmacs("mobilenetv2")
    assert model_gmacs("resnet50") == pytest.approx(3.874, abs=0.01)
    small = load_preset("small")
    v = {name: i for i, name in enumerate(small.variant_names)}
    proc = np.asarray(small.params.proc_us)
    assert proc[0, v["resnet50"]] > proc[0, v["mobilenet"]] > proc[0, v["mobilenetv2"]]
    assert proc[1, v["resnet50"]] < proc[0, v["resnet50"]], "the cloud computes faster than the far edge"
    assert int(small.params.accuracy_pm[v["resnet50"]]) == round(1000 * TOP1_ACCURACY["resnet50"])


def with_change(path: str, value):
    doc = copy.deepcopy(SMALL)
    node = doc
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    if value is KeyError:
        del node[keys[-1]]
    elif isinstance(node, list):
        node[int(keys[-1])] = value
    else:
        node[keys[-1]] = value
    return doc


@pytest.mark.parametrize(
    "path,value,message",
    [
        ("apps.0.rate", -5, "edge_scenario.apps[0].rate must be >= 0, got -5"),
        ("apps.1.variants", ["resnet50", "alexnet"], "unknown model 'alexnet'"),
        ("apps.0.min_accuracy", 0.95, "no variant reaches min_accuracy 0.95"),
        ("apps.0.deadline_ms", 0, "edge_scenario.apps[0].deadline_ms must be >= 0.001"),
        ("apps.0.deadline_ms", 0.0005, "edge_scenario.apps[0].deadline_ms must be >= 0.001"),  # rounded to 0 us
        ("apps.0.min_accuracy", 1.5, "min_accuracy must be <= 1"),
        ("sites.0.workers", 0, "edge_scenario.sites[0].workers must be an integer in [1, 4096], got 0"),
        ("sites.0.workers", 2.5, "workers must be an integer"),
        ("sites.0.tier", "fog", "tier must be one of far_edge, near_edge, cloud"),
        ("sites.0.region", 3, "region must name regions in [0, 0]"),
        ("sites.1.gmacs_per_ms", -1.0, "gmacs_per_ms must be > 0"),
        ("sites.0.colour", "red", "unknown key(s) colour"),
        ("pattern", "weibull", "pattern must be one of poisson, mmpp, diurnal"),
        ("loads.high", -1, "loads.high must be > 0"),
        ("loads.high", 0, "loads.high must be > 0"),  # training divided by it; evaluation reported 0 success
        ("horizon_s", 0, "horizon_s must be > 0"),
        ("network.cloud", KeyError, "no network entry for tier 'cloud'"),
        ("network.far_edge.jitter", "lots", "jitter must be a finite number"),
        ("mmpp.burst_factor", 0.5, "mmpp.burst_factor must be >= 1"),
        ("apps", [], "edge_scenario.apps must be a non-empty list"),
        ("sites.0.gmacs_per_ms", 0.0001, "raise gmacs_per_ms"),
    ],
)
def test_bad_scenario_is_one_clear_line(path, value, message):
    with pytest.raises(ValueError) as err:
        scenario_from_dict(with_change(path, value))
    text = str(err.value)
    assert message in text and "\n" not in text


def test_all_zero_rates_and_unknown_model_name():
    doc = copy.deepcopy(SMALL)
    for app in doc["apps"]:
        app["rate"] = 0
    with pytest.raises(ValueError, match="every arrival rate is zero"):
        scenario_from_dict(doc)
    with pytest.raises(ValueError, match="unknown model 'vit'"):
        model_gmacs("vit")
    with pytest.raises(ValueError, match="unknown scenario preset 'metro'"):
        load_preset("metro")
    with pytest.raises(ValueError, match="unknown load 'extreme'"):
        load_preset("small").rate("extreme")


def test_evaluation_refuses_traces_whose_slots_end_before_the_horizon():
    """Too few query slots for a load used to truncate every trace silently (success over 0.4 s of 5 s)."""
    from respect_jax.edge_cluster.evaluation import eval_traces

    scn = load_preset("small", max_queries=1024)
    eval_traces(scn, "low", jax.random.key(0), 2)  # enough slots at the low load
    with pytest.raises(ValueError, match="1024 query slots per trace do not cover the .* horizon at load overload"):
        eval_traces(scn, "overload", jax.random.key(0), 2)
    with pytest.raises(ValueError, match="load must be a finite number > 0"):
        scn.rate(0.0)


@pytest.mark.parametrize(
    "field,value,message",
    [("gamma", 1.0, "dqn.gamma must be in [0, 1)"), ("num_envs", 0, "dqn.num_envs must be >= 1"),
     ("eps_end", 2.0, "dqn.eps_end must be"), ("loads", [0.5, -1.0], "dqn.loads must be positive numbers")],
)
def test_bad_dqn_config(field, value, message):
    with pytest.raises(ValueError) as err:
        DQNConfig.from_dict({field: value})
    assert message in str(err.value)
    with pytest.raises(ValueError, match="unknown dqn option"):
        DQNConfig.from_dict({"learning_rate": 0.1})


def run_main(monkeypatch, capsys, *args) -> tuple[int, str]:
    """``respect-edge <args>`` in this process (no second interpreter start); (exit code, stderr)."""
    monkeypatch.setattr(sys, "argv", ["respect-edge", *args])
    with pytest.raises(SystemExit) as exc:
        edge.main()
    return exc.value.code, capsys.readouterr().err.strip()


@pytest.mark.parametrize(
    "args,message",
    [
        (["eval", "edge_scenario=metro"],
         "unknown edge_scenario 'metro'; choose one of isp, isp_diurnal, isp_failure, isp_nearsat, isp_netdrift, "
         "small, small_ramp"),
        (["eval", "edge_scenario.apps.0.rate=-1"], "edge_scenario.apps[0].rate must be >= 0, got -1"),
        (["eval", "edge_scenario.apps.1.variants=[resnet50,vit]"], "unknown model 'vit'"),
        (["eval", "eval.policies=[closest,oracle]"], "unknown policy 'oracle'"),
        (["eval", "eval.loads=[low,extreme]"], "unknown load 'extreme'"),
        (["train", "agent=dqn", "dqn.gamma=2"], "dqn.gamma must be in [0, 1)"),
        (["train", "switch.horizon=-1"], "switch.horizon must be >= 0, got -1"),
        (["train", "agent=ppo"], "agent must be one of dqn, switch, got 'ppo'"),
        (["train", "keep_every=-2"], "keep_every must be an integer >= 0 (0: keep the last checkpoint only), got -2"),
        (["train", "keep_every=many"], "keep_every must be an integer >= 0 (0: keep the last checkpoint only), "
         "got 'many'"),
        (["serve"], "unknown command 'serve'; choose one of train, eval"),
    ],
)
def test_cli_user_errors_are_one_line(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    code, err = run_main(monkeypatch, capsys, *args)
    lines = [line for line in err.splitlines() if line.strip() and "Warning" not in line]
    assert code == 2 and len(lines) == 1 and message in lines[0], err
    assert lines[0].startswith("respect-edge: error: ")
    assert list(tmp_path.iterdir()) == [], "nothing written"


def test_cli_usage_and_console_script(monkeypatch, capsys):
    code, err = run_main(monkeypatch, capsys)
    assert code == 2 and "usage: respect-edge {train,eval}" in err
    assert (BIN / "respect-edge").is_file()


def test_cli_eval_static_policies_writes_table_and_plot(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [
        "respect-edge", "eval", "edge_scenario.horizon_s=0.5", "eval.traces=2", "eval.loads=[low,overload]",
        "eval.policies=[closest,fastest_expected,random,aset]", f"out_dir={tmp_path / 'out'}",
        f"run_dir={tmp_path / 'none'}",
    ])
    edge.main()
    assert "static policies only" in capsys.readouterr().err
    doc = json.loads((tmp_path / "out" / "success_small.json").read_text())
    assert doc["policies"] == ["closest", "fastest_expected", "random"]
    assert doc["success"]["fastest_expected"]["overload"] > doc["success"]["closest"]["overload"]
    md = (tmp_path / "out" / "success_small.md").read_text()
    assert "| fastest_expected |" in md and "Per application" in md
    assert (tmp_path / "out" / "success_small.png").stat().st_size > 10_000


def test_policies_to_compare_loads_static_policies_and_explains_a_missing_agent(tmp_path):
    """respect-edge eval's policy list (edge_cluster.evaluation.policies_to_compare): static names resolve to
    the registry's functions; ``aset`` without an agent in run_dir is dropped with a note, an explicit
    checkpoint without one is an error, and a list left empty is an error."""
    from respect_jax.edge_cluster.evaluation import policies_to_compare
    from respect_jax.edge_cluster.policies import STATIC_POLICIES
    from respect_jax.edge_cluster.scenarios import load_preset

    scn = load_preset("small", horizon_s=0.5)
    policies, header, note = policies_to_compare(scn, ["closest", "aset"], None, tmp_path)
    assert policies == {"closest": STATIC_POLICIES["closest"]} and header[0] == f"Scenario `{scn.name}`:"
    assert note == f"no trained agent in {tmp_path} (run `respect-edge train` first); static policies only"
    with pytest.raises(FileNotFoundError, match="eval.checkpoint=.*: no trained agent there"):
        policies_to_compare(scn, ["closest", "aset"], tmp_path, tmp_path)
    with pytest.raises(ValueError, match=r"nothing to evaluate \(no trained agent in"):
        policies_to_compare(scn, ["aset"], None, tmp_path)
    with pytest.raises(ValueError, match="eval.policies is empty"):
        policies_to_compare(scn, [], None, tmp_path)
