"""How long a server's start-up took, phase by phase, as its own log tells it (`StartupSplit`), and what the
launch ran with that its start-up log comments on (`EngineWarning`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["CompileCache", "EngineWarning", "StartupSplit"]

CompileCache = Literal["hit", "miss", "off", "unknown"]
"""`hit`: the engine loaded every compiled graph from its cache; `miss`: it compiled at least one; `off`: it
compiled nothing (eager mode, or the cache disabled); `unknown`: its log says neither."""


class StartupSplit(BaseModel):
    """A launch's start-up in phases, from the engine's log lines and their timestamps.

    The phases add up to `total_s` (specselect's clock, spawn to the first healthy answer). Log timestamps have
    whole seconds, so a phase bounded by them is good to about a second; the engine's own stated durations (its
    whole initialisation, its compilation, its graph capture) are exact. None: the log lacks the line that bounds
    the phase.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    total_s: float
    process_and_imports_s: float | None = None
    """Spawn to the engine's first step of loading the model: interpreter, imports, configuration."""
    weight_load_s: float | None = None
    """Loading the target's (and a drafter's) weights, up to the engine's initialisation of its caches."""
    init_s: float | None = None
    """The engine's own initialisation after loading (profiling, KV allocation, compile, capture, warm-up), as it
    states it: `profile_and_kv_s` + `compile_and_graphs_s` when it says how long compiling took."""
    profile_and_kv_s: float | None = None
    """Memory profiling and allocating the KV cache (the engine's initialisation less compile and capture)."""
    compile_and_graphs_s: float | None = None
    """torch.compile and CUDA-graph capture, as the engine states them; 0 when it compiled nothing; None when it
    compiled without saying for how long (vLLM 0.32 on CPU traces once with Inductor and states no compile time)."""
    ready_s: float | None = None
    """The engine initialised to the first healthy answer: the API server's own start and readiness polling."""
    compile_cache: CompileCache = "unknown"
    compile_cache_dir: str | None = None
    """The engine's own compile-cache directory, named by its configuration hash (vLLM: torch_compile_cache/H)."""
    cache_key: str | None = None
    """specselect's key of the launch configuration whose launches share that cache (never another's)."""


class EngineWarning(BaseModel):
    """A warning the engine logged while starting that bears on what is measured (a slower runtime, say)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: str
    """What it is about, in specselect's words: `intel_openmp`, `tcmalloc`."""
    message: str
    """The engine's own words (first line, trimmed)."""
