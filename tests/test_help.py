"""Every YAML-configured command's ``--help``: the layout of ``conf/hydra/help/respect.yaml`` filled by the
``hydra.help`` of ``conf/<command>.yaml``: a usage line, only that command's config groups with all their
choices, examples, and no more than a screenful."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
BIN = Path(sys.executable).parent
MAX_LINES = 60
MAX_WIDTH = 120

# argv, config name (conf/<name>.yaml), the name in the usage line, the config groups the command composes or
# reads.
COMMANDS = [
    (["respect-schedule"], "schedule", "respect-schedule", {"hardware", "solver"}),
    (
        ["respect-train"],
        "train",
        "respect-train",
        {"hardware", "policy", "algorithm", "graphs", "ablation", "hydra/launcher"},
    ),
    (["respect-eval"], "eval", "respect-eval", set()),
    (["respect-label"], "label", "respect-label", {"hardware", "solver", "graphs"}),
    (["respect-bench"], "bench", "respect-bench", {"hardware"}),
    (["respect-tables"], "tables", "respect-tables", set()),
    (["respect-rt", "train"], "rt", "respect-rt train|eval", {"rt_scenario"}),
    (["respect-rt", "eval"], "rt", "respect-rt train|eval", {"rt_scenario"}),
    (["respect-edge", "train"], "edge", "respect-edge train|eval", {"edge_scenario"}),
    (["respect-edge", "eval"], "edge", "respect-edge train|eval", {"edge_scenario"}),
    (["python", "-m", "respect_jax.cli.main_job"], "main_job", "python -m respect_jax.cli.main_job", set()),
    (["python", "experiments/paper.py"], "paper", "python experiments/paper.py", {"experiment", "hardware"}),
]
# Configs registered in Python (Hydra ConfigStore, respect_jax/cli/coral.py and export.py): checked once their
# node chooses `override hydra/help: respect` and sets hydra.help (skipped while they show Hydra's default help).
PY_COMMANDS = [
    ("respect-segment", {"hardware", "solver"}),
    ("respect-pipeline", set()),
    ("respect-calibrate", {"hardware"}),
    ("respect-deploy", {"hardware", "solver"}),
    ("respect-export", set()),
]
PY_DEFAULTS = {"hardware": "coral_usb", "solver": "compiler"}
ALL_GROUPS = {p.name for p in CONF.iterdir() if p.is_dir() and p.name != "hydra"} | {"hydra/launcher"}


def run(argv: list[str]) -> subprocess.CompletedProcess:
    exe = sys.executable if argv[0] == "python" else str(BIN / argv[0])
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([exe, *argv[1:]], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)


def section(lines: list[str], title: str) -> list[str]:
    """The lines of the section whose first line starts with ``title``, up to the next blank line."""
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def group_entries(lines: list[str]) -> dict[str, str]:
    """Config-groups section -> {group: its text}: a group's line is indented by two spaces, its continuation
    lines by more; ``+group`` (appended with +) is reported as ``group``."""
    head, *body = section(lines, "Config groups")
    if not body:
        assert head.startswith("Config groups: none"), head
        return {}
    entries: dict[str, str] = {}
    name = None
    for line in body:
        if re.match(r"^  \S", line):
            name, _, rest = line.strip().partition(" ")
            name = name.lstrip("+")
            entries[name] = rest.strip()
        else:
            assert name is not None and line.startswith("   "), line
            entries[name] += " " + line.strip()
    return entries


def listed_choices(text: str) -> set[str]:
    """The comma-separated choices of a group entry (parenthesised remarks left out)."""
    match = re.search(r"[\w.]+(?:, [\w.]+)+", re.sub(r"\s*\([^)]*\)", "", text))
    assert match, text
    return set(match.group(0).split(", "))


def default_choices(config: str) -> dict[str, str]:
    """``{group: choice}`` of the defaults list of ``conf/<config>.yaml``."""
    doc = yaml.safe_load((CONF / f"{config}.yaml").read_text())
    out = {}
    for entry in doc.get("defaults", []):
        if isinstance(entry, dict):
            ((key, value),) = entry.items()
            if not key.startswith("override "):
                out[key] = value
    return out


def check_help(proc: subprocess.CompletedProcess, usage: str, groups: set[str], defaults: dict[str, str]) -> str:
    """The layout of conf/hydra/help/respect.yaml, ``groups`` (all their choices, the current one of those in
    ``defaults`` in brackets) and no other config group; returns the text."""
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    text = proc.stdout
    lines = text.rstrip("\n").splitlines()
    assert lines[0] == f"usage: {usage} [overrides] [-m for sweeps]"
    assert len(lines) <= MAX_LINES, f"{len(lines)} lines"
    assert max(len(line) for line in lines) <= MAX_WIDTH
    assert lines[1] == "" and lines[2].strip(), "a description under the usage line"
    assert section(lines, "Main options")[1:], "main options"
    examples = section(lines, "Examples:")[1:]
    assert 2 <= len(examples) <= 4
    assert "--cfg job" in text and "--hydra-help" in text

    entries = group_entries(lines)
    assert set(entries) == groups
    for group, entry in entries.items():
        on_disk = {p.stem for p in (CONF / group).glob("*.yaml")}
        assert listed_choices(entry) == on_disk, f"{group}: the choices listed by --help are not those of conf/{group}"
    for group, choice in defaults.items():
        assert f"[{choice}]" in entries[group], f"{group}: the current choice in brackets"
    for group in ALL_GROUPS - groups:  # no other command's groups, not even in an example
        assert not re.search(rf"(?<![\w./+]){re.escape(group)}=", text), group
    return text


@pytest.mark.parametrize(("argv", "config", "usage", "groups"), COMMANDS, ids=[" ".join(c[0]) for c in COMMANDS])
def test_help(argv, config, usage, groups):
    text = check_help(run([*argv, "--help"]), usage, groups, default_choices(config))
    assert f"conf/{config}.yaml" in text


@pytest.mark.parametrize(("prog", "groups"), PY_COMMANDS, ids=[c[0] for c in PY_COMMANDS])
def test_help_of_python_registered_configs(prog, groups):
    proc = run([prog, "--help"])
    if proc.returncode == 0 and "is powered by Hydra." in proc.stdout.splitlines()[0]:
        pytest.skip(f"{prog} still has Hydra's default help (its ConfigStore node sets no hydra.help)")
    check_help(proc, prog, groups, {g: PY_DEFAULTS[g] for g in groups})


def test_help_shows_the_overridden_values():
    proc = run(["respect-train", "--help", "hardware=coral_pcie", "train.steps=10", "objective=latency"])
    assert proc.returncode == 0, proc.stderr
    entries = group_entries(proc.stdout.splitlines())
    assert "[coral_pcie]" in entries["hardware"]
    assert re.search(r"^  train\.steps .*\[10\]$", proc.stdout, re.M)
    assert re.search(r"^  objective .*\[latency\]$", proc.stdout, re.M)


def test_help_prints_a_dollar_in_an_overridden_value_as_given():
    """Hydra's help substitutes $NAME placeholders into the resolved text: an override value holding a dollar
    sign failed with a KeyError traceback before the header was escaped (help_escape)."""
    proc = run(["respect-schedule", "--help", "objective=$x", "lam=a$$b"])
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^  objective .*\[\$x\]$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^  lam .*\[a\$\$b\]$", proc.stdout, re.M), proc.stdout


@pytest.mark.parametrize(("prog", "commands"), [("respect-rt", "train,eval,grid"), ("respect-edge", "train,eval")])
def test_help_without_the_first_word(prog, commands):
    proc = run([prog, "--help"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {prog} {{{commands}}}")
    assert f"{prog} train --help" in proc.stdout


def test_every_command_config_has_the_help():
    """A new conf/<command>.yaml gets a --help of this layout (and a row in COMMANDS)."""
    assert {p.stem for p in CONF.glob("*.yaml")} == {c[1] for c in COMMANDS}
    for path in CONF.glob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        assert {"override hydra/help": "respect"} in doc["defaults"], path.name
        assert set(doc["hydra"]["help"]) == {"app_name", "header"}, path.name
        assert "$" not in doc["hydra"]["help"]["header"].replace("${", ""), "Hydra's help substitutes $NAME"


@pytest.mark.parametrize(
    "module,config,overrides",
    [
        ("schedule", "schedule", ["solver=cpsat", "objective=latency", "hardware.stages=6"]),
        ("train", "train", ["policy=gat"]),
        ("rt", "rt", ["command=train"]),
    ],
)
def test_the_fast_help_prints_what_hydras_help_prints(capsys, monkeypatch, module, config, overrides):
    """``--help`` is printed by run_command's print_help (only the placeholders the template uses are computed);
    its text equals Hydra's own ``--help`` for the same command line, and it leaves Hydra's flags to Hydra."""
    import importlib

    from respect_jax.cli.compose import help_request, print_help

    main = importlib.import_module(f"respect_jax.cli.{module}")._main
    monkeypatch.setattr(sys, "argv", [f"respect-{module}", "--help", *overrides])
    with pytest.raises(SystemExit) as exc:
        main()  # Hydra's help
    hydras = capsys.readouterr().out
    assert exc.value.code == 0 and "usage:" in hydras
    print_help(f"respect-{module}", config, overrides)
    assert capsys.readouterr().out == hydras
    assert help_request(["--help", *overrides]) and help_request(["-h"])
    assert not help_request(["--help", "--cfg", "job"]) and not help_request(["--help", "hydra.verbose=true"])
    assert not help_request(["--hydra-help"]) and not help_request(overrides)
