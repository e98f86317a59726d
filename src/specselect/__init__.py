"""specselect: choose the speculative-decoding mechanism for an LLM deployment from evidence.

The Python API (`specselect.api`) is re-exported here: `specselect.load_plan`, `probe`, `run`, `load_results`,
`check`, `to_pandas` and `Results`.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

try:
    __version__ = version("specselect")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

if TYPE_CHECKING:
    from specselect.api import Results, check, load_plan, load_results, probe, run, to_pandas

_API = ("Results", "check", "load_plan", "load_results", "probe", "run", "to_pandas")

__all__ = ["Results", "__version__", "check", "load_plan", "load_results", "probe", "run", "to_pandas"]


def __getattr__(name: str) -> object:
    # Imported on first use: the API pulls in the runner and the report, which `import specselect` (every module
    # does, for __version__) must not.
    if name in _API:
        return getattr(importlib.import_module("specselect.api"), name)
    raise AttributeError(f"module 'specselect' has no attribute {name!r}")
