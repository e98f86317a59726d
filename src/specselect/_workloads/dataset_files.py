"""The converted files of the public prompt sets: written once (frozen or at set-up), loaded and checked.

A file is ordinary workload JSON Lines whose header records the set's name, version, description, content
sha256 and `provenance`. Shipped sets live in `specselect/_workloads/data/NAME.jsonl`; sets extracted at
set-up in `$SPECSELECT_HOME/workloads/NAME.jsonl`. Loading checks the content against the hash pinned in
`specselect._workloads.datasets`, not only against the file's own header.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from specselect._common.home import default_home
from specselect._workloads.canonical import content_sha256
from specselect._workloads.datasets import DatasetSpec
from specselect._workloads.reader import HEADER_KEY, WorkloadHeader, parse_workload_bytes
from specselect._workloads.sample import select_all
from specselect.errors import EngineSetupError, SpecselectError, WorkloadError
from specselect.records.workloads import Workload, WorkloadIdentity, WorkloadItem

__all__ = ["dataset_file_bytes", "dataset_label", "extracted_path", "load_dataset"]

_PREFIX = "builtin:"


def extracted_path(name: str, home: Path | None = None) -> Path:
    """Where `specselect setup` writes the converted set `name`."""
    return (home or default_home()) / "workloads" / f"{name}.jsonl"


def dataset_label(spec: DatasetSpec, home: Path | None = None) -> str:
    """How errors name the set's converted file."""
    where = f"specselect/_workloads/data/{spec.name}.jsonl" if spec.shipped else str(extracted_path(spec.name, home))
    return f"{_PREFIX}{spec.name} ({where})"


def dataset_file_bytes(spec: DatasetSpec, items: tuple[WorkloadItem, ...]) -> bytes:
    """The converted file: the header line, then one request per line (compact JSON, UTF-8)."""
    header = WorkloadHeader(
        name=spec.name,
        version=spec.version,
        description=spec.description,
        sha256=content_sha256(items),
        provenance=spec.source,
    )
    lines = [{HEADER_KEY: header.model_dump(mode="json", exclude_none=True)}]
    lines += [item.model_dump(mode="json", exclude_none=True) for item in items]
    text = "".join(json.dumps(line, ensure_ascii=False, separators=(", ", ": ")) + "\n" for line in lines)
    return text.encode("utf-8")


def _read(spec: DatasetSpec, home: Path | None) -> bytes:
    if spec.shipped:
        try:
            return resources.files("specselect._workloads").joinpath("data", f"{spec.name}.jsonl").read_bytes()
        except OSError as exc:
            raise WorkloadError(
                f"built-in workload data is missing: {exc}", location=dataset_label(spec), fix="reinstall specselect"
            ) from exc
    path = extracted_path(spec.name, home)
    if not path.is_file():
        raise EngineSetupError(
            f"not extracted yet: {spec.source.dataset} is converted on this machine from {spec.source.package} "
            f"({spec.source.path}; upstream licence {spec.source.upstream_licence}), not shipped",
            location=dataset_label(spec, home),
            fix="run `specselect setup`",
        )
    return path.read_bytes()


def _stale(spec: DatasetSpec, home: Path | None, message: str) -> SpecselectError:
    if spec.shipped:
        return WorkloadError(message, location=dataset_label(spec), fix="reinstall specselect")
    return EngineSetupError(message, location=dataset_label(spec, home), fix="run `specselect setup` again")


def load_dataset(spec: DatasetSpec, *, display_name: str | None = None, home: Path | None = None) -> Workload:
    """Load the converted set of `spec` (one of `DATASETS`), checked against its pinned content hash."""
    name = spec.name
    try:
        parsed = parse_workload_bytes(_read(spec, home), dataset_label(spec, home), builtin=True)
    except WorkloadError as exc:
        raise _stale(spec, home, exc.message) from exc
    header = parsed.header
    if header is None or (header.name, header.version, header.provenance) != (name, spec.version, spec.source):
        raise _stale(spec, home, f"the header does not record {name} version {spec.version} from its pinned source")
    sha = content_sha256(parsed.items)
    if sha != spec.content_sha256:
        raise _stale(spec, home, f"content hashes to {sha}, not the pinned {spec.content_sha256} of {name}")
    count = len(parsed.items)
    identity = WorkloadIdentity(
        name=display_name or name,
        version=spec.version,
        sha256=sha,
        item_count=count,
        source=f"{_PREFIX}{name}",
        selection=select_all(sha, count),
        provenance=spec.source,
    )
    return Workload(identity=identity, items=parsed.items)
