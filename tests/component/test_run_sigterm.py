"""SIGTERM during a measured scenario takes asyncio's Ctrl-C path: the main task is cancelled, no task is left
holding a KeyboardInterrupt (which asyncio would later log as a traceback)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import threading

import pytest

from specselect._runner.signals import sigterm_as_interrupt


async def _busy_child(cancelled: list[str]) -> None:
    try:
        while True:
            total = 0
            for i in range(200_000):  # Python-level work: the signal handler runs inside this task's frame
                total += i
            await asyncio.sleep(0)
    except asyncio.CancelledError:
        cancelled.append("child")
        raise


async def _scenario(cancelled: list[str]) -> None:
    # Like aiohttp's body writer: a task nobody awaits while the main task waits elsewhere.
    child = asyncio.create_task(_busy_child(cancelled))
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
    await asyncio.sleep(30)
    child.cancel()


def test_sigterm_inside_asyncio_cancels_the_main_task(caplog: pytest.LogCaptureFixture) -> None:
    cancelled: list[str] = []
    with caplog.at_level(logging.ERROR, logger="asyncio"), sigterm_as_interrupt():
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(_scenario(cancelled))
        gc.collect()
    assert cancelled == ["child"]
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def _terminate_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):
        sum(range(1000))  # the handler runs at the next bytecode boundary


def test_sigterm_outside_asyncio_is_a_keyboard_interrupt() -> None:
    with sigterm_as_interrupt(), pytest.raises(KeyboardInterrupt):
        _terminate_self()


def test_previous_sigterm_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_an_inherited_ignore_of_sigint_is_lifted_for_the_run() -> None:
    # A background job of a non-interactive shell (e.g. `bash .ci/run &`) starts with SIGINT ignored.
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    cancelled: list[str] = []
    try:
        with sigterm_as_interrupt():
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            with pytest.raises(KeyboardInterrupt):
                asyncio.run(_scenario(cancelled))
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
    assert cancelled == ["child"]
