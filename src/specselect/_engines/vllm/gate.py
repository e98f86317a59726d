"""vLLM's admission answers from the probe: gate 2 (method, version, device, optional module) and the
candidate's options against the installed `SpeculativeConfig` (part of gate 4, so a misspelt key stops the
candidate before any server starts)."""

from __future__ import annotations

from specselect._core.families import classify_family
from specselect._core.gates import FactValue, GateCheck
from specselect._engines.launching import controller_check, min_version_check
from specselect._engines.vllm.specconfig import option_problem
from specselect._engines.vllm.suffixsetup import ARCTIC_INFERENCE_REQUIREMENT, install_command
from specselect._plan import Candidate
from specselect.records.capabilities import EngineCapabilities, VllmCapabilities

__all__ = ["ARCTIC_INFERENCE_REQUIREMENT", "backend_gate", "engine_config_keys", "options_gate", "vllm_method"]


def vllm_method(family: str, method: str | None) -> str:
    """The vLLM method of a candidate: the one it names, else its family's canonical name (`eagle3`, like
    `ngram_gpu`, must be named explicitly)."""
    if method:
        return method.strip().lower()
    canonical = classify_family(family).family
    return "custom_class" if canonical == "custom" else canonical


def _suffix_check(caps: EngineCapabilities, facts: dict[str, FactValue]) -> GateCheck | None:
    available = caps.optional_modules.get("arctic_inference", False)
    facts["arctic_inference_installed"] = available
    setup = caps.optional_module_setup.get("arctic_inference")
    if setup is not None:
        facts["arctic_inference_setup"] = setup
    if available:
        return None
    return GateCheck.fail(
        "suffix_needs_arctic_inference",
        install_command=install_command(caps.python)
        if setup is None
        else "delete the marker named in arctic_inference_setup and run `specselect setup` again",
        **facts,
    )


def _synthetic_check(candidate: Candidate, caps: EngineCapabilities, facts: dict[str, FactValue]) -> GateCheck | None:
    """Synthetic rejection sampling where the CPU build's kernels refuse it (the server would die at the first
    request: measured with vLLM 0.32.0+cpu)."""
    if candidate.options.get("rejection_sample_method") != "synthetic" or not caps.on_cpu:
        return None
    if not isinstance(caps, VllmCapabilities) or caps.synthetic_rejection_on_cpu:
        return None
    return GateCheck.fail("requires_cuda", method_requires_device="cuda", option="rejection_sample_method", **facts)


def backend_gate(
    method: str, candidate: Candidate, caps: EngineCapabilities, *, data_parallel_size: int = 1
) -> GateCheck:
    """Gate 2 for a vLLM candidate: the method is in this vLLM, new enough, on the right device, importable, and
    any runtime controller it asks for runs for it at this data parallel size."""
    facts: dict[str, FactValue] = {
        "engine_kind": caps.kind,
        "engine_version": caps.engine_version,
        "method": method,
        "device_kind": caps.device_kind,
    }
    if method not in caps.spec_methods:
        known = ",".join(m for m in caps.spec_methods if m not in caps.mtp_methods or m == "mtp")
        return GateCheck.fail("method_not_in_backend", engine_methods=known, **facts)
    too_old = min_version_check(caps.engine_version, candidate.min_engine_version, facts)
    if too_old is not None:
        return too_old
    required = caps.method_hardware.get(method)
    if required is not None:
        facts["method_requires_device"] = required
        if required != caps.device_kind:
            return GateCheck.fail(f"requires_{required}", **facts)
    refused = _suffix_check(caps, facts) if method == "suffix" else None
    refused = refused or _synthetic_check(candidate, caps, facts)
    refused = refused or controller_check(method, candidate, caps, facts, data_parallel_size=data_parallel_size)
    return refused if refused is not None else GateCheck.ok(**facts)


def engine_config_keys(caps: EngineCapabilities | None) -> tuple[str, ...] | None:
    """The installed vLLM's speculative-config keys; None (the hand-kept fallback) when the probe read none."""
    if isinstance(caps, VllmCapabilities) and caps.speculative_config_keys_source == "engine_source":
        return caps.speculative_config_keys
    return None


def options_gate(method: str, candidate: Candidate, caps: EngineCapabilities | None) -> GateCheck:
    """Every option key of the candidate is one the installed vLLM accepts for `method`, else the first that is
    not, with a close match when there is one (`option_problem`)."""
    keys = engine_config_keys(caps)
    source = "engine_source" if keys is not None else "fallback_list"
    for key in candidate.options:
        problem = option_problem(method, key, keys)
        if problem is not None:
            return GateCheck.fail(
                problem.reason,
                option=key,
                did_you_mean=problem.did_you_mean,
                detail=problem.message,
                option_keys_source=source,
            )
    return GateCheck.ok(option_keys_source=source)
