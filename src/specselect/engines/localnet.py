"""Local ports and proxy-free HTTP to servers on this machine."""

from __future__ import annotations

import http.client
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping

__all__ = ["local_request", "pick_free_port", "port_is_free", "url_host"]


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
