"""kind = "openai" without a real engine: foreign-traffic detection around a scenario, and whole runs against two
local stub servers (the real-vLLM version is tests/integration/test_openai_endpoints.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document, load_records
from specselect._artifacts.verify import verify_run
from specselect._engines import create_engine
from specselect._engines.base import Session
from specselect._engines.openai.engine import AttachedServer, OpenAIEndpointEngine
from specselect._engines.openai.foreign_traffic import EndpointTrafficGuard, idle_window, judge_traffic
from specselect._engines.prometheus import MetricSample, MetricsSnapshot
from specselect._engines.vllm.telemetry import request_spec_metrics
from specselect._evidence.pipeline import InMemoryRecords
from specselect._plan import load_plan
from specselect._runner.preflight import run_preflight
from specselect._runner.progress import SilentProgress
from specselect._runner.run import RunOptions, run_plan
from specselect._runner.scenario import Measuring, divergent_items, measure_scenario
from specselect._workloads.loader import load_workload
from specselect.records.group import GroupResult
from specselect.records.measurement import ErrorKind, RequestRecord
from specselect.records.server import SanityResult
from specselect.records.telemetry import SpecDecodeCounters

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.stubs is test support, not in the package
from tests.stubs.openai_stub import StubBehavior, StubServer

# -- foreign traffic -------------------------------------------------------------------------------------


def snap(success: float, tokens: float = 0.0) -> MetricsSnapshot:
    return MetricsSnapshot(
        samples=(
            MetricSample(name="vllm:request_success_total", labels={"finished_reason": "stop"}, value=success),
            MetricSample(name="vllm:generation_tokens_total", labels={}, value=tokens),
        )
    )


def test_idle_windows_report_what_moved() -> None:
    assert not idle_window(snap(3, 10), snap(3, 10), 1.0).busy
    moved = idle_window(snap(3, 10), snap(3, 42), 1.0)
    assert moved.busy and moved.moved == {"vllm:generation_tokens": 32.0}
    assert (
        judge_traffic(exported=False, idle_before=None, idle_after=None, requests_sent=3, requests_finished=None).status
        == "not_checked"
    )


SANE = SanityResult(model_ids=("stub-model",), api="chat", reply_text="hi", seconds=0.0)


def _serving(stub: StubServer, scrapes: list[MetricsSnapshot], slept: list[float]) -> Session:
    it = iter(scrapes)

    def snapshot() -> MetricsSnapshot:
        return next(it)

    return Session(
        base_url=stub.base_url,
        model="stub-model",
        api_key_env=None,
        snapshot=snapshot,
        spec_counters=lambda before, after: SpecDecodeCounters(model_name="stub-model", exported=False),
        request_spec_metrics=request_spec_metrics,  # the stub sends vLLM's per-request `metrics`
        check_alive=lambda: None,
        log_location=stub.base_url,
        log_tail=lambda: None,
        sanity=SANE,
        declared_peak_memory_mb=900.0,
        traffic=EndpointTrafficGuard(snapshot, exported=True, gap_s=1.5, sleep=slept.append),
        sleep=slept.append,
    )


PLAN = """
schema_version = 1
label = "oa"
[target]
model = "stub-model"
[engine]
kind = "openai"
[sampling]
max_tokens = 8
[run]
repeats = 1
rounds = 1                  # one round: these tests are about endpoints, not intervals
warmup_requests = 1
[workloads]
general = "builtin:general"
[[candidates]]
name = "g0_target_only"
endpoint = { base_url = "BASE", model = "stub-model", peak_memory_mb = 900.0 }
[[candidates]]
name = "g1_ngram"
family = "ngram"
endpoint = { base_url = "CAND/v1", model = "stub-model" }
"""

SENT = 1 + 8  # one warm-up + the 8 items of builtin:general once


@pytest.mark.parametrize(
    ("scrapes", "status", "says"),
    [
        # before-gap pair, warm-up done, after scenario, after-gap pair
        ([snap(5), snap(5), snap(6), snap(5 + SENT), snap(5 + SENT), snap(5 + SENT)], "clean", "9 requests finished"),
        ([snap(5), snap(7), snap(8), snap(7 + SENT), snap(7 + SENT), snap(7 + SENT)], "contaminated", "gap before"),
        (
            [snap(5), snap(5), snap(6), snap(5 + SENT), snap(5 + SENT, 40), snap(9 + SENT, 80)],
            "contaminated",
            "gap after",
        ),
        (
            [snap(5), snap(5), snap(6), snap(9 + SENT), snap(9 + SENT), snap(9 + SENT)],
            "contaminated",
            "13 requests finished",
        ),
    ],
)
def test_counters_moving_while_specselect_is_idle_mark_the_scenario(
    tmp_path: Path, scrapes: list[MetricsSnapshot], status: str, says: str
) -> None:
    slept: list[float] = []
    with StubServer(StubBehavior(ttft_s=0.0, chunk_delay_s=0.0, output_tokens=4)) as stub:
        plan = load_plan_text(tmp_path, PLAN.replace("BASE", stub.base_url).replace("CAND", "http://127.0.0.1:1"))
        run = measure_scenario(
            _serving(stub, scrapes, slept),
            Measuring(plan, RunLayout(tmp_path / "res"), "g0_target_only", InMemoryRecords(), SilentProgress()),
            workload_name="general",
            workload=load_workload("builtin:general", name="general"),
            concurrency=1,
        )
    assert run.traffic is not None and run.traffic.status == status, run.traffic
    assert says in run.traffic.reason
    assert run.traffic.requests_sent == SENT
    assert slept == [0.5, 1.5, 0.5, 1.5]  # settle + idle gap, before and after
    assert (run.peak_memory, run.peak_memory_source, run.declared_peak_memory_mb) == (None, "declared", 900.0)


def test_metrics_without_known_request_counters_are_not_a_clean_bill(tmp_path: Path) -> None:
    unknown = MetricsSnapshot(samples=(MetricSample(name="process_cpu_seconds_total", labels={}, value=1.0),))
    with StubServer(StubBehavior(ttft_s=0.0, chunk_delay_s=0.0, output_tokens=4)) as stub:
        plan = load_plan_text(tmp_path, PLAN.replace("BASE", stub.base_url).replace("CAND", "http://127.0.0.1:1"))
        run = measure_scenario(
            _serving(stub, [unknown] * 6, []),
            Measuring(plan, RunLayout(tmp_path / "res"), "g0_target_only", InMemoryRecords(), SilentProgress()),
            workload_name="general",
            workload=load_workload("builtin:general", name="general"),
            concurrency=1,
        )
    assert run.traffic is not None and run.traffic.status == "not_checked"
    assert "no request counters" in run.traffic.reason


def load_plan_text(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return load_plan(path).plan


# -- a whole run -----------------------------------------------------------------------------------------


def _run_two_stubs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cand_tokens: int, parity_pass: str = "full"
) -> tuple[Any, int]:
    # The stub streams only; the real engine's non-streaming sanity request is covered by the integration test.
    def sanity(self: OpenAIEndpointEngine, server: AttachedServer) -> SanityResult:
        return SanityResult(model_ids=(server.served_model,), api="chat", reply_text="hi", seconds=0.0)

    monkeypatch.setattr(OpenAIEndpointEngine, "sanity", sanity)
    fast = StubBehavior(
        ttft_s=0.01, chunk_delay_s=0.002, tokens_per_chunk=2, output_tokens=cand_tokens, spec_metrics=True
    )
    with StubServer(StubBehavior(ttft_s=0.01, chunk_delay_s=0.004, output_tokens=8)) as base, StubServer(fast) as cand:
        plan = PLAN.replace("BASE", base.base_url).replace("CAND", cand.base_url)
        (tmp_path / "plan.toml").write_text(plan.replace("[run]", f'[run]\nparity_pass = "{parity_pass}"'))
        out = run_plan(RunOptions(plan_ref=str(tmp_path / "plan.toml"), results_dir=tmp_path / "res"), SilentProgress())
        return out, len(base.received())


def test_a_whole_openai_run_against_two_stub_endpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, received = _run_two_stubs(tmp_path, monkeypatch, cand_tokens=8)
    layout = out.layout
    assert [(g.group, g.run_status.value) for g in out.groups] == [
        ("g0_target_only", "completed"),
        ("g1_ngram", "completed"),
    ]
    assert received == SENT + 8  # timed scenario + the untimed parity pass; nothing launched, nothing else sent
    base_group = load_document(layout.group_summary("g0_target_only"), GroupResult)
    assert base_group.launch is None and base_group.log_path is None and base_group.release is None
    assert base_group.endpoint is not None and base_group.endpoint.base_url.startswith("http://127.0.0.1:")
    assert base_group.target_snapshot == "endpoint:id=stub-model;max_model_len=None"
    (scen,) = base_group.scenarios
    assert scen.traffic is not None and scen.traffic.status == "not_checked"
    assert (scen.peak_memory_source, scen.declared_peak_memory_mb) == ("declared", 900.0)
    (parity,) = base_group.parity_passes
    assert (parity.status, parity.n_ok, parity.n_with_logprobs, parity.items) == ("completed", 8, 0, None)
    assert all(r.scenario == "general-c1.parity" for r in load_records(layout, "g0_target_only", "general-c1.parity"))
    # The candidate reproduced every baseline output: its pass had nothing to classify and sent nothing.
    (cand_parity,) = out.groups[1].parity_passes
    assert (cand_parity.status, cand_parity.items, cand_parity.records_path) == ("not_needed", (), None)
    assert out.preflight.target is None and set(out.preflight.endpoints) == {"g0_target_only", "g1_ngram"}
    assert {f.code for f in out.preflight.audit} >= {"metrics_not_exported", "peak_memory_not_measured"}
    (entry,) = out.evidence.entries  # type: ignore[union-attr]
    # Mechanism seen in per-request metrics; the candidate declared no memory: incomplete, as documented.
    assert entry.telemetry is not None and entry.telemetry.source == "per_request"
    assert entry.evidence.evidence_status.value == "incomplete"
    assert entry.evidence.missing_detail == ("candidate.peak_memory_mb",)
    assert entry.parity is not None and entry.parity.verdict.value == "pass"
    assert entry.parity_pass is None
    assert out.manifest is not None and out.manifest.engine_kind == "openai"
    assert out.manifest.target_snapshot == "endpoint:id=stub-model;max_model_len=None"
    assert out.manifest.groups[0].parity_records == ("records/g0_target_only/general-c1.parity.jsonl",)
    report = verify_run(layout.root)
    assert report.ok, report.problems


def test_a_diverging_candidate_reruns_only_its_divergent_items_untimed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, _ = _run_two_stubs(tmp_path, monkeypatch, cand_tokens=6)  # stops 2 tokens early on every item
    (cand_parity,) = out.groups[1].parity_passes
    assert cand_parity.status == "completed" and cand_parity.items is not None
    general = [item.id for item in load_workload("builtin:general").items]
    assert sorted(cand_parity.items) == general
    (entry,) = out.evidence.entries  # type: ignore[union-attr]
    assert entry.parity is not None and entry.parity.verdict.value == "fail"
    assert entry.parity_pass is not None and entry.parity_pass.n_compared == 8
    assert verify_run(out.layout.root).ok


def test_auto_parity_pass_skips_the_baseline_and_judges_with_the_candidates_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, received = _run_two_stubs(tmp_path, monkeypatch, cand_tokens=6, parity_pass="auto")
    assert received == SENT  # the baseline ran the timed scenario only
    assert out.groups[0].parity_passes == ()
    assert out.manifest.groups[0].parity_records == ()
    (cand_parity,) = out.groups[1].parity_passes
    assert cand_parity.status == "completed" and cand_parity.items is not None and len(cand_parity.items) == 8
    (entry,) = out.evidence.entries  # type: ignore[union-attr]
    assert entry.parity is not None and entry.parity.verdict.value == "fail"
    assert entry.parity_pass is None  # no baseline pass to compare the candidate's pass with
    policy = out.evidence.policy.parity_pass  # type: ignore[union-attr]
    assert policy is not None and (policy.mode, policy.ran, policy.baseline_pass) == ("auto", True, False)
    assert verify_run(out.layout.root).ok


def test_divergent_items_compare_tokens_and_ignore_failures() -> None:
    def rec(item: str, repeat: int, ids: list[int] | None, error: str | None = None) -> RequestRecord:
        return RequestRecord(
            request_id=f"{item}{repeat}",
            item_id=item,
            scenario="s",
            repeat=repeat,
            warmup=False,
            output_token_ids=ids,
            output_text="x",
            error=error,
            error_kind=None if error is None else ErrorKind.HTTP_ERROR,
        )

    baseline = [rec("a", 0, [1, 2]), rec("a", 1, [1, 2]), rec("b", 0, [3]), rec("c", 0, [4])]
    records = [rec("a", 0, [1, 2]), rec("a", 1, [1, 9]), rec("b", 0, [3]), rec("c", 0, None, "boom"), rec("d", 0, [5])]
    assert divergent_items(baseline, records) == {"a"}
    # Without token ids on one side the texts are compared (all "x" here): no divergence.
    no_ids = [rec("a", 0, None), rec("a", 1, None), rec("b", 0, None)]
    assert divergent_items(no_ids, records) == set()


def test_an_unset_key_variable_is_an_audit_error_and_nothing_is_probed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPECSELECT_TEST_UNSET_KEY", raising=False)
    text = PLAN.replace("BASE", "http://127.0.0.1:9").replace("CAND", "http://127.0.0.1:10")
    text = text.replace('kind = "openai"', 'kind = "openai"\napi_key_env = "SPECSELECT_TEST_UNSET_KEY"')
    (tmp_path / "plan.toml").write_text(text)
    loaded = load_plan(tmp_path / "plan.toml")
    pre = run_preflight(
        loaded,
        create_engine(loaded.plan.engine),
        home=tmp_path / "home",
        results_root=tmp_path / "res",
        label_existed=False,
        progress=SilentProgress(),
    )
    errors = {f.code: f.message for f in pre.errors}
    assert errors["api_key_env_unset"] == (
        "environment variable SPECSELECT_TEST_UNSET_KEY is not set: export it, or drop api_key_env"
    )
    assert (
        pre.setup.endpoints["g1_ngram"].error == "not probed: environment variable SPECSELECT_TEST_UNSET_KEY is not set"
    )


def test_a_run_at_two_temperatures_measures_every_scenario_at_each_and_judges_each_its_own_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def sanity(self: OpenAIEndpointEngine, server: AttachedServer) -> SanityResult:
        return SanityResult(model_ids=(server.served_model,), api="chat", reply_text="hi", seconds=0.0)

    monkeypatch.setattr(OpenAIEndpointEngine, "sanity", sanity)
    fast = StubBehavior(ttft_s=0.01, chunk_delay_s=0.002, tokens_per_chunk=2, output_tokens=8, spec_metrics=True)
    sampling = "[sampling]\ntemperature = [0, 0.7]\nparity_prompts = 2\nparity_samples = 3\n"
    with StubServer(StubBehavior(ttft_s=0.01, chunk_delay_s=0.004, output_tokens=8)) as base, StubServer(fast) as cand:
        plan = PLAN.replace("BASE", base.base_url).replace("CAND", cand.base_url)
        (tmp_path / "plan.toml").write_text(plan.replace("[sampling]\n", sampling))
        out = run_plan(RunOptions(plan_ref=str(tmp_path / "plan.toml"), results_dir=tmp_path / "res"), SilentProgress())
        sent = [log["body"] for log in base.received()]
    # Every timed request at its scenario's temperature, each sampled one with its own seed.
    timed = [body for body in sent if not body.get("logprobs")]
    assert sorted({body["temperature"] for body in timed}) == [0.0, 0.7]
    hot = [body for body in timed if body["temperature"] == 0.7]
    assert len({body["seed"] for body in hot}) == len(hot) == SENT
    base_group, cand_group = out.groups
    assert [s.scenario for s in base_group.scenarios] == ["general-c1", "general-c1-t0.7"]
    assert [s.temperature for s in cand_group.scenarios] == [0.0, 0.7]
    # Exact parity's pass at 0 (the baseline's, parity_pass = "auto": none), the samples at 0.7 on both sides.
    assert [(p.scenario, p.temperature, p.n_records) for p in base_group.parity_passes] == [
        ("general-c1-t0.7.parity", 0.7, 6)
    ]
    assert [(p.scenario, p.status) for p in cand_group.parity_passes] == [
        ("general-c1.parity", "not_needed"),
        ("general-c1-t0.7.parity", "completed"),
    ]
    greedy, sampled = out.evidence.entries  # type: ignore[union-attr]
    assert (greedy.temperature, greedy.evidence.quality_check) == (0.0, "exact_output")
    assert greedy.parity is not None and greedy.parity.verdict.value == "pass"
    assert (sampled.temperature, sampled.evidence.quality_check) == (0.7, "output_distribution")
    assert sampled.sampled_parity is not None and sampled.sampled_parity.samples_per_side == (6, 6)
    handoff = out.handoff
    assert handoff is not None and [(s.scenario, s.temperature) for s in handoff.scenarios] == [
        ("general-c1", 0.0),
        ("general-c1-t0.7", 0.7),
    ]
    assert "each scenario's decision holds at its own temperature only" in handoff.sampling
    assert verify_run(out.layout.root).ok
