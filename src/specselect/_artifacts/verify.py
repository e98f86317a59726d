"""`specselect verify`: check a run's artifacts against their schemas and the hashes its manifest recorded.

Checked: every result document validates against its model (this schema_version, this tool); every file the
manifest lists exists with the recorded sha256; every group summary the manifest names matches its entry;
every records file a group names exists with its recorded sha256 and parses line by line. A directory that is
not a specselect run (no manifest, or a manifest another tool wrote) is refused with a `ResultsError`.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import check_header, load_document
from specselect._common.fileio import sha256_file
from specselect.errors import ResultsError
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff
from specselect.records.measurement import MEASURE_SCHEMA_VERSION, RequestRecord
from specselect.records.results import AdmissionFile, EvidenceFile, Manifest, PreflightFile

__all__ = ["VERIFY_SCHEMA_VERSION", "VerifyReport", "verify_run"]

VERIFY_SCHEMA_VERSION = 1
_MANIFEST = "manifest.json"
_NOT_RESULTS = ("work",)
"""Top-level directories that hold engine caches, not results (never verified)."""

M = TypeVar("M", bound=BaseModel)


class VerifyReport(BaseModel):
    """What `verify_run` checked and found; `problems` is empty when every artifact is intact."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = VERIFY_SCHEMA_VERSION
    root: str
    label: str | None
    run_status: str | None
    documents: int
    """Result documents that validated against their schema."""
    hashed_files: int
    """Files whose sha256 matched the one recorded (manifest or group summary)."""
    record_files: int
    records: int
    problems: tuple[str, ...]
    """One line per problem: `path: what is wrong`."""
    notes: tuple[str, ...]
    """Facts worth knowing that are not damage (an unfinished run, a leftover temporary file)."""

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems


class _Checker:
    def __init__(self, root: Path) -> None:
        self.layout = RunLayout(root)
        self.root = root
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.hashed: set[str] = set()
        self.record_files = 0
        self.records = 0
        self.attempted: set[str] = set()
        self.loaded: set[str] = set()

    def problem(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def inside(self, rel: str) -> Path | None:
        """`root / rel` when `rel` is a plain relative path inside the run (a manifest must not point outside)."""
        pure = PurePosixPath(rel)
        if not rel or pure.is_absolute() or ".." in pure.parts or "\\" in rel:
            self.problem(_MANIFEST, f"lists {rel!r}, which is not a path inside the run directory")
            return None
        return self.root / pure

    def document(self, path: Path, model: type[M]) -> M | None:
        """The validated document, or None with a problem line; each file is read once."""
        rel = self.layout.rel(path)
        self.attempted.add(rel)
        try:
            doc = load_document(path, model)
        except ResultsError as exc:
            self.problem(rel, exc.message)
            return None
        except RecursionError:
            self.problem(rel, "not a result file (JSON nested too deeply)")
            return None
        self.loaded.add(rel)
        return doc

    def digest(self, path: Path, expected: str, what: str) -> bool:
        rel = self.layout.rel(path)
        if not path.is_file():
            self.problem(rel, f"missing ({what} lists it)")
            return False
        try:
            actual = sha256_file(path)
        except OSError as exc:
            self.problem(rel, f"cannot read: {exc.strerror or exc}")
            return False
        if actual != expected:
            self.problem(rel, f"sha256 {actual[:16]}... differs from the {expected[:16]}... that {what} recorded")
            return False
        self.hashed.add(rel)
        return True

    def records_file(self, path: Path, expected_count: int) -> None:
        rel = self.layout.rel(path)
        try:
            lines = path.read_bytes().decode("utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            self.problem(rel, f"cannot read records: {exc}")
            return
        count = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = RequestRecord.model_validate_json(line)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "line"
                self.problem(f"{rel}:{number}", f"invalid record: {where}: {first['msg']}")
                return
            if record.schema_version != MEASURE_SCHEMA_VERSION:
                self.problem(f"{rel}:{number}", f"record schema_version {record.schema_version} is not supported")
                return
            count += 1
        self.record_files += 1
        self.records += count
        if count != expected_count:
            self.problem(rel, f"{count} records, but the group summary says {expected_count}")


def _read_manifest(layout: RunLayout) -> Manifest | str:
    """The manifest; a problem line (str) when it is damaged; ResultsError when the directory is not ours."""
    path = layout.manifest
    if not layout.root.is_dir():
        raise ResultsError("not a directory", location=str(layout.root), fix="give results/<label> of a run")
    if not path.is_file():
        raise ResultsError(
            "no manifest.json: not a specselect results directory",
            location=str(layout.root),
            fix="give results/<label> of a run written by `specselect run`",
        )
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"{_MANIFEST}: not readable JSON ({exc})"
    except RecursionError:
        return f"{_MANIFEST}: not readable JSON (nested too deeply)"
    try:
        return Manifest.model_validate(check_header(raw, path))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{_MANIFEST}: invalid manifest: {where}: {first['msg']}"


def _group_summary(chk: _Checker, summary: str, digest: str | None) -> GroupResult | None:
    """The group summary at `summary` when it is inside the run, has the recorded hash and validates."""
    path = chk.inside(summary)
    if path is None:
        return None
    if not path.is_file():
        chk.problem(summary, "missing (manifest.json lists it)")
        return None
    if digest is not None and not chk.digest(path, digest, _MANIFEST):
        return None
    return chk.document(path, GroupResult)


def _check_group_records(chk: _Checker, summary: str, group: GroupResult) -> set[str]:
    """Check every records file the group's summary names (at `summary`); returns the paths it names."""
    files = [(s.records_path, s.records_sha256, s.n_records) for s in group.all_scenario_runs()]
    files += [(p.records_path, p.records_sha256, p.n_records) for p in group.parity_passes]
    named: set[str] = set()
    for rel, digest, count in files:
        if rel is None:
            continue
        named.add(rel)
        rec = chk.inside(rel)
        if rec is None:
            continue
        if not rec.is_file():
            chk.problem(rel, f"missing ({summary} lists it)")
        elif digest is None or chk.digest(rec, digest, summary):
            chk.records_file(rec, count)
    return named


def _check_groups(chk: _Checker, manifest: Manifest) -> None:
    for entry in manifest.groups:
        if entry.summary is None:
            if entry.complete:
                chk.problem(_MANIFEST, f"group {entry.name} is marked complete but has no summary file")
            continue
        group = _group_summary(chk, entry.summary, entry.summary_sha256)
        if group is None:
            continue
        if group.group != entry.name or group.run_status != entry.run_status:
            chk.problem(
                entry.summary,
                f"says group {group.group} is {group.run_status.value}; manifest.json says {entry.name} is "
                f"{entry.run_status.value}",
            )
        named = _check_group_records(chk, entry.summary, group)
        for rel in sorted({*entry.records, *entry.parity_records} - named):
            chk.problem(_MANIFEST, f"lists records {rel} that {entry.summary} does not name")


def _check_files(chk: _Checker, manifest: Manifest) -> None:
    for rel, digest in manifest.files.items():
        if rel == _MANIFEST:
            continue  # a file cannot hold its own hash: such an entry is always the previous version's
        path = chk.inside(rel)
        if path is not None:
            chk.digest(path, digest, _MANIFEST)


def _check_documents(chk: _Checker, manifest: Manifest | None) -> None:
    layout = chk.layout
    complete = manifest is not None and manifest.status == "complete"
    documents: list[tuple[Path, type[BaseModel], bool]] = [
        (layout.preflight, PreflightFile, True),
        (layout.admission, AdmissionFile, True),
        (layout.evidence, EvidenceFile, complete),
        (layout.handoff, Handoff, complete),
    ]
    for path, model, required in documents:
        if required or path.exists():
            chk.document(path, model)
    groups_dir = layout.root / "groups"
    known = {g.name for g in manifest.groups} if manifest is not None else set()
    for path in sorted(groups_dir.glob("*.json")) if groups_dir.is_dir() else ():
        if layout.rel(path) not in chk.attempted:
            chk.document(path, GroupResult)
        if manifest is not None and path.stem not in known:
            chk.problem(layout.rel(path), "a group that the plan in manifest.json does not have")
    if manifest is not None:
        for rel in sorted(chk.loaded - set(manifest.files) - {_MANIFEST}):
            chk.notes.append(f"{rel}: not listed in manifest.json (written after its last update): hash not checked")


def _leftovers(chk: _Checker) -> None:
    for path in sorted(chk.root.rglob(".*.tmp")):
        rel = chk.layout.rel(path)
        if rel.split("/", 1)[0] not in _NOT_RESULTS:
            chk.notes.append(f"{rel}: temporary file of an interrupted write (safe to delete)")


def verify_run(root: Path) -> VerifyReport:
    """Verify the run under `root` (`results/<label>`); ResultsError when it is not a specselect run directory."""
    root = Path(root)
    chk = _Checker(root)
    found = _read_manifest(chk.layout)
    manifest = found if isinstance(found, Manifest) else None
    if isinstance(found, str):
        chk.problems.append(found)
    else:
        chk.loaded.add(_MANIFEST)
    chk.attempted.add(_MANIFEST)
    if manifest is not None:
        _check_files(chk, manifest)
        _check_groups(chk, manifest)
        if manifest.status != "complete":
            chk.notes.append(f"{_MANIFEST}: run status is {manifest.status!r}: continue it with --resume")
    _check_documents(chk, manifest)
    _leftovers(chk)
    return VerifyReport(
        root=str(root),
        label=manifest.label if manifest is not None else None,
        run_status=manifest.status if manifest is not None else None,
        documents=len(chk.loaded),
        hashed_files=len(chk.hashed),
        record_files=chk.record_files,
        records=chk.records,
        problems=tuple(dict.fromkeys(chk.problems)),
        notes=tuple(dict.fromkeys(chk.notes)),
    )
