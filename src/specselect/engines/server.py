"""A server process's whole life as a context manager (engine-agnostic; vLLM and SGLang both use it).

The process runs in its own process group with its output in a log file; readiness is polled on a health
path and notices an early exit; teardown signals the whole group (TERM, then KILL) even on Ctrl-C and then
confirms that the port is free and no process of the group is left.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

from specselect.artifacts.io import atomic_write_bytes
from specselect.engines.base import ReleaseCheck, RunningServer
from specselect.engines.localnet import local_request, pick_free_port, port_is_free, url_host
from specselect.engines.redaction import redact_argv, redact_text, secret_values
from specselect.errors import ArtifactError, ServerCrashedError, ServerStartError, ServerTimeoutError

__all__ = ["ServerProcess", "cache_env", "read_log_tail"]

_PORT_TAKEN = re.compile(r"address already in use|errno 98|eaddrinuse", re.IGNORECASE)


MAX_TMPDIR_CHARS = 60
"""Engines put UNIX sockets in TMPDIR (vLLM: `ipc://$TMPDIR/<uuid>`); sun_path holds at most 107 bytes."""


def cache_env(run_dir: Path, tmp_dir: Path | None = None) -> dict[str, str]:
    """Cache, temp and offline variables that keep a server's files under `run_dir` and off the network.

    `tmp_dir` replaces `run_dir/tmp` as TMPDIR (see `MAX_TMPDIR_CHARS`).
    """
    cache = run_dir / "cache"
    tmp = tmp_dir if tmp_dir is not None else run_dir / "tmp"
    for path in (cache, tmp):
        path.mkdir(parents=True, exist_ok=True)
    return {
        "VLLM_CACHE_ROOT": str(cache / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "torchinductor"),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "XDG_CACHE_HOME": str(cache / "xdg"),
        "HF_HOME": str(cache / "huggingface"),
        "TMPDIR": str(tmp),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "DO_NOT_TRACK": "1",
        "PYTHONUNBUFFERED": "1",
    }


def read_log_tail(path: Path, lines: int = 40, *, start: int = 0, secrets: Iterable[str] = ()) -> str:
    """The last `lines` lines of a log (from byte offset `start`), redacted."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(start, size - 256 * 1024))
            data = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return redact_text("\n".join(data.splitlines()[-lines:]), secrets)


class _PortTakenError(Exception):
    """The server lost the race for an automatically chosen port; try another one."""


class ServerProcess(AbstractContextManager[RunningServer]):
    """Start `argv_for_port(port)` in its own process group; yield a RunningServer once it is healthy."""

    def __init__(
        self,
        argv_for_port: Callable[[int], Sequence[str]],
        *,
        log_path: Path,
        served_model: str,
        run_dir: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        env: Mapping[str, str] | None = None,
        spec_config: dict[str, Any] | None = None,
        api_key_env: str | None = None,
        name: str = "server",
        startup_timeout_s: float = 600.0,
        health_path: str = "/health",
        poll_interval_s: float = 0.5,
        term_grace_s: float = 30.0,
        port_attempts: int = 3,
        port_picker: Callable[[str], int] = pick_free_port,
    ) -> None:
        self._argv_for_port = argv_for_port
        self._log_path = Path(log_path)
        self._served_model = served_model
        self._run_dir = run_dir
        self._host = host
        self._port = port
        self._extra_env = dict(env or {})
        self._spec_config = spec_config
        self._api_key_env = api_key_env
        self._name = name
        self._startup_timeout_s = startup_timeout_s
        self._health_path = health_path
        self._poll_interval_s = poll_interval_s
        self._term_grace_s = term_grace_s
        self._port_attempts = max(1, port_attempts)
        self._port_picker = port_picker
        self._proc: subprocess.Popen[bytes] | None = None
        self._pgid: int | None = None
        self._bound_port: int | None = None
        self._log_offset = 0
        self._tracked: dict[int, psutil.Process] = {}
        self._secrets: tuple[str, ...] = ()
        self.server: RunningServer | None = None
        self.release_check: ReleaseCheck | None = None
        self._short_tmp: Path | None = None

    # -- life cycle -------------------------------------------------------------------------------------------

    def __enter__(self) -> RunningServer:
        env = self._child_env()
        self._secrets = secret_values({**os.environ, **env})
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_path.write_bytes(b"")
        try:
            for attempt in range(1, self._port_attempts + 1):
                port = self._choose_port()
                argv = [str(a) for a in self._argv_for_port(port)]
                started = time.monotonic()
                self._spawn(argv, env, port, attempt)
                try:
                    self._wait_ready(port, started)
                except _PortTakenError:
                    self._teardown()
                    continue
                self.server = RunningServer(
                    base_url=f"http://{url_host(self._host)}:{port}",
                    served_model=self._served_model,
                    pid=self._proc.pid if self._proc else -1,
                    pgid=self._pgid if self._pgid is not None else -1,
                    port=port,
                    log_path=self._log_path,
                    command=redact_argv(argv, self._secrets),
                    spec_config=self._spec_config,
                    startup_s=round(time.monotonic() - started, 3),
                    api_key_env=self._api_key_env,
                )
                return self.server
        except BaseException:
            self._teardown()
            self._remove_short_tmp()
            raise
        raise ServerStartError(
            f"{self._name}: every automatically chosen port was taken ({self._port_attempts} attempts)",
            location=str(self._log_path),
            fix="free some ports or give an explicit port",
            log_path=str(self._log_path),
        )

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._teardown()
        self._remove_short_tmp()

    def stop(self) -> ReleaseCheck | None:
        """Tear the server down now (idempotent); returns the release check."""
        self._teardown()
        self._remove_short_tmp()
        return self.release_check

    def _remove_short_tmp(self) -> None:
        if self._short_tmp is not None:
            shutil.rmtree(self._short_tmp, ignore_errors=True)
            self._short_tmp = None

    @property
    def port(self) -> int | None:
        """The port of the latest start attempt (also after a failed start, for release checks)."""
        return self._bound_port

    def is_alive(self) -> bool:
        """True while the server's main process runs."""
        return self._proc is not None and self._proc.poll() is None

    def raise_if_dead(self) -> None:
        """ServerCrashedError (with the log tail) when the server died while it was being used."""
        if self._proc is not None and self._proc.poll() is not None:
            raise ServerCrashedError(
                f"{self._name} exited with code {self._proc.returncode} while it was being measured",
                location=str(self._log_path),
                fix="read the log tail; lower the load or the memory settings",
                log_path=str(self._log_path),
                log_tail=self.log_tail(),
            )

    def log_tail(self, lines: int = 40) -> str:
        """The redacted end of this attempt's log."""
        return read_log_tail(self._log_path, lines, start=self._log_offset, secrets=self._secrets)

    # -- internals --------------------------------------------------------------------------------------------

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self._run_dir is not None:
            run_dir = Path(self._run_dir)
            tmp_dir: Path | None = None
            if len(str(run_dir / "tmp")) > MAX_TMPDIR_CHARS:
                # A deep results directory would make the engine's IPC socket paths too long to bind.
                tmp_dir = Path(tempfile.mkdtemp(prefix="specselect-"))
                self._short_tmp = tmp_dir
            env.update(cache_env(run_dir, tmp_dir))
        env.update(self._extra_env)
        return env

    def _choose_port(self) -> int:
        if self._port:
            if not port_is_free(self._host, self._port):
                raise ServerStartError(
                    f"{self._name}: port {self._port} on {self._host} is already in use",
                    location=f"{self._host}:{self._port}",
                    fix="stop whatever listens there, choose another port, or use port 0 for a free one",
                )
            return self._port
        for _ in range(10):
            port = self._port_picker(self._host)
            if port_is_free(self._host, port):
                return port
        return self._port_picker(self._host)

    def _spawn(self, argv: list[str], env: Mapping[str, str], port: int, attempt: int) -> None:
        with open(self._log_path, "ab") as log:
            self._log_offset = log.tell()
            shown = " ".join(redact_argv(argv, self._secrets))
            header = f"# specselect: {self._name} attempt {attempt} on port {port}: {shown}\n"
            log.write(header.encode())
            log.flush()
            try:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=dict(env),
                    start_new_session=True,
                    close_fds=True,
                    cwd=self._run_dir,  # `python -m` puts the cwd first on sys.path: keep it neutral
                )
            except OSError as exc:
                raise ServerStartError(
                    f"{self._name}: cannot start {argv[0]!r}: {exc.strerror or exc}",
                    location=argv[0],
                    fix="check the engine's python/command path",
                    log_path=str(self._log_path),
                ) from exc
        self._pgid = self._proc.pid  # a new session's leader is its group's id
        self._bound_port = port
        self._tracked = {}
        self.release_check = None

    def _wait_ready(self, port: int, started: float) -> None:
        assert self._proc is not None
        url = f"http://{url_host(self._host)}:{port}{self._health_path}"
        deadline = started + self._startup_timeout_s
        while True:
            code = self._proc.poll()
            if code is not None:
                tail = self.log_tail()
                if not self._port and _PORT_TAKEN.search(tail):
                    raise _PortTakenError(tail)
                raise ServerStartError(
                    f"{self._name} exited with code {code} before it became ready ({time.monotonic() - started:.1f} s)",
                    location=str(self._log_path),
                    fix="read the log tail for the engine's own error",
                    log_path=str(self._log_path),
                    log_tail=tail,
                )
            self._track_descendants()
            with contextlib.suppress(OSError):
                status, _ = local_request("GET", url, timeout_s=min(5.0, max(0.5, self._poll_interval_s * 4)))
                if status == 200:
                    return
            if time.monotonic() >= deadline:
                tail = self.log_tail()
                raise ServerTimeoutError(
                    f"{self._name} did not become ready within {self._startup_timeout_s:.0f} s",
                    location=str(self._log_path),
                    fix="raise the start-up time-out or read the log tail",
                    log_path=str(self._log_path),
                    log_tail=tail,
                )
            time.sleep(self._poll_interval_s)

    def _track_descendants(self) -> None:
        # Remembered so that children which leave the process group are still found at teardown.
        if self._proc is None:
            return
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self._proc.pid).children(recursive=True):
                self._tracked.setdefault(child.pid, child)

    def _leftovers(self) -> list[int]:
        if self._pgid is None:
            return []
        pids: set[int] = set()
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                if os.getpgid(proc.pid) == self._pgid and proc.status() != psutil.STATUS_ZOMBIE:
                    pids.add(proc.pid)
        for pid, proc in self._tracked.items():
            with contextlib.suppress(psutil.Error):
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    pids.add(pid)
        return sorted(pids)

    def _signal_all(self, sig: signal.Signals) -> None:
        if self._pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._pgid, sig)
        for proc in self._tracked.values():
            with contextlib.suppress(psutil.Error):
                if proc.is_running():
                    proc.send_signal(sig)

    def _wait_gone(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc is not None:
                self._proc.poll()  # reap the leader so it does not linger as a zombie
            if not self._leftovers():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def _teardown(self) -> None:
        if self._proc is None:
            return
        started = time.monotonic()
        killed = False
        self._track_descendants()
        try:
            self._signal_all(signal.SIGTERM)
            if not self._wait_gone(self._term_grace_s):
                killed = True
                self._signal_all(signal.SIGKILL)
                self._wait_gone(10.0)
        except BaseException:
            # A second Ctrl-C during the graceful wait must not leave the group running.
            self._signal_all(signal.SIGKILL)
            killed = True
            raise
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            port = self._bound_port
            port_free = True
            if port:
                deadline = time.monotonic() + 10.0
                while not (port_free := port_is_free(self._host, port)) and time.monotonic() < deadline:
                    time.sleep(0.1)
            leftovers = self._leftovers()
            self.release_check = ReleaseCheck(
                port_free=port_free,
                processes_gone=not leftovers,
                seconds=round(time.monotonic() - started, 3),
                killed=killed,
                leftover_pids=tuple(leftovers),
            )
            self._proc = None
            self._redact_log()

    def _redact_log(self) -> None:
        """Rewrite the finished server's log without secrets: it lives under the results directory."""
        try:
            data = self._log_path.read_bytes()
        except OSError:
            return
        text = data.decode("utf-8", errors="surrogateescape")
        clean = redact_text(text, self._secrets)
        if clean == text:
            return
        cleaned = clean.encode("utf-8", errors="surrogateescape")
        with contextlib.suppress(ArtifactError):
            atomic_write_bytes(self._log_path, cleaned)
        self._log_offset = min(self._log_offset, len(cleaned))
