"""Write `report.html` and `report.md` for one results directory (atomically; nothing is re-measured)."""

from __future__ import annotations

import os
from pathlib import Path

from specselect._artifacts.layout import RunLayout
from specselect._common.fileio import atomic_write_text
from specselect._report.data import ReportData, load_report_data
from specselect._report.html import render_html
from specselect._report.markdown import render_markdown

__all__ = ["write_report_data", "write_reports"]


def write_report_data(data: ReportData, out_dir: Path | None = None) -> tuple[Path, Path]:
    """Render already-loaded results to (report.html, report.md) in `out_dir` (default: the results directory)."""
    target = RunLayout(Path(out_dir) if out_dir is not None else data.root)
    # File links in the page point back at the results directory from wherever the page is written.
    base = os.path.relpath(data.root.resolve(), target.root.resolve())
    link_base = "" if base == "." else Path(base).as_posix() + "/"
    atomic_write_text(target.report_html, render_html(data, link_base=link_base))
    atomic_write_text(target.report_md, render_markdown(data))
    return target.report_html, target.report_md


def write_reports(results_dir: Path, out_dir: Path | None = None) -> tuple[Path, Path]:
    """Read the run in `results_dir` and write (report.html, report.md) next to it (or into `out_dir`).

    Raises ResultsError (exit 2) for a missing, foreign or other-schema directory and ArtifactError (exit 5)
    when a report cannot be written.
    """
    return write_report_data(load_report_data(results_dir), out_dir)
