"""Progress reporting, injected into the runner: rich in a terminal, plain lines in CI, silent for --json."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Protocol, TextIO

if TYPE_CHECKING:
    from rich.progress import TaskID

__all__ = ["PlainProgress", "Progress", "RichProgress", "SilentProgress", "make_progress"]


class Progress(Protocol):
    """What the runner reports while it works; implementations decide how (or whether) to show it."""

    def stage(self, text: str) -> None:
        """A new stage of the run (preflight, admission, a group...)."""

    def info(self, text: str) -> None:
        """A detail line inside the current stage."""

    def warn(self, text: str) -> None:
        """Something the user should read, that does not stop the run."""

    def requests(self, scenario: str, done: int, total: int) -> None:
        """Request progress inside a scenario."""


class SilentProgress:
    """Reports nothing (library use, `--json`)."""

    def stage(self, text: str) -> None:
        """Ignore."""

    def info(self, text: str) -> None:
        """Ignore."""

    def warn(self, text: str) -> None:
        """Ignore."""

    def requests(self, scenario: str, done: int, total: int) -> None:
        """Ignore."""


class PlainProgress:
    """Timestamped plain lines, for CI logs and pipes."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._t0 = time.monotonic()
        self._last_pct: dict[str, int] = {}

    def _emit(self, prefix: str, text: str) -> None:
        elapsed = time.monotonic() - self._t0
        print(f"[{elapsed:7.1f}s] {prefix}{text}", file=self._stream, flush=True)

    def stage(self, text: str) -> None:
        """Print a stage header."""
        self._emit("== ", text)

    def info(self, text: str) -> None:
        """Print a detail line."""
        self._emit("   ", text)

    def warn(self, text: str) -> None:
        """Print a warning line."""
        self._emit("!! ", text)

    def requests(self, scenario: str, done: int, total: int) -> None:
        """Print at most every 25% of a scenario's requests."""
        pct = 100 * done // max(total, 1)
        step = pct // 25
        if done == total or step > self._last_pct.get(scenario, -1):
            self._last_pct[scenario] = step
            self._emit("   ", f"{scenario}: {done}/{total} requests")


class RichProgress:
    """A rich console with a live request bar per scenario."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._console = Console(stderr=True)
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self._console,
            transient=True,
        )
        self._tasks: dict[str, TaskID] = {}
        self._t0 = time.monotonic()

    def _stamp(self) -> str:
        return f"[dim]{time.monotonic() - self._t0:6.1f}s[/dim]"

    def stage(self, text: str) -> None:
        """Print a stage header."""
        self._console.print(f"{self._stamp()} [bold cyan]{text}[/bold cyan]")

    def info(self, text: str) -> None:
        """Print a detail line."""
        self._console.print(f"{self._stamp()}   {text}", highlight=False)

    def warn(self, text: str) -> None:
        """Print a warning line."""
        self._console.print(f"{self._stamp()} [bold yellow]warning:[/bold yellow] {text}", highlight=False)

    def requests(self, scenario: str, done: int, total: int) -> None:
        """Advance (or create) the scenario's progress bar."""
        if scenario not in self._tasks:
            if not self._tasks:
                self._bar.start()
            self._tasks[scenario] = self._bar.add_task(scenario, total=total)
        self._bar.update(self._tasks[scenario], completed=done, total=total)
        if done >= total:
            self._bar.remove_task(self._tasks.pop(scenario))
            if not self._tasks:
                self._bar.stop()


def make_progress(*, quiet: bool = False, json_output: bool = False) -> Progress:
    """Pick the right reporter: silent for --json/--quiet, rich on a terminal, plain otherwise (CI)."""
    if quiet or json_output:
        return SilentProgress()
    if sys.stderr.isatty():
        return RichProgress()
    return PlainProgress()
