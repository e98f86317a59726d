"""`report.md`: the decision table, recommendations, verdicts, admission matrix and identities, for pasting
into a pull request or a ticket. Cells are the HTML report's (`tables.py`); every string is Markdown-escaped.
"""

from __future__ import annotations

import html
import re

from specselect._report.capacity_tables import CAPACITY_LEAD, capacity_spec
from specselect._report.console import estimand_lines
from specselect._report.data import ReportData
from specselect._report.evidence_tables import controls_spec, distribution_spec, prediction_spec, rounds_spec
from specselect._report.handoff_tables import mix_lines, mix_spec, serve_blocks
from specselect._report.segment_tables import segment_lead, segment_lines, segment_spec
from specselect._report.startup_tables import STARTUP_LEAD, engine_warning_lines, startups_spec
from specselect._report.sweep_tables import (
    budget_line,
    crossover_spec,
    early_stop_lines,
    goodput_spec,
    length_spec,
    schedule_specs,
    temperature_spec,
)
from specselect._report.tables import (
    NODES_LEAD,
    TableSpec,
    admission_spec,
    command_lines,
    decision_spec,
    identity_sections,
    nodes_spec,
    recommendations,
    verdicts,
)

__all__ = ["md_table", "md_text", "render_markdown"]

_SPECIAL = re.compile(r"([\\`*|\[\]#])")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_text(value: object) -> str:
    """One line of inline Markdown showing `value` literally (no markup, no HTML, no table breaks)."""
    text = " ".join(str(value).split())
    text = html.escape(text, quote=False)
    text = _SPECIAL.sub(r"\\\1", text)
    # Underscores inside words (g0_target_only) never emphasise in CommonMark; only edge ones need escaping.
    return _EDGE_UNDERSCORE.sub(r"\\_", text)


def md_table(spec: TableSpec) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = [
        "| " + " | ".join(md_text(c) for c in spec.columns) + " |",
        "|" + "|".join("---" for _ in spec.columns) + "|",
    ]
    lines.extend("| " + " | ".join(md_text(v) or " " for v in row) + " |" for row in spec.rows)
    return "\n".join(lines)


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}console\n{text}\n{fence}"


def _sweeps(data: ReportData) -> list[str]:
    out: list[str] = []
    for title, spec in (
        ("Speedup and acceptance vs temperature", temperature_spec(data)),
        ("Speedup vs concurrency: where it stops paying", crossover_spec(data)),
        ("Proposal length: the smallest statistically as good as the best", length_spec(data)),
        ("Goodput under the SLOs", goodput_spec(data)),
    ):
        if spec is not None:
            out.extend(["", f"### {md_text(title)}", "", md_table(spec)])
    for title, spec in schedule_specs(data):
        out.extend(["", f"### {md_text('Per-batch-size schedule vs static vs off: ' + title)}", "", md_table(spec)])
    stops = early_stop_lines(data)
    if stops:
        out.extend(["", "**Early stops**", ""])
        out.extend(f"- {md_text(line)}" for line in stops)
    budget = budget_line(data)
    if budget is not None:
        out.extend(["", f"**Budget**: {md_text(budget)}"])
    return ["", "## Sweeps", *out] if out else []


def _mix(data: ReportData) -> list[str]:
    lines = mix_lines(data)
    if not lines:
        return []
    out = ["", "**For your traffic mix**", "", *(f"- {md_text(line)}" for line in lines)]
    spec = mix_spec(data)
    if spec is not None:
        out.extend(["", md_table(spec)])
    for block in serve_blocks(data):
        out.extend(["", f"**What to type: {md_text(block.title)}** (measured on {md_text(block.measured_on)})", ""])
        out.append(_fence(block.command))
        if block.note:
            out.extend(["", f"> {md_text(block.note)}"])
    return out


def _segments(data: ReportData) -> list[str]:
    spec, lead = segment_spec(data), segment_lead(data)
    if spec is None or lead is None:
        return []
    out = ["", "## Where it pays: input length and category", "", md_text(lead), ""]
    out.extend(f"- **{md_text(where)}**: {md_text(text)}" for where, text in segment_lines(data))
    return [*out, "", md_table(spec)]


def _certainty(data: ReportData) -> list[str]:
    out: list[str] = []
    for title, spec in (
        ("Paired rounds: each round's ratio and the interval's level and variance", rounds_spec(data)),
        ("A/A controls: the baseline's configuration judged as a candidate", controls_spec(data)),
        ("Sampled outputs: the distribution test at temperature > 0", distribution_spec(data)),
        ("Predicted vs measured decode speedup", prediction_spec(data)),
    ):
        if spec is not None:
            out.extend(["", f"### {md_text(title)}", "", md_table(spec)])
    return ["", "## How sure", *out] if out else []


def _capacity(data: ReportData) -> list[str]:
    spec = capacity_spec(data.evidence)
    if spec is None:
        return []
    return ["", "## What it costs in KV cache", "", md_text(CAPACITY_LEAD), "", md_table(spec)]


def _startups(data: ReportData) -> list[str]:
    spec = startups_spec(data)
    warnings = engine_warning_lines(data)
    if spec is None and not warnings:
        return []
    out = ["", "## Start-ups", "", md_text(STARTUP_LEAD)]
    if spec is not None:
        out.extend(["", md_table(spec)])
    if warnings:
        out.extend(["", "The engine warned at start-up, about what it measures:", ""])
        out.extend(f"- {md_text(line)}" for line in warnings)
    return out


def render_markdown(data: ReportData) -> str:
    """The Markdown summary of one run."""
    m = data.manifest
    out = [f"# specselect report: {md_text(m.label)}", ""]
    out.append(
        f"plan {md_text(m.plan_source)} · engine {md_text(m.engine_kind)} {md_text(m.engine_version or '?')} · "
        f"target {md_text(m.target_ref)} · status {md_text(m.status)} · updated {md_text(m.updated_at)}"
    )
    out.append("")
    if data.notes:
        out.extend(f"> **Note:** {md_text(n)}" for n in data.notes)
        out.append("")
    base = data.baseline_name
    out.append(f"## Decisions (candidate vs {md_text(base)})")
    out.append("")
    spec = decision_spec(data)
    if spec is None:
        out.append("No evidence yet.")
    else:
        out.append(md_table(spec))
    if data.evidence is not None:
        out.extend(["", *(f"- {md_text(line)}" for line in estimand_lines(data.evidence))])
    recos = recommendations(data)
    if recos:
        out.extend(["", "**Recommendation per scenario**", ""])
        out.extend(f"- **{md_text(s)}**: {md_text(text)}" for s, text in recos)
    out.extend(_mix(data))
    out.extend(["", "## Verdicts per candidate", ""])
    for v in verdicts(data):
        hint = f" — {md_text(v.hint)}" if v.hint else ""
        out.append(
            f"- **{md_text(v.candidate)}** ({md_text(v.family)}, {md_text(v.run_status)}: {md_text(v.reason)}): "
            f"{md_text(v.verdict)}{hint}"
        )
    out.extend(_capacity(data))
    out.extend(_segments(data))
    out.extend(_sweeps(data))
    out.extend(_certainty(data))
    adm = admission_spec(data)
    if adm is not None:
        out.extend(["", "## Admission matrix", "", md_table(adm)])
    nodes = nodes_spec(data)
    if nodes is not None:
        out.extend(["", "## Nodes", "", md_text(NODES_LEAD), "", md_table(nodes)])
    out.extend(_startups(data))
    out.extend(["", "## Identities", ""])
    for title, items in identity_sections(data):
        if title in ("Policy", "Host", "Measurement") and not items:
            continue
        out.append(f"**{md_text(title)}**")
        out.append("")
        out.extend(f"- {md_text(k)}: {md_text(v)}" for k, v in items)
        out.append("")
    out.extend(["## Command", "", _fence(command_lines(data)[0][1]), ""])
    out.append("Plots, per-group launch commands, logs and files: `report.html` in the same results directory.")
    return "\n".join(out) + "\n"
