"""Decode a recorded server-sent-event stream into a `RequestRecord` (after the scenario, off the hot path).

An event's arrival time is the time of the network read that completed its line. A chunk "carries output"
when it adds tokens (per-chunk usage or token ids) or non-empty text; the role-only first chunk of a chat
stream and the final usage-only chunk do not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from specselect._measure.client import RawExchange
from specselect.errors import ProtocolError
from specselect.records.measurement import ErrorKind, RequestRecord, TokenLogprob
from specselect.records.telemetry import RequestSpecMetrics, SpecMetricsReader

__all__ = ["DecodedStream", "EngineStreamError", "build_record", "decode_events", "split_events"]

_FIX = "check that the server speaks the OpenAI-compatible streaming protocol"
_IGNORED_FIELDS = (b"event:", b"id:", b"retry:")
_OPENAI_CHUNK_FIELDS = frozenset(
    {"id", "object", "created", "model", "system_fingerprint", "service_tier", "obfuscation", "choices", "usage"}
)
"""The top-level fields of OpenAI's (chat) completion chunk; any other is the engine's own (`engine_fields`)."""


class EngineStreamError(Exception):
    """The server streamed an `{"error": ...}` object instead of a completion chunk."""


@dataclass(slots=True)
class DecodedStream:
    """The interpreted content of one stream."""

    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int | None] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    token_ids: list[int] | None = None
    logprobs: list[TokenLogprob] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    engine_fields: dict[str, Any] | None = None


def _protocol_error(where: str, message: str) -> ProtocolError:
    return ProtocolError(message, location=where, fix=_FIX)


def split_events(
    reads: Sequence[tuple[float, bytes]], where: str
) -> tuple[list[tuple[float, Any]], bool, ProtocolError | None]:
    """The JSON payloads of `data:` lines with their arrival times, whether `data: [DONE]` came, and the
    first protocol violation (decoding stops there; the events before it are kept)."""
    events: list[tuple[float, Any]] = []
    done = False
    lineno = 0

    def handle(line: bytes, when: float) -> None:
        nonlocal done, lineno
        lineno += 1
        line = line.rstrip(b"\r")
        if not line or line.startswith(b":") or line.startswith(_IGNORED_FIELDS):
            return
        if not line.startswith(b"data:"):
            raise _protocol_error(where, f"stream line {lineno} is not a server-sent event: {line[:80]!r}")
        payload = line[5:].strip()
        if done:
            raise _protocol_error(where, f"stream line {lineno} comes after data: [DONE]: {payload[:80]!r}")
        if payload == b"[DONE]":
            done = True
            return
        try:
            obj = json.loads(payload)
        except ValueError:
            raise _protocol_error(where, f"stream line {lineno} is not JSON: {payload[:80]!r}") from None
        if not isinstance(obj, dict):
            raise _protocol_error(where, f"stream line {lineno} is JSON but not an object: {payload[:80]!r}")
        events.append((when, obj))

    tail = b""
    last = 0.0
    try:
        for when, data in reads:
            last = when
            *lines, tail = (tail + data).split(b"\n")
            for line in lines:
                handle(line, when)
        if tail.strip():
            handle(tail, last)
    except ProtocolError as exc:
        return events, done, exc
    return events, done, None


def _chat_logprobs(obj: Any) -> list[TokenLogprob]:
    entries = (obj.get("content") or []) if isinstance(obj, dict) else []
    return [
        TokenLogprob(
            token=e["token"],
            logprob=e.get("logprob"),
            top=tuple((t["token"], t.get("logprob")) for t in e.get("top_logprobs") or ()),
        )
        for e in entries
    ]


def _completion_logprobs(obj: Any) -> list[TokenLogprob]:
    if not isinstance(obj, dict):
        return []
    tokens = obj.get("tokens") or []
    values = obj.get("token_logprobs") or [None] * len(tokens)
    tops = obj.get("top_logprobs") or [None] * len(tokens)
    return [
        TokenLogprob(token=tok, logprob=lp, top=tuple((top or {}).items()))
        for tok, lp, top in zip(tokens, values, tops, strict=False)
    ]


def _raise_stream_error(ev: Any) -> None:
    """EngineStreamError (whitespace collapsed) for a chunk that is an error object rather than choices."""
    if ev.get("error") is not None and not ev.get("choices"):
        err = ev["error"]
        message = err.get("message", err) if isinstance(err, dict) else err
        raise EngineStreamError(" ".join(str(message).split()))


def _usage_completion(out: DecodedStream, ev: Any) -> Any:
    """The chunk's cumulative `completion_tokens` (None without usage); records `prompt_tokens` in `out`."""
    usage = ev.get("usage")
    if not isinstance(usage, dict):
        return None
    completion = usage.get("completion_tokens")
    if usage.get("prompt_tokens") is not None:
        out.prompt_tokens = int(usage["prompt_tokens"])
    return completion


def _choice_content(choice: Any, api: Literal["chat", "completions"]) -> tuple[str, Any, list[TokenLogprob] | None]:
    """(text, other output such as reasoning or tool calls, logprobs) of one choice."""
    if api == "chat":
        delta = choice.get("delta") or {}
        text = delta.get("content") or ""
        other = delta.get("reasoning_content") or delta.get("reasoning") or delta.get("tool_calls")
        return text, other, _chat_logprobs(choice.get("logprobs")) if choice.get("logprobs") else None
    text = choice.get("text") or ""
    return text, None, _completion_logprobs(choice.get("logprobs")) if choice.get("logprobs") else None


def _new_tokens(completion: Any, ids: Any, seen_tokens: int) -> int | None:
    """Tokens the chunk adds: the usage count's growth, else its token ids, else unknown (None)."""
    if completion is not None:
        return int(completion) - seen_tokens
    if isinstance(ids, list):
        return len(ids)
    return None


def _add_choice(
    out: DecodedStream,
    choice: Any,
    api: Literal["chat", "completions"],
    *,
    when: float,
    completion: Any,
    seen_tokens: int,
) -> None:
    """Add one choice's output to `out`: its chunk time and token count (when it carries output), text, token ids,
    logprobs and finish reason."""
    text, other, lp = _choice_content(choice, api)
    ids = choice.get("token_ids")
    n = _new_tokens(completion, ids, seen_tokens)
    if (n is not None and n > 0) or text or other:
        out.chunk_times.append(when)
        out.chunk_tokens.append(n)
    if text:
        out.text.append(text)
    if isinstance(ids, list):
        if out.token_ids is None:
            out.token_ids = []
        out.token_ids.extend(int(i) for i in ids)
    if lp:
        if out.logprobs is None:
            out.logprobs = []
        out.logprobs.extend(lp)
    if choice.get("finish_reason") is not None:
        out.finish_reason = str(choice["finish_reason"])


def _add_engine_fields(out: DecodedStream, ev: Any) -> None:
    for key, value in ev.items():
        if key not in _OPENAI_CHUNK_FIELDS and value is not None:
            if out.engine_fields is None:
                out.engine_fields = {}
            out.engine_fields[key] = value


def decode_events(events: Sequence[tuple[float, Any]], api: Literal["chat", "completions"]) -> DecodedStream:
    """Interpret chunk objects: output text, tokens per chunk, usage, finish reason, engine metrics.

    Raises EngineStreamError for an in-stream error object, and TypeError/KeyError/AttributeError/ValueError
    for chunks of the wrong shape (the caller turns those into a protocol error).
    """
    out = DecodedStream()
    seen_tokens = 0
    for when, ev in events:
        _raise_stream_error(ev)
        completion = _usage_completion(out, ev)
        _add_engine_fields(out, ev)
        for choice in ev.get("choices") or ():
            if choice.get("index", 0) == 0:
                _add_choice(out, choice, api, when=when, completion=completion, seen_tokens=seen_tokens)
        if completion is not None:
            seen_tokens = int(completion)
            out.completion_tokens = seen_tokens
    return out


def _rel(value: float | None, t0: float) -> float | None:
    return None if value is None else value - t0


def _decode(
    raw: RawExchange, api: Literal["chat", "completions"], where: str, read_spec_metrics: SpecMetricsReader | None
) -> tuple[DecodedStream, RequestSpecMetrics | None, ErrorKind | None, str | None]:
    """The exchange's stream decoded, its speculative counts read, and its error (the transport's, else the first
    the stream shows)."""
    error_kind, error = raw.error_kind, raw.error
    decoded = DecodedStream()
    speculative: RequestSpecMetrics | None = None
    if raw.reads:
        try:
            events, done, violation = split_events(raw.reads, where)
            decoded = decode_events(events, api)
            if read_spec_metrics is not None and decoded.engine_fields:
                speculative = read_spec_metrics(decoded.engine_fields)
            if violation is not None:
                raise violation
            if not done and error_kind is None:
                raise _protocol_error(where, "the stream ended without data: [DONE]")
        except ProtocolError as exc:
            if error_kind is None:
                error_kind, error = ErrorKind.PROTOCOL_ERROR, exc.one_line()
        except EngineStreamError as exc:
            if error_kind is None:
                error_kind, error = ErrorKind.ENGINE_ERROR, f"{where}: the engine streamed an error: {exc}"
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            if error_kind is None:
                msg = f"a chunk has an unexpected shape ({type(exc).__name__}: {exc})"
                error_kind, error = ErrorKind.PROTOCOL_ERROR, _protocol_error(where, msg).one_line()
    elif error_kind is None and raw.send_time is not None:
        error_kind, error = ErrorKind.PROTOCOL_ERROR, _protocol_error(where, "the server sent an empty body").one_line()
    return decoded, speculative, error_kind, error


def build_record(
    raw: RawExchange,
    *,
    scenario: str,
    api: Literal["chat", "completions"],
    t0: float,
    launch: int = 0,
    read_spec_metrics: SpecMetricsReader | None = None,
) -> RequestRecord:
    """The `RequestRecord` of one exchange; times become seconds since `t0` (the scenario start).

    `read_spec_metrics` is the engine's reader of the response's own fields into its speculative counts.
    """
    planned = raw.planned
    decoded, speculative, error_kind, error = _decode(raw, api, f"request {planned.request_id}", read_spec_metrics)
    return RequestRecord(
        request_id=planned.request_id,
        item_id=planned.item_id,
        scenario=scenario,
        repeat=planned.repeat,
        launch=launch,
        warmup=planned.warmup,
        cache_salt=planned.cache_salt,
        seed=planned.seed,
        scheduled_time_s=_rel(raw.scheduled_time, t0),
        send_time_s=_rel(raw.send_time, t0),
        first_token_time_s=decoded.chunk_times[0] - t0 if decoded.chunk_times else None,
        chunk_times_s=[t - t0 for t in decoded.chunk_times],
        chunk_tokens=decoded.chunk_tokens,
        end_time_s=_rel(raw.end_time, t0),
        prompt_tokens=decoded.prompt_tokens,
        completion_tokens=decoded.completion_tokens,
        output_text="".join(decoded.text),
        output_token_ids=decoded.token_ids,
        logprobs=decoded.logprobs,
        finish_reason=decoded.finish_reason,
        engine_fields=decoded.engine_fields,
        speculative=speculative,
        http_status=raw.status,
        error_kind=error_kind,
        error=error,
    )
