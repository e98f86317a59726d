"""The canonical content of a workload and its sha256.

Canonical form: a JSON array of the validated items in file order, each item being
`WorkloadItem.model_dump(mode="json", exclude_none=True)`, serialised with sorted keys, `(",", ":")`
separators, `ensure_ascii=False`, encoded as UTF-8. The header (name, version, description) is not part of
it, so whitespace or key order in a file never changes the hash, while editing any character of any text
(or an id, a category, the item order) does. ShareGPT records hash as the chat messages they became.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from specselect.workloads.model import WorkloadItem

__all__ = ["canonical_items", "canonical_json", "content_sha256"]


def canonical_items(items: Iterable[WorkloadItem]) -> list[dict[str, Any]]:
    """The JSON-compatible form of each item that the hash covers."""
    return [item.model_dump(mode="json", exclude_none=True) for item in items]


def canonical_json(items: Iterable[WorkloadItem]) -> bytes:
    """The exact bytes the workload hash is computed over."""
    text = json.dumps(canonical_items(items), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def content_sha256(items: Iterable[WorkloadItem]) -> str:
    """Hex sha256 of the canonical content of `items`."""
    return hashlib.sha256(canonical_json(items)).hexdigest()
