"""The SGLang probe on fake installed package layouts (argparse, registry and annotated-dataclass eras).

The layouts (data/sglang_fake_install.py) mirror how real SGLang releases declare their speculative
algorithms; their `sglang/__init__.py` raises when imported under SGLANG_FAKE_FORBID_IMPORT, so a probe
that imported sglang would fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "data"))  # the fake SGLang installer
import sglang_fake_install as FAKE

from specselect._engines.devices import DeviceScan
from specselect._engines.launching import controller_check
from specselect._engines.sglang import _probe_script as script
from specselect._engines.sglang import probe as probe_module
from specselect._engines.sglang.engine import SglangEngine
from specselect._engines.sglang.probe import ADAPTIVE_CONTROLLER, LAUNCH_FLAGS, probe_sglang, sglang_probe_cache_key
from specselect._plan import Candidate
from specselect.errors import ConfigError, EngineSetupError
from specselect.records.capabilities import DeviceInfo, SglangCapabilities

DATA = Path(__file__).resolve().parents[1] / "unit" / "data"

EXPECTED = {
    "v0.4-argparse": (["EAGLE", "EAGLE3", "NEXTN"], "argparse_choices"),
    "v0.5-argparse": (["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"], "argparse_choices"),
    "registry": (["EAGLE", "NEXTN", "EAGLE3", "STANDALONE", "NGRAM"], "registry"),
    "annotated-split": (["DFLASH", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NEXTN"], "registry"),
}


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_module, "scan_devices", lambda: DeviceScan((), "none", "no GPU in this test"))


@pytest.mark.parametrize("style", FAKE.STYLES)
def test_probe_reads_each_layout_without_importing_sglang(tmp_path: Path, style: str) -> None:
    FAKE.install(tmp_path, style)
    found = script.probe([str(tmp_path)])
    assert "error" not in found
    assert "sglang" not in sys.modules
    algorithms, source = EXPECTED[style]
    assert (found["algorithms"], found["algorithm_source"]) == (algorithms, source)
    assert found["versions"]["sglang"] == FAKE.VERSIONS[style]  # type: ignore[index]
    flags = set(found["flags"])  # type: ignore[arg-type]
    assert {"--model-path", "--model", "--tp-size", "--speculative-algorithm", "--speculative-num-steps"} <= flags
    assert ("--pp-size" in flags) is (style != "v0.4-argparse")
    assert ("--config" in flags) is (style != "v0.4-argparse")  # YAML config files (where the API key goes)
    endpoints = found["server_endpoints"]
    assert ("/server_info" in endpoints) is (style != "v0.4-argparse")  # type: ignore[operator]


def test_arg_source_parsing_details() -> None:
    dynamic = script.parse_arg_source('p.add_argument("--speculative-algorithm", choices=registry_names())')
    assert dynamic.declared and dynamic.choices is None
    annotated = script.parse_arg_source(
        textwrap.dedent(
            """
            @dataclass
            class Spec:
                speculative_algorithm: A[Optional[str], Arg(help="x", choices=("EAGLE", None, "NGRAM"))] = None
                speculative_eagle_topk: Annotated[Optional[int], "k"] = None
                _hidden: A[int, "not a flag"] = 0
                plain_field: int = 0
            """
        )
    )
    assert annotated.choices == ["EAGLE", "NGRAM"]
    assert annotated.flags == ["--speculative-algorithm", "--speculative-eagle-topk"]
    absent = script.parse_arg_source('p.add_argument("--port", type=int)')
    assert not absent.declared and absent.flags == ["--port"] and not absent.nextn_alias


def test_registry_forms() -> None:
    enum = "class SpeculativeAlgorithm(IntEnum):\n    NONE = 0\n    EAGLE = 1\n    LOOKAHEAD = auto()\n    x = 3\n"
    assert script.registry_algorithms(enum) == ["EAGLE", "LOOKAHEAD"]
    calls = 'register_speculative_algorithm("EAGLE", w, aliases=("nextn",))\nX.register("NONE")\n'
    assert script.registry_algorithms(calls) == ["EAGLE", "NEXTN"]


def test_probe_reports_missing_or_unreadable_sglang(tmp_path: Path) -> None:
    assert script.probe([str(tmp_path)])["error"] == "sglang is not installed in this environment"
    (tmp_path / "sglang").mkdir()
    assert "cannot read" in str(script.probe([str(tmp_path)])["error"])
    (tmp_path / "sglang" / "srt").mkdir()
    (tmp_path / "sglang" / "srt" / "server_args.py").write_text("def broken(:\n")
    assert "cannot parse" in str(script.probe([str(tmp_path)])["error"])


def test_capabilities_from_a_subprocess_probe(tmp_path: Path) -> None:
    site = tmp_path / "site"
    FAKE.install(site, "v0.4-argparse")
    env = {"PYTHONPATH": str(site), "SGLANG_FAKE_FORBID_IMPORT": "1"}
    caps = probe_sglang(Path(sys.executable), cache_dir=tmp_path / "cache", env=env)
    assert caps.kind == "sglang" and caps.engine_version == "0.4.3"
    assert caps.speculative_algorithms == ("EAGLE", "EAGLE3", "NEXTN")
    assert caps.spec_methods == ("mtp", "nextn", "eagle", "eagle3")
    assert caps.method_hardware == dict.fromkeys(caps.spec_methods, "cuda")
    assert caps.device_kind == "cpu" and caps.devices[0].name == "host RAM"
    assert set(caps.launch_flags) == set(LAUNCH_FLAGS)
    assert caps.launch_flags["--tp-size"] and not caps.launch_flags["--pp-size"]
    assert "--speculative-token-map" in caps.speculative_flags
    assert caps.server_endpoints == ("/get_server_info", "/health", "/health_generate")
    assert not caps.from_cache  # an SGLang found through PYTHONPATH has no environment to key a cache on


def test_gpu_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = (DeviceInfo(index=0, name="H100", memory_mb=81559), DeviceInfo(index=1, name="H100", memory_mb=81000))
    monkeypatch.setattr(probe_module, "scan_devices", lambda: DeviceScan(gpus, "nvml"))
    FAKE.install(tmp_path / "site", "annotated-split")
    caps = probe_sglang(Path(sys.executable), cache_dir=tmp_path / "cache", env={"PYTHONPATH": str(tmp_path / "site")})
    assert caps.device_kind == "cuda" and caps.memory_budget_mb == 81000 and len(caps.devices) == 2
    assert "dflash" in caps.spec_methods and caps.launch_flags["--pp-size"]
    # The engine's CUDA_VISIBLE_DEVICES decides which of them the budget is taken from.
    one = probe_sglang(
        Path(sys.executable), cache_dir=tmp_path / "c2", env={"PYTHONPATH": str(tmp_path / "site")}, visible="0"
    )
    assert one.memory_budget_mb == 81559 and one.cuda_visible_devices == "0" and len(one.host_devices) == 2


def test_probe_of_a_venv_is_cached_until_sglang_changes(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = next((venv / "lib").glob("python*/site-packages"))
    FAKE.install(site, "registry")
    assert sglang_probe_cache_key(python) is not None
    cache = tmp_path / "cache"
    first = probe_sglang(python, cache_dir=cache)
    second = probe_sglang(python, cache_dir=cache)
    assert not first.from_cache and second.from_cache
    assert second.speculative_algorithms == first.speculative_algorithms
    record = next(site.glob("sglang-*.dist-info"))
    os.utime(record, ns=(record.stat().st_mtime_ns + 10**9, record.stat().st_mtime_ns + 10**9))
    assert not probe_sglang(python, cache_dir=cache).from_cache


def test_probe_errors(tmp_path: Path) -> None:
    with pytest.raises(EngineSetupError, match="sglang is not installed"):
        probe_sglang(Path(sys.executable), cache_dir=tmp_path)
    with pytest.raises(EngineSetupError, match="did not run"):
        probe_sglang(tmp_path / "no-python", cache_dir=tmp_path)
    site = tmp_path / "site"
    FAKE.install(site, "registry")
    next(site.glob("sglang-*.dist-info")).rename(site / "gone")
    with pytest.raises(EngineSetupError, match="no distribution record"):
        probe_sglang(Path(sys.executable), cache_dir=tmp_path, env={"PYTHONPATH": str(site)})


def test_engine_probe_and_its_limits(tmp_path: Path) -> None:
    FAKE.install(tmp_path / "site", "v0.5-argparse")
    engine = SglangEngine(sys.executable, probe_env={"PYTHONPATH": str(tmp_path / "site")})
    assert engine.capabilities is None
    caps = engine.probe(cache_dir=tmp_path / "cache")
    assert engine.capabilities == caps and "ngram" in caps.spec_methods
    with pytest.raises(ConfigError, match="custom command"):
        SglangEngine(command=["sglang", "serve"]).probe()
    with pytest.raises(ConfigError, match="needs a python or a command"):
        SglangEngine()


def test_installed_plugins_are_listed_without_being_loaded(tmp_path: Path) -> None:
    FAKE.install(tmp_path, "annotated-split")
    record = tmp_path / "myspec-1.0.dist-info"
    record.mkdir()
    (record / "METADATA").write_text("Metadata-Version: 2.1\nName: myspec\nVersion: 1.0\n", encoding="utf-8")
    (record / "entry_points.txt").write_text(
        "[sglang.srt.plugins]\nmyspec = myspec_not_importable.plugin:register\n[console_scripts]\nx = y:z\n",
        encoding="utf-8",
    )
    found = script.probe([str(tmp_path)])
    assert found["plugins"] == [{"name": "myspec", "value": "myspec_not_importable.plugin:register", "dist": "myspec"}]
    assert found["plugin_registration"] is False  # this layout predates SpeculativeAlgorithm.register


def test_the_adaptive_controller_is_refused_where_sglang_would_turn_it_off() -> None:
    caps = script_caps().model_copy(update={"runtime_controllers": (ADAPTIVE_CONTROLLER,)})
    adaptive = Candidate(name="c", family="ngram", options={"speculative_adaptive": True})
    refused = controller_check("ngram", adaptive, caps, {})
    assert refused is not None and refused.reason == "runtime_controller_not_for_method"
    assert controller_check("eagle3", adaptive, caps, {}) is None
    on_cpu = caps.model_copy(update={"device_kind": "cpu"})
    assert controller_check("eagle3", adaptive, on_cpu, {}).reason == "requires_cuda"  # type: ignore[union-attr]


def script_caps() -> SglangCapabilities:
    return SglangCapabilities(
        engine_version="0.5.23",
        python="/envs/sglang/bin/python",
        device_kind="cuda",
        devices=(DeviceInfo(name="GPU", memory_mb=81920, index=0),),
        memory_budget_mb=81920,
        memory_budget_basis="test",
        spec_methods=("eagle", "eagle3"),
        method_hardware={"eagle": "cuda", "eagle3": "cuda"},
        versions={"sglang": "0.5.23"},
        speculative_algorithms=("EAGLE", "EAGLE3"),
        algorithm_source="registry",
        speculative_flags=("--speculative-adaptive",),
        launch_flags={},
        server_endpoints=(),
        probed_in_s=0.01,
    )
