"""What the engine probes share: the host's devices and memory budget, and a probe script's cached answer.

A probe script runs with the engine environment's python and prints one JSON object (its last line);
the answer is cached per environment under a key made of the environment's identity and the engine's
distribution records (names and modification times) plus site-packages' modification time, so an upgrade
or a newly installed optional package is noticed.

Memory budget: the memory one engine server may use on one device. CUDA: the total memory of the smallest
visible GPU (the engine's own memory fraction is applied by the admission estimate). CPU: physical RAM
minus `HOST_RESERVE_MB` kept for the operating system and specselect itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import psutil
from pydantic import BaseModel, ConfigDict

from specselect.artifacts.io import atomic_write_json
from specselect.engines.vllm.envsetup import script_command
from specselect.errors import ArtifactError, EngineSetupError

__all__ = [
    "HOST_RESERVE_MB",
    "DeviceBudget",
    "DeviceInfo",
    "cached_probe",
    "device_budget",
    "dist_records",
    "probe_versions",
    "query_devices",
    "records_cache_key",
]

HOST_RESERVE_MB = 2048
"""Host memory kept free for the OS and specselect when a server runs on the CPU."""

_CACHE_SCHEMA = 1
_PROBE_TIMEOUT_S = 60
_NVIDIA_SMI_TIMEOUT_S = 10


class DeviceInfo(BaseModel):
    """One device the engine can run on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    memory_mb: int
    index: int | None = None


class DeviceBudget(NamedTuple):
    """Where a server runs and how much memory it may use there (the `*Capabilities` fields of that name)."""

    device_kind: Literal["cpu", "cuda"]
    devices: tuple[DeviceInfo, ...]
    memory_budget_mb: int
    memory_budget_basis: str


def query_devices() -> tuple[DeviceInfo, ...]:
    """Visible NVIDIA GPUs (index, name, total memory) via nvidia-smi; empty when there are none."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        proc = subprocess.run(
            [smi, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=_NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if proc.returncode != 0:
        return ()
    devices: list[DeviceInfo] = []
    for line in proc.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit() or not parts[2].isdigit():
            continue
        devices.append(DeviceInfo(index=int(parts[0]), name=parts[1], memory_mb=int(parts[2])))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and all(tok.strip().isdigit() for tok in visible.split(",") if tok.strip()):
        wanted = [int(tok) for tok in visible.split(",") if tok.strip()]
        devices = [d for d in devices if d.index in wanted]
    return tuple(devices)


def device_budget(gpus: tuple[DeviceInfo, ...], *, cuda_basis: str, cpu_basis: str) -> DeviceBudget:
    """The smallest GPU of `gpus` when there are any, else host RAM minus `HOST_RESERVE_MB`."""
    if gpus:
        return DeviceBudget("cuda", gpus, min(d.memory_mb for d in gpus), cuda_basis)
    total_mb = int(psutil.virtual_memory().total // (1024 * 1024))
    host = (DeviceInfo(name="host RAM", memory_mb=total_mb),)
    return DeviceBudget("cpu", host, max(total_mb - HOST_RESERVE_MB, 0), cpu_basis)


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


def _run_probe_script(
    python: Path, script: Path, cwd: Path, *, label: str, fix: str, env: Mapping[str, str] | None
) -> dict[str, Any]:
    child_env = {**os.environ, **env} if env is not None else None
    try:
        proc = subprocess.run(
            script_command(python, script),
            cwd=cwd,
            env=child_env,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineSetupError(f"{label} did not run: {exc}", location=str(python), fix=fix) from exc
    if proc.returncode != 0 or not proc.stdout.strip():
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise EngineSetupError(f"{label} failed (exit {proc.returncode}): {tail}", location=str(python), fix=fix)
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except ValueError as exc:
        raise EngineSetupError(f"{label} printed no JSON: {exc}", location=str(python), fix=fix) from exc
    if not isinstance(data, dict):
        raise EngineSetupError(f"{label} printed no JSON object", location=str(python), fix=fix)
    if data.get("error"):
        raise EngineSetupError(f"{label}: {data['error']}", location=str(python), fix=fix)
    return data


def _load_cached(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema_version") != _CACHE_SCHEMA:
        return None
    engine = data.get("engine")
    return engine if isinstance(engine, dict) else None


def cached_probe(
    python: Path,
    script: Path,
    *,
    cache_dir: Path,
    cache_file: Path | None,
    label: str,
    fix: str,
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], bool]:
    """`script`'s answer under `python` (run in `cache_dir`) and whether it came from `cache_file`.

    `cache_file` None: never cached. `env` is added to the script's environment. EngineSetupError, naming
    `label` and `fix`, when the script does not run or prints no JSON object or an `error`.
    """
    engine = _load_cached(cache_file) if cache_file is not None else None
    if engine is not None:
        return engine, True
    cache_dir.mkdir(parents=True, exist_ok=True)
    engine = _run_probe_script(python, script, cache_dir, label=label, fix=fix, env=env)
    if cache_file is not None:
        # A cache that cannot be written only costs a re-probe next time.
        with contextlib.suppress(ArtifactError):
            atomic_write_json(cache_file, {"schema_version": _CACHE_SCHEMA, "engine": engine})
    return engine, False


def probe_versions(engine: Mapping[str, Any]) -> dict[str, str | None]:
    """The answer's `versions` object as strings (None for a package that is not installed)."""
    return {str(k): (str(v) if v is not None else None) for k, v in dict(engine.get("versions") or {}).items()}
