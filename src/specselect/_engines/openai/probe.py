"""What a running OpenAI-compatible endpoint says about itself: served models, engine version, metrics.

Nothing is launched. `/v1/models` gives the served model's identity (vLLM adds `root`, the weights it
loaded, and `max_model_len`); `/version` gives the engine version where the engine exposes it (vLLM
does); `/metrics` tells whether Prometheus telemetry is exported and by which engine.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from specselect._engines.http import local_request
from specselect._engines.prometheus import MetricsSnapshot, parse_prometheus
from specselect.errors import ConfigError, ProtocolError
from specselect.records.endpoints import EndpointProbe, MetricsFlavor, ServedIdentity

__all__ = [
    "endpoint_headers",
    "metrics_flavor",
    "probe_endpoint",
    "reported_snapshot",
]


def reported_snapshot(identity: ServedIdentity) -> str:
    """The target identity an endpoint reports: its weights (`root`, else the served id) and context length.

    Two endpoints serving the same weights under different served names are the same target; the same
    name over different weights is not.
    """
    what = f"root={identity.root}" if identity.root else f"id={identity.id}"
    return f"endpoint:{what};max_model_len={identity.max_model_len}"


def endpoint_headers(api_key_env: str | None) -> dict[str, str]:
    """The Authorization header from the named environment variable (read now, kept nowhere)."""
    if not api_key_env:
        return {}
    key = os.environ.get(api_key_env)
    if not key:
        raise ConfigError(
            f"environment variable {api_key_env} is not set",
            location="endpoint.api_key_env",
            fix=f"export {api_key_env}=<key> or drop api_key_env",
        )
    return {"Authorization": f"Bearer {key}"}


def metrics_flavor(snapshot: MetricsSnapshot) -> MetricsFlavor:
    """Which engine's metric names a scrape carries."""
    names = snapshot.names()
    if any(n.startswith("vllm:") for n in names):
        return "vllm"
    if any(n.startswith("sglang:") for n in names):
        return "sglang"
    return "unknown"


def _get(url: str, headers: dict[str, str], timeout_s: float) -> tuple[int, bytes]:
    try:
        return local_request("GET", url, headers=headers, timeout_s=timeout_s)
    except TimeoutError as exc:
        raise ProtocolError(f"no answer within {timeout_s:g} s", location=url, fix="check the server") from exc
    except OSError as exc:
        raise ProtocolError(f"cannot connect: {exc}", location=url, fix="check that the server runs") from exc


def _identity(entry: Any) -> ServedIdentity:
    mml = entry.get("max_model_len")
    return ServedIdentity(
        id=str(entry["id"]),
        root=str(entry["root"]) if entry.get("root") else None,
        max_model_len=mml if isinstance(mml, int) and not isinstance(mml, bool) else None,
        owned_by=str(entry["owned_by"]) if entry.get("owned_by") else None,
    )


def _models(base_url: str, model: str, headers: dict[str, str], timeout_s: float) -> dict[str, Any]:
    url = f"{base_url}/v1/models"
    status, body = _get(url, headers, timeout_s)
    if status != 200:
        snippet = " ".join(body[:200].decode("utf-8", "replace").split())
        raise ProtocolError(f"HTTP {status}: {snippet}", location=url, fix="check the URL and the API key")
    try:
        entries = json.loads(body)["data"]
        identities = [_identity(e) for e in entries]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ProtocolError(f"no data[].id list: {exc}", location=url, fix="is this an OpenAI server?") from exc
    ids = tuple(i.id for i in identities)
    found = next((i for i in identities if i.id == model), None)
    return {
        "model_ids": ids,
        "model_listed": found is not None,
        "identity": found,
        "target_snapshot": reported_snapshot(found) if found else None,
    }


def _version(base_url: str, headers: dict[str, str], timeout_s: float) -> dict[str, Any]:
    try:
        status, body = _get(f"{base_url}/version", headers, timeout_s)
        version = json.loads(body).get("version") if status == 200 else None
    except (ProtocolError, ValueError, AttributeError):
        version = None
    if not isinstance(version, str) or not version.strip():
        return {"engine_version": None, "version_source": "not_exposed"}
    return {"engine_version": version.strip(), "version_source": "version_endpoint"}


def _metrics(base_url: str, headers: dict[str, str], timeout_s: float) -> dict[str, Any]:
    try:
        status, body = _get(f"{base_url}/metrics", headers, timeout_s)
    except ProtocolError:
        return {"metrics": "unreachable"}
    if status != 200:
        return {"metrics": "not_exported"}
    try:
        snapshot = parse_prometheus(body.decode("utf-8", "replace"))
    except ProtocolError:
        return {"metrics": "not_exported"}
    return {"metrics": "exported", "flavor": metrics_flavor(snapshot)}


def probe_endpoint(
    base_url: str, model: str, *, api_key_env: str | None = None, timeout_s: float = 10.0
) -> EndpointProbe:
    """Probe an endpoint without sending any completion; failures are recorded in the result, not raised.

    ConfigError only when the named API-key variable is not set (a user error, not an endpoint fact).
    """
    started = time.monotonic()
    headers = endpoint_headers(api_key_env)
    fields: dict[str, Any] = {"base_url": base_url, "model": model, "api_key_env": api_key_env}
    try:
        fields.update(_models(base_url, model, headers, timeout_s))
    except ProtocolError as exc:
        fields.update(reachable=False, error=exc.one_line(), seconds=round(time.monotonic() - started, 3))
        return EndpointProbe.model_validate(fields)
    fields["reachable"] = True
    if not fields["model_listed"]:
        fields["error"] = f"{base_url}/v1/models lists {list(fields['model_ids'])[:10]}, not {model!r}"
    fields.update(_version(base_url, headers, timeout_s))
    fields.update(_metrics(base_url, headers, timeout_s))
    fields["seconds"] = round(time.monotonic() - started, 3)
    return EndpointProbe.model_validate(fields)
