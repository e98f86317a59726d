"""A whole `specselect run` as on a GPU host, against fakes for what this machine lacks (ONLY fakes: no GPU here).

The engine is the stand-in vLLM of tests/component/test_fault_harness.py, installed as a GPU build (no `+cpu`), and
the GPU is tests/fakegpu.py's NVML module: an H100 whose used memory reads 70,000 MiB and an A100 split into
MIG instances, the larger of which reads 15,000 MiB. The plan puts the engine on the H100 through
`[engine.env]` and one candidate on the MIG instance through its own `env`. What must hold:
- each group's summary carries the per-device peaks of the device its server used, and host RSS apart;
- the memory check of the decision compares the device figure, and says so (a 60,000 MiB budget: the H100
  candidate fails it although its server's RSS is a few MB; the MIG candidate passes);
- the admission's budget of the MIG candidate is the instance's memory, not the card's, and so is the budget its
  decision compares with when the plan sets none;
- on a host whose driver does not answer, the same plan stops in preflight with the reason, starting nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "component"))  # the stand-in vLLM (test support)
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.fakegpu
from test_fault_harness import FakeRun, assert_no_orphans, make_fake_vllm, ngram
from tests.fakegpu import FakeGpu, FakeMig, fake_nvml

pytestmark = pytest.mark.integration

H100 = "GPU-77aa88bb-1111-2222-3333-444455556666"
A100 = "GPU-5f3c9d2e-8a1b-4c7d-9e0f-112233445566"
MIG_BIG = "MIG-4b2f6a10-0000-5000-8000-aaaaaaaaaaaa"
MIG_SMALL = "MIG-9c1d2e3f-0000-5000-8000-bbbbbbbbbbbb"
GPUS = [
    FakeGpu(H100, "NVIDIA H100 80GB HBM3", 81559, used_mb=(70000,)),
    FakeGpu(
        A100,
        "NVIDIA A100-SXM4-40GB",
        40960,
        used_mb=(15500,),
        migs=[FakeMig(MIG_BIG, "3g.20gb", 19968, used_mb=(15000,)), FakeMig(MIG_SMALL, "1g.5gb", 4864)],
    ),
]


def _gpu_build(python: Path) -> Path:
    """Turn the stand-in's distribution record into a GPU build's (vLLM 0.32.0 without `+cpu`)."""
    site = next((python.parents[1] / "lib").glob("python3*/site-packages"))
    cpu = site / "vllm-0.32.0+cpu.dist-info"
    gpu = site / "vllm-0.32.0.dist-info"
    if cpu.exists():
        cpu.rename(gpu)
        (gpu / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n")
    return python


@pytest.fixture(name="gpu_run")
def gpu_run_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRun]:
    python = _gpu_build(make_fake_vllm(tmp_path / "fake-vllm"))
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(GPUS))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    (tmp_path / "work").mkdir()
    run = FakeRun(tmp_path / "work", python, tmp_path / "home")
    yield run
    assert_no_orphans(python.parents[1], run.results)


def _plan(run: FakeRun, *, budget_mb: float | None = 60000.0) -> None:
    on_mig = {**ngram("g2_mig"), "env": {"CUDA_VISIBLE_DEVICES": MIG_BIG}}
    run.plan(
        candidates=[ngram("g1_h100"), on_mig],
        engine={"env": {"CUDA_VISIBLE_DEVICES": H100}},
        run={"concurrency": [1]},
    )
    plan = run.dir / "plan.toml"
    # Other work on this shared machine is no part of what is tested here: host load may not make pairs incomplete.
    budget = f"max_peak_memory_mb = {budget_mb}\n" if budget_mb is not None else ""
    limits = f"\n[thresholds]\n{budget}max_host_foreign_cpu_share = 1.0\n"
    plan.write_text(plan.read_text() + limits)


def _doc(run: FakeRun, rel: str) -> Any:
    return json.loads((run.results / "faults" / rel).read_text())


def test_group_summaries_carry_device_peaks_and_the_gate_compares_device_memory(gpu_run: FakeRun) -> None:
    _plan(gpu_run)
    done = gpu_run.call("run", "plan.toml", "--json")
    assert done.returncode == 0, done.stderr[-3000:]

    preflight = _doc(gpu_run, "preflight.json")["engine"]
    assert (preflight["device_kind"], preflight["device_source"]) == ("cuda", "nvml")
    assert [d["uuid"] for d in preflight["devices"]] == [H100]  # [engine.env] chose the H100
    assert preflight["memory_budget_mb"] == 81559
    admission = {r["candidate"]: r for r in _doc(gpu_run, "admission.json")["results"]}
    # vLLM's default share (0.92) of the device the group's server uses: the MIG instance's memory, not the card's.
    utilization = admission["g2_mig"]["facts"]["capacity.memory_utilization"]
    assert admission["g2_mig"]["facts"]["capacity.budget_mb"] == pytest.approx(19968 * utilization, abs=0.1)
    assert admission["g1_h100"]["facts"]["capacity.budget_mb"] == pytest.approx(81559 * utilization, abs=0.1)

    expected = {"g0_target_only": H100, "g1_h100": H100, "g2_mig": MIG_BIG}
    peaks = {"g0_target_only": 70000, "g1_h100": 70000, "g2_mig": 15000}
    for group, device in expected.items():
        (scenario,) = _doc(gpu_run, f"groups/{group}.json")["scenarios"]
        memory = scenario["peak_memory"]
        assert memory["source"] == "nvml"
        assert memory["devices"] == [{"device": device, "peak_mb": peaks[group]}]
        assert memory["mb"] == peaks[group]
        assert 0 < memory["host_rss_mb"] < 1000  # the stand-in server's RSS, kept as its own figure

    decisions = {e["candidate"]: e["decision"] for e in _doc(gpu_run, "evidence.json")["entries"]}
    assert decisions["g1_h100"]["checks"]["max_peak_memory_mb"] is False
    assert "max_peak_memory_mb" in decisions["g1_h100"]["failed_checks"]
    assert decisions["g2_mig"]["checks"]["max_peak_memory_mb"] is True
    # Each decision says which figure it compared: the device's, not the host RSS next to it.
    assert {name: d["memory_figure"] for name, d in decisions.items()} == {
        "g1_h100": "device_memory",
        "g2_mig": "device_memory",
    }
    assert "max_peak_memory_mb: 70000 > 60000 (device_memory)" in decisions["g1_h100"]["detail"]


def test_without_a_plan_budget_each_candidate_is_held_to_the_memory_of_its_own_device(gpu_run: FakeRun) -> None:
    _plan(gpu_run, budget_mb=None)
    done = gpu_run.call("run", "plan.toml", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    decisions = {e["candidate"]: e["decision"] for e in _doc(gpu_run, "evidence.json")["entries"]}
    # The MIG candidate's budget is the 3g.20gb instance's memory, not the H100's the engine defaults to.
    assert decisions["g2_mig"]["policy"]["max_peak_memory_mb"] == 19968
    assert decisions["g1_h100"]["policy"]["max_peak_memory_mb"] == 81559
    assert decisions["g2_mig"]["checks"]["max_peak_memory_mb"] is True  # 15,000 of 19,968 MiB used


def test_a_gpu_plan_on_a_host_without_a_driver_stops_in_preflight(
    gpu_run: FakeRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([], init_error="Driver Not Loaded"))
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # python, but no nvidia-smi
    _plan(gpu_run)
    done = gpu_run.call("run", "plan.toml")
    assert done.returncode != 0
    assert "gpu_requested_without_driver" in done.stderr
    assert f"CUDA_VISIBLE_DEVICES={H100} in [engine.env]" in done.stderr
    assert "Driver Not Loaded" in done.stderr
    assert not (gpu_run.results / "faults" / "groups").exists()  # nothing was started
