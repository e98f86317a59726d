"""Stand-ins for what only a GPU host has: a fake `pynvml` module and a fake `nvidia-smi` script.

This machine has no GPU, so every GPU path of specselect is tested against these (the README's engine table says
which parts ran only against them). The fake NVML module answers the calls specselect makes with the types the
real `nvidia-ml-py` returns (handles, memory structs with total/used/free in bytes, NVMLError); the fake
`nvidia-smi` prints the two outputs specselect reads, in the format of the real tool's
`--query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits` and `-L` (recorded from its
documentation's examples: MIG instances are listed under their GPU with their profile and UUID).
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FakeGpu", "FakeMig", "FakeProcess", "NVMLError", "fake_nvidia_smi", "fake_nvml"]

_MIB = 1024 * 1024


@dataclass(frozen=True)
class FakeProcess:
    """A process on a device, as NVML lists it: its pid and its device memory (None: the driver does not say)."""

    pid: int
    used_mb: int | None = None


@dataclass
class FakeMig:
    """A MIG instance: its own memory, and the used memory it reports at each sample."""

    uuid: str
    profile: str
    total_mb: int
    used_mb: Sequence[int] = (0,)
    processes: Sequence[FakeProcess] = ()


@dataclass
class FakeGpu:
    """A GPU: name, UUID, total memory, the used memory it reports sample after sample (the last repeats)."""

    uuid: str
    name: str = "NVIDIA A100-SXM4-80GB"
    total_mb: int = 81920
    used_mb: Sequence[int] = (0,)
    migs: Sequence[FakeMig] = ()
    reads: list[str] = field(default_factory=list)
    processes: Sequence[FakeProcess] = ()
    """The compute processes NVML lists on the card (a test may replace them between reads)."""
    utilization_pct: int | None = None
    """What `nvmlDeviceGetUtilizationRates(...).gpu` answers; None: "Not Supported", as for MIG instances."""


class _Memory:
    def __init__(self, total_mb: int, used_mb: int) -> None:
        self.total = total_mb * _MIB
        self.used = used_mb * _MIB
        self.free = self.total - self.used


def _series(values: Sequence[int]) -> Iterator[int]:
    return itertools.chain(values, itertools.repeat(values[-1]))


class NVMLError(Exception):
    """The real bindings' error base class."""


class _ProcessInfo:
    """The real bindings' `c_nvmlProcessInfo_t`: `pid` and `usedGpuMemory` in bytes (None when not available)."""

    def __init__(self, process: FakeProcess) -> None:
        self.pid = process.pid
        self.usedGpuMemory = None if process.used_mb is None else process.used_mb * _MIB


class _Utilization:
    """The real bindings' `c_nvmlUtilization_t`: percentages of time the GPU and its memory were busy."""

    def __init__(self, gpu: int) -> None:
        self.gpu = gpu
        self.memory = 0


class _Nvml:
    """The state behind a fake module: a handle is the device's UUID, as the real handles stand for one."""

    def __init__(self, gpus: Sequence[FakeGpu], init_error: str | None) -> None:
        self.gpus = list(gpus)
        self.init_error = init_error
        self.calls: list[str] = []
        self.devices: dict[str, tuple[FakeGpu | FakeMig, Iterator[int]]] = {}
        for gpu in gpus:
            self.devices[gpu.uuid] = (gpu, _series(gpu.used_mb))
            self.devices.update({m.uuid: (m, _series(m.used_mb)) for m in gpu.migs})

    def init(self) -> None:
        self.calls.append("init")
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def shutdown(self) -> None:
        self.calls.append("shutdown")

    def memory(self, handle: str) -> _Memory:
        device, used = self.devices[handle]
        return _Memory(device.total_mb, next(used))

    def _gpu(self, handle: str) -> FakeGpu:
        device = self.devices[handle][0]
        if not isinstance(device, FakeGpu) or not device.migs:
            raise NVMLError("Not Supported")
        return device

    def max_migs(self, handle: str) -> int:
        return len(self._gpu(handle).migs)

    def mig_handle(self, handle: str, slot: int) -> str:
        migs = self._gpu(handle).migs
        if slot >= len(migs):
            raise NVMLError("Not Found")
        return migs[slot].uuid

    def processes(self, handle: str) -> list[_ProcessInfo]:
        return [_ProcessInfo(p) for p in self.devices[handle][0].processes]

    def utilization(self, handle: str) -> _Utilization:
        device = self.devices[handle][0]
        used = device.utilization_pct if isinstance(device, FakeGpu) else None
        if used is None:
            raise NVMLError("Not Supported")
        return _Utilization(used)

    def by_uuid(self, uuid: str | bytes) -> str:
        key = uuid.decode() if isinstance(uuid, bytes) else uuid
        if key not in self.devices:
            raise NVMLError("Not Found")
        return key

    def name(self, handle: str) -> str:
        device = self.devices[handle][0]
        return device.name if isinstance(device, FakeGpu) else f"MIG {device.profile}"


def fake_nvml(gpus: Sequence[FakeGpu], *, init_error: str | None = None, driver: str = "550.54.15") -> types.ModuleType:
    """A `pynvml` module over `gpus`; `init_error` makes nvmlInit fail as on a host whose driver is not loaded.

    `module.calls` lists the init and shutdown calls."""
    state = _Nvml(gpus, init_error)
    module = types.ModuleType("pynvml")
    functions = {
        "NVMLError": NVMLError,
        "calls": state.calls,
        "nvmlInit": state.init,
        "nvmlShutdown": state.shutdown,
        "nvmlDeviceGetCount": lambda: len(state.gpus),
        "nvmlDeviceGetHandleByIndex": lambda i: state.gpus[i].uuid,
        "nvmlDeviceGetHandleByUUID": state.by_uuid,
        "nvmlDeviceGetUUID": lambda handle: handle,
        "nvmlDeviceGetName": state.name,
        "nvmlDeviceGetMemoryInfo": state.memory,
        "nvmlDeviceGetMaxMigDeviceCount": state.max_migs,
        "nvmlDeviceGetMigDeviceHandleByIndex": state.mig_handle,
        "nvmlSystemGetDriverVersion": lambda: driver,
        "nvmlDeviceGetComputeRunningProcesses": state.processes,
        "nvmlDeviceGetGraphicsRunningProcesses": lambda handle: [],
        "nvmlDeviceGetUtilizationRates": state.utilization,
    }
    for name, value in functions.items():
        setattr(module, name, value)
    return module


def _quoted(lines: Sequence[str]) -> str:
    return " ".join("'" + line.replace("'", "'\\''") + "'" for line in lines)


def fake_nvidia_smi(bin_dir: Path, gpus: Sequence[FakeGpu], *, fail: str | None = None) -> Path:
    """An executable `nvidia-smi` in `bin_dir` printing `gpus` as the real tool does (or failing with `fail`)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    query = [f"{i}, {g.uuid}, {g.name}, {g.total_mb}" for i, g in enumerate(gpus)]
    listing = []
    for i, gpu in enumerate(gpus):
        listing.append(f"GPU {i}: {gpu.name} (UUID: {gpu.uuid})")
        listing.extend(f"  MIG {m.profile:<12} Device {n:>2}: (UUID: {m.uuid})" for n, m in enumerate(gpu.migs))
    if fail is not None:
        body = f"echo '{fail}'\nexit 9\n"
    else:  # shell builtins only: tests may leave nothing else on PATH
        body = (
            'case "$1" in\n'
            f"  -L) printf '%s\\n' {_quoted(listing)} ;;\n"
            f"  --query-gpu=index,uuid,name,memory.total) printf '%s\\n' {_quoted(query)} ;;\n"
            '  *) echo "unexpected arguments: $*" >&2; exit 2 ;;\n'
            "esac\n"
        )
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + body)
    smi.chmod(0o755)
    return smi
