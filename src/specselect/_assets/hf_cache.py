"""Offline resolution of `org/name` model ids in the local Hugging Face hub cache (no hub library needed).

The cache layout: `<hub>/models--org--name/refs/<branch or tag>` holds a commit hash, and
`<hub>/models--org--name/snapshots/<commit>/` holds the files (symlinks into `blobs/`). Nothing is
ever downloaded: a model that is not in the cache is reported as missing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from specselect.errors import EngineSetupError

__all__ = ["HF_ID_PATTERN", "hub_cache_dir", "is_hf_id", "resolve_hf_snapshot"]

HF_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
"""An `org/name` model id (one slash, no path syntax)."""

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def is_hf_id(ref: str) -> bool:
    """True when `ref` has the shape of a hub model id (`org/name`)."""
    return bool(HF_ID_PATTERN.match(ref)) and ".." not in ref


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


def resolve_hf_snapshot(
    repo_id: str, revision: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Path, str]:
    """(snapshot directory, commit hash) of a cached model; EngineSetupError when it is not cached.

    `revision` may be a branch or tag (looked up in `refs/`) or a full commit hash; default `main`.
    """
    hub = hub_cache_dir(environ)
    repo_dir = hub / f"models--{repo_id.replace('/', '--')}"
    wanted = revision or "main"
    fix = (
        f"download {repo_id} into the Hugging Face cache on a machine with access and copy {repo_dir}, "
        "or pass the local model directory instead (nothing is downloaded at run time)"
    )
    if not repo_dir.is_dir():
        raise EngineSetupError(f"model {repo_id} is not in the local Hugging Face cache", location=str(hub), fix=fix)
    if _COMMIT.match(wanted):
        commit = wanted
    else:
        ref_file = repo_dir / "refs" / wanted
        try:
            commit = ref_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            known = sorted(p.name for p in (repo_dir / "refs").glob("*")) if (repo_dir / "refs").is_dir() else []
            raise EngineSetupError(
                f"revision {wanted!r} of {repo_id} is not in the local cache "
                f"(cached refs: {', '.join(known) or 'none'})",
                location=str(repo_dir),
                fix=f"pass one of the cached revisions or a commit hash; {fix}",
            ) from exc
        if not _COMMIT.match(commit):
            raise EngineSetupError(
                f"ref {wanted!r} does not hold a commit hash", location=str(ref_file), fix="repair or re-download"
            )
    snapshot = repo_dir / "snapshots" / commit
    if not snapshot.is_dir():
        raise EngineSetupError(
            f"snapshot {commit} of {repo_id} is not in the local cache", location=str(repo_dir), fix=fix
        )
    if not (snapshot / "config.json").is_file():
        raise EngineSetupError(
            f"snapshot {commit} of {repo_id} has no config.json (incomplete download?)",
            location=str(snapshot),
            fix=fix,
        )
    return snapshot, commit
