"""The CPU runtime vLLM's CPU documentation prescribes: found where it is, never required, and said when missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from specselect._engines.vllm import cpuruntime
from specselect._engines.vllm.cpuruntime import cpu_preload, find_intel_openmp, find_tcmalloc, preload_findings


def test_the_minimal_tcmalloc_is_preferred_and_the_first_directory_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for d in (first, second):
        d.mkdir()
    (second / "libtcmalloc_minimal.so.4").write_bytes(b"")
    (first / "libtcmalloc.so.4").write_bytes(b"")
    assert find_tcmalloc((str(first), str(second))) == second / "libtcmalloc_minimal.so.4"
    (first / "libtcmalloc_minimal.so.4").write_bytes(b"")
    assert find_tcmalloc((str(first), str(second))) == first / "libtcmalloc_minimal.so.4"
    assert find_tcmalloc((str(tmp_path / "none"),)) is None


def test_intel_openmp_is_the_engine_environments_own(tmp_path: Path) -> None:
    assert find_intel_openmp(tmp_path) is None and find_intel_openmp(None) is None
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libiomp5.so").write_bytes(b"")
    assert find_intel_openmp(tmp_path) == tmp_path / "lib" / "libiomp5.so"
    assert cpu_preload(tmp_path, ()) == (tmp_path / "lib" / "libiomp5.so",)


def test_the_audit_names_what_is_missing_and_how_to_get_it(tmp_path: Path) -> None:
    (message,) = (m for _, code, m in preload_findings(tmp_path, ()) if code == "cpu_runtime_incomplete")
    assert "specselect setup" in message and "libtcmalloc-minimal4" in message
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libiomp5.so").write_bytes(b"")
    (tmp_path / "libtcmalloc_minimal.so.4").write_bytes(b"")
    assert preload_findings(tmp_path, (str(tmp_path),)) == []


def test_with_the_preload_switched_off_the_audit_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpuruntime, "PRELOAD_BY_DEFAULT", False)
    assert [code for _, code, _ in preload_findings(tmp_path, ())] == ["cpu_runtime_preload_off"]
