"""Engines by `kind`, imported only when asked for so a missing optional dependency costs nothing.

Every engine, vLLM included, is created here from the plan's `[engine]` section (`create_engine`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple, Protocol, cast

from specselect._engines.base import Engine
from specselect._plan import EngineConfig
from specselect.errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:  # mypy checks here that every registered engine implements the protocol
    from specselect._engines.openai.engine import OpenAIEndpointEngine
    from specselect._engines.sglang.engine import SglangEngine
    from specselect._engines.vllm.engine import VllmEngine

    _IMPLEMENTATIONS: tuple[type[Engine], ...] = (VllmEngine, SglangEngine, OpenAIEndpointEngine)

__all__ = ["EngineClass", "EngineEntry", "create_engine", "get_engine", "known_engine_kinds"]


class EngineClass(Protocol):
    """An engine class: it is created from the plan's engine section."""

    def from_config(self, config: EngineConfig) -> Engine: ...


class EngineEntry(NamedTuple):
    """Where an engine lives and how to install what it needs."""

    module: str
    attribute: str
    install_hint: str


_ENGINES: Mapping[str, EngineEntry] = MappingProxyType(
    {
        "vllm": EngineEntry(
            module="specselect._engines.vllm.engine",
            attribute="VllmEngine",
            install_hint="specselect setup  (installs the managed CPU vLLM environment)",
        ),
        "sglang": EngineEntry(
            module="specselect._engines.sglang.engine",
            attribute="SglangEngine",
            install_hint="pip install sglang into a CUDA environment and set engine.python to its python",
        ),
        "openai": EngineEntry(
            module="specselect._engines.openai.engine",
            attribute="OpenAIEndpointEngine",
            install_hint="nothing to install: kind 'openai' measures servers you already run",
        ),
    }
)


def known_engine_kinds() -> tuple[str, ...]:
    """The engine kinds this version of specselect can drive."""
    return tuple(_ENGINES)


def get_engine(kind: str) -> EngineClass:
    """Import and return the engine class registered for `kind`.

    Unknown kinds raise ConfigError listing the known ones; a missing optional dependency raises
    MissingDependencyError carrying the install command.
    """
    registry = _ENGINES
    entry = registry.get(kind.strip().lower()) if isinstance(kind, str) else None
    if entry is None:
        known = ", ".join(registry) or "(none)"
        raise ConfigError(
            f"unknown engine kind {kind!r}; known kinds: {known}", location="engine.kind", fix=f"use one of: {known}"
        )
    try:
        module = importlib.import_module(entry.module)
    except ModuleNotFoundError as exc:
        missing = exc.name or "?"
        if missing == "specselect" or missing.startswith("specselect."):
            raise
        raise MissingDependencyError(
            f"engine kind {kind!r} needs the Python package {missing!r}, which is not installed",
            location="engine.kind",
            fix=f"install it: {entry.install_hint}",
        ) from exc
    return cast(EngineClass, getattr(module, entry.attribute))


def create_engine(config: EngineConfig) -> Engine:
    """The engine the plan's `[engine]` section names."""
    return get_engine(config.kind).from_config(config)
