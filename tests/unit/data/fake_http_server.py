"""What the engine tests' stand-in servers share (stdlib only): a quiet JSON handler and the serve loop.

Used by engine_fake_server.py (next to it) and sglang_fake_launch_server.py (installed next to it in the
fake SGLang package by sglang_fake_install.py).
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["FakeHandler", "serve"]


class FakeHandler(BaseHTTPRequestHandler):
    """A handler that logs nothing and answers JSON; requests need `Bearer <api_key>` when `api_key` is set."""

    api_key: str | None = None

    def log_message(self, format: str, *a: object) -> None:
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorised(self) -> bool:
        if self.api_key and self.headers.get("Authorization") != f"Bearer {self.api_key}":
            self._send(401, b'{"error": "unauthorised"}')
            return False
        return True


def serve(host: str, port: int, handler: type[FakeHandler]) -> int:
    """Serve until killed (the tests stop the server's process group), announcing the address like engines do."""
    server = ThreadingHTTPServer((host, port), handler)
    print(f"listening on {host}:{port}", flush=True)
    server.serve_forever()
    return 0
