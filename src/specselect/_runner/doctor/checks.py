"""The checks of `specselect doctor`, each a pure function of what was read: facts in, one `DoctorCheck` out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specselect._assets.resources import format_gb
from specselect._engines import EngineSetup
from specselect._engines.base import Finding
from specselect._runner.doctor.models import NeededModel
from specselect.records.capabilities import EngineCapabilities
from specselect.records.doctor import CheckStatus, DeviceUsage, DoctorCheck, GpuDevice, HostSample, HubAnswer, worst

__all__ = ["audit_check", "devices_check", "disk_check", "engine_check", "host_check", "hub_check"]

_UNLISTED_MB = 2048
"""Device memory in use beyond what the listed processes hold that is more than a driver's own reservation (a few
hundred MB on an idle card): a process NVML does not list holds it (another container's, another user's)."""

_SETUP_FIX = "run `specselect setup` (installs the managed CPU vLLM), or give [engine] python of your own vLLM"


def _device_line(device: GpuDevice, own_pids: frozenset[int]) -> str:
    label = f"GPU {device.index}" if device.index is not None else f"MIG {device.uuid}"
    free = f", {device.free_mb:.0f} MB free" if device.free_mb is not None else ""
    procs = [
        f"pid {p.pid} {p.name or '?'}"
        + (f" {p.used_mb:.0f} MB" if p.used_mb is not None else "")
        + (" (specselect)" if p.pid in own_pids else "")
        for p in device.processes
    ]
    on_it = f"; processes: {', '.join(procs)}" if procs else "; no processes"
    return f"{label} {device.name} ({device.uuid}): {device.total_mb:.0f} MB{free}{on_it}"


def devices_check(usage: DeviceUsage, setup: EngineSetup | None, own_pids: frozenset[int] = frozenset()) -> DoctorCheck:
    """The driver and the devices: none (the CPU engine will be used, or a GPU engine cannot run), a process on a
    device that is not specselect's (it shares the device's memory and compute with every server measured there),
    or GPUs an engine built for the CPU will not use."""
    caps = setup.caps if setup is not None else None
    details = tuple(_device_line(d, own_pids) for d in usage.devices)
    if not usage.devices:
        why = usage.problem or f"{usage.source} lists none"
        if caps is not None and caps.device_source != "not_queried":
            return DoctorCheck(
                name="devices",
                status="fail",
                reason=f"no GPU found ({why}), but {caps.kind} {caps.engine_version} is a GPU build",
                fix="install the NVIDIA driver (nvidia-smi must work) and pip install 'specselect[gpu]'",
            )
        engine = f"{caps.kind} {caps.engine_version}" if caps is not None else "a CPU build of the engine"
        return DoctorCheck(
            name="devices",
            status="ok",
            reason=f"no GPU found ({why}): the CPU engine ({engine}) will be used, and results are CPU results",
        )
    driver = f"driver {usage.driver}, " if usage.driver else ""
    summary = f"{driver}{len(usage.devices)} device{'s' if len(usage.devices) != 1 else ''} ({usage.source})"
    problems = _device_problems(usage, caps, own_pids)
    if not problems:
        return DoctorCheck(name="devices", status="ok", reason=f"{summary}, none busy", details=details)
    return DoctorCheck(
        name="devices",
        status=worst([status for status, _, _ in problems]),
        reason=f"{summary}: " + "; ".join(text for _, text, _ in problems),
        fix="; ".join(fix for _, _, fix in problems),
        details=details,
    )


def _unlisted_mb(device: GpuDevice) -> float:
    """Memory in use on `device` beyond what its listed processes hold (0 when NVML gave no free memory)."""
    if device.free_mb is None:
        return 0.0
    listed = sum(p.used_mb or 0.0 for p in device.processes)
    return device.total_mb - device.free_mb - listed


def _used(device: GpuDevice, caps: EngineCapabilities | None) -> bool:
    """Whether the engine's servers use `device` (all of them when the engine runs on no GPU or is not known): a
    device CUDA_VISIBLE_DEVICES leaves out, or a MIG instance of a card it does not use, shares nothing with them."""
    if caps is None or caps.device_kind != "cuda":
        return True
    used = {d.uuid for d in caps.devices} | {d.parent_uuid for d in caps.devices}
    return bool({device.uuid, device.parent_uuid} & (used - {None}))


def _device_problems(
    usage: DeviceUsage, caps: EngineCapabilities | None, own_pids: frozenset[int]
) -> list[tuple[CheckStatus, str, str]]:
    """(status, what, fix) of each problem with devices that were found."""
    problems: list[tuple[CheckStatus, str, str]] = []
    foreign = [(d, p) for d in usage.devices for p in d.processes if p.pid not in own_pids and _used(d, caps)]
    if foreign:
        named = ", ".join(f"pid {p.pid} {p.name or '?'} on {d.uuid or d.index}" for d, p in foreign)
        problems.append(
            (
                "warn",
                f"a process that is not specselect's holds a device: {named}",
                "stop it, or keep its device out of the plan with CUDA_VISIBLE_DEVICES in [engine.env] (a server "
                "measured beside it shares its memory and compute)",
            )
        )
    unlisted = [(d, _unlisted_mb(d)) for d in usage.devices if _used(d, caps)]
    held = [(d, mb) for d, mb in unlisted if mb > _UNLISTED_MB]
    if held:
        named = ", ".join(
            f"{d.uuid or d.index} {mb:.0f} MB of {d.total_mb:.0f} MB ({d.free_mb or 0:.0f} MB free)" for d, mb in held
        )
        problems.append(
            (
                "warn",
                f"device memory in use that no listed process holds: {named}",
                "find what holds it (nvidia-smi on the host, outside any container: another container's or user's "
                "process) and stop it; a server started beside it gets only the free memory and shares the device",
            )
        )
    if caps is not None and caps.device_source == "not_queried":
        problems.append(
            (
                "warn",
                f"{caps.kind} {caps.engine_version} is a CPU build: its servers will not use them",
                "give [engine] python of a GPU build of the engine",
            )
        )
    if usage.problem is not None:
        problems.append(("fail", usage.problem, "pip install 'specselect[gpu]' (nvidia-ml-py) where the driver works"))
    return problems


def engine_check(setup: EngineSetup | None, uninstalled: str | None) -> DoctorCheck:
    """The engine's version and speculative methods, as the probe through the plan's engine found them."""
    if uninstalled is not None:
        return DoctorCheck(name="engine", status="fail", reason=f"{uninstalled} is not installed", fix=_SETUP_FIX)
    if setup is None or setup.caps is None:
        if setup is not None and setup.endpoints:
            answered = sum(1 for p in setup.endpoints.values() if p.reachable)
            status = "ok" if answered == len(setup.endpoints) else "fail"
            reason = f"{answered} of {len(setup.endpoints)} endpoints answered"
            return DoctorCheck(
                name="engine",
                status=status,
                reason=reason,
                fix=None if status == "ok" else "start the servers the plan's endpoints name",
            )
        error = setup.probe_error if setup is not None else None
        return DoctorCheck(
            name="engine", status="fail", reason=f"the engine could not be probed: {error}", fix=_SETUP_FIX
        )
    caps = setup.caps
    methods = ", ".join(caps.spec_methods) or "none"
    return DoctorCheck(
        name="engine",
        status="ok" if caps.spec_methods else "warn",
        reason=f"{caps.kind} {caps.engine_version} on {caps.device_kind} ({caps.python}): "
        f"{len(caps.spec_methods)} speculative methods",
        fix=None if caps.spec_methods else "install an engine version with speculative decoding",
        details=(f"methods: {methods}",),
    )


def audit_check(findings: Sequence[Finding]) -> DoctorCheck:
    """The plan's configuration audit (the one a run's preflight makes): errors stop a run, warnings do not."""
    errors = [f for f in findings if f[0] == "error"]
    warnings = [f for f in findings if f[0] == "warning"]
    details = tuple(f"{severity} {code}: {message}" for severity, code, message in (*errors, *warnings))
    if errors:
        codes = ", ".join(code for _, code, _ in errors)
        return DoctorCheck(
            name="audit",
            status="fail",
            reason=f"the run would stop before starting: {codes}",
            fix="fix the plan as each error below says",
            details=details,
        )
    if warnings:
        codes = ", ".join(code for _, code, _ in warnings)
        return DoctorCheck(
            name="audit",
            status="warn",
            reason=f"{len(warnings)} warning(s): {codes}",
            fix="each warning says its fix",
            details=details,
        )
    return DoctorCheck(name="audit", status="ok", reason="the plan's configuration audit found nothing to fix")


def hub_check(
    needed: Sequence[NeededModel], endpoint: str | None, token_set: bool, answers: Sequence[HubAnswer]
) -> DoctorCheck:
    """Hub access and the token, for the hub models the plan names that are not in the local cache."""
    missing = [m for m in needed if m.needs_download]
    if not missing:
        return DoctorCheck(
            name="hub",
            status="ok",
            reason="nothing to download: every model the plan names is local, bundled or in the local cache",
        )
    names = ", ".join(m.label for m in missing)
    token = "HF_TOKEN is set" if token_set else "HF_TOKEN is not set"
    if endpoint is None:
        return DoctorCheck(
            name="hub",
            status="fail",
            reason=f"{names} must be downloaded, but no hub endpoint is known",
            fix="set HF_ENDPOINT (or install huggingface_hub)",
        )
    bad = [a for a in answers if a.outcome != "ok"]
    details = tuple(f"{a.repo}@{a.revision}: {a.outcome}" + (f": {a.detail}" if a.detail else "") for a in answers)
    if not bad:
        return DoctorCheck(
            name="hub", status="ok", reason=f"{endpoint} lets this host download {names} ({token})", details=details
        )
    first = bad[0]
    if first.outcome == "gated":
        fix = (
            "export HF_TOKEN with a token whose account has access"
            if not token_set
            else ("accept the repository's terms with the token's account, or use a token that has access")
        )
    elif first.outcome == "unreachable":
        fix = "run where the hub is reachable (proxy, HF_ENDPOINT of a mirror), or fetch there and copy the cache"
    else:
        fix = "check the repository id and revision in the plan"
    return DoctorCheck(
        name="hub",
        status="fail",
        reason=f"{names} must be downloaded; {first.repo}: {first.detail} ({token})",
        fix=fix,
        details=details,
    )


def disk_check(needed: Sequence[NeededModel], answers: Sequence[HubAnswer], free: dict[Path, int]) -> DoctorCheck:
    """Free disk where the models will be written (the hub cache, specselect's home) against their sizes."""
    sizes = {a.repo: a.size_bytes for a in answers}
    need: dict[Path, int] = dict.fromkeys(free, 0)
    unknown: list[str] = []
    for model in needed:
        if not model.needs_disk:
            continue
        size = model.size_bytes if model.size_bytes is not None else sizes.get(model.ref)
        if size is None:
            unknown.append(model.label)
        else:
            need[model.where] = need.get(model.where, 0) + size
    details = tuple(
        f"{where}: {format_gb(free.get(where, 0))} free, {format_gb(n)} needed" for where, n in need.items()
    )
    short = [where for where, n in need.items() if n > free.get(where, 0)]
    if short:
        where = short[0]
        return DoctorCheck(
            name="disk",
            status="fail",
            reason=f"{where}: {format_gb(need[where])} needed for the models, {format_gb(free.get(where, 0))} free",
            fix="free disk there, or point HF_HOME / SPECSELECT_HOME at a larger disk",
            details=details,
        )
    if unknown:
        return DoctorCheck(
            name="disk",
            status="warn",
            reason=f"the size of {', '.join(unknown)} is not known (the hub did not list it)",
            fix="make sure the disk holds the model's weights",
            details=details,
        )
    if not any(need.values()):
        free_now = ", ".join(f"{format_gb(n)} free at {where}" for where, n in free.items())
        return DoctorCheck(name="disk", status="ok", reason=f"nothing to fetch or prepare ({free_now})")
    return DoctorCheck(name="disk", status="ok", reason="room for every model to fetch or prepare", details=details)


def host_check(sample: HostSample, limit: float) -> DoctorCheck:
    """The host's load over a short sample, against the plan's `max_host_foreign_cpu_share`."""
    busiest = ", ".join(f"{p.name} (pid {p.pid}) {p.cores:.2f} cores" for p in sample.busiest) or "none"
    reason = (
        f"other processes used {sample.foreign_share:.0%} of {sample.scope_cpus:g} CPUs over {sample.seconds:.1f} s"
    )
    details = (f"busiest: {busiest}",)
    if sample.foreign_share > limit:
        return DoctorCheck(
            name="host_load",
            status="warn",
            reason=f"{reason} (a run leaves out scenarios above {limit:.0%})",
            fix="stop what else runs here before measuring; the results would be noisy and scenarios left out",
            details=details,
        )
    return DoctorCheck(name="host_load", status="ok", reason=reason, details=details)
