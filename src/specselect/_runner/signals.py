"""SIGTERM (e.g. from a job scheduler or `kill`) and SIGINT end a run the way Ctrl-C does."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["sigterm_as_interrupt"]


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGINT take the Ctrl-C path (stop the server, keep a consistent manifest).

    A background job of a non-interactive shell inherits "ignore SIGINT"; for the run, SIGINT gets Python's
    default handler back, so `kill -INT` stops it cleanly as documented, and asyncio can install its own.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        # Hand over to whatever handles SIGINT right now: inside asyncio.run that is the runner's handler, which
        # cancels the main task; raising KeyboardInterrupt here instead would land in an arbitrary task (e.g.
        # aiohttp's body writer) and leave a "Task exception was never retrieved" traceback behind.
        on_sigint = signal.getsignal(signal.SIGINT)
        if callable(on_sigint):
            on_sigint(signal.SIGINT, frame)
            return
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    previous_int = signal.getsignal(signal.SIGINT)
    lifted = previous_int in (signal.SIG_IGN, signal.SIG_DFL)
    if lifted:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if lifted:
            signal.signal(signal.SIGINT, previous_int)
