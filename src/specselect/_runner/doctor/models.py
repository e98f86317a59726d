"""The models a plan serves (`LoadedPlan.served_models`: every track's target, every enabled candidate's proposer)
and where each stands: local, bundled and prepared, bundled but still to prepare (its size on disk is known), or a
hub id complete in the local cache, there in part (by the fetch's rule, `snapshot_files.cached_state`) or still to
download. Nothing is prepared, hashed or downloaded here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from specselect._assets.builtin import BUILTIN_MODELS
from specselect._assets.hf_cache import hub_cache_dir, is_hf_id
from specselect._assets.refs import BUILTIN_PREFIX, resolve_model
from specselect._assets.resources import format_gb
from specselect._assets.snapshot_files import cached_state
from specselect._common.home import default_home
from specselect._plan import LoadedPlan
from specselect.errors import EngineSetupError

__all__ = ["NeededModel", "describe", "needed_models"]

Standing = Literal["present", "to_prepare", "to_download", "partial", "not_found"]


@dataclass(frozen=True)
class NeededModel:
    """One model of the plan and where it stands."""

    ref: str
    revision: str | None
    standing: Standing
    where: Path
    """Where it is, or will be written (the hub cache, specselect's home)."""
    size_bytes: int | None = None
    """Its size on disk when known before it exists (a bundled model's, measured)."""
    missing: tuple[str, ...] = ()
    """What a partial snapshot lacks (`name (why)`)."""

    @property
    def label(self) -> str:
        return f"{self.ref}@{self.revision}" if self.revision else self.ref

    @property
    def needs_download(self) -> bool:
        return self.standing in ("to_download", "partial")

    @property
    def needs_disk(self) -> bool:
        return self.standing in ("to_download", "partial", "to_prepare")


def _standing(ref: str, revision: str | None, home: Path | None) -> NeededModel:
    if ref.startswith(BUILTIN_PREFIX):
        spec = BUILTIN_MODELS.get(ref[len(BUILTIN_PREFIX) :])
        try:
            found = resolve_model(ref, home=home, prepare=False)  # a bundled model's known facts: nothing is built
        except EngineSetupError:
            return NeededModel(ref, revision, "not_found", home or default_home())
        size = spec.converted_bytes if spec is not None else None
        where = found.path if found.present else (home or default_home())
        return NeededModel(ref, revision, "present" if found.present else "to_prepare", where, size)
    if is_hf_id(ref) and not Path(ref).expanduser().is_dir():
        try:
            cached = cached_state(ref, revision)
        except EngineSetupError:  # an unusable ref or record: a fetch writes it again
            return NeededModel(ref, revision or "main", "to_download", hub_cache_dir())
        if cached.state == "present" and cached.snapshot is not None:
            return NeededModel(ref, revision, "present", cached.snapshot)
        standing: Standing = "partial" if cached.state == "partial" else "to_download"
        return NeededModel(ref, revision or "main", standing, hub_cache_dir(), missing=cached.missing)
    path = Path(ref).expanduser()
    return NeededModel(ref, revision, "present" if (path / "config.json").is_file() else "not_found", path)


def needed_models(loaded: LoadedPlan, home: Path | None) -> list[NeededModel]:
    """Every model the plan serves, once each, targets first."""
    return [_standing(ref, revision, home) for ref, revision in loaded.served_models()]


def describe(model: NeededModel) -> str:
    """`org/name@main: to download` with its size when known (a partial snapshot: with what it lacks)."""
    size = f" ({format_gb(model.size_bytes)})" if model.size_bytes is not None else ""
    more = f" and {len(model.missing) - 1} more" if len(model.missing) > 1 else ""
    lacks = f", lacking {model.missing[0]}{more}" if model.missing else ""
    return f"{model.label}: {model.standing.replace('_', ' ')}{size}{lacks} at {model.where}"
