"""The built-in frozen workloads shipped as package data (`specselect/workloads/data/NAME.jsonl`).

Each file starts with a header record `{"specselect_workload": {"schema_version": 1, "name": NAME,
"version": "1", "description": ..., "sha256": ...}}` followed by one request per line. `sha256` is the
canonical content hash (see `specselect.workloads.canonical`); loading fails if the content no longer
matches, so a built-in can only change together with a new version and hash. `mixed` holds no requests of its
own: its header lists (`compose`) the ids it takes, in order, from the other built-ins.
To re-freeze after an intended edit: bump `version`, then record
`content_sha256(load_builtin(NAME, verify=False).items)` as the new `sha256`.
"""

from __future__ import annotations

import difflib
from importlib import resources

from specselect.errors import WorkloadError
from specselect.workloads.canonical import content_sha256
from specselect.workloads.model import Workload, WorkloadIdentity, WorkloadItem
from specselect.workloads.reader import WorkloadHeader, parse_workload_bytes

__all__ = [
    "BUILTIN_PREFIX",
    "builtin_label",
    "builtin_workload_names",
    "load_builtin",
    "normalize_builtin_name",
]

BUILTIN_PREFIX = "builtin:"
_NAMES = (
    "general",
    "repetition",
    "multi_turn",
    "code_editing",
    "summarization",
    "rag_qa",
    "translation",
    "math_reasoning",
    "mixed",
)


def builtin_workload_names() -> tuple[str, ...]:
    """Names of the built-in workloads (use them as `builtin:NAME`)."""
    return _NAMES


def normalize_builtin_name(name: str) -> str:
    """`Multi-Turn` -> `multi_turn`; raises `WorkloadError` (with a did-you-mean) for an unknown name."""
    key = name.strip().lower().replace("-", "_")
    if key in _NAMES:
        return key
    close = difflib.get_close_matches(key, _NAMES, n=1, cutoff=0.6)
    hint = f"did you mean '{BUILTIN_PREFIX}{close[0]}'?" if close else "choose a known one"
    known = ", ".join(BUILTIN_PREFIX + n for n in _NAMES)
    raise WorkloadError(
        f"unknown built-in workload {name!r} (known: {known})", location=f"{BUILTIN_PREFIX}{name}", fix=hint
    )


def builtin_label(name: str) -> str:
    """How errors name a built-in file."""
    return f"{BUILTIN_PREFIX}{name} (specselect/workloads/data/{name}.jsonl)"


def _parse(name: str, verify: bool = True) -> tuple[WorkloadHeader, str, tuple[WorkloadItem, ...]]:
    label = builtin_label(name)
    try:
        data = resources.files("specselect.workloads").joinpath("data", f"{name}.jsonl").read_bytes()
    except OSError as exc:
        raise WorkloadError(
            f"built-in workload data is missing: {exc}", location=label, fix="reinstall specselect"
        ) from exc
    parsed = parse_workload_bytes(data, label, allow_compose=True, verify_sha=verify)
    header = parsed.header
    if header is None or header.name != name or header.version is None:
        raise WorkloadError(
            "built-in workload header is missing or names another workload",
            location=label,
            fix=f'start the file with {{"specselect_workload": {{"name": "{name}", "version": ...}}}}',
        )
    if header.compose and parsed.items:
        raise WorkloadError(
            "a composed built-in must not hold requests of its own",
            location=label,
            fix="list the ids in 'compose' only",
        )
    return header, header.version, parsed.items


def _compose(name: str, ids: tuple[str, ...], verify: bool) -> tuple[WorkloadItem, ...]:
    pool: dict[str, WorkloadItem] = {}
    for source in _NAMES:
        header, _, items = _parse(source, verify)
        if not header.compose:
            pool.update((item.id, item) for item in items)
    missing = [i for i in ids if i not in pool]
    if missing or len(set(ids)) != len(ids):
        raise WorkloadError(
            f"'compose' lists unknown or repeated ids: {', '.join(missing) or 'repeated ids'}",
            location=builtin_label(name),
            fix="list each existing built-in item id once",
        )
    return tuple(pool[i] for i in ids)


def load_builtin(name: str, *, display_name: str | None = None, verify: bool = True) -> Workload:
    """Load `builtin:NAME`, checking its content against the sha256 frozen in its header."""
    name = normalize_builtin_name(name)
    header, version, items = _parse(name, verify)
    if header.compose:
        items = _compose(name, header.compose, verify)
    sha = content_sha256(items)
    if verify and sha != header.sha256:
        raise WorkloadError(
            f"built-in content hashes to {sha} but the header records {header.sha256}",
            location=builtin_label(name),
            fix="undo the edit, or bump the version and record the new sha256",
        )
    identity = WorkloadIdentity(
        name=display_name or name,
        version=version,
        sha256=sha,
        item_count=len(items),
        source=f"{BUILTIN_PREFIX}{name}",
    )
    return Workload(identity=identity, items=items)
