"""The `sweeps` section of `evidence.json`: crossovers, proposal-length choices, goodput and early stops."""

from __future__ import annotations

__all__ = []
