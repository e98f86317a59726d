"""Model assets: references resolved to exact, content-identified directories, and the builtin models."""

from specselect._assets.builtin import BUILTIN_MODELS, prepare_builtin
from specselect._assets.refs import resolve_model

__all__ = ["BUILTIN_MODELS", "prepare_builtin", "resolve_model"]
