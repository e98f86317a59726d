"""`specselect doctor`: each check on what it was given, and whole runs of it against stand-ins for what this
machine lacks (ONLY stand-ins: no GPU, no hub here).

- The checks are pure functions of facts (devices, a probe, hub answers, free disk, a host-load sample) and are
  tested as such, each with a case where it disagrees with what it checks.
- Devices are read through the real NVML bindings (their no-driver answer is the real one here) or the fake NVML
  module of tests/fakegpu.py (devices, free memory, processes).
- The hub is a stand-in HTTP server on 127.0.0.1 (HF_ENDPOINT points at it): a public repository, a gated one
  that lets only a bearer token in, and nothing else. It lives in the unit tier like the other stand-in servers;
  one test waits for a server that never answers, with a 0.2 s deadline.
- The engine is the stand-in vLLM environment of test_fault_harness.py (a venv whose vllm the probe reads),
  installed as a GPU build so the probe reads the fake GPUs; the host-load sample is injected (no waiting).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.fakegpu import FakeGpu, FakeProcess, fake_nvml

from specselect._assets.hub_access import download_size
from specselect._cli.main import main
from specselect._engines import EngineSetup, uninstalled_environment
from specselect._engines.devices import read_device_usage
from specselect._plan import EngineConfig
from specselect._runner.doctor import DoctorProbes, run_doctor
from specselect._runner.doctor.checks import devices_check, disk_check, engine_check, host_check, hub_check
from specselect._runner.doctor.models import NeededModel
from specselect.records.capabilities import DeviceInfo
from specselect.records.doctor import DeviceUsage, GpuDevice, GpuProcess, HostSample, HubAnswer, ProcessCpu

H100 = "GPU-77aa88bb-1111-2222-3333-444455556666"
A100 = "GPU-5f3c9d2e-8a1b-4c7d-9e0f-112233445566"
QUIET = HostSample(seconds=1.0, scope_cpus=2.0, foreign_share=0.0)


# -- the checks, on facts ------------------------------------------------------------------------------------------


def cpu_setup(*, gpu_build: bool = False) -> EngineSetup:
    from test_admission_gather import caps

    source = "none" if gpu_build else "not_queried"
    version = "0.32.0" if gpu_build else "0.32.0+cpu"
    return EngineSetup(kind="vllm", caps=caps(engine_version=version, device_source=source))


def test_without_a_gpu_the_cpu_engine_is_named_as_what_will_be_used() -> None:
    usage = DeviceUsage(source="nvml", problem="NVML could not start: Driver Not Loaded")
    check = devices_check(usage, cpu_setup())
    assert check.status == "ok"
    assert check.reason.startswith("no GPU found (NVML could not start: Driver Not Loaded)")
    assert "the CPU engine (vllm 0.32.0+cpu) will be used" in check.reason


def test_without_a_gpu_a_gpu_build_of_the_engine_fails() -> None:
    check = devices_check(DeviceUsage(source="none", problem="nvidia-smi not found"), cpu_setup(gpu_build=True))
    assert check.status == "fail"
    assert "vllm 0.32.0 is a GPU build" in check.reason and "driver" in (check.fix or "")


def busy_device(pid: int) -> GpuDevice:
    process = GpuProcess(pid=pid, name="python3", used_mb=69000.0)
    return GpuDevice(
        name="NVIDIA H100 80GB HBM3", uuid=H100, index=0, total_mb=81559, free_mb=11559, processes=(process,)
    )


def test_a_process_on_a_device_that_is_not_specselects_is_flagged_but_specselects_own_is_not() -> None:
    usage = DeviceUsage(driver="550.54.15", devices=(busy_device(4242),), source="nvml")
    flagged = devices_check(usage, None)
    assert flagged.status == "warn"
    assert f"a process that is not specselect's holds a device: pid 4242 python3 on {H100}" in flagged.reason
    assert "CUDA_VISIBLE_DEVICES" in (flagged.fix or "")
    assert flagged.details == (
        f"GPU 0 NVIDIA H100 80GB HBM3 ({H100}): 81559 MB, 11559 MB free; processes: pid 4242 python3 69000 MB",
    )
    own = devices_check(usage, None, own_pids=frozenset({4242}))
    assert own.status == "ok" and own.reason == "driver 550.54.15, 1 device (nvml), none busy"


def test_a_process_on_a_device_the_engine_does_not_use_is_not_flagged() -> None:
    from test_admission_gather import caps

    other = busy_device(4242).model_copy(update={"uuid": A100, "index": 1, "name": "NVIDIA A100-SXM4-40GB"})
    idle = busy_device(1).model_copy(update={"processes": (), "free_mb": 81000.0})
    engine_gpu = DeviceInfo(index=0, uuid=H100, name="NVIDIA H100 80GB HBM3", memory_mb=81559)
    on_h100 = caps(engine_version="0.32.0", device_kind="cuda", devices=(engine_gpu,), device_source="nvml")
    usage = DeviceUsage(devices=(idle, other), source="nvml")
    check = devices_check(usage, EngineSetup(kind="vllm", caps=on_h100))
    assert check.status == "ok", check.reason  # CUDA_VISIBLE_DEVICES=H100
    assert devices_check(usage, None).status == "warn"  # unknown engine: every device counts


def test_memory_held_by_a_process_nvml_does_not_list_is_flagged_with_what_is_left_free() -> None:
    # Inside a container NVML lists no other container's processes, but their memory shows as used: a server
    # started there would get 8 GB of the 80, and doctor said "none busy".
    hidden = busy_device(1).model_copy(update={"processes": (), "free_mb": 8156.0})
    check = devices_check(DeviceUsage(driver="550.54.15", devices=(hidden,), source="nvml"), None)
    assert check.status == "warn"
    assert check.reason == (
        f"driver 550.54.15, 1 device (nvml): device memory in use that no listed process holds: {H100} 73403 MB of "
        "81559 MB (8156 MB free)"
    )
    assert "nvidia-smi on the host, outside any container" in (check.fix or "")
    # What the listed processes hold, and a driver's own few hundred MB, are not flagged as hidden.
    listed = busy_device(1)  # 70,000 MB used, 69,000 of them by the listed process
    assert "no listed process" not in devices_check(DeviceUsage(devices=(listed,), source="nvml"), None).reason
    reserved = hidden.model_copy(update={"free_mb": 81000.0})
    assert devices_check(DeviceUsage(devices=(reserved,), source="nvml"), None).status == "ok"


def test_gpus_beside_a_cpu_build_of_the_engine_are_a_warning() -> None:
    idle = busy_device(1).model_copy(update={"processes": (), "free_mb": 81000.0})
    check = devices_check(DeviceUsage(devices=(idle,), source="nvml"), cpu_setup())
    assert check.status == "warn" and "vllm 0.32.0+cpu is a CPU build: its servers will not use them" in check.reason


def test_an_engine_that_cannot_be_probed_or_is_not_installed_fails_with_the_fix() -> None:
    assert engine_check(None, "managed:vllm-cpu").reason == "managed:vllm-cpu is not installed"
    failed = engine_check(EngineSetup(kind="vllm", probe_error="no vllm in /venv"), None)
    assert failed.status == "fail" and "no vllm in /venv" in failed.reason and "specselect setup" in (failed.fix or "")
    ok = engine_check(cpu_setup(), None)
    assert ok.status == "ok" and ok.reason.startswith("vllm 0.32.0+cpu on cpu")


def test_the_host_check_names_the_busiest_processes_and_holds_the_plans_limit() -> None:
    busy = HostSample(
        seconds=1.0, scope_cpus=2.0, foreign_share=0.5, busiest=(ProcessCpu(pid=7, name="make", cores=1.0),)
    )
    check = host_check(busy, 0.02)
    assert check.status == "warn" and check.reason.startswith("other processes used 50% of 2 CPUs over 1.0 s")
    assert check.details == ("busiest: make (pid 7) 1.00 cores",)
    assert host_check(busy, 1.0).status == "ok"  # a plan that never leaves a scenario out
    assert host_check(QUIET, 0.02).status == "ok"


def to_download(repo: str) -> NeededModel:
    return NeededModel(repo, "main", "to_download", Path("/hub"))


def test_disk_is_compared_with_what_the_hub_listed() -> None:
    answer = HubAnswer(repo="org/m", revision="main", outcome="ok", size_bytes=16_000_000_000)
    short = disk_check([to_download("org/m")], [answer], {Path("/hub"): 10_000_000_000})
    assert short.status == "fail" and short.reason == "/hub: 16.00 GB needed for the models, 10.00 GB free"
    assert disk_check([to_download("org/m")], [answer], {Path("/hub"): 20_000_000_000}).status == "ok"
    unknown = disk_check([to_download("org/m")], [answer.model_copy(update={"size_bytes": None})], {Path("/hub"): 1})
    assert unknown.status == "warn" and "org/m@main" in unknown.reason


def test_the_hub_is_not_asked_when_nothing_must_be_downloaded() -> None:
    present = NeededModel("org/m", None, "present", Path("/hub/models--org--m/snapshots/c"))
    check = hub_check([present], None, token_set=False, answers=[])
    assert check.status == "ok" and check.reason.startswith("nothing to download")


def test_a_download_without_a_known_endpoint_fails() -> None:
    check = hub_check([to_download("org/m")], None, token_set=False, answers=[])
    assert check.status == "fail" and "HF_ENDPOINT" in (check.fix or "")


def test_a_listing_without_sizes_gives_no_size_and_weights_are_counted_once() -> None:
    listed = [{"rfilename": n, "size": s} for n, s in [("model.safetensors", 100), ("pytorch_model.bin", 100)]]
    assert download_size([*listed, {"rfilename": "config.json", "size": 1}]) == 101
    assert download_size([{"rfilename": "model.safetensors"}]) is None


# -- devices through NVML ------------------------------------------------------------------------------------------


def test_the_real_nvml_bindings_say_why_there_is_no_gpu_here() -> None:
    usage = read_device_usage()
    assert usage.devices == () and usage.driver is None
    assert usage.problem is not None and "NVML could not start" in usage.problem


def test_the_fake_nvml_gives_the_driver_free_memory_and_the_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [
        FakeGpu(H100, "NVIDIA H100 80GB HBM3", 81559, used_mb=(70000,), processes=[FakeProcess(4242, 69000)]),
        FakeGpu(A100, "NVIDIA A100-SXM4-40GB", 40960, processes=[FakeProcess(99, None)]),
    ]
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(gpus, driver="560.35.03"))
    usage = read_device_usage({4242: "python3"})
    assert usage.driver == "560.35.03"
    assert [(d.uuid, d.total_mb, d.free_mb) for d in usage.devices] == [(H100, 81559, 11559), (A100, 40960, 40960)]
    assert usage.devices[0].processes == (GpuProcess(pid=4242, name="python3", used_mb=69000),)
    assert usage.devices[1].processes == (GpuProcess(pid=99, name=None, used_mb=None),)


# -- the hub, on a stand-in ----------------------------------------------------------------------------------------


# -- whole runs ----------------------------------------------------------------------------------------------------


def test_doctor_without_a_plan_and_without_the_managed_engine_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SPECSELECT_HOME", str(tmp_path / "home"))  # no managed environment there
    monkeypatch.setattr("specselect._runner.doctor.sample_host", lambda seconds: QUIET)
    assert main(["doctor"]) == 7
    shown = capsys.readouterr().out
    assert "ok    devices    no GPU found (NVML could not start" in shown  # the real bindings: no driver here
    assert "FAIL  engine     managed:vllm-cpu is not installed" in shown and "specselect setup" in shown
    assert "no plan given: nothing to download" in shown
    assert "checked: devices, engine, hub, disk, host load" in shown
    assert not (tmp_path / "home" / "envs").exists()  # nothing was installed


def test_doctor_refuses_bad_usage_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--sample-s", "0"]) == 2
    assert main(["doctor", str(tmp_path / "no-such-plan.toml")]) == 2
    assert "--sample-s" in capsys.readouterr().err


def test_a_managed_environment_is_uninstalled_only_until_it_is_built(tmp_path: Path) -> None:
    assert uninstalled_environment(EngineConfig(python="managed:vllm-cpu"), tmp_path) == "managed:vllm-cpu"
    assert uninstalled_environment(EngineConfig(python="/venv/bin/python"), tmp_path) is None


def test_the_doctor_probes_replace_what_is_read_from_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECSELECT_HOME", str(tmp_path / "home"))
    probes = DoctorProbes(devices=lambda names: DeviceUsage(), host=lambda seconds: QUIET, free_bytes=lambda path: 0)
    report = run_doctor(None, home=tmp_path / "home", probes=probes)
    assert report.host == QUIET and report.devices == DeviceUsage() and report.plan is None
