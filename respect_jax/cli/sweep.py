"""Where a job of a Hydra sweep (``-m``) writes: its own folder for an output left at its default, and a
one-line error when two jobs of one sweep would write the same path (claims in ``<sweep dir>/.claims``)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from respect_jax import resources


def in_sweep() -> bool:
    """Whether this process runs a job of a Hydra multirun (``-m``). False without importing Hydra when this
    process never set Hydra's job config (a plain run read back by :func:`respect_jax.cli.compose.run_command`)."""
    if "hydra.core.hydra_config" not in sys.modules:
        return False
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _raw(doc, key: str):
    """The unresolved value at dotted ``key`` of a container (None if absent)."""
    for part in key.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _config_default(key: str):
    """The unresolved value of ``key`` in the running command's config file (``???``: mandatory)."""
    from hydra.core.hydra_config import HydraConfig

    path = resources.conf_dir() / f"{HydraConfig.get().job.config_name}.yaml"
    return _raw(OmegaConf.to_container(OmegaConf.load(path), resolve=False), key)


def _left_at_default(cfg: DictConfig, key: str) -> bool:
    """``cfg[key]`` (dotted) is the value of the command's config file: neither the command line nor a preset
    (``conf/ablation/*``) set it. Both are compared unresolved (``runs/edge/${edge_scenario.name}``)."""
    from hydra.core.hydra_config import HydraConfig

    if any(o.lstrip("+~").split("=", 1)[0] == key for o in HydraConfig.get().overrides.task):
        return False
    return _raw(OmegaConf.to_container(cfg, resolve=False), key) == _config_default(key)


def job_path(cfg: DictConfig, key: str, name: str | None = None) -> Path | None:
    """Where this job writes ``cfg[key]`` (a folder; with ``name``, the file ``name`` in it when ``cfg[key]``
    is left at its default), made safe for Hydra sweeps; sets ``cfg[key]`` to the folder it chose.

    Outside a sweep: ``cfg[key]`` as given (None stays None). In a sweep (``-m``), a ``key`` left at the value
    of the command's config file becomes the job's own folder ``<hydra.sweep.dir>/<hydra.sweep.subdir>`` (by
    default ``multirun/<time>/<job number>``; the same ``hydra.sweep.dir`` again resumes a killed sweep), and
    a path that another job of the same sweep already writes (a literal ``run_dir=runs/x`` shared by every
    job: the later jobs would resume, or overwrite, the earlier one's) is a one-line error. The claims are
    files in ``<hydra.sweep.dir>/.claims/``; those of an earlier sweep with other overrides do not count.
    """
    value = OmegaConf.select(cfg, key)
    if in_sweep():
        value = _job_value(cfg, key, value, "")
    if value is None:
        return None
    path = Path(value) / name if name else Path(value)
    if in_sweep():
        _claim(path, key, "runs/sweep_${hydra:job.num}")
    return path


def job_file(cfg: DictConfig, key: str, default: str | None) -> Path | None:
    """The output file ``cfg[key]`` of this job (``default`` when it is null), made safe for Hydra sweeps like
    :func:`job_path`: in a sweep, a ``key`` left at its default becomes ``<job folder>/<name of default>``
    (None without a default: nothing is written), and a file another job of the sweep writes is an error."""
    value = OmegaConf.select(cfg, key)
    if not in_sweep():
        value = value if value is not None else default
    else:
        value = _job_value(cfg, key, value, Path(default).name if default is not None else None)
    if value is None:
        return None
    path = Path(value)
    if in_sweep():
        _claim(path, key, str(path.with_name(f"{path.stem}_${{hydra:job.num}}{path.suffix}")))
    return path


def _job_value(cfg: DictConfig, key: str, value, leaf: str | None):
    """In a sweep: ``value``, or, when ``key`` is left at its default, ``<job folder>/<leaf>`` (written back
    to ``cfg``); None when it is left at its default and there is no ``leaf``."""
    from hydra.core.hydra_config import HydraConfig

    if value is not None and not _left_at_default(cfg, key):
        return value
    if leaf is None:
        return None
    hc = HydraConfig.get()
    value = str(Path(hc.sweep.dir) / str(hc.sweep.subdir) / leaf)
    OmegaConf.update(cfg, key, value, force_add=True)
    return value


def _claim(path: Path, key: str, example: str) -> None:
    """Record that this job of the sweep writes ``path`` (in ``<hydra.sweep.dir>/.claims``); an error if another
    job does (``example``: a per-job value of ``key`` to suggest)."""
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    job = int(hc.job.num)
    claims = Path(hc.sweep.dir) / ".claims"
    claims.mkdir(parents=True, exist_ok=True)
    target = str(path.resolve())
    marker = claims / (hashlib.sha1(target.encode()).hexdigest()[:16] + ".json")
    claim = {"path": target, "job": job, "sweep": _sweep_overrides(Path(hc.sweep.dir))}
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        owner = _read_claim(marker)
        if owner.get("sweep") != claim["sweep"]:  # left by an earlier sweep into the same folder: stale
            tmp = marker.with_suffix(f".{job}.tmp")
            tmp.write_text(json.dumps(claim) + "\n")
            os.replace(tmp, marker)
            return
        if owner.get("job", job) != job:
            optional = "" if _config_default(key) == "???" else f", or do not set {key}"
            raise ValueError(
                f"{key}={path} is already the {key} of job {owner['job']} of this sweep; give every job its "
                f"own, e.g. {key}='{example}'{optional}"
            ) from None
        return
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(claim) + "\n")


def _sweep_overrides(sweep_dir: Path) -> list[str] | None:
    """The command-line overrides of the sweep that owns ``sweep_dir`` now (``multirun.yaml``, which Hydra
    rewrites when a sweep starts): a claim made under other overrides was made by an earlier sweep reusing the
    folder, while the same sweep run again (a resumed one) keeps its claims."""
    try:
        return list(OmegaConf.load(sweep_dir / "multirun.yaml").hydra.overrides.task)
    except Exception:  # noqa: BLE001 - a launcher that writes no multirun.yaml: every claim counts
        return None


def _read_claim(marker: Path) -> dict:
    """The claim in ``marker`` (waiting briefly for a job that created it a moment ago to write it)."""
    for _ in range(50):
        text = marker.read_text()
        if text.strip():
            try:
                doc = json.loads(text)
            except json.JSONDecodeError:
                return {}
            return doc if isinstance(doc, dict) else {}
        time.sleep(0.02)
    return {}
