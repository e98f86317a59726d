"""Test support for the fault, security and bad-input tests: a fake vLLM environment and a run driver.

The fake environment is a real venv whose `vllm` package is a stand-in: specselect probes it, admits n-gram
candidates and starts `python -m vllm.entrypoints.cli.main serve` exactly as for the real engine, but the
"server" is a small stdlib HTTP server that streams a deterministic answer and can crash, hang, never become
ready or print its API key on command (per-group engine_args). The real engine runs in tests/integration.

The tests at the bottom check the stand-in itself.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import venv
from collections.abc import Iterator, Sequence
from pathlib import Path

import psutil
import pytest
import tomli_w

__all__ = [
    "FAKE_SERVER",
    "FakeRun",
    "assert_no_orphans",
    "fake_engine_processes",
    "fake_run_fixture",
    "fake_vllm_fixture",
    "make_fake_vllm",
    "ngram",
    "plan_text",
    "ports_in_logs",
    "wait_for_line",
]

SERVER_MODULE = "vllm.entrypoints.cli.main"
"""What specselect starts (`python -m vllm.entrypoints.cli.main serve MODEL ...`, the `vllm serve` console script)."""

FAKE_SERVER = textwrap.dedent(
    '''
    """Stand-in for vLLM's OpenAI server (stdlib only); unknown flags are ignored like vLLM's own."""
    import argparse, json, os, signal, sys, threading, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--served-model-name", default="fake")
    p.add_argument("--fake-crash-after", type=int, default=0)
    p.add_argument("--fake-crash-when-concurrent", type=int, default=0)
    p.add_argument("--fake-hang-after", type=int, default=0)
    p.add_argument("--fake-never-ready", action="store_true")
    p.add_argument("--fake-print-key", action="store_true")
    p.add_argument("--fake-exit-at-start", type=int, default=None)
    p.add_argument("--fake-token-delay", type=float, default=0.0)
    p.add_argument("--speculative-config", default=None)
    args, _ = p.parse_known_args()
    print("fake engine argv: " + json.dumps(sys.argv[1:]), flush=True)
    key = os.environ.get("VLLM_API_KEY")
    if args.fake_print_key:
        print(f"api key in use: {key}", flush=True)
        print(f"environment: VLLM_API_KEY={key}", flush=True)
    if args.fake_exit_at_start is not None:
        print(f"fake engine: failing at start-up with the key {key} in the message", flush=True)
        sys.exit(args.fake_exit_at_start)
    state = {"served": 0, "in_flight": 0, "drafts": 0, "draft_tokens": 0, "accepted": 0}
    lock = threading.Lock()

    def words(prompt, n):
        seed = sum(map(ord, prompt))
        return [f"w{(seed + 7 * i) % 97}" for i in range(n)]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _send(self, code, body, ctype="application/json"):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _auth(self):
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                self._send(401, b'{"error": "unauthorised"}')
                return False
            return True

        def do_GET(self):
            if self.path == "/health":
                self._send(503 if args.fake_never_ready else 200, b"")
            elif self.path == "/v1/models":
                if self._auth():
                    self._send(200, json.dumps({"data": [{"id": args.served_model_name}]}).encode())
            elif self.path == "/metrics":
                text = "# HELP fake_up 1 when up\\n# TYPE fake_up gauge\\nfake_up 1\\n"
                if args.speculative_config:  # vLLM's spec-decode counters: half of every draft accepted
                    labels = '{engine="0",model_name="%s"}' % args.served_model_name
                    counters = (("drafts", "drafts"), ("draft_tokens", "draft_tokens"), ("accepted_tokens", "accepted"))
                    for name, key in counters:
                        text += "vllm:spec_decode_num_%s_total%s %d\\n" % (name, labels, state[key])
                self._send(200, text.encode(), "text/plain")
            else:
                self._send(404, b"{}")

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            req = json.loads(self.rfile.read(n) or b"{}")
            if not self._auth():
                return
            out = words(json.dumps(req.get("messages")), int(req.get("max_tokens") or 8))
            if not req.get("stream"):
                msg = {"role": "assistant", "content": " ".join(out)}
                self._send(200, json.dumps({"choices": [{"index": 0, "message": msg}]}).encode())
                return
            with lock:
                state["served"] += 1
                state["in_flight"] += 1
                count, in_flight = state["served"], state["in_flight"]
            try:
                self._stream(req, out, count, in_flight)
            finally:
                with lock:
                    state["in_flight"] -= 1

        def _stream(self, req, out, count, in_flight):
            if args.fake_crash_after and count > args.fake_crash_after:
                print(f"fake engine: crashing on streamed request {count}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            if args.fake_crash_when_concurrent and in_flight >= args.fake_crash_when_concurrent:
                print(f"fake engine: crashing with {in_flight} requests in flight", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            if args.fake_hang_after and count > args.fake_hang_after:
                print(f"fake engine: hanging on streamed request {count}", flush=True)
                time.sleep(3600)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(obj):
                data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\\n\\n"
                self.wfile.write(b"%x\\r\\n%s\\r\\n" % (len(data), data))
                self.wfile.flush()

            chunk({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
            for i, word in enumerate(out):
                time.sleep(args.fake_token_delay)
                chunk({"choices": [{"index": 0, "delta": {"content": word + " "}, "token_ids": [100 + i]}]})
            chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "length", "token_ids": []}]})
            usage = {"prompt_tokens": 5, "completion_tokens": len(out), "total_tokens": 5 + len(out)}
            chunk({"choices": [], "usage": usage})
            chunk(b"[DONE]")
            with lock:
                state["drafts"] += len(out) // 2
                state["draft_tokens"] += len(out)
                state["accepted"] += len(out) // 2
            self.wfile.write(b"0\\r\\n\\r\\n")
            self.wfile.flush()

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"fake engine listening on {args.host}:{args.port}", flush=True)
    server.serve_forever()
    '''
)
"""The stand-in server; `--fake-*` flags come from a candidate's engine_args."""

_SPECULATIVE = textwrap.dedent(
    """
    from typing import Literal
    SpeculativeMethod = Literal["ngram", "draft_model", "eagle", "eagle3", "suffix"]
    class SpeculativeConfig:
        method: SpeculativeMethod | None = None
        model: str | None = None
        num_speculative_tokens: int = None
        prompt_lookup_max: int | None = None
        prompt_lookup_min: int | None = None
    """
)

MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 1000,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
}

WORKLOAD = [
    {"id": f"q{i}", "category": "c", "messages": [{"role": "user", "content": f"question number {i}"}]}
    for i in range(3)
]


def make_fake_vllm(root: Path) -> Path:
    """A venv at `root/env` whose vllm is the stand-in, plus a model directory at `root/model`; its python."""
    env_dir = root / "env"
    venv.create(env_dir, with_pip=False, symlinks=True)
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    pkg = site / "vllm"
    (pkg / "config").mkdir(parents=True)
    (pkg / "entrypoints" / "cli").mkdir(parents=True)
    for init in (pkg, pkg / "config", pkg / "entrypoints", pkg / "entrypoints" / "cli"):
        (init / "__init__.py").write_text("")
    (pkg / "config" / "speculative.py").write_text(_SPECULATIVE)
    # `serve MODEL` are positional words, which the stand-in's parse_known_args leaves aside like unknown flags.
    (pkg / "entrypoints" / "cli" / "main.py").write_text(FAKE_SERVER)
    dist = site / "vllm-0.32.0+cpu.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n")
    model = root / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(MODEL_CONFIG))
    return env_dir / "bin" / "python"


def plan_text(
    python: Path,
    *,
    label: str = "faults",
    candidates: Sequence[dict[str, object]] = (),
    engine: dict[str, object] | None = None,
    run: dict[str, object] | None = None,
    model: str | None = None,
    workload: str = "wl.jsonl",
) -> str:
    """A small plan for the fake engine; `engine`/`run` entries override the defaults, `candidates` are tables."""
    plan: dict[str, object] = {
        "schema_version": 1,
        "label": label,
        "target": {"model": model or str(python.parents[2] / "model"), "dtype": "float32"},
        "engine": {"kind": "vllm", "python": str(python), "startup_timeout_s": 20.0, **(engine or {})},
        "sampling": {"max_tokens": 8},
        "run": {
            "warmup_requests": 1,
            "repeats": 2,
            "rounds": 1,  # the fault tests are about processes and files: one server per group keeps them quick
            "request_timeout_s": 10.0,
            "scenario_timeout_s": 60.0,
            **(run or {}),
        },
        "workloads": {"w": workload},
        "candidates": list(candidates),
    }
    return tomli_w.dumps(plan)


def ngram(name: str, *engine_args: str) -> dict[str, object]:
    """An n-gram candidate table with optional `--fake-*` engine args."""
    return {
        "name": name,
        "family": "ngram",
        "num_speculative_tokens": 2,
        "options": {"prompt_lookup_min": 1, "prompt_lookup_max": 2},
        "engine_args": list(engine_args),
    }


class FakeRun:
    """A working directory with a plan and workload for the fake engine, and the CLI as a subprocess."""

    def __init__(self, tmp: Path, python: Path, home: Path) -> None:
        self.dir = tmp
        self.python = python
        self.env = {**os.environ, "SPECSELECT_HOME": str(home), "PYTHONUNBUFFERED": "1"}
        (tmp / "wl.jsonl").write_text("".join(json.dumps(item) + "\n" for item in WORKLOAD))

    def plan(self, **kwargs: object) -> Path:
        path = self.dir / "plan.toml"
        path.write_text(plan_text(self.python, **kwargs))  # type: ignore[arg-type]
        return path

    def cli(
        self, *args: str, timeout: float = 120.0, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "specselect._cli.main", *args],
            cwd=self.dir,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def call(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """`specselect ARGS` inside this process (faster than `cli`; same exit codes and output)."""
        from specselect._cli.main import main

        out, err = io.StringIO(), io.StringIO()
        saved_env, saved_cwd = dict(os.environ), Path.cwd()
        os.environ.update({"SPECSELECT_HOME": self.env["SPECSELECT_HOME"], **(env or {})})
        os.chdir(self.dir)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(list(args))
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        return subprocess.CompletedProcess(["specselect", *args], code, out.getvalue(), err.getvalue())

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """`specselect ARGS` running in the background with plain progress lines on stderr."""
        return subprocess.Popen(
            [sys.executable, "-m", "specselect._cli.main", *args],
            cwd=self.dir,
            env={**self.env, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    @property
    def results(self) -> Path:
        return self.dir / "results"


def wait_for_line(proc: subprocess.Popen[str], pattern: str, timeout: float = 60.0) -> list[str]:
    """Read `proc`'s stderr until a line matches `pattern`; the lines read so far."""
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    regex = re.compile(pattern)
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if regex.search(line):
            return seen
    raise AssertionError(f"no line matching {pattern!r} within {timeout} s; got:\n{''.join(seen)[-3000:]}")


def fake_engine_processes(marker: Path) -> list[psutil.Process]:
    """Live (non-zombie) server processes whose command line names `marker` (this fake env, not anyone else's)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if SERVER_MODULE in cmd and str(marker) in cmd and proc.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


_PORT_RE = re.compile(r"^# specselect: .* attempt \d+ on port (\d+):", re.MULTILINE)


def ports_in_logs(results: Path) -> set[int]:
    """Every port a server of this run was started on (from the log headers specselect writes)."""
    ports: set[int] = set()
    for log in results.rglob("logs/*.log"):
        ports.update(int(p) for p in _PORT_RE.findall(log.read_text(errors="replace")))
    return ports


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on host:port."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def assert_no_orphans(
    marker: Path, results: Path | None = None, ports: Sequence[int] = (), *, wait_s: float = 10.0
) -> None:
    """No server process of `marker`'s environment is alive and no port its servers used is still taken."""
    deadline = time.monotonic() + wait_s
    while fake_engine_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = fake_engine_processes(marker)
    assert not left, f"orphaned engine processes: {[p.pid for p in left]}"
    used = set(ports) | (ports_in_logs(results) if results is not None else set())
    taken = [p for p in sorted(used) if not port_free(p)]
    assert not taken, f"ports still taken after the run: {taken}"


@pytest.fixture(scope="module", name="fake_vllm")
def fake_vllm_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake environment's python (built once per module)."""
    return make_fake_vllm(tmp_path_factory.mktemp("fake-vllm"))


@pytest.fixture(name="fake_run")
def fake_run_fixture(tmp_path: Path, fake_vllm: Path) -> Iterator[FakeRun]:
    """A fresh working directory for one run of the fake engine; fails the test if a server is left over."""
    (tmp_path / "work").mkdir()
    run = FakeRun(tmp_path / "work", fake_vllm, tmp_path / "home")
    yield run
    assert_no_orphans(fake_vllm.parents[1], run.results)


# -- the stand-in itself -----------------------------------------------------------------------------------------


def test_fake_environment_is_probed_like_a_vllm_install(fake_run: FakeRun) -> None:
    fake_run.plan(candidates=[ngram("g1_ngram")])
    done = fake_run.cli("probe", "plan.toml", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["preflight"]["engine"]["engine_version"] == "0.32.0+cpu"
    assert [r["run_status"] for r in doc["admission"]["results"]] == ["runnable"]


def test_fake_engine_run_completes_every_group(fake_run: FakeRun) -> None:
    fake_run.plan(candidates=[ngram("g1_ngram")])
    done = fake_run.cli("run", "plan.toml", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    groups = {g["group"]: g["run_status"] for g in json.loads(done.stdout)["groups"]}
    assert groups == {"g0_target_only": "completed", "g1_ngram": "completed"}


def test_orphan_checker_sees_a_live_fake_server(fake_vllm: Path, tmp_path: Path) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen(
        [str(fake_vllm), "-m", SERVER_MODULE, "--port", str(port)], stdout=subprocess.DEVNULL, cwd=tmp_path
    )
    try:
        deadline = time.monotonic() + 20
        while port_free(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(AssertionError, match="orphaned engine processes"):
            assert_no_orphans(fake_vllm.parents[1], ports=[port], wait_s=0)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert_no_orphans(fake_vllm.parents[1], ports=[port])
