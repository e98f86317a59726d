"""Launch records name processes by identity (pid, start time, boot), so a recycled pid is never signalled.

Only this test's own process is looked at (through /proc); nothing is started or signalled.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from specselect._engines.serverrecords import (
    ProcessIdentity,
    ServerRecord,
    identify,
    live_processes,
    owner_alive,
    read_record,
    record_path,
    write_record,
)


def _record(me: ProcessIdentity, **changes: object) -> ServerRecord:
    values: dict[str, object] = {
        "name": "vLLM server for g0",
        "owner": ProcessIdentity(pid=me.pid, started=me.started - 3600),  # a specselect that is gone
        "pgid": 2**22 + 17,  # no such group
        "leader": ProcessIdentity(pid=2**22 + 17, started=me.started),
        "processes": (me,),
        "boot_time": psutil.boot_time(),
        "updated": me.started + 1,
    }
    values.update(changes)
    return ServerRecord.model_validate(values)


def test_a_recorded_process_is_found_only_with_its_start_time() -> None:
    me = identify(os.getpid())
    assert me is not None
    assert [p.pid for p in live_processes(_record(me))] == [os.getpid()]
    # The same pid with another start time is another process (the pid was reused): never matched.
    recycled = ProcessIdentity(pid=me.pid, started=me.started - 5.0)
    assert live_processes(_record(me, processes=(recycled,))) == []
    # A record from before the last boot names nothing that runs now.
    assert live_processes(_record(me, boot_time=psutil.boot_time() - 86_400)) == []


def test_group_members_count_only_while_the_leader_is_the_recorded_one() -> None:
    me = identify(os.getpid())
    assert me is not None
    group = os.getpgid(0)
    leader = identify(group)
    if leader is None:  # the group's leader has exited: the window rule applies instead
        leader = ProcessIdentity(pid=group, started=me.started)
    # Our own group, led by its real leader: its members (this process among them) are the launch's.
    ours = _record(me, pgid=group, leader=leader, processes=())
    assert os.getpid() in [p.pid for p in live_processes(ours)]
    # The same group id with a leader that started at another time: the id now names someone else's group.
    if identify(group) is not None:
        other = ProcessIdentity(pid=group, started=leader.started + 7.0)
        assert live_processes(_record(me, pgid=group, leader=other, processes=())) == []


def test_the_owner_decides_whether_a_launch_is_left_over(tmp_path: Path) -> None:
    me = identify(os.getpid())
    assert me is not None
    assert owner_alive(_record(me, owner=me)) is True
    assert owner_alive(_record(me)) is False
    path = record_path(tmp_path, 4242)
    write_record(path, _record(me))
    assert read_record(path) == _record(me)
    path.write_text("{half a rec")
    assert read_record(path) is None
