"""Admission gate 2 (backend) for an SGLang candidate, from the probe: how refusals are reported.

Reasons (the run status is `unsupported` for all of them):
- `family_not_in_engine`: the family/method has no SGLang algorithm (suffix, medusa, mlp_speculator, or a
  `custom` candidate that names no plugin algorithm);
- `method_not_in_backend`: the algorithm exists in SGLang but the installed version does not accept it
  (DFLASH on an older release, say; a plugin's algorithm on a version without plugin registration);
- `plugin_not_installed`: a `custom` candidate names a plugin's algorithm but no SGLang plugin is installed
  (with one installed the name is checked only when the server starts: SGLang loads plugins there);
- `engine_version_too_old`, `backend_probe_failed`: the candidate's `min_engine_version` check;
- `requires_cuda`: SGLang's speculative decoding needs a GPU and this host has none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specselect._core.families import classify_family
from specselect._core.gates import FactValue, GateCheck
from specselect._engines.launching import min_version_check
from specselect._engines.sglang.specargs import (
    PLUGIN_FAMILY,
    SGLANG_FAMILY_METHODS,
    SGLANG_METHOD_ALGORITHMS,
    sglang_algorithm,
)

if TYPE_CHECKING:
    from specselect.records.capabilities import SglangCapabilities

__all__ = ["backend_gate", "sglang_method"]


def sglang_method(family: str, method: str | None) -> str:
    """The method of a candidate on SGLang: the one it names, else its family's first SGLang method (a family
    SGLang cannot run keeps its canonical name, which the backend gate refuses)."""
    if method:
        return method.strip().lower()
    canonical = classify_family(family).family
    return SGLANG_FAMILY_METHODS[canonical][0] if canonical in SGLANG_FAMILY_METHODS else canonical


def _plugin_check(caps: SglangCapabilities, facts: dict[str, FactValue]) -> GateCheck | None:
    """A plugin's algorithm needs plugin registration and an installed plugin; which names a plugin registers is
    known only when SGLang loads it, so with one installed the name is checked at start-up."""
    facts["sglang_plugins"] = ",".join(caps.plugins)
    if not caps.plugin_registration:
        return GateCheck.fail("method_not_in_backend", plugin_registration=False, **facts)
    if not caps.plugins:
        return GateCheck.fail("plugin_not_installed", **facts)
    facts["plugin_algorithm_checked_at"] = "server_start"
    return None


def backend_gate(
    family: str, method: str | None, caps: SglangCapabilities, *, min_engine_version: str | None = None
) -> GateCheck:
    """Admission gate 2 for an SGLang candidate: mapped family, accepted algorithm, version, device."""
    algorithm = sglang_algorithm(family, method)
    facts: dict[str, FactValue] = {
        "engine_kind": "sglang",
        "engine_version": caps.engine_version,
        "method": method,
        "sglang_algorithm": algorithm,
        "device_kind": caps.device_kind,
        "engine_algorithms": ",".join(caps.speculative_algorithms),
    }
    if algorithm is None:
        known = ", ".join(f"{f}: {'/'.join(m)}" for f, m in SGLANG_FAMILY_METHODS.items())
        return GateCheck.fail("family_not_in_engine", sglang_families=f"{known}, {PLUGIN_FAMILY}: <plugin>", **facts)
    if algorithm not in SGLANG_METHOD_ALGORITHMS.values():
        refused = _plugin_check(caps, facts)
        if refused is not None:
            return refused
    elif algorithm not in caps.speculative_algorithms:
        return GateCheck.fail("method_not_in_backend", **facts)
    too_old = min_version_check(caps.engine_version, min_engine_version, facts)
    if too_old is not None:
        return too_old
    # Keyed by specselect method: any method of the same algorithm answers (`deepseek_mtp` -> NEXTN -> mtp).
    required = next(
        (
            caps.method_hardware[m]
            for m, a in SGLANG_METHOD_ALGORITHMS.items()
            if a == algorithm and m in caps.method_hardware
        ),
        None,
    )
    if required is None and algorithm not in SGLANG_METHOD_ALGORITHMS.values():
        required = "cuda"  # a plugin runs in SGLang's speculative workers, which need CUDA like the built-ins
    if required is not None:
        facts["method_requires_device"] = required
        if required != caps.device_kind:
            return GateCheck.fail(f"requires_{required}", **facts)
    return GateCheck.ok(**facts)
