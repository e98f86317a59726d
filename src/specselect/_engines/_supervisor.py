"""Keeps one engine server from outliving specselect, however specselect ends (SIGKILL and the OOM killer too).

Stand-alone (standard library only, run with `python -I`): specselect starts it as the leader of a new session
with the read end of a pipe whose write end only specselect holds, and writes the server's argv into that pipe
as one JSON line (so `ps` shows the server's command line once, on the server). It starts the server in its
own process group
(so the server and everything the server starts share that group) and then waits for one of two things:
- the server exits: the supervisor ends the same way (its exit code, or the same signal), so specselect sees
  the server's own end;
- the pipe reports end-of-file: specselect is gone (nothing else holds the write end). The supervisor sends
  SIGTERM to the whole group, waits up to the grace period for it to empty, then SIGKILLs the group, itself
  included.
The JSON line may instead be an object `{"argv": [...], "cleanup": [[...], ...], "env": {...}}`: commands that stop
what the group cannot reach (a container run by a runtime's daemon), run in order before the group is stopped, and
variables set on the server alone (LD_PRELOAD: libraries this supervisor must not load itself).
It catches and ignores SIGTERM, SIGINT and SIGHUP, so specselect's own teardown (TERM to the group, then
KILL) reaches the server while the supervisor stays to report the server's end. The server gets
PR_SET_PDEATHSIG (SIGTERM) as well, so it is told to stop even if the supervisor itself is killed.

Usage: python -I _supervisor.py LIFELINE_FD GRACE_S   (then the argv as a JSON list and a newline on the pipe)
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

__all__ = ["main"]

_PR_SET_PDEATHSIG = 1
_POLL_S = 0.2


def _die_with_parent() -> None:
    """In the server, before exec: SIGTERM when its parent (this supervisor) dies. Linux only; else nothing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return


def _group_members(pgid: int) -> list[int]:
    """Pids of live processes in process group `pgid` other than this one (read from /proc)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields and fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            members.append(int(entry))
    return members


def _run_cleanup(cleanup: list[list[str]]) -> None:
    for command in cleanup:
        print(f"# specselect supervisor: {' '.join(command)}", flush=True)
        try:
            subprocess.run(command, stdin=subprocess.DEVNULL, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"# specselect supervisor: {command[0]!r} failed: {exc}", flush=True)


def _stop_group(server: subprocess.Popen[bytes], grace_s: float, cleanup: list[list[str]]) -> None:
    pgid = os.getpgid(0)
    print(f"# specselect supervisor: specselect is gone; stopping process group {pgid}", flush=True)
    _run_cleanup(cleanup)
    os.killpg(pgid, signal.SIGTERM)  # this process catches and ignores it
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        server.poll()  # reap the server so it does not count as a member
        if not _group_members(pgid):
            return
        time.sleep(0.1)
    print(f"# specselect supervisor: still running after {grace_s:.0f} s; SIGKILL", flush=True)
    os.killpg(pgid, signal.SIGKILL)


def _ignore(signum: int, frame: object) -> None:
    """Signals meant for the server: the supervisor waits for the server's end instead."""


def _end_like(returncode: int) -> int:
    """Exit as the server did: with its code, or by the signal that ended it."""
    if returncode >= 0:
        return returncode
    sig = -returncode
    if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught, so need no reset
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    return 128 + sig


def _read_command(lifeline: int) -> tuple[list[str], list[list[str]], dict[str, str]] | None:
    """The server's argv, cleanup commands and own variables: the first line on the pipe (None when the pipe closed
    before a whole line)."""
    data = b""
    while not data.endswith(b"\n"):
        block = os.read(lifeline, 65536)
        if not block:
            return None
        data += block
    message = json.loads(data)
    command, cleanup, env = (
        (message.get("argv"), message.get("cleanup") or [], message.get("env") or {})
        if isinstance(message, dict)
        else (message, [], {})
    )
    if not isinstance(command, list) or not command:
        return None
    own = {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}
    return (
        [str(part) for part in command],
        [[str(part) for part in c] for c in cleanup if isinstance(c, list) and c],
        own,
    )


def main(argv: list[str]) -> int:
    """Run the server until it exits (its end is this process's) or until the lifeline closes."""
    if len(argv) != 2:
        print("usage: _supervisor.py LIFELINE_FD GRACE_S (argv as a JSON line on the pipe)", file=sys.stderr)
        return 2
    lifeline, grace_s = int(argv[0]), float(argv[1])
    read = _read_command(lifeline)
    if read is None:
        return 0  # specselect was gone before it said what to start
    command, cleanup, own_env = read
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        # A handler, not SIG_IGN: caught signals are reset at exec, ignored ones would be ignored by the server.
        signal.signal(sig, _ignore)
    try:
        server = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **own_env},
            close_fds=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 -- only prctl, in a single-threaded supervisor
            restore_signals=True,
        )
    except OSError as exc:
        print(f"specselect supervisor: cannot start {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    while True:
        code = server.poll()
        if code is not None:
            return _end_like(code)
        readable, _, _ = select.select([lifeline], [], [], _POLL_S)
        if readable and not os.read(lifeline, 1):
            _stop_group(server, grace_s, cleanup)
            server.poll()
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
