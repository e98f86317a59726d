"""`check.json`: what `specselect check` measured again, against which hand-off, and every problem it found."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from specselect._evidence.regression import MIN_JUDGED_ROUNDS, REGRESSION_RULE, Problem, SpeedupSpan, speedup_judged
from specselect.records.document import ResultsDocument
from specselect.records.evidence.acceptance import AcceptanceSpread

__all__ = ["CheckCost", "CheckReport", "CheckScenario"]


class CheckCost(BaseModel):
    """The check's cost, stated before any server starts (from the recorded run's own timings)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    servers: int
    rounds: int = 1
    """Paired rounds (the measured plan's `[run] rounds`, or `--rounds`): each side launched once per round."""
    recorded_rounds: int = 1
    """Rounds before the recorded run's first look."""
    startup_s: float
    """Seconds of server start-up, as the recorded run's servers took."""
    requests: int
    measure_s: float
    """Seconds of requests on both sides, from the recorded baseline's time per request and speedup."""
    seconds: float

    def line(self) -> str:
        per_side = f"{self.rounds} round{'s' if self.rounds != 1 else ''}"
        text = (
            f"{self.servers} server starts ({per_side}, ~{self.startup_s:.0f} s) and {self.requests} requests "
            f"(~{self.measure_s:.0f} s): ~{self.seconds / 60:.1f} min, from the recorded run's timings"
        )
        if not speedup_judged(self.rounds):
            text += (
                f"; the speedup is shown, not judged: {per_side}'s interval has no launch-to-launch variance "
                f"(--rounds {MIN_JUDGED_ROUNDS} judges it)"
            )
        return text


class CheckScenario(BaseModel):
    """One scenario as recorded and as measured now."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    recorded_speedup: SpeedupSpan
    speedup: SpeedupSpan | None
    speedup_judged: bool = False
    """Whether `speedup` was judged against `recorded_speedup` (only over >= 2 rounds; and False
    before it was measured)."""
    recorded_acceptance: AcceptanceSpread | None
    acceptance: AcceptanceSpread | None
    recorded_parity: str | None
    parity: str | None

    def line(self) -> str:
        """`scenario: speedup now, recorded (judged or why not)`."""
        now = self.speedup.text() if self.speedup is not None else "not measured"
        how = "judged" if self.speedup_judged else "shown, not judged"
        return f"{self.scenario}: {now} now, recorded {self.recorded_speedup.text()} ({how})"


class CheckReport(ResultsDocument):
    """`check.json` of one `specselect check`."""

    handoff: str
    """The hand-off file checked against."""
    label: str
    plan_hash: str
    candidate: str
    plan_source: str
    """The plan measured now: the recorded one, or the one given with --plan."""
    cost: CheckCost
    scenarios: tuple[CheckScenario, ...]
    problems: tuple[Problem, ...]
    stopped_early: str | None = None
    """Why the baseline was not measured (the answer was already clear after the candidate)."""
    ok: bool
    rule: str = REGRESSION_RULE
