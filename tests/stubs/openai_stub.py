"""A local OpenAI-compatible streaming server with PROGRAMMED timing, for tests and benchmarks only.

Not part of the specselect package. Run it in its own process (so its event loop never competes with the
client's) with `StubServer` or `python tests/stubs/openai_stub.py --behavior '{...}'`; it binds 127.0.0.1
on a free port and prints `STUB_READY <port>`.

It is a raw asyncio HTTP/1.1 server (keep-alive, chunked responses) rather than an aiohttp app because its
own overhead must stay far below the client's: every chunk is one timer callback and one socket write.
Chunk k (0-based) of a request leaves at `t_arrival + ttft_s + k * chunk_delay_s` on an absolute
schedule; the loop uses `select()`, whose time-outs have microsecond resolution (epoll rounds up to whole
milliseconds). With one token per chunk: TTFT = ttft_s, TPOT = chunk_delay_s, E2E = ttft_s + (chunks - 1)
* chunk_delay_s (see `programmed`). ttft_s = chunk_delay_s = 0 is the zero-delay mode for benchmarks.

A request can override the default behaviour with a directive anywhere in its prompt or messages:
`[[stub:{"failure": "http_500"}]]` (a JSON object of `StubBehavior` fields). `GET /stub/requests` returns
what was received (body, Authorization header, arrival and write times on the shared monotonic clock).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import re
import select
import selectors
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["StubBehavior", "StubServer", "main", "programmed"]

_DIRECTIVE = re.compile(r"\[\[stub:(\{.*?\})\]\]")
_READY = "STUB_READY"
_MID_STREAM = {"malformed", "garbage_line", "hang", "disconnect", "engine_error"}
_FAILURES = {None, "http_500", "no_done", *_MID_STREAM}
_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)


@dataclass(frozen=True)
class StubBehavior:
    """What the stub does for a request.

    failure: None | http_500 | malformed (a non-JSON data line) | garbage_line (a non-SSE line) | hang
    (stop sending, keep the connection) | disconnect (drop the connection) | engine_error (an in-stream
    error object) | no_done (omit `data: [DONE]`); mid-stream failures replace chunk `fail_after_chunks`.
    """

    ttft_s: float = 0.05
    chunk_delay_s: float = 0.01
    tokens_per_chunk: int = 1
    output_tokens: int = 16
    usage_per_chunk: bool = True
    """Honour `continuous_usage_stats` (cumulative usage in every chunk), like vLLM."""
    spec_metrics: bool = False
    """Put a vLLM-style `metrics.speculative_decoding` object in the final usage chunk."""
    failure: str | None = None
    fail_after_chunks: int = 0

    def __post_init__(self) -> None:
        if self.failure not in _FAILURES:
            raise ValueError(f"unknown failure {self.failure!r}; known: {sorted(f for f in _FAILURES if f)}")


def programmed(behavior: StubBehavior, max_tokens: int | None = None) -> dict[str, float]:
    """The programmed TTFT / TPOT / E2E (ms), tokens and chunks of a successful request."""
    tokens = behavior.output_tokens if max_tokens is None else min(behavior.output_tokens, max_tokens)
    chunks = math.ceil(tokens / behavior.tokens_per_chunk)
    ttft = behavior.ttft_s * 1000.0
    e2e = ttft + (chunks - 1) * behavior.chunk_delay_s * 1000.0
    tpot = (e2e - ttft) / (tokens - 1) if tokens > 1 else float("nan")
    return {"ttft_ms": ttft, "tpot_ms": tpot, "e2e_ms": e2e, "tokens": float(tokens), "chunks": float(chunks)}


def _prompt_text(body: dict[str, Any]) -> str:
    if "messages" in body:
        return " ".join(str(m.get("content", "")) for m in body["messages"])
    prompt = body.get("prompt", "")
    return prompt if isinstance(prompt, str) else json.dumps(prompt)


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _plain(status: str, payload: Any) -> bytes:
    body = json.dumps(payload).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


class _Script:
    """The SSE payload of each scheduled write, rendered when it is due (a burst of arriving requests
    must not queue behind each other's JSON encoding); the last write carries the usage tail."""

    def __init__(self, body: dict[str, Any], b: StubBehavior, chat: bool) -> None:
        self.body, self.b, self.chat = body, b, chat
        max_tokens = int(body.get("max_tokens") or b.output_tokens)
        self.n_tokens = min(b.output_tokens, max_tokens)
        self.finish = "length" if self.n_tokens == max_tokens else "stop"
        opts = body.get("stream_options") or {}
        self.include_usage = bool(opts.get("include_usage"))
        self.per_chunk = self.include_usage and bool(opts.get("continuous_usage_stats")) and b.usage_per_chunk
        self.want_ids = bool(body.get("return_token_ids"))
        self.prompt_tokens = len(_prompt_text(body).split())
        self.kind = "chat.completion.chunk" if chat else "text_completion"

    def __len__(self) -> int:
        return math.ceil(self.n_tokens / self.b.tokens_per_chunk)

    def key(self) -> tuple[Any, ...]:
        """Everything a rendered write depends on (so identical requests share rendered bytes)."""
        flags = (self.chat, self.n_tokens, self.finish, self.include_usage, self.per_chunk, self.want_ids)
        return (*flags, self.prompt_tokens, str(self.body.get("model")), self.b)

    def _chunk(self, choice: dict[str, Any] | None, completion: int | None) -> dict[str, Any]:
        obj: dict[str, Any] = {"id": "stub", "object": self.kind, "created": 0, "model": self.body.get("model")}
        obj["choices"] = [choice] if choice is not None else []
        if completion is not None:
            total = self.prompt_tokens + completion
            obj["usage"] = {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion, "total_tokens": total}
        return obj

    def render(self, k: int) -> bytes:
        """Write k (0-based)."""
        first = k * self.b.tokens_per_chunk
        ids = list(range(first, min(first + self.b.tokens_per_chunk, self.n_tokens)))
        sent = first + len(ids)
        data = b""
        if self.chat and k == 0:  # vLLM sends the role-only chunk together with the first token
            role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
            data += _sse(self._chunk(role, 0 if self.per_chunk else None))
        text = "".join(f" t{i}" for i in ids)
        choice: dict[str, Any] = {"index": 0, "delta": {"content": text}} if self.chat else {"index": 0, "text": text}
        choice["finish_reason"] = self.finish if sent == self.n_tokens else None
        if self.want_ids:
            choice["token_ids"] = ids
        data += _sse(self._chunk(choice, sent if self.per_chunk else None))
        if sent < self.n_tokens:
            return data
        if self.include_usage:
            final = self._chunk(None, sent)
            if self.b.spec_metrics:
                spec = {"num_spec_steps": 4, "num_draft_tokens": 12, "num_accepted_draft_tokens": 6}
                final["metrics"] = {"speculative_decoding": {**spec, "mean_acceptance_length": 2.5}}
            data += _sse(final)
        if self.b.failure != "no_done":
            data += b"data: [DONE]\n\n"
        return data


@dataclass(slots=True)
class _Stream:
    conn: _Connection
    b: StubBehavior
    script: _Script
    write_times: list[float]
    t0: float
    key: tuple[Any, ...] = ()


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; requests are handled one at a time."""

    def __init__(self, server: _Stub) -> None:
        self.server = server
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.timer: asyncio.TimerHandle | None = None
        self.arrival = (0.0, 0.0)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.transport = None

    def data_received(self, data: bytes) -> None:
        # Stamp the arrival now, parse in a later callback: when a burst of requests becomes readable in
        # one loop iteration, every request is stamped before any of them is parsed.
        self.arrival = (time.perf_counter(), self.server.loop.time())
        self.buffer += data
        self.server.loop.call_soon(self._next_request)

    def _next_request(self) -> None:
        if self.busy or self.transport is None:
            return
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return
        lines = self.buffer[:head_end].decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        if len(self.buffer) < head_end + 4 + length:
            return
        body = self.buffer[head_end + 4 : head_end + 4 + length]
        self.buffer = self.buffer[head_end + 4 + length :]
        method, path, _ = lines[0].split(" ", 2)
        self.busy = True
        self.server.handle(self, method, path, headers, body)

    def finish(self, data: bytes = b"") -> None:
        """Write the rest of a response and take the next request."""
        if self.transport is not None and data:
            self.transport.write(data)
        self.busy = False
        self.timer = None
        self._next_request()


class _Stub:
    def __init__(self, default: StubBehavior) -> None:
        self.default = default
        self.received: list[dict[str, Any]] = []
        self.loop = asyncio.get_running_loop()
        # Rendered HTTP chunks of identical requests are reused, so the zero-delay stub costs far less CPU
        # than the client it benchmarks; bounded so a long run cannot grow it without limit.
        self.rendered: dict[tuple[Any, ...], bytes] = {}

    def handle(self, conn: _Connection, method: str, path: str, headers: dict[str, str], raw: bytes) -> None:
        arrived, now = conn.arrival  # perf_counter (the client's clock too) and loop time of the arrival
        if method == "GET" and path in {"/health", "/v1/models", "/stub/requests"}:
            models = {"object": "list", "data": [{"id": "stub-model", "object": "model"}]}
            conn.finish(_plain("200 OK", self.received if path == "/stub/requests" else models))
            return
        if method == "POST" and path == "/stub/reset":
            self.received.clear()
            conn.finish(_plain("200 OK", {"ok": True}))
            return
        if method != "POST" or path not in {"/v1/chat/completions", "/v1/completions"}:
            conn.finish(_plain("404 Not Found", {"error": {"message": f"no route {method} {path}"}}))
            return
        body = json.loads(raw)
        log: dict[str, Any] = {"path": path, "body": body, "authorization": headers.get("authorization")}
        log.update(arrived=arrived, writes=[])
        self.received.append(log)
        match = _DIRECTIVE.search(_prompt_text(body))
        b = dataclasses.replace(self.default, **json.loads(match.group(1))) if match else self.default
        if b.failure == "http_500":
            conn.finish(_plain("500 Internal Server Error", {"error": {"message": "stub: programmed failure"}}))
            return
        script = _Script(body, b, chat=path.endswith("chat/completions"))
        stream = _Stream(conn, b, script, log["writes"], now, script.key())
        assert conn.transport is not None
        conn.transport.write(_SSE_HEAD)
        self._emit(stream, 0)

    def _emit(self, s: _Stream, k: int) -> None:
        """Write chunk k-1 (k >= 1), then schedule chunk k at its programmed time."""
        transport = s.conn.transport
        if transport is None:
            return
        if k and s.b.failure in _MID_STREAM and k - 1 == s.b.fail_after_chunks:
            self._fail(s.conn, s.b.failure)
            return
        if k:
            s.write_times.append(time.perf_counter())
            key = (*s.key, k)
            data = self.rendered.get(key)
            if data is None:
                data = _http_chunk(s.script.render(k - 1))
                if len(self.rendered) < 100_000:
                    self.rendered[key] = data
            transport.write(data)
            if k == len(s.script):
                s.conn.finish(b"0\r\n\r\n")
                return
        deadline = s.t0 + s.b.ttft_s + k * s.b.chunk_delay_s
        # Always through the loop (call_at), so zero-delay chunks still leave in separate writes.
        s.conn.timer = self.loop.call_at(deadline, self._emit, s, k + 1)

    def _fail(self, conn: _Connection, failure: str) -> None:
        assert conn.transport is not None
        if failure == "disconnect":
            conn.transport.abort()
            return
        if failure == "hang":
            return
        data = {
            "malformed": b"data: {this is not json\n\n",
            "garbage_line": b"garbage that is not an event\n\n",
            "engine_error": _sse({"error": {"message": "stub: engine blew up", "code": 500}}),
        }[failure]
        conn.finish(_http_chunk(data + b"data: [DONE]\n\n") + b"0\r\n\r\n")


async def _serve(default: StubBehavior, host: str) -> None:
    loop = asyncio.get_running_loop()
    stub = _Stub(default)
    server = await loop.create_server(lambda: _Connection(stub), host, 0, backlog=1024)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"{_READY} {server.sockets[0].getsockname()[1]}", flush=True)
    await stop.wait()
    server.close()


def main(argv: list[str] | None = None) -> None:
    """Command line: `--behavior JSON` (StubBehavior fields), `--host` (default 127.0.0.1)."""
    parser = argparse.ArgumentParser(description="programmed OpenAI-compatible streaming stub")
    parser.add_argument("--behavior", default="{}")
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    default = StubBehavior(**json.loads(args.behavior))
    with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(selectors.SelectSelector())) as runner:
        runner.run(_serve(default, args.host))


class StubServer:
    """Runs the stub in a separate process; `base_url` is valid inside the `with` block."""

    def __init__(self, behavior: StubBehavior | None = None, *, start_timeout_s: float = 30.0) -> None:
        self.behavior = behavior or StubBehavior()
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[str] | None = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The stub process id."""
        assert self.proc is not None
        return self.proc.pid

    def __enter__(self) -> StubServer:
        behavior = json.dumps(dataclasses.asdict(self.behavior))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--behavior", behavior]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            if not select.select([self.proc.stdout], [], [], remaining)[0]:
                break
            line = self.proc.stdout.readline()
            if line.startswith(_READY):
                self.port = int(line.split()[1])
                return self
            if not line:
                break
        self.__exit__()
        raise RuntimeError(f"stub server did not start (exit code {self.proc.poll()})")

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def received(self) -> list[dict[str, Any]]:
        """Every completion request the stub received since start or the last `reset()`."""
        with urllib.request.urlopen(f"{self.base_url}/stub/requests", timeout=10) as resp:
            data: list[dict[str, Any]] = json.loads(resp.read())
        return data

    def reset(self) -> None:
        """Forget the received requests."""
        req = urllib.request.Request(f"{self.base_url}/stub/reset", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=10):
            pass


if __name__ == "__main__":
    main()
