"""The canonical content of a workload and its sha256.

Canonical form: a JSON array of the validated items in file order, each item being
`WorkloadItem.model_dump(mode="json", exclude_none=True)`, serialised with sorted keys, `(",", ":")`
separators, `ensure_ascii=False`, encoded as UTF-8. The header (name, version, description) is not part of
it, so whitespace or key order in a file never changes the hash, while editing any character of any text
(or an id, a category, the item order) does. ShareGPT records hash as the chat messages they became.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from specselect._common.canonical import canonical_json, canonical_sha256
from specselect.records.workloads import WorkloadItem

__all__ = ["canonical_bytes", "canonical_items", "content_sha256"]


def canonical_items(items: Iterable[WorkloadItem]) -> list[dict[str, Any]]:
    """The JSON-compatible form of each item that the hash covers."""
    return [item.model_dump(mode="json", exclude_none=True) for item in items]


def canonical_bytes(items: Iterable[WorkloadItem]) -> bytes:
    """The exact bytes the workload hash is computed over."""
    return canonical_json(canonical_items(items)).encode("utf-8")


def content_sha256(items: Iterable[WorkloadItem]) -> str:
    """Hex sha256 of the canonical content of `items`."""
    return canonical_sha256(canonical_items(items))
