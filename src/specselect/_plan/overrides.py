"""Per-group tables of a `[[candidates]]` entry: a `target` override (tracks) and an `endpoint` (kind "openai")."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, Strict, field_validator, model_validator

from specselect._plan.rules import ENV_NAME_PATTERN, check_model_ref, rule_error
from specselect._plan.sections import PlanSection, TargetConfig, check_one_revision

__all__ = ["EndpointConfig", "TargetOverride", "effective_target"]


class TargetOverride(PlanSection):
    """A candidate's own target (its track); unset keys come from `[target]`.

    When `model` names another model, `revision` and `tokenizer` are not inherited (they belong to the
    model); `dtype` and `max_model_len` are.
    """

    model: Annotated[str, Strict()] | None = Field(
        default=None, description="builtin:NAME, a hub id 'org/name' or 'org/name@REVISION', or a directory"
    )
    revision: Annotated[str, Strict(), Field(min_length=1, max_length=256, pattern=r"^\S+$")] | None = None
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = None
    max_model_len: Annotated[int, Strict(), Field(gt=0, le=10_000_000)] | None = None
    tokenizer: Annotated[str, Strict()] | None = None

    @field_validator("model")
    @classmethod
    def _model_ref(cls, value: str | None) -> str | None:
        return None if value is None else check_model_ref(value, what="model")

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_ref(cls, value: str | None) -> str | None:
        return None if value is None else check_model_ref(value, what="tokenizer")

    @model_validator(mode="after")
    def _one_revision(self) -> TargetOverride:
        check_one_revision(self.model, self.revision)
        return self


def effective_target(default: TargetConfig, override: TargetOverride | None) -> TargetConfig:
    """The target a group runs: `[target]` with the group's override applied (see `TargetOverride`)."""
    if override is None:
        return default
    data = default.model_dump()
    if override.model is not None and override.model != default.model:
        data["revision"] = None
        data["tokenizer"] = None
    data.update(override.model_dump(exclude_none=True))
    return TargetConfig.model_validate(data)


class EndpointConfig(PlanSection):
    """An OpenAI-compatible server the user already runs (kind "openai"): specselect only measures it."""

    base_url: Annotated[str, Strict(), Field(min_length=1, max_length=2048)] = Field(
        description="http(s)://host:port of the server (a trailing /v1 is accepted and removed)"
    )
    model: Annotated[str, Strict(), Field(min_length=1, max_length=256, pattern=r"^\S+$")] = Field(
        description="the served model name, as /v1/models lists it"
    )
    api_key_env: Annotated[str, Strict(), Field(max_length=255, pattern=ENV_NAME_PATTERN)] | None = Field(
        default=None, description="NAME of the environment variable holding the API key (never the key)"
    )
    peak_memory_mb: Annotated[float, Strict(), Field(gt=0, le=1e9)] | None = Field(
        default=None,
        description="the server's peak memory as the operator measured it (specselect cannot sample a process "
        "it did not start); recorded as declared",
    )

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        try:
            parts = urlsplit(value.strip())
            _ = parts.port  # raises on a non-numeric port
        except ValueError as exc:
            raise rule_error(f"{value[:80]!r} is not a URL ({exc})", 'write e.g. "http://127.0.0.1:8000"') from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise rule_error(f"{value[:80]!r} is not an http(s) URL with a host", 'write e.g. "http://127.0.0.1:8000"')
        if parts.username is not None or parts.password is not None:
            raise rule_error(
                "the URL carries credentials; plans are hashed and saved with the results",
                "remove user:password@ and put the key in an environment variable named by api_key_env",
            )
        if parts.query or parts.fragment:
            raise rule_error("the URL has a query or fragment", "give only scheme://host:port (and a path prefix)")
        path = parts.path.rstrip("/")
        path = path.removesuffix("/v1")
        return f"{parts.scheme}://{parts.netloc}{path}"
