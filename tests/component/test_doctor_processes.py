"""The tests of test_doctor that start processes or stand-in servers (the unit tier is pure)."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import tomli_w
from test_doctor import H100, QUIET, to_download
from test_fault_harness import make_fake_vllm
from tests.fakegpu import FakeGpu, FakeProcess, fake_nvml

from specselect._assets.hub_access import ask_hub
from specselect._cli.main import main
from specselect._runner.doctor import DoctorProbes, run_doctor
from specselect._runner.doctor.checks import hub_check
from specselect.records.doctor import DeviceUsage, HubAnswer

TOKEN = "test-token-0123456789"


LISTING = {
    "siblings": [{"rfilename": "model.safetensors", "size": 5_000_000}, {"rfilename": "config.json", "size": 700}]
}


class _Hub(http.server.BaseHTTPRequestHandler):
    """A public `org/open`, a gated `org/gated` (its files only with the bearer token), nothing else; each refusal
    named in `X-Error-Code` as the hub names it, but `org/proxied`'s, refused as a proxy would (no code)."""

    seen: ClassVar[list[tuple[str, str, bool]]] = []

    def _answer(self, body: bytes | None) -> None:
        repo = "/".join(self.path.removeprefix("/api/models").lstrip("/").split("/")[:2])
        authorized = self.headers.get("Authorization") == f"Bearer {TOKEN}"
        self.seen.append((self.command, self.path, authorized))
        if repo == "org/proxied":
            self.send_response(404)
        elif repo not in ("org/open", "org/gated"):
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
        elif self.path.startswith("/api/models/"):
            self.send_response(200)
        elif repo == "org/gated" and not authorized:
            self.send_response(401)
            self.send_header("X-Error-Code", "GatedRepo")
        else:
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:1/storage/config.json")  # never followed
        payload = json.dumps(LISTING).encode() if self.path.startswith("/api/models/") else b""
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body is not None:
            self.wfile.write(payload)

    def do_GET(self) -> None:
        self._answer(b"")

    def do_HEAD(self) -> None:
        self._answer(None)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture(name="hub")
def hub_fixture() -> Iterator[str]:
    _Hub.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_public_repository_is_reachable_and_its_download_size_listed(hub: str) -> None:
    answer = ask_hub(hub, "org/open", "main", token=None)
    assert (answer.outcome, answer.http_status, answer.size_bytes) == ("ok", 302, 5_000_700)
    assert [(m, p) for m, p, _ in _Hub.seen] == [
        ("GET", "/api/models/org/open/revision/main?blobs=true"),
        ("HEAD", "/org/open/resolve/main/config.json"),
    ]


def test_a_gated_repository_without_a_token_is_refused_and_with_one_let_in(hub: str) -> None:
    refused = ask_hub(hub, "org/gated", "main", token=None)
    assert (refused.outcome, refused.http_status) == ("gated", 401)
    assert refused.detail == "its config.json answered HTTP 401: a gated repository, and no token is set"
    check = hub_check([to_download("org/gated")], hub, token_set=False, answers=[refused])
    assert check.status == "fail" and check.fix == "export HF_TOKEN with a token whose account has access"
    allowed = ask_hub(hub, "org/gated", "main", token=TOKEN)
    assert allowed.outcome == "ok" and _Hub.seen[-1] == ("HEAD", "/org/gated/resolve/main/config.json", True)
    assert TOKEN not in refused.model_dump_json() + allowed.model_dump_json()


def test_an_unknown_repository_is_not_found(hub: str) -> None:
    answer = ask_hub(hub, "org/missing", "v1", token=None)
    assert answer.outcome == "not_found" and "RepoNotFound (or a private one: it needs a token)" in answer.detail


def test_a_refusal_without_the_hubs_error_code_is_not_taken_for_the_hubs(hub: str) -> None:
    answer = ask_hub(hub, "org/proxied", "main", token=None)
    assert answer.outcome == "unreachable"
    assert "answered HTTP 404 without the hub's error code (server: BaseHTTP" in answer.detail
    assert answer.detail.endswith("a proxy or firewall answered, not the hub")


def test_an_endpoint_nobody_listens_on_is_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: nothing listens there
    answer = ask_hub(f"http://127.0.0.1:{port}", "org/open", "main", token=None, timeout_s=2.0)
    assert answer.outcome == "unreachable" and answer.detail.startswith(f"cannot reach http://127.0.0.1:{port}:")
    check = hub_check([to_download("org/open")], f"http://127.0.0.1:{port}", token_set=True, answers=[answer])
    assert check.status == "fail" and "cannot reach" in check.reason and "HF_TOKEN is set" in check.reason


def test_an_endpoint_that_never_answers_is_given_up_at_the_deadline() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)  # accepts connections, never answers
        answer = ask_hub(f"http://127.0.0.1:{sock.getsockname()[1]}", "org/open", "main", token=None, timeout_s=0.2)
    assert answer.outcome == "unreachable"


def gpu_engine(root: Path) -> Path:
    """The stand-in vLLM environment as a GPU build (vLLM 0.32.0 without `+cpu`), so the probe reads the GPUs."""
    python = make_fake_vllm(root)
    site = next((python.parents[1] / "lib").glob("python3*/site-packages"))
    gpu = site / "vllm-0.32.0.dist-info"
    (site / "vllm-0.32.0+cpu.dist-info").rename(gpu)
    (gpu / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n")
    return python


@pytest.fixture(name="gpu_host")
def gpu_host_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One H100 with a foreign process on it (fake NVML), an empty hub cache, a quiet host; the GPU engine's python."""
    gpus = [FakeGpu(H100, "NVIDIA H100 80GB HBM3", 81559, used_mb=(30000,), processes=[FakeProcess(4242, 29000)])]
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(gpus))
    for name in ("CUDA_VISIBLE_DEVICES", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("specselect._runner.doctor.sample_host", lambda seconds: QUIET)
    return gpu_engine(tmp_path / "engine")


def gpu_plan(path: Path, python: Path, target: str) -> Path:
    data = {
        "schema_version": 1,
        "label": "gpu",
        "target": {"model": target, "dtype": "bfloat16"},
        "engine": {"python": str(python), "args": ["--enforce-eager"]},
        "workloads": {"general": "builtin:general"},
        "candidates": [{"name": "ngram", "family": "ngram", "num_speculative_tokens": 4}],
    }
    path.write_text(tomli_w.dumps(data))
    return path


def test_doctor_on_the_fake_gpu_host_reads_devices_engine_audit_and_the_hub(
    gpu_host: Path, hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub)
    plan = gpu_plan(tmp_path / "plan.toml", gpu_host, "org/open")
    report = run_doctor(str(plan), home=tmp_path / "home")
    checks = {c.name: c for c in report.checks}
    assert [c.name for c in report.checks] == ["devices", "engine", "audit", "hub", "disk", "host_load"]
    assert checks["devices"].status == "warn" and "pid 4242" in checks["devices"].reason
    assert checks["engine"].reason.startswith("vllm 0.32.0 on cuda")
    assert checks["audit"].status == "warn" and "cuda_eager_mode" in checks["audit"].reason
    assert checks["hub"].status == "ok" and checks["hub"].reason.startswith(f"{hub} lets this host download org/open")
    assert checks["disk"].status == "ok" and any("0.01 GB needed" in line for line in checks["disk"].details)
    assert report.status == "warn" and report.verdict.startswith("ready with warnings (devices, audit)")


def test_doctor_exits_7_when_a_gated_model_has_no_token_and_0_once_one_is_set(
    gpu_host: Path, hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub)
    monkeypatch.setenv("SPECSELECT_HOME", str(tmp_path / "home"))
    plan = gpu_plan(tmp_path / "plan.toml", gpu_host, "org/gated")
    assert main(["doctor", str(plan)]) == 7
    shown = capsys.readouterr().out
    assert "FAIL  hub" in shown and "fix: export HF_TOKEN" in shown and "verdict: not ready (hub failed)" in shown
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert main(["doctor", str(plan), "--json"]) == 0
    shown = capsys.readouterr().out
    report = json.loads(shown)
    assert report["schema_version"] == 2 and report["status"] == "warn"
    assert TOKEN not in shown


SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")


def test_doctor_names_a_snapshot_missing_a_shard_as_partial_and_asks_the_hub_for_it(
    gpu_host: Path, hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub)
    snapshot = tmp_path / "hub" / "models--org--open" / "snapshots" / ("c" * 40)
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("c" * 40)
    (snapshot / "config.json").write_text("{}")
    index = {"weight_map": {"layer.0": SHARDS[0], "layer.1": SHARDS[1]}}
    (snapshot / "model.safetensors.index.json").write_text(json.dumps(index))
    (snapshot / SHARDS[0]).write_bytes(b"weights")  # copied in by hand, the second shard left out
    plan = gpu_plan(tmp_path / "plan.toml", gpu_host, "org/open")
    hub_check = {c.name: c for c in run_doctor(str(plan), home=tmp_path / "home").checks}["hub"]
    assert hub_check.reason.startswith(f"{hub} lets this host download org/open@main")
    assert any(f"org/open@main: partial, lacking {SHARDS[1]} (missing)" in line for line in hub_check.details)
    (snapshot / SHARDS[1]).write_bytes(b"weights")
    hub_check = {c.name: c for c in run_doctor(str(plan), home=tmp_path / "home").checks}["hub"]
    assert hub_check.reason.startswith("nothing to download")
    assert any(line.startswith("org/open: present at ") for line in hub_check.details)


def test_doctor_asks_the_hub_for_a_proposer_at_the_revision_its_reference_pins(
    gpu_host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    asked: list[tuple[str, str]] = []

    def hub(endpoint: str, repo: str, revision: str, token: str | None, timeout_s: float) -> HubAnswer:
        asked.append((repo, revision))
        return HubAnswer(repo=repo, revision=revision, outcome="ok", http_status=200, size_bytes=1000)

    plan = gpu_plan(tmp_path / "plan.toml", gpu_host, "org/open")
    data = tomllib.loads(plan.read_text())
    draft = {"name": "draft", "family": "draft_model", "proposer": "org/draft@dev", "num_speculative_tokens": 3}
    data["candidates"].append(draft)
    plan.write_text(tomli_w.dumps(data))
    report = run_doctor(str(plan), home=tmp_path / "home", probes=DoctorProbes(hub=hub))
    assert asked == [("org/open", "main"), ("org/draft", "dev")]
    hub_check = {c.name: c for c in report.checks}["hub"]
    assert any(line.startswith("org/draft@dev: to download at ") for line in hub_check.details)


def test_the_fake_nvml_module_shows_a_process_its_gpus_by_environment() -> None:
    """tests/fakenvml/pynvml.py, as the README tries doctor by hand: on PYTHONPATH, FAKE_NVML_GPUS its devices."""
    repo = Path(__file__).resolve().parents[2]
    gpus = [{"uuid": H100, "name": "NVIDIA H100 80GB HBM3", "total_mb": 81559, "processes": [{"pid": 7, "used_mb": 5}]}]
    script = "from specselect._engines.devices import read_device_usage; print(read_device_usage().model_dump_json())"
    env = {**os.environ, "PYTHONPATH": str(repo / "tests" / "fakenvml"), "FAKE_NVML_GPUS": json.dumps(gpus)}
    shown = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    usage = DeviceUsage.model_validate_json(shown.stdout)
    assert [(d.uuid, d.free_mb, [p.pid for p in d.processes]) for d in usage.devices] == [(H100, 81559, [7])]
