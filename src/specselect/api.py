"""The Python API: what the CLI's commands do, as typed functions for notebooks and CI scripts.

Each function calls the library functions its command calls and returns what the command prints from. Nothing is
printed (progress only when asked for) and nothing exits: problems raise the exception tree of `specselect.errors`
with the CLI's one-line message as `str(error)` (`ConfigError` and its `PlanError`, `ResultsError` for bad input,
`EngineError` when the engine fails, `MissingDependencyError` for a missing extra, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, TypedDict, Unpack

from specselect._artifacts.store import RunDocuments, load_run
from specselect._common.home import default_home
from specselect._plan import LoadedPlan
from specselect._report import write_reports
from specselect._runner.check import CheckOptions, CheckOutcome, run_check
from specselect._runner.preflight import validate_plan
from specselect._runner.progress import Progress, SilentProgress, make_progress
from specselect._runner.run import RunOptions, RunOutcome, probe_plan, run_plan
from specselect.errors import MissingDependencyError
from specselect.records.evidence.result import ScenarioEvidence

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "RESULT_COLUMNS",
    "CheckOutcome",
    "LoadedPlan",
    "Results",
    "RunExtras",
    "RunOutcome",
    "check",
    "load_plan",
    "load_results",
    "probe",
    "run",
    "to_pandas",
]

RESULT_COLUMNS: tuple[str, ...] = (
    "candidate",
    "family",
    "track",
    "scenario",
    "workload",
    "concurrency",
    "temperature",
    "run_status",
    "evidence_status",
    "decision",
    "reason",
    "detail",
    "speedup",
    "ci_low",
    "ci_high",
    "ci_level",
    "confidence",
    "ttft_ratio",
    "e2e_p95_ratio",
    "peak_memory_mb",
    "acceptance_rate",
    "mean_acceptance_length",
    "parity",
    "quality_check",
    "lossy",
)
"""The columns of `Results.rows()` and `to_pandas`, one row per candidate x scenario of `evidence.json`."""


def _progress(progress: Progress | bool) -> Progress:
    """True: the CLI's reporter (rich in a terminal, plain lines otherwise); False: silent; else the one given."""
    if isinstance(progress, bool):
        return make_progress() if progress else SilentProgress()
    return progress


def _home(home: str | Path | None) -> Path:
    return Path(home).expanduser() if home is not None else default_home()


def load_plan(plan_ref: str | Path) -> LoadedPlan:
    """The plan file (or `builtin:NAME`) loaded and validated as `specselect validate` does; `PlanError` or
    `ConfigError` (their `problems`: one line each) otherwise. Nothing is probed or started."""
    return validate_plan(plan_ref)


def probe(
    plan_ref: str | Path,
    *,
    results_dir: str | Path = "results",
    verify_weights: bool = False,
    progress: Progress | bool = False,
    home: str | Path | None = None,
) -> RunOutcome:
    """Preflight and admission of a plan, as `specselect probe`: no server starts and no result file is written.

    The outcome's `preflight` and `admission` are what `probe --json` prints; `groups` and `evidence` stay empty.
    """
    return probe_plan(
        str(plan_ref),
        home=_home(home),
        results_dir=Path(results_dir),
        progress=_progress(progress),
        verify_weights=verify_weights,
    )


class RunExtras(TypedDict, total=False):
    """`run`'s rarely needed options (the `specselect run` flags of the same names)."""

    verify_weights: bool
    """Hash every byte of large local checkpoints instead of identifying them by their files and headers."""
    allow_changed_environment: bool
    """Let `resume` keep groups measured under another engine version, host, device set or target snapshot."""
    home: str | Path
    """specselect's home (engine environments, models, extracted prompt sets); default `$SPECSELECT_HOME`."""


def _command(plan_ref: str, results_dir: Path, label: str | None, flags: Mapping[str, bool]) -> tuple[str, ...]:
    """The `specselect run` command line that does what the API was asked, recorded in the manifest."""
    words = ["specselect", "run", plan_ref, "--results-dir", str(results_dir)]
    if label is not None:
        words += ["--label", label]
    return (*words, *(f"--{name.replace('_', '-')}" for name, on in flags.items() if on))


def run(
    plan_ref: str | Path,
    *,
    results_dir: str | Path = "results",
    label: str | None = None,
    resume: bool = False,
    dry_run: bool = False,
    progress: Progress | bool = False,
    reports: bool = True,
    **extras: Unpack[RunExtras],
) -> RunOutcome:
    """Run a plan as `specselect run`: preflight, admission, every group's rounds, evidence and hand-off, written
    to `<results_dir>/<label>/` (label: the plan's unless given); then `report.html` and `report.md` there unless
    `reports=False` (or `dry_run`, which starts and writes nothing).

    Progress is silent unless `progress=True` (the CLI's reporter) or a `Progress` is given. An interrupted run
    raises `InterruptedRun`; `resume=True` continues it. The manifest records the equivalent command line.
    """
    flags = {
        "resume": resume,
        "dry_run": dry_run,
        "verify_weights": extras.get("verify_weights", False),
        "allow_changed_environment": extras.get("allow_changed_environment", False),
    }
    opts = RunOptions(
        plan_ref=str(plan_ref),
        results_dir=Path(results_dir),
        label=label,
        resume=resume,
        dry_run=dry_run,
        verify_weights=flags["verify_weights"],
        allow_changed_environment=flags["allow_changed_environment"],
        home=_home(extras.get("home")),
        command=_command(str(plan_ref), Path(results_dir), label, flags),
    )
    outcome = run_plan(opts, _progress(progress))
    if reports and not dry_run:
        write_reports(outcome.layout.root)
    return outcome


def check(
    target: str | Path,
    *,
    plan: str | Path | None = None,
    candidate: str | None = None,
    repeats: int = 1,
    rounds: int | None = None,
    out_dir: str | Path | None = None,
    progress: Progress | bool = False,
    home: str | Path | None = None,
) -> CheckOutcome:
    """Measure a hand-off's configuration and its baseline again, as `specselect check` (`target`: results/<label>
    or its handoff.json; `plan`: the setup to measure now, default the recorded one).

    Returns the outcome whatever was found: `outcome.report.ok` is False, with one `problems` entry per change,
    where the CLI exits 6; `outcome.path` is the `check.json` written.
    """
    opts = CheckOptions(
        target=Path(target),
        plan_ref=None if plan is None else str(plan),
        candidate=candidate,
        repeats=repeats,
        rounds=rounds,
        out_dir=None if out_dir is None else Path(out_dir),
        home=_home(home),
    )
    return run_check(opts, _progress(progress))


def _parity(entry: ScenarioEvidence) -> str | None:
    """Exact parity's verdict at temperature 0; the distribution test's above it (see `quality_check`)."""
    if entry.sampled_parity is not None:
        return entry.sampled_parity.verdict
    return entry.parity.verdict.value if entry.parity is not None else None


def _row(entry: ScenarioEvidence, run_status: str | None) -> dict[str, object]:
    interval = entry.decision.confidence.interval
    telemetry = entry.telemetry
    pair = entry.evidence
    return {
        "candidate": entry.candidate,
        "family": entry.family,
        "track": entry.track,
        "scenario": entry.scenario,
        "workload": entry.workload,
        "concurrency": entry.concurrency,
        "temperature": entry.temperature,
        "run_status": run_status,
        "evidence_status": pair.evidence_status.value,
        "decision": entry.decision.decision.value,
        "reason": entry.decision.reason,
        "detail": entry.decision.detail,
        "speedup": pair.throughput_speedup,
        "ci_low": None if interval is None else interval.low,
        "ci_high": None if interval is None else interval.high,
        "ci_level": None if interval is None else interval.level,
        "confidence": entry.decision.confidence.status,
        "ttft_ratio": pair.ttft_ratio,
        "e2e_p95_ratio": pair.e2e_p95_ratio,
        "peak_memory_mb": pair.candidate_peak_memory_mb,
        "acceptance_rate": None if telemetry is None else telemetry.acceptance_rate,
        "mean_acceptance_length": None if telemetry is None else telemetry.mean_acceptance_length,
        "parity": _parity(entry),
        "quality_check": pair.quality_check,
        "lossy": pair.lossy,
    }


@dataclass(frozen=True)
class Results(RunDocuments):
    """One run's results directory, read and validated as `specselect report` reads it (every document's
    schema_version checked); documents are frozen pydantic models, collections are tuples.

    `manifest` (plan, plan hash, every group's status and files), `preflight`, `admission`, `groups` (plan
    order), `evidence` (every candidate x scenario with its intervals, decision and reasons; verdicts) and
    `handoff` (the deployment answer); an optional document that is not there is None and `notes` says why.
    """

    @property
    def label(self) -> str:
        """The run's label (its directory's name)."""
        return self.manifest.label

    @property
    def plan_hash(self) -> str:
        """The hash of the plan that was run."""
        return self.manifest.plan_hash

    @property
    def complete(self) -> bool:
        """True when the run finished (only then are evidence and hand-off written)."""
        return self.manifest.status == "complete"

    @property
    def entries(self) -> tuple[ScenarioEvidence, ...]:
        """Every candidate x scenario of the evidence (empty before the run completed)."""
        return self.evidence.entries if self.evidence is not None else ()

    @property
    def verdicts(self) -> Mapping[str, str]:
        """Candidate -> its one-line verdict over every scenario (read-only)."""
        return MappingProxyType(dict(self.evidence.verdicts) if self.evidence is not None else {})

    def rows(self) -> list[dict[str, object]]:
        """One dict per candidate x scenario, keyed by `RESULT_COLUMNS` (`to_pandas` without pandas): the pair's
        speedup (THE paired-round point) with the interval the decision used, the decision and its reason (several
        failed checks joined with `+`), acceptance and parity; None where the evidence has no number."""
        status = {g.group: g.run_status.value for g in self.groups}
        return [_row(entry, status.get(entry.candidate)) for entry in self.entries]

    def to_pandas(self) -> pd.DataFrame:
        """`rows()` as a DataFrame (needs the `pandas` extra: `pip install 'specselect[pandas]'`)."""
        return to_pandas(self)


def load_results(path: str | Path) -> Results:
    """Read `results/<label>/` (or one of its files, e.g. its handoff.json or evidence.json); `ResultsError` naming
    the file and the fix for a missing or foreign directory, a damaged document or another schema version."""
    root = Path(path)
    documents = load_run(root.parent if root.is_file() else root)
    return Results(**{f.name: getattr(documents, f.name) for f in fields(documents)})


def to_pandas(results: Results) -> pd.DataFrame:
    """One row per candidate x scenario, columns `RESULT_COLUMNS` (missing numbers are NaN)."""
    try:
        import pandas as pd
    except ImportError:
        raise MissingDependencyError(
            "to_pandas needs pandas, which is not installed", fix="pip install 'specselect[pandas]'"
        ) from None
    return pd.DataFrame(results.rows(), columns=list(RESULT_COLUMNS))
