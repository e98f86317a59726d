"""specselect._measure: a streaming load client with honest latency metrics, peak memory and cache control.

`run_load` drives an OpenAI-compatible server (chat or completions, streaming) and returns one
`RequestRecord` per request plus a `ScenarioSummary` (their types live in `specselect.records`);
`PeakMemorySampler` records peak memory meanwhile.
"""

from specselect._measure.loadgen import ProgressFn, run_load
from specselect._measure.memory import PeakMemorySampler, process_tree_rss_bytes
from specselect._measure.metrics import decode_tok_s, e2e_ms, itl_ms, stats_of, summarize, tpot_ms, ttft_ms
from specselect._measure.requestplan import (
    PlannedRequest,
    arrival_offsets,
    build_body,
    cache_salt,
    plan_requests,
    request_order,
)

__all__ = [
    "PeakMemorySampler",
    "PlannedRequest",
    "ProgressFn",
    "arrival_offsets",
    "build_body",
    "cache_salt",
    "decode_tok_s",
    "e2e_ms",
    "itl_ms",
    "plan_requests",
    "process_tree_rss_bytes",
    "request_order",
    "run_load",
    "stats_of",
    "summarize",
    "tpot_ms",
    "ttft_ms",
]
