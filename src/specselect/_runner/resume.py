"""`--resume`: which earlier results may continue, under which conditions, and which of their groups are kept.

A resumed run goes on only under the conditions its kept groups were measured under: the same engine version,
host, device set and target snapshots as the attempt before (`environment_changes`); otherwise it refuses in
one line, unless `--allow-changed-environment`, which the new preflight records. Each attempt's preflight is
kept inside the next one's (`PreflightFile.earlier_attempts`).

A kept group's records are read from disk once (hash-checked) into the run's records, so every later step
reads them from memory like those of the groups measured now.
"""

from __future__ import annotations

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document, load_manifest, load_records
from specselect._common.fileio import sha256_file
from specselect._engines.base import recorded_request_spec_metrics
from specselect._evidence.pipeline import InMemoryRecords
from specselect._plan import LoadedPlan
from specselect.errors import ResultsError, UsageError
from specselect.records.group import GroupLaunch, GroupResult
from specselect.records.results import Manifest, PreflightAttempt, PreflightFile

__all__ = [
    "changed_environment_warning",
    "check_resume",
    "environment_changes",
    "keep_records",
    "resumable_group",
    "resumed_preflight",
]


def check_resume(layout: RunLayout, loaded: LoadedPlan, resume: bool) -> Manifest | None:
    """The earlier run's manifest when `--resume` continues one; None for a fresh label.

    UsageError when results exist without `--resume`; ResultsError when the plan changed since.
    """
    exists = layout.root.exists() and any(layout.root.iterdir())
    if not exists:
        return None
    if not resume:
        raise UsageError(
            f"results for label {layout.root.name!r} already exist",
            location=str(layout.root),
            fix="add --resume to continue that run, or choose another --label",
        )
    manifest = load_manifest(layout)
    if manifest.plan_hash != loaded.plan_hash:
        raise ResultsError(
            "the plan changed since this run started (plan hash differs)",
            location=str(layout.manifest),
            fix="resume with the same plan, or start a new --label",
        )
    return manifest


def _intact(layout: RunLayout, rel: str | None, digest: str | None) -> bool:
    if rel is None:
        return True
    path = layout.root / rel
    return path.exists() and not (digest and sha256_file(path) != digest)


def resumable_group(layout: RunLayout, name: str, previous: Manifest | None) -> GroupResult | None:
    """A group's earlier result when it is complete and its files are intact (else None: run it again)."""
    if previous is None:
        return None
    entry = next((g for g in previous.groups if g.name == name), None)
    if entry is None or not entry.complete or entry.summary is None:
        return None
    if not _intact(layout, entry.summary, entry.summary_sha256):
        return None
    try:
        group = load_document(layout.root / entry.summary, GroupResult)
    except ResultsError:
        return None
    files = (
        *((s.records_path, s.records_sha256) for s in group.scenarios),
        *((p.records_path, p.records_sha256) for p in group.parity_passes),
    )
    if not all(_intact(layout, rel, digest) for rel, digest in files) or not group.complete:
        return None
    return group.model_copy(update={"relaunches": _kept_relaunches(layout, group)})


def _kept_relaunches(layout: RunLayout, group: GroupResult) -> tuple[GroupLaunch, ...]:
    """The later launches to keep: complete ones with intact records, up to the first that is not (the rest run
    again, so launch indices stay contiguous)."""
    kept: list[GroupLaunch] = []
    for launch in group.relaunches:
        intact = all(_intact(layout, s.records_path, s.records_sha256) for s in launch.scenarios)
        if not (launch.complete and intact and launch.index == len(kept) + 1):
            break
        kept.append(launch)
    return tuple(kept)


def keep_records(layout: RunLayout, group: GroupResult, records: InMemoryRecords, launch: int | None = None) -> None:
    """Read a kept group's records (every launch's timed scenarios, completed parity passes) into the run's records;
    with `launch`, only that launch's (and with launch 0 the parity passes)."""
    for run in group.all_scenario_runs():
        if run.records_path is not None and launch in (None, run.launch):
            kept = load_records(
                layout, group.group, run.scenario, run.launch, read_spec_metrics=recorded_request_spec_metrics
            )
            records.extend(group.group, run.scenario, kept)
    if launch not in (None, 0):
        return
    for ran in group.parity_passes:
        if ran.records_path is not None and ran.status == "completed":
            kept = load_records(layout, group.group, ran.scenario, read_spec_metrics=recorded_request_spec_metrics)
            records.put(group.group, ran.scenario, kept)


def _devices(doc: PreflightAttempt) -> str:
    if doc.engine is None:
        return "none"
    return ", ".join(f"{d.uuid or d.name} ({d.memory_mb} MB)" for d in doc.engine.devices) or "none"


def _host(doc: PreflightAttempt) -> str:
    host = doc.host
    name = f"{host.hostname}: " if host.hostname else ""
    return f"{name}{_machine(doc)}"


def _machine(doc: PreflightAttempt) -> str:
    return f"{doc.host.cpu_model or doc.host.machine}, {doc.host.logical_cpus} CPUs"


def _same_host(before: PreflightAttempt, now: PreflightAttempt) -> bool:
    """Same name (when both recorded one) and the same CPU."""
    names = (before.host.hostname, now.host.hostname)
    return (None in names or names[0] == names[1]) and _machine(before) == _machine(now)


def _snapshots(doc: PreflightAttempt) -> dict[str, str]:
    return {track: target.snapshot for track, target in doc.tracks.items()}


def environment_changes(before: PreflightAttempt, now: PreflightAttempt) -> list[str]:
    """What differs between two attempts' conditions: engine version, host, device set, target snapshots."""
    changes: list[str] = []
    engine = (
        before.engine.engine_version if before.engine else None,
        now.engine.engine_version if now.engine else None,
    )
    if engine[0] != engine[1]:
        changes.append(f"engine version {engine[0]} -> {engine[1]}")
    if not _same_host(before, now):
        changes.append(f"host {_host(before)} -> {_host(now)}")
    if _devices(before) != _devices(now):
        changes.append(f"devices {_devices(before)} -> {_devices(now)}")
    old, new = _snapshots(before), _snapshots(now)
    for track in sorted(set(old) & set(new)):
        if old[track] != new[track]:
            changes.append(f"target snapshot of {track} {old[track][:16]} -> {new[track][:16]}")
    return changes


def resumed_preflight(
    layout: RunLayout, previous: Manifest | None, now: PreflightFile, *, allow: bool
) -> PreflightFile:
    """The preflight to write for this attempt: the earlier attempts' kept in it, any allowed changes recorded.

    ResultsError (one line naming what changed) when groups are kept from an attempt under other conditions and
    `allow` is False.
    """
    if previous is None or not layout.preflight.exists():
        return now
    before = load_document(layout.preflight, PreflightFile)
    changes = environment_changes(before, now)
    if changes and any(g.complete for g in previous.groups) and not allow:
        raise ResultsError(
            f"--resume would mix groups measured under other conditions: {'; '.join(changes)}",
            location=str(layout.preflight),
            fix="resume where the kept groups ran, start a new --label, or pass --allow-changed-environment",
        )
    attempt = PreflightAttempt.model_validate(before.model_dump(exclude={"earlier_attempts"}))
    earlier = (*before.earlier_attempts, attempt)
    return now.model_copy(update={"earlier_attempts": earlier, "changed_environment": tuple(changes)})


def changed_environment_warning(doc: PreflightFile) -> str | None:
    """The line to print when this attempt runs under other conditions than the one before (None when not)."""
    if not doc.changed_environment:
        return None
    changes = "; ".join(doc.changed_environment)
    return f"conditions changed since the earlier attempt (recorded in preflight.json): {changes}"
