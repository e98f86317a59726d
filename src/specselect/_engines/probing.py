"""What the engine probes share: the host's devices and memory budget, and a probe script's cached answer.

A probe script runs with the engine environment's python and prints one JSON object (its last line);
the answer is cached per environment under a key made of the environment's identity and the engine's
distribution records (names and modification times) plus site-packages' modification time, so an upgrade
or a newly installed optional package is noticed.

Memory budget: the memory one engine server may use on one device. CUDA: the total memory of the smallest
visible GPU or MIG instance (the engine's own memory fraction is applied by the admission estimate). CPU: physical RAM
minus `HOST_RESERVE_MB` kept for the operating system and specselect itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import psutil

from specselect._common.fileio import atomic_write_json
from specselect._common.pyenv import script_command
from specselect._engines.base import EngineSetup
from specselect._engines.devices import VISIBLE_VAR, DeviceScan, scan_devices, visible_devices, visible_setting
from specselect.errors import ArtifactError, EngineSetupError
from specselect.records.capabilities import DeviceInfo

__all__ = [
    "HOST_RESERVE_MB",
    "DeviceBudget",
    "DeviceFacts",
    "cached_probe",
    "device_budget",
    "dist_records",
    "leased_setup",
    "probe_argv",
    "probe_versions",
    "query_devices",
    "records_cache_key",
]

HOST_RESERVE_MB = 2048
"""Host memory kept free for the OS and specselect when a server runs on the CPU."""

_CACHE_SCHEMA = 2
"""Raised whenever a probe script answers more: an answer cached by an older script is probed again."""
_PROBE_TIMEOUT_S = 60


class DeviceFacts(NamedTuple):
    """What the device scan found, for the `*Capabilities` fields of these names."""

    host_devices: tuple[DeviceInfo, ...]
    device_source: Literal["nvml", "nvidia-smi", "none", "not_queried"]
    device_problem: str | None
    cuda_visible_devices: str | None


class DeviceBudget(NamedTuple):
    """Where a server runs and how much memory it may use there (the `*Capabilities` fields of that name)."""

    device_kind: Literal["cpu", "cuda"]
    devices: tuple[DeviceInfo, ...]
    memory_budget_mb: int
    memory_budget_basis: str
    facts: DeviceFacts

    def caps_fields(self) -> dict[str, Any]:
        """The `*Capabilities` fields this budget fills."""
        return {
            "device_kind": self.device_kind,
            "devices": self.devices,
            "memory_budget_mb": self.memory_budget_mb,
            "memory_budget_basis": self.memory_budget_basis,
            **self.facts._asdict(),
        }


def leased_setup(setup: EngineSetup) -> EngineSetup:
    """`setup` on a node whose lease holds GPUs (a cluster sets the lease's CUDA_VISIBLE_DEVICES in specselect's
    environment there): the node's own devices, those the lease leaves visible and the smallest one's memory, so a
    group's memory check and its memory sampling follow its own devices. Unchanged on the CPU or without one."""
    caps = setup.caps
    if caps is None or caps.device_kind != "cuda" or VISIBLE_VAR not in os.environ:
        return setup
    budget = device_budget(
        scan_devices(), os.environ[VISIBLE_VAR], cuda_basis=caps.memory_budget_basis, cpu_basis=caps.memory_budget_basis
    )
    return setup.model_copy(update={"caps": caps.model_copy(update=budget.caps_fields())})


def query_devices() -> tuple[DeviceInfo, ...]:
    """The GPUs (and MIG instances) specselect's own CUDA_VISIBLE_DEVICES leaves visible; empty without any."""
    return visible_devices(scan_devices().devices, visible_setting()).devices


def device_budget(scan: DeviceScan | None, setting: str | None, *, cuda_basis: str, cpu_basis: str) -> DeviceBudget:
    """The smallest visible GPU (or MIG instance) of `scan` when there is one, else host RAM minus
    `HOST_RESERVE_MB`. `scan` None: not queried (a CPU build of the engine)."""
    gpus = visible_devices(scan.devices, setting).devices if scan is not None else ()
    found = DeviceFacts(
        host_devices=scan.devices if scan is not None else (),
        device_source=scan.source if scan is not None else "not_queried",
        device_problem=scan.problem if scan is not None else None,
        cuda_visible_devices=setting,
    )
    if gpus:
        return DeviceBudget("cuda", gpus, min(d.memory_mb for d in gpus), cuda_basis, found)
    total_mb = int(psutil.virtual_memory().total // (1024 * 1024))
    host = (DeviceInfo(name="host RAM", memory_mb=total_mb),)
    return DeviceBudget("cpu", host, max(total_mb - HOST_RESERVE_MB, 0), cpu_basis, found)


def dist_records(root: Path, name_glob: str) -> list[Path]:
    """The `<name_glob>.dist-info` records in the site-packages of the environment rooted at `root`."""
    found: list[Path] = []
    for pattern in (f"lib/python*/site-packages/{name_glob}.dist-info", f"Lib/site-packages/{name_glob}.dist-info"):
        found.extend(root.glob(pattern))
    return sorted(found)


def records_cache_key(identity: Sequence[str], records: Sequence[Path]) -> str | None:
    """A probe cache key from an environment's identity and its engine records; None without records."""
    if not records:
        return None
    parts = list(identity)
    parts.extend(f"{p.name}:{p.stat().st_mtime_ns}" for p in records)
    # Installing or removing any package (arctic-inference, say) changes site-packages' own mtime.
    parts.extend(f"{d}:{d.stat().st_mtime_ns}" for d in sorted({p.parent for p in records}))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def probe_argv(python: Path | Sequence[str], script: Path) -> list[str]:
    """The command that runs a probe `script`: with an environment's python (from a neutral cwd), or after a
    command prefix that runs the serving environment's python elsewhere (a container's `docker run ... IMAGE`,
    say), which gets the script's text through `-c`."""
    if isinstance(python, Path):
        return script_command(python, script)
    return [*python, "-c", script.read_text(encoding="utf-8")]


def _run_probe_script(
    python: Path | Sequence[str], script: Path, cwd: Path, *, label: str, fix: str, env: Mapping[str, str] | None
) -> dict[str, Any]:
    child_env = {**os.environ, **env} if env is not None else None
    where = str(python) if isinstance(python, Path) else " ".join(python)
    try:
        proc = subprocess.run(
            probe_argv(python, script),
            cwd=cwd,
            env=child_env,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineSetupError(f"{label} did not run: {exc}", location=where, fix=fix) from exc
    if proc.returncode != 0 or not proc.stdout.strip():
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise EngineSetupError(f"{label} failed (exit {proc.returncode}): {tail}", location=where, fix=fix)
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except ValueError as exc:
        raise EngineSetupError(f"{label} printed no JSON: {exc}", location=where, fix=fix) from exc
    if not isinstance(data, dict):
        raise EngineSetupError(f"{label} printed no JSON object", location=where, fix=fix)
    if data.get("error"):
        raise EngineSetupError(f"{label}: {data['error']}", location=where, fix=fix)
    return data


def _script_digest(script: Path) -> str:
    return hashlib.sha256(script.read_bytes()).hexdigest()


def _load_cached(path: Path, script: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema_version") != _CACHE_SCHEMA:
        return None
    # A probe script that learnt to read more answers anew (a cached answer lacks what it adds).
    if data.get("script_sha256") != _script_digest(script):
        return None
    engine = data.get("engine")
    return engine if isinstance(engine, dict) else None


def cached_probe(
    python: Path | Sequence[str],
    script: Path,
    *,
    cache_dir: Path,
    cache_file: Path | None,
    label: str,
    fix: str,
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], bool]:
    """`script`'s answer under `python` (run in `cache_dir`; a command prefix: see `probe_argv`) and whether it
    came from `cache_file`.

    `cache_file` None: never cached. `env` is added to the script's environment. EngineSetupError, naming
    `label` and `fix`, when the script does not run or prints no JSON object or an `error`.
    """
    engine = _load_cached(cache_file, script) if cache_file is not None else None
    if engine is not None:
        return engine, True
    cache_dir.mkdir(parents=True, exist_ok=True)
    engine = _run_probe_script(python, script, cache_dir, label=label, fix=fix, env=env)
    if cache_file is not None:
        # A cache that cannot be written only costs a re-probe next time.
        with contextlib.suppress(ArtifactError):
            record = {"schema_version": _CACHE_SCHEMA, "script_sha256": _script_digest(script), "engine": engine}
            atomic_write_json(cache_file, record)
    return engine, False


def probe_versions(engine: Mapping[str, Any]) -> dict[str, str | None]:
    """The answer's `versions` object as strings (None for a package that is not installed)."""
    return {str(k): (str(v) if v is not None else None) for k, v in dict(engine.get("versions") or {}).items()}
