"""Free disk and memory checks: the needs and what is there, in one line with a fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from specselect._assets import resources
from specselect.errors import EngineSetupError


def test_sizes_are_stated_in_gigabytes() -> None:
    assert resources.format_gb(1_117_320_768) == "1.12 GB"


def test_free_disk_is_read_where_the_path_will_be(tmp_path: Path) -> None:
    assert resources.free_disk_bytes(tmp_path / "not" / "there" / "yet") > 0


def test_too_little_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resources, "free_disk_bytes", lambda path: 2_000_000_000)
    resources.require_free_disk(tmp_path, 1_000_000_000, "x")
    with pytest.raises(EngineSetupError) as err:
        resources.require_free_disk(tmp_path, 9_350_000_000, "preparing builtin:m")
    assert err.value.one_line() == (
        f"{tmp_path}: not enough free disk for preparing builtin:m: 9.35 GB needed, 2.00 GB free "
        "(fix: free 7.35 GB there, or point SPECSELECT_HOME to a larger filesystem)"
    )


def test_too_little_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 4_000_000_000)
    resources.require_memory(3_000_000_000, "x")
    with pytest.raises(EngineSetupError, match=r"10.30 GB needed, 4.00 GB available.*stop other large processes"):
        resources.require_memory(10_300_000_000, "converting builtin:m")
