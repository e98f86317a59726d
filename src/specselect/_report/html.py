"""`report.html`: one self-contained page (inline CSS and SVG, no script, no external resource).

Sections in reading order: decisions, verdicts, where it pays (segments), sweeps, how sure, admission,
groups, measurements, plots, identities and environment, commands, files. Every string from the results is escaped:
plan values and names are user input.
"""

from __future__ import annotations

import importlib.resources
import re
import urllib.parse
from collections.abc import Callable, Iterable, Sequence

from specselect._core.gates import AdmissionResult
from specselect._report.capacity_tables import CAPACITY_LEAD, capacity_spec
from specselect._report.console import estimand_lines
from specselect._report.data import ReportData
from specselect._report.evidence_tables import controls_spec, distribution_spec, prediction_spec, rounds_spec
from specselect._report.handoff_tables import mix_lines, mix_spec, serve_blocks
from specselect._report.plots import FigureSection, build_plots
from specselect._report.segment_tables import segment_lead, segment_lines, segment_spec
from specselect._report.startup_tables import STARTUP_LEAD, engine_warning_lines, startups_spec
from specselect._report.svg import esc
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
    deciding_facts,
    decision_spec,
    file_rows,
    fmt_fact,
    groups_spec,
    identity_sections,
    measurements_spec,
    nodes_spec,
    recommendations,
    verdicts,
)
from specselect.records.group import GroupResult

__all__ = ["CSP", "render_html"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
"""The page's Content-Security-Policy: nothing may load or run, so it behaves the same offline."""

_PILL_COLUMNS = frozenset({"run", "evidence", "decision", "parity", "status", "outcome"})
_NUM_COLUMNS = frozenset(
    {"speedup (interval, level)", "TTFT p95; mean", "E2E p95; mean", "peak memory", "start-up", "scenarios done"}
)
_SECTIONS = (
    ("decisions", "Decisions"),
    ("verdicts", "Verdicts"),
    ("segments", "Where it pays"),
    ("sweeps", "Sweeps"),
    ("certainty", "How sure"),
    ("admission", "Admission"),
    ("groups", "Groups"),
    ("measurements", "Measurements"),
    ("plots", "Plots"),
    ("environment", "Identities & environment"),
    ("commands", "Commands"),
    ("files", "Files"),
)

_Cell = Callable[[int, str, str], str]
"""(row index, column name, cell text) -> the `<td>` element."""


def _css() -> str:
    return importlib.resources.files("specselect._report").joinpath("report.css").read_text(encoding="utf-8")


def _pill(value: str) -> str:
    """A status word as a coloured pill (the class is a sanitised copy of the word)."""
    cls = re.sub(r"[^a-z0-9_-]", "", value.lower())
    return f'<span class="pill {cls}">{esc(value)}</span>'


def _cell(_row: int, column: str, value: str) -> str:
    if column in _PILL_COLUMNS and value != "-":
        word, sep, rest = value.partition(":")
        return f"<td>{_pill(word)}{esc(sep + rest)}</td>"
    if column in _NUM_COLUMNS or column.endswith((" ms", " tok/s", " ok")):
        return f'<td class="num">{esc(value)}</td>'
    if column in ("group", "candidate"):
        return f'<td class="name">{esc(value)}</td>'
    if column in ("reason", "gate"):
        # Let long snake_case codes wrap after an underscore instead of widening the table.
        return f'<td class="reason">{esc(value).replace("_", "_<wbr>").replace("+", "+<wbr>")}</td>'
    if column in ("hint", "facts"):
        return f'<td class="text">{esc(value)}</td>'
    return f"<td>{esc(value)}</td>"


def _row_class(spec: TableSpec, row: tuple[str, ...]) -> str:
    # Rows that were never evaluated carry no numbers: mute them so the measured rows stand out.
    if "decision" in spec.columns and row[spec.columns.index("decision")] == "not_evaluated":
        return ' class="muted"'
    return ""


def _table(spec: TableSpec, cell: _Cell = _cell, table_id: str | None = None) -> str:
    """A table inside a horizontally scrolling wrapper (wide tables never widen the page)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in spec.columns)
    rows = "".join(
        f"<tr{_row_class(spec, row)}>"
        + "".join(cell(i, c, v) for c, v in zip(spec.columns, row, strict=True))
        + "</tr>"
        for i, row in enumerate(spec.rows)
    )
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f'<div class="tbl"><table{ident}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'


def _header(data: ReportData) -> str:
    m = data.manifest
    facts = [
        ("plan", m.plan_source),
        ("engine", f"{m.engine_kind} {m.engine_version or '?'}"),
        ("target", m.target_ref),
        ("status", m.status),
        ("updated", m.updated_at),
    ]
    meta = " · ".join(f"{esc(k)} <b>{esc(v)}</b>" for k, v in facts)
    return (
        f'<header class="top"><div class="wrap"><h1>specselect report <span class="label">{esc(m.label)}</span></h1>'
        f'<p class="meta">{meta}</p></div></header>'
    )


def _nav() -> str:
    links = "".join(f'<a href="#{key}">{esc(title)}</a>' for key, title in _SECTIONS)
    return f'<nav class="toc"><div class="wrap">{links}</div></nav>'


def _section(key: str, title: str, body: str, lead: str = "") -> str:
    intro = f'<p class="lead">{esc(lead)}</p>' if lead else ""
    return f'<section id="{esc(key)}"><h2>{esc(title)}</h2>{intro}{body}</section>'


def _decisions(data: ReportData) -> str:
    spec = decision_spec(data)
    if spec is None:
        return _section("decisions", "Decisions", '<p class="hint">No evidence yet: see the notes above.</p>')
    base = data.baseline_name
    lead = (
        f"Each candidate against {base} on identical requests, per scenario. Speedup is output throughput with its "
        "confidence interval; TTFT p95 and E2E p95 are candidate / baseline ratios (below 1 is better), with the "
        "interval an accept needs inside its limit."
    )
    about = "".join(f"<li>{esc(line)}</li>" for line in estimand_lines(data.evidence)) if data.evidence else ""
    recos = "".join(f"<li><b>{esc(s)}</b>{esc(text)}</li>" for s, text in recommendations(data))
    reco = f'<h3>Recommendation per scenario</h3><ul class="reco">{recos}</ul>' if recos else ""
    table = _table(spec, table_id="decision-table") + (f'<ul class="estimand">{about}</ul>' if about else "")
    return _section("decisions", "Decisions", table + reco + _mix(data), lead)


def _mix(data: ReportData) -> str:
    lines = mix_lines(data)
    if not lines:
        return ""
    parts = ['<h3>For your traffic mix</h3><ul class="reco">' + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>"]
    spec = mix_spec(data)
    if spec is not None:
        parts.append(_table(spec, table_id="mix-table"))
    for block in serve_blocks(data):
        note = f'<p class="hint">{esc(block.note)}</p>' if block.note else ""
        parts.append(
            f"<h3>What to type: {esc(block.title)}</h3><pre>{esc(block.command)}</pre>"
            f'<p class="hint">measured on {esc(block.measured_on)}</p>{note}'
        )
    return "".join(parts)


def _verdicts(data: ReportData) -> str:
    items = []
    for v in verdicts(data):
        hint = f'<div class="hint">{esc(v.hint)}</div>' if v.hint else ""
        items.append(
            f"<li><b>{esc(v.candidate)}</b>({esc(v.family)}) {_pill(v.run_status)} "
            f'<span class="hint">{esc(v.reason)}</span> — {esc(v.verdict)}{hint}</li>'
        )
    body = f'<ul class="verdicts">{"".join(items)}</ul>' if items else '<p class="hint">No candidates.</p>'
    return _section("verdicts", "Verdicts per candidate", body)


def _segments(data: ReportData) -> str:
    spec, lead = segment_spec(data), segment_lead(data)
    title = "Where it pays: input length and category"
    if spec is None or lead is None:
        none = "No segments: no candidate was measured against its baseline, or these results predate segments."
        return _section("segments", title, f'<p class="hint">{none}</p>')
    lines = "".join(f"<li><b>{esc(where)}</b>{esc(text)}</li>" for where, text in segment_lines(data))
    return _section("segments", title, f'<ul class="reco">{lines}</ul>' + _table(spec, table_id="segment-table"), lead)


def _sweeps(data: ReportData) -> str:
    parts = []
    for title, spec in (
        ("Speedup and acceptance vs temperature", temperature_spec(data)),
        ("Speedup vs concurrency: where it stops paying", crossover_spec(data)),
        ("Proposal length: the smallest statistically as good as the best", length_spec(data)),
        ("Goodput under the SLOs", goodput_spec(data)),
    ):
        if spec is not None:
            parts.append(f"<h3>{esc(title)}</h3>{_table(spec)}")
    for title, spec in schedule_specs(data):
        parts.append(f"<h3>Per-batch-size schedule vs static vs off: {esc(title)}</h3>{_table(spec)}")
    stops = early_stop_lines(data)
    if stops:
        parts.append("<h3>Early stops</h3><ul>" + "".join(f"<li>{esc(line)}</li>" for line in stops) + "</ul>")
    budget = budget_line(data)
    if budget is not None:
        parts.append(f'<p class="hint">Budget: {esc(budget)}</p>')
    if not parts:
        return _section(
            "sweeps",
            "Sweeps",
            '<p class="hint">This run swept neither temperature, concurrency nor proposal length.</p>',
        )
    lead = (
        "How acceptance and speedup fall with the temperature, where a candidate stops paying as load grows "
        "(crossover), which proposal length to use (the smallest one "
        "statistically indistinguishable from the best), and requests/s that meet the plan's SLOs. Plots below."
    )
    return _section("sweeps", "Sweeps", "".join(parts), lead)


def _facts_cell(result: AdmissionResult) -> str:
    chips = "".join(f'<code class="fact">{esc(k)}={esc(v)}</code>' for k, v in deciding_facts(result))
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(fmt_fact(v))}</td></tr>" for k, v in result.facts.items())
    more = (
        f'<details><summary>all {len(result.facts)} facts</summary><table class="facts">{rows}</table></details>'
        if result.facts
        else ""
    )
    return f"<td>{chips or '-'}{more}</td>"


_CERTAINTY_TABLES = (
    (
        "Paired rounds",
        rounds_spec,
        "Each round launched the candidate next to its baseline; the speedup is the mean of the rounds' log "
        "ratios, its interval a t interval at the level shown (the look's share of the error budget) on the "
        "round variance pooled over the run's pairs where they are alike, else the pair's own. A rerun of the "
        "same plan is expected to put its point inside 'a rerun's point'.",
    ),
    (
        "A/A controls",
        controls_spec,
        "The baseline's own configuration launched next to it in every round and judged as if it were a "
        "candidate: its interval should contain 1.0 and the plan's rule must not accept it.",
    ),
    (
        "Sampled outputs",
        distribution_spec,
        "At temperature > 0 no single output has to match: each side drew several outputs per prompt, every one "
        "with its own seed, and a permutation test asks whether the candidate's follow the baseline's "
        "distribution (token frequencies by position, distinct bigrams, lengths, the target's log-probability); "
        "adjusted p-values hold the family-wise level over the statistics. A fail rejects the candidate.",
    ),
    (
        "Predicted vs measured decode speedup",
        prediction_spec,
        "Predicted from the candidate's acceptance telemetry and a verify-cost model fitted to the baseline's own "
        "prefill -- never from the candidate's timing -- so it can be wrong; the error says by how much.",
    ),
)


def _capacity(data: ReportData) -> str:
    spec = capacity_spec(data.evidence)
    if spec is None:
        return ""
    return _section("capacity", "What it costs in KV cache", _table(spec), CAPACITY_LEAD)


def _certainty(data: ReportData) -> str:
    parts = []
    for title, spec_of, lead in _CERTAINTY_TABLES:
        spec = spec_of(data)
        if spec is not None:
            parts.append(f'<h3>{esc(title)}</h3><p class="lead">{esc(lead)}</p>{_table(spec)}')
    if not parts:
        return _section("certainty", "How sure", '<p class="hint">One round per group and no prediction.</p>')
    return _section("certainty", "How sure", "".join(parts))


def _admission(data: ReportData) -> str:
    spec = admission_spec(data)
    if spec is None or data.admission is None:
        return _section("admission", "Admission", '<p class="hint">admission.json is missing.</p>')
    results = data.admission.results

    def cell(row: int, column: str, value: str) -> str:
        return _facts_cell(results[row]) if column == "facts" else _cell(row, column, value)

    lead = (
        "Static gates before any server starts, in order enabled, backend, asset, compatibility, capacity; the "
        "first failing gate decides. The facts are those of the deciding gate (for runnable: the capacity estimate)."
    )
    return _section("admission", "Admission matrix", _table(spec, cell, "admission-table"), lead)


def _log_tails(groups: Iterable[GroupResult]) -> str:
    out = []
    for g in groups:
        if g.log_tail:
            where = f" ({g.log_path})" if g.log_path else ""
            out.append(
                f"<details><summary>{esc(g.group)}: last lines of the server log{esc(where)}</summary>"
                f"<pre>{esc(g.log_tail)}</pre></details>"
            )
    return "".join(out)


def _figures(section: FigureSection) -> str:
    figs = "".join(
        f'<figure id="{esc(f.key)}">{f.svg}'
        + (f"<figcaption>{esc(f.caption)}</figcaption>" if f.caption else "")
        + "</figure>"
        for f in section.figures
    )
    return (
        f'<h3 id="{esc(section.key)}">{esc(section.title)}</h3><p class="lead">{esc(section.intro)}</p>'
        f'<div class="figs" style="--cols: {int(section.columns)}">{figs}</div>'
    )


def _plots(data: ReportData) -> str:
    plots = build_plots(data)
    body = "".join(_figures(s) for s in plots.sections) or '<p class="hint">Nothing was measured.</p>'
    if plots.omitted:
        body += "<h3>Not plotted</h3><ul>" + "".join(f"<li>{esc(o)}</li>" for o in plots.omitted) + "</ul>"
    return _section("plots", "Plots", body)


def _environment(data: ReportData) -> str:
    blocks = []
    for title, items in identity_sections(data):
        rows = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items)
        blocks.append(f'<div><h3>{esc(title)}</h3><dl class="kv">{rows}</dl></div>')
    return _section("environment", "Identities & environment", f'<div class="envgrid">{"".join(blocks)}</div>')


def _commands(data: ReportData) -> str:
    body = "".join(f"<h3>{esc(what)}</h3><pre>{esc(cmd)}</pre>" for what, cmd in command_lines(data))
    lead = "The command that produced these results, then each group's server launch (secrets redacted)."
    return _section("commands", "Commands", body, lead)


def _files(data: ReportData, link_base: str) -> str:
    def href(rel: str) -> str:
        return urllib.parse.quote(f"{link_base}{rel}", safe="/.-_~")

    rows = "".join(
        f'<tr><td class="mono"><a href="{esc(href(rel))}">{esc(rel)}</a></td><td class="mono">{esc(sha)}</td></tr>'
        for rel, sha in file_rows(data)
    )
    body = (
        '<div class="tbl"><table><thead><tr><th>file</th><th>sha256</th></tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )
    return _section("files", "Files", body, "Paths relative to the results directory; hashes from the manifest.")


def _notes(notes: Sequence[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return f'<div class="notes"><b>Notes</b><ul>{items}</ul></div>'


def _startups(data: ReportData) -> str:
    spec = startups_spec(data)
    warnings = engine_warning_lines(data)
    if spec is None and not warnings:
        return ""
    table = _table(spec) if spec is not None else ""
    items = "".join(f"<li>{esc(line)}</li>" for line in warnings)
    said = f"<p>The engine warned at start-up, about what it measures:</p><ul>{items}</ul>" if warnings else ""
    return _section("start-ups", "Start-ups", table + said, STARTUP_LEAD)


def render_html(data: ReportData, *, link_base: str = "") -> str:
    """The complete page; `link_base` is the results directory relative to where the page is written."""
    m = data.manifest
    groups = groups_spec(data)
    measured = measurements_spec(data)
    nodes = nodes_spec(data)
    body = [
        _notes(data.notes),
        _decisions(data),
        _verdicts(data),
        _capacity(data),
        _segments(data),
        _sweeps(data),
        _certainty(data),
        _admission(data),
        _section("groups", "Groups", _table(groups, table_id="groups-table") + _log_tails(data.groups)),
        _section("nodes", "Nodes", _table(nodes), NODES_LEAD) if nodes is not None else "",
        _startups(data),
        _section(
            "measurements",
            "Measurements",
            _table(measured) if measured else '<p class="hint">Nothing was measured.</p>',
            "Absolute numbers per group and scenario (measured requests only); the ratios above come from these.",
        ),
        _plots(data),
        _environment(data),
        _commands(data),
        _files(data, link_base),
    ]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        '<link rel="icon" href="data:,">'
        f"<title>specselect report · {esc(m.label)}</title>"
        f"<style>{_css()}</style></head><body>"
        f'{_header(data)}{_nav()}<main class="wrap">{"".join(body)}</main>'
        f'<footer class="wrap">specselect {esc(m.tool_version)} · results schema {m.schema_version} · '
        f"plan hash {esc(m.plan_hash)} · rendered from the result files only</footer>"
        "</body></html>\n"
    )
