"""Preflight: identities, engine capabilities, workloads and the configuration audit, before any server starts."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from specselect.artifacts.results import AuditFinding, PreflightFile
from specselect.assets.refs import ResolvedModel, resolve_model
from specselect.engines.hostinfo import collect_host_info
from specselect.engines.vllm.envsetup import EngineEnv, engine_env_from_python, ensure_managed_vllm_env
from specselect.engines.vllm.probe import EngineCapabilities, probe_vllm
from specselect.errors import EngineSetupError, UsageError
from specselect.plan import LoadedPlan
from specselect.runner.progress import Progress
from specselect.workloads.loader import load_workload
from specselect.workloads.model import Workload

__all__ = ["EngineSetup", "Preflight", "audit_plan", "prepare_engine", "run_preflight"]

_MIN_FREE_DISK_MB = 1024


@dataclass(frozen=True)
class EngineSetup:
    """The engine environment a plan points at and what its probe found (None when it could not be probed)."""

    env: EngineEnv | None
    caps: EngineCapabilities | None
    probe_error: str | None


@dataclass(frozen=True)
class Preflight:
    """Everything later stages need, plus the document saved as `preflight.json`."""

    document: PreflightFile
    engine: EngineSetup
    target: ResolvedModel
    workloads: dict[str, Workload]

    @property
    def errors(self) -> list[AuditFinding]:
        """Audit findings that stop the run."""
        return [f for f in self.document.audit if f.severity == "error"]


def prepare_engine(loaded: LoadedPlan, home: Path | None, progress: Progress) -> EngineSetup:
    """Install (managed) or locate the engine environment, then probe it without starting a server."""
    engine = loaded.plan.engine
    if engine.kind != "vllm":
        raise UsageError(
            f"engine kind {engine.kind!r} cannot be launched by this version of specselect",
            location=f"{loaded.source}: engine.kind",
            fix='use kind = "vllm"',
        )
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


def audit_plan(loaded: LoadedPlan, setup: EngineSetup, results_root: Path) -> list[AuditFinding]:
    """Configuration problems found before anything starts; `error` findings stop the run."""
    plan = loaded.plan
    findings: list[AuditFinding] = []

    def add(severity: str, code: str, message: str) -> None:
        findings.append(AuditFinding.model_validate({"severity": severity, "code": code, "message": message}))

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
    if setup.caps is None:
        add("warning", "engine_not_probed", f"engine capabilities unknown: {setup.probe_error}")
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
            f"engine: vLLM {setup.caps.engine_version} on {setup.caps.device_kind}, "
            f"{len(setup.caps.spec_methods)} speculative methods"
        )
    progress.info(f"target: {plan.target.model}")
    target = resolve_model(
        loaded.resolve_model_ref(plan.target.model),
        revision=plan.target.revision,
        home=home,
        env=setup.env,
        prepare=True,
    )
    progress.info(f"target snapshot: {target.snapshot[:16]} ({target.source}, {target.path})")
    workloads: dict[str, Workload] = {}
    for name, ref in loaded.workload_sources().items():
        workloads[name] = load_workload(ref, name=name, base_dir=loaded.base_dir)
        ident = workloads[name].identity
        progress.info(f"workload {name}: {ident.item_count} items, sha256 {ident.sha256[:16]}")
    findings = audit_plan(loaded, setup, results_root)
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
    )
    return Preflight(document=document, engine=setup, target=target, workloads=workloads)
