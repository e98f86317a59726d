"""The report's tables and lists as plain strings: one cell source for both the HTML and the Markdown report.

The decision table's cells come from `console.report_decision_rows` (the terminal table's `decision_rows` plus
peak memory), so the three renderings never disagree.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specselect._core.gates import AdmissionResult, FactValue
from specselect._report.console import REPORT_DECISION_COLUMNS, fmt_mib, fmt_ratio, report_decision_rows
from specselect._report.data import ReportData
from specselect.records.evidence.result import EvidencePolicy
from specselect.records.group import GroupResult, ScenarioRun
from specselect.records.handoff import HandoffCandidate, HandoffScenario
from specselect.records.host import HostInfo
from specselect.records.measurement import Stats
from specselect.records.results import Manifest, PreflightFile

__all__ = [
    "NODES_LEAD",
    "TableSpec",
    "Verdict",
    "admission_spec",
    "command_lines",
    "deciding_facts",
    "decision_spec",
    "file_rows",
    "fmt_fact",
    "groups_spec",
    "identity_sections",
    "measurements_spec",
    "nodes_spec",
    "recommendations",
    "verdicts",
]


@dataclass(frozen=True)
class TableSpec:
    """Column names and rows of plain-text cells (renderers escape them)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Verdict:
    """One candidate's line: how far it got and what was decided per scenario."""

    candidate: str
    family: str
    run_status: str
    reason: str
    hint: str | None
    verdict: str


def fmt_fact(value: FactValue) -> str:
    """A fact value as text (`-` for null, floats without noise)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _ms(stats: Stats | None, attr: str) -> str:
    value = getattr(stats, attr) if stats is not None else None
    return "-" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def decision_spec(data: ReportData) -> TableSpec | None:
    """Group x scenario decisions (None before evidence exists)."""
    if data.evidence is None:
        return None
    rows = report_decision_rows(data.evidence, data.groups)
    return TableSpec(columns=REPORT_DECISION_COLUMNS, rows=tuple(tuple(r) for r in rows))


def deciding_facts(result: AdmissionResult) -> list[tuple[str, str]]:
    """The facts of the gate that decided (for `runnable`: the capacity estimate that let it through)."""
    gate = result.gate if result.gate != "none" else "capacity"
    return [(k, fmt_fact(v)) for k, v in result.facts.items() if k.startswith(f"{gate}.")]


def admission_spec(data: ReportData) -> TableSpec | None:
    """Every candidate with its admission status, the deciding gate, the reason and that gate's facts."""
    if data.admission is None:
        return None
    rows = []
    for r in data.admission.results:
        facts = "; ".join(f"{k.split('.', 1)[1]}={v}" for k, v in deciding_facts(r)) or "-"
        rows.append((r.candidate, r.family, r.run_status.value, r.gate, r.reason, facts))
    return TableSpec(columns=("candidate", "family", "status", "gate", "reason", "facts"), rows=tuple(rows))


def groups_spec(data: ReportData) -> TableSpec:
    """How each group ended (from the group results, or the manifest line when a result is missing)."""
    rows = []
    for entry in data.manifest.groups:
        g = data.group(entry.name)
        if g is None:
            rows.append((entry.name, entry.role, entry.family, entry.run_status.value, entry.reason, "-", "-", "-"))
            continue
        lives = [g, *g.relaunches]
        startups = [f"{x.launch.startup_s:.1f} s" for x in lives if x.launch and x.launch.startup_s is not None]
        startup = ", ".join(startups) or "-"
        runs = g.all_scenario_runs()
        done = sum(1 for s in runs if s.status == "completed")
        scenarios = f"{done}/{len(runs)}" if runs else "-"
        rows.append((g.group, g.role, g.family, g.run_status.value, g.reason, g.hint or "-", startup, scenarios))
    columns = ("group", "role", "family", "run", "reason", "hint", "start-up", "scenarios done")
    return TableSpec(columns=columns, rows=tuple(rows))


NODES_LEAD = (
    "The cluster nodes the blocks ran on. Every candidate launch was paired with the baseline launch of its own "
    "block, on the same node; a node whose baseline ran far from the median node's is flagged, not dropped."
)


def nodes_spec(data: ReportData) -> TableSpec | None:
    """A cluster run's nodes: what each ran and its baseline's rate against the median node's (None on one
    machine)."""
    if data.cluster is None:
        return None
    factor = data.cluster.baseline_outlier
    rows = []
    for node in data.cluster.nodes.values():
        ratio = "-" if node.baseline_rate_ratio is None else f"{node.baseline_rate_ratio:.2f}x"
        flag = f"outlier (beyond {factor:g}x)" if node.outlier else "-"
        host = node.host
        machine = f"{host.cpu_model or host.machine}, {host.logical_cpus} CPUs, {host.memory_total_mb:.0f} MB"
        rows.append(
            (node.hostname, node.node_id[:12], machine, str(node.launches), str(node.baseline_launches), ratio, flag)
        )
    columns = ("node", "id", "machine", "launches", "baseline launches", "baseline rate vs median node", "flag")
    return TableSpec(columns=columns, rows=tuple(rows))


def _acceptance(run: ScenarioRun) -> str:
    tel = run.telemetry
    if tel is None:
        return "-"
    if tel.acceptance_rate is None:
        return "not exported" if tel.source == "not_exported" else "-"
    text = f"{tel.acceptance_rate:.2f} (len {tel.mean_acceptance_length or 0:.2f})"
    cache = run.response_cache
    if cache is not None:  # the state the acceptance was measured in (records.responsecache)
        text += f"; response cache {cache.setting.state}"
        text += f", {cache.replayed_requests} replayed: inflated" if cache.inflated else ""
    return text


def measurements_spec(data: ReportData) -> TableSpec | None:
    """Absolute numbers per group and scenario, baseline first: what the ratios were computed from."""
    rows = []
    for g in data.groups:
        for s in g.all_scenario_runs():
            summ = s.summary
            requests = f"{summ.n_success}/{summ.n_requests}" if summ else "-"
            tput = f"{summ.output_throughput_tok_s:.1f}" if summ and summ.output_throughput_tok_s else "-"
            rows.append(
                (
                    g.group,
                    f"{s.scenario} (launch {s.launch + 1})" if g.relaunches else s.scenario,
                    s.status if not s.error else f"{s.status}: {s.error}",
                    requests,
                    tput,
                    _ms(summ.ttft_ms if summ else None, "p50"),
                    _ms(summ.ttft_ms if summ else None, "p95"),
                    _ms(summ.tpot_ms if summ else None, "p50"),
                    _ms(summ.e2e_ms if summ else None, "p50"),
                    _ms(summ.e2e_ms if summ else None, "p95"),
                    fmt_mib(s.peak_memory.mb if s.peak_memory else None),
                    _acceptance(s),
                )
            )
    if not rows:
        return None
    columns = (
        "group",
        "scenario",
        "status",
        "requests ok",
        "output tok/s",
        "TTFT p50 ms",
        "TTFT p95 ms",
        "TPOT p50 ms",
        "E2E p50 ms",
        "E2E p95 ms",
        "peak memory",
        "acceptance",
    )
    return TableSpec(columns=columns, rows=tuple(rows))


def _speedup_text(c: HandoffCandidate) -> str:
    text = fmt_ratio(c.throughput_speedup)
    if c.speedup_low is not None and c.speedup_high is not None:
        text += f" [{c.speedup_low:.2f}, {c.speedup_high:.2f}]"
    return text


def _recommendation(s: HandoffScenario) -> str:
    chosen = next((c for c in s.candidates if c.candidate == s.recommended), None)
    if chosen is not None:
        return (
            f"use {chosen.candidate} ({chosen.family}): speedup {_speedup_text(chosen)}, "
            f"TTFT p95 {fmt_ratio(chosen.ttft_ratio)}, E2E p95 {fmt_ratio(chosen.e2e_p95_ratio)}, "
            f"parity {chosen.parity or '-'}"
        )
    if not s.candidates:
        return "keep the target-only baseline: no candidate produced comparable evidence"
    others = ", ".join(f"{c.candidate} {c.decision} ({c.reason})" for c in s.candidates)
    return f"keep the target-only baseline: no candidate accepted ({others})"


def recommendations(data: ReportData) -> list[tuple[str, str]]:
    """Scenario -> the hand-off's recommendation in one line (empty before the hand-off exists)."""
    if data.handoff is None:
        return []
    return [(s.scenario, _recommendation(s)) for s in data.handoff.scenarios]


def verdicts(data: ReportData) -> list[Verdict]:
    """One line per candidate: its run status and the per-scenario verdict."""
    found = data.evidence.verdicts if data.evidence else {}
    out = []
    for entry in data.manifest.groups:
        if entry.role != "candidate":
            continue
        g: GroupResult | None = data.group(entry.name)
        out.append(
            Verdict(
                candidate=entry.name,
                family=entry.family,
                run_status=(g.run_status if g else entry.run_status).value,
                reason=g.reason if g else entry.reason,
                hint=g.hint if g else None,
                verdict=found.get(entry.name, "no evidence yet"),
            )
        )
    return out


def _get(mapping: Mapping[str, Any], *path: str) -> Any:
    node: Any = mapping
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _plan_items(plan: Mapping[str, Any]) -> list[tuple[str, str]]:
    items = []
    for section, keys in (
        ("sampling", ("temperature", "top_p", "top_k", "in_request", "max_tokens", "seed", "parity_samples")),
        ("run", ("concurrency", "warmup_requests", "repeats", "prefix_cache", "load", "order_seed")),
    ):
        for key in keys:
            value = _get(plan, section, key)
            if value is not None:
                shown = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
                items.append((f"{section}.{key}", shown))
    return items


_Items = list[tuple[str, str]]


def _run_items(m: Manifest) -> _Items:
    return [
        ("label", m.label),
        ("status", m.status),
        ("created / updated", f"{m.created_at} / {m.updated_at}"),
        ("plan", m.plan_source),
        ("plan hash", m.plan_hash),
        ("specselect", f"{m.tool_version} (results schema {m.schema_version})"),
    ]


def _engine_items(m: Manifest, pre: PreflightFile | None) -> _Items:
    engine = [("engine", f"{m.engine_kind} {m.engine_version or '(version unknown)'}")]
    if pre is None:
        return engine
    if pre.engine_python:
        engine.append(("engine python", pre.engine_python))
    if pre.engine is not None:
        caps = pre.engine
        engine.append(("device", f"{caps.device_kind}: " + ", ".join(d.name for d in caps.devices)))
        engine.append(("memory budget", f"{caps.memory_budget_mb:,} MiB ({caps.memory_budget_basis})"))
        engine.append(("versions", ", ".join(f"{k} {v or '-'}" for k, v in sorted(caps.versions.items()))))
    return engine


def _resolved_model_items(pre: PreflightFile) -> _Items:
    """The preflight's resolved identities: the target, other tracks' targets, the proposers."""
    models = []
    target = pre.target
    if target is not None:
        arch = ", ".join(target.architectures) or "-"
        models.append(("target architecture", f"{arch} ({target.model_type or '-'})"))
        if target.num_params:
            models.append(("target parameters", f"{target.num_params:,}"))
    for track, resolved in pre.tracks.items():
        if target is None or resolved.snapshot != target.snapshot:
            models.append((f"target of track {track}", f"{resolved.ref} @ {resolved.snapshot or '-'}"))
    for name, prop in pre.proposers.items():
        if prop is not None:
            models.append((f"proposer of {name}", f"{prop.ref} @ {prop.snapshot or '-'}"))
    return models


def _model_items(data: ReportData) -> _Items:
    m, pre = data.manifest, data.preflight
    models = [("target", m.target_ref), ("target snapshot", m.target_snapshot or "-")]
    if pre is not None:
        models.extend(_resolved_model_items(pre))
    # A proposer the preflight could not resolve is still named by the snapshot its group recorded.
    for g in data.groups:
        if g.proposer_snapshot and not (pre and pre.proposers.get(g.group)):
            models.append((f"proposer of {g.group}", g.proposer_snapshot))
    return models


def _workload_items(pre: PreflightFile) -> _Items:
    return [
        (n, f"{w.source} v{w.version}, {w.item_count} items, sha256 {w.sha256[:16]}") for n, w in pre.workloads.items()
    ]


def _policy_items(pol: EvidencePolicy) -> _Items:
    th = pol.thresholds
    limit = "none" if th.max_peak_memory_mb is None else f"{th.max_peak_memory_mb:,.0f} MiB"
    return [
        ("min throughput speedup", f"{th.min_throughput_speedup:.2f}x"),
        ("max TTFT p95 ratio", f"{th.max_ttft_regression_ratio:.2f}x"),
        ("max E2E p95 ratio", f"{th.max_e2e_p95_regression_ratio:.2f}x"),
        ("max peak memory", limit),
        (
            "confidence",
            f"{pol.bootstrap.level:.0%} {pol.bootstrap.method} bootstrap, "
            f"{pol.bootstrap.n_resamples} resamples, seed {pol.bootstrap.seed}",
        ),
        ("parity unit", pol.parity_unit),
        ("rule", pol.rule),
    ]


def _host_items(h: HostInfo) -> _Items:
    cpus = f"{h.logical_cpus or '-'} logical / {h.physical_cpus or '-'} physical"
    return [
        ("os", f"{h.os} (kernel {h.kernel}, {h.machine})"),
        ("cpu", f"{h.cpu_model or '-'}, {cpus}"),
        ("memory", f"{h.memory_total_mb:,.0f} MiB"),
        ("python", f"{h.python_version} ({h.python_executable})"),
        ("nvidia driver", h.nvidia_driver or "none"),
    ]


def identity_sections(data: ReportData) -> list[tuple[str, list[tuple[str, str]]]]:
    """Titled key/value lists: run, engine, models, workloads, measurement, policy and host."""
    m, pre = data.manifest, data.preflight
    sections = [("Run", _run_items(m)), ("Engine", _engine_items(m, pre)), ("Models", _model_items(data))]
    if pre is not None:
        sections.append(("Workloads", _workload_items(pre)))
    sections.append(("Measurement", _plan_items(m.plan)))
    if data.evidence is not None:
        sections.append(("Policy", _policy_items(data.evidence.policy)))
    if pre is not None:
        sections.append(("Host", _host_items(pre.host)))
    return sections


def command_lines(data: ReportData) -> list[tuple[str, str]]:
    """(what, shell command): the specselect command, then each group's server launch (already redacted)."""
    out = [("specselect", shlex.join(data.manifest.command) if data.manifest.command else "-")]
    out.extend((g.group, shlex.join(g.launch.command)) for g in data.groups if g.launch is not None)
    return out


def file_rows(data: ReportData) -> list[tuple[str, str]]:
    """(relative path, sha256 or `-`) of every result file, log and records file of the run."""
    rows = dict(data.manifest.files)
    for g in data.groups:
        if g.log_path:
            rows.setdefault(g.log_path, "-")
        for s in g.scenarios:
            if s.records_path:
                rows.setdefault(s.records_path, s.records_sha256 or "-")
    return sorted(rows.items())
