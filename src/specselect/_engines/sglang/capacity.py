"""SGLang's KV cache in specselect's terms: the pool's size from `/server_info` (`max_total_num_tokens`, per
request up to `context_length`) and its use under load (the `sglang:token_usage` gauge).

Verified only against the fake SGLang server (no SGLang runs on this machine). SGLang exports no preemption
counter a window's delta could be taken of, so its preemptions stay unknown (None).
"""

from __future__ import annotations

from specselect._engines.prometheus import MetricsSnapshot
from specselect._engines.sglang.serverinfo import ServerInfoSnapshot
from specselect.records.capacity import KvCapacity

__all__ = ["TOKEN_USAGE", "kv_capacity", "kv_usage"]

TOKEN_USAGE = "sglang:token_usage"


def kv_capacity(snap: MetricsSnapshot) -> KvCapacity | None:
    """The KV pool `/server_info` reports; None when the snapshot has no reading or the reading no size."""
    info = snap.server_info if isinstance(snap, ServerInfoSnapshot) else None
    if info is None or not info.max_total_num_tokens:
        return None
    tokens, length = info.max_total_num_tokens, info.context_length
    return KvCapacity(
        tokens=tokens,
        block_size=info.page_size or None,
        max_model_len=length or None,
        engine_max_concurrency=tokens / length if length else None,
        source="server_info max_total_num_tokens",
    )


def kv_usage(snap: MetricsSnapshot) -> float | None:
    """The share of the KV pool in use now (the highest over data-parallel ranks); None when not exported."""
    values = [s.value for s in snap.values(TOKEN_USAGE)]
    return max(values) if values else None
