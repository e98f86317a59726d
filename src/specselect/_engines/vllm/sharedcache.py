"""What vLLM servers of one specselect home may reuse: vLLM's inspection of a model class (every server), and the
compile caches of one launch configuration (only the launches of that configuration).

Before it loads a model, vLLM inspects the model's class in a fresh Python process (importing vLLM and torch once
more: ~18 s of a ~66 s server start on a 2-core machine) unless `$VLLM_CACHE_ROOT/modelinfos` holds the answer, a
JSON file per class keyed by the hash of vLLM's own source file for it.

With torch.compile (any launch without `--enforce-eager`), vLLM 0.32 compiles the model at start-up and keeps the
result in `$VLLM_CACHE_ROOT/torch_compile_cache/H/`, H a hash of its own configuration (`VllmConfig.compute_hash`),
its compile-relevant environment, the traced source files and the compiler; Inductor and Triton keep theirs in
TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR. A later start whose H matches loads the graphs instead of compiling
them. Each launch still has its own cache directory (`cache_env`); `share_compile_cache` links those three caches
to one directory per launch configuration (`launch_cache_key`: everything the server is started with but the
address, the log and the run directory), so launches of one configuration share what the engine compiled and no
other configuration ever reads it, whatever H says. CUDA graphs are captured again at every start: vLLM keeps no
graph on disk.

Start-up time is recorded but never compared, so sharing cannot move a decision.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from specselect._common.canonical import canonical_sha256
from specselect._engines.base import LaunchSpec
from specselect._engines.server import cache_root

__all__ = [
    "COMPILE_CACHES",
    "COMPILE_DIR",
    "MODELINFO_DIR",
    "launch_cache_key",
    "share_compile_cache",
    "share_model_class_cache",
]

MODELINFO_DIR = "modelinfos"
"""vLLM's directory (under VLLM_CACHE_ROOT) of inspected model classes."""
COMPILE_DIR = "compile"
"""Under the shared cache: one directory per launch configuration (`launch_cache_key`)."""
COMPILE_CACHES = ("vllm/torch_compile_cache", "torchinductor", "triton")
"""The compile caches under a launch's `cache_root` (VLLM_CACHE_ROOT's, TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR)."""

_NOT_CONFIGURATION = frozenset({"group", "host", "port", "log_path", "run_dir", "startup_timeout_s", "api_key_env"})
"""Launch-spec fields that name where and how long, not what the engine runs: launches differing only there are one
configuration."""


def _link(link: Path, target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    link.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        link.symlink_to(target, target_is_directory=True)
    return link


def share_model_class_cache(run_dir: Path, shared: Path) -> Path:
    """Make `run_dir`'s vLLM `modelinfos` a link to `shared/modelinfos` (both created); returns the link.

    A server whose cache already has its own `modelinfos` directory (an earlier attempt's) keeps it.
    """
    return _link(cache_root(run_dir) / "vllm" / MODELINFO_DIR, shared.absolute() / MODELINFO_DIR)


def launch_cache_key(spec: LaunchSpec, *, engine: str) -> str:
    """The key of `spec`'s configuration: every field the server is started with (model, dtype, lengths,
    parallelism, engine arguments, environment, speculative configuration, prefix caching) and `engine` (the
    interpreter or command and the engine's version), not its address, log or run directory."""
    fields = spec.model_dump(mode="json", exclude=set(_NOT_CONFIGURATION))
    return canonical_sha256({"engine": engine, "launch": fields})[:16]


def share_compile_cache(run_dir: Path, shared: Path, key: str) -> tuple[Path, ...]:
    """Link `run_dir`'s compile caches (`COMPILE_CACHES`) to `shared/compile/KEY/` (created); returns the links.

    A cache the launch directory already holds as its own directory (an earlier attempt's) stays its own.
    """
    home = shared.absolute() / COMPILE_DIR / key
    return tuple(_link(cache_root(run_dir) / name, home / Path(name).name) for name in COMPILE_CACHES)
