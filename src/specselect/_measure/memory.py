"""Peak memory of a serving engine during a scenario, sampled in a background thread.

On a GPU the number is NVML's used memory of each device the server uses (a GPU or a MIG instance, opened by
UUID so enumeration order does not matter); the figure compared with the per-device budget is the largest
device's peak. The server's process tree RSS (the server and all its children, found afresh at every sample so
workers started later are counted) is sampled as well and kept as its own figure: it is the compared figure
only on the CPU. The source is recorded with the number, because the two are not comparable. NVML's used
memory counts every process on the device, not only the server.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from types import ModuleType, TracebackType
from typing import Any, Literal

import psutil

from specselect.errors import ConfigError, MissingDependencyError
from specselect.records.memory import DevicePeak, PeakMemory

__all__ = ["PeakMemorySampler", "process_tree_rss_bytes"]

_MB = 1024.0 * 1024.0


def process_tree_rss_bytes(pids: Sequence[int]) -> int | None:
    """Summed RSS of the given processes and their descendants (each once); None when none is alive."""
    seen: set[int] = set()
    total = 0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for proc in procs:
            if proc.pid in seen:
                continue
            seen.add(proc.pid)
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
    return total if seen else None


def _load_nvml() -> ModuleType:
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        raise MissingDependencyError(
            "GPU memory sampling needs NVML bindings",
            location="PeakMemorySampler(gpu_devices=...)",
            fix="pip install 'specselect[gpu]' (nvidia-ml-py)",
        ) from exc


class PeakMemorySampler:
    """Context manager: samples memory every `interval_s` while the block runs; `.result` after exit.

    `root_pid`/`pids`: the processes whose trees are summed; `gpu_devices`: NVML devices (UUIDs or indices)
    whose used memory is the compared figure instead. Samples are also taken at entry and exit, so a short
    block still yields a number.
    """

    def __init__(
        self,
        root_pid: int | None = None,
        *,
        pids: Sequence[int] = (),
        interval_s: float = 0.1,
        gpu_devices: Sequence[int | str] | None = None,
    ) -> None:
        self._pids = ([root_pid] if root_pid is not None else []) + list(pids)
        if not self._pids and not gpu_devices:
            raise ConfigError(
                "nothing to sample", location="PeakMemorySampler", fix="give root_pid, pids or gpu_devices"
            )
        if interval_s <= 0:
            raise ConfigError(f"interval_s={interval_s}", location="PeakMemorySampler", fix="use interval_s > 0")
        self._interval = interval_s
        self._gpu = [str(d) for d in gpu_devices] if gpu_devices else None
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._peak: int | None = None
        self._device_peaks: dict[str, int] = {}
        self._rss_peak: int | None = None
        self._samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._result: PeakMemory | None = None

    @property
    def source(self) -> Literal["nvml", "process_tree_rss"]:
        """Where the number comes from."""
        return "nvml" if self._gpu is not None else "process_tree_rss"

    def _read_devices(self) -> dict[str, int]:
        if self._gpu is None:
            return {}
        return {
            d: int(self._nvml.nvmlDeviceGetMemoryInfo(h).used) for d, h in zip(self._gpu, self._handles, strict=True)
        }

    def _sample(self) -> None:
        try:  # a vanished device or process must not kill the sampler thread
            devices = self._read_devices()
            rss = process_tree_rss_bytes(self._pids) if self._pids else None
        except Exception:
            return
        value = max(devices.values()) if devices else rss
        if value is None:
            return
        with self._lock:
            self._samples += 1
            self._peak = value if self._peak is None else max(self._peak, value)
            if rss is not None:
                self._rss_peak = rss if self._rss_peak is None else max(self._rss_peak, rss)
            for device, used in devices.items():
                self._device_peaks[device] = max(self._device_peaks.get(device, 0), used)

    def _snapshot(self) -> PeakMemory:
        with self._lock:
            return PeakMemory(
                mb=None if self._peak is None else self._peak / _MB,
                source=self.source,
                n_samples=self._samples,
                interval_s=self._interval,
                devices=tuple(DevicePeak(device=d, peak_mb=v / _MB) for d, v in self._device_peaks.items()),
                host_rss_mb=None if self._rss_peak is None else self._rss_peak / _MB,
            )

    def _open(self, device: str) -> Any:
        if device.isdigit():
            return self._nvml.nvmlDeviceGetHandleByIndex(int(device))
        return self._nvml.nvmlDeviceGetHandleByUUID(device)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def __enter__(self) -> PeakMemorySampler:
        if self._gpu is not None:
            self._nvml = _load_nvml()
            self._nvml.nvmlInit()
            self._handles = [self._open(d) for d in self._gpu]
        self._sample()
        self._thread = threading.Thread(target=self._run, name="specselect-peak-memory", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        if self._nvml is not None:
            shutdown: Callable[[], None] = self._nvml.nvmlShutdown
            shutdown()
        self._result = self._snapshot()

    @property
    def result(self) -> PeakMemory:
        """The peak seen so far (during the block) or in total (after it)."""
        return self._result if self._result is not None else self._snapshot()
