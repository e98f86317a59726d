"""specselect.engines: serving engines behind a small Protocol, registered by kind and imported lazily."""

from __future__ import annotations

from specselect.engines.base import Engine, LaunchSpec, ReleaseCheck, RunningServer, SanityResult
from specselect.engines.registry import get_engine, known_engine_kinds

__all__ = ["Engine", "LaunchSpec", "ReleaseCheck", "RunningServer", "SanityResult", "get_engine", "known_engine_kinds"]
