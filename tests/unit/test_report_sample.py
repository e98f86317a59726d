"""A complete, small results directory built from the real result models, for the report tests.

`build_run` writes what `specselect run` writes for: a target-only baseline, a completed n-gram candidate (or a
proposal-length sweep of them), a candidate refused at admission and a candidate whose server failed to start,
measured at one or more concurrency levels, with raw records. Evidence and decisions come from the core's own
functions, so the documents are the ones the runner would produce.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from test_report_sample_docs import (
    SAMPLING_KEY,
    SNAPSHOT,
    THRESHOLDS,
    WORKLOAD,
    admission_doc,
    handoff_doc,
    preflight_doc,
)

from specselect._artifacts.layout import RunLayout
from specselect._common.fileio import atomic_write_model, sha256_file
from specselect._core.decision import SpeedupInterval, decide, summarize_verdict
from specselect._core.pairing import SideMetrics, build_pair_evidence
from specselect._core.status import RunStatus
from specselect._evidence.parity import scenario_parity
from specselect._evidence.pipeline import scenario_name
from specselect._evidence.sweeps import SweepPoint, choose_length
from specselect._measure.metrics import summarize
from specselect.records.evidence.prediction import SpeedupPrediction
from specselect.records.evidence.result import EvidencePolicy, ScenarioEvidence
from specselect.records.evidence.stats import BootstrapPolicy, RatioEstimate
from specselect.records.evidence.sweeps import LengthSweep, SweepAnalysis
from specselect.records.group import GroupResult, ScenarioRun
from specselect.records.measurement import CacheSaltPolicy, LoadShape, RequestRecord, SamplingParams, ScenarioSpec
from specselect.records.memory import PeakMemory
from specselect.records.results import EvidenceFile, Manifest, ManifestGroup
from specselect.records.server import LaunchRecord
from specselect.records.telemetry import SpecTelemetry

ITEMS = ("copy-01", "copy-02", "copy-03")


@dataclass(frozen=True)
class Cand:
    """A candidate that completes: its name, proposal length and how much faster it decodes."""

    name: str
    k: int = 4
    speed: float = 1.6


def _records(scenario: str, speed: float) -> list[RequestRecord]:
    out = []
    t = 0.0
    for repeat in (-1, 0, 1):
        for n, item in enumerate(ITEMS):
            ttft = 0.05 + 0.01 * n + 0.002 * repeat
            decode = (0.6 + 0.1 * n + 0.01 * repeat) / speed
            out.append(
                RequestRecord(
                    request_id=f"{scenario}-{item}-{repeat}",
                    item_id=item,
                    scenario=scenario,
                    repeat=repeat,
                    warmup=repeat < 0,
                    send_time_s=t,
                    first_token_time_s=t + ttft,
                    chunk_times_s=[t + ttft, t + ttft + decode],
                    chunk_tokens=[1, 19],
                    end_time_s=t + ttft + decode,
                    prompt_tokens=30,
                    completion_tokens=20,
                    output_text=f"output of {item}",
                    output_token_ids=[n, 1, 2, 3],
                    finish_reason="length",
                )
            )
            t += ttft + decode + 0.01
    return out


def _scenario_run(layout: RunLayout, group: str, concurrency: int, speed: float, spec: bool) -> ScenarioRun:
    scen = scenario_name("copy", concurrency)
    records = _records(scen, speed)
    path = layout.records(group, scen)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.model_dump_json() + "\n" for r in records))
    measured = [r for r in records if not r.warmup]
    summary = summarize(
        records,
        ScenarioSpec(
            scenario=scen,
            concurrency=concurrency,
            load=LoadShape(),
            warmup=len(ITEMS),
            repeats=2,
            first_repeat=0,
            seed=0,
            cache_salt_policy=CacheSaltPolicy.FRESH_SERVER,
            sampling=SamplingParams(max_tokens=32),
        ),
        api="chat",
        started_at="2026-01-01T00:00:00+00:00",
        clock_origin_s=0.0,
        phase_start_s=measured[0].send_time_s,
        phase_end_s=measured[-1].end_time_s,
    )
    telemetry = None
    if spec:
        telemetry = SpecTelemetry(
            source="both",
            drafts=60,
            draft_tokens=240,
            accepted_tokens=130,
            per_position_accepted=(50, 40, 25, 15),
            acceptance_rate=130 / 240,
            mean_acceptance_length=1 + 130 / 60,
            per_position_rates=(50 / 60, 40 / 60, 25 / 60, 15 / 60),
        )
    else:
        telemetry = SpecTelemetry(source="not_exported")
    return ScenarioRun(
        scenario=scen,
        workload="copy",
        workload_identity=WORKLOAD,
        concurrency=concurrency,
        status="completed",
        summary=summary,
        telemetry=telemetry,
        peak_memory=PeakMemory(mb=5000.0 + 150 * spec, source="process_tree_rss", n_samples=10, interval_s=0.2),
        records_path=layout.rel(path),
        records_sha256=sha256_file(path),
        n_records=len(records),
    )


def _launch(group: str, k: int | None) -> LaunchRecord:
    command = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/tiny", "--port", "8000"]
    spec = None if k is None else {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4}
    if spec is not None:
        command += ["--speculative-config", json.dumps(spec)]
    return LaunchRecord(
        command=tuple(command),
        speculative_config=spec,
        served_model="tiny",
        base_url="http://127.0.0.1:8000",
        startup_s=30.0 if group != "g9_broken" else None,
    )


def _side(role: str, run: ScenarioRun, spec: bool) -> SideMetrics:
    assert run.summary is not None and run.peak_memory is not None
    return SideMetrics.model_validate(
        {
            "role": role,
            "run_status": RunStatus.COMPLETED,
            "target_snapshot": SNAPSHOT,
            "workload_key": WORKLOAD.key,
            "sampling_key": SAMPLING_KEY,
            "execution_path": "speculative" if spec else "target_only",
            "throughput_tokens_per_s": run.summary.output_throughput_tok_s,
            "ttft_p95_ms": run.summary.ttft_ms.p95,
            "e2e_p95_ms": run.summary.e2e_ms.p95,
            "peak_memory_mb": run.peak_memory.mb,
            "quality_ok": True,
            "mechanism_active": True if spec else None,
        }
    )


def _entry(layout: RunLayout, base: GroupResult, cand: GroupResult, concurrency: int) -> ScenarioEvidence:
    scen = scenario_name("copy", concurrency)
    b_run = next((s for s in base.scenarios if s.scenario == scen), None)
    c_run = next((s for s in cand.scenarios if s.scenario == scen), None)
    common = {"candidate": cand.group, "family": cand.family, "scenario": scen, "workload": "copy"}
    common |= {"concurrency": concurrency, "track": base.group}
    if b_run is None or c_run is None:
        evidence = build_pair_evidence(
            SideMetrics(role="baseline", run_status=base.run_status),
            SideMetrics(role="candidate", run_status=cand.run_status),
        )
        return ScenarioEvidence(**common, evidence=evidence, decision=decide(evidence, THRESHOLDS))
    evidence = build_pair_evidence(_side("baseline", b_run, False), _side("candidate", c_run, True))
    point = evidence.throughput_speedup or 1.0
    interval = SpeedupInterval(
        low=point * 0.93, high=point * 1.07, level=0.95, method="paired_rounds_t", df=4.0, launch_variance_included=True
    )
    outputs = {(r.item_id, r.repeat): r.output_token_ids for r in _records(scen, 1.0) if not r.warmup}
    parity = scenario_parity(outputs, dict(outputs))
    prediction = SpeedupPrediction(
        rate_kind="cumulative",
        per_position_rates=c_run.telemetry.per_position_rates if c_run.telemetry else None,
        expected_tokens_per_step=3.2,
        step_cost=None,
        predicted_decode_speedup=point * 1.1,
        measured_decode_speedup=point * 1.02,
        gap=0.1,
        relative_gap=0.05,
    )
    return ScenarioEvidence(
        **common,
        evidence=evidence,
        decision=decide(evidence, THRESHOLDS, interval),
        parity=parity,
        telemetry=c_run.telemetry,
        prediction=prediction,
    )


def _length_sweeps(candidates: tuple[Cand, ...], concurrencies: tuple[int, ...]) -> SweepAnalysis:
    """Several completed candidates are one proposal-length sweep (the plan entry g1_ngram), chosen per level."""
    if len({c.k for c in candidates}) < 2:
        return SweepAnalysis()

    def point(cand: Cand, concurrency: int) -> SweepPoint:
        speedup = RatioEstimate(
            metric="throughput",
            statistic="ratio_of_means",
            point=cand.speed,
            low=cand.speed * 0.93,
            high=cand.speed * 1.07,
            level=0.95,
            n_samples=9,
            n_clusters=3,
            n_dropped=0,
            method="fixture",
            n_resamples=0,
            seed=0,
        )
        return SweepPoint(
            candidate=cand.name, workload="copy", concurrency=concurrency, proposal_length=cand.k, speedup=speedup
        )

    lengths = tuple(
        LengthSweep(
            sweep="g1_ngram",
            fixed={"prompt_lookup_max": 4},
            choice=choose_length([point(c, level) for c in candidates], policy=BootstrapPolicy()),
        )
        for level in concurrencies
    )
    return SweepAnalysis(lengths=lengths)


def _group(name: str, role: str, status: RunStatus, reason: str, **kw: object) -> GroupResult:
    return GroupResult.model_validate(
        {
            "group": name,
            "role": role,
            "family": "target_only" if role == "baseline" else kw.pop("family", "ngram"),
            "method": None if role == "baseline" else "ngram",
            "run_status": status,
            "reason": reason,
            "execution_path": "target_only" if role == "baseline" else "speculative",
            "target_snapshot": SNAPSHOT,
            "engine_version": "0.32.0+cpu",
            **kw,
        }
    )


def build_run(
    root: Path,
    *,
    candidates: tuple[Cand, ...] = (Cand("g1_ngram"),),
    concurrencies: tuple[int, ...] = (1,),
    status: str = "complete",
    refused: str = "g3_eagle3",
    target_ref: str = "builtin:tiny",
) -> RunLayout:
    """Write a complete results directory under `root` and return its layout.

    `refused` names the candidate refused at admission (any string: its file name is sanitised, as a test of
    escaping); `target_ref` is written as the model reference everywhere.
    """
    layout = RunLayout(root)
    admission = admission_doc(tuple(c.name for c in candidates), refused)
    by_name = {r.candidate: r for r in admission.results}
    groups = [
        _group(
            "g0_target_only",
            "baseline",
            RunStatus.COMPLETED,
            "measured",
            launch=_launch("g0_target_only", None),
            scenarios=tuple(_scenario_run(layout, "g0_target_only", c, 1.0, False) for c in concurrencies),
            log_path="logs/g0_target_only.log",
        )
    ]
    for cand in candidates:
        groups.append(
            _group(
                cand.name,
                "candidate",
                RunStatus.COMPLETED,
                "measured",
                admission=by_name[cand.name],
                launch=_launch(cand.name, cand.k),
                scenarios=tuple(_scenario_run(layout, cand.name, c, cand.speed, True) for c in concurrencies),
                log_path=f"logs/{cand.name}.log",
            )
        )
    groups.append(
        _group(
            refused,
            "candidate",
            RunStatus.ASSET_MISSING,
            "proposer_not_given",
            family="eagle",
            admission=by_name[refused],
            hint=f"give a proposer for {refused}",
        )
    )
    groups.append(
        _group(
            "g9_broken",
            "candidate",
            RunStatus.FAILED,
            "server_start_failed",
            admission=by_name["g9_broken"],
            launch=_launch("g9_broken", 2),
            hint="the server exited during start-up; read the log",
            log_path="logs/g9_broken.log",
            log_tail="ValueError: invalid kv cache dtype 'not-a-dtype' <b>",
        )
    )
    entries = [_entry(layout, groups[0], g, c) for g in groups[1:] for c in concurrencies]
    verdicts = {
        g.group: summarize_verdict({e.scenario: e.decision for e in entries if e.candidate == g.group})
        for g in groups[1:]
    }
    evidence = EvidenceFile(
        policy=EvidencePolicy(
            thresholds=THRESHOLDS, bootstrap=BootstrapPolicy(), parity_unit="tokens", rule="contract s5"
        ),
        entries=tuple(entries),
        verdicts=verdicts,
        sweeps=_length_sweeps(candidates, concurrencies),
    )
    files: dict[str, str] = {}

    def write(path: Path, doc: object) -> None:
        atomic_write_model(path, doc)  # type: ignore[arg-type]
        files[layout.rel(path)] = sha256_file(path)

    write(layout.preflight, preflight_doc())
    write(layout.admission, admission)
    for g in groups:
        write(_summary_path(layout, g.group), g)
        if g.log_path:
            (root / g.log_path).parent.mkdir(parents=True, exist_ok=True)
            (root / g.log_path).write_text("log\n")
    if status == "complete":
        write(layout.evidence, evidence)
        write(layout.handoff, handoff_doc(evidence, concurrencies))
    manifest = Manifest(
        label="sample",
        status=status,  # type: ignore[arg-type]
        created_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:10:00+00:00",
        command=("specselect", "run", "plan.toml", "--label", "sample"),
        plan_source="plan.toml",
        plan_hash="c" * 64,
        plan={"sampling": {"temperature": 0.0, "max_tokens": 32, "seed": 0}, "run": {"concurrency": [*concurrencies]}},
        engine_kind="vllm",
        engine_version="0.32.0+cpu",
        target_ref=target_ref,
        target_snapshot=SNAPSHOT,
        groups=tuple(
            ManifestGroup(
                name=g.group,
                role=g.role,
                family=g.family,
                run_status=g.run_status,
                reason=g.reason,
                complete=True,
                summary=layout.rel(_summary_path(layout, g.group)),
                log=g.log_path,
                records=tuple(s.records_path for s in g.scenarios if s.records_path),
            )
            for g in groups
        ),
        files=files,
    )
    atomic_write_model(layout.manifest, manifest)
    return layout


def _summary_path(layout: RunLayout, group: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in group)
    return layout.group_summary(safe)


def test_sample_run_is_a_valid_results_directory(tmp_path: Path) -> None:
    from specselect._report.data import load_report_data

    layout = build_run(tmp_path / "sample", concurrencies=(1, 2))
    data = load_report_data(layout.root)
    assert [g.group for g in data.groups] == ["g0_target_only", "g1_ngram", "g3_eagle3", "g9_broken"]
    assert data.evidence is not None and data.handoff is not None and data.notes == ()
    decisions = {(e.candidate, e.scenario): e.decision.decision.value for e in data.evidence.entries}
    assert decisions[("g1_ngram", "copy-c1")] == "accept"
    assert decisions[("g3_eagle3", "copy-c1")] == "not_evaluated"
    assert decisions[("g9_broken", "copy-c2")] == "not_evaluated"
    assert len(data.latencies[("g1_ngram", "copy-c2")].ttft_ms) == 6


def test_rounds_left_out_for_time_are_a_note_of_the_report(tmp_path: Path) -> None:
    from specselect._report.data import load_report_data
    from specselect._report.markdown import md_text, render_markdown

    layout = build_run(tmp_path / "sample")
    manifest = json.loads(layout.manifest.read_text())
    why = "round 4 left out: 501 s spent and ~100 s expected for g0_target_only exceed sequential_budget_s = 600"
    layout.manifest.write_text(json.dumps({**manifest, "sequential_stop": why}))
    data = load_report_data(layout.root)
    note = (
        f"{why}: the pairs still open are decided on the rounds that ran; raise [run] sequential_budget_s, or run "
        "on a faster host, for the next look"
    )
    assert data.notes == (note,)
    assert md_text(note) in render_markdown(data)
