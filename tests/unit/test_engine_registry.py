"""Engines by kind: lazy import, unknown kinds, missing optional dependencies."""

from __future__ import annotations

import pytest

from specselect._engines import registry
from specselect._engines.registry import EngineEntry, get_engine, known_engine_kinds
from specselect._engines.vllm.engine import VllmEngine
from specselect.errors import ConfigError, MissingDependencyError


def test_vllm_is_registered() -> None:
    assert "vllm" in known_engine_kinds()
    assert get_engine("vllm") is VllmEngine
    assert get_engine(" VLLM ") is VllmEngine
    assert VllmEngine(python="/x/bin/python").kind == "vllm"


def test_unknown_kind_lists_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown engine kind 'tgi'; known kinds: vllm") as info:
        get_engine("tgi")
    assert info.value.location == "engine.kind"


def test_missing_dependency_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = EngineEntry("specselect_absent_engine_pkg.engine", "Engine", "pip install 'specselect[fake]'")
    monkeypatch.setattr(registry, "_ENGINES", {**registry._ENGINES, "fake": entry})
    with pytest.raises(MissingDependencyError) as info:
        get_engine("fake")
    assert "specselect_absent_engine_pkg" in info.value.message
    assert info.value.fix is not None
    assert "pip install 'specselect[fake]'" in info.value.fix
