"""The built-in frozen workloads: prompts written for specselect, and public prompt sets (`datasets`).

Written ones ship as package data (`specselect/_workloads/data/NAME.jsonl`). Each file starts with a header
record `{"specselect_workload": {"schema_version": 1, "name": NAME, "version": "1", "description": ...,
"sha256": ...}}` followed by one request per line. `sha256` is the canonical content hash (see
`specselect._workloads.canonical`); loading fails if the content no longer matches, so a built-in can only
change together with a new version and hash. `mixed` holds no requests of its own: its header lists
(`compose`) the ids it takes, in order, from the other written built-ins.
To re-freeze after an intended edit: bump `version`, then record
`content_sha256(load_builtin(NAME, verify=False).items)` as the new `sha256`.
Public prompt sets (HumanEval, GSM8K, ...) are pinned in `specselect._workloads.datasets` and loaded by
`specselect._workloads.dataset_files`.
"""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path

from specselect._workloads.canonical import content_sha256
from specselect._workloads.dataset_files import dataset_label, load_dataset
from specselect._workloads.datasets import DATASETS, dataset_names
from specselect._workloads.reader import WorkloadHeader, parse_workload_bytes
from specselect._workloads.sample import select_all
from specselect.errors import WorkloadError
from specselect.records.workloads import Workload, WorkloadIdentity, WorkloadItem

__all__ = [
    "BUILTIN_PREFIX",
    "WRITTEN_NAMES",
    "builtin_item_count",
    "builtin_label",
    "builtin_workload_names",
    "closest_builtin",
    "known_builtin",
    "load_builtin",
    "normalize_builtin_name",
    "written_description",
]

BUILTIN_PREFIX = "builtin:"
WRITTEN_NAMES = (
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
"""The built-ins written for specselect (see `data/README.md`)."""
_NAMES = (*WRITTEN_NAMES, *dataset_names())


def builtin_workload_names() -> tuple[str, ...]:
    """Names of the built-in workloads (use them as `builtin:NAME`): the written ones, then the public sets."""
    return _NAMES


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def closest_builtin(name: str) -> str | None:
    """The known built-in name closest to an unknown `name` (None when nothing is close)."""
    close = difflib.get_close_matches(_key(name), _NAMES, n=1, cutoff=0.6)
    return close[0] if close else None


def known_builtin(name: str) -> str | None:
    """The canonical name of `builtin:NAME` (`Multi-Turn` -> `multi_turn`), or None when there is no such built-in."""
    key = _key(name)
    return key if key in _NAMES else None


def normalize_builtin_name(name: str) -> str:
    """`Multi-Turn` -> `multi_turn`; raises `WorkloadError` (with a did-you-mean) for an unknown name."""
    key = known_builtin(name)
    if key is not None:
        return key
    close = closest_builtin(name)
    hint = f"did you mean '{BUILTIN_PREFIX}{close}'?" if close else "choose a known one"
    known = ", ".join(BUILTIN_PREFIX + n for n in _NAMES)
    raise WorkloadError(
        f"unknown built-in workload {name!r} (known: {known})", location=f"{BUILTIN_PREFIX}{name}", fix=hint
    )


def written_description(name: str) -> str:
    """The header description of a workload written for specselect (one of `WRITTEN_NAMES`)."""
    header, _, _ = _parse(normalize_builtin_name(name), verify=False)
    return header.description or ""


def builtin_item_count(name: str) -> int:
    """How many items `builtin:NAME` holds, without reading a set that is extracted at set-up."""
    name = normalize_builtin_name(name)
    if name in DATASETS:
        return DATASETS[name].item_count
    return load_builtin(name).identity.item_count


def builtin_label(name: str) -> str:
    """How errors name a built-in file."""
    if name in DATASETS:
        return dataset_label(DATASETS[name])
    return f"{BUILTIN_PREFIX}{name} (specselect/_workloads/data/{name}.jsonl)"


def _parse(name: str, verify: bool = True) -> tuple[WorkloadHeader, str, tuple[WorkloadItem, ...]]:
    label = builtin_label(name)
    try:
        data = resources.files("specselect._workloads").joinpath("data", f"{name}.jsonl").read_bytes()
    except OSError as exc:
        raise WorkloadError(
            f"built-in workload data is missing: {exc}", location=label, fix="reinstall specselect"
        ) from exc
    parsed = parse_workload_bytes(data, label, builtin=True, verify_sha=verify)
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
    for source in WRITTEN_NAMES:
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


def load_builtin(
    name: str, *, display_name: str | None = None, verify: bool = True, home: Path | None = None
) -> Workload:
    """Load `builtin:NAME`, checking its content against its frozen sha256.

    A public prompt set extracted at set-up is read from `home` (default `$SPECSELECT_HOME`).
    """
    name = normalize_builtin_name(name)
    if name in DATASETS:
        return load_dataset(DATASETS[name], display_name=display_name, home=home)
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
        selection=select_all(sha, len(items)),
    )
    return Workload(identity=identity, items=items)
