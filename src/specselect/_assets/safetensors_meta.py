"""Pure-Python reading and subsetting of safetensors files (no torch, no safetensors package).

The format: an 8-byte little-endian header length N, N bytes of JSON mapping tensor names to
`{"dtype", "shape", "data_offsets": [begin, end]}` (offsets relative to the end of the header, plus an
optional `__metadata__` entry), then the raw tensor bytes. Reading only the header makes parameter
counts of multi-GB checkpoints instantaneous.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from specselect.errors import EngineSetupError

__all__ = [
    "CheckpointSize",
    "TensorInfo",
    "checkpoint_size",
    "read_header",
    "write_subset",
]

_MAX_HEADER_BYTES = 100 * 1024 * 1024  # the format's own limit


class TensorInfo(BaseModel):
    """One tensor entry of a safetensors header."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)


class CheckpointSize(BaseModel):
    """Parameter count and tensor bytes summed over the `*.safetensors` files of a directory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_params: int
    tensor_bytes: int
    files: int
    dtypes: tuple[str, ...]


def read_header(path: Path) -> tuple[list[TensorInfo], dict[str, str], int]:
    """(tensors, `__metadata__`, offset of the data section) of a safetensors file."""
    try:
        with open(path, "rb") as fh:
            raw_len = fh.read(8)
            if len(raw_len) != 8:
                raise ValueError("file shorter than the 8-byte header length")
            (length,) = struct.unpack("<Q", raw_len)
            if length > _MAX_HEADER_BYTES:
                raise ValueError(f"header length {length} exceeds the format limit")
            header_bytes = fh.read(length)
            if len(header_bytes) != length:
                raise ValueError("truncated header")
        header: Any = json.loads(header_bytes)
        if not isinstance(header, dict):
            raise ValueError("header is not a JSON object")
        metadata_raw = header.pop("__metadata__", None) or {}
        metadata = {str(k): str(v) for k, v in metadata_raw.items()}
        tensors = [
            TensorInfo(
                name=name,
                dtype=str(entry["dtype"]),
                shape=tuple(int(dim) for dim in entry["shape"]),
                begin=int(entry["data_offsets"][0]),
                end=int(entry["data_offsets"][1]),
            )
            for name, entry in header.items()
        ]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise EngineSetupError(
            f"not a readable safetensors file: {exc}", location=str(path), fix="re-download or re-convert the model"
        ) from exc
    return tensors, metadata, 8 + length


def checkpoint_size(model_dir: Path) -> CheckpointSize | None:
    """Sum element counts and byte sizes over the top-level `*.safetensors` files; None if there are none."""
    files = sorted(p for p in model_dir.glob("*.safetensors") if p.is_file())
    if not files:
        return None
    num_params = 0
    tensor_bytes = 0
    dtypes: set[str] = set()
    for path in files:
        tensors, _, _ = read_header(path)
        for tensor in tensors:
            num_params += tensor.numel
            tensor_bytes += tensor.end - tensor.begin
            dtypes.add(tensor.dtype)
    return CheckpointSize(
        num_params=num_params, tensor_bytes=tensor_bytes, files=len(files), dtypes=tuple(sorted(dtypes))
    )


def write_subset(source: Path, dest: Path, keep: Callable[[str], bool]) -> int:
    """Copy the tensors of `source` whose names satisfy `keep` into a new safetensors file `dest`.

    Tensor bytes are copied unchanged and offsets recomputed; the metadata is kept. Returns the
    number of tensors written.
    """
    tensors, metadata, data_start = read_header(source)
    kept = sorted((t for t in tensors if keep(t.name)), key=lambda t: t.begin)
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for tensor in kept:
        size = tensor.end - tensor.begin
        header[tensor.name] = {
            "dtype": tensor.dtype,
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)  # the reference writer aligns the data section to 8
    with open(source, "rb") as src, open(dest, "wb") as out:
        out.write(struct.pack("<Q", len(header_bytes)))
        out.write(header_bytes)
        for tensor in kept:
            src.seek(data_start + tensor.begin)
            remaining = tensor.end - tensor.begin
            while remaining > 0:
                block = src.read(min(remaining, 1 << 20))
                if not block:
                    raise EngineSetupError(
                        f"tensor {tensor.name} is truncated", location=str(source), fix="re-convert the model"
                    )
                out.write(block)
                remaining -= len(block)
    return len(kept)
