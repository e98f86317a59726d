"""A whole run on a (fake) GPU that another process shares: every round is left out of the pairs, nothing is
decided on it, and the closing lines name the process. The same run records each launch's KV capacity and the
draft model's cost against the baseline.

SGLang needs CUDA and this machine has no GPU, so the server is the stand-in SGLang (data/sglang_fake_launch_server.py,
its KV pool a figure of the fake, not a measurement) and the device the fake NVML (tests/fakegpu.py). The
"foreign" process is this test's parent: a real process of this host that is neither the server nor specselect.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import sglang_fake_install as FAKE
from test_assets_files import tiny_llama
from tests.fakegpu import FakeGpu, FakeProcess, fake_nvml

from specselect._report.trust import trust_lines
from specselect._runner.progress import SilentProgress
from specselect._runner.run import RunOptions, RunOutcome, run_plan

PLAN = """
schema_version = 1
label = "busy-device"
[target]
model = "MODEL"
[engine]
kind = "sglang"
python = "ENGINE_PY"
startup_timeout_s = 60.0
env = { PYTHONPATH = "SITE" }
[sampling]
max_tokens = 8
[run]
repeats = 1
rounds = 1
warmup_requests = 0
parity_pass = "off"
[workloads]
general = { source = "builtin:general", items = 3, seed = 0 }
[capacity]
required_concurrency = 48
request_tokens = 8192
[[candidates]]
name = "g1_draft"
family = "draft_model"
num_speculative_tokens = 3
proposer = "PROPOSER"
"""


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, neighbours: list[FakeProcess]) -> RunOutcome:
    gpu = FakeGpu("GPU-0h100", "NVIDIA H100 80GB HBM3", 81559, processes=neighbours)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([gpu]))
    site = tmp_path / "site"
    FAKE.install(site, "registry")
    text = (
        PLAN.replace("MODEL", str(tiny_llama(tmp_path / "target")))
        .replace("ENGINE_PY", sys.executable)
        .replace("SITE", str(site))
        .replace("PROPOSER", str(tiny_llama(tmp_path / "draft", layers=1)))
    )
    (tmp_path / "plan.toml").write_text(text)
    opts = RunOptions(plan_ref=str(tmp_path / "plan.toml"), results_dir=tmp_path / "res", home=tmp_path / "home")
    return run_plan(opts, SilentProgress())


def test_a_process_sharing_the_device_leaves_every_round_out_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _run(tmp_path, monkeypatch, [FakeProcess(os.getppid(), 1200)])
    groups = out.groups
    assert all(s.device_load is not None and s.device_load.busy for g in groups for s in g.scenarios)
    entry = out.evidence.entries[0]
    assert "uncontaminated_measurement" in entry.evidence.missing_evidence
    assert entry.decision.decision.value != "accept"
    lines = trust_lines(out.evidence, None)
    assert any(
        "no trusted round" in line
        and f"device busy: another process shared the server's device (pid {os.getppid()}" in line
        for line in lines
    )


def test_a_quiet_device_is_trusted_and_the_drafts_kv_cost_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _run(tmp_path, monkeypatch, [])
    base, draft = out.groups
    assert all(s.device_load is not None and not s.device_load.busy for g in (base, draft) for s in g.scenarios)
    assert base.capacity.kv.tokens == 412_160 and draft.capacity.kv.tokens == 360_640
    assert draft.scenarios[0].kv_load.peak_usage is not None
    cost = out.evidence.capacity[0]
    assert (cost.tokens_lost, round(cost.loss_share, 3)) == (51_520, 0.125)
    # 412,160 / 8,192 = 50.3 requests at once for the baseline; 360,640 / 8,192 = 44.02 < 48 for the draft.
    decision = out.evidence.entries[0].decision
    assert (decision.decision.value, decision.reason) == ("reject", "kv_capacity_short")
    assert (
        "holds 44.02 concurrent requests of 8,192 tokens (360,640 KV tokens); the plan requires 48" in decision.detail
    )
    assert out.handoff.capacity == out.evidence.capacity
