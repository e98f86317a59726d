"""Preflight: identities, engine capabilities, workloads and the configuration audit, before any server starts.

Launched engines (vllm, and kinds registered in `specselect.engines.registry`) resolve one target per track;
kind "openai" starts nothing and probes every group's endpoint instead (identity, version, metrics).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from specselect.admission.capacity import Capabilities
from specselect.artifacts.results import AuditFinding, PreflightFile
from specselect.assets.refs import ResolvedModel, resolve_model
from specselect.engines.hostinfo import collect_host_info
from specselect.engines.localnet import port_is_free
from specselect.engines.openai.probe import EndpointProbe, probe_endpoint
from specselect.engines.registry import get_engine
from specselect.engines.sglang.probe import SglangCapabilities
from specselect.engines.vllm.envsetup import EngineEnv, engine_env_from_python, ensure_managed_vllm_env
from specselect.engines.vllm.probe import EngineCapabilities, probe_vllm
from specselect.errors import EngineSetupError
from specselect.plan import BASELINE_GROUP, LoadedPlan
from specselect.runner.progress import Progress
from specselect.workloads.loader import load_workload
from specselect.workloads.model import Workload

__all__ = ["EngineSetup", "Preflight", "audit_plan", "prepare_engine", "probe_endpoints", "run_preflight"]

_MIN_FREE_DISK_MB = 1024


@dataclass(frozen=True)
class EngineSetup:
    """The engine environment a plan points at and what its probe found (None when it could not be probed)."""

    env: EngineEnv | None
    caps: Capabilities | None
    probe_error: str | None


@dataclass(frozen=True)
class Preflight:
    """Everything later stages need, plus the document saved as `preflight.json`."""

    document: PreflightFile
    engine: EngineSetup
    target: ResolvedModel | None
    """The default track's target; None for kind "openai"."""
    workloads: dict[str, Workload]
    targets: dict[str, ResolvedModel] = field(default_factory=dict)
    """Track name -> its resolved target (launched engines)."""
    endpoints: dict[str, EndpointProbe] = field(default_factory=dict)
    """Kind "openai": group name -> its endpoint probe."""

    @property
    def errors(self) -> list[AuditFinding]:
        """Audit findings that stop the run."""
        return [f for f in self.document.audit if f.severity == "error"]


def _registered_engine(loaded: LoadedPlan) -> EngineSetup:
    engine = loaded.plan.engine
    factory = get_engine(engine.kind)  # ConfigError naming the known kinds when this one is not registered
    try:
        caps = factory(python=engine.python, command=engine.command).probe()
    except EngineSetupError as exc:
        return EngineSetup(env=None, caps=None, probe_error=exc.one_line())
    if not isinstance(caps, EngineCapabilities | SglangCapabilities):
        return EngineSetup(env=None, caps=None, probe_error=f"{engine.kind} probe gave no engine capabilities")
    return EngineSetup(env=None, caps=caps, probe_error=None)


def prepare_engine(loaded: LoadedPlan, home: Path | None, progress: Progress) -> EngineSetup:
    """Install (managed) or locate the engine environment, then probe it without starting a server.

    Kind "openai" has no environment (its endpoints are probed by `probe_endpoints`); other non-vLLM kinds
    are created through the engine registry.
    """
    engine = loaded.plan.engine
    if engine.kind == "openai":
        return EngineSetup(env=None, caps=None, probe_error=None)
    if engine.kind != "vllm":
        return _registered_engine(loaded)
    env: EngineEnv | None
    if engine.python is not None and engine.python.startswith("managed:"):
        progress.info("engine environment: managed CPU vLLM (installed on first use, ~2 min)")
        env = ensure_managed_vllm_env(home, progress=progress.info)
    elif engine.python is not None:
        env = engine_env_from_python(Path(engine.python).expanduser())
    else:
        return EngineSetup(env=None, caps=None, probe_error="engine.command given without engine.python: not probed")
    try:
        caps = probe_vllm(env, cache_dir=(home / "cache" / "probe") if home else None)
    except EngineSetupError as exc:
        return EngineSetup(env=env, caps=None, probe_error=exc.one_line())
    return EngineSetup(env=env, caps=caps, probe_error=None)


def _key_envs(loaded: LoadedPlan) -> list[str]:
    """Every API-key variable the plan names (the engine's and the endpoints'), once each."""
    names = [loaded.plan.engine.api_key_env, *(g.endpoint.api_key_env for g in loaded.plan.groups if g.endpoint)]
    return list(dict.fromkeys(n for n in names if n))


def probe_endpoints(loaded: LoadedPlan, progress: Progress) -> dict[str, EndpointProbe]:
    """Kind "openai": probe every group's endpoint (models, version, metrics); no completion is sent.

    An endpoint whose API-key variable is unset is not probed (the audit reports the variable).
    """
    out: dict[str, EndpointProbe] = {}
    for group in loaded.plan.groups:
        ep = group.endpoint
        if ep is None:
            continue
        key_env = ep.api_key_env or loaded.plan.engine.api_key_env
        if key_env and not os.environ.get(key_env):
            out[group.name] = EndpointProbe(
                base_url=ep.base_url,
                model=ep.model,
                api_key_env=key_env,
                reachable=False,
                error=f"not probed: environment variable {key_env} is not set",
            )
            continue
        probe = probe_endpoint(ep.base_url, ep.model, api_key_env=key_env)
        out[group.name] = probe
        if probe.usable:
            version = probe.engine_version or "version not exposed"
            progress.info(f"{group.name}: {ep.base_url} serves {ep.model} ({version}; metrics {probe.metrics})")
        else:
            progress.info(f"{group.name}: {ep.base_url}: {probe.error}")
    return out


def _endpoint_findings(loaded: LoadedPlan, endpoints: dict[str, EndpointProbe]) -> list[tuple[str, str, str]]:
    plan = loaded.plan
    found: list[tuple[str, str, str]] = []
    for track in plan.tracks:
        base = endpoints.get(track.name)
        if base is None or not base.usable:
            why = base.error if base else "not probed"
            found.append(("error", "baseline_endpoint_unusable", f"{track.name} (nothing can be compared): {why}"))
            continue
        for name in track.members:
            cand = endpoints.get(name)
            if cand is not None and cand.usable and cand.target_snapshot != base.target_snapshot:
                found.append(
                    (
                        "warning",
                        "target_identity_differs",
                        f"{name} reports {cand.target_snapshot}, its baseline {base.target_snapshot}: "
                        "their pairs will be incomparable",
                    )
                )
    silent = [name for name, p in endpoints.items() if p.usable and p.metrics != "exported"]
    if silent:
        found.append(
            (
                "warning",
                "metrics_not_exported",
                f"{', '.join(silent)}: no /metrics: acceptance stays null and other traffic cannot be detected",
            )
        )
    undeclared = [g.name for g in plan.groups if g.endpoint is not None and g.endpoint.peak_memory_mb is None]
    if undeclared:
        found.append(
            (
                "warning",
                "peak_memory_not_measured",
                f"{', '.join(undeclared)}: specselect cannot sample a server it did not start; declare "
                "endpoint.peak_memory_mb (recorded as declared) or the evidence stays incomplete",
            )
        )
    return found


def audit_plan(
    loaded: LoadedPlan,
    setup: EngineSetup,
    results_root: Path,
    endpoints: dict[str, EndpointProbe] | None = None,
) -> list[AuditFinding]:
    """Configuration problems found before anything starts; `error` findings stop the run."""
    plan = loaded.plan
    findings: list[AuditFinding] = []

    def add(severity: str, code: str, message: str) -> None:
        findings.append(AuditFinding.model_validate({"severity": severity, "code": code, "message": message}))

    for name in _key_envs(loaded):
        if not os.environ.get(name):
            add("error", "api_key_env_unset", f"environment variable {name} is not set: export it, or drop api_key_env")
    if plan.engine.kind == "openai":
        for severity, code, message in _endpoint_findings(loaded, endpoints or {}):
            add(severity, code, message)
    for track in plan.tracks[1:]:
        add(
            "info",
            "track",
            f"{', '.join(track.members)} run on {track.target.model}: paired with their own baseline {track.name}; "
            "only within-pair ratios compare across tracks",
        )
    if plan.run.parity_pass == "auto" and plan.sampling.temperature > 0:
        add("info", "parity_pass_skipped", "the logprob parity pass runs only at temperature 0")

    if plan.sampling.temperature > 0:
        add(
            "warning",
            "parity_not_exact",
            f"temperature {plan.sampling.temperature} > 0: outputs are sampled, exact parity cannot be checked",
        )
    caps = setup.caps
    eager = "--enforce-eager" in plan.engine.args
    if caps is not None and caps.device_kind == "cpu" and eager and plan.target.dtype in ("bfloat16", "auto"):
        add(
            "warning",
            "cpu_bf16_eager_parity",
            "bfloat16 in eager mode on CPU changes outputs under batched verification: "
            'use dtype = "float32" for exact parity',
        )
    if plan.run.repeats < 2:
        add(
            "warning",
            "single_repeat",
            "repeats = 1: no baseline self-consistency control and wide confidence intervals",
        )
    if setup.caps is None and plan.engine.kind != "openai":
        add("warning", "engine_not_probed", f"engine capabilities unknown: {setup.probe_error}")
    eng = plan.engine
    if eng.kind != "openai" and eng.port and not port_is_free(eng.host, eng.port):
        add(
            "error",
            "port_in_use",
            f"port {eng.port} on {eng.host} is already in use: stop what listens there, "
            "choose another engine.port, or use port = 0 for a free one",
        )
    try:
        results_root.mkdir(parents=True, exist_ok=True)
        probe = results_root / ".specselect-write-test"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        add("error", "results_not_writable", f"{results_root}: {exc.strerror or exc}")
    else:
        free_mb = shutil.disk_usage(results_root).free / 2**20
        if free_mb < _MIN_FREE_DISK_MB:
            add("error", "disk_full", f"{results_root}: only {free_mb:.0f} MB free (need >= {_MIN_FREE_DISK_MB} MB)")
    if not any(c.enabled for c in plan.candidates if not c.is_baseline):
        add("warning", "no_enabled_candidates", "no candidate is enabled: only the baseline will run")
    return findings


def run_preflight(
    loaded: LoadedPlan,
    *,
    home: Path | None,
    results_root: Path,
    label_existed: bool,
    progress: Progress,
) -> Preflight:
    """Resolve the engine, the target and the workloads, and audit the configuration."""
    t0 = time.monotonic()
    plan = loaded.plan
    progress.stage("preflight")
    host = collect_host_info()
    progress.info(f"host: {host.cpu_model or host.machine}, {host.logical_cpus} CPUs, {host.memory_total_mb:.0f} MB")
    setup = prepare_engine(loaded, home, progress)
    if setup.caps is not None:
        progress.info(
            f"engine: {setup.caps.kind} {setup.caps.engine_version} on {setup.caps.device_kind}, "
            f"{len(setup.caps.spec_methods)} speculative methods"
        )
    targets: dict[str, ResolvedModel] = {}
    endpoints: dict[str, EndpointProbe] = {}
    if plan.engine.kind == "openai":
        endpoints = probe_endpoints(loaded, progress)
    else:
        for track in plan.tracks:
            progress.info(f"target{'' if track.is_default else f' of {track.name}'}: {track.target.model}")
            resolved = resolve_model(
                loaded.resolve_model_ref(track.target.model),
                revision=track.target.revision,
                home=home,
                env=setup.env,
                prepare=True,
            )
            progress.info(f"target snapshot: {resolved.snapshot[:16]} ({resolved.source}, {resolved.path})")
            targets[track.name] = resolved
    workloads: dict[str, Workload] = {}
    for name, ref in loaded.workload_sources().items():
        workloads[name] = load_workload(ref, name=name, base_dir=loaded.base_dir)
        ident = workloads[name].identity
        progress.info(f"workload {name}: {ident.item_count} items, sha256 {ident.sha256[:16]}")
    findings = audit_plan(loaded, setup, results_root, endpoints)
    target = targets.get(BASELINE_GROUP)
    document = PreflightFile(
        label=plan.label,
        plan_hash=loaded.plan_hash,
        host=host,
        engine_kind=plan.engine.kind,
        engine_python=str(setup.env.python) if setup.env else None,
        engine=setup.caps,
        target=target,
        proposers={},
        workloads={name: w.identity for name, w in workloads.items()},
        audit=tuple(findings),
        label_existed=label_existed,
        seconds=round(time.monotonic() - t0, 3),
        tracks=targets,
        endpoints=endpoints,
    )
    return Preflight(
        document=document, engine=setup, target=target, workloads=workloads, targets=targets, endpoints=endpoints
    )
