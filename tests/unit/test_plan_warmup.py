"""Every concurrency level warms up at its own batch before its timed pass: `warmup_requests` waves of c requests."""

from __future__ import annotations

from specselect._measure import plan_requests
from specselect._plan.sections import RunConfig
from specselect.records.measurement import Endpoint, SamplingParams, ScenarioSpec
from specselect.records.workloads import WorkloadItem


def test_a_wave_is_as_many_requests_as_the_level_sends_at_once() -> None:
    run = RunConfig(concurrency=(1, 4, 16), warmup_requests=1)
    assert [run.warmup_at(c) for c in run.concurrency] == [1, 4, 16]
    assert RunConfig(concurrency=(4,), warmup_requests=2).warmup_at(4) == 8
    assert RunConfig(concurrency=(4,), warmup_requests=0).warmup_at(4) == 0  # no warm-up stays no warm-up


def test_the_warm_up_at_c4_sends_four_requests_before_the_timed_pass_even_with_fewer_items() -> None:
    items = [WorkloadItem(id=f"i{k}", messages=[{"role": "user", "content": f"say {k}"}]) for k in range(3)]
    spec = ScenarioSpec(
        scenario="general-c4",
        concurrency=4,
        warmup=RunConfig(concurrency=(4,)).warmup_at(4),
        sampling=SamplingParams(max_tokens=8),
    )
    warm, measured = plan_requests(Endpoint(base_url="http://127.0.0.1:1", model="m"), items, spec)
    assert len(warm) == 4 and all(r.warmup for r in warm)
    assert len(measured) == 3
