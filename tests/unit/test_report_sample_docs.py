"""Identity documents of the report tests' sample run: preflight, admission and hand-off (see test_report_sample)."""

from __future__ import annotations

from pathlib import Path

from specselect._core.decision import Thresholds
from specselect._core.gates import AdmissionInput, GateCheck, admit
from specselect._core.status import Decision
from specselect._evidence.pipeline import scenario_name
from specselect.records.assets import ResolvedModel
from specselect.records.handoff import Handoff, HandoffCandidate, HandoffScenario
from specselect.records.host import HostInfo
from specselect.records.measurement import SamplingParams
from specselect.records.results import AdmissionFile, EvidenceFile, PreflightFile
from specselect.records.workloads import WorkloadIdentity

SNAPSHOT = "a" * 64
SAMPLING_KEY = SamplingParams(max_tokens=32).key
WORKLOAD = WorkloadIdentity(name="copy", version="1", sha256="b" * 64, item_count=3, source="copy.jsonl")
THRESHOLDS = Thresholds(min_throughput_speedup=1.1)


def admission_doc(names: tuple[str, ...], refused: str) -> AdmissionFile:
    ok = GateCheck.ok
    inputs = {
        c: AdmissionInput(
            enabled=True,
            backend=ok(method="ngram"),
            asset=ok(asset_kind="none"),
            compatibility=ok(),
            capacity=ok(estimated_memory_mb=5200.0, budget_mb=20000.0),
        )
        for c in names
    }
    inputs[refused] = AdmissionInput(
        enabled=True,
        backend=ok(method="eagle3"),
        asset=GateCheck.fail("proposer_not_given", asset_kind="paired_checkpoint"),
        compatibility=ok(),
        capacity=ok(),
    )
    inputs["g9_broken"] = inputs[names[0]]
    families = {refused: "eagle3"}
    results = tuple(admit(name, families.get(name, "ngram"), inp) for name, inp in inputs.items())
    return AdmissionFile(results=results, inputs=inputs)


def handoff_doc(evidence: EvidenceFile, concurrencies: tuple[int, ...]) -> Handoff:
    scenarios = []
    for c in concurrencies:
        scen = scenario_name("copy", c)
        chosen = [
            HandoffCandidate(
                candidate=e.candidate,
                family=e.family,
                method="ngram",
                decision=e.decision.decision.value,
                reason=e.decision.reason,
                confidence=e.decision.confidence.status,
                throughput_speedup=e.evidence.throughput_speedup,
                speedup_low=e.decision.confidence.interval.low if e.decision.confidence.interval else None,
                speedup_high=e.decision.confidence.interval.high if e.decision.confidence.interval else None,
                ttft_ratio=e.evidence.ttft_ratio,
                e2e_p95_ratio=e.evidence.e2e_p95_ratio,
                peak_memory_mb=e.evidence.candidate_peak_memory_mb,
                parity="pass",
                acceptance_rate=None,
                mean_acceptance_length=None,
                telemetry_source="both",
                speculative_config=None,
                proposer_snapshot=None,
            )
            for e in evidence.entries
            if e.scenario == scen and e.evidence.throughput_speedup is not None
        ]
        accepted = [c for c in chosen if c.decision == Decision.ACCEPT.value]
        best = max(accepted, key=lambda c: c.speedup_low or 0.0, default=None)
        scenarios.append(
            HandoffScenario(
                scenario=scen,
                workload="copy",
                concurrency=c,
                candidates=tuple(chosen),
                recommended=best.candidate if best else None,
            )
        )
    return Handoff(
        label="sample",
        plan_hash="c" * 64,
        engine_kind="vllm",
        engine_version="0.32.0+cpu",
        target_ref="builtin:tiny",
        target_snapshot=SNAPSHOT,
        rule="contract s5",
        scenarios=tuple(scenarios),
    )


def preflight_doc() -> PreflightFile:
    host = HostInfo(
        tool_version="0.1.0",
        python_version="3.11.7",
        python_executable="/usr/bin/python3",
        os="Linux Debian",
        kernel="6.1",
        machine="x86_64",
        cpu_model="Test CPU",
        logical_cpus=2,
        physical_cpus=2,
        memory_total_mb=24000.0,
        nvidia_driver=None,
    )
    target = ResolvedModel(
        ref="builtin:tiny",
        path=Path("/models/tiny"),
        snapshot=SNAPSHOT,
        source="builtin",
        config={},
        vocab_size=100,
        tokenizer_sha256=None,
        num_params=1000,
        num_params_source="config",
        weights_bytes=4000,
        has_native_mtp=False,
        architectures=("LlamaForCausalLM",),
        model_type="llama",
        num_hidden_layers=2,
        hidden_size=8,
        dtype="float32",
    )
    return PreflightFile(
        label="sample",
        plan_hash="c" * 64,
        host=host,
        engine_kind="vllm",
        engine_python="/envs/vllm/bin/python",
        engine=None,
        target=target,
        proposers={},
        workloads={"copy": WORKLOAD},
        audit=(),
        label_existed=False,
        seconds=1.0,
    )
