"""The schedule candidate of a sweep (`measure_schedule = true`): checked against the rest of the plan.

Expansion (`plan.sweep`) writes it; here the plan as a whole must allow it: its entry sweeps proposal lengths, the
run measures at least two concurrency levels (the schedule picks a length per level), and it proposes like its
siblings (same family).
"""

from __future__ import annotations

from collections.abc import Sequence

from specselect._plan.candidates import Candidate
from specselect._plan.expand import declared_index
from specselect._plan.rules import rule_error
from specselect._plan.sweep import SCHEDULE_OPTION
from specselect.records.proposals import LENGTH_AXIS

__all__ = ["check_schedules", "schedule_members"]


def schedule_members(candidates: Sequence[Candidate], parent: str) -> list[Candidate]:
    """The sub-candidates of entry `parent` that differ in proposal length (what its schedule chooses from)."""
    return [c for c in candidates if c.sweep is not None and c.sweep.parent == parent and LENGTH_AXIS in c.sweep.axes]


def check_schedules(candidates: Sequence[Candidate], levels: Sequence[int], temperatures: int = 1) -> None:
    """Every schedule candidate has proposal lengths to choose from, levels to choose them for, one family, and
    one temperature (of `temperatures` measured) to choose them at."""
    for index, cand in enumerate(candidates):
        if cand.schedule_of is None:
            continue
        where = ("candidates", declared_index(candidates, index), SCHEDULE_OPTION)
        if temperatures > 1:
            raise rule_error(
                f"{cand.name} derives one per-batch-size schedule, and [sampling] lists several temperatures, "
                "where acceptance, so the best length, differs",
                "list the deployment's one temperature, or run the plan once per temperature",
                field=where,
            )
        members = schedule_members(candidates, cand.schedule_of)
        if cand.sweep is not None or not members:
            raise rule_error(
                f"{cand.name} runs the schedule of {cand.schedule_of!r}, which sweeps no proposal lengths here",
                f"declare {SCHEDULE_OPTION} = true on an entry with {LENGTH_AXIS} = [..] instead",
                field=where,
            )
        if len(levels) < 2:
            raise rule_error(
                f"{SCHEDULE_OPTION} chooses a proposal length per concurrency level, and [run] measures only "
                f"concurrency {levels[0]}",
                "give [run] concurrency at least two levels, e.g. [1, 2]",
                field=where,
            )
        if any(m.family != cand.family or m.proposer != cand.proposer for m in members):
            raise rule_error(
                f"{cand.name} proposes with another family or proposer than the sub-candidates of {cand.schedule_of}",
                f"let specselect write it: {SCHEDULE_OPTION} = true on the entry",
                field=where,
            )
