"""The exact argv of a vLLM OpenAI server for a launch spec, and the G0-style sanity request."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from specselect.engines.base import LaunchSpec, SanityResult
from specselect.engines.localnet import local_request
from specselect.engines.vllm.specconfig import speculative_config_json
from specselect.errors import ConfigError, ProtocolError, ServerTimeoutError

__all__ = ["VLLM_SERVER_MODULE", "build_vllm_argv", "sanity_check"]

VLLM_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
"""Run with `python -m`; works even where the `vllm` console script does not."""

_SECRET_FLAGS = ("--api-key",)
# Always owned by specselect, even when this launch does not emit them (a target-only group, say).
_RESERVED_FLAGS = frozenset(
    {
        "--model",
        "--served-model-name",
        "--host",
        "--port",
        "--speculative-config",
        "--per-request-spec-decode-metrics",
    }
)


def _flag_name(arg: str) -> str:
    return arg.split("=", 1)[0] if arg.startswith("--") else ""


def build_vllm_argv(
    spec: LaunchSpec,
    port: int,
    *,
    python: str | Path | None = None,
    command: Sequence[str] | None = None,
) -> list[str]:
    """`[python, -m, vllm.entrypoints.openai.api_server, ...flags, ...engine_args]` (or `command` as the head).

    `--per-request-spec-decode-metrics summary` is added only with speculation and when the spec asks for it
    (the runner asks only when the probe found the flag: vLLM refuses it without speculation).
    """
    if command:
        head = [str(part) for part in command]
    elif python is not None:
        head = [str(python), "-m", VLLM_SERVER_MODULE]
    else:
        raise ConfigError(
            "no python and no command to start vLLM with",
            location="engine",
            fix="give the engine environment's python or a command prefix",
        )
    args: list[str] = [
        "--model",
        str(spec.model_path),
        "--served-model-name",
        spec.served_model_name,
        "--host",
        spec.host,
        "--port",
        str(port),
        "--dtype",
        spec.dtype,
    ]
    if spec.max_model_len is not None:
        args += ["--max-model-len", str(spec.max_model_len)]
    args += ["--tensor-parallel-size", str(spec.tensor_parallel_size)]
    if spec.pipeline_parallel_size > 1:
        args += ["--pipeline-parallel-size", str(spec.pipeline_parallel_size)]
    if spec.data_parallel_size > 1:
        args += ["--data-parallel-size", str(spec.data_parallel_size)]
    if spec.distributed_executor_backend:
        args += ["--distributed-executor-backend", spec.distributed_executor_backend]
    if spec.speculative_config is not None:
        args += ["--speculative-config", speculative_config_json(spec.speculative_config)]
        if spec.per_request_spec_metrics:
            args += ["--per-request-spec-decode-metrics", "summary"]
    if spec.disable_prefix_caching:
        args.append("--no-enable-prefix-caching")

    ours = _RESERVED_FLAGS | {a for a in args if a.startswith("--")}
    for extra in spec.engine_args:
        flag = _flag_name(extra)
        if flag in _SECRET_FLAGS:
            raise ConfigError(
                f"{flag} must not be written into engine args",
                location=f"groups.{spec.group}.engine_args",
                fix="put the key in an environment variable and name it in api_key_env",
            )
        if flag in ours or (flag == "--enable-prefix-caching" and spec.disable_prefix_caching):
            raise ConfigError(
                f"{flag} is set by specselect from the plan and cannot be repeated in engine args",
                location=f"groups.{spec.group}.engine_args",
                fix=f"remove {flag} from engine_args and set the plan field instead",
            )
    return head + args + list(spec.engine_args)


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
