"""Content identities of model directories: per-file sha256 (cached), directory hashes, tokenizer hashes.

A directory's identity is the sha256 of its sorted `(relative path, file sha256)` pairs, so it changes
whenever any file's bytes or name change. Hashing a multi-GB checkpoint takes seconds, so per-file
hashes are cached on disk keyed by `(path, size, mtime_ns)` and only changed files are read again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from specselect.artifacts.io import atomic_write_json, sha256_file
from specselect.errors import ArtifactError

__all__ = [
    "TOKENIZER_FILES",
    "FileHashCache",
    "content_hash",
    "directory_files",
    "hash_directory",
    "tokenizer_sha256",
]

_CACHE_SCHEMA = 1

TOKENIZER_FILES: tuple[str, ...] = (
    "tokenizer.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "spiece.model",
    "tiktoken.model",
)
"""Files whose bytes define a tokenizer; `tokenizer.json` alone decides when it exists."""


def directory_files(root: Path) -> list[str]:
    """Relative POSIX paths of the regular files under `root` (symlinks followed), hidden entries skipped.

    Hidden files and directories (`.cache/`, `.git/`, specselect's own `.specselect-*` markers) are not
    part of a model's content.
    """
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        base = Path(dirpath)
        for name in filenames:
            if name.startswith("."):
                continue
            path = base / name
            if path.is_file():
                found.append(path.relative_to(root).as_posix())
    return sorted(found)


def content_hash(file_hashes: Mapping[str, str]) -> str:
    """sha256 over the sorted `(relative path, sha256)` pairs: the identity of a directory's content."""
    digest = hashlib.sha256()
    for rel in sorted(file_hashes):
        digest.update(f"{rel}\0{file_hashes[rel]}\n".encode())
    return digest.hexdigest()


class FileHashCache:
    """Per-file sha256 values for one directory, cached by (relative path, size, mtime_ns) in a JSON file.

    A cache entry is used only when size and mtime both match, so an edited file is always re-hashed.
    A missing or unreadable cache file just means everything is hashed again.
    """

    def __init__(self, root: Path, cache_file: Path | None) -> None:
        self.root = root
        self.cache_file = cache_file
        self._entries: dict[str, tuple[int, int, str]] = {}
        self._dirty = False
        if cache_file is not None:
            self._load(cache_file)

    @classmethod
    def for_directory(cls, root: Path, cache_dir: Path | None) -> FileHashCache:
        """A cache stored in `cache_dir` under a name derived from the directory's absolute path."""
        root = root.resolve()
        if cache_dir is None:
            return cls(root, None)
        key = hashlib.sha256(str(root).encode()).hexdigest()[:24]
        return cls(root, cache_dir / f"{key}.json")

    def _load(self, cache_file: Path) -> None:
        try:
            data = json.loads(cache_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(data, dict) or data.get("schema_version") != _CACHE_SCHEMA:
            return
        if data.get("root") != str(self.root):
            return
        files = data.get("files")
        if not isinstance(files, dict):
            return
        for rel, entry in files.items():
            if isinstance(entry, list) and len(entry) == 3:
                size, mtime_ns, digest = entry
                if isinstance(size, int) and isinstance(mtime_ns, int) and isinstance(digest, str):
                    self._entries[rel] = (size, mtime_ns, digest)

    def sha256(self, rel: str) -> str:
        """The sha256 of `root/rel`, from the cache when size and mtime are unchanged."""
        path = self.root / rel
        stat = path.stat()
        cached = self._entries.get(rel)
        if cached is not None and cached[0] == stat.st_size and cached[1] == stat.st_mtime_ns:
            return cached[2]
        digest = sha256_file(path)
        self._entries[rel] = (stat.st_size, stat.st_mtime_ns, digest)
        self._dirty = True
        return digest

    def hash_files(self, rels: Iterable[str]) -> dict[str, str]:
        """sha256 of each relative path."""
        return {rel: self.sha256(rel) for rel in rels}

    def save(self, keep: Iterable[str] | None = None) -> None:
        """Write the cache back if anything changed; `keep` limits it to files that still exist."""
        if self.cache_file is None or not self._dirty:
            return
        entries = self._entries
        if keep is not None:
            wanted = set(keep)
            entries = {rel: entry for rel, entry in entries.items() if rel in wanted}
        payload = {
            "schema_version": _CACHE_SCHEMA,
            "root": str(self.root),
            "files": {rel: list(entry) for rel, entry in sorted(entries.items())},
        }
        # A cache that cannot be written only costs time on the next run.
        try:
            atomic_write_json(self.cache_file, payload)
        except ArtifactError:
            return
        self._dirty = False


def hash_directory(root: Path, cache_dir: Path | None = None) -> tuple[str, dict[str, str]]:
    """(content hash, per-file sha256) of every non-hidden file under `root`."""
    cache = FileHashCache.for_directory(root, cache_dir)
    rels = directory_files(cache.root)
    hashes = cache.hash_files(rels)
    cache.save(keep=rels)
    return content_hash(hashes), hashes


def tokenizer_sha256(root: Path) -> str | None:
    """Identity of the tokenizer in a model directory, or None when it has no tokenizer files.

    `tokenizer.json` fully defines a fast tokenizer, so it alone is hashed when present; otherwise the
    vocabulary files present are hashed together (name and content).
    """
    primary = root / "tokenizer.json"
    if primary.is_file():
        return sha256_file(primary)
    present = {name: sha256_file(root / name) for name in TOKENIZER_FILES if (root / name).is_file()}
    return content_hash(present) if present else None
