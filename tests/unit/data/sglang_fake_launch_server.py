"""A stand-in for `python -m sglang.launch_server` (stdlib only), installed as `sglang/launch_server.py`
of the fake package layout the SGLang unit tests build.

It speaks the part of SGLang's protocol specselect uses: /health, /v1/models, /v1/chat/completions,
/server_info (or only /get_server_info with --fake-old-endpoint), and /metrics with SGLang's request
counters when started with --enable-metrics. Every chat request "generates" 9 tokens: one from prefill
and 4 verify steps of accept length 2 (so the window's mean acceptance length is exactly 2.0).
Like SGLang, it prints its server arguments, the API key included, when it starts.
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--served-model-name", default="fake-model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--enable-metrics", action="store_true")
    parser.add_argument("--speculative-algorithm", default=None)
    parser.add_argument("--speculative-num-steps", type=int, default=None)
    parser.add_argument("--speculative-eagle-topk", type=int, default=None)
    parser.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    parser.add_argument("--fake-old-endpoint", action="store_true")
    parser.add_argument("--fake-expose-counts", action="store_true")
    args, _unknown = parser.parse_known_args()
    print(f"server_args=ServerArgs(model_path={args.model_path!r}, api_key={args.api_key!r})", flush=True)

    lock = threading.Lock()
    state = {"requests": 0}

    def server_info() -> dict[str, object]:
        with lock:
            n = state["requests"]
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
            "internal_states": [internal],
            "version": "0.5.4",
        }

    def metrics() -> str:
        with lock:
            n = state["requests"]
        label = f'{{model_name="{args.served_model_name}",engine_type="unified"}}'
        lines = [
            "# TYPE sglang:num_requests counter",
            f"sglang:num_requests_total{label} {float(n)}",
            "# TYPE sglang:generation_tokens counter",
            f"sglang:generation_tokens_total{label} {float(n * TOKENS_PER_REQUEST)}",
        ]
        if args.speculative_algorithm:
            lines += [
                "# TYPE sglang:spec_verify_calls counter",
                f"sglang:spec_verify_calls_total{label} {float(n * STEPS_PER_REQUEST)}",
            ]
        return "\n".join(lines) + "\n"

    class Handler(FakeHandler):
        api_key = args.api_key

        def do_GET(self) -> None:
            info_paths = ("/get_server_info",) if args.fake_old_endpoint else ("/server_info", "/get_server_info")
            if self.path == "/health":
                self._send(200, b"")
            elif not self._authorised():
                return
            elif self.path == "/v1/models":
                self._send(200, json.dumps({"data": [{"id": args.served_model_name}]}).encode())
            elif self.path in info_paths:
                self._send(200, json.dumps(server_info()).encode())
            elif self.path == "/metrics" and args.enable_metrics:
                self._send(200, metrics().encode(), "text/plain")
            else:
                self._send(404, b"{}")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/v1/chat/completions":
                self._send(404, b"{}")
                return
            if not self._authorised():
                return
            if request.get("model") != args.served_model_name:
                self._send(404, b'{"error": "no such model"}')
                return
            with lock:
                state["requests"] += 1
            body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there."}}]}
            self._send(200, json.dumps(body).encode())

    return serve(args.host, args.port, Handler)


if __name__ == "__main__":
    sys.exit(main())
