"""The specselect home directory: managed engine environments, converted models, caches."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_home"]


def default_home() -> Path:
    """`$SPECSELECT_HOME`, or `~/.cache/specselect`."""
    env = os.environ.get("SPECSELECT_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specselect"
