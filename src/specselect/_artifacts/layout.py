"""Where every artifact of a run lives under `results/<label>/`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LABEL_PATTERN", "RunLayout"]

LABEL_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def _launch_suffix(launch: int) -> str:
    # Launch 0 keeps the names results had before launches were replicated.
    return f".l{launch}" if launch else ""


@dataclass(frozen=True)
class RunLayout:
    """Paths of one run's artifacts; all relative paths in the manifest are relative to `root`."""

    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def preflight(self) -> Path:
        return self.root / "preflight.json"

    @property
    def admission(self) -> Path:
        return self.root / "admission.json"

    @property
    def evidence(self) -> Path:
        return self.root / "evidence.json"

    @property
    def handoff(self) -> Path:
        return self.root / "handoff.json"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def work_dir(self) -> Path:
        """Engine caches and temp files (not results; safe to delete)."""
        return self.root / "work"

    def group_summary(self, group: str) -> Path:
        return self.root / "groups" / f"{group}.json"

    def group_log(self, group: str, launch: int = 0) -> Path:
        """The server log of a group's launch (`<group>.log`, later launches `<group>.l<launch>.log`)."""
        return self.logs_dir / f"{group}{_launch_suffix(launch)}.log"

    def records(self, group: str, scenario: str, launch: int = 0) -> Path:
        """A scenario's records of a group's launch (`<scenario>.jsonl`; launch j > 0: `<scenario>.l<j>.jsonl`)."""
        return self.root / "records" / group / f"{scenario}{_launch_suffix(launch)}.jsonl"

    def rel(self, path: Path) -> str:
        """A path relative to the run root, as stored in the manifest."""
        return path.relative_to(self.root).as_posix()
