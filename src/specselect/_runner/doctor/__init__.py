"""`specselect doctor [PLAN]`: is this host ready to run the plan (or any plan)? One screen of checks.

Each check says ok, warn or fail with a one-line reason and the fix (`checks`): the driver and the devices with
their free memory and the processes on them (NVML), the engine's version and speculative methods (the probe
through the plan's engine; without a plan, the managed engine environment, never installed here), the plan's
configuration audit (the one a run's preflight makes), hub access and the token when the plan names hub models
not in the local cache, disk space for the models still to fetch or prepare, and the host's load over a short
sample. Nothing is installed, prepared, downloaded or started. Everything read from the host can be replaced
(`DoctorProbes`), so the checks are tested without a GPU, a hub or time passing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from specselect._assets.hf_cache import hub_cache_dir
from specselect._assets.hub_access import DEFAULT_TIMEOUT_S, ask_hub, hub_endpoint, hub_token
from specselect._assets.resources import free_disk_bytes
from specselect._common.home import default_home
from specselect._engines import EngineSetup, create_engine, uninstalled_environment
from specselect._engines.base import Finding
from specselect._engines.devices import read_device_usage
from specselect._measure.hostload import sample_host
from specselect._plan import LoadedPlan, load_plan
from specselect._plan.sections import ThresholdsConfig
from specselect._runner.doctor.checks import (
    audit_check,
    devices_check,
    disk_check,
    engine_check,
    host_check,
    hub_check,
)
from specselect._runner.doctor.models import NeededModel, describe, needed_models
from specselect._runner.setup import DEFAULT_PLAN
from specselect.records.doctor import DeviceUsage, DoctorCheck, DoctorReport, HostSample, HubAnswer, worst

__all__ = ["DoctorProbes", "run_doctor", "verdict"]


def _process_names() -> dict[int, str]:
    return {p.pid: str(p.info.get("name") or "?") for p in psutil.process_iter(["name"])}


def _ask_hub(endpoint: str, repo: str, revision: str, token: str | None, timeout_s: float) -> HubAnswer:
    return ask_hub(endpoint, repo, revision, token=token, timeout_s=timeout_s)


@dataclass(frozen=True)
class DoctorProbes:
    """What doctor reads from the host, each replaceable (tests: a fake NVML, a stand-in hub, a fixed sample).

    None: the real reader (`read_device_usage`, `sample_host`, `ask_hub`, `free_disk_bytes`, the environment)."""

    devices: Callable[[Mapping[int, str]], DeviceUsage] | None = None
    host: Callable[[float], HostSample] | None = None
    hub: Callable[[str, str, str, str | None, float], HubAnswer] | None = None
    free_bytes: Callable[[Path], int] | None = None


@dataclass(frozen=True)
class _Engine:
    setup: EngineSetup | None
    uninstalled: str | None
    findings: list[Finding]


def _engine(loaded: LoadedPlan, home: Path | None, audit: bool) -> _Engine:
    """Probe through the plan's engine unless its managed environment is still to install (doctor installs
    nothing); with `audit`, the plan's configuration audit on what the probe found."""
    plan = loaded.plan
    uninstalled = uninstalled_environment(plan.engine, home)
    if uninstalled is not None:
        return _Engine(None, uninstalled, [])
    engine = create_engine(plan.engine)
    setup = engine.prepare(plan, home=home, progress=lambda _line: None)
    return _Engine(setup, None, list(engine.audit(plan, setup)) if audit else [])


def _model_checks(
    needed: list[NeededModel],
    setup: EngineSetup | None,
    probes: DoctorProbes,
    timeout_s: float,
    *,
    home: Path | None,
    plan_given: bool,
) -> tuple[list[DoctorCheck], list[HubAnswer]]:
    """The hub check (asked only when a model is still to download) and the disk check, with what the hub said."""
    missing = [m for m in needed if m.needs_download]
    token = hub_token()
    endpoint = hub_endpoint(python=setup.python if setup is not None else None) if missing else None
    ask = probes.hub or _ask_hub
    answers = [ask(endpoint, m.ref, m.revision or "main", token, timeout_s) for m in missing] if endpoint else []
    hub = hub_check(needed, endpoint, token is not None, answers)
    if not plan_given:
        hub = hub.model_copy(update={"reason": "no plan given: nothing to download (give one to check its models)"})
    elif needed:
        hub = hub.model_copy(update={"details": (*hub.details, *map(describe, needed))})
    places = {m.where for m in needed if m.needs_disk} or {hub_cache_dir(), home or default_home()}
    free = {where: (probes.free_bytes or free_disk_bytes)(where) for where in places}
    return [hub, disk_check(needed, answers, free)], answers


def verdict(checks: list[DoctorCheck], usage: DeviceUsage, setup: EngineSetup | None) -> str:
    """One line: ready or not, on which devices, and what was checked."""
    checked = ", ".join(c.name.replace("_", " ") for c in checks)
    failed = [c.name for c in checks if c.status == "fail"]
    caps = setup.caps if setup is not None else None
    if not usage.devices and (caps is None or caps.on_cpu):
        where = "no GPU found: the CPU engine will be used"
    elif caps is not None and caps.device_kind == "cuda":
        where = f"{len(caps.devices)} GPU(s) for the engine"
    else:
        where = f"{len(usage.devices)} GPU(s) found"
    if failed:
        return f"not ready ({', '.join(failed)} failed); {where}; checked: {checked}"
    warned = [c.name for c in checks if c.status == "warn"]
    ready = f"ready with warnings ({', '.join(warned)})" if warned else "ready"
    return f"{ready}; {where}; checked: {checked}"


def run_doctor(
    plan_ref: str | None,
    *,
    home: Path | None = None,
    probes: DoctorProbes | None = None,
    sample_s: float = 1.0,
    hub_timeout_s: float = DEFAULT_TIMEOUT_S,
) -> DoctorReport:
    """Every check for `plan_ref` (None: the host and the managed engine environment)."""
    probes = probes or DoctorProbes()
    loaded = load_plan(plan_ref or DEFAULT_PLAN)
    engine = _engine(loaded, home, audit=plan_ref is not None)
    usage = (probes.devices or read_device_usage)(_process_names())
    checks = [
        devices_check(usage, engine.setup, frozenset({os.getpid()})),
        engine_check(engine.setup, engine.uninstalled),
    ]
    if plan_ref is not None:
        checks.append(audit_check(engine.findings))
    needed = needed_models(loaded, home) if plan_ref is not None else []
    model_checks, answers = _model_checks(
        needed, engine.setup, probes, hub_timeout_s, home=home, plan_given=plan_ref is not None
    )
    sample = (probes.host or sample_host)(sample_s)
    thresholds = loaded.plan.thresholds if plan_ref is not None else ThresholdsConfig()
    limit = thresholds.max_host_foreign_cpu_share
    checks += [*model_checks, host_check(sample, 1.0 if limit is None else limit)]
    return DoctorReport(
        plan=plan_ref,
        status=worst([c.status for c in checks]),
        verdict=verdict(checks, usage, engine.setup),
        checks=tuple(checks),
        devices=usage,
        hub=tuple(answers),
        host=sample,
    )
