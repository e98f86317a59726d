"""vLLM's own speculation controllers: which speculative-configuration keys make the engine change how much it
speculates while serving, and which of them an installed version declares (read by the probe from the fields of
its `SpeculativeConfig`).

vLLM 0.32 declares three: a per-batch-size proposal length (`num_speculative_tokens_per_batch_size`, dynamic
speculative decoding; the scheduler applies it, so the CPU build has it too), suffix decoding's proposal length
from the match length (`suffix_decoding_max_spec_factor`, method `suffix`) and DSpark's adaptive verification
budget (`enable_adaptive_verification`, method `dspark`, which only the GPU model runner implements).
"""

from __future__ import annotations

from collections.abc import Iterable

from specselect.records.capabilities import RuntimeController

__all__ = ["BATCH_SCHEDULE_KEY", "KNOWN_CONTROLLERS", "found_controllers"]

BATCH_SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"
"""vLLM's speculative-config key for dynamic speculative decoding: [[range_start, range_end, k], ...]."""

KNOWN_CONTROLLERS: tuple[RuntimeController, ...] = (
    RuntimeController(
        name="batch_size_schedule",
        option=BATCH_SCHEDULE_KEY,
        description="dynamic speculative decoding: the proposal length per batch size, from a schedule of inclusive "
        "batch-size ranges [[first, last, k], ...] (k = 0 proposes nothing); the scheduler looks the length up "
        "every step, clamped to num_speculative_tokens",
    ),
    RuntimeController(
        name="suffix_match_length",
        option="suffix_decoding_max_spec_factor",
        methods=("suffix",),
        description="suffix decoding sizes every proposal from its match: at most max_spec_factor x the matched "
        "prefix length, and only tokens above suffix_decoding_min_token_prob",
    ),
    RuntimeController(
        name="adaptive_verification",
        option="enable_adaptive_verification",
        methods=("dspark",),
        requires_device="cuda",
        description="DSpark sizes the verification budget from each request's draft confidence (implemented by the "
        "GPU model runner only)",
    ),
)
"""Every controller specselect knows for vLLM; the probe keeps those whose key the installed version declares."""


def found_controllers(fields: Iterable[str]) -> tuple[RuntimeController, ...]:
    """The known controllers whose configuration key is among `fields` (the installed `SpeculativeConfig`'s)."""
    declared = set(fields)
    return tuple(c for c in KNOWN_CONTROLLERS if c.option in declared)
