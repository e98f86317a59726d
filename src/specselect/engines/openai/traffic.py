"""Foreign traffic on an endpoint specselect does not own: counters that move while specselect sends nothing.

Around every scenario the runner scrapes `/metrics` before and after an idle gap (specselect sends
nothing then), and once more when the scenario is over. The endpoint is *contaminated* when

* a request or token counter grows during an idle gap, or
* more requests finished during the scenario than specselect sent.

Pure functions over scrapes; the result states what moved, so a reader can judge it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict

from specselect.engines.telemetry import MetricsSnapshot

__all__ = [
    "FINISHED_REQUEST_COUNTERS",
    "TRAFFIC_COUNTERS",
    "IdleWindow",
    "TrafficCheck",
    "finished_requests",
    "idle_window",
    "judge_traffic",
    "traffic_totals",
]

TRAFFIC_COUNTERS: tuple[str, ...] = (
    "vllm:request_success",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "sglang:num_requests",
    "sglang:prompt_tokens",
    "sglang:generation_tokens",
)
"""Counters (base names; exporters add `_total`) that grow with any request an engine serves.

Running/waiting gauges are deliberately not used: an engine updates them only when it steps, so an idle
engine can keep showing its last busy value.
"""

FINISHED_REQUEST_COUNTERS: Mapping[str, str] = MappingProxyType(
    {"vllm": "vllm:request_success", "sglang": "sglang:num_requests"}
)
"""Per metrics flavor: the counter of finished requests, compared with what specselect sent."""


def _sum(snapshot: MetricsSnapshot, base: str) -> float | None:
    for name in (f"{base}_total", base):
        values = [s.value for s in snapshot.samples if s.name == name]
        if values:
            return sum(values)
    return None


def traffic_totals(snapshot: MetricsSnapshot) -> dict[str, float]:
    """The traffic counters present in one scrape, summed over label sets."""
    out: dict[str, float] = {}
    for base in TRAFFIC_COUNTERS:
        value = _sum(snapshot, base)
        if value is not None:
            out[base] = value
    return out


def finished_requests(snapshot: MetricsSnapshot) -> float | None:
    """Requests the engine has finished so far (any flavor it exports), or None."""
    for base in FINISHED_REQUEST_COUNTERS.values():
        value = _sum(snapshot, base)
        if value is not None:
            return value
    return None


class IdleWindow(BaseModel):
    """Two scrapes around a gap in which specselect sent nothing, and what moved in between."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gap_s: float
    moved: dict[str, float]
    """Counter deltas > 0 seen in the gap (empty when the endpoint was idle)."""

    @property
    def busy(self) -> bool:
        return bool(self.moved)


def idle_window(before: MetricsSnapshot, after: MetricsSnapshot, gap_s: float) -> IdleWindow:
    """What moved between two scrapes taken `gap_s` apart while specselect was idle."""
    start, end = traffic_totals(before), traffic_totals(after)
    moved: dict[str, float] = {}
    for name in TRAFFIC_COUNTERS:
        if name in end and end[name] - start.get(name, 0.0) > 0:
            moved[name] = end[name] - start.get(name, 0.0)
    return IdleWindow(gap_s=gap_s, moved=moved)


class TrafficCheck(BaseModel):
    """Whether anything besides specselect used the endpoint around and during one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    status: Literal["clean", "contaminated", "not_checked"]
    reason: str
    """One line: what moved, or why nothing could be checked."""
    idle_before: IdleWindow | None = None
    idle_after: IdleWindow | None = None
    requests_sent: int | None = None
    """Requests specselect sent during the scenario (warm-up included)."""
    requests_finished: int | None = None
    """Requests the engine finished between the scrape before and the scrape after the scenario."""

    @property
    def contaminated(self) -> bool:
        return self.status == "contaminated"


def judge_traffic(
    *,
    exported: bool,
    idle_before: IdleWindow | None,
    idle_after: IdleWindow | None,
    requests_sent: int | None,
    requests_finished: float | None,
) -> TrafficCheck:
    """The verdict for one scenario (see the module docstring).

    `exported=False`: no /metrics to read; idle windows given as None with `exported=True` mean the scrapes
    carried none of `TRAFFIC_COUNTERS` (an engine whose metric names are unknown): not checked either.
    """
    if not exported:
        return TrafficCheck(
            status="not_checked",
            reason="the endpoint exports no /metrics: foreign traffic cannot be detected",
            requests_sent=requests_sent,
        )
    if idle_before is None and idle_after is None and requests_finished is None:
        return TrafficCheck(
            status="not_checked",
            reason="/metrics has no request counters specselect knows (vLLM, SGLang): foreign traffic cannot be "
            "detected",
            requests_sent=requests_sent,
        )
    problems: list[str] = []
    for label, window in (("before", idle_before), ("after", idle_after)):
        if window is not None and window.busy:
            moved = ", ".join(f"{k} {v:g}" for k, v in sorted(window.moved.items()))
            problems.append(f"idle {window.gap_s:g} s gap {label} the scenario: {moved}")
    finished = round(requests_finished) if requests_finished is not None else None
    if finished is not None and requests_sent is not None and finished > requests_sent:
        problems.append(f"{finished} requests finished during the scenario, specselect sent {requests_sent}")
    if problems:
        reason = "other traffic on the endpoint: " + "; ".join(problems)
        status: Literal["clean", "contaminated"] = "contaminated"
    else:
        reason = "no counter moved while specselect was idle" + (
            "" if finished is None else f"; {finished} requests finished, {requests_sent} sent"
        )
        status = "clean"
    return TrafficCheck(
        status=status,
        reason=reason,
        idle_before=idle_before,
        idle_after=idle_after,
        requests_sent=requests_sent,
        requests_finished=finished,
    )
