"""HTTP to servers on this machine: free ports, proxy-free requests, the API key, and the sanity check."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, Literal

from specselect._engines.base import RunningServer
from specselect.errors import ProtocolError, ServerTimeoutError
from specselect.records.server import SanityResult

__all__ = [
    "local_request",
    "pick_free_port",
    "port_is_free",
    "sanity_check",
    "server_api_key",
    "server_get",
    "url_host",
]


def pick_free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free on `host` right now (it may be taken again before the server binds)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    """True when a new server could bind `host:port` (SO_REUSEADDR, as servers do)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def local_request(
    method: str,
    url: str,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
) -> tuple[int, bytes]:
    """One HTTP request that never goes through a proxy: (status, body) for any answer; OSError otherwise."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    try:
        with opener.open(request, timeout=timeout_s) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return int(exc.code), exc.read()
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise TimeoutError(f"{method} {url}: timed out after {timeout_s} s") from exc
        raise
    except http.client.HTTPException as exc:
        # A half-started or dying server can answer garbage; callers treat it like no answer.
        raise ConnectionError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc


def url_host(host: str) -> str:
    """The host part of a URL that reaches a server bound to `host` from this machine."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def server_api_key(server: RunningServer) -> str | None:
    """The value of the server's `api_key_env` now (None when it names none or the variable is unset)."""
    return os.environ.get(server.api_key_env) if server.api_key_env else None


def server_get(
    base_url: str, path: str, *, timeout_s: float, headers: Mapping[str, str] | None = None
) -> tuple[int, bytes]:
    """GET `base_url + path` -> (status, body); ServerTimeoutError / ProtocolError when there is no answer."""
    url = f"{base_url}{path}"
    try:
        return local_request("GET", url, headers=headers, timeout_s=timeout_s)
    except TimeoutError as exc:
        raise ServerTimeoutError(
            f"{path} did not answer within {timeout_s:.0f} s", location=url, fix="read the log"
        ) from exc
    except OSError as exc:
        raise ProtocolError(f"{path} failed: {exc}", location=url, fix="check that the server runs") from exc


def _json(status: int, body: bytes, what: str) -> Any:
    if status != 200:
        snippet = body[:200].decode("utf-8", errors="replace").replace("\n", " ")
        raise ProtocolError(f"{what} answered HTTP {status}: {snippet}", location=what, fix="read the server log")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise ProtocolError(f"{what} did not answer JSON: {exc}", location=what, fix="read the server log") from exc


def _call(method: str, url: str, body: Mapping[str, Any] | None, headers: Mapping[str, str], timeout_s: float) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    all_headers = {"Content-Type": "application/json", **headers} if data is not None else dict(headers)
    try:
        status, raw = local_request(method, url, body=data, headers=all_headers, timeout_s=timeout_s)
    except TimeoutError as exc:
        raise ServerTimeoutError(f"no answer within {timeout_s:.0f} s", location=url, fix="read the log") from exc
    except OSError as exc:
        raise ProtocolError(f"request failed: {exc}", location=url, fix="check that the server is running") from exc
    return _json(status, raw, url)


def sanity_check(
    base_url: str,
    served_model: str,
    *,
    api_key: str | None = None,
    api: Literal["chat", "completions"] = "chat",
    prompt: str = "Say hello in one short sentence.",
    max_tokens: int = 16,
    timeout_s: float = 120.0,
) -> SanityResult:
    """GET /v1/models must list `served_model`; one short temperature-0 completion must return text."""
    started = time.monotonic()
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    listing = _call("GET", f"{base_url}/v1/models", None, headers, timeout_s)
    try:
        ids = tuple(str(entry["id"]) for entry in listing["data"])
    except (KeyError, TypeError) as exc:
        raise ProtocolError(
            f"/v1/models has no data[].id: {exc}", location=f"{base_url}/v1/models", fix="check the engine"
        ) from exc
    if served_model not in ids:
        raise ProtocolError(
            f"/v1/models lists {list(ids)}, not the served model {served_model!r}",
            location=f"{base_url}/v1/models",
            fix="another server may be listening on this port; check served_model_name",
        )
    request: dict[str, Any] = {"model": served_model, "max_tokens": max_tokens, "temperature": 0}
    if api == "chat":
        request["messages"] = [{"role": "user", "content": prompt}]
        url = f"{base_url}/v1/chat/completions"
    else:
        request["prompt"] = prompt
        url = f"{base_url}/v1/completions"
    answer = _call("POST", url, request, headers, timeout_s)
    try:
        choice = answer["choices"][0]
        text = choice["message"]["content"] if api == "chat" else choice["text"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ProtocolError(
            f"completion has no choices[0] text: {exc}", location=url, fix="check the engine's protocol"
        ) from exc
    if not isinstance(text, str) or not text.strip():
        raise ProtocolError(f"completion returned empty text {text!r}", location=url, fix="check the model files")
    return SanityResult(model_ids=ids, api=api, reply_text=text, seconds=round(time.monotonic() - started, 3))
