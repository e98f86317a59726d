"""The regression check's judgements, and the acceptance spread they compare against: each says nothing on an
unchanged measurement and names the change on a changed one."""

from __future__ import annotations

from specselect._evidence.acceptance import acceptance_spread
from specselect._evidence.regression import (
    SpeedupSpan,
    acceptance_problems,
    config_problems,
    identity_problems,
    parity_problem,
    speedup_problem,
)
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.measurement import RequestRecord
from specselect.records.telemetry import RequestSpecMetrics

POLICY = BootstrapPolicy(n_resamples=500)


def _record(item: str, repeat: int, histogram: list[int] | None, *, warmup: bool = False) -> RequestRecord:
    metrics = None
    if histogram is not None:
        steps = sum(histogram)
        accepted = sum(i * n for i, n in enumerate(histogram))
        k = len(histogram) - 1
        metrics = RequestSpecMetrics(
            acceptance_histogram=tuple(histogram),
            num_spec_steps=steps,
            num_draft_tokens=steps * k,
            num_accepted_draft_tokens=accepted,
            proposal_length=k,
        )
    return RequestRecord(
        request_id=f"{item}:{repeat}",
        item_id=item,
        scenario="rep-c1",
        repeat=repeat,
        warmup=warmup,
        send_time_s=0.0,
        first_token_time_s=0.1,
        chunk_times_s=[0.1, 1.0],
        chunk_tokens=[1, 31],
        end_time_s=1.0,
        completion_tokens=32,
        output_text="x",
        finish_reason="length",
        speculative=metrics,
    )


def _records(histograms: dict[str, list[int]]) -> list[RequestRecord]:
    out = [_record("warm", 0, [9, 0, 0], warmup=True)]
    out += [_record(item, r, h) for item, h in histograms.items() for r in (0, 1)]
    return out


HIGH = {"a": [1, 2, 7], "b": [2, 2, 6], "c": [1, 1, 8], "d": [2, 3, 5]}
LOW = {"a": [8, 1, 1], "b": [9, 1, 0], "c": [7, 2, 1], "d": [8, 2, 0]}


def test_the_spread_is_the_server_counters_per_position_rate_with_an_item_bootstrap_interval() -> None:
    spread = acceptance_spread(_records(HIGH), POLICY)
    assert spread is not None
    assert (spread.n_requests, spread.n_items, spread.spec_steps) == (8, 4, 80)
    # Position 0 accepted in every step that accepted at least one token: (9 + 8 + 9 + 8) / 40 steps per repeat.
    assert [round(p.rate, 3) for p in spread.per_position] == [0.85, 0.65]
    first = spread.per_position[0]
    assert first.low is not None and first.high is not None and first.low <= first.rate <= first.high
    assert acceptance_spread([_record("a", 0, None)], POLICY) is None


def test_the_same_acceptance_again_is_no_problem_and_a_drop_is_named_per_position() -> None:
    recorded = acceptance_spread(_records(HIGH), POLICY)
    again = acceptance_spread(_records(HIGH), POLICY)
    assert again is not None and acceptance_problems("rep-c1", recorded, again.rates()) == []
    dropped = acceptance_spread(_records(LOW), POLICY)
    assert dropped is not None
    lines = [p.line() for p in acceptance_problems("rep-c1", recorded, dropped.rates())]
    assert lines[0].startswith("acceptance: rep-c1: position 0 dropped: 0.20 now, recorded 0.85 [")
    assert len(lines) == 2


def test_a_shorter_proposal_shows_as_fewer_draft_positions() -> None:
    recorded = acceptance_spread(_records(HIGH), POLICY)
    (problem,) = acceptance_problems("rep-c1", recorded, [0.85])
    assert problem.message == "1 draft positions now, 2 recorded"
    (missing,) = acceptance_problems("rep-c1", recorded, None)
    assert missing.message == "no acceptance exported now, recorded was"


def test_a_speedup_fails_only_when_its_interval_lies_below_the_recorded_one() -> None:
    recorded = SpeedupSpan(point=2.1, low=1.9, high=2.3)
    assert speedup_problem("rep-c1", recorded, SpeedupSpan(point=1.85, low=1.7, high=2.0)) is None
    found = speedup_problem("rep-c1", recorded, SpeedupSpan(point=1.2, low=1.1, high=1.3))
    assert found is not None
    assert found.line() == "speedup: rep-c1: 1.20x [1.10, 1.30] now, below the recorded 2.10x [1.90, 2.30]"
    gone = speedup_problem("rep-c1", recorded, SpeedupSpan(point=None, low=None, high=None), "incomplete")
    assert gone is not None and gone.message == "no comparable speedup now (incomplete)"


def test_one_round_shows_the_speedup_without_judging_it_unless_none_was_measured() -> None:
    # CI 2026-12-02, one unchanged n-gram setup launched twice: the second launch's interval under the first's.
    recorded, again = SpeedupSpan(point=2.66, low=2.42, high=2.92), SpeedupSpan(point=2.07, low=1.80, high=2.33)
    assert speedup_problem("rep-c1", recorded, again, rounds=2) is not None
    assert speedup_problem("rep-c1", recorded, again, rounds=1) is None
    none = speedup_problem("rep-c1", recorded, SpeedupSpan(point=None, low=None, high=None), "failed", rounds=1)
    assert none is not None and none.message == "no comparable speedup now (failed)"


def test_identities_configuration_and_parity_changes_are_one_line_each() -> None:
    recorded = {"engine version": "0.32.0+cpu", "proposer snapshot": "abc", "workload rep": "k1"}
    assert identity_problems(recorded, dict(recorded)) == []
    now = {**recorded, "proposer snapshot": "def"}
    assert [p.line() for p in identity_problems(recorded, now)] == [
        "identity: proposer snapshot changed: abc recorded, def now"
    ]
    before = {"method": "ngram", "num_speculative_tokens": 4, "model": "/a"}
    after = {"method": "ngram", "num_speculative_tokens": 2, "model": "/b"}
    assert [p.line() for p in config_problems(before, after, ignore=("model",))] == [
        "proposal: num_speculative_tokens changed: 4 recorded, 2 now"
    ]
    assert config_problems(before, dict(before)) == []
    assert parity_problem("rep-c1", "pass", "pass") is None
    changed = parity_problem("rep-c1", "pass", "fail", "3 of 8 outputs differ")
    assert changed is not None and changed.line() == "parity: rep-c1: fail now, pass recorded (3 of 8 outputs differ)"
