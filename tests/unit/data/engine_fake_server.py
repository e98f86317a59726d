"""A tiny stand-in server the ServerProcess tests control (stdlib only; accepts and ignores vLLM's flags).

--mode ok       serve /health, /v1/models, /v1/chat/completions, /metrics (from --metrics-file), /env
--mode exit     print a few lines (one with $FAKE_SECRET_TOKEN) and exit with code 3
--mode never    listen, but /health answers 503 forever
--child         also start a sleeping child process (in the same process group)
--ignore-term   ignore SIGTERM (so only SIGKILL ends it)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

from fake_http_server import FakeHandler, serve


class Handler(FakeHandler):
    options = argparse.Namespace()
    ready_at = 0.0
    api_key = os.environ.get("VLLM_API_KEY")

    def do_GET(self) -> None:
        if self.path == "/health":
            ok = self.options.mode == "ok" and time.monotonic() >= self.ready_at
            self._send(200 if ok else 503, b"")
        elif self.path == "/v1/models":
            if self._authorised():
                self._send(200, json.dumps({"data": [{"id": self.options.served_model_name}]}).encode())
        elif self.path == "/metrics" and self.options.metrics_file:
            with open(self.options.metrics_file, "rb") as fh:
                self._send(200, fh.read(), "text/plain")
        elif self.path == "/env":
            keys = (
                "TMPDIR",
                "VLLM_CACHE_ROOT",
                "HF_HUB_OFFLINE",
                "TRANSFORMERS_OFFLINE",
                "VLLM_NO_USAGE_STATS",
                "LD_PRELOAD",
            )
            self._send(200, json.dumps({k: os.environ.get(k) for k in keys} | {"cwd": os.getcwd()}).encode())
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
            body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": self.options.reply}}]}
            self._send(200, json.dumps(body).encode())


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--mode", default="ok", choices=["ok", "exit", "never"])
    parser.add_argument("--served-model-name", default="fake-model")
    parser.add_argument("--metrics-file", default=None)
    parser.add_argument("--reply", default="Hello there.")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--ready-after", type=float, default=0.0)
    args, _unknown = parser.parse_known_args()
    return args


def main() -> int:
    args = _arguments()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.child:
        subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)"])
    print(f"fake server starting, argv={sys.argv[1:]}", flush=True)
    if args.mode == "exit":
        print(f"loading model failed; token in use: {os.environ.get('FAKE_SECRET_TOKEN', '')}", flush=True)
        print("RuntimeError: fake failure for the test", flush=True)
        return 3
    Handler.options = args
    Handler.ready_at = time.monotonic() + args.ready_after
    return serve(args.host, args.port, Handler)


if __name__ == "__main__":
    sys.exit(main())
