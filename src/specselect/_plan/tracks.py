"""Tracks: candidates that run on another target get their own target-only baseline (contract section 6).

A track is one target and its baseline group. The default track is `[target]` with baseline
`g0_target_only`. Every other effective target (a candidate's `target` override applied to `[target]`)
is a track whose baseline is

* the `g0_target_only@NAME` entry the plan declares with that same target, or else
* an implicit `g0_target_only@SLUG`, SLUG being the last path component of the target's model reference
  (`builtin:` removed, characters outside `[A-Za-z0-9._-]` replaced by `-`); when two tracks would share a
  SLUG, each gets `-` plus the first 8 hex digits of the sha256 of its canonical target JSON.

Names depend only on the targets, so they are stable across runs of the same plan. Only within-pair
ratios (candidate / its own track's baseline) may be compared across tracks, never raw latencies.

With `[run] candidates_per_block` a track's candidates are split into blocks, each a track of its own: the
first keeps the track's baseline, block k (2, 3, ...) gets that baseline's configuration launched again as
`<baseline>.block<k>`. Blocks are filled in plan order with whole entries (an A/A control, a candidate, or a
swept entry's sub-candidates with its schedule, since the schedule is derived from them), an entry larger than
a block getting one of its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from specselect._common.canonical import canonical_json
from specselect._plan.candidates import Candidate
from specselect._plan.overrides import TargetOverride, effective_target
from specselect._plan.rules import BASELINE_FAMILY, BASELINE_GROUP, TRACK_SEPARATOR
from specselect._plan.sections import TargetConfig

__all__ = ["Track", "compute_tracks", "split_into_blocks", "target_key", "track_slug"]

_SLUG_BAD = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Track:
    """One target with its baseline group and the candidates measured against that baseline."""

    name: str
    """The baseline group's name; also the `track` of every result on this target."""
    target: TargetConfig
    baseline: Candidate
    declared: bool
    """True when the plan declares the baseline (always for the default track's explicit baseline)."""
    members: tuple[str, ...]
    """Candidate names on this track, in plan order."""

    @property
    def is_default(self) -> bool:
        return self.name == BASELINE_GROUP


def target_key(target: TargetConfig) -> str:
    """Canonical JSON of a target: equal keys mean the same track."""
    return canonical_json(target.model_dump(mode="json"))


def track_slug(target: TargetConfig) -> str:
    """The readable part of an implicit track name (see the module docstring)."""
    ref = target.model.removeprefix("builtin:").rstrip("/\\")
    last = re.split(r"[/\\]", ref)[-1] if ref else ""
    slug = _SLUG_BAD.sub("-", last).strip("-.")[:60]
    return slug or "target"


def _hashed(slug: str, target: TargetConfig) -> str:
    return f"{slug}-{hashlib.sha256(target_key(target).encode()).hexdigest()[:8]}"


def compute_tracks(default: TargetConfig, candidates: Sequence[Candidate]) -> tuple[Track, ...]:
    """Every track of a plan, the default first, then in order of first appearance (never raises)."""
    default_baseline = next((c for c in candidates if c.name == BASELINE_GROUP), None)
    default_key = target_key(default)
    declared: dict[str, Candidate] = {}
    for cand in candidates:
        if cand.is_track_baseline:
            declared.setdefault(target_key(effective_target(default, cand.target)), cand)
    members: dict[str, list[str]] = {default_key: []}
    targets: dict[str, TargetConfig] = {default_key: default}
    for cand in candidates:
        if cand.is_baseline:
            continue
        target = effective_target(default, cand.target)
        key = target_key(target)
        targets.setdefault(key, target)
        members.setdefault(key, []).append(cand.name)
    for key, cand in declared.items():
        if key not in members:
            members[key] = []
            targets[key] = effective_target(default, cand.target)
    implicit = [key for key in members if key != default_key and key not in declared]
    slugs = {key: track_slug(targets[key]) for key in implicit}
    taken = {c.name.split(TRACK_SEPARATOR, 1)[1] for c in declared.values()}
    counts: dict[str, int] = {}
    for slug in slugs.values():
        counts[slug] = counts.get(slug, 0) + 1
    out: list[Track] = []
    for key, names in members.items():
        if key == default_key:
            base = default_baseline or Candidate.implicit_baseline()
            out.append(Track(BASELINE_GROUP, default, base, default_baseline is not None, tuple(names)))
        elif key in declared:
            out.append(Track(declared[key].name, targets[key], declared[key], True, tuple(names)))
        else:
            slug = slugs[key]
            if counts[slug] > 1 or slug in taken:
                slug = _hashed(slug, targets[key])
            name = f"{BASELINE_GROUP}{TRACK_SEPARATOR}{slug}"
            override = TargetOverride.model_validate(targets[key].model_dump(exclude_none=True))
            base = Candidate(name=name, family=BASELINE_FAMILY, target=override)
            out.append(Track(name, targets[key], base, False, tuple(names)))
    return tuple(out)


def _entries(members: Sequence[str], by_name: dict[str, Candidate]) -> list[list[str]]:
    """`members` grouped by the plan entry they come from, in order of first appearance."""
    entries: dict[str, list[str]] = {}
    for name in members:
        cand = by_name.get(name)
        sweep = cand.sweep.parent if cand is not None and cand.sweep is not None else None
        entry = sweep or (cand.schedule_of if cand is not None else None) or name
        entries.setdefault(entry, []).append(name)
    return list(entries.values())


def _blocks(entries: Sequence[list[str]], per_block: int) -> list[list[str]]:
    blocks: list[list[str]] = []
    for entry in entries:
        if blocks and len(blocks[-1]) + len(entry) <= per_block:
            blocks[-1].extend(entry)
        else:
            blocks.append(list(entry))
    return blocks


def split_into_blocks(
    tracks: Sequence[Track], candidates: Sequence[Candidate], per_block: int | None
) -> tuple[Track, ...]:
    """Every track as its blocks of at most `per_block` candidates (see the module docstring); unchanged when
    `per_block` is None or a track's candidates fit in one block."""
    if per_block is None:
        return tuple(tracks)
    by_name = {c.name: c for c in candidates}
    out: list[Track] = []
    for track in tracks:
        blocks = _blocks(_entries(track.members, by_name), per_block) or [[]]
        out.append(dataclasses.replace(track, members=tuple(blocks[0])))
        for number, members in enumerate(blocks[1:], start=2):
            baseline = track.baseline.for_block(number)
            out.append(Track(baseline.name, track.target, baseline, False, tuple(members)))
    return tuple(out)
