"""Free disk and host memory, checked before a large model is downloaded or converted.

A 1.5B model downloads ~1.1 GB, converts to ~7 GB of float32 weights and needs ~9 GB of RAM while it
converts: finding out after the download that the disk or the memory is too small wastes minutes and
leaves half-written files, so the needs are stated and checked first.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import psutil

from specselect.errors import EngineSetupError

__all__ = ["available_memory_bytes", "format_gb", "free_disk_bytes", "require_free_disk", "require_memory"]


def format_gb(num_bytes: int) -> str:
    """`1.12 GB` (decimal gigabytes, as disk sizes are usually stated)."""
    return f"{num_bytes / 1e9:.2f} GB"


def free_disk_bytes(path: Path) -> int:
    """Bytes free on the filesystem holding `path` (its nearest existing ancestor)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def available_memory_bytes() -> int:
    """Host memory available to a new process without swapping."""
    return int(psutil.virtual_memory().available)


def require_free_disk(path: Path, need: int, what: str) -> None:
    """EngineSetupError unless `need` bytes are free where `path` lives."""
    free = free_disk_bytes(path)
    if free < need:
        raise EngineSetupError(
            f"not enough free disk for {what}: {format_gb(need)} needed, {format_gb(free)} free",
            location=str(path),
            fix=f"free {format_gb(need - free)} there, or point SPECSELECT_HOME to a larger filesystem",
        )


def require_memory(need: int, what: str) -> None:
    """EngineSetupError unless `need` bytes of host memory are available now."""
    available = available_memory_bytes()
    if available < need:
        raise EngineSetupError(
            f"not enough memory for {what}: {format_gb(need)} needed, {format_gb(available)} available",
            location="host memory",
            fix="stop other large processes (a running vLLM server takes 5-16 GB) or use a larger machine",
        )
