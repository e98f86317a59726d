"""GPUs, MIG instances and CUDA_VISIBLE_DEVICES as specselect reads them, against a fake NVML module and
recorded nvidia-smi output (this machine has no GPU; the real NVML bindings are asked only for their no-driver
answer). Nothing is started."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from test_admission_gather import caps
from tests.fakegpu import FakeGpu, FakeMig, fake_nvml

from specselect._engines import EngineSetup
from specselect._engines.devices import (
    DeviceScan,
    device_findings,
    group_budget_mb,
    group_visible,
    parse_nvidia_smi,
    scan_devices,
    visible_devices,
    visible_setting,
)
from specselect._engines.probing import device_budget, leased_setup
from specselect._plan import load_plan
from specselect.records.capabilities import DeviceInfo, VllmCapabilities

A100 = "GPU-5f3c9d2e-8a1b-4c7d-9e0f-112233445566"
H100 = "GPU-77aa88bb-1111-2222-3333-444455556666"
MIG_BIG = "MIG-4b2f6a10-0000-5000-8000-aaaaaaaaaaaa"
MIG_SMALL = "MIG-9c1d2e3f-0000-5000-8000-bbbbbbbbbbbb"

SMI_QUERY = f"0, {A100}, NVIDIA A100-SXM4-40GB, 40960\n1, {H100}, NVIDIA H100 80GB HBM3, 81559\n"
SMI_LIST = (
    f"GPU 0: NVIDIA A100-SXM4-40GB (UUID: {A100})\n"
    f"  MIG 3g.20gb     Device  0: (UUID: {MIG_BIG})\n"
    f"  MIG 1g.5gb      Device  1: (UUID: {MIG_SMALL})\n"
    f"GPU 1: NVIDIA H100 80GB HBM3 (UUID: {H100})\n"
)
"""nvidia-smi's two outputs on a host with a MIG-partitioned A100 and a whole H100 (the formats of its docs)."""

HOST = (
    DeviceInfo(index=0, uuid=A100, name="A100", memory_mb=40960),
    DeviceInfo(uuid=MIG_BIG, name="A100 MIG 3g.20gb", memory_mb=19968, parent_uuid=A100),
    DeviceInfo(uuid=MIG_SMALL, name="A100 MIG 1g.5gb", memory_mb=4864, parent_uuid=A100),
    DeviceInfo(index=1, uuid=H100, name="H100", memory_mb=81559),
)


def test_nvidia_smi_lists_gpus_and_mig_instances_with_their_own_memory() -> None:
    found = parse_nvidia_smi(SMI_QUERY, SMI_LIST)
    assert [(d.uuid, d.memory_mb, d.parent_uuid) for d in found] == [
        (A100, 40960, None),
        (H100, 81559, None),
        (MIG_BIG, 20000, A100),  # from the profile name: nvidia-smi gives a MIG instance no memory figure
        (MIG_SMALL, 5000, A100),
    ]


def test_nvml_gives_a_mig_instance_its_own_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [
        FakeGpu(A100, total_mb=40960, migs=[FakeMig(MIG_BIG, "3g.20gb", 19968), FakeMig(MIG_SMALL, "1g.5gb", 4864)]),
        FakeGpu(H100, total_mb=81559),
    ]
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(gpus))
    scan = scan_devices()
    assert scan.source == "nvml" and scan.problem is None
    assert [(d.uuid, d.memory_mb) for d in scan.devices] == [
        (A100, 40960),
        (MIG_BIG, 19968),
        (MIG_SMALL, 4864),
        (H100, 81559),
    ]


def test_the_real_nvml_bindings_on_a_host_without_a_driver_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pynvml")
    monkeypatch.setenv("PATH", "/nonexistent")  # and no nvidia-smi either
    scan = scan_devices()
    assert scan.devices == ()
    assert scan.problem is not None
    assert "NVML could not start" in scan.problem and "nvidia-smi not found" in scan.problem
    assert "not installed" not in scan.problem  # the bindings are: what is missing is the driver's library


def test_without_the_bindings_the_scan_says_they_are_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as where nvidia-ml-py is not installed
    monkeypatch.setenv("PATH", "/nonexistent")
    scan = scan_devices()
    assert (scan.devices, scan.source) == ((), "none")
    assert scan.problem == "the NVML bindings (nvidia-ml-py) are not installed; nvidia-smi not found"


@pytest.mark.parametrize(
    ("setting", "chosen", "unknown"),
    [
        (None, [A100, H100], []),  # unset: every whole GPU
        ("1", [H100], []),
        ("1,0", [H100, A100], []),  # CUDA's order is the variable's
        ("GPU-77aa", [H100], []),  # a unique UUID prefix
        (MIG_SMALL, [MIG_SMALL], []),
        ("", [], []),  # empty hides every device
        ("0,7,1", [A100], ["7", "1"]),  # CUDA stops at the first token that names nothing
        ("GPU-", [], ["GPU-"]),  # an ambiguous prefix names nothing
    ],
)
def test_cuda_visible_devices_is_read_as_cuda_reads_it(
    setting: str | None, chosen: list[str], unknown: list[str]
) -> None:
    visible = visible_devices(HOST, setting)
    assert [d.uuid for d in visible.devices] == chosen
    assert list(visible.unknown) == unknown


def test_the_candidates_env_wins_over_the_engines_and_specselects(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert visible_setting() == "0"
    assert visible_setting({"CUDA_VISIBLE_DEVICES": "1"}) == "1"
    assert visible_setting({"CUDA_VISIBLE_DEVICES": "1"}, {"CUDA_VISIBLE_DEVICES": MIG_BIG}) == MIG_BIG
    caps = _caps(DeviceScan(HOST, "nvml"), "1")
    assert [d.uuid for d in group_visible(caps, {}).devices] == [H100]
    assert [d.uuid for d in group_visible(caps, {"CUDA_VISIBLE_DEVICES": MIG_BIG}).devices] == [MIG_BIG]


def _caps(scan: DeviceScan | None, setting: str | None) -> VllmCapabilities:
    return caps(
        engine_version="0.32.0", **device_budget(scan, setting, cuda_basis="gpu", cpu_basis="cpu").caps_fields()
    )


def test_the_budget_of_a_mig_instance_is_the_instances_memory() -> None:
    caps = _caps(DeviceScan(HOST, "nvml"), MIG_BIG)
    assert (caps.device_kind, caps.memory_budget_mb) == ("cuda", 19968)
    assert caps.cuda_visible_devices == MIG_BIG and len(caps.host_devices) == 4


def test_a_candidate_on_a_mig_instance_gets_the_instances_budget_not_the_engines() -> None:
    caps = _caps(DeviceScan(HOST, "nvml"), "1")  # the engine on the H100
    assert group_budget_mb(caps, {}) == caps.memory_budget_mb == 81559
    assert group_budget_mb(caps, {"CUDA_VISIBLE_DEVICES": MIG_BIG}) == 19968
    on_cpu = _caps(None, None)
    assert group_budget_mb(on_cpu, {"CUDA_VISIBLE_DEVICES": MIG_BIG}) == on_cpu.memory_budget_mb


def _plan(tmp_path: Path, engine_env: str = "", candidate_env: str = "") -> Any:
    (tmp_path / "w.jsonl").write_text('{"id": "a", "messages": [{"role": "user", "content": "hi"}]}\n')
    (tmp_path / "plan.toml").write_text(
        f"""
schema_version = 1
label = "gpu"
[target]
model = "org/model"
[engine]
kind = "vllm"
python = "/envs/vllm/bin/python"
[engine.env]
{engine_env}
[workloads]
w = "w.jsonl"
[[candidates]]
name = "ng"
family = "ngram"
num_speculative_tokens = 2
env = {{ {candidate_env} }}
"""
    )
    return load_plan(str(tmp_path / "plan.toml")).plan


def test_a_gpu_plan_without_a_driver_stops_with_the_reason(tmp_path: Path) -> None:
    no_driver = _caps(
        DeviceScan((), "none", "the NVML bindings (nvidia-ml-py) are not installed; nvidia-smi not found"), "0"
    )
    plan = _plan(tmp_path, engine_env='CUDA_VISIBLE_DEVICES = "0"')
    [(severity, code, message)] = device_findings(plan, no_driver)
    assert (severity, code) == ("error", "gpu_requested_without_driver")
    assert "CUDA_VISIBLE_DEVICES=0 in [engine.env]" in message and "nvidia-smi not found" in message
    # The same plan on a host whose driver answers: no finding; a device it does not have: an error naming it.
    assert device_findings(plan, _caps(DeviceScan(HOST, "nvml"), "0")) == []
    wrong = _plan(tmp_path, candidate_env='CUDA_VISIBLE_DEVICES = "GPU-dead"')
    [(severity, code, message)] = device_findings(wrong, _caps(DeviceScan(HOST, "nvml"), None))
    assert (severity, code) == ("error", "cuda_device_unknown") and "candidates.ng.env" in message
    # A CPU build ignores the variable (a warning), and GPUs that only nvidia-smi sees cannot be measured.
    cpu = device_findings(plan, _caps(None, "0"))
    assert [c for _, c, _ in cpu] == ["cuda_devices_ignored"]
    smi_only = _caps(DeviceScan(HOST, "nvidia-smi", "the NVML bindings (nvidia-ml-py) are not installed"), "0")
    [(severity, code, message)] = device_findings(plan, smi_only)
    assert (severity, code) == ("error", "nvml_unusable") and "pip install 'specselect[gpu]'" in message


def test_a_cluster_lease_moves_a_groups_devices_and_budget_to_the_leased_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [FakeGpu(A100, "NVIDIA A100-SXM4-40GB", 40960), FakeGpu(H100, "NVIDIA H100 80GB HBM3", 81559)]
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(gpus))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    driver = EngineSetup(kind="vllm", caps=_caps(scan_devices(), None))  # both GPUs, the smaller one's budget
    assert [d.uuid for d in driver.caps.devices] == [A100, H100] and driver.caps.memory_budget_mb == 40960
    assert leased_setup(driver) == driver  # no lease: unchanged
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # what Ray sets for a task holding the second GPU
    node = leased_setup(driver).caps
    assert [d.uuid for d in node.devices] == [H100] and node.memory_budget_mb == 81559
    assert node.cuda_visible_devices == "1"
    on_cpu = EngineSetup(kind="vllm", caps=_caps(None, None))
    assert leased_setup(on_cpu) == on_cpu
