"""A server process's whole life as a context manager (engine-agnostic; vLLM and SGLang both use it).

The server runs under a small supervisor (`_supervisor.py`) that leads its own session and process group and
holds a pipe from this process: if specselect dies in any way, the pipe closes and the supervisor stops the
whole group. With a run directory, each launch's processes are recorded there (`serverrecords`) until teardown
found them gone, so a later run can stop what outlived even the supervisor. Output goes to a log file;
readiness is polled on a health path and notices an early exit; teardown signals the whole group (TERM, then
KILL) even on Ctrl-C and then confirms that the port is free and no process of the group is left.
A server whose processes are not all in the group (a container, run by the runtime's daemon) names the
commands that stop it (`ServerOptions.cleanup`): teardown runs them first, and so does the supervisor when
specselect is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

from specselect._common.fileio import atomic_write_bytes
from specselect._common.secrets import redact_argv, redact_text, secret_values
from specselect._engines.base import RunningServer
from specselect._engines.http import local_request, pick_free_port, port_is_free, url_host
from specselect._engines.serverrecords import ServerRecord, identify, record_path, write_record
from specselect.errors import ArtifactError, ServerCrashedError, ServerStartError, ServerTimeoutError
from specselect.records.server import ReleaseCheck

__all__ = ["SERVER_ONLY_ENV", "ServerOptions", "ServerProcess", "cache_env", "cache_root", "read_log_tail"]

_PORT_TAKEN = re.compile(r"address already in use|errno 98|eaddrinuse", re.IGNORECASE)

SERVER_ONLY_ENV = ("LD_PRELOAD",)
"""Variables a launch sets on the server alone: the supervisor is specselect's own Python and must not load the
libraries the server preloads (an allocator, an OpenMP runtime). Inherited from specselect, they pass as they are."""


_SUPERVISOR = Path(__file__).with_name("_supervisor.py")
ORPHAN_GRACE_S = 8.0
"""How long the supervisor lets an orphaned server shut down gracefully before it kills the group."""

MAX_TMPDIR_CHARS = 60
"""Engines put UNIX sockets in TMPDIR (vLLM: `ipc://$TMPDIR/<uuid>`); sun_path holds at most 107 bytes."""


def cache_root(run_dir: Path) -> Path:
    """The directory under which `cache_env` puts a server's caches (VLLM_CACHE_ROOT is its `vllm`)."""
    return run_dir.absolute() / "cache"


def cache_env(run_dir: Path, tmp_dir: Path | None = None) -> dict[str, str]:
    """Cache, temp and offline variables that keep a server's files under `run_dir` and off the network.

    `tmp_dir` replaces `run_dir/tmp` as TMPDIR (see `MAX_TMPDIR_CHARS`).
    """
    cache = cache_root(run_dir)
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


@dataclass(frozen=True)
class ServerOptions:
    """How to start and watch one server process: everything but its argv."""

    log_path: Path
    served_model: str
    run_dir: Path | None = None
    """Caches and temporary files of the server (see `cache_env`); None keeps the environment's."""
    host: str = "127.0.0.1"
    port: int = 0
    """0 picks a free port (retried `port_attempts` times when another process takes it first)."""
    env: Mapping[str, str] = field(default_factory=dict)
    spec_config: dict[str, Any] | None = None
    """Recorded with the running server (the argv carries it)."""
    proposal_length: int | None = None
    """Recorded with the running server: tokens proposed per verify step, engine-neutral."""
    api_key_env: str | None = None
    name: str = "server"
    startup_timeout_s: float = 600.0
    health_path: str = "/health"
    poll_interval_s: float = 0.5
    term_grace_s: float = 30.0
    port_attempts: int = 3
    port_picker: Callable[[str], int] = pick_free_port
    cleanup: tuple[tuple[str, ...], ...] = ()
    """Commands that stop what the process group cannot reach (`docker stop NAME`, `docker rm -f NAME`), run in
    order at teardown and by the supervisor when specselect is gone; their output goes to the log."""


class ServerProcess(AbstractContextManager[RunningServer]):
    """Start `argv_for_port(port)` in its own process group; yield a RunningServer once it is healthy."""

    def __init__(self, argv_for_port: Callable[[int], Sequence[str]], options: ServerOptions) -> None:
        self._argv_for_port = argv_for_port
        self._log_path = Path(options.log_path)
        self._served_model = options.served_model
        self._run_dir = options.run_dir
        self._host = options.host
        self._port = options.port
        self._extra_env = dict(options.env)
        self._spec_config = options.spec_config
        self._proposal_length = options.proposal_length
        self._api_key_env = options.api_key_env
        self._name = options.name
        self._startup_timeout_s = options.startup_timeout_s
        self._health_path = options.health_path
        self._poll_interval_s = options.poll_interval_s
        self._term_grace_s = options.term_grace_s
        self._port_attempts = max(1, options.port_attempts)
        self._port_picker = options.port_picker
        self._cleanup = options.cleanup
        self._proc: subprocess.Popen[bytes] | None = None
        """The supervisor, whose end is the server's (see `_supervisor.py`)."""
        self._lifeline: int | None = None
        self._record: Path | None = None
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
                started_at = time.time()
                self._spawn(argv, env, port, attempt)
                try:
                    self._wait_ready(port, started)
                except _PortTakenError:
                    self._teardown()
                    continue
                self._write_record()
                self.server = RunningServer(
                    base_url=f"http://{url_host(self._host)}:{port}",
                    served_model=self._served_model,
                    pid=self._server_pid(),
                    pgid=self._pgid if self._pgid is not None else -1,
                    port=port,
                    log_path=self._log_path,
                    command=redact_argv(argv, self._secrets),
                    spec_config=self._spec_config,
                    proposal_length=self._proposal_length,
                    startup_s=round(time.monotonic() - started, 3),
                    started_at=started_at,
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

    def attempt_log(self, limit: int = 4 << 20) -> str:
        """This attempt's log from its first line (its first `limit` bytes), redacted: what the server said while
        it started."""
        try:
            with open(self._log_path, "rb") as fh:
                fh.seek(self._log_offset)
                data = fh.read(limit).decode("utf-8", errors="replace")
        except OSError:
            return ""
        return redact_text(data, self._secrets)

    # -- internals --------------------------------------------------------------------------------------------

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self._run_dir is not None:
            # Absolute: the server runs with cwd=run_dir, where a relative path would nest a second copy of it.
            run_dir = Path(self._run_dir).absolute()
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

    def _supervisor_argv(self, lifeline: int) -> list[str]:
        grace = min(self._term_grace_s, ORPHAN_GRACE_S)
        return [sys.executable, "-I", str(_SUPERVISOR), str(lifeline), str(grace)]

    def _server_only(self) -> dict[str, str]:
        """The launch's own `SERVER_ONLY_ENV` variables: the supervisor hands them to the server alone."""
        return {name: self._extra_env[name] for name in SERVER_ONLY_ENV if name in self._extra_env}

    def _send_command(self, argv: list[str]) -> None:
        """The server's argv (the cleanup commands, the server-only variables) to the supervisor, as one JSON line on
        the lifeline."""
        assert self._lifeline is not None
        own = self._server_only()
        message: object = (
            {"argv": argv, "cleanup": [list(c) for c in self._cleanup], "env": own} if self._cleanup or own else argv
        )
        data = (json.dumps(message) + "\n").encode()
        with contextlib.suppress(BrokenPipeError):  # a supervisor that died at once: readiness reports its end
            while data:
                data = data[os.write(self._lifeline, data) :]

    def _spawn(self, argv: list[str], env: Mapping[str, str], port: int, attempt: int) -> None:
        with open(self._log_path, "ab") as log:
            self._log_offset = log.tell()
            shown = " ".join(redact_argv(argv, self._secrets))
            header = f"# specselect: {self._name} attempt {attempt} on port {port}: {shown}\n"
            log.write(header.encode())
            log.flush()
            if not shutil.which(argv[0]) and not Path(argv[0]).is_file():
                raise ServerStartError(
                    f"{self._name}: cannot start {argv[0]!r}: No such file or directory",
                    location=argv[0],
                    fix="check the engine's python/command path",
                    log_path=str(self._log_path),
                )
            # Only this process holds the write end: when it dies, however, the supervisor reads end-of-file.
            read_end, self._lifeline = os.pipe()
            supervisor_env = {k: v for k, v in env.items() if k not in self._server_only()}
            supervisor_env.update({k: os.environ[k] for k in self._server_only() if k in os.environ})
            try:
                self._proc = subprocess.Popen(
                    self._supervisor_argv(read_end),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=supervisor_env,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(read_end,),
                    cwd=self._run_dir,  # `python -m` puts the cwd first on sys.path: keep it neutral
                )
            except OSError as exc:
                self._close_lifeline()
                raise ServerStartError(
                    f"{self._name}: cannot start {argv[0]!r}: {exc.strerror or exc}",
                    location=argv[0],
                    fix="check the engine's python/command path",
                    log_path=str(self._log_path),
                ) from exc
            finally:
                os.close(read_end)
        self._send_command(argv)
        self._pgid = self._proc.pid  # a new session's leader is its group's id
        self._bound_port = port
        self._tracked = {}
        self.release_check = None
        self._write_record()

    def _close_lifeline(self) -> None:
        if self._lifeline is not None:
            with contextlib.suppress(OSError):
                os.close(self._lifeline)
            self._lifeline = None

    def _server_pid(self) -> int:
        """The server's own pid: the supervisor's child (the supervisor's while it has none)."""
        if self._proc is None:
            return -1
        with contextlib.suppress(psutil.Error):
            children = psutil.Process(self._proc.pid).children()
            if children:
                return int(children[0].pid)
        return self._proc.pid

    def _write_record(self) -> None:
        """Record the launch's processes in the run directory (nothing without one)."""
        if self._run_dir is None or self._proc is None or self._pgid is None:
            return
        leader = identify(self._proc.pid)
        if leader is None:
            return
        self._track_descendants()
        known = (identify(pid) for pid in sorted(self._tracked))
        owner = identify(os.getpid())
        if owner is None:
            return
        record = ServerRecord(
            name=self._name,
            owner=owner,
            pgid=self._pgid,
            leader=leader,
            processes=tuple(p for p in known if p is not None),
            boot_time=psutil.boot_time(),
            updated=time.time(),
        )
        self._record = record_path(Path(self._run_dir), self._pgid)
        with contextlib.suppress(ArtifactError, OSError):
            self._record.parent.mkdir(parents=True, exist_ok=True)
            write_record(self._record, record)

    def _forget_record(self, leftovers: Sequence[int]) -> None:
        """Remove the launch's record once nothing of it is left (a later run stops what is)."""
        if self._record is not None and not leftovers:
            with contextlib.suppress(OSError):
                self._record.unlink()
            self._record = None

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

    def _run_cleanup(self) -> None:
        """The cleanup commands, in order, with their output in the log (a failing one does not stop the next)."""
        for command in self._cleanup:
            with open(self._log_path, "ab") as log:
                log.write(f"# specselect: {' '.join(command)}\n".encode())
                log.flush()
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    subprocess.run(
                        command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, timeout=60, check=False
                    )

    def _teardown(self) -> None:
        if self._proc is None:
            return
        started = time.monotonic()
        killed = False
        self._track_descendants()
        try:
            self._run_cleanup()
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
            self._close_lifeline()
            self._forget_record(leftovers)
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
