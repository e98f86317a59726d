"""The marker of a prepared builtin model: written last, it says the directory is complete and what it is.

A model is built in a temporary directory, given a marker with every file's size and sha256 plus its
provenance, and renamed into place in one step, so a partial build is never mistaken for a complete one. A
complete one is reused without running Python; a file whose size changed invalidates it. The snapshot
identity is the hash of the sorted (path, sha256) pairs of its files.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specselect._assets.identity import content_hash, directory_files
from specselect._assets.refs import BUILTIN_PREFIX, describe_model_dir
from specselect._assets.specs import BuiltinModel
from specselect._common.fileio import atomic_write_json, sha256_file
from specselect.errors import EngineSetupError
from specselect.records.assets import ResolvedModel

__all__ = [
    "MARKER_SCHEMA",
    "MODEL_MARKER",
    "finalize",
    "fresh_tmp",
    "needs_env",
    "not_present",
    "read_complete",
    "resolved",
]

MODEL_MARKER = ".specselect-model.json"
MARKER_SCHEMA = 1


def read_complete(model_dir: Path) -> dict[str, Any] | None:
    """The marker of a complete prepared model, or None when absent, unreadable or files changed size."""
    try:
        marker = json.loads((model_dir / MODEL_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("schema_version") != MARKER_SCHEMA:
        return None
    files = marker.get("files")
    if not isinstance(files, dict) or not files or not isinstance(marker.get("snapshot"), str):
        return None
    for rel, entry in files.items():
        path = model_dir / rel
        if not isinstance(entry, list) or not path.is_file() or path.stat().st_size != entry[0]:
            return None
    return marker


def finalize(tmp: Path, final: Path, provenance: Mapping[str, Any]) -> dict[str, Any]:
    """Hash the files of `tmp`, write the marker, and move it to `final` in one rename."""
    rels = directory_files(tmp)
    hashes = {rel: sha256_file(tmp / rel) for rel in rels}
    marker = {
        "schema_version": MARKER_SCHEMA,
        "snapshot": content_hash(hashes),
        "files": {rel: [(tmp / rel).stat().st_size, hashes[rel]] for rel in rels},
        **provenance,
    }
    atomic_write_json(tmp / MODEL_MARKER, marker)
    if final.exists():  # an older directory without a valid marker
        shutil.rmtree(final)
    os.rename(tmp, final)
    return marker


def fresh_tmp(final: Path) -> Path:
    """An empty-to-be build directory next to `final` (a leftover of a crashed build is removed)."""
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    return tmp


def resolved(spec: BuiltinModel, model_dir: Path, marker: Mapping[str, Any]) -> ResolvedModel:
    """The prepared model, described from its directory."""
    return describe_model_dir(
        model_dir, ref=f"{BUILTIN_PREFIX}{spec.name}", snapshot=marker["snapshot"], source="builtin"
    )


def not_present(spec: BuiltinModel, path: Path) -> ResolvedModel:
    """A builtin model not prepared yet: facts from its description, `path` where it will be."""
    return ResolvedModel(
        ref=f"{BUILTIN_PREFIX}{spec.name}",
        path=path,
        snapshot="",
        source="builtin",
        present=False,
        config={},
        vocab_size=spec.vocab_size,
        tokenizer_sha256=None,
        tokenizer_fingerprint=spec.tokenizer_fingerprint,
        num_params=spec.num_params,
        num_params_source="builtin",
        weights_bytes=None,
        has_native_mtp=False,
        architectures=spec.architectures,
        model_type=spec.model_type,
        num_hidden_layers=spec.num_hidden_layers,
        hidden_size=spec.hidden_size,
        dtype=spec.dtype,
    )


def needs_env(spec: BuiltinModel) -> EngineSetupError:
    """The error for a builtin that must be prepared while no engine python is there to do it."""
    return EngineSetupError(
        f"{BUILTIN_PREFIX}{spec.name} is not prepared yet and no engine environment is set up to prepare it",
        location=f"{BUILTIN_PREFIX}{spec.name}",
        fix="set up the managed engine environment first (it converts the bundled model once)",
    )
