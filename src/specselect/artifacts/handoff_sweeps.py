"""The hand-off's sweep advice: up to which concurrency to enable each candidate, and which proposal length."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from packaging.version import InvalidVersion, Version

from specselect.artifacts.results import GroupResult, HandoffConcurrency, HandoffLength
from specselect.artifacts.sweep_doc import SweepAnalysis

__all__ = ["CUTOFF_NOTE", "DYNAMIC_SCHEDULE_MIN_VLLM", "concurrency_advice", "length_advice"]

DYNAMIC_SCHEDULE_MIN_VLLM = Version("0.32.0")
"""First vLLM with `speculative_config.num_speculative_tokens_per_batch_size` (dynamic speculative decoding)."""
CUTOFF_NOTE = (
    "derived from the measured crossover, not measured itself: vLLM's dynamic speculative decoding schedule "
    "(range_start, range_end, num_speculative_tokens) proposes k tokens up to the cut-off batch size and none "
    "above it; verify it on your engine before deploying"
)
_BEYOND = 1 << 20
"""Upper end of the last schedule range (vLLM clips it to its own max batch size)."""


def _supports_cutoff(engine_kind: str, engine_version: str | None) -> bool:
    if engine_kind != "vllm" or engine_version is None:
        return False
    try:
        return Version(engine_version).release >= DYNAMIC_SCHEDULE_MIN_VLLM.release
    except InvalidVersion:
        return False


def concurrency_advice(
    sweeps: SweepAnalysis | None,
    groups: Sequence[GroupResult],
    *,
    engine_kind: str,
    engine_version: str | None,
) -> tuple[HandoffConcurrency, ...]:
    """One line per candidate and workload measured at several concurrency levels."""
    if sweeps is None:
        return ()
    by_name: Mapping[str, GroupResult] = {g.group: g for g in groups}
    out: list[HandoffConcurrency] = []
    for c in sweeps.crossovers:
        group = by_name.get(c.candidate)
        k = group.proposal_length if group is not None else None
        setting: dict[str, object] | None = None
        if c.status == "crossover" and c.pays_up_to is not None and k and _supports_cutoff(engine_kind, engine_version):
            schedule = [[1, c.pays_up_to, k], [c.pays_up_to + 1, _BEYOND, 0]]
            setting = {"num_speculative_tokens_per_batch_size": schedule}
        out.append(
            HandoffConcurrency(
                candidate=c.candidate,
                workload=c.workload,
                levels=c.levels,
                status=c.status,
                pays_up_to=c.pays_up_to,
                crossover_at=c.crossover_at,
                recommendation=c.recommendation,
                reason=c.reason,
                engine_setting=setting,
                engine_setting_note=CUTOFF_NOTE if setting is not None else None,
            )
        )
    return tuple(out)


def length_advice(sweeps: SweepAnalysis | None) -> tuple[HandoffLength, ...]:
    """One line per plan entry, fixed options and scenario whose proposal lengths were compared."""
    if sweeps is None:
        return ()
    return tuple(
        HandoffLength(
            sweep=s.sweep,
            fixed=s.fixed,
            workload=s.choice.workload,
            concurrency=s.choice.concurrency,
            status=s.choice.status,
            recommended_length=s.choice.recommended_length,
            recommended_candidate=s.choice.recommended_candidate,
            best_length=s.choice.best_length,
            reason=s.choice.reason,
        )
        for s in sweeps.lengths
    )
