"""A stand-in for `python -m sglang.launch_server` (stdlib only), installed as `sglang/launch_server.py`
of the fake package layout the SGLang unit tests build.

It speaks the part of SGLang's protocol specselect uses: /health, /v1/models, /v1/chat/completions,
/server_info (or only /get_server_info with --fake-old-endpoint), and /metrics with SGLang's request
counters when started with --enable-metrics. Every chat request "generates" 9 tokens: one from prefill
and 4 verify steps of accept length 2 (so the window's mean acceptance length is exactly 2.0).
Like SGLang, it prints its server arguments, the API key included, when it starts. With `"stream": true` it
answers in OpenAI's server-sent events (the 8 completion tokens `t0 .. t7`, their ids when asked for with
`return_token_ids`, and a usage chunk), as specselect's measuring client requests.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

# fake_http_server.py sits next to this file (sglang_fake_install copies both into the fake package).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_http_server import FakeHandler, serve

TOKENS_PER_REQUEST = 9
STEPS_PER_REQUEST = 4


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--served-model-name", default="fake-model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--config", default=None)
    parser.add_argument("--enable-metrics", action="store_true")
    parser.add_argument("--speculative-algorithm", default=None)
    parser.add_argument("--speculative-num-steps", type=int, default=None)
    parser.add_argument("--speculative-eagle-topk", type=int, default=None)
    parser.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    parser.add_argument("--speculative-draft-model-path", default=None)
    parser.add_argument("--fake-old-endpoint", action="store_true")
    parser.add_argument("--fake-expose-counts", action="store_true")
    args, _unknown = parser.parse_known_args()
    if args.config:  # SGLang's YAML config file; specselect writes `api-key: "<JSON string>"` lines only
        for line in Path(args.config).read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "api-key":
                args.api_key = json.loads(value)
    return args


class _Served:
    """The requests served so far (the handler threads share it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests = 0

    def add(self) -> None:
        with self._lock:
            self._requests += 1

    @property
    def requests(self) -> int:
        with self._lock:
            return self._requests


FAKE_POOL_TOKENS = 412_160
"""The KV pool a target-only server reports (`max_total_num_tokens`, as in the recorded answers)."""
FAKE_DRAFT_TOKENS = 51_520
"""What a server with a draft model gives up of it (an eighth: the fake's figure, not a measurement)."""


def server_info(args: argparse.Namespace, n: int) -> dict[str, object]:
    steps = n * STEPS_PER_REQUEST
    accepted_with_bonus = n * (TOKENS_PER_REQUEST - 1)
    internal: dict[str, object] = {"last_gen_throughput": 12.5}
    if args.speculative_algorithm and steps:
        internal["avg_spec_accept_length"] = accepted_with_bonus / steps
    if args.fake_expose_counts and args.speculative_algorithm:
        internal["spec_total_num_accept_tokens"] = accepted_with_bonus
        internal["spec_total_num_forward_ct"] = steps
    return {
        "model_path": args.model_path,
        "served_model_name": args.served_model_name,
        "api_key": args.api_key,
        "speculative_algorithm": args.speculative_algorithm,
        "speculative_num_steps": args.speculative_num_steps,
        "speculative_eagle_topk": args.speculative_eagle_topk,
        "speculative_num_draft_tokens": args.speculative_num_draft_tokens,
        "decode_log_interval": 40,
        # The KV pool: a draft model's layers take their share of the same memory (SGLang sizes one pool).
        "max_total_num_tokens": FAKE_POOL_TOKENS - (FAKE_DRAFT_TOKENS if args.speculative_draft_model_path else 0),
        "context_length": 8192,
        "internal_states": [internal],
        "version": "0.5.4",
    }


def metrics(args: argparse.Namespace, n: int) -> str:
    label = f'{{model_name="{args.served_model_name}",engine_type="unified"}}'
    lines = [
        "# TYPE sglang:num_requests counter",
        f"sglang:num_requests_total{label} {float(n)}",
        "# TYPE sglang:generation_tokens counter",
        f"sglang:generation_tokens_total{label} {float(n * TOKENS_PER_REQUEST)}",
        "# TYPE sglang:token_usage gauge",
        f"sglang:token_usage{label} {min(1.0, 0.01 * n)}",
    ]
    if args.speculative_algorithm:
        lines += [
            "# TYPE sglang:spec_verify_calls counter",
            f"sglang:spec_verify_calls_total{label} {float(n * STEPS_PER_REQUEST)}",
        ]
    return "\n".join(lines) + "\n"


def stream_events(request: dict[str, object]) -> list[dict[str, object]]:
    """The chunks of one streamed answer: the role, `t0 ..` with ids when asked for, then the usage."""
    max_tokens = request.get("max_tokens")
    n = min(TOKENS_PER_REQUEST - 1, max_tokens if isinstance(max_tokens, int) else TOKENS_PER_REQUEST)
    role = {"index": 0, "delta": {"role": "assistant", "content": ""}}
    events: list[dict[str, object]] = [{"choices": [role]}]
    for i in range(n):
        choice: dict[str, object] = {"index": 0, "delta": {"content": f" t{i}"}}
        choice["finish_reason"] = "length" if i == n - 1 else None
        if request.get("return_token_ids"):
            choice["token_ids"] = [i]
        events.append({"choices": [choice]})
    usage = {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}
    events.append({"choices": [], "usage": usage})
    return events


class Handler(FakeHandler):
    options = argparse.Namespace()
    served = _Served()

    def do_GET(self) -> None:
        args = self.options
        info_paths = ("/get_server_info",) if args.fake_old_endpoint else ("/server_info", "/get_server_info")
        if self.path == "/health":
            self._send(200, b"")
        elif not self._authorised():
            return
        elif self.path == "/v1/models":
            self._send(200, json.dumps({"data": [{"id": args.served_model_name}]}).encode())
        elif self.path in info_paths:
            self._send(200, json.dumps(server_info(args, self.served.requests)).encode())
        elif self.path == "/metrics" and args.enable_metrics:
            self._send(200, metrics(args, self.served.requests).encode(), "text/plain")
        else:
            self._send(404, b"{}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        if self.path != "/v1/chat/completions":
            self._send(404, b"{}")
        elif not self._authorised():
            return
        elif request.get("model") != self.options.served_model_name:
            self._send(404, b'{"error": "no such model"}')
        else:
            self.served.add()
            self._answer(request)

    def _answer(self, request: dict[str, object]) -> None:
        if not request.get("stream"):
            body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there."}}]}
            self._send(200, json.dumps(body).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for event in stream_events(request):
            chunk = json.dumps({"object": "chat.completion.chunk", **event}).encode()
            self.wfile.write(b"data: " + chunk + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main() -> int:
    args = _arguments()
    print(f"server_args=ServerArgs(model_path={args.model_path!r}, api_key={args.api_key!r})", flush=True)
    Handler.options = args
    Handler.api_key = args.api_key
    return serve(args.host, args.port, Handler)


if __name__ == "__main__":
    sys.exit(main())
