"""specselect: choose the speculative-decoding mechanism for an LLM deployment from evidence."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("specselect")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
