"""vLLM's KV cache in specselect's terms: its size, blocks and maximum concurrency from the `cache_config_info`
metric and its start-up log, and its use under load (`kv_cache_usage_perc`, `num_preemptions`).

The log line (vLLM 0.32, `kv_cache_utils.update_kv_cache_capacity`) reads
`CPU KV cache size: 46,592 tokens, Maximum concurrency for 2,048 tokens per request: 22.75x` (`GPU` on CUDA).
"""

from __future__ import annotations

import math
import re

from specselect._engines.prometheus import MetricsSnapshot, counter_delta
from specselect.records.capacity import KvCapacity

__all__ = ["KV_USAGE_GAUGES", "PREEMPTIONS", "kv_capacity", "kv_usage", "preemptions"]

_SIZE_LINE = re.compile(
    r"KV cache size: (?P<tokens>[\d,]+) tokens, Maximum concurrency for (?P<length>[\d,]+) tokens per request: "
    r"(?P<concurrency>[\d.]+)x"
)
CACHE_INFO = "vllm:cache_config_info"
KV_USAGE_GAUGES = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
"""The KV-cache usage gauge (0..1) under its current name and the name older releases used."""
PREEMPTIONS = "vllm:num_preemptions"


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    cleaned = text.replace(",", "").strip()
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return int(value) if value >= 0 and value == int(value) else None


def _cache_info(snap: MetricsSnapshot | None) -> dict[str, str]:
    if snap is None:
        return {}
    found = snap.values(CACHE_INFO)
    return dict(found[0].labels) if found else {}


def kv_capacity(log_text: str | None, snap: MetricsSnapshot | None) -> KvCapacity | None:
    """The server's KV capacity: `cache_config_info`'s size, blocks and concurrency (vLLM 0.32 states them there),
    the request length from the log's size line (the last one: one engine per server here); either alone when
    the other is missing; None when neither states a size."""
    lines = _SIZE_LINE.findall(log_text or "")
    logged = lines[-1] if lines else None
    info = _cache_info(snap)
    tokens = _int(info.get("kv_cache_size_tokens")) or (_int(logged[0]) if logged else None)
    if not tokens:
        return None
    stated = _float(info.get("kv_cache_max_concurrency"))
    if stated is None and logged is not None:
        stated = _float(logged[2])
    sources = [name for name, used in (("cache_config_info", bool(info)), ("start-up log", logged is not None)) if used]
    return KvCapacity(
        tokens=tokens,
        # vLLM keeps the blocks of the device the cache lives on in num_gpu_blocks (on CPU too); num_cpu_blocks
        # is swap space.
        blocks=_int(info.get("num_gpu_blocks")) or None,
        block_size=_int(info.get("block_size")) or None,
        max_model_len=_int(logged[1]) or None if logged else None,
        engine_max_concurrency=stated,
        source=" + ".join(sources),
    )


def _float(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value >= 0 and math.isfinite(value) else None


def kv_usage(snap: MetricsSnapshot) -> float | None:
    """The share of the KV cache in use now (the highest over the server's engines); None when not exported."""
    for name in KV_USAGE_GAUGES:
        values = [s.value for s in snap.values(name)]
        if values:
            return max(values)
    return None


def preemptions(before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> int | None:
    """Requests preempted between two scrapes (the project's one counter delta)."""
    return counter_delta(before, after, PREEMPTIONS, model_name)
