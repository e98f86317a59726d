"""Results-disk faults, injected at the file-system calls inside one specselect process (stand-in engine).

A disk that is read-only or nearly full is refused by the preflight audit before anything starts; a disk
that fills up in the middle of a group stops the run with exit 5, leaves no half-written file (atomic
writes), no server and a manifest that `--resume` continues from. The same faults on a real tmpfs with
the real engine: tests/integration/test_faults_real_engine.py.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections import namedtuple
from pathlib import Path

import pytest
from test_fault_harness import (  # noqa: F401  (fixtures)
    FakeRun,
    assert_no_orphans,
    fake_engine_processes,
    fake_run_fixture,
    fake_vllm_fixture,
    ngram,
)

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect._artifacts.verify import verify_run
from specselect._cli.main import main
from specselect.records.group import GroupResult
from specselect.records.results import Manifest

LABEL = "faults"


def _run(fake_run: FakeRun, monkeypatch: pytest.MonkeyPatch, *extra: str) -> int:
    monkeypatch.setenv("SPECSELECT_HOME", fake_run.env["SPECSELECT_HOME"])
    monkeypatch.chdir(fake_run.dir)
    return main(["run", "plan.toml", "--results-dir", "results", "--quiet", *extra])


def _all_json_parses(root: Path) -> int:
    count = 0
    for path in root.rglob("*.json"):
        if "work" not in path.relative_to(root).parts:
            json.loads(path.read_text(encoding="utf-8"))
            count += 1
    assert not [p for p in root.rglob(".*.tmp") if "work" not in p.relative_to(root).parts]
    return count


def test_disk_that_fills_during_a_group_stops_cleanly_and_resume_finishes(
    fake_run: FakeRun, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_run.plan(candidates=[ngram("g1_ngram"), ngram("g2_ngram")])
    real_fsync = os.fsync
    full = {"on": False, "hits": 0}

    def fsync(fd: int) -> None:
        # The disk fills while g1's first records file is written; from then on every write fails.
        target = os.readlink(f"/proc/self/fd/{fd}")
        if "/records/g1_ngram/" in target:
            full["on"] = True
        if full["on"]:
            full["hits"] += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    code = _run(fake_run, monkeypatch)
    err = capsys.readouterr().err
    assert code == 5, err
    lines = [line for line in err.splitlines() if line.startswith("specselect: error:")]
    assert len(lines) == 1 and "No space left on device" in lines[0] and "records/g1_ngram" in lines[0]
    assert "Traceback" not in err
    assert_no_orphans(fake_run.python.parents[1], fake_run.results)

    root = fake_run.results / LABEL
    assert _all_json_parses(root) >= 4  # preflight, admission, manifest, g0's summary: all whole
    manifest = load_document(RunLayout(root).manifest, Manifest)
    assert manifest.status == "running"
    status = {g.name: (g.run_status.value, g.complete) for g in manifest.groups}
    assert status["g0_target_only"] == ("completed", True)
    assert status["g1_ngram"][1] is False and status["g2_ngram"][1] is False
    assert not (root / "records" / "g1_ngram").exists() or not list((root / "records" / "g1_ngram").iterdir())
    report = verify_run(root)
    assert report.ok, report.problems

    monkeypatch.setattr(os, "fsync", real_fsync)
    baseline = load_document(RunLayout(root).group_summary("g0_target_only"), GroupResult)
    assert _run(fake_run, monkeypatch, "--resume") == 0, capsys.readouterr().err
    manifest = load_document(RunLayout(root).manifest, Manifest)
    assert manifest.status == "complete"
    assert all(g.run_status.value == "completed" for g in manifest.groups)
    assert load_document(RunLayout(root).group_summary("g0_target_only"), GroupResult) == baseline
    assert verify_run(root).ok


def test_read_only_results_disk_is_refused_before_anything_starts(
    fake_run: FakeRun, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_run.plan(candidates=[ngram("g1_ngram")])
    results = (fake_run.dir / "results").resolve()
    real_write = Path.write_bytes

    def write_bytes(self: Path, data: bytes) -> int:  # type: ignore[override]
        if self.absolute().is_relative_to(results):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    code = _run(fake_run, monkeypatch)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "configuration audit failed; nothing was started" in err
    assert "results_not_writable: results: Read-only file system" in err
    assert not fake_engine_processes(fake_run.python.parents[1])
    assert not (results / LABEL).exists()


def test_nearly_full_results_disk_is_refused_before_anything_starts(
    fake_run: FakeRun, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_run.plan(candidates=[ngram("g1_ngram")])
    usage = namedtuple("usage", "total used free")
    real_usage = shutil.disk_usage
    results = (fake_run.dir / "results").resolve()

    def disk_usage(path: str | os.PathLike[str]) -> object:
        if Path(path).absolute().is_relative_to(results):
            return usage(10 * 2**30, 10 * 2**30 - 100 * 2**20, 100 * 2**20)
        return real_usage(path)

    monkeypatch.setattr(shutil, "disk_usage", disk_usage)
    code = _run(fake_run, monkeypatch)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "disk_full: results: only 100 MB free" in err
    assert not (results / LABEL).exists()
