"""Offline resolution of `org/name[@revision]` model ids in the local Hugging Face hub cache.

The cache layout: `<hub>/models--org--name/refs/<branch or tag>` holds a commit hash, and
`<hub>/models--org--name/snapshots/<commit>/` holds the files (symlinks into `blobs/`). Nothing is downloaded
here: `specselect fetch` (`hub_fetch.py`) fills the cache, and a snapshot counts only when it is complete
(`snapshot_files.py`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from specselect.errors import EngineSetupError

__all__ = [
    "COMMIT_PATTERN",
    "HF_ID_PATTERN",
    "cached_refs",
    "find_snapshot",
    "hub_cache_dir",
    "is_hf_id",
    "is_revision",
    "repo_cache_dir",
    "split_revision",
]

HF_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
"""An `org/name` model id (one slash, no path syntax)."""

COMMIT_PATTERN = re.compile(r"^[0-9a-f]{40}$")
"""A full commit hash: a revision that can never move."""

REVISION_SEPARATOR = "@"


def is_hf_id(ref: str) -> bool:
    """True when `ref` has the shape of a hub model id (`org/name`, without a revision)."""
    return bool(HF_ID_PATTERN.match(ref)) and ".." not in ref


def is_revision(text: str) -> bool:
    """True for a usable branch, tag or commit name: no spaces or `@`, and no `..`, empty or absolute path parts (a
    revision names a file under `refs/`, so it must not climb out of it)."""
    parts = text.split("/")
    return (
        bool(text)
        and not any(ch.isspace() or ch == "@" for ch in text)
        and all(p not in ("", ".", "..") for p in parts)
    )


def split_revision(ref: str) -> tuple[str, str | None]:
    """`org/name@rev` -> (`org/name`, `rev`); anything else (a path, a builtin, a bare id) -> (ref, None).

    The revision is a branch, a tag or a commit hash; it may contain `/` (`refs/pr/1`) but never `@` or spaces.
    An empty revision (`org/name@`) comes back as "" so that callers can refuse it.
    """
    repo, sep, revision = ref.partition(REVISION_SEPARATOR)
    if not sep or not is_hf_id(repo):
        return ref, None
    return repo, revision


def hub_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The hub cache directory, honouring the same variables as the Hugging Face tools."""
    env = os.environ if environ is None else environ
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(key):
            return Path(env[key]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "huggingface" / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def repo_cache_dir(repo_id: str, environ: Mapping[str, str] | None = None) -> Path:
    """`<hub>/models--org--name`: where one model repository's refs, snapshots and blobs live."""
    return hub_cache_dir(environ) / f"models--{repo_id.replace('/', '--')}"


def find_snapshot(
    repo_id: str, revision: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Path, str] | None:
    """(snapshot directory, commit) of `repo_id` at `revision` (default `main`) in the cache; None when the
    repository, the ref or the snapshot directory is not there. Says nothing about the files inside."""
    repo_dir = repo_cache_dir(repo_id, environ)
    wanted = revision or "main"
    if not is_revision(wanted):
        raise EngineSetupError(
            f"{wanted[:80]!r} is not a revision", location=repo_id, fix="give a branch, tag or commit hash"
        )
    if COMMIT_PATTERN.match(wanted):
        commit = wanted
    else:
        try:
            commit = (repo_dir / "refs" / wanted).read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not COMMIT_PATTERN.match(commit):
            raise EngineSetupError(
                f"ref {wanted!r} does not hold a commit hash",
                location=str(repo_dir / "refs" / wanted),
                fix=f"run `specselect fetch {repo_id}@{wanted}` to write it again",
            )
    snapshot = repo_dir / "snapshots" / commit
    return (snapshot, commit) if snapshot.is_dir() else None


def cached_refs(repo_id: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """The branch and tag names cached for `repo_id` (sorted; empty when there are none)."""
    refs = repo_cache_dir(repo_id, environ) / "refs"
    return sorted(p.relative_to(refs).as_posix() for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []
