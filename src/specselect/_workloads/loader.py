"""`load_workload`: one entry point for built-in and user workloads, returning a `Workload` with its identity."""

from __future__ import annotations

import re
from pathlib import Path

from specselect._workloads.builtin import BUILTIN_PREFIX, builtin_workload_names, load_builtin
from specselect._workloads.canonical import content_sha256
from specselect._workloads.reader import read_workload_file
from specselect._workloads.sample import WorkloadSample, sample_workload, select_all
from specselect.errors import WorkloadError
from specselect.records.workloads import Workload, WorkloadIdentity

__all__ = ["UNVERSIONED", "categories", "load_workload"]

UNVERSIONED = "unversioned"
"""The version of a user file whose header gives none (its sha256 still pins the content)."""

# The plan's workload-name rule, so every name a valid plan gives is accepted here.
_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def _check_name(name: str, where: str) -> str:
    if not _NAME_RE.match(name):
        raise WorkloadError(
            f"invalid workload name {name!r}",
            location=where,
            fix="use 1 to 100 letters, digits, '.', '_' or '-'",
        )
    return name


def _name_from_stem(path: Path) -> str:
    stem = path.name.split(".", 1)[0] or path.name
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:100]
    return cleaned or "workload"


def load_workload(
    ref: str | WorkloadSample, *, name: str | None = None, base_dir: Path | None = None, home: Path | None = None
) -> Workload:
    """Load `builtin:NAME` or a workload file (JSON Lines or JSON array; native or ShareGPT records).

    A `WorkloadSample` loads its `source` and keeps its seeded sample (`specselect._workloads.sample`).
    `name` overrides the workload's own name (the built-in's name, the file header's, else the file stem).
    A relative path is resolved against `base_dir` (e.g. the plan's directory), else the working directory;
    prompt sets extracted at set-up are read from `home` (default `$SPECSELECT_HOME`).
    Raises `WorkloadError` naming file, line and field for anything invalid.
    """
    if isinstance(ref, WorkloadSample):
        whole = load_workload(ref.source, name=name, base_dir=base_dir, home=home)
        return sample_workload(whole, ref.items, ref.seed)
    ref = ref.strip()
    if name is not None:
        _check_name(name, f"workload name for {ref!r}")
    if not ref:
        raise WorkloadError("empty workload reference", fix=f"give a file path or one of {_builtin_list()}")
    if ref.startswith(BUILTIN_PREFIX):
        return load_builtin(ref[len(BUILTIN_PREFIX) :], display_name=name, home=home)
    return _load_file(ref, name, base_dir)


def _load_file(ref: str, name: str | None, base_dir: Path | None) -> Workload:
    path = Path(ref).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir).expanduser() / path
    path = path.absolute()
    if not path.exists():
        where = f"relative to {base_dir}" if base_dir is not None and not Path(ref).is_absolute() else ""
        raise WorkloadError(
            f"no such workload file {where}".strip(),
            location=str(path),
            fix=f"check the path, or use a built-in workload: {_builtin_list()}",
        )
    if path.is_dir():
        raise WorkloadError(
            "is a directory, not a workload file", location=str(path), fix="point to a .jsonl or .json file"
        )
    parsed = read_workload_file(path)
    header = parsed.header
    own_name = header.name if header is not None and header.name else None
    final_name = name or (_check_name(own_name, f"{path}:1") if own_name else _name_from_stem(path))
    version = header.version if header is not None and header.version else UNVERSIONED
    sha = content_sha256(parsed.items)
    identity = WorkloadIdentity(
        name=final_name,
        version=version,
        sha256=sha,
        item_count=len(parsed.items),
        source=str(path),
        selection=select_all(sha, len(parsed.items)),
    )
    return Workload(identity=identity, items=parsed.items)


def categories(workload: Workload) -> tuple[str, ...]:
    """The distinct item categories in first-appearance order (items without one are not counted)."""
    seen: dict[str, None] = {}
    for item in workload.items:
        if item.category is not None:
            seen.setdefault(item.category)
    return tuple(seen)


def _builtin_list() -> str:
    return ", ".join(BUILTIN_PREFIX + n for n in builtin_workload_names())
