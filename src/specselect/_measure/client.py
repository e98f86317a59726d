"""The hot path: send one streaming request and keep raw bytes with their arrival times.

Nothing is parsed while a stream is open: each network read costs one clock call and one list append,
so busy parsing never delays the timestamps of other in-flight streams. `stream.build_record` decodes
the bytes after the scenario has finished.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from time import perf_counter

import aiohttp

from specselect._measure.requestplan import PlannedRequest
from specselect.errors import ConfigError
from specselect.records.measurement import Endpoint, ErrorKind

__all__ = ["RawExchange", "auth_headers", "open_session", "send_streaming"]

_ERROR_BODY_LIMIT = 300


@dataclass(slots=True)
class RawExchange:
    """What arrived for one request, undecoded; filled in place so a cancelled request keeps its part."""

    planned: PlannedRequest
    scheduled_time: float | None = None
    send_time: float | None = None
    end_time: float | None = None
    status: int | None = None
    reads: list[tuple[float, bytes]] = field(default_factory=list)
    error_kind: ErrorKind | None = None
    error: str | None = None


def auth_headers(endpoint: Endpoint) -> dict[str, str]:
    """Request headers; the API key is read from the environment now and kept nowhere else."""
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if endpoint.api_key_env:
        key = os.environ.get(endpoint.api_key_env)
        if not key:
            raise ConfigError(
                f"environment variable {endpoint.api_key_env} is not set",
                location="endpoint.api_key_env",
                fix=f"export {endpoint.api_key_env}=<key> or drop api_key_env",
            )
        headers["Authorization"] = f"Bearer {key}"
    return headers


def open_session(request_timeout_s: float, connections: int) -> aiohttp.ClientSession:
    """A session with a keep-alive pool sized for the load (0 = unlimited) and per-request time-outs."""
    connector = aiohttp.TCPConnector(limit=max(0, connections), force_close=False, enable_cleanup_closed=False)
    timeout = aiohttp.ClientTimeout(total=request_timeout_s, sock_connect=min(30.0, request_timeout_s))
    # No cookie jar and no decompression: less work per request on the hot path.
    return aiohttp.ClientSession(
        connector=connector, timeout=timeout, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar()
    )


def _scrub(text: str, headers: dict[str, str]) -> str:
    # Defence in depth: an exception message must never carry the key into a record.
    auth = headers.get("Authorization")
    if auth:
        text = text.replace(auth, "Bearer ***").replace(auth.removeprefix("Bearer "), "***")
    return text


async def send_streaming(
    session: aiohttp.ClientSession,
    url: str,
    headers: dict[str, str],
    raw: RawExchange,
    request_timeout_s: float,
) -> None:
    """POST `raw.planned.body` and record every read with its arrival time into `raw`.

    Failures are written into `raw` (kind + one-line message), never raised; cancellation propagates
    and leaves whatever had arrived in `raw`.
    """
    clock = perf_counter
    reads = raw.reads
    raw.send_time = clock()
    try:
        async with asyncio.timeout(request_timeout_s):
            async with session.post(url, data=raw.planned.body, headers=headers) as resp:
                raw.status = resp.status
                if resp.status != 200:
                    body = await resp.read()
                    raw.end_time = clock()
                    raw.error_kind = ErrorKind.HTTP_ERROR
                    snippet = body[:_ERROR_BODY_LIMIT].decode("utf-8", "replace")
                    raw.error = _scrub(f"HTTP {resp.status} from {url}: {' '.join(snippet.split())}", headers)
                    return
                async for data in resp.content.iter_any():
                    reads.append((clock(), data))
                raw.end_time = clock()
    except TimeoutError:
        raw.end_time = clock()
        raw.error_kind = ErrorKind.REQUEST_TIMEOUT
        raw.error = f"no complete answer from {url} within {request_timeout_s:g} s (request time-out)"
    except (aiohttp.ClientError, OSError) as exc:
        raw.end_time = clock()
        raw.error_kind = ErrorKind.CONNECTION_ERROR
        raw.error = _scrub(f"{type(exc).__name__} talking to {url}: {' '.join(str(exc).split())}", headers)
