"""specselect._engines: serving engines behind one `Engine` protocol, registered by kind and imported lazily."""

from __future__ import annotations

from specselect._engines.base import Engine, EngineSetup, GroupContext, ServeOptions, Session
from specselect._engines.registry import create_engine, get_engine, known_engine_kinds, uninstalled_environment

__all__ = [
    "Engine",
    "EngineSetup",
    "GroupContext",
    "ServeOptions",
    "Session",
    "create_engine",
    "get_engine",
    "known_engine_kinds",
    "uninstalled_environment",
]
