"""Tokenizer fingerprints: the identity of what a tokenizer MEANS, not of the bytes of its files.

A draft model proposes token ids that the target verifies, so the two must agree on what every id is. The
fingerprint is a sha256 over the canonical JSON of exactly that:

- the model type and the vocabulary (token -> id; a Unigram's ordered pieces and scores),
- the BPE merges in order (two spellings, `"a b"` and `["a", "b"]`, are the same merge),
- the added tokens: id, content and whether they are special.

Everything else is left out on purpose: converted tokenizer files carry a name or path, a version, padding
and truncation settings, and the special-token ROLES (`eos_token`, ...) differ between a base and an instruct
model that share one vocabulary. Raw-byte hashes (`identity.tokenizer_sha256`) would call those different.
A tokenizer only known as an opaque binary (`tokenizer.model`, `tiktoken.model`) is fingerprinted by its bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specselect._common.canonical import canonical_sha256
from specselect._common.fileio import sha256_file

__all__ = ["FINGERPRINT_VERSION", "tokenizer_fingerprint", "tokenizer_meaning"]

FINGERPRINT_VERSION = 1
"""Part of every fingerprint: a change of what is hashed must never match an old fingerprint."""

_BINARY_FILES = ("tokenizer.model", "spiece.model", "tiktoken.model")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _merges(raw: Any) -> list[str]:
    """Merges as `"a b"` strings, whichever of the two spellings the file uses."""
    if not isinstance(raw, list):
        return []
    return [" ".join(str(p) for p in m) if isinstance(m, list) else str(m) for m in raw]


def _vocab(raw: Any) -> Any:
    """token -> id pairs sorted by id (a dict), or a Unigram's ordered [piece, score] list as it is."""
    if isinstance(raw, Mapping):
        pairs = [[str(token), idx] for token, idx in raw.items() if isinstance(idx, int)]
        return sorted(pairs, key=lambda pair: (pair[1], pair[0]))
    return raw if isinstance(raw, list) else None


def _added(entries: Any) -> list[list[Any]]:
    """Added tokens as sorted [id, content, special] triples."""
    out: list[list[Any]] = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, Mapping) and isinstance(entry.get("id"), int):
            out.append([entry["id"], str(entry.get("content")), bool(entry.get("special", False))])
    return sorted(out)


def _added_from_config(config: Any) -> list[list[Any]]:
    """A slow tokenizer's added tokens, from tokenizer_config.json's `added_tokens_decoder` (id -> token)."""
    decoder = config.get("added_tokens_decoder") if isinstance(config, Mapping) else None
    if not isinstance(decoder, Mapping):
        return []
    entries = [dict(v, id=int(k)) for k, v in decoder.items() if isinstance(v, Mapping) and str(k).isdigit()]
    return _added(entries)


def tokenizer_meaning(root: Path) -> dict[str, Any] | None:
    """The parts of a directory's tokenizer that decide what each id means, or None when it has none."""
    fast = _read_json(root / "tokenizer.json")
    if isinstance(fast, Mapping) and isinstance(fast.get("model"), Mapping):
        model = fast["model"]
        return {
            "type": str(model.get("type")),
            "vocab": _vocab(model.get("vocab")),
            "merges": _merges(model.get("merges")),
            "added_tokens": _added(fast.get("added_tokens")),
        }
    vocab = _read_json(root / "vocab.json")
    if isinstance(vocab, Mapping):
        merges_path = root / "merges.txt"
        merges: list[str] = []
        if merges_path.is_file():
            lines = merges_path.read_text(encoding="utf-8").splitlines()
            merges = [line for line in lines if line.strip() and not line.startswith("#version")]
        return {
            "type": "BPE" if merges else "vocab",
            "vocab": _vocab(vocab),
            "merges": merges,
            "added_tokens": _added_from_config(_read_json(root / "tokenizer_config.json")),
        }
    for name in _BINARY_FILES:
        if (root / name).is_file():
            return {"type": f"binary:{name}", "sha256": sha256_file(root / name)}
    return None


def tokenizer_fingerprint(root: Path) -> str | None:
    """sha256 of the tokenizer's meaning (see the module docstring), or None when the directory has none."""
    meaning = tokenizer_meaning(root)
    if meaning is None:
        return None
    return canonical_sha256({"fingerprint_version": FINGERPRINT_VERSION, **meaning})
