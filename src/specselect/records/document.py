"""What every saved results document shares: its schema version and the tool that wrote it."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

import specselect

__all__ = ["RESULTS_SCHEMA_VERSION", "ResultsDocument"]

RESULTS_SCHEMA_VERSION = 2
"""Version of every document in this module; readers refuse other versions with a clear message."""


class ResultsDocument(BaseModel):
    """Base of every results document: `schema_version`, tool name and version, frozen, no unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    READABLE_SCHEMA_VERSIONS: ClassVar[tuple[int, ...]] = (RESULTS_SCHEMA_VERSION,)
    """The versions of this document this specselect reads (a document that changed keeps reading its older ones)."""
    schema_version: int = RESULTS_SCHEMA_VERSION
    tool: Literal["specselect"] = "specselect"
    tool_version: str = Field(default_factory=lambda: specselect.__version__)
