"""specselect._engines.openai: measure OpenAI-compatible servers the user already runs (nothing is launched).

Submodules: `engine` (the engine of kind "openai"), `probe` (identity from /v1/models and /version),
`traffic` (foreign-traffic detection from /metrics), `facts` (admission facts of an endpoint).
"""

from __future__ import annotations

__all__: list[str] = []
