"""vLLM's own speculation controllers: which speculative-configuration keys make the engine change how much it
speculates while serving, and which of them an installed version declares (read by the probe from the fields of
its `SpeculativeConfig`).

vLLM 0.32 declares three: a per-batch-size proposal length (`num_speculative_tokens_per_batch_size`, dynamic
speculative decoding; the scheduler applies it, so the CPU build has it too), suffix decoding's proposal length
from the match length (`suffix_decoding_max_spec_factor`, method `suffix`) and DSpark's adaptive verification
budget (`enable_adaptive_verification`, method `dspark`, which only the GPU model runner implements).

The batch-size schedule is not for every method: vLLM 0.32's n-gram GPU, suffix, Medusa and hidden-state
extraction proposers assert that the step's proposal length is the configured one, so a schedule that lowers
it crashes the server mid-run (vllm#46399, open; the CPU `ngram` proposer accepts a shorter length), and vLLM
drops the schedule silently above data parallel size 1 (`_maybe_disable_dynamic_sd_for_data_parallel`).
"""

from __future__ import annotations

from collections.abc import Iterable

from specselect.records.capabilities import RuntimeController

__all__ = ["BATCH_SCHEDULE_KEY", "FIXED_LENGTH_METHODS", "KNOWN_CONTROLLERS", "found_controllers"]

BATCH_SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"
"""vLLM's speculative-config key for dynamic speculative decoding: [[range_start, range_end, k], ...]."""

FIXED_LENGTH_METHODS = ("ngram_gpu", "suffix", "medusa", "extract_hidden_states")
"""vLLM 0.32's proposers that assert the configured proposal length every step (vllm#46399)."""

KNOWN_CONTROLLERS: tuple[RuntimeController, ...] = (
    RuntimeController(
        name="batch_size_schedule",
        option=BATCH_SCHEDULE_KEY,
        excluded_methods=FIXED_LENGTH_METHODS,
        max_data_parallel_size=1,
        description="dynamic speculative decoding: the proposal length per batch size, from a schedule of inclusive "
        "batch-size ranges [[first, last, k], ...] (k = 0 proposes nothing); the scheduler looks the length up "
        "every step, clamped to num_speculative_tokens; not for proposers of a fixed length (vllm#46399) nor above "
        "data parallel size 1 (vLLM turns it off there)",
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
