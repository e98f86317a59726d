"""Atomic file writes: a reader never sees a half-written result file."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from specselect.errors import ArtifactError

__all__ = ["atomic_write_bytes", "atomic_write_json", "atomic_write_model", "atomic_write_text", "sha256_file"]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same directory, fsync and rename."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ArtifactError(f"cannot write: {exc.strerror or exc}", location=str(path)) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ArtifactError(
            f"cannot write: {exc.strerror or exc}", location=str(path), fix="free disk space or fix permissions"
        ) from exc


def atomic_write_text(path: Path, text: str) -> None:
    """Atomically write UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    """Atomically write an already JSON-compatible object, indented and newline-terminated."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


def atomic_write_model(path: Path, model: BaseModel) -> None:
    """Atomically write a pydantic result model as JSON (`model_dump(mode="json")`)."""
    atomic_write_json(path, model.model_dump(mode="json"))


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()
