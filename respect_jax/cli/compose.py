"""Checks of a command line before Hydra runs it: a ``group=choice`` naming no preset file, a misspelt key or
a malformed override is one line on stderr and exit 2 (Hydra would report them over many lines)."""

from __future__ import annotations

import sys

import omegaconf

from respect_jax import resources


def check_group_choices(
    prog: str, groups: tuple[str, ...], argv: list[str] | None = None, config: str | None = None
) -> None:
    """Exit 2 with one line if a command-line ``group=choice`` names no file in ``conf/group/`` (each
    choice of a sweep ``group=a,b``), or, with ``config`` (the command's top-level config name), if the
    command line does not compose: a misspelt key, a malformed override.

    Hydra itself would report these over many lines; the command-line contract wants one. For a multirun (``-m``) the
    composition check uses the first value of every swept key (a misspelt key fails in every job alike); it
    leaves ``hydra`` keys and Hydra's other flags (``--cfg``, ``--info``, ...) to Hydra.
    """
    args = sys.argv[1:] if argv is None else argv
    for arg in args:
        key, sep, value = arg.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in groups or "(" in value:  # choice(...), glob(...): Hydra's sweep functions
            continue
        for choice in value.split(","):
            if not (resources.conf_dir() / key / f"{choice}.yaml").is_file():
                choices = sorted(p.stem for p in (resources.conf_dir() / key).glob("*.yaml"))
                print(f"{prog}: error: unknown {key} {choice!r}; choose one of {', '.join(choices)}", file=sys.stderr)
                sys.exit(2)
    multirun = [a for a in args if a in ("-m", "--multirun")]
    if config is None or any(a.startswith("-") and a not in multirun for a in args):
        return
    overrides = [a for a in args if not a.startswith("-") and not a.lstrip("+~").startswith("hydra")]
    if multirun:
        overrides = first_job(overrides)
        if overrides is None:  # not parsable here: Hydra reports it
            return
    message = composition_error(config, overrides)
    if message:
        print(f"{prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def first_job(overrides: list[str]) -> list[str] | None:
    """The overrides of a sweep's first job (every ``key=a,b`` or sweep function at its first value); None if
    Hydra's parser does not accept them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        out = []
        for override, text in zip(parsed, overrides, strict=True):
            if override.is_sweep_override():
                first = next(iter(override.sweep_string_iterator()), None)
                if first is None:
                    return None
                text = f"{override.get_key_element()}={first}"
            out.append(text)
        return out
    except (HydraException, ValueError, TypeError):
        return None


def composition_error(config: str, overrides: list[str]) -> str | None:
    """One line saying why ``config`` with ``overrides`` does not compose (None: it does)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    try:
        with initialize_config_dir(config_dir=str(resources.conf_dir()), version_base=None):
            compose(config, overrides=overrides)
    except (HydraException, omegaconf.errors.OmegaConfBaseException) as err:
        lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()] or [type(err).__name__]
        if len(lines) > 1 and lines[1].startswith("To append to your config use "):
            return f"{lines[0].rstrip('.')}: no such key"
        return lines[0]
    return None
