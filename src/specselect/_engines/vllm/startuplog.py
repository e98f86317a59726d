"""A vLLM server's start-up as its own log tells it: the phases (`startup_split`) and the warnings that bear on what
is measured (`startup_warnings`).

vLLM 0.32 prefixes its lines `LEVEL MM-DD HH:MM:SS [file.py:N] message` (with `(EngineCore pid=N) ` or
`(APIServer pid=N) ` before them). The phases are bounded by lines it writes on every start:
`Starting to load model`, then `init engine (profile, create kv cache, warmup model) took X s (compilation: Y s)`
(its whole initialisation after loading, with the compile time it measured), `Graph capturing finished in Z secs`
on CUDA; the compile cache shows in `Using cache directory: D for vLLM's torch.compile`, `Directly load the
compiled graph(s)` (a hit) and `Compiling a graph for compile range` (a miss).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from specselect._engines.base import RunningServer
from specselect.records.startup import CompileCache, EngineWarning, StartupSplit

__all__ = ["WARNING_TOPICS", "read_startup", "startup_split", "startup_warnings"]

_LINE = re.compile(
    r"^(?:\([^)]*\) )?(?P<level>DEBUG|INFO|WARNING|ERROR) (?P<stamp>\d\d-\d\d \d\d:\d\d:\d\d) \[[^\]]*\] (?P<msg>.*)$"
)
_LOAD_START = re.compile(r"Starting to load model")
_INIT = re.compile(
    r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) s(?: \(compilation: (?P<c>[\d.]+) s)?"
)
_CAPTURE = re.compile(r"Graph capturing finished in (?P<s>[\d.]+) secs")
_CACHE_DIR = re.compile(r"Using cache directory: (?P<dir>\S+) for vLLM's torch\.compile")
_HIT = re.compile(r"Directly load the compiled graph")
_MISS = re.compile(r"Compiling a graph for compile range")
_OFF = re.compile(r"torch\.compile cache is disabled|Enforce eager set, disabling torch\.compile")

WARNING_TOPICS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("intel_openmp", re.compile(r"libiomp is not found in LD_PRELOAD")),
    ("intel_openmp_speculative", re.compile(r"without Intel OpenMP in LD_PRELOAD")),
    ("tcmalloc", re.compile(r"libtcmalloc is not found in LD_PRELOAD")),
)
"""vLLM's start-up warnings that bear on the measurement, by topic: each says the server runs slower than its
documentation's set-up would (the CPU runtime it asks to preload)."""

_HALF_SECOND = 0.5
"""A log stamp is the second the line was written in: its middle is the best guess of when."""


@dataclass(frozen=True)
class _Line:
    at: float
    """Seconds since the epoch (the stamp's middle)."""
    level: str
    message: str


def _lines(text: str, year: int) -> list[_Line]:
    out = []
    for raw in text.splitlines():
        match = _LINE.match(raw.strip())
        if match is None:
            continue
        try:
            stamp = dt.datetime.strptime(f"{year}-{match['stamp']}", "%Y-%m-%d %H:%M:%S")
        except ValueError:
            continue
        out.append(_Line(stamp.timestamp() + _HALF_SECOND, match["level"], match["msg"]))
    return out


def _compile_cache(lines: list[_Line]) -> tuple[CompileCache, str | None]:
    directory = next((m["dir"] for ln in lines if (m := _CACHE_DIR.search(ln.message))), None)
    if directory is not None and "torch_compile_cache/" in directory:
        # The part vLLM names by its configuration hash; the rest is this launch's path.
        directory = "torch_compile_cache/" + directory.split("torch_compile_cache/", 1)[1].split("/", 1)[0]
    if any(_MISS.search(ln.message) for ln in lines):
        return "miss", directory
    if any(_HIT.search(ln.message) for ln in lines):
        return "hit", directory
    if any(_OFF.search(ln.message) for ln in lines):
        return "off", directory
    return "unknown", directory


def _seconds(value: float) -> float:
    return round(max(value, 0.0), 2)


def startup_split(text: str, *, started_at: float, ready_at: float, cache_key: str | None = None) -> StartupSplit:
    """The phases of the start-up whose log is `text` (this attempt's lines only), spawned at `started_at` and
    healthy at `ready_at` (seconds since the epoch, specselect's clock); the phases add up to the total."""
    total = max(ready_at - started_at, 0.0)
    lines = _lines(text, dt.datetime.fromtimestamp(started_at).year)
    cache, directory = _compile_cache(lines)
    split = StartupSplit(total_s=_seconds(total), compile_cache=cache, compile_cache_dir=directory, cache_key=cache_key)
    load = next((ln for ln in lines if _LOAD_START.search(ln.message)), None)
    init = next(((ln, m) for ln in lines if (m := _INIT.search(ln.message))), None)
    if load is None:
        return split
    process = min(max(load.at - started_at, 0.0), total)
    if init is None:
        return split.model_copy(update={"process_and_imports_s": _seconds(process)})
    line, match = init
    init_s = float(match["s"])
    captures = [float(m["s"]) for ln in lines if (m := _CAPTURE.search(ln.message))]
    stated = match["c"] is not None or bool(captures) or cache == "off"
    compiled = min(float(match["c"] or 0.0) + sum(captures), init_s) if stated else None
    weights = max(line.at - init_s - load.at, 0.0)
    ready = total - process - weights - init_s
    return split.model_copy(
        update={
            "process_and_imports_s": _seconds(process),
            "weight_load_s": _seconds(weights),
            "init_s": _seconds(init_s),
            "profile_and_kv_s": _seconds(init_s - compiled) if compiled is not None else None,
            "compile_and_graphs_s": _seconds(compiled) if compiled is not None else None,
            "ready_s": _seconds(ready),
        }
    )


def startup_warnings(text: str) -> tuple[EngineWarning, ...]:
    """The engine's start-up warnings that bear on the measurement (`WARNING_TOPICS`), each topic once."""
    found: dict[str, EngineWarning] = {}
    for line in _lines(text, 2000):  # the year does not matter here
        if line.level != "WARNING":
            continue
        for topic, pattern in WARNING_TOPICS:
            if topic not in found and pattern.search(line.message):
                found[topic] = EngineWarning(topic=topic, message=line.message.strip()[:300])
    return tuple(found.values())


def read_startup(server: RunningServer, log: str, *, cache_key: str | None, preload: str | None) -> RunningServer:
    """`server` with its start-up split, its start-up warnings and its preloaded libraries (LD_PRELOAD's value)."""
    split = None
    if server.started_at is not None and server.startup_s is not None:
        ready_at = server.started_at + server.startup_s
        split = startup_split(log, started_at=server.started_at, ready_at=ready_at, cache_key=cache_key)
    libraries = tuple(part for part in (preload or "").split(":") if part)
    return server.model_copy(update={"startup": split, "engine_warnings": startup_warnings(log), "preload": libraries})
