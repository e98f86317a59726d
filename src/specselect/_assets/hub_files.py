"""Which files of a hub repository a fetch takes, and how many bytes that is: one rule for `specselect fetch`
(`hub_fetch`) and for doctor's size estimate (`hub_access`), so the estimate counts what a fetch downloads."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping

__all__ = ["ALLOW_PATTERNS", "INDEX_SUFFIXES", "expected_bytes", "is_weight", "wanted_files"]

ALLOW_PATTERNS: tuple[str, ...] = (
    "config.json",
    "generation_config.json",
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "*.model",
    "*.tiktoken",
    "chat_template*",
    "*.jinja",
    "preprocessor_config.json",
    "processor_config.json",
    "*.safetensors.index.json",
    "*.safetensors",
)
"""The top-level files serving needs: config, tokenizer (fast, sentencepiece, BPE, tiktoken), chat templates and
safetensors weights. Repositories without safetensors weights get their PyTorch ones (`_BIN_WEIGHTS`)."""

INDEX_SUFFIXES = (".safetensors.index.json", ".bin.index.json")
_BIN_WEIGHTS = ("pytorch_model*.bin", "pytorch_model.bin.index.json")
_SHARD_NAME = re.compile(r"-\d{5}-of-\d{5}\.(safetensors|bin)$")


def _top_level(path: str, patterns: Iterable[str]) -> bool:
    return "/" not in path and any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)


def wanted_files(paths: Iterable[str]) -> set[str]:
    """The repository files serving needs, before any index is read."""
    listed = list(paths)
    chosen = {p for p in listed if _top_level(p, ALLOW_PATTERNS)}
    if not any(p.endswith(".safetensors") for p in chosen):
        chosen |= {p for p in listed if _top_level(p, _BIN_WEIGHTS)}
    return chosen


def is_weight(path: str) -> bool:
    """A safetensors or PyTorch weight file (not its index)."""
    return path.endswith((".safetensors", ".bin")) and not path.endswith(INDEX_SUFFIXES)


def expected_bytes(sizes: Mapping[str, int | None]) -> int | None:
    """What a fetch downloads of the wanted files `sizes` (path -> listed size), before the index is read: with
    sharded weights (`*-00001-of-00004.*`, the names an index uses) a consolidated copy beside them is left out.
    None when the hub left a size out."""
    kept = dict(sizes)
    if any(_SHARD_NAME.search(p) for p in kept):
        kept = {p: s for p, s in kept.items() if not is_weight(p) or _SHARD_NAME.search(p)}
    if any(s is None for s in kept.values()):
        return None
    return sum(s for s in kept.values() if s is not None)
