"""The hand-off's concurrency advice: a vLLM cut-off schedule only where the engine has one and a crossover exists."""

from __future__ import annotations

from specselect.artifacts.handoff_sweeps import CUTOFF_NOTE, concurrency_advice
from specselect.artifacts.results import GroupResult, LaunchRecord
from specselect.artifacts.sweep_doc import SweepAnalysis
from specselect.evidence.sweep import Crossover


def _group(k: int) -> GroupResult:
    launch = LaunchRecord.model_construct(speculative_config={"method": "ngram", "num_speculative_tokens": k})
    return GroupResult.model_construct(group="g1", launch=launch)


def _sweeps(status: str, pays_up_to: int | None) -> SweepAnalysis:
    crossover = Crossover.model_construct(
        candidate="g1",
        workload="w",
        levels=(1, 2, 4, 8),
        status=status,
        pays_up_to=pays_up_to,
        crossover_at=8 if status == "crossover" else None,
        recommendation="r",
        reason="why",
    )
    return SweepAnalysis.model_construct(crossovers=(crossover,))


def test_a_crossover_on_vllm_032_gets_a_schedule_that_stops_speculating_above_the_cut_off() -> None:
    (advice,) = concurrency_advice(
        _sweeps("crossover", 4), [_group(3)], engine_kind="vllm", engine_version="0.32.0+cpu"
    )
    assert advice.engine_setting == {"num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 1 << 20, 0]]}
    assert advice.engine_setting_note == CUTOFF_NOTE


def test_no_schedule_without_a_crossover_or_on_engines_without_the_setting() -> None:
    cases = [
        (_sweeps("pays_at_all_levels", 8), "vllm", "0.32.0"),
        (_sweeps("crossover", 4), "vllm", "0.31.2"),
        (_sweeps("crossover", 4), "sglang", "0.5.0"),
        (_sweeps("never_pays", None), "vllm", "0.32.0"),
    ]
    for sweeps, kind, version in cases:
        (advice,) = concurrency_advice(sweeps, [_group(3)], engine_kind=kind, engine_version=version)
        assert advice.engine_setting is None and advice.engine_setting_note is None, (kind, version)
    assert concurrency_advice(None, [_group(3)], engine_kind="vllm", engine_version="0.32.0") == ()
