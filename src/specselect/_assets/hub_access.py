"""Can this host download a repository from the model hub: is the endpoint reachable, does it let this token in?

`specselect doctor` asks before a run that needs a download, with plain HTTP and a short deadline (nothing is
downloaded, no hub library is needed): the repository's listing (`GET <endpoint>/api/models/<repo>/revision/<rev>
?blobs=true`, which also gives the files' sizes) and its `config.json` (`HEAD <endpoint>/<repo>/resolve/<rev>/
config.json`, redirects not followed), which a gated repository refuses without a token that has access (401 or
403). The hub names each refusal in its `X-Error-Code` header (GatedRepo, RepoNotFound, ...), as its own client
reads it; a refusal without one came from something in between (a proxy or firewall) and is reported as such.
The token comes from `HF_TOKEN` (or the older `HUGGING_FACE_HUB_TOKEN`), is sent only in the
Authorization header and never appears in an answer. The endpoint is `HF_ENDPOINT`, else the default of the hub
library of specselect's or the engine's environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from specselect._assets.hub_files import expected_bytes, wanted_files
from specselect.records.doctor import HubAnswer

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "TOKEN_VARS",
    "ask_hub",
    "download_size",
    "endpoint_override",
    "hub_endpoint",
    "hub_token",
]

DEFAULT_TIMEOUT_S = 5.0
"""The whole question (name lookup, connection, both requests) gets this long; an answer after it counts as none."""
TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
_ENDPOINT_SCRIPT = "from huggingface_hub import constants; print(constants.ENDPOINT)"


def hub_token(environ: Mapping[str, str] | None = None) -> str | None:
    """The hub token of the environment (None when unset or empty)."""
    env = os.environ if environ is None else environ
    return next((env[name] for name in TOKEN_VARS if env.get(name, "").strip()), None)


def endpoint_override(environ: Mapping[str, str] | None = None) -> str | None:
    """`HF_ENDPOINT` when set (None: the hub library's default applies)."""
    env = os.environ if environ is None else environ
    return env.get("HF_ENDPOINT", "").strip().rstrip("/") or None


def hub_endpoint(environ: Mapping[str, str] | None = None, python: Path | None = None) -> str | None:
    """`HF_ENDPOINT`, else the hub library's default (here, else in the environment of `python`); None when
    neither has one."""
    override = endpoint_override(environ)
    if override is not None:
        return override
    try:
        from huggingface_hub import constants  # type: ignore[import-not-found, unused-ignore]

        return str(constants.ENDPOINT).rstrip("/")
    except ImportError:
        pass
    if python is None:
        return None
    try:
        proc = subprocess.run(
            [str(python), "-c", _ENDPOINT_SCRIPT], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[-1].strip().rstrip("/") if proc.returncode == 0 and lines else None


def download_size(siblings: Any) -> int | None:
    """The bytes a fetch takes of a repository listed with `blobs=true` (the files `hub_files` says a fetch takes);
    None when the listing has no sizes."""
    if not isinstance(siblings, list):
        return None
    listed = {str(s.get("rfilename")): s.get("size") for s in siblings if isinstance(s, dict)}
    return expected_bytes({name: _size(listed[name]) for name in wanted_files(listed)})


def _size(value: Any) -> int | None:
    return value if isinstance(value, int) else None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect (to the file's storage) already says the hub lets this host have the file: do not follow it."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Reply(NamedTuple):
    status: int
    body: bytes
    error_code: str | None
    """The hub's `X-Error-Code` (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo); None without one."""
    server: str | None


def _request(url: str, method: str, token: str | None, timeout_s: float) -> _Reply:
    headers = {"User-Agent": "specselect-doctor"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, method=method, headers=headers)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=timeout_s) as response:
            body = response.read() if method == "GET" else b""
            return _Reply(int(response.status), body, None, response.headers.get("Server"))
    except urllib.error.HTTPError as exc:
        with contextlib.closing(exc):
            return _Reply(int(exc.code), b"", exc.headers.get("X-Error-Code"), exc.headers.get("Server"))


_NOT_FOUND = ("RepoNotFound", "RevisionNotFound", "EntryNotFound")


def _refused(repo: str, revision: str, reply: _Reply, token: str | None, what: str) -> HubAnswer:
    """A refusal the hub itself gave (it names it in X-Error-Code; 403 with a token: no access), else an answer
    from something between this host and the hub (a proxy, a firewall), which says nothing about the repository."""
    said = f"{what} answered HTTP {reply.status}"
    fields: dict[str, Any] = {"repo": repo, "revision": revision, "http_status": reply.status}
    if reply.error_code == "GatedRepo" or (reply.status == 403 and token and reply.error_code is None):
        detail = (
            f"{said}: the token has no access (a gated repository: accept its terms on the hub with this token's "
            "account)"
            if token
            else f"{said}: a gated repository, and no token is set"
        )
        return HubAnswer(**fields, outcome="gated", detail=detail)
    if reply.error_code in _NOT_FOUND:
        private = "" if token else " (or a private one: it needs a token)"
        return HubAnswer(**fields, outcome="not_found", detail=f"{said} {reply.error_code}{private}")
    if reply.error_code is None and reply.status >= 400:
        server = f" (server: {reply.server})" if reply.server else ""
        detail = f"{said} without the hub's error code{server}: a proxy or firewall answered, not the hub"
        return HubAnswer(**fields, outcome="unreachable", detail=detail)
    return HubAnswer(**fields, outcome="error", detail=f"{said} {reply.error_code or ''}".strip())


def _ask(endpoint: str, repo: str, revision: str, token: str | None, timeout_s: float) -> HubAnswer:
    rev = urllib.parse.quote(revision, safe="")
    listing = _request(f"{endpoint}/api/models/{repo}/revision/{rev}?blobs=true", "GET", token, timeout_s)
    if listing.status != 200:
        return _refused(repo, revision, listing, token, "the repository listing")
    try:
        size = download_size(json.loads(listing.body).get("siblings"))
    except (ValueError, AttributeError):
        size = None
    config = _request(f"{endpoint}/{repo}/resolve/{rev}/config.json", "HEAD", token, timeout_s)
    if not 200 <= config.status < 400:
        return _refused(repo, revision, config, token, "its config.json")
    return HubAnswer(repo=repo, revision=revision, outcome="ok", http_status=config.status, size_bytes=size)


def ask_hub(
    endpoint: str, repo: str, revision: str = "main", *, token: str | None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> HubAnswer:
    """What `endpoint` says about downloading `repo` at `revision` with `token`, within `timeout_s` overall.

    Runs in a daemon thread: a name lookup that hangs (no network, a resolver that never answers) is given up at
    the deadline instead of holding the caller."""
    answer: list[HubAnswer] = []

    def ask() -> None:
        try:
            answer.append(_ask(endpoint, repo, revision, token, timeout_s))
        except (OSError, ValueError) as exc:  # URLError, timeouts, refused connections, a malformed endpoint
            reason = getattr(exc, "reason", exc)
            answer.append(
                HubAnswer(
                    repo=repo, revision=revision, outcome="unreachable", detail=f"cannot reach {endpoint}: {reason}"
                )
            )

    worker = threading.Thread(target=ask, name="hub-check", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if answer:
        return answer[0]
    detail = f"cannot reach {endpoint}: no answer within {timeout_s:g} s"
    return HubAnswer(repo=repo, revision=revision, outcome="unreachable", detail=detail)
