"""Checks of a command line before Hydra runs it: a ``group=choice`` naming no preset file, a misspelt key or
a malformed override is one line on stderr and exit 2 (Hydra would report them over many lines). A plain run
(no flag, no sweep, no ``hydra.*`` override) then runs with the config composed once (:func:`run_command`);
Hydra's own entry point would compose it twice more (once to find the run mode, once to run). A composition is
stored (:func:`store_composition`) and read back (:func:`read_composition`) by the next command with the same
inputs: Hydra's composition costs about 0.2 s of CPU per command, reading it back about 2 ms. When Hydra's run of
that composition would do nothing but call the task on the config without its ``hydra`` node (no output folder
or saved config, no logging set-up, no callbacks, no environment variables set, the working directory kept, no
``${hydra:...}`` or ``${now:...}`` in the task's config), that task config is stored too
(:func:`store_task_composition`) and the next such command calls its task on it without importing Hydra
(:func:`read_task_composition`): about 0.3 s less per command.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import importlib.util
import json
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
        return one_line(err)
    return None


def one_line(err: Exception) -> str:
    """The first line of a Hydra / OmegaConf composition error (a misspelt key: ``<key>: no such key``)."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()] or [type(err).__name__]
    if len(lines) > 1 and lines[1].startswith("To append to your config use "):
        return f"{lines[0].rstrip('.')}: no such key"
    return lines[0]


def plain_run(args: list[str]) -> bool:
    """True when the command line is a single run Hydra would only compose and run: no flag (``-m``, ``--help``,
    ``--cfg``, ...) and no ``hydra.*`` override."""
    return not any(a.startswith("-") or a.lstrip("+~").startswith("hydra") for a in args)


@contextlib.contextmanager
def composed(prog: str, config: str, overrides: list[str], job_name: str, store_task: bool = False):
    """Inside Hydra's global state for ``conf/``: (Hydra, ``config`` composed with ``overrides`` in run mode, as
    Hydra's run composes it); with ``store_task``, its task config is stored beside the stored composition
    (:func:`store_task_composition`). A composition error prints one line and exits 2."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import configure_log
    from hydra.errors import HydraException
    from hydra.types import RunMode

    with initialize_config_dir(config_dir=str(resources.conf_dir()), version_base="1.3", job_name=job_name):
        hydra = GlobalHydra.instance().hydra
        file = composition_file(config, overrides, job_name)
        cfg = read_composition(file)
        if cfg is None:
            try:
                cfg = hydra.compose_config(config, overrides, run_mode=RunMode.RUN, with_log_configuration=True)
            except (HydraException, omegaconf.errors.OmegaConfBaseException) as err:
                print(f"{prog}: error: {one_line(err)}", file=sys.stderr)
                sys.exit(2)
            store_composition(file, cfg)
        else:
            configure_log(cfg.hydra.hydra_logging, cfg.hydra.verbose)  # as compose_config(with_log_configuration)
        if store_task:
            store_task_composition(file, cfg)
        yield hydra, cfg


#: sub-folder of the command's cache folder (:func:`respect_jax.compile_cache.resolve_cache_dir`) holding compositions
COMPOSITIONS_SUBDIR = "compositions"
#: stored compositions kept (the least recently written are removed beyond)
COMPOSITIONS_KEPT = 256


def composition_file(config: str, overrides: list[str], job_name: str) -> Path | None:
    """Where the composition of ``config`` with ``overrides`` is stored: a file named by everything Hydra's run-mode
    composition depends on (Hydra and OmegaConf versions, every file of ``conf/``, the package source, which holds
    the configs registered in Python, the config name, the overrides, the job name, the working directory). None when
    the cache is off (``RESPECT_JAX_CACHE=off``)."""
    from respect_jax.compile_cache import resolve_cache_dir, source_fingerprint

    folder = resolve_cache_dir("auto")
    if folder is None:
        return None
    digest = hashlib.sha256()
    conf = resources.conf_dir()
    for path in sorted(conf.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(conf)).encode())
            digest.update(path.read_bytes())
    code = source_fingerprint()
    inputs = [hydra_release(), omegaconf.__version__, sys.version, code, str(conf), config, overrides, job_name,
              os.getcwd()]
    digest.update(json.dumps(inputs).encode())
    return folder / COMPOSITIONS_SUBDIR / f"{code[:16]}-{digest.hexdigest()[:32]}.pkl"


@functools.cache
def hydra_release() -> str:
    """SHA-256 of Hydra's ``__init__.py`` (which holds its version), read without importing Hydra."""
    spec = importlib.util.find_spec("hydra")
    return hashlib.sha256(Path(spec.origin).read_bytes()).hexdigest() if spec and spec.origin else "no hydra"


def task_file(file: Path) -> Path:
    """Where the task config of the composition stored in ``file`` is stored (:func:`store_task_composition`)."""
    return file.with_name(f"{file.stem}.task.pkl")


def plain_hydra_run(cfg: omegaconf.DictConfig) -> bool:
    """Whether Hydra's run of the composition ``cfg`` only calls the task on ``cfg`` without its ``hydra`` node: no
    output sub-folder (no saved config), no logging set-up (``job_logging`` and ``hydra_logging`` with ``root:
    null``, not verbose), no callbacks, no ``hydra.job.env_set`` / ``env_copy``, no change of directory (the run
    folder is the working directory)."""
    h = cfg.hydra
    quiet = all(node is not None and node.get("root") is None for node in (h.job_logging, h.hydra_logging))
    return (quiet and h.verbose is False and h.output_subdir is None and not h.job.get("chdir")
            and not h.get("callbacks") and not h.job.env_set and not h.job.env_copy
            and Path(str(h.run.dir)).resolve() == Path.cwd().resolve())


def task_config(cfg: omegaconf.DictConfig) -> omegaconf.DictConfig | None:
    """The config Hydra's run hands the task (``cfg`` without its ``hydra`` node), or None when it refers to Hydra's
    per-run values (``${hydra:...}``, ``${now:...}``), which only Hydra's run resolves."""
    task = copy.deepcopy(cfg)
    with omegaconf.read_write(task), omegaconf.open_dict(task):
        del task["hydra"]
    text = omegaconf.OmegaConf.to_yaml(task)
    return None if "${hydra:" in text or "${now:" in text else task


def store_task_composition(file: Path | None, cfg: omegaconf.DictConfig) -> None:
    """Store the task config of the composition ``cfg`` beside ``file`` when Hydra's run of it is plain
    (:func:`plain_hydra_run`, :func:`task_config`); only where ``file`` itself is stored."""
    if file is None or not file.is_file() or not plain_hydra_run(cfg):
        return
    task = task_config(cfg)
    if task is not None:
        from respect_jax.compile_cache import store_bytes

        store_bytes(task_file(file), pickle.dumps(task))


def read_task_composition(config: str, overrides: list[str], job_name: str) -> omegaconf.DictConfig | None:
    """The stored task config of ``config`` with ``overrides`` (:func:`store_task_composition`), or None."""
    file = composition_file(config, overrides, job_name)
    if file is None or not task_file(file).is_file():
        return None
    try:
        with open(task_file(file), "rb") as handle:
            task = pickle.load(handle)
        omegaconf.OmegaConf.clear_cache(task)
        return task
    except Exception:  # noqa: BLE001 - an unreadable entry is only a miss: Hydra runs
        return None


def read_composition(file: Path | None) -> omegaconf.DictConfig | None:
    """The composition stored in ``file`` with Hydra's per-call values set again (resolvers such as ``${now:...}``
    resolve anew: the stored resolver cache is cleared; ``hydra.job.env_set`` from the environment variables
    ``hydra.job.env_copy`` names), or None (missing or unreadable: composed again)."""
    if file is None or not file.is_file():
        return None
    try:
        with open(file, "rb") as handle:
            cfg = pickle.load(handle)
        omegaconf.OmegaConf.clear_cache(cfg)
        with omegaconf.open_dict(cfg.hydra):
            for key in cfg.hydra.job.env_copy:
                cfg.hydra.job.env_set[key] = os.environ[key]
        return cfg
    except Exception:  # noqa: BLE001 - any unreadable entry (or a variable env_copy names gone) is only a miss
        return None


def store_composition(file: Path | None, cfg: omegaconf.DictConfig) -> None:
    """Write ``cfg`` to ``file`` (atomically), unless the command's own ``jax_cache`` setting turns the cache off or
    names another folder; remove the compositions of other package sources and the oldest beyond
    :data:`COMPOSITIONS_KEPT`. A folder that cannot be written only skips the store."""
    from respect_jax.compile_cache import resolve_cache_dir, store_bytes

    if file is None or resolve_cache_dir(cfg.get("jax_cache", "auto")) != file.parent.parent:
        return
    if not store_bytes(file, pickle.dumps(cfg)):
        return
    code = file.name.split("-")[0]
    try:
        stored = sorted(file.parent.glob("*.pkl"), key=lambda p: p.stat().st_mtime)
    except OSError:  # another process removed one while it was listed
        return
    for old in [p for p in stored if not p.name.startswith(code)] + stored[:-COMPOSITIONS_KEPT]:
        with contextlib.suppress(OSError):
            old.unlink()


HELP_FLAGS = ("--help", "-h")


def help_request(args: list[str]) -> bool:
    """True for ``--help`` (or ``-h``) with overrides only (no other flag, no ``hydra.*`` override)."""
    return sum(a in HELP_FLAGS for a in args) == 1 and plain_run([a for a in args if a not in HELP_FLAGS])


def print_help(prog: str, config: str, overrides: list[str]) -> None:
    """Print ``--help`` as Hydra's would: ``hydra.help.template`` of the composed config, its placeholders
    (``$FLAGS_HELP``, ``$APP_CONFIG_GROUPS``, ``$HYDRA_CONFIG_GROUPS``, ``$CONFIG``) filled by Hydra's own
    functions, but only those the template uses (Hydra computes all four: listing every group's options composes
    the config once per option, 95 times for respect-schedule, about 70 % of its help time). A composition error
    is one line and exit 2."""
    import copy
    import string
    from collections.abc import Mapping

    from hydra._internal.utils import get_args_parser
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    with composed(prog, config, overrides, prog) as (hydra, cfg):
        HydraConfig.instance().set_config(cfg)
        is_hydra = lambda group: group.startswith("hydra/") or group == "hydra"  # noqa: E731
        fill = {
            "FLAGS_HELP": lambda: hydra.format_args_help(get_args_parser()),
            "HYDRA_CONFIG_GROUPS": lambda: hydra.format_config_groups(is_hydra),
            "APP_CONFIG_GROUPS": lambda: hydra.format_config_groups(lambda group: not is_hydra(group)),
            "CONFIG": lambda: OmegaConf.to_yaml(hydra.get_sanitized_cfg(copy.deepcopy(cfg), "job")),
        }

        class OnDemand(Mapping):
            def __getitem__(self, key: str) -> str:
                return fill[key]()

            def __iter__(self):
                return iter(fill)

            def __len__(self) -> int:
                return len(fill)

        print(string.Template(cfg.hydra.help.template).substitute(OnDemand()))


def run_command(prog: str, groups: tuple[str, ...], config: str, hydra_main: Callable[[], Any],
                argv: list[str] | None = None, without_hydra: bool = False) -> None:
    """Run a command line: the checks of :func:`check_group_choices`, then a plain run (:func:`plain_run`) with the
    config composed once here, as Hydra's own run would (run mode, callbacks, its job runner: working directory,
    ``hydra.job.env_set``, the ``hydra:`` resolvers), and anything else through ``hydra_main`` (the
    ``@hydra.main`` function, whose undecorated task is ``hydra_main.__wrapped__``); ``--help`` with overrides by
    :func:`print_help`. The composition error of a plain run is one line and exit 2.

    ``without_hydra``: the task never reads Hydra's run state (``HydraConfig``) outside a sweep, so a plain run
    whose task config is stored (:func:`store_task_composition`) calls the task on it without Hydra."""
    args = sys.argv[1:] if argv is None else argv
    if help_request(args):
        check_group_choices(prog, groups, args)
        print_help(prog, config, [a for a in args if a not in HELP_FLAGS])
        return
    if not plain_run(args):
        check_group_choices(prog, groups, args, config=config)
        hydra_main()
        return
    check_group_choices(prog, groups, args)  # the choices only: the composition below is the run's own
    task = hydra_main.__wrapped__
    task_cfg = read_task_composition(config, args, job_name_of(task, prog)) if without_hydra else None
    if task_cfg is not None:  # Hydra's run would only call the task on it
        task(task_cfg)
        return
    _run_composed(prog, config, args, task, without_hydra)


def job_name_of(task: Callable[[Any], Any], prog: str) -> str:
    """Hydra's job name of ``task``: the name of the file that defines it (``respect_jax/cli/schedule.py``:
    ``schedule``)."""
    return getattr(task, "__module__", prog).rsplit(".", 1)[-1]


def hydra_entry(task: Callable[[Any], Any], config: str, version_base: str | None = "1.3") -> Callable[[], Any]:
    """``@hydra.main`` of ``task`` (the config ``config`` of ``conf/``), decorated when first called: a command
    file need not import Hydra, which a plain run read back (:func:`run_command`) does not use. The task is the
    entry's ``__wrapped__``, as for ``@hydra.main``."""

    @functools.wraps(task)
    def entry() -> Any:
        import hydra

        return hydra.main(config_path=str(resources.conf_dir()), config_name=config, version_base=version_base)(task)()

    return entry


def _run_composed(prog: str, config: str, overrides: list[str], task: Callable[[Any], Any],
                  without_hydra: bool = False) -> None:
    """Compose ``config`` with ``overrides`` once and run ``task`` on it the way ``Hydra.run`` does (with
    ``without_hydra``, its task config is stored for the next such run: :func:`run_command`)."""
    from hydra._internal.callbacks import Callbacks
    from hydra.core.utils import run_job
    from hydra.types import HydraContext, RunMode

    job_name = job_name_of(task, prog)
    with composed(prog, config, overrides, job_name, store_task=without_hydra) as (hydra, cfg):
        cfg.hydra.mode = RunMode.RUN
        callbacks = Callbacks(cfg)
        callbacks.on_run_start(config=cfg, config_name=config)
        ret = run_job(hydra_context=HydraContext(config_loader=hydra.config_loader, callbacks=callbacks),
                      task_function=task, config=cfg, job_dir_key="hydra.run.dir", job_subdir_key=None)
        callbacks.on_run_end(config=cfg, config_name=config, job_return=ret)
        _ = ret.return_value  # a failed job raises its exception here, as in Hydra's run
