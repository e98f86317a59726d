"""Which processes a server launch started, written next to its caches, so a later run can stop what survived.

`ServerProcess` writes one record per launch (`server-<pgid>.json` in the server's run directory) when the
server starts, again once it is ready (with the processes it started by then), and removes it once teardown
found nothing left. A record that is still there belongs to a launch whose specselect died first.

A process is only ever matched by its identity: pid, start time and the boot it ran in, so a pid that the
system has since given to an unrelated process is never signalled. Members of the recorded process group are
matched too while the group's leader is the recorded one, or, with the leader gone, when they started in the
recorded window (between the leader's start and the record's last update): a reused group id could only
belong to processes started after that window.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path

import psutil
from pydantic import BaseModel, ConfigDict

from specselect._common.fileio import atomic_write_text

__all__ = [
    "RECORD_GLOB",
    "ProcessIdentity",
    "ServerRecord",
    "identify",
    "live_processes",
    "owner_alive",
    "read_record",
    "record_path",
    "stop_processes",
    "write_record",
]

RECORD_GLOB = "server-*.json"
_START_SLACK_S = 0.05
"""psutil start times are rounded to clock ticks (10 ms); a recorded one matches within this."""
_WINDOW_SLACK_S = 1.0


class ProcessIdentity(BaseModel):
    """A process as it can be recognised later: its pid and when it started (seconds since the epoch)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pid: int
    started: float


class ServerRecord(BaseModel):
    """One server launch's processes, as specselect last saw them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    name: str
    owner: ProcessIdentity
    """The specselect process that started the launch: while it runs, the launch is its business alone."""
    pgid: int
    leader: ProcessIdentity
    """The supervisor that leads the launch's session and process group."""
    processes: tuple[ProcessIdentity, ...] = ()
    """The server and the processes it had started by the last update."""
    boot_time: float
    updated: float


def identify(pid: int) -> ProcessIdentity | None:
    """The identity of a live process (None when it is gone)."""
    try:
        return ProcessIdentity(pid=pid, started=psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def record_path(run_dir: Path, pgid: int) -> Path:
    """Where the record of the launch leading process group `pgid` lives."""
    return run_dir / f"server-{pgid}.json"


def write_record(path: Path, record: ServerRecord) -> None:
    """Write a record atomically."""
    atomic_write_text(path, record.model_dump_json(indent=2) + "\n")


def read_record(path: Path) -> ServerRecord | None:
    """A record, or None when it is unreadable (a half-written one cannot name any process)."""
    try:
        return ServerRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _same(proc: psutil.Process, ident: ProcessIdentity) -> bool:
    with contextlib.suppress(psutil.Error):
        return abs(proc.create_time() - ident.started) <= _START_SLACK_S and proc.status() != psutil.STATUS_ZOMBIE
    return False


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _group_members(record: ServerRecord) -> list[psutil.Process]:
    leader = _process(record.leader.pid)
    leader_is_ours = leader is not None and _same(leader, record.leader)
    if leader is not None and not leader_is_ours:
        return []  # the group id now names another process's group
    latest = record.updated + _WINDOW_SLACK_S
    members = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(proc.pid) != record.pgid or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if leader_is_ours or record.leader.started - _START_SLACK_S <= proc.create_time() <= latest:
                members.append(proc)
    return members


def owner_alive(record: ServerRecord) -> bool:
    """True while the specselect that started the launch still runs (then nothing of it is a leftover)."""
    proc = _process(record.owner.pid)
    return proc is not None and _same(proc, record.owner)


def live_processes(record: ServerRecord) -> list[psutil.Process]:
    """The record's processes that are still running (none from another boot), each once, by pid."""
    if abs(psutil.boot_time() - record.boot_time) > _WINDOW_SLACK_S:
        return []
    found: dict[int, psutil.Process] = {}
    for ident in (record.leader, *record.processes):
        proc = _process(ident.pid)
        if proc is not None and _same(proc, ident):
            found[proc.pid] = proc
    for proc in _group_members(record):
        found.setdefault(proc.pid, proc)
    return [found[pid] for pid in sorted(found)]


def _signal(procs: Iterable[psutil.Process], sig: signal.Signals) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


def stop_processes(procs: list[psutil.Process], grace_s: float = 10.0) -> list[int]:
    """SIGTERM the processes, SIGKILL what is left after `grace_s`; the pids still alive after that.

    A stopped process is continued after the TERM, so that it can act on it."""
    _signal(procs, signal.SIGTERM)
    _signal(procs, signal.SIGCONT)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    if alive:
        _signal(alive, signal.SIGKILL)
        _, alive = psutil.wait_procs(alive, timeout=5.0)
    return sorted(p.pid for p in alive if _running(p))


def _running(proc: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    return False
