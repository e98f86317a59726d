"""Peak memory of a serving engine during a scenario, sampled in a background thread.

On a GPU the number is NVML's used device memory (summed over the given devices); otherwise it is the
summed RSS of a process tree (the server and all its children, found afresh at every sample so workers
started later are counted). The source is recorded with the number, because the two are not comparable.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from types import ModuleType, TracebackType
from typing import Any, Literal

import psutil
from pydantic import BaseModel, ConfigDict

from specselect.errors import ConfigError, MissingDependencyError

__all__ = ["PeakMemory", "PeakMemorySampler", "process_tree_rss_bytes"]

_MB = 1024.0 * 1024.0


class PeakMemory(BaseModel):
    """The highest sampled memory use, in MiB, and where the number came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mb: float | None
    source: Literal["nvml", "process_tree_rss"]
    n_samples: int
    interval_s: float


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
            location="PeakMemorySampler(gpu_indices=...)",
            fix="pip install nvidia-ml-py",
        ) from exc


class PeakMemorySampler:
    """Context manager: samples memory every `interval_s` while the block runs; `.result` after exit.

    `root_pid`/`pids`: the processes whose trees are summed (CPU); `gpu_indices`: NVML devices to read
    instead (GPU). Samples are also taken at entry and exit, so a short block still yields a number.
    """

    def __init__(
        self,
        root_pid: int | None = None,
        *,
        pids: Sequence[int] = (),
        interval_s: float = 0.1,
        gpu_indices: Sequence[int] | None = None,
    ) -> None:
        self._pids = ([root_pid] if root_pid is not None else []) + list(pids)
        if not self._pids and gpu_indices is None:
            raise ConfigError(
                "nothing to sample", location="PeakMemorySampler", fix="give root_pid, pids or gpu_indices"
            )
        if interval_s <= 0:
            raise ConfigError(f"interval_s={interval_s}", location="PeakMemorySampler", fix="use interval_s > 0")
        self._interval = interval_s
        self._gpu = list(gpu_indices) if gpu_indices is not None else None
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._peak: int | None = None
        self._samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._result: PeakMemory | None = None

    @property
    def source(self) -> Literal["nvml", "process_tree_rss"]:
        """Where the number comes from."""
        return "nvml" if self._gpu is not None else "process_tree_rss"

    def _read_bytes(self) -> int | None:
        if self._gpu is None:
            return process_tree_rss_bytes(self._pids)
        return sum(int(self._nvml.nvmlDeviceGetMemoryInfo(h).used) for h in self._handles)

    def _sample(self) -> None:
        try:
            value = self._read_bytes()
        except Exception:  # a vanished device or process must not kill the sampler thread
            return
        if value is None:
            return
        with self._lock:
            self._samples += 1
            if self._peak is None or value > self._peak:
                self._peak = value

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def __enter__(self) -> PeakMemorySampler:
        if self._gpu is not None:
            self._nvml = _load_nvml()
            self._nvml.nvmlInit()
            self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in self._gpu]
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
        with self._lock:
            mb = None if self._peak is None else self._peak / _MB
            self._result = PeakMemory(mb=mb, source=self.source, n_samples=self._samples, interval_s=self._interval)

    @property
    def result(self) -> PeakMemory:
        """The peak seen so far (during the block) or in total (after it)."""
        if self._result is not None:
            return self._result
        with self._lock:
            mb = None if self._peak is None else self._peak / _MB
            return PeakMemory(mb=mb, source=self.source, n_samples=self._samples, interval_s=self._interval)
