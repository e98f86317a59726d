"""Builtin models whose GGUF file arrives in pinned chunk packages: install, join, verify, convert, record.

Once per model, under `$SPECSELECT_HOME`:
1. the sizes are stated and checked first: the download, the converted size on disk and the conversion's
   peak memory (measured), against free disk and available memory;
2. the pinned part packages are installed together into `assets/.parts-NAME/` (pip, no dependencies);
3. the parts are joined into `assets/gguf/FILE.gguf`, every part and the whole verified (`chunks.py`);
   the parts are deleted right away: they are a byte-for-byte copy of the verified file;
4. the GGUF is converted with the engine python (`convert.py`) and the model directory gets a marker with
   its identity and provenance (`ChunkedProvenance`: packages, joined sha256, licences, converter versions).

The joined GGUF is KEPT (1.1 GB for the 1.5B model, 0.5 GB for the 0.5B next to their 7.1 / 2.5 GB
converted weights): a removed or damaged model directory is rebuilt from it offline in ~1.5 minutes.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from specselect._assets.chunks import join_chunks
from specselect._assets.gguf import ConverterReport, run_converter
from specselect._assets.identity import FileHashCache
from specselect._assets.marker import finalize, fresh_tmp, needs_env, not_present, read_complete, resolved
from specselect._assets.packages import install_packages
from specselect._assets.refs import BUILTIN_PREFIX, hash_cache_dir
from specselect._assets.resources import format_gb, require_free_disk, require_memory
from specselect._assets.specs import BuiltinModel, ChunkedGguf, Licences
from specselect._common.home import default_home
from specselect._common.pyenv import file_lock
from specselect.records.assets import ResolvedModel

__all__ = [
    "DROPPED_CONFIG_KEYS",
    "ChunkedProvenance",
    "chunked_model_dir",
    "gguf_path",
    "parts_dir",
    "prepare_chunked",
    "resolve_chunked",
]

Progress = Callable[[str], None]

DROPPED_CONFIG_KEYS = ("_model_name_or_path",)
"""transformers copies the GGUF's `general.name` into config.json under this key. It names the file, not the
model, and misleads (the 0.5B file calls itself "AWQ" but is Q4_K_M), so the converted config drops it."""

_MEMORY_MARGIN = 1.1  # conversion peaks were measured once; leave room for run-to-run variation
_log = logging.getLogger(__name__)


class ChunkedProvenance(BaseModel):
    """Where a chunked builtin's bytes came from and what made it (saved in its model marker)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    kind: str = "chunked_gguf"
    packages: tuple[str, ...]
    gguf_filename: str
    gguf_bytes: int
    gguf_sha256: str
    licences: Licences
    converter: ConverterReport
    engine_python: str
    download_seconds: float | None
    join_seconds: float | None
    parts_deleted: bool = True
    gguf_kept: bool = True


def _home(home: Path | None) -> Path:
    return home or default_home()


def chunked_model_dir(spec: BuiltinModel, home: Path | None) -> Path:
    """The model directory, named by the pinned GGUF hash (known before anything is downloaded)."""
    return _home(home) / "models" / f"{spec.name}-{_source(spec).sha256[:16]}"


def gguf_path(spec: BuiltinModel, home: Path | None) -> Path:
    """Where the joined, verified GGUF file is kept."""
    return _home(home) / "assets" / "gguf" / _source(spec).filename


def parts_dir(spec: BuiltinModel, home: Path | None) -> Path:
    """Where the part packages are installed while they are joined."""
    return _home(home) / "assets" / f".parts-{spec.name}"


def _source(spec: BuiltinModel) -> ChunkedGguf:
    if spec.chunked is None:
        raise ValueError(f"{spec.name} is not a chunked model")
    return spec.chunked


def _announcer(progress: Progress | None) -> Progress:
    """`progress`, or the module logger (stderr by default): a multi-GB download is always announced."""
    return progress if progress is not None else _log.warning


def resolve_chunked(spec: BuiltinModel, home: Path | None) -> ResolvedModel:
    """The model if prepared, else `present=False` with its known facts (nothing is downloaded)."""
    final = chunked_model_dir(spec, home)
    marker = read_complete(final)
    return resolved(spec, final, marker) if marker is not None else not_present(spec, final)


def prepare_chunked(
    spec: BuiltinModel, python: Path | None, home: Path | None = None, progress: Progress | None = None
) -> ResolvedModel:
    """Prepare the model once (see the module docstring); later calls only read its marker."""
    final = chunked_model_dir(spec, home)
    marker = read_complete(final)
    if marker is None:
        final.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(final.parent / f".{final.name}.lock"):
            marker = read_complete(final)
            if marker is None:
                if python is None:
                    raise needs_env(spec)
                marker = _build(spec, python, home, final, _announcer(progress))
    return resolved(spec, final, marker)


def _build(spec: BuiltinModel, python: Path, home: Path | None, final: Path, say: Progress) -> dict[str, Any]:
    source = _source(spec)
    gguf = gguf_path(spec, home)
    have_gguf = _verified_gguf(source, gguf, home, say)
    _check_host(spec, final, have_gguf, say)
    download_s = join_s = None
    if not have_gguf:
        download_s, join_s = _download_and_join(spec, python, home, gguf, say)
    tmp = fresh_tmp(final)
    say(f"converting {gguf.name} to {spec.dtype} (~{_convert_hint(spec)}, once)")
    report = run_converter(
        python,
        gguf,
        tmp,
        dtype=spec.dtype,
        log_path=final.parent / f"{final.name}.convert.log",
        drop_config_keys=DROPPED_CONFIG_KEYS,
    )
    say(f"converted in {report.seconds} s, peak memory {report.peak_rss_mb} MB")
    provenance = ChunkedProvenance(
        packages=source.requirements,
        gguf_filename=source.filename,
        gguf_bytes=source.size,
        gguf_sha256=source.sha256,
        licences=source.licences,
        converter=report,
        engine_python=str(python),
        download_seconds=download_s,
        join_seconds=join_s,
    )
    marker = {
        "builtin": spec.name,
        "gguf_sha256": source.sha256,
        "dtype": spec.dtype,
        "provenance": provenance.model_dump(mode="json"),
    }
    return finalize(tmp, final, marker)


def _convert_hint(spec: BuiltinModel) -> str:
    converted = spec.converted_bytes or 0
    return f"{format_gb(converted)} written" if converted else "a minute"


def _verified_gguf(source: ChunkedGguf, gguf: Path, home: Path | None, say: Progress) -> bool:
    """True when the kept GGUF file is there and matches its pin (a stale or damaged one is removed)."""
    if not gguf.is_file():
        return False
    cache = FileHashCache.for_directory(gguf.parent, hash_cache_dir(home))
    good = gguf.stat().st_size == source.size and cache.sha256(gguf.name) == source.sha256
    cache.save()
    if not good:
        say(f"{gguf} does not match its pinned sha256: removing it and downloading the parts again")
        gguf.unlink()
    return good


def _check_host(spec: BuiltinModel, final: Path, have_gguf: bool, say: Progress) -> None:
    """State what preparing costs, then refuse early when the disk or the memory is too small."""
    source = _source(spec)
    converted = spec.converted_bytes or 0
    # Installing the parts holds them twice at the peak (pip's download + the install, or the parts + the
    # joined file); then the joined file and the converted model.
    disk = converted + (2 * source.size if not have_gguf else 0)
    memory = int((spec.convert_peak_rss_bytes or 0) * _MEMORY_MARGIN)
    first, last = source.requirements[0], source.requirements[-1]
    if not have_gguf:
        say(
            f"{BUILTIN_PREFIX}{spec.name}: downloading {len(source.parts)} parts, {format_gb(source.size)} "
            f"({first} .. {last})"
        )
    say(f"needs {format_gb(disk)} free disk and {format_gb(memory)} memory to convert ({spec.dtype})")
    require_free_disk(final.parent, disk, f"preparing {BUILTIN_PREFIX}{spec.name}")
    require_memory(memory, f"converting {BUILTIN_PREFIX}{spec.name}")


def _download_and_join(
    spec: BuiltinModel, python: Path, home: Path | None, gguf: Path, say: Progress
) -> tuple[float, float]:
    """Install the parts, join and verify them into `gguf`, delete the parts; (download s, join s)."""
    source = _source(spec)
    staging = parts_dir(spec, home)
    if staging.exists():  # a leftover of an interrupted attempt: pip --target would not overwrite it
        shutil.rmtree(staging)
    log_path = staging.parent / f"{staging.name.lstrip('.')}.install.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("", encoding="utf-8")
    t0 = time.monotonic()
    install_packages(source.requirements, staging, python, log_path)
    download_s = round(time.monotonic() - t0, 1)
    say(f"downloaded {len(source.parts)} parts in {download_s} s; joining and verifying {source.filename}")
    t1 = time.monotonic()
    join_chunks(source, staging, gguf, say)
    join_s = round(time.monotonic() - t1, 1)
    say(f"{source.filename}: {source.size} bytes, sha256 {source.sha256[:16]}... verified in {join_s} s")
    shutil.rmtree(staging)
    return download_s, join_s
