"""specselect._engines.sglang: the SGLang engine (probe, speculative arguments, launch, telemetry).

SGLang needs CUDA (or another accelerator) to serve; on CPU-only machines it can be probed and its
command lines built, but not started. Submodules are imported on demand (`.engine`, `.launch`, ...).
"""

from __future__ import annotations

__all__: list[str] = []
