"""Running code in another Python environment (an engine's venv) and installing packages into it.

specselect itself never imports torch, transformers or an engine. Everything that needs them runs as a
subprocess with that environment's python: a helper script (`script_command`) or pip (`run_logged`).
Builds that several processes may start at once are serialised by `file_lock`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

from specselect.errors import EngineSetupError

__all__ = ["file_lock", "log_tail", "run_logged", "script_command"]

_LOG_TAIL_LINES = 8

# `python FILE` would put FILE's directory (inside specselect) first on sys.path, where our module names
# could shadow the engine's; `-c` puts only the working directory there instead.
_RUN_SCRIPT = "import runpy, sys; path = sys.argv.pop(1); runpy.run_path(path, run_name='__main__')"


def script_command(python: Path, script: Path, *args: str) -> list[str]:
    """The command that runs a stand-alone helper script with `python` (run it from a neutral cwd)."""
    return [str(python), "-c", _RUN_SCRIPT, str(script), *args]


@contextlib.contextmanager
def file_lock(lock_path: Path) -> Iterator[None]:
    """An exclusive advisory lock on `lock_path` across processes (released by the OS even on a crash)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def log_tail(log_path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The last non-empty lines of a log file joined with ` | ` ("" when it cannot be read)."""
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:] if line.strip())


def run_logged(
    cmd: list[str], log_path: Path, *, what: str, fix: str, env: Mapping[str, str | None] | None = None
) -> None:
    """Run `cmd`, appending its output to `log_path`; raise EngineSetupError with the log tail on failure.

    `env` overrides variables of the child's environment (None removes one)."""
    child = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONUNBUFFERED="1")
    for name, value in (env or {}).items():
        if value is None:
            child.pop(name, None)
        else:
            child[name] = value
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=child, check=False).returncode
        except OSError as exc:
            raise EngineSetupError(f"{what} could not start: {exc}", location=str(log_path), fix=fix) from exc
    if rc != 0:
        raise EngineSetupError(
            f"{what} failed (exit {rc}); log tail: {log_tail(log_path)}", location=str(log_path), fix=fix
        )
