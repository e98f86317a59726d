"""Calling a reader while a block runs: at entry, every interval, and at exit (peaks of a gauge, devices)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

__all__ = ["PeakGauge", "Poller"]


class Poller:
    """Context manager: calls `sample` at entry, every `interval_s` from a daemon thread, and at exit.

    A sample that raises is skipped (counted in `failed`): a server or device that stops answering for a moment
    must not end the measurement it only watches.
    """

    def __init__(self, sample: Callable[[], None], *, interval_s: float, name: str) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self._sample = sample
        self._interval = interval_s
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failed = 0

    def _once(self) -> None:
        try:
            self._sample()
        except Exception:
            self.failed += 1

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._once()

    def __enter__(self) -> Poller:
        self._once()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._once()


class PeakGauge:
    """The highest value a reader returned (None readings are not values), and how many values it saw."""

    def __init__(self, read: Callable[[], float | None]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self.peak: float | None = None
        self.samples = 0

    def __call__(self) -> None:
        value = self._read()
        if value is None:
            return
        with self._lock:
            self.samples += 1
            self.peak = value if self.peak is None else max(self.peak, value)
