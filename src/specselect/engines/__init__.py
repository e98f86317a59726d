"""specselect.engines: serving engines behind one `Engine` protocol, registered by kind and imported lazily."""

from __future__ import annotations

from specselect.engines.base import Engine, EngineSetup, GroupContext, ServeOptions, Session
from specselect.engines.registry import create_engine, get_engine, known_engine_kinds

__all__ = [
    "Engine",
    "EngineSetup",
    "GroupContext",
    "ServeOptions",
    "Session",
    "create_engine",
    "get_engine",
    "known_engine_kinds",
]
