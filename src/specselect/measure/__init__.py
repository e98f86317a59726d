"""specselect.measure: a streaming load client with honest latency metrics, peak memory and cache control.

`run_load` drives an OpenAI-compatible server (chat or completions, streaming) and returns one
`RequestRecord` per request plus a `ScenarioSummary`; `PeakMemorySampler` records peak memory meanwhile.
"""

from specselect.measure.loadgen import ProgressFn, run_load
from specselect.measure.memory import PeakMemory, PeakMemorySampler, process_tree_rss_bytes
from specselect.measure.metrics import decode_tok_s, e2e_ms, itl_ms, stats_of, summarize, tpot_ms, ttft_ms
from specselect.measure.schedule import (
    PlannedRequest,
    arrival_offsets,
    build_body,
    cache_salt,
    plan_requests,
    request_order,
)
from specselect.measure.types import (
    MEASURE_SCHEMA_VERSION,
    CacheSaltPolicy,
    Endpoint,
    ErrorKind,
    LoadShape,
    RequestRecord,
    SamplingParams,
    ScenarioResult,
    ScenarioSpec,
    ScenarioSummary,
    Stats,
    TokenLogprob,
)

__all__ = [
    "MEASURE_SCHEMA_VERSION",
    "CacheSaltPolicy",
    "Endpoint",
    "ErrorKind",
    "LoadShape",
    "PeakMemory",
    "PeakMemorySampler",
    "PlannedRequest",
    "ProgressFn",
    "RequestRecord",
    "SamplingParams",
    "ScenarioResult",
    "ScenarioSpec",
    "ScenarioSummary",
    "Stats",
    "TokenLogprob",
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
