"""Fetching a model from the hub into the Hugging Face cache (`specselect fetch`): pinned to a commit and verified.

The `huggingface_hub` library does the talking: the model's info resolves the revision to a commit and lists every
file's size and, for LFS files, its sha256; `snapshot_download` pinned to that commit fetches the files into the
normal cache layout (HF_HOME / HF_HUB_CACHE), where `hf_cache.find_snapshot` and the engines find them. Only what
serving needs is fetched (`ALLOW_PATTERNS`: config, generation config, tokenizer and chat-template files, and the
weights: the shards a safetensors index names when there is one, so a repository that also ships a consolidated copy
is not fetched twice). Every file is then checked against the listing (size; sha256 where listed) and the sizes are
recorded beside the snapshot (`snapshot_files.FetchRecord`), so later runs tell a complete snapshot from a partial
one offline.

Resuming: files already complete are never fetched again; a connection cut in the middle of a file is resumed by
the library from the byte it reached; a file interrupted by Ctrl-C or a failed run starts again from its first byte.

The token comes from HF_TOKEN (else the library's stored login) and is handed to the library in-process: never
printed, recorded or put on a command line. HF_ENDPOINT, the cache variables and HF_HUB_OFFLINE are read when a
function is called, not when the library was imported.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specselect._assets.hf_cache import (
    COMMIT_PATTERN,
    cached_refs,
    hub_cache_dir,
    is_hf_id,
    is_revision,
    repo_cache_dir,
    split_revision,
)
from specselect._assets.hub_access import endpoint_override, hub_token
from specselect._assets.hub_files import ALLOW_PATTERNS, INDEX_SUFFIXES, expected_bytes, is_weight, wanted_files
from specselect._assets.resources import format_gb, free_disk_bytes
from specselect._assets.snapshot_files import FetchedFile, FetchRecord, cached_state, write_record
from specselect._common.fileio import atomic_write_text, sha256_file
from specselect._common.secrets import redact_text, secret_values
from specselect.errors import EngineSetupError, MissingDependencyError

__all__ = [
    "ALLOW_PATTERNS",
    "FetchResult",
    "HubFile",
    "HubListing",
    "ensure_cached",
    "fetch_command",
    "fetch_model",
    "format_size",
    "hub_listing",
    "missing_model_error",
    "verify_files",
]

_TIMEOUT_S = 20.0
_TRUE = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True)
class HubFile:
    """A file as the hub lists it: its path in the repository, its size and (LFS files) its sha256."""

    path: str
    size: int | None
    sha256: str | None = None


@dataclass(frozen=True)
class HubListing:
    """A revision of a model repository resolved to its commit, with the files serving needs."""

    repo: str
    revision: str
    commit: str
    gated: bool
    files: tuple[HubFile, ...]

    @property
    def expected_bytes(self) -> int | None:
        """What a fetch will download, before the index is read (`hub_files.expected_bytes`); None when the hub
        left a size out."""
        return expected_bytes({f.path: f.size for f in self.files})


@dataclass(frozen=True)
class FetchResult:
    """What `fetch_model` fetched and verified."""

    listing: HubListing
    snapshot: Path
    files: tuple[HubFile, ...]
    record: Path

    @property
    def total_bytes(self) -> int:
        """Bytes of the verified files."""
        return sum(f.size or 0 for f in self.files)

    @property
    def hashed(self) -> int:
        """Files whose sha256 was checked against the hub's listing."""
        return sum(f.sha256 is not None for f in self.files)


def format_size(num_bytes: int) -> str:
    """`16.07 GB`, or `412.3 MB` below a tenth of a gigabyte (a draft head, a tokenizer)."""
    return format_gb(num_bytes) if num_bytes >= 10**8 else f"{num_bytes / 1e6:.1f} MB"


def fetch_command(repo: str, revision: str | None) -> str:
    """The exact command that fetches `repo` at `revision`."""
    return f"specselect fetch {repo}@{revision or 'main'}"


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def _offline(env: Mapping[str, str]) -> bool:
    return any(env.get(key, "").strip().lower() in _TRUE for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _library() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise MissingDependencyError(
            "the huggingface_hub library is not installed", fix="pip install huggingface_hub"
        ) from None
    return huggingface_hub


def _gated_error(repo: str, env: Mapping[str, str]) -> EngineSetupError:
    state = "HF_TOKEN is not set" if hub_token(env) is None else "the token in HF_TOKEN has no access to it"
    return EngineSetupError(
        f"{repo} is a gated model and {state}",
        location=endpoint_override(env) or "the hub",
        fix=f"accept {repo}'s licence on its hub page with your account, then export HF_TOKEN=<a read token of "
        "that account> and run the command again",
    )


def _hub_error(exc: Exception, repo: str, revision: str, env: Mapping[str, str]) -> EngineSetupError:
    """One line for what the library raised, with its fix; secrets in the library's message are removed."""
    errors = _library().errors
    where = endpoint_override(env) or "the hub"
    if isinstance(exc, errors.GatedRepoError):
        return _gated_error(repo, env)
    if isinstance(exc, errors.RevisionNotFoundError):
        return EngineSetupError(
            f"revision {revision!r} of {repo} does not exist on the hub",
            location=where,
            fix="give an existing branch, tag or commit hash after @",
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        return EngineSetupError(
            f"model {repo} was not found on the hub",
            location=where,
            fix="check the org/name spelling; a private model needs HF_TOKEN set to a token with access",
        )
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return EngineSetupError(
        f"fetching {repo}@{revision} failed: {redact_text(first, secret_values(env))[:300]}",
        location=where,
        fix="check the connection (and HF_ENDPOINT, HF_TOKEN), then run the same command again: files already "
        "complete are kept",
    )


def _transient_errors() -> tuple[type[Exception], ...]:
    """What the library raises when the hub answers badly or not at all (not a bug of ours)."""
    hub = _library()
    import httpx2

    return (hub.errors.HfHubHTTPError, hub.errors.LocalEntryNotFoundError, httpx2.HTTPError, OSError, ValueError)


def hub_listing(repo: str, revision: str | None = None, *, environ: Mapping[str, str] | None = None) -> HubListing:
    """The hub's view of `repo` at `revision` (default `main`): its commit and the files serving needs."""
    env = _env(environ)
    wanted = revision or "main"
    if not is_revision(wanted):
        raise EngineSetupError(f"{wanted[:80]!r} is not a revision", location=repo, fix="give a branch, tag or commit")
    if _offline(env):
        raise EngineSetupError(
            "HF_HUB_OFFLINE is set: the hub is not contacted",
            location=f"{repo}@{wanted}",
            fix="unset HF_HUB_OFFLINE (and TRANSFORMERS_OFFLINE) to fetch",
        )
    api = _library().HfApi(endpoint=endpoint_override(env), token=hub_token(env))
    try:
        info = api.model_info(repo, revision=wanted, files_metadata=True, timeout=_TIMEOUT_S)
    except _transient_errors() as exc:
        raise _hub_error(exc, repo, wanted, env) from None
    siblings = {s.rfilename: s for s in info.siblings or ()}
    files = tuple(
        HubFile(
            path=name,
            size=siblings[name].lfs.size if siblings[name].lfs else siblings[name].size,
            sha256=siblings[name].lfs.sha256 if siblings[name].lfs else None,
        )
        for name in sorted(wanted_files(siblings))
    )
    if not info.sha or not COMMIT_PATTERN.match(info.sha):
        raise EngineSetupError(
            f"the hub gave no commit for {repo}@{wanted}",
            location=endpoint_override(env) or "the hub",
            fix="check HF_ENDPOINT points at a model hub",
        )
    return HubListing(repo=repo, revision=wanted, commit=info.sha, gated=bool(info.gated), files=files)


def missing_model_error(repo: str, revision: str | None, environ: Mapping[str, str] | None = None) -> EngineSetupError:
    """The error for a model that is not in the cache: what is missing, its size (from the hub when it answers,
    else unknown) and the command that fetches it. Never downloads anything."""
    env = _env(environ)
    try:
        total = hub_listing(repo, revision, environ=env).expected_bytes
        size = f"{format_size(total)} on the hub" if total is not None else "size unknown: the hub lists no sizes"
    except EngineSetupError as exc:
        size = f"size unknown: {exc.message}"
    known = cached_refs(repo, env)
    cached = f"; cached refs: {', '.join(known)}" if known else ""
    return EngineSetupError(
        f"model {repo} at revision {revision or 'main'!r} is not in the local Hugging Face cache ({size}{cached})",
        location=str(hub_cache_dir(env)),
        fix=f"run `{fetch_command(repo, revision)}`, or set [assets] download = true in the plan",
    )


def _silent_bars() -> Any:
    """A progress-bar class that shows nothing (`--quiet`): the library's own, always disabled."""
    base = _library().utils.tqdm

    class Silent(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Silent


def _download(listing: HubListing, paths: list[str], env: Mapping[str, str], *, bars: bool) -> None:
    if not paths:
        return
    try:
        _library().snapshot_download(
            listing.repo,
            revision=listing.commit,
            cache_dir=str(hub_cache_dir(env)),
            allow_patterns=[glob.escape(p) for p in paths],
            endpoint=endpoint_override(env),
            token=hub_token(env),
            etag_timeout=_TIMEOUT_S,
            tqdm_class=None if bars else _silent_bars(),
        )
    except _transient_errors() as exc:
        raise _hub_error(exc, listing.repo, listing.revision, env) from None


def _chosen_weights(listing: HubListing, snapshot: Path) -> tuple[HubFile, ...]:
    """The weight files to fetch: those an index names (when there is one), else every listed weight file."""
    weights = [f for f in listing.files if is_weight(f.path)]
    named: set[str] = set()
    for index in (f for f in listing.files if f.path.endswith(INDEX_SUFFIXES)):
        try:
            weight_map = json.loads((snapshot / index.path).read_text(encoding="utf-8")).get("weight_map", {})
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(weight_map, dict):
            named |= {str(v) for v in weight_map.values()}
    if named:
        unlisted = sorted(named - {f.path for f in weights})
        if unlisted:
            raise EngineSetupError(
                f"the index of {listing.repo}@{listing.commit[:12]} names shards the hub does not list: "
                + ", ".join(unlisted[:5]),
                location=str(snapshot),
                fix="the repository is broken at this revision: pick another revision",
            )
        weights = [f for f in weights if f.path in named]
    return tuple(weights)


def _require_disk(listing: HubListing, files: Iterable[HubFile], snapshot: Path) -> None:
    need = sum(f.size or 0 for f in files if not (snapshot / f.path).is_file())
    free = free_disk_bytes(snapshot)
    if need > free:
        raise EngineSetupError(
            f"not enough free disk for {listing.repo}: {format_gb(need)} to fetch, {format_gb(free)} free",
            location=str(snapshot.parent.parent),
            fix=f"free {format_gb(need - free)} there, or point HF_HOME (or HF_HUB_CACHE) to a larger filesystem",
        )


def _reject(listing: HubListing, snapshot: Path, name: str, what: str) -> EngineSetupError:
    """Remove a file that failed verification (so the snapshot reads as partial) and say so."""
    path = snapshot / name
    blob = path.resolve()
    for stale in (blob, path):
        stale.unlink(missing_ok=True)
    return EngineSetupError(
        f"{name}: {what} (the file was removed)",
        location=str(snapshot),
        fix=f"run `{fetch_command(listing.repo, listing.commit)}` again; if it fails the same way, the hub's copy "
        "differs from its own listing",
    )


def verify_files(listing: HubListing, snapshot: Path, files: Iterable[HubFile]) -> None:
    """Every file present at its listed size and, where listed, with its sha256; EngineSetupError otherwise."""
    for f in files:
        path = snapshot / f.path
        if not path.is_file():
            raise EngineSetupError(
                f"{f.path} is missing after the download",
                location=str(snapshot),
                fix=f"run `{fetch_command(listing.repo, listing.commit)}` again",
            )
        size = path.stat().st_size
        if f.size is not None and size != f.size:
            raise _reject(listing, snapshot, f.path, f"{size} bytes, the hub lists {f.size}")
        if f.sha256 is not None and (digest := sha256_file(path)) != f.sha256:
            raise _reject(listing, snapshot, f.path, f"sha256 {digest[:16]} differs from the hub's {f.sha256[:16]}")


def _write_ref(listing: HubListing, env: Mapping[str, str]) -> None:
    # The branch or tag points at the commit being fetched from the start, as the library's own downloads record
    # it: an interrupted fetch then leaves a snapshot that reads as partial, not as absent.
    if not COMMIT_PATTERN.match(listing.revision):
        atomic_write_text(repo_cache_dir(listing.repo, env) / "refs" / listing.revision, listing.commit)


def fetch_model(
    repo: str,
    revision: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    bars: bool = True,
) -> FetchResult:
    """Fetch `repo` at `revision` (default `main`) into the cache, verify it and record it; EngineSetupError (one
    line naming the file or the cause, with the fix) when it cannot. `bars`: the library's progress bars."""
    env = _env(environ)
    say = progress or (lambda _text: None)
    listing = hub_listing(repo, revision, environ=env)
    say(f"{repo}@{listing.revision}: commit {listing.commit}")
    if listing.gated and hub_token(env) is None:
        raise _gated_error(repo, env)
    if not any(is_weight(f.path) for f in listing.files):
        raise EngineSetupError(
            f"{repo}@{listing.revision} has no safetensors or PyTorch weights at its top level",
            location=endpoint_override(env) or "the hub",
            fix="check the repository; a model in another format must be downloaded by hand and given as a directory",
        )
    snapshot = repo_cache_dir(repo, env) / "snapshots" / listing.commit
    small = [f for f in listing.files if not is_weight(f.path)]
    _write_ref(listing, env)
    _download(listing, [f.path for f in small], env, bars=bars)
    weights = _chosen_weights(listing, snapshot)
    _require_disk(listing, weights, snapshot)
    say(f"{len(weights)} weight file(s), {format_size(sum(f.size or 0 for f in weights))}")
    _download(listing, [f.path for f in weights], env, bars=bars)
    files = (*small, *weights)
    verify_files(listing, snapshot, files)
    record = FetchRecord(
        repo=repo,
        revision=listing.revision,
        commit=listing.commit,
        files={f.path: FetchedFile(size=(snapshot / f.path).stat().st_size, sha256=f.sha256) for f in files},
    )
    return FetchResult(listing=listing, snapshot=snapshot, files=files, record=write_record(snapshot, record))


def ensure_cached(
    ref: str,
    revision: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> FetchResult | None:
    """Fetch a hub reference (`org/name[@REVISION]`, or `revision` beside it) unless a complete snapshot of it is
    cached already; None when nothing was fetched (cached and complete, or not a hub id)."""
    env = _env(environ)
    repo, pinned = split_revision(ref)
    if not is_hf_id(repo):
        return None
    wanted = pinned or revision
    if cached_state(repo, wanted, env).present:
        return None
    return fetch_model(repo, wanted, environ=env, progress=progress)
