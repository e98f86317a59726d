"""Frozen workload types shared by the loaders, the measurement client and the results."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

__all__ = ["ChatMessage", "Text", "Workload", "WorkloadIdentity", "WorkloadItem"]


def _encodable(value: str) -> str:
    # JSON allows "\ud800"-style escapes that decode to lone surrogates: such text can be neither hashed nor sent.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"contains an unpaired UTF-16 surrogate at character {exc.start} (a \\uD800-\\uDFFF escape)"
        ) from None
    return value


Text = Annotated[str, AfterValidator(_encodable)]
"""A string that is valid Unicode text (encodable as UTF-8)."""


class ChatMessage(BaseModel):
    """One OpenAI-style chat message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: Text


class WorkloadItem(BaseModel):
    """One request of a workload: chat `messages` or a plain completion `prompt` (exactly one)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    messages: tuple[ChatMessage, ...] | None = None
    prompt: Text | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    category: str | None = None

    @model_validator(mode="after")
    def _one_input(self) -> WorkloadItem:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("give exactly one of 'messages' or 'prompt'")
        if self.messages is not None and not self.messages:
            raise ValueError("'messages' must not be empty")
        return self


class WorkloadIdentity(BaseModel):
    """What makes two workloads the same: name, version, content hash and item count."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str
    sha256: str
    item_count: int
    source: str
    """Where it came from: `builtin:NAME` or a file path."""

    @property
    def key(self) -> str:
        """The comparable key used by paired evidence (`workload_key`)."""
        return f"{self.name}@{self.version}#{self.sha256[:16]}"


class Workload(BaseModel):
    """A loaded, validated workload."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    identity: WorkloadIdentity
    items: tuple[WorkloadItem, ...]
