"""The report's start-up table (each launch's start-up in phases, from the engine's own log) and the engine's
start-up warnings that bear on the measurement."""

from __future__ import annotations

from specselect._report.data import ReportData
from specselect._report.tables import TableSpec
from specselect.records.server import LaunchRecord
from specselect.records.startup import StartupSplit

__all__ = ["STARTUP_LEAD", "engine_warning_lines", "startups_spec"]

STARTUP_LEAD = (
    "Each launch's start-up, split by the engine's own log lines (whole-second timestamps; the engine's stated "
    "initialisation and compile times exact; a compile it does not time stays inside its initialisation). "
    "Launches of one configuration share its compile cache: the first compiles (miss), later ones load (hit); "
    "off: the engine compiled nothing (eager)."
)

_COLUMNS = (
    "group",
    "launch",
    "total s",
    "process + imports s",
    "weights s",
    "engine init s",
    "of which profile + KV s",
    "of which compile + graphs s",
    "ready s",
    "compile cache",
    "preloaded",
)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _row(group: str, launch: int, record: LaunchRecord, split: StartupSplit) -> tuple[str, ...]:
    preloaded = ", ".join(path.rsplit("/", 1)[-1] for path in record.preload) or "-"
    cache = split.compile_cache + (f" ({split.compile_cache_dir})" if split.compile_cache_dir else "")
    return (
        group,
        str(launch),
        _s(split.total_s),
        _s(split.process_and_imports_s),
        _s(split.weight_load_s),
        _s(split.init_s),
        _s(split.profile_and_kv_s),
        _s(split.compile_and_graphs_s),
        _s(split.ready_s),
        cache,
        preloaded,
    )


def _launches(data: ReportData) -> list[tuple[str, int, LaunchRecord]]:
    out: list[tuple[str, int, LaunchRecord]] = []
    for g in data.groups:
        lives = [g.launch, *(r.launch for r in g.relaunches)]
        out.extend((g.group, i + 1, launch) for i, launch in enumerate(lives) if launch is not None)
    return out


def startups_spec(data: ReportData) -> TableSpec | None:
    """One row per launch whose start-up was split (None when none was: an endpoint, older results)."""
    rows = tuple(
        _row(group, i, launch, launch.startup) for group, i, launch in _launches(data) if launch.startup is not None
    )
    return TableSpec(columns=_COLUMNS, rows=rows) if rows else None


def engine_warning_lines(data: ReportData) -> list[str]:
    """Each start-up warning once, with the launches that logged it: `group launch N: message`."""
    seen: dict[str, list[str]] = {}
    for group, i, launch in _launches(data):
        for warning in launch.engine_warnings:
            seen.setdefault(warning.message, []).append(f"{group} {i}")
    return [f"{message} (launches: {', '.join(where)})" for message, where in seen.items()]
