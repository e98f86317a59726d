"""Before a run (or `--resume`) on a results directory starts anything: stop what an earlier attempt left running.

Each server launch records its processes in its run directory (`engines.serverrecords`) until its teardown
found them gone. A record still there names a launch whose specselect died before it could clean up; the
supervisor normally stops such a server by itself, so this is the second line: its processes that still run
(matched by pid and start time, never by pid alone) are reported and stopped, and the record is removed. A
launch whose specselect still runs (another run on the same directory) is left alone.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from specselect._artifacts.layout import RunLayout
from specselect._engines.serverrecords import RECORD_GLOB, live_processes, owner_alive, read_record, stop_processes
from specselect._runner.progress import Progress

__all__ = ["StoppedLeftover", "stop_leftover_servers"]


@dataclass(frozen=True)
class StoppedLeftover:
    """One earlier launch whose processes were still running: which, and any that could not be stopped."""

    name: str
    pids: tuple[int, ...]
    survivors: tuple[int, ...]


def stop_leftover_servers(layout: RunLayout, progress: Progress) -> list[StoppedLeftover]:
    """Stop every still-running process recorded under `layout`'s work directory; what was found."""
    stopped: list[StoppedLeftover] = []
    if not layout.work_dir.is_dir():
        return stopped
    for path in sorted(layout.work_dir.glob(f"*/{RECORD_GLOB}")):
        record = read_record(path)
        if record is not None and owner_alive(record):
            progress.warn(f"{record.name}: started by specselect pid {record.owner.pid}, which still runs: left alone")
            continue
        procs = live_processes(record) if record is not None else []
        if record is not None and procs:
            pids = tuple(p.pid for p in procs)
            progress.warn(
                f"{record.name}: {len(pids)} process(es) of an earlier attempt still running "
                f"(pids {', '.join(map(str, pids))}): stopping them before anything starts"
            )
            survivors = tuple(stop_processes(procs))
            if survivors:
                progress.warn(f"{record.name}: could not stop pids {', '.join(map(str, survivors))}")
                stopped.append(StoppedLeftover(record.name, pids, survivors))
                continue
            stopped.append(StoppedLeftover(record.name, pids, ()))
        with contextlib.suppress(OSError):
            path.unlink()
    return stopped
