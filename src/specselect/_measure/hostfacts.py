"""Facts about the machine a run happens on, for the preflight record."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from pathlib import Path

import psutil

import specselect
from specselect.records.host import HostInfo

__all__ = ["collect_host_info"]


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _nvidia_driver() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.stdout.strip().splitlines()
    return first[0].strip() if out.returncode == 0 and first else None


def _os_name(system: str) -> str:
    if system != "Linux":
        return system
    try:
        return f"Linux {platform.freedesktop_os_release().get('PRETTY_NAME', '')}".strip()
    except OSError:
        return system


def collect_host_info() -> HostInfo:
    """Read the host facts (fast: no engine import, one optional nvidia-smi call)."""
    uname = platform.uname()
    return HostInfo(
        tool_version=specselect.__version__,
        python_version=platform.python_version(),
        python_executable=sys.executable,
        os=_os_name(uname.system),
        kernel=uname.release,
        machine=uname.machine,
        cpu_model=_cpu_model(),
        logical_cpus=psutil.cpu_count(logical=True),
        physical_cpus=psutil.cpu_count(logical=False),
        memory_total_mb=round(psutil.virtual_memory().total / 2**20, 1),
        nvidia_driver=_nvidia_driver(),
        hostname=platform.node() or None,
    )
