"""`--resume` goes on only under the conditions its kept groups ran under, and keeps every attempt's preflight."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_admission_gather import caps
from test_report_sample_docs import preflight_doc

from specselect._artifacts.layout import RunLayout
from specselect._common.fileio import atomic_write_text
from specselect._core.status import RunStatus
from specselect._runner.resume import changed_environment_warning, environment_changes, resumed_preflight
from specselect.errors import ResultsError
from specselect.records.capabilities import DeviceInfo, VllmCapabilities
from specselect.records.results import Manifest, ManifestGroup, PreflightFile


def _caps(version: str = "0.32.0", devices: tuple[DeviceInfo, ...] = ()) -> VllmCapabilities:
    gpus = devices or (DeviceInfo(index=0, uuid="GPU-aaaa", name="H100", memory_mb=81559),)
    return caps(engine_version=version, device_kind="cuda", devices=gpus, memory_budget_mb=gpus[0].memory_mb)


def _doc(*, hostname: str = "gpu-box-1", snapshot: str = "a" * 64, **caps: Any) -> PreflightFile:
    doc = preflight_doc()
    assert doc.target is not None
    target = doc.target.model_copy(update={"snapshot": snapshot})
    host = doc.host.model_copy(update={"hostname": hostname})
    return doc.model_copy(update={"engine": _caps(**caps), "host": host, "tracks": {"g0_target_only": target}})


def test_the_same_conditions_show_no_change_and_each_difference_is_named() -> None:
    assert environment_changes(_doc(), _doc()) == []
    other_gpu = (DeviceInfo(index=0, uuid="GPU-bbbb", name="H100", memory_mb=81559),)
    changed = environment_changes(
        _doc(), _doc(version="0.33.1", hostname="gpu-box-2", devices=other_gpu, snapshot="f" * 64)
    )
    assert changed == [
        "engine version 0.32.0 -> 0.33.1",
        "host gpu-box-1: Test CPU, 2 CPUs -> gpu-box-2: Test CPU, 2 CPUs",
        "devices GPU-aaaa (81559 MB) -> GPU-bbbb (81559 MB)",
        f"target snapshot of g0_target_only {'a' * 16} -> {'f' * 16}",
    ]


def _earlier_run(tmp_path: Path, before: PreflightFile, *, kept: bool) -> tuple[RunLayout, Manifest]:
    layout = RunLayout(tmp_path / "run")
    atomic_write_text(layout.preflight, before.model_dump_json())
    status = RunStatus.COMPLETED if kept else RunStatus.FAILED
    entry = ManifestGroup(
        name="g0_target_only", role="baseline", family="none", run_status=status, reason="measured", complete=kept
    )
    manifest = Manifest.model_construct(groups=(entry,))
    return layout, manifest


def test_resume_refuses_in_one_line_unless_allowed_and_keeps_the_earlier_preflight(tmp_path: Path) -> None:
    layout, manifest = _earlier_run(tmp_path, _doc(), kept=True)
    with pytest.raises(ResultsError) as refused:
        resumed_preflight(layout, manifest, _doc(version="0.33.1"), allow=False)
    line = refused.value.one_line()
    assert "\n" not in line and "engine version 0.32.0 -> 0.33.1" in line and "--allow-changed-environment" in line

    allowed = resumed_preflight(layout, manifest, _doc(version="0.33.1"), allow=True)
    assert allowed.changed_environment == ("engine version 0.32.0 -> 0.33.1",)
    warned = changed_environment_warning(allowed)  # printed when the run goes on: not only in the file
    assert warned is not None and warned.endswith(": engine version 0.32.0 -> 0.33.1")
    assert [a.engine.engine_version for a in allowed.earlier_attempts if a.engine] == ["0.32.0"]
    # The next attempt keeps both earlier preflights, oldest first.
    atomic_write_text(layout.preflight, allowed.model_dump_json())
    third = resumed_preflight(layout, manifest, _doc(version="0.33.1"), allow=False)
    assert [a.engine.engine_version for a in third.earlier_attempts if a.engine] == ["0.32.0", "0.33.1"]
    assert all(not hasattr(a, "earlier_attempts") for a in third.earlier_attempts)  # each without its own history
    assert third.changed_environment == ()
    assert changed_environment_warning(third) is None


def test_nothing_kept_means_nothing_to_mix(tmp_path: Path) -> None:
    layout, manifest = _earlier_run(tmp_path, _doc(), kept=False)
    moved = resumed_preflight(layout, manifest, _doc(hostname="elsewhere"), allow=False)
    assert moved.changed_environment == ("host gpu-box-1: Test CPU, 2 CPUs -> elsewhere: Test CPU, 2 CPUs",)
    assert resumed_preflight(layout, None, _doc(), allow=False) == _doc()  # a fresh label
