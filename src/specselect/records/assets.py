"""A model reference as resolved: the directory, its exact identity and the facts admission reads (`ResolvedModel`).

`preflight.json` records one per target and proposer; `assets.refs` resolves them and `assets.identity` computes the
digests whose methods are named here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["IdentityMethod", "ModelSource", "ResolvedModel", "SnapshotMethod"]


IdentityMethod = Literal["content_sha256", "files_and_headers"]
"""How a directory was hashed: every byte, or small files whole and large ones by size, header and samples."""


ModelSource = Literal["builtin", "hf_cache", "local_dir"]


SnapshotMethod = IdentityMethod | Literal["hub_commit"]
"""How `snapshot` was made: every byte hashed, files and headers (`assets.identity`), or the hub commit."""


class ResolvedModel(BaseModel):
    """A model reference resolved to a directory with an exact identity and the facts admission needs.

    `present` is False only for a builtin model that has not been prepared yet (`prepare=False`): then
    `path` is where it will be, `snapshot` is empty and the facts come from the builtin's description.
    `tokenizer_fingerprint` identifies what the tokenizer's ids mean (`tokenizer_id.py`), unlike
    `tokenizer_sha256` (the bytes of its files); gate 4 compares it when both sides have one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    ref: str
    path: Path
    snapshot: str
    source: ModelSource
    snapshot_method: SnapshotMethod | None = None
    """None in results written before it was recorded (then a local directory's was `content_sha256`)."""
    present: bool = True
    config: dict[str, Any]
    vocab_size: int | None
    tokenizer_sha256: str | None
    tokenizer_fingerprint: str | None = None
    num_params: int | None
    num_params_source: Literal["safetensors", "config", "builtin"] | None
    weights_bytes: int | None
    has_native_mtp: bool
    architectures: tuple[str, ...]
    model_type: str | None
    num_hidden_layers: int | None
    hidden_size: int | None
    dtype: str | None
