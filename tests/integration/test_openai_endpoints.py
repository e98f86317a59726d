"""kind = "openai" end to end against two real vLLM CPU servers the test starts itself (a target-only baseline
and an n-gram endpoint), then the same endpoints while a background loop sends other traffic to the baseline:
specselect must notice and refuse to trust that measurement."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest
from _reduced_plan import COPY_LIST, specselect, write_workload

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document, load_records
from specselect._engines.base import RunningServer
from specselect._engines.http import local_request
from specselect._engines.vllm.engine import VllmEngine
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff
from specselect.records.results import EvidenceFile, Manifest

pytestmark = pytest.mark.integration

SERVED = "smollm2-135m"
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
WORKLOAD = [
    {"id": "copy-list", "messages": [{"role": "user", "content": f"Repeat this list exactly: {COPY_LIST}"}]},
    {
        "id": "copy-csv",
        "messages": [{"role": "user", "content": "Repeat these rows exactly:\nid,name\n1,Ada\n2,Bob\n3,Cy\n4,Di\n"}],
    },
    {
        "id": "copy-code",
        "messages": [{"role": "user", "content": "Copy exactly:\ndef add(a, b):\n    return a + b\n"}],
    },
]

PLAN = """
schema_version = 1
label = "endpoints"

[target]
model = "smollm2-135m"

[engine]
kind = "openai"

[sampling]
max_tokens = 32

[run]
concurrency = [1]
warmup_requests = 1
repeats = {repeats}
rounds = 1
parity_pass = "{parity}"

[workloads]
copy = "copy.jsonl"

[[candidates]]
name = "g0_target_only"
endpoint = {{ base_url = "{base}", model = "{served}", peak_memory_mb = 4500.0 }}

[[candidates]]
name = "g1_ngram"
family = "ngram"
num_speculative_tokens = 4
endpoint = {{ base_url = "{cand}/v1", model = "{served}", peak_memory_mb = 4600.0 }}
"""


@pytest.fixture(scope="module")
def endpoints(cpu_launch_spec, vllm_engine: VllmEngine) -> Iterator[tuple[RunningServer, RunningServer]]:  # type: ignore[no-untyped-def]
    """Both servers at once (1 GiB KV cache each), started in parallel; always stopped."""
    small = {"VLLM_CPU_KVCACHE_SPACE": "1"}
    specs = [
        cpu_launch_spec("oa_base", max_model_len=1024, env=small),
        cpu_launch_spec(
            "oa_ngram", max_model_len=1024, env=small, speculative_config=NGRAM, per_request_spec_metrics=True
        ),
    ]
    with ExitStack() as stack:
        procs = [vllm_engine.launch(spec) for spec in specs]
        for proc in procs:
            stack.push(proc.__exit__)
        with ThreadPoolExecutor(max_workers=2) as pool:
            base, cand = pool.map(lambda p: p.__enter__(), procs)
        yield base, cand


def _write_plan(tmp: Path, base: RunningServer, cand: RunningServer, *, repeats: int, parity: str) -> None:
    write_workload(tmp / "copy.jsonl", WORKLOAD)
    text = PLAN.format(base=base.base_url, cand=cand.base_url, served=SERVED, repeats=repeats, parity=parity)
    (tmp / "plan.toml").write_text(text)


def test_openai_endpoints_are_measured_without_launching(
    endpoints: tuple[RunningServer, RunningServer], tmp_path: Path
) -> None:
    base, cand = endpoints
    # "full": the baseline also reruns every item with logprobs, so the real engine's logprob records are checked.
    _write_plan(tmp_path, base, cand, repeats=2, parity="full")
    done = specselect("run", "plan.toml", "--results-dir", "results", "--json", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    layout = RunLayout(tmp_path / "results" / "endpoints")
    manifest = load_document(layout.manifest, Manifest)
    assert manifest.engine_kind == "openai" and manifest.engine_version and manifest.engine_version.startswith("0.32.0")
    assert {g.name: g.run_status.value for g in manifest.groups} == {
        "g0_target_only": "completed",
        "g1_ngram": "completed",
    }
    assert not layout.logs_dir.exists()  # nothing was launched

    groups = {name: load_document(layout.group_summary(name), GroupResult) for name in ("g0_target_only", "g1_ngram")}
    for g in groups.values():
        assert g.launch is None and g.endpoint is not None and g.endpoint.flavor == "vllm"
        assert g.target_snapshot == f"endpoint:root={base_root(g)};max_model_len=1024"
        (scen,) = g.scenarios
        assert scen.traffic is not None and scen.traffic.status == "clean", scen.traffic
        assert scen.traffic.requests_finished == scen.traffic.requests_sent == 7
        assert scen.peak_memory_source == "declared"
    (base_parity,) = groups["g0_target_only"].parity_passes
    assert (base_parity.status, base_parity.n_ok, base_parity.n_with_logprobs) == ("completed", 3, 3), base_parity
    # float32: the n-gram endpoint reproduces every baseline output, so its pass has nothing to classify.
    (cand_parity,) = groups["g1_ngram"].parity_passes
    assert cand_parity.status == "not_needed", cand_parity
    assert groups["g0_target_only"].target_snapshot == groups["g1_ngram"].target_snapshot
    base_pass = load_records(layout, "g0_target_only", "copy-c1.parity")
    assert all(r.logprobs and len(r.logprobs[0].top) == 2 for r in base_pass)
    assert all(len(r.logprobs or []) == len(r.output_token_ids or []) for r in base_pass)

    telemetry = groups["g1_ngram"].scenarios[0].telemetry
    assert telemetry is not None and telemetry.source == "both" and (telemetry.accepted_tokens or 0) > 0
    assert groups["g0_target_only"].scenarios[0].telemetry.source == "not_exported"  # type: ignore[union-attr]

    evidence = load_document(layout.evidence, EvidenceFile)
    (entry,) = evidence.entries
    assert entry.evidence.evidence_status.value == "comparable", entry.evidence
    assert entry.parity is not None and entry.parity.verdict.value == "pass"
    assert entry.parity_pass is None
    assert evidence.policy.parity_pass is not None and evidence.policy.parity_pass.baseline_pass
    assert evidence.policy.contamination_rule
    handoff = load_document(layout.handoff, Handoff)
    assert [c.candidate for c in handoff.scenarios[0].candidates] == ["g1_ngram"]


def base_root(group: GroupResult) -> str:
    assert group.endpoint is not None and group.endpoint.identity is not None
    return str(group.endpoint.identity.root)


def test_other_traffic_on_an_endpoint_is_detected_and_the_pair_not_trusted(
    endpoints: tuple[RunningServer, RunningServer], tmp_path: Path
) -> None:
    base, cand = endpoints
    _write_plan(tmp_path, base, cand, repeats=1, parity="off")
    stop = threading.Event()
    sent: list[int] = []
    baseline_done = RunLayout(tmp_path / "results" / "busy").group_summary("g0_target_only")

    # The other client stops once the baseline group is written: the candidate is measured quietly, and on 2 cores
    # two servers busy at once starve the idle one's first answer past the request time-out.
    def other_client() -> None:
        body = json.dumps({"model": SERVED, "prompt": "Hello", "max_tokens": 4, "temperature": 0}).encode()
        while not stop.is_set() and not baseline_done.exists():
            status, _ = local_request(
                "POST",
                f"{base.base_url}/v1/completions",
                body=body,
                headers={"Content-Type": "application/json"},
                timeout_s=60,
            )
            sent.append(status)
            stop.wait(0.2)

    loop = threading.Thread(target=other_client, daemon=True)
    loop.start()
    try:
        done = specselect("run", "plan.toml", "--results-dir", "results", "--label", "busy", cwd=tmp_path, timeout=600)
    finally:
        stop.set()
        loop.join(timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sent and all(s == 200 for s in sent)
    layout = RunLayout(tmp_path / "results" / "busy")
    busy = load_document(layout.group_summary("g0_target_only"), GroupResult).scenarios[0].traffic
    quiet = load_document(layout.group_summary("g1_ngram"), GroupResult).scenarios[0].traffic
    assert busy is not None and busy.status == "contaminated", busy
    assert "other traffic on the endpoint" in busy.reason
    assert quiet is not None and quiet.status == "clean", quiet
    assert "other traffic" in done.stderr  # warned while running
    (entry,) = load_document(layout.evidence, EvidenceFile).entries
    assert entry.evidence.evidence_status.value == "incomplete"
    assert "uncontaminated_measurement" in entry.evidence.missing_evidence
    assert entry.contamination and entry.contamination[0].startswith("baseline: other traffic")
    assert entry.decision.decision.value == "tune"
    assert not load_document(layout.handoff, Handoff).scenarios[0].candidates
