"""specselect._engines.vllm: the vLLM engine (environment, probe, launch, speculative config).

Submodules are imported on demand (`specselect._engines.vllm.engine`, `.launch`, `.specconfig`, ...).
"""

from __future__ import annotations

__all__: list[str] = []
