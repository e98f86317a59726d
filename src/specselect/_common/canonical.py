"""Canonical JSON: the one serialisation behind every identity hash (plan, workload, sampling, track).

Sorted keys, no whitespace, UTF-8 text as is (`ensure_ascii=False`) and no NaN/Infinity: the same data always
gives the same bytes, and any change of a value changes them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "canonical_sha256"]


def canonical_json(obj: Any) -> str:
    """Key-sorted, whitespace-free JSON of an already JSON-compatible object."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_sha256(obj: Any) -> str:
    """Hex sha256 of `canonical_json(obj)` encoded as UTF-8."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()
