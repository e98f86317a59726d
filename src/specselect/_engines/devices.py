"""The host's NVIDIA devices and which of them a group's server may use (`CUDA_VISIBLE_DEVICES`).

Devices are read through NVML (`nvidia-ml-py`, the optional `gpu` extra) when it is installed, else through
`nvidia-smi`. Both list every GPU and every MIG instance with its own memory: a MIG instance's server can use
only the instance's memory, not the card's. `nvidia-smi` gives a MIG instance's memory only through its
profile name (`3g.40gb`), so NVML is preferred. Why no device was found is kept (`DeviceScan.problem`): a GPU
plan on a host without a usable driver must stop in preflight, not silently measure the CPU.

`CUDA_VISIBLE_DEVICES` is read as CUDA reads it: indices, `GPU-<uuid>` (a unique prefix is enough) or
`MIG-<uuid>`, comma-separated; an empty value hides every device; the first token that names nothing ends
the list. The value in force for a group is the candidate's `env`, else `[engine.env]`, else specselect's own
environment.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, NamedTuple

import psutil

from specselect._engines.base import Finding
from specselect._plan import Plan
from specselect.records.capabilities import DeviceInfo, EngineCapabilities
from specselect.records.capacity import DeviceLoad, ForeignProcess
from specselect.records.doctor import DeviceUsage, GpuDevice, GpuProcess

__all__ = [
    "VISIBLE_VAR",
    "DeviceScan",
    "DeviceWatch",
    "Visible",
    "device_findings",
    "group_budget_mb",
    "group_visible",
    "own_processes",
    "parse_nvidia_smi",
    "read_device_usage",
    "scan_devices",
    "visible_devices",
    "visible_setting",
]

VISIBLE_VAR = "CUDA_VISIBLE_DEVICES"
_NVIDIA_SMI_TIMEOUT_S = 10
_MIB = 1024 * 1024
_MIG_LINE = re.compile(r"^\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<n>\d+):\s+\(UUID:\s+(?P<uuid>MIG-[^)\s]+)\)")
_GPU_LINE = re.compile(r"^GPU\s+(?P<index>\d+):.*\(UUID:\s+(?P<uuid>GPU-[^)\s]+)\)")
_PROFILE_GB = re.compile(r"(?P<gb>\d+)gb$", re.IGNORECASE)

DeviceSource = Literal["nvml", "nvidia-smi", "none"]


class DeviceScan(NamedTuple):
    """Every GPU and MIG instance found, where they were read, and why none were when none were (or, when
    nvidia-smi found them, why NVML could not be used)."""

    devices: tuple[DeviceInfo, ...]
    source: DeviceSource
    problem: str | None = None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_devices(nvml: Any) -> tuple[DeviceInfo, ...]:
    found: list[DeviceInfo] = []
    for index in range(int(nvml.nvmlDeviceGetCount())):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // _MIB
        found.append(DeviceInfo(index=index, uuid=uuid, name=_text(nvml.nvmlDeviceGetName(handle)), memory_mb=memory))
        try:
            count = int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
        except nvml.NVMLError:
            continue  # no MIG support on this card
        for slot in range(count):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except nvml.NVMLError:
                continue  # an empty MIG slot
            found.append(
                DeviceInfo(
                    uuid=_text(nvml.nvmlDeviceGetUUID(mig)),
                    name=_text(nvml.nvmlDeviceGetName(mig)),
                    memory_mb=int(nvml.nvmlDeviceGetMemoryInfo(mig).total) // _MIB,
                    parent_uuid=uuid,
                )
            )
    return tuple(found)


def _scan_nvml() -> DeviceScan | None:
    """None when the NVML bindings are not installed (then nvidia-smi is asked)."""
    try:
        nvml: Any = importlib.import_module("pynvml")
    except ImportError:
        return None
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...: no usable driver
        return DeviceScan((), "nvml", f"NVML could not start: {exc}")
    try:
        return DeviceScan(_nvml_devices(nvml), "nvml")
    finally:
        nvml.nvmlShutdown()


def _processes(nvml: Any, handle: Any, names: Mapping[int, str]) -> tuple[GpuProcess, ...]:
    """Compute and graphics processes on a device, each once (a process may be both)."""
    found: dict[int, GpuProcess] = {}
    for reader in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            listed = getattr(nvml, reader)(handle)
        except (nvml.NVMLError, AttributeError):
            continue  # not supported on this device or by these bindings
        for proc in listed:
            used = getattr(proc, "usedGpuMemory", None)
            # The driver reports no figure (None, or NVML_VALUE_NOT_AVAILABLE) inside some containers.
            used_mb = used / _MIB if isinstance(used, int) and 0 <= used < (1 << 63) else None
            found.setdefault(
                int(proc.pid), GpuProcess(pid=int(proc.pid), name=names.get(int(proc.pid)), used_mb=used_mb)
            )
    return tuple(found.values())


def _usage(nvml: Any, device: DeviceInfo, names: Mapping[int, str]) -> GpuDevice:
    handle = (
        nvml.nvmlDeviceGetHandleByUUID(device.uuid) if device.uuid else nvml.nvmlDeviceGetHandleByIndex(device.index)
    )
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    return GpuDevice(
        name=device.name,
        uuid=device.uuid,
        index=device.index,
        parent_uuid=device.parent_uuid,
        total_mb=round(int(memory.total) / _MIB, 1),
        free_mb=round(int(memory.free) / _MIB, 1),
        processes=_processes(nvml, handle, names),
    )


def read_device_usage(process_names: Mapping[int, str] | None = None) -> DeviceUsage:
    """The driver, every GPU and MIG instance with its free memory and the processes on it (NVML); through
    nvidia-smi only the devices (no free memory, no processes); none, with the reason, without a driver.

    `process_names`: pid -> name, to name the processes NVML lists (it gives only pids)."""
    scan = scan_devices()
    if scan.source != "nvml" or not scan.devices:
        plain = tuple(
            GpuDevice(name=d.name, uuid=d.uuid, index=d.index, parent_uuid=d.parent_uuid, total_mb=d.memory_mb)
            for d in scan.devices
        )
        return DeviceUsage(devices=plain, source=scan.source, problem=scan.problem)
    nvml: Any = importlib.import_module("pynvml")
    nvml.nvmlInit()
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        devices = tuple(_usage(nvml, d, process_names or {}) for d in scan.devices)
    except nvml.NVMLError as exc:
        return DeviceUsage(source="nvml", problem=f"NVML failed while reading the devices: {exc}")
    finally:
        nvml.nvmlShutdown()
    return DeviceUsage(driver=driver, devices=devices, source="nvml")


def parse_nvidia_smi(query: str, listing: str) -> tuple[DeviceInfo, ...]:
    """Devices from `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits` and
    from `nvidia-smi -L` (which alone names MIG instances; their memory comes from the profile name)."""
    gpus: list[DeviceInfo] = []
    for line in query.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[0].isdigit() and parts[3].isdigit():
            gpus.append(DeviceInfo(index=int(parts[0]), uuid=parts[1], name=parts[2], memory_mb=int(parts[3])))
    found = list(gpus)
    parent: DeviceInfo | None = None
    for line in listing.splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu:
            parent = next((g for g in gpus if g.uuid == gpu["uuid"]), None)
            continue
        mig = _MIG_LINE.match(line)
        if mig and parent is not None:
            size = _PROFILE_GB.search(mig["profile"])
            memory = int(size["gb"]) * 1000 if size else parent.memory_mb
            name = f"{parent.name} MIG {mig['profile']}"
            found.append(DeviceInfo(uuid=mig["uuid"], name=name, memory_mb=memory, parent_uuid=parent.uuid))
    return tuple(found)


def _run_smi(smi: str, *args: str) -> subprocess.CompletedProcess[str] | str:
    try:
        proc = subprocess.run([smi, *args], capture_output=True, text=True, timeout=_NVIDIA_SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi did not run: {exc}"
    if proc.returncode != 0:
        said = (proc.stdout + proc.stderr).strip().splitlines()
        return f"nvidia-smi failed (exit {proc.returncode}): {said[0] if said else 'no output'}"
    return proc


def _scan_nvidia_smi() -> DeviceScan:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return DeviceScan((), "none", "nvidia-smi not found")
    query = _run_smi(smi, "--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits")
    if isinstance(query, str):
        return DeviceScan((), "nvidia-smi", query)
    listing = _run_smi(smi, "-L")
    devices = parse_nvidia_smi(query.stdout, listing.stdout if not isinstance(listing, str) else "")
    return DeviceScan(devices, "nvidia-smi", None if devices else "nvidia-smi listed no GPU")


def scan_devices() -> DeviceScan:
    """Every NVIDIA GPU and MIG instance of the host: NVML when installed and working, else nvidia-smi."""
    scan = _scan_nvml()
    if scan is not None and scan.problem is None:
        return scan
    smi = _scan_nvidia_smi()
    nvml = scan.problem if scan is not None else "the NVML bindings (nvidia-ml-py) are not installed"
    if smi.devices:  # found, but their memory cannot be sampled: say why NVML is not used
        return DeviceScan(smi.devices, smi.source, nvml)
    return DeviceScan((), scan.source if scan is not None else smi.source, f"{nvml}; {smi.problem}")


class Visible(NamedTuple):
    """The devices a `CUDA_VISIBLE_DEVICES` value leaves, and the tokens that named no device."""

    devices: tuple[DeviceInfo, ...]
    unknown: tuple[str, ...] = ()


def _match(token: str, devices: Sequence[DeviceInfo]) -> DeviceInfo | None:
    if token.isdigit():
        return next((d for d in devices if d.index == int(token)), None)
    if token.upper().startswith(("GPU-", "MIG-")):
        hits = [d for d in devices if d.uuid is not None and d.uuid.lower().startswith(token.lower())]
        return hits[0] if len(hits) == 1 else None
    return None


def visible_devices(devices: Sequence[DeviceInfo], setting: str | None) -> Visible:
    """The devices `setting` (a `CUDA_VISIBLE_DEVICES` value; None = unset: every whole GPU) makes visible."""
    if setting is None:
        return Visible(tuple(d for d in devices if d.parent_uuid is None))
    chosen: list[DeviceInfo] = []
    tokens = [t.strip() for t in setting.split(",") if t.strip()]
    for position, token in enumerate(tokens):
        device = _match(token, devices)
        if device is None:
            return Visible(tuple(chosen), tuple(tokens[position:]))  # CUDA stops at the first unknown token
        if device not in chosen:
            chosen.append(device)
    return Visible(tuple(chosen))


def visible_setting(*envs: Mapping[str, str]) -> str | None:
    """The `CUDA_VISIBLE_DEVICES` in force: the last of `envs` that sets it, else specselect's environment."""
    for env in reversed(envs):
        if VISIBLE_VAR in env:
            return env[VISIBLE_VAR]
    return os.environ.get(VISIBLE_VAR)


def group_visible(caps: EngineCapabilities, candidate_env: Mapping[str, str]) -> Visible:
    """The devices one group's server uses: the engine's (`caps.devices`) unless the candidate's own `env` sets
    CUDA_VISIBLE_DEVICES; none when the engine runs on the CPU."""
    if caps.on_cpu:
        return Visible(())
    if VISIBLE_VAR not in candidate_env:
        return Visible(caps.devices)
    return visible_devices(caps.host_devices, candidate_env[VISIBLE_VAR])


def group_budget_mb(caps: EngineCapabilities, candidate_env: Mapping[str, str]) -> int:
    """The memory one group's server may use on one device: the smallest device it uses (a MIG instance's own
    memory, not its card's), else the engine's budget (the CPU's, or no device matched)."""
    return min((d.memory_mb for d in group_visible(caps, candidate_env).devices), default=caps.memory_budget_mb)


def _asks_for_gpus(setting: str | None) -> bool:
    return setting is not None and any(t.strip() and t.strip() != "-1" for t in setting.split(","))


def _settings(plan: Plan) -> list[tuple[str, str]]:
    """(where, value) of every CUDA_VISIBLE_DEVICES the plan writes."""
    found = [("[engine.env]", plan.engine.env[VISIBLE_VAR])] if VISIBLE_VAR in plan.engine.env else []
    found.extend((f"candidates.{c.name}.env", c.env[VISIBLE_VAR]) for c in plan.groups if VISIBLE_VAR in c.env)
    return found


def device_findings(plan: Plan, caps: EngineCapabilities) -> list[Finding]:
    """Device findings: errors stop a run before anything starts (a plan that asks for GPUs on a host where none
    answered, a device name that matches no device, GPUs whose memory NVML cannot sample); a GPU build of the
    engine on a host without GPUs is a warning (its servers fail at start-up or run on the CPU)."""
    found: list[Finding] = []
    for where, value in _settings(plan):
        if not _asks_for_gpus(value):
            continue
        if caps.device_source == "not_queried":
            found.append(
                ("warning", "cuda_devices_ignored", f"{VISIBLE_VAR}={value} in {where}: {caps.kind} is a CPU build")
            )
        elif not caps.host_devices:
            found.append(
                (
                    "error",
                    "gpu_requested_without_driver",
                    f"{VISIBLE_VAR}={value} in {where} asks for GPUs, but {caps.device_problem or 'no GPU was found'}:"
                    " install the NVIDIA driver (nvidia-smi must work) or remove it to measure on the CPU",
                )
            )
        elif unknown := visible_devices(caps.host_devices, value).unknown:
            names = ", ".join(d.uuid or str(d.index) for d in caps.host_devices)
            found.append(
                (
                    "error",
                    "cuda_device_unknown",
                    f"{VISIBLE_VAR}={value} in {where}: {unknown[0]!r} names no device of this host (it has {names})",
                )
            )
    if caps.device_source != "not_queried" and not caps.host_devices and not found:
        found.append(
            (
                "warning",
                "gpu_engine_without_gpu",
                f"{caps.kind} {caps.engine_version} is not a CPU build, but {caps.device_problem or 'no GPU was found'}"
                ": its servers run on the CPU (if at all); install the NVIDIA driver for GPU results",
            )
        )
    if caps.device_kind == "cuda" and caps.device_source != "nvml":
        found.append(
            (
                "error",
                "nvml_unusable",
                f"GPU memory is measured per device through NVML, but {caps.device_problem or 'NVML is not used'}: "
                "pip install 'specselect[gpu]' (nvidia-ml-py) where the NVIDIA driver works",
            )
        )
    return found


def own_processes(root_pid: int | None) -> set[int]:
    """specselect's own process and the server's process tree (what may use a launch's devices)."""
    pids = {os.getpid()}
    if root_pid is None:
        return pids
    pids.add(root_pid)
    with contextlib.suppress(psutil.Error):  # the server is gone; the scenario's own checks say so
        pids.update(child.pid for child in psutil.Process(root_pid).children(recursive=True))
    return pids


def _process_name(pid: int) -> str | None:
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return None


class DeviceWatch:
    """What a launch's devices run besides its server: each call reads the processes and utilisation of every
    device through NVML; `result` holds what was seen. A context manager (NVML open while it runs).

    A pid NVML lists that is neither in `own()` nor a process of this host's pid namespace cannot be told apart
    (a container without the host's pids sees other numbers than NVML's): it is not called foreign, and
    `problem` says so.
    """

    def __init__(self, devices: Sequence[str], own: Callable[[], set[int]]) -> None:
        self._devices = tuple(devices)
        self._own = own
        self._nvml: Any = None
        self._handles: dict[str, Any] = {}
        self._foreign: dict[tuple[int, str], ForeignProcess] = {}
        self._utilization: float | None = None
        self._samples = 0
        self._problem: str | None = None

    def __enter__(self) -> DeviceWatch:
        try:
            self._nvml = importlib.import_module("pynvml")
            self._nvml.nvmlInit()
            for device in self._devices:
                by_index = device.isdigit()
                open_ = self._nvml.nvmlDeviceGetHandleByIndex if by_index else self._nvml.nvmlDeviceGetHandleByUUID
                self._handles[device] = open_(int(device) if by_index else device)
        except Exception as exc:  # no bindings, no driver, a device gone: the launch is then not vouched for
            self._problem = f"NVML could not read the devices: {exc}"
            self._handles = {}
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._nvml is not None and self._problem is None:
            self._nvml.nvmlShutdown()

    def _utilization_of(self, handle: Any) -> float | None:
        try:
            return float(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except (self._nvml.NVMLError, AttributeError):
            return None  # MIG instances report none

    def __call__(self) -> None:
        if not self._handles:
            return
        own = self._own()
        for device, handle in self._handles.items():
            for proc in _processes(self._nvml, handle, {}):
                if proc.pid in own:
                    continue
                if not psutil.pid_exists(proc.pid):
                    self._problem = (
                        f"NVML lists pid {proc.pid} on {device}, which this host's processes do not include "
                        "(another pid namespace): other processes cannot be told from the server's"
                    )
                    continue
                key = (proc.pid, device)
                if key not in self._foreign:
                    name = _process_name(proc.pid)
                    self._foreign[key] = ForeignProcess(pid=proc.pid, device=device, name=name, used_mb=proc.used_mb)
            used = self._utilization_of(handle)
            if used is not None:
                self._utilization = used if self._utilization is None else max(self._utilization, used)
        self._samples += 1

    @property
    def result(self) -> DeviceLoad:
        """What the devices ran besides the server so far."""
        return DeviceLoad(
            devices=self._devices,
            samples=self._samples,
            foreign=tuple(self._foreign.values()),
            max_utilization_pct=self._utilization,
            problem=self._problem,
        )
