"""The unit tier's guard refuses what belongs in tests/component: a process, a sleep, a thread."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest


def test_starting_a_process_fails_the_test_and_names_the_tier_it_belongs_in() -> None:
    with pytest.raises(AssertionError, match="starts a process: move it to tests/component"):
        subprocess.run(["true"], check=False)


def test_sleeping_fails_the_test() -> None:
    with pytest.raises(AssertionError, match="sleeps"):
        time.sleep(0.01)


def test_starting_a_thread_fails_the_test() -> None:
    with pytest.raises(AssertionError, match="starts a thread"):
        threading.Thread(target=print).start()


def test_a_zero_length_sleep_is_refused_too_since_it_still_yields_the_cpu_to_a_clock() -> None:
    with pytest.raises(AssertionError):
        time.sleep(0)
