"""Is a cached hub snapshot complete? The record `specselect fetch` writes beside it, and the check that reads it.

`specselect fetch` writes `<hub>/models--org--name/specselect/<commit>.json` (`FetchRecord`) once every file it
fetched has been verified: each file's size and, where the hub lists one, its sha256. A snapshot with a record is
complete when every recorded file is there at its recorded size. A snapshot copied in by hand has no record: then
config.json must exist and every shard a `*.safetensors.index.json` names must exist and be non-empty. Either way
a partial snapshot (an interrupted download, a shard left out of a copy) is refused before any server starts,
naming the files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specselect._assets.hf_cache import find_snapshot
from specselect._common.fileio import atomic_write_model
from specselect.errors import EngineSetupError

__all__ = [
    "RECORD_DIR",
    "CachedState",
    "FetchRecord",
    "FetchedFile",
    "cached_state",
    "missing_files",
    "read_record",
    "record_path",
    "require_complete",
    "write_record",
]

RECORD_DIR = "specselect"
"""The directory beside `snapshots/` that holds one fetch record per commit."""

_SHOWN = 5


class FetchedFile(BaseModel):
    """One fetched file as the hub listed it and as it was verified."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    size: int = Field(ge=0)
    sha256: str | None = Field(default=None, description="listed by the hub for LFS files; verified when given")


class FetchRecord(BaseModel):
    """What `specselect fetch` fetched for one commit and verified (never a token or an endpoint)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    repo: str
    revision: str = Field(description="the revision asked for (a branch, a tag or the commit itself)")
    commit: str
    files: dict[str, FetchedFile]


def record_path(snapshot: Path, commit: str) -> Path:
    """`<repo dir>/specselect/<commit>.json` for `<repo dir>/snapshots/<commit>`."""
    return snapshot.parent.parent / RECORD_DIR / f"{commit}.json"


def write_record(snapshot: Path, record: FetchRecord) -> Path:
    """Write the record of `snapshot` atomically; returns its path."""
    path = record_path(snapshot, record.commit)
    atomic_write_model(path, record)
    return path


def read_record(snapshot: Path, commit: str) -> FetchRecord | None:
    """The fetch record of a snapshot; None for a snapshot copied in by hand. EngineSetupError when unreadable."""
    path = record_path(snapshot, commit)
    if not path.is_file():
        return None
    try:
        return FetchRecord.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        raise EngineSetupError(
            f"the fetch record is unreadable ({type(exc).__name__})",
            location=str(path),
            fix="delete it and run `specselect fetch` for this model again",
        ) from None


def _short(path: Path, size: int | None) -> str | None:
    """Why a file does not count: missing, or not `size` bytes (None: any non-empty file counts)."""
    if not path.is_file():  # a dangling symlink into blobs/ is missing too
        return "missing"
    actual = path.stat().st_size
    if size is None:
        return "empty" if actual == 0 else None
    return None if actual == size else f"{actual} of {size} bytes"


def _index_shards(snapshot: Path) -> tuple[list[str], list[str]]:
    """(shards the snapshot's safetensors indexes name, problems reading the indexes)."""
    shards: list[str] = []
    problems: list[str] = []
    for index in sorted(snapshot.glob("*.safetensors.index.json")):
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
        except (OSError, ValueError, AttributeError):
            weight_map = None
        if not isinstance(weight_map, dict):
            problems.append(f"{index.name} (no weight_map)")
            continue
        shards.extend(str(name) for name in dict.fromkeys(weight_map.values()))
    return shards, problems


def missing_files(snapshot: Path, record: FetchRecord | None) -> list[str]:
    """`name (why)` for every file a complete snapshot would have and this one lacks; empty when complete."""
    if record is not None:
        expected: dict[str, int | None] = {name: f.size for name, f in record.files.items()}
        problems: list[str] = []
    else:
        shards, problems = _index_shards(snapshot)
        expected = {"config.json": None, **dict.fromkeys(shards)}
    for name, size in expected.items():
        why = _short(snapshot / name, size)
        if why is not None:
            problems.append(f"{name} ({why})")
    return problems


def require_complete(repo: str, snapshot: Path, commit: str) -> None:
    """EngineSetupError naming the missing or short files of a partial snapshot, with the command completing it."""
    record = read_record(snapshot, commit)
    problems = missing_files(snapshot, record)
    if not problems:
        return
    shown = ", ".join(problems[:_SHOWN]) + (f" and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else "")
    how = "its fetch record" if record is not None else "its index (copied in by hand: no fetch record)"
    raise EngineSetupError(
        f"snapshot {commit[:12]} of {repo} is incomplete by {how}: {shown}",
        location=str(snapshot),
        fix=f"run `specselect fetch {repo}@{commit}` to complete it",
    )


@dataclass(frozen=True)
class CachedState:
    """Where a hub model stands in the local cache: complete, there in part (naming what is missing) or absent."""

    state: Literal["present", "partial", "missing"]
    snapshot: Path | None = None
    """The snapshot directory (present or partial)."""
    commit: str | None = None
    missing: tuple[str, ...] = ()
    """`name (why)` for every file a complete snapshot would have and this one lacks (partial)."""

    @property
    def present(self) -> bool:
        """Complete: nothing is left to fetch."""
        return self.state == "present"


def cached_state(repo: str, revision: str | None = None, environ: Mapping[str, str] | None = None) -> CachedState:
    """`repo` at `revision` (default `main`) in the local cache, by the rule `require_complete` applies (its fetch
    record, else config.json and the shards its index names). EngineSetupError for an unusable revision, a ref
    without a commit or an unreadable record."""
    found = find_snapshot(repo, revision, environ)
    if found is None:
        return CachedState("missing")
    snapshot, commit = found
    problems = missing_files(snapshot, read_record(snapshot, commit))
    return CachedState("partial" if problems else "present", snapshot, commit, tuple(problems))
