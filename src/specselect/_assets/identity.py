"""Content identities of model directories: per-file digests (cached), directory hashes, tokenizer hashes.

A directory's identity is the sha256 of its sorted `(relative path, file digest)` pairs, so it changes
whenever a file's name or digest changes. Two digests exist (`IdentityMethod`):
- `content_sha256`: every byte of every file. Hashing a 100 GB checkpoint takes many minutes, so it is used
  for checkpoints up to `FULL_HASH_MAX_BYTES` and when asked for (`--verify-weights`);
- `files_and_headers`: small files (config, tokenizer, safetensors index) whole; a large file by its size, its
  safetensors header (tensor names, dtypes, shapes, offsets) and `_SAMPLES` blocks spread over its data, so
  two fine-tunes of one architecture (identical headers) still differ. Reads about 1 MiB per large file.
Per-file digests are cached on disk keyed by `(path, size, mtime_ns)`, one cache per method, and only changed
files are read again.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

from specselect._common.fileio import atomic_write_json, sha256_file
from specselect.errors import ArtifactError
from specselect.records.assets import IdentityMethod

__all__ = [
    "FULL_HASH_MAX_BYTES",
    "SMALL_FILE_BYTES",
    "TOKENIZER_FILES",
    "FileHashCache",
    "content_hash",
    "directory_files",
    "fast_file_digest",
    "hash_directory",
    "snapshot_identity",
    "tokenizer_sha256",
]


FULL_HASH_MAX_BYTES = 4 * 1024**3
"""Checkpoints up to this many bytes are hashed in full without being asked (a few seconds to a minute)."""
SMALL_FILE_BYTES = 16 * 1024**2
"""Files up to this size are hashed whole by `files_and_headers` too (configs, tokenizers, indexes)."""
_SAMPLES = 16
_SAMPLE_BYTES = 64 * 1024
_SAFETENSORS_MAX_HEADER = 100 * 1024 * 1024

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


def _safetensors_header(fh: BinaryIO, size: int) -> bytes:
    """The 8-byte length and JSON header of a safetensors file; b"" when the file is not one."""
    raw = fh.read(8)
    if len(raw) != 8:
        return b""
    (length,) = struct.unpack("<Q", raw)
    if length > min(_SAFETENSORS_MAX_HEADER, size - 8):
        return b""
    return raw + fh.read(length)


def fast_file_digest(path: Path) -> str:
    """A file's `files_and_headers` digest: small files whole, large ones by size, header and sampled blocks."""
    size = path.stat().st_size
    if size <= SMALL_FILE_BYTES:
        return sha256_file(path)
    digest = hashlib.sha256(f"files_and_headers-v1\0{size}\0".encode())
    with open(path, "rb") as fh:
        header = _safetensors_header(fh, size) if path.suffix == ".safetensors" else b""
        digest.update(header)
        start, span = len(header), size - len(header) - _SAMPLE_BYTES
        for i in range(_SAMPLES):
            fh.seek(start + span * i // (_SAMPLES - 1))
            digest.update(fh.read(_SAMPLE_BYTES))
    return digest.hexdigest()


class FileHashCache:
    """Per-file digests for one directory, cached by (relative path, size, mtime_ns) in a JSON file.

    A cache entry is used only when size and mtime both match, so an edited file is always re-hashed.
    A missing or unreadable cache file just means everything is hashed again. `digest` is sha256 of the bytes
    unless told otherwise (`fast_file_digest`, in a cache file of its own).
    """

    def __init__(self, root: Path, cache_file: Path | None, digest: Callable[[Path], str] = sha256_file) -> None:
        self.root = root
        self.cache_file = cache_file
        self._digest = digest
        self._entries: dict[str, tuple[int, int, str]] = {}
        self._dirty = False
        if cache_file is not None:
            self._load(cache_file)

    @classmethod
    def for_directory(
        cls, root: Path, cache_dir: Path | None, method: IdentityMethod = "content_sha256"
    ) -> FileHashCache:
        """A cache stored in `cache_dir` under a name derived from the directory's absolute path and `method`."""
        root = root.resolve()
        digest = sha256_file if method == "content_sha256" else fast_file_digest
        if cache_dir is None:
            return cls(root, None, digest)
        key = hashlib.sha256(str(root).encode()).hexdigest()[:24]
        suffix = "" if method == "content_sha256" else ".fast"
        return cls(root, cache_dir / f"{key}{suffix}.json", digest)

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
        """The digest of `root/rel`, from the cache when size and mtime are unchanged."""
        path = self.root / rel
        stat = path.stat()
        cached = self._entries.get(rel)
        if cached is not None and cached[0] == stat.st_size and cached[1] == stat.st_mtime_ns:
            return cached[2]
        digest = self._digest(path)
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


def hash_directory(
    root: Path, cache_dir: Path | None = None, method: IdentityMethod = "content_sha256"
) -> tuple[str, dict[str, str]]:
    """(directory hash, per-file digest) of every non-hidden file under `root`, by `method`."""
    cache = FileHashCache.for_directory(root, cache_dir, method)
    rels = directory_files(cache.root)
    hashes = cache.hash_files(rels)
    cache.save(keep=rels)
    if method == "content_sha256":
        return content_hash(hashes), hashes
    return content_hash({**hashes, "\0method": method}), hashes


def snapshot_identity(
    root: Path, cache_dir: Path | None = None, *, verify_weights: bool = False
) -> tuple[str, IdentityMethod]:
    """A model directory's snapshot identity and how it was made: every byte (`content_sha256`) when asked or
    when its files total at most `FULL_HASH_MAX_BYTES`, else its files and headers (`files_and_headers`)."""
    root = root.resolve()
    total = sum((root / rel).stat().st_size for rel in directory_files(root))
    method: IdentityMethod = "content_sha256" if verify_weights or total <= FULL_HASH_MAX_BYTES else "files_and_headers"
    snapshot, _ = hash_directory(root, cache_dir, method)
    return snapshot, method


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
