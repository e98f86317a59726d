"""Model references -> exact, content-identified model directories (`ResolvedModel`).

A reference is one of:
- `builtin:NAME`: a model specselect prepares itself from a bundled file (see `builtin.py`);
- a local directory (absolute, `./`, `~`, or any existing path): identified by a hash of its files;
- an `org/name` hub id, optionally pinned as `org/name@REVISION` (a branch, tag or commit): resolved OFFLINE
  through the local Hugging Face cache, identified by its commit, and refused when the snapshot is partial.
Nothing is downloaded here: `specselect fetch` (`hub_fetch.py`) fills the cache, and preflight calls it for a
plan with `[assets] download = true`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from specselect._assets.config_facts import (
    architectures,
    config_int,
    estimate_params_from_config,
    has_native_mtp,
    load_config,
)
from specselect._assets.hf_cache import find_snapshot, is_hf_id, split_revision
from specselect._assets.identity import snapshot_identity, tokenizer_sha256
from specselect._assets.safetensors_meta import checkpoint_size
from specselect._assets.snapshot_files import require_complete
from specselect._assets.tokenizer_id import tokenizer_fingerprint
from specselect._common.home import default_home
from specselect.errors import EngineSetupError
from specselect.records.assets import ModelSource, ResolvedModel, SnapshotMethod

__all__ = ["BUILTIN_PREFIX", "describe_model_dir", "hash_cache_dir", "resolve_model"]

BUILTIN_PREFIX = "builtin:"

_SOURCE_METHOD: dict[ModelSource, SnapshotMethod] = {"builtin": "content_sha256", "hf_cache": "hub_commit"}


def hash_cache_dir(home: Path | None = None) -> Path:
    """Where per-file hash caches of local model directories are kept."""
    return (home or default_home()) / "cache" / "file-hashes"


def describe_model_dir(
    path: Path, *, ref: str, snapshot: str, source: ModelSource, snapshot_method: SnapshotMethod | None = None
) -> ResolvedModel:
    """Read config.json, tokenizer files and safetensors headers of `path` (no weights are read).

    `snapshot_method` defaults to the source's (a builtin's marker hashes every byte; a hub id is its commit).
    """
    config = load_config(path)
    size = checkpoint_size(path)
    if size is not None:
        num_params: int | None = size.num_params
        params_source: Literal["safetensors", "config"] | None = "safetensors"
        weights_bytes: int | None = size.tensor_bytes
    else:
        num_params = estimate_params_from_config(config)
        params_source = "config" if num_params is not None else None
        weights_bytes = None
    dtype = config.get("dtype") or config.get("torch_dtype")
    model_type = config.get("model_type")
    return ResolvedModel(
        ref=ref,
        path=path,
        snapshot=snapshot,
        source=source,
        snapshot_method=snapshot_method or _SOURCE_METHOD.get(source),
        config=config,
        vocab_size=config_int(config, "vocab_size"),
        tokenizer_sha256=tokenizer_sha256(path),
        tokenizer_fingerprint=tokenizer_fingerprint(path),
        num_params=num_params,
        num_params_source=params_source,
        weights_bytes=weights_bytes,
        has_native_mtp=has_native_mtp(config),
        architectures=architectures(config),
        model_type=str(model_type) if model_type is not None else None,
        num_hidden_layers=config_int(config, "num_hidden_layers", "n_layer", "num_layers"),
        hidden_size=config_int(config, "hidden_size", "d_model", "n_embd"),
        dtype=str(dtype) if dtype is not None else None,
    )


def _looks_like_path(ref: str) -> bool:
    return ref.startswith(("/", "./", "../", "~")) or ref in (".", "..") or "\\" in ref


def _one_revision(ref: str, pinned: str | None, revision: str | None) -> str | None:
    """The revision of a hub reference: `@REVISION` in it, or the separate one, not two different ones."""
    if pinned == "":
        raise EngineSetupError("empty revision after @", location=ref, fix="write org/name@REVISION or org/name")
    if pinned is not None and revision is not None and pinned != revision:
        raise EngineSetupError(
            f"two revisions: @{pinned} in the reference and {revision!r} beside it",
            location=ref,
            fix="give the revision once, as org/name@REVISION",
        )
    return pinned if pinned is not None else revision


def _cached_snapshot(repo: str, revision: str | None) -> tuple[Path, str]:
    """(snapshot directory, commit) of a complete cached snapshot; EngineSetupError saying what is missing, its
    size and the `specselect fetch` command otherwise."""
    found = find_snapshot(repo, revision)
    if found is None:
        from specselect._assets.hub_fetch import missing_model_error

        raise missing_model_error(repo, revision)
    snapshot, commit = found
    require_complete(repo, snapshot, commit)
    return snapshot, commit


def resolve_model(
    ref: str,
    *,
    revision: str | None = None,
    home: Path | None = None,
    python: Path | None = None,
    prepare: bool = True,
    progress: Callable[[str], None] | None = None,
    verify_weights: bool = False,
) -> ResolvedModel:
    """Resolve a model reference; EngineSetupError (naming the reference and a fix) when it cannot be found.

    `prepare=False` never converts a builtin model (it is reported with `present=False` instead).
    `python` (an engine environment's) converts builtins that are not prepared yet; `progress` hears what
    that costs (download size, conversion) before it starts. A local directory larger than
    `FULL_HASH_MAX_BYTES` is identified by its files and headers unless `verify_weights` (`snapshot_identity`).
    """
    ref = ref.strip()
    if not ref:
        raise EngineSetupError("empty model reference", fix="give a builtin:NAME, a directory or an org/name id")
    if ref.startswith(BUILTIN_PREFIX):
        from specselect._assets.builtin import resolve_builtin

        name = ref[len(BUILTIN_PREFIX) :]
        return resolve_builtin(name, home=home, python=python, prepare=prepare, progress=progress)
    local = Path(ref).expanduser()
    if _looks_like_path(ref) or local.is_dir():
        if not local.is_dir():
            raise EngineSetupError(
                "model directory does not exist", location=ref, fix="check the path (it must hold config.json)"
            )
        if revision is not None:
            raise EngineSetupError(
                "a revision applies to hub ids only, not to a local directory",
                location=ref,
                fix="drop the revision or use an org/name id",
            )
        root = local.resolve()
        load_config(root)  # fail early, before hashing weights, when it is not a model directory
        snapshot, method = snapshot_identity(root, hash_cache_dir(home), verify_weights=verify_weights)
        return describe_model_dir(root, ref=ref, snapshot=snapshot, source="local_dir", snapshot_method=method)
    repo, pinned = split_revision(ref)
    if is_hf_id(repo):
        snapshot_dir, commit = _cached_snapshot(repo, _one_revision(ref, pinned, revision))
        return describe_model_dir(snapshot_dir, ref=ref, snapshot=commit, source="hf_cache")
    raise EngineSetupError(
        "not a model reference",
        location=ref,
        fix="use builtin:smollm2-135m, a local directory, or an org/name[@REVISION] hub id",
    )
