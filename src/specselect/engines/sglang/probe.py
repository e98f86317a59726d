"""What an installed SGLang can do, and on which devices: `SglangCapabilities`, without starting a server.

The engine side is read by `_probe_script.py`, run with the engine environment's python: the version
from the `sglang` distribution record, the accepted `--speculative-algorithm` values and every declared
flag parsed with `ast` from the installed sources (sglang is never imported, here or there). Devices are
read here, as for vLLM: `nvidia-smi` when present, else host RAM.

SGLang's speculative decoding needs CUDA (or ROCm/NPU builds specselect does not drive), so every method
is marked `cuda` in `method_hardware`: on a CPU-only host admission reports the candidates
`unsupported` (`requires_cuda`) instead of starting a server that would fail.

The result is cached per environment like the vLLM probe: keyed by the python path and the `sglang`
distribution records' names and modification times, plus site-packages' modification time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import psutil
from pydantic import BaseModel, ConfigDict, Field

from specselect.artifacts.io import atomic_write_json
from specselect.engines.sglang.specargs import supported_methods
from specselect.engines.vllm.envsetup import default_home, script_command
from specselect.engines.vllm.probe import HOST_RESERVE_MB, DeviceInfo, query_devices
from specselect.errors import ArtifactError, EngineSetupError

__all__ = ["LAUNCH_FLAGS", "SglangCapabilities", "probe_sglang", "sglang_probe_cache_key"]

LAUNCH_FLAGS = (
    "--model-path",
    "--served-model-name",
    "--host",
    "--port",
    "--dtype",
    "--context-length",
    "--tp-size",
    "--pp-size",
    "--dp-size",
    "--enable-metrics",
    "--disable-radix-cache",
    "--api-key",
)
"""The flags specselect's SGLang launcher may emit; the probe records which ones the installed version declares."""

_CACHE_SCHEMA = 1
_PROBE_TIMEOUT_S = 60


class SglangCapabilities(BaseModel):
    """The probed capabilities of one SGLang environment on this host.

    Field names match `EngineCapabilities` (vLLM) where admission reads them; `spec_methods` are
    specselect method names (`eagle3`, `draft_model`, ...) whose SGLang algorithm this version accepts.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    kind: Literal["sglang"] = "sglang"
    engine_version: str
    python: str
    device_kind: Literal["cpu", "cuda"]
    devices: tuple[DeviceInfo, ...]
    memory_budget_mb: int
    memory_budget_basis: str
    spec_methods: tuple[str, ...]
    mtp_methods: tuple[str, ...] = ()
    per_request_spec_metrics_flag: bool = False
    """SGLang has no per-request acceptance flag on its OpenAI routes."""
    method_hardware: dict[str, str]
    optional_modules: dict[str, bool] = Field(default_factory=dict)
    versions: dict[str, str | None]
    speculative_algorithms: tuple[str, ...]
    """`--speculative-algorithm` values as SGLang spells them (NEXTN included when the alias exists)."""
    algorithm_source: Literal["argparse_choices", "registry", "none"]
    """Where they were read: argparse `choices`, or the `SpeculativeAlgorithm` registry in spec_info.py."""
    speculative_flags: tuple[str, ...]
    launch_flags: dict[str, bool]
    """Each flag of `LAUNCH_FLAGS` -> declared by this version."""
    server_endpoints: tuple[str, ...]
    probed_in_s: float
    from_cache: bool = False


def _site_records(python: Path) -> list[Path]:
    root = Path(python).parent.parent
    found: list[Path] = []
    for pattern in ("lib/python*/site-packages/sglang-*.dist-info", "Lib/site-packages/sglang-*.dist-info"):
        found.extend(root.glob(pattern))
    return sorted(found)


def sglang_probe_cache_key(python: Path) -> str | None:
    """The cache key of an environment's probe; None when its sglang record cannot be found (no caching)."""
    records = _site_records(python)
    if not records:
        return None
    parts = [str(Path(python).absolute())]
    parts.extend(f"{p.name}:{p.stat().st_mtime_ns}" for p in records)
    parts.extend(f"{d}:{d.stat().st_mtime_ns}" for d in sorted({p.parent for p in records}))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _run_probe_script(python: Path, cwd: Path, env: Mapping[str, str] | None) -> dict[str, Any]:
    script = Path(__file__).with_name("_probe_script.py")
    fix = f"check that {python} is the python of an environment with sglang installed"
    child_env = {**os.environ, **(env or {})}
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
        raise EngineSetupError(f"SGLang probe did not run: {exc}", location=str(python), fix=fix) from exc
    if proc.returncode != 0 or not proc.stdout.strip():
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise EngineSetupError(f"SGLang probe failed (exit {proc.returncode}): {tail}", location=str(python), fix=fix)
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except ValueError as exc:
        raise EngineSetupError(f"SGLang probe printed no JSON: {exc}", location=str(python), fix=fix) from exc
    if not isinstance(data, dict):
        raise EngineSetupError("SGLang probe printed no JSON object", location=str(python), fix=fix)
    if data.get("error"):
        raise EngineSetupError(f"SGLang probe: {data['error']}", location=str(python), fix=fix)
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


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def probe_sglang(
    python: Path, *, cache_dir: Path | None = None, env: Mapping[str, str] | None = None
) -> SglangCapabilities:
    """Probe the SGLang of `python` (cached per environment; no server, no `import sglang`).

    `env` is added to the probe's environment (PYTHONPATH for an SGLang outside site-packages, say).
    EngineSetupError when the python cannot run or has no sglang.
    """
    started = time.monotonic()
    python = Path(python).expanduser()
    cache_dir = cache_dir or default_home() / "cache" / "probe"
    key = sglang_probe_cache_key(python) if not env else None
    cache_file = cache_dir / f"sglang-{key}.json" if key else None
    engine = _load_cached(cache_file) if cache_file is not None else None
    from_cache = engine is not None
    if engine is None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        engine = _run_probe_script(python, cache_dir, env)
        if cache_file is not None:
            # A cache that cannot be written only costs a re-probe next time.
            with contextlib.suppress(ArtifactError):
                atomic_write_json(cache_file, {"schema_version": _CACHE_SCHEMA, "engine": engine})
    versions = {str(k): (str(v) if v is not None else None) for k, v in dict(engine.get("versions") or {}).items()}
    version = versions.get("sglang")
    if version is None:
        raise EngineSetupError(
            "sglang has no distribution record (no version) in this environment",
            location=str(python),
            fix=f"install sglang with pip into {python}'s environment",
        )
    algorithms = _strs(engine.get("algorithms"))
    flags = set(_strs(engine.get("flags")))
    methods = supported_methods(algorithms)
    gpus = query_devices()
    if gpus:
        device_kind: Literal["cpu", "cuda"] = "cuda"
        devices = gpus
        budget = min(d.memory_mb for d in gpus)
        basis = "total memory of the smallest visible GPU (SGLang's --mem-fraction-static applies in the estimate)"
    else:
        device_kind = "cpu"
        total_mb = int(psutil.virtual_memory().total // (1024 * 1024))
        devices = (DeviceInfo(name="host RAM", memory_mb=total_mb),)
        budget = max(total_mb - HOST_RESERVE_MB, 0)
        basis = f"host RAM minus {HOST_RESERVE_MB} MB; SGLang's speculative decoding does not run on CPU"
    source = engine.get("algorithm_source")
    return SglangCapabilities(
        engine_version=version,
        python=str(python),
        device_kind=device_kind,
        devices=devices,
        memory_budget_mb=budget,
        memory_budget_basis=basis,
        spec_methods=methods,
        method_hardware=dict.fromkeys(methods, "cuda"),
        versions=versions,
        speculative_algorithms=algorithms,
        algorithm_source=source if source in ("argparse_choices", "registry") else "none",
        speculative_flags=tuple(sorted(f for f in flags if f.startswith("--speculative-"))),
        launch_flags={flag: flag in flags for flag in LAUNCH_FLAGS},
        server_endpoints=_strs(engine.get("server_endpoints")),
        probed_in_s=round(time.monotonic() - started, 4),
        from_cache=from_cache,
    )
