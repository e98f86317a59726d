"""The SGLang probe and specselect's SGLang mapping, pinned to a released SGLang's own files.

`data/sglang_release/` holds the files of the release the probe reads (trimmed from its wheel, with their
sha256 and the probe's answer at recording; `refresh.py` records a newer release). Reading them needs no
network and no install. After a refresh, these tests fail where the new release declares algorithms, launch
flags or speculative options specselect does not map yet (or drops ones it does), instead of candidates being
refused in silence.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from specselect._engines.sglang import _probe_script as script
from specselect._engines.sglang.probe import LAUNCH_FLAGS
from specselect._engines.sglang.specargs import (
    KNOWN_OPTIONS,
    RESERVED_OPTIONS,
    RETIRED_OPTIONS,
    SGLANG_METHOD_ALGORITHMS,
    supported_methods,
)

RELEASE = Path(__file__).parent / "data" / "sglang_release"
RECORDED = json.loads((RELEASE / "release.json").read_text(encoding="utf-8"))
_VOLATILE = ("prefix", "python_version", "seconds", "sglang_dir")


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The probe's answer on the recorded release's files, unpacked as a site-packages directory."""
    site = tmp_path_factory.mktemp("sglang-release")
    with tarfile.open(RELEASE / f"sglang-{RECORDED['version']}.tar.xz") as tar:
        tar.extractall(site, filter="data")
    for name, digest in RECORDED["files"].items():
        assert hashlib.sha256((site / name).read_bytes()).hexdigest() == digest, name
    return {k: v for k, v in script.probe([str(site)]).items() if k not in _VOLATILE}


def test_the_probe_reads_the_release_as_it_did_when_recorded(released: dict[str, object]) -> None:
    assert released == RECORDED["probe"]
    assert released["versions"]["sglang"] == RECORDED["version"]  # type: ignore[index]


def test_the_release_declares_dspark_and_uno_through_its_registry(released: dict[str, object]) -> None:
    assert released["algorithm_source"] == "registry"
    assert {"DSPARK", "UNO", "NEXTN", "EAGLE3"} <= set(released["algorithms"])  # type: ignore[arg-type]
    assert released["plugin_registration"] is True
    assert released["plugins"] == []  # the wheel registers no plugin of its own


def test_every_released_algorithm_is_a_specselect_method_and_back(released: dict[str, object]) -> None:
    algorithms = set(released["algorithms"])  # type: ignore[arg-type]
    assert algorithms == set(SGLANG_METHOD_ALGORITHMS.values())
    assert set(supported_methods(algorithms)) == set(SGLANG_METHOD_ALGORITHMS)


def test_every_launch_flag_and_the_adaptive_controller_are_declared(released: dict[str, object]) -> None:
    flags = set(released["flags"])  # type: ignore[arg-type]
    assert set(LAUNCH_FLAGS) <= flags
    assert {"--speculative-adaptive", "--speculative-adaptive-config", "--uno-lora-path"} <= flags
    # Error messages that start with a flag are not declarations.
    assert all(" " not in flag for flag in flags)


def test_the_speculative_options_match_the_release(released: dict[str, object]) -> None:
    declared = {
        f.removeprefix("--speculative-").replace("-", "_")
        for f in released["flags"]  # type: ignore[union-attr]
        if f.startswith("--speculative-")
    }
    assert KNOWN_OPTIONS - set(RETIRED_OPTIONS) <= declared, "an option specselect knows is gone from the release"
    assert declared - KNOWN_OPTIONS - RESERVED_OPTIONS - {"num_draft_tokens"} == set(), "a new option to map"
    assert declared & set(RETIRED_OPTIONS) == set()
