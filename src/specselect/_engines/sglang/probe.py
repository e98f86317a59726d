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

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specselect._common.home import default_home
from specselect._common.secrets import redact_argv
from specselect._engines.devices import scan_devices
from specselect._engines.probing import (
    HOST_RESERVE_MB,
    cached_probe,
    device_budget,
    dist_records,
    probe_versions,
    records_cache_key,
)
from specselect._engines.sglang.specargs import supported_methods
from specselect.errors import EngineSetupError
from specselect.records.capabilities import RuntimeController, SglangCapabilities

__all__ = ["ADAPTIVE_CONTROLLER", "LAUNCH_FLAGS", "probe_sglang", "sglang_probe_cache_key"]

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
    "--config",
)
"""The flags specselect's SGLang launcher may emit; the probe records which ones the installed version declares."""


ADAPTIVE_CONTROLLER = RuntimeController(
    name="adaptive_num_steps",
    option="speculative_adaptive",
    methods=("eagle", "eagle3", "mtp", "nextn"),
    requires_device="cuda",
    description="SGLang's adaptive speculative decoding: the number of draft steps follows the observed acceptance "
    "length (`--speculative-adaptive`, tuned by `--speculative-adaptive-config`); EAGLE/EAGLE3 chains only (topk 1, "
    "no attention data parallelism); SGLang silently turns it off elsewhere, so admission refuses it there",
)
"""SGLang's own speculation controller, found when the installed version declares `--speculative-adaptive`."""


def _declared(engine: Mapping[str, Any], flags: set[str]) -> dict[str, Any]:
    """What the installed sources declare: flags, endpoints, the adaptive controller, plugin registration, plugins."""
    plugins = engine.get("plugins")
    source = engine.get("algorithm_source")
    return {
        "algorithm_source": source if source in ("argparse_choices", "registry") else "none",
        "speculative_flags": tuple(sorted(f for f in flags if f.startswith("--speculative-"))),
        "launch_flags": {flag: flag in flags for flag in LAUNCH_FLAGS},
        "server_endpoints": _strs(engine.get("server_endpoints")),
        "runtime_controllers": (ADAPTIVE_CONTROLLER,) if "--speculative-adaptive" in flags else (),
        "plugin_registration": engine.get("plugin_registration") is True,
        "plugins": tuple(
            f"{p.get('name')}={p.get('value')}"
            for p in (plugins if isinstance(plugins, list) else ())
            if isinstance(p, dict)
        ),
    }


def sglang_probe_cache_key(python: Path) -> str | None:
    """The cache key of an environment's probe; None when its sglang record cannot be found (no caching)."""
    return records_cache_key([str(Path(python).absolute())], dist_records(Path(python).parent.parent, "sglang-*"))


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def probe_sglang(
    python: Path | Sequence[str],
    *,
    cache_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    visible: str | None = None,
) -> SglangCapabilities:
    """Probe the SGLang of `python` (cached per environment; no server, no `import sglang`).

    `env` is added to the probe's environment (PYTHONPATH for an SGLang outside site-packages, say); `visible`
    is the CUDA_VISIBLE_DEVICES of the engine's environment; `python` as an argv prefix: uncached (`probe_argv`).
    EngineSetupError when the python cannot run or has no sglang.
    """
    started = time.monotonic()
    runner: Path | list[str] = Path(python).expanduser() if isinstance(python, str | Path) else list(python)
    shown = str(runner) if isinstance(runner, Path) else " ".join(redact_argv(runner))
    cache_dir = cache_dir or default_home() / "cache" / "probe"
    key = sglang_probe_cache_key(runner) if not env and isinstance(runner, Path) else None
    engine, from_cache = cached_probe(
        runner,
        Path(__file__).with_name("_probe_script.py"),
        cache_dir=cache_dir,
        cache_file=cache_dir / f"sglang-{key}.json" if key else None,
        label="SGLang probe",
        fix=f"check that {shown} is the python of an environment with sglang installed",
        env=env,
    )
    versions = probe_versions(engine)
    version = versions.get("sglang")
    if version is None:
        raise EngineSetupError(
            "sglang has no distribution record (no version) in this environment",
            location=shown,
            fix=f"install sglang with pip into {shown}'s environment",
        )
    algorithms = _strs(engine.get("algorithms"))
    flags = set(_strs(engine.get("flags")))
    methods = supported_methods(algorithms)
    budget = device_budget(
        scan_devices(),
        visible,
        cuda_basis="total memory of the smallest visible GPU (SGLang's --mem-fraction-static applies in the estimate)",
        cpu_basis=f"host RAM minus {HOST_RESERVE_MB} MB; SGLang's speculative decoding does not run on CPU",
    )
    return SglangCapabilities(
        engine_version=version,
        python=shown,
        **budget.caps_fields(),
        spec_methods=methods,
        method_hardware=dict.fromkeys(methods, "cuda"),
        versions=versions,
        speculative_algorithms=algorithms,
        probed_in_s=round(time.monotonic() - started, 4),
        from_cache=from_cache,
        **_declared(engine, flags),
    )
