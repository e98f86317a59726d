"""Foreign traffic on an endpoint specselect does not own: counters that move while specselect sends nothing.

Around every scenario `EndpointTrafficGuard` scrapes `/metrics` before and after an idle gap (specselect
sends nothing then), and once more when the scenario is over. The endpoint is *contaminated* when

* a request or token counter grows during an idle gap, or
* more requests finished during the scenario than specselect sent.

Pure functions over scrapes; the result states what moved, so a reader can judge it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Literal

from specselect._engines.prometheus import MetricsSnapshot, counter_total
from specselect.records.endpoints import IdleWindow, TrafficCheck

__all__ = [
    "FINISHED_REQUEST_COUNTERS",
    "TRAFFIC_COUNTERS",
    "EndpointTrafficGuard",
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


def traffic_totals(snapshot: MetricsSnapshot) -> dict[str, float]:
    """The traffic counters present in one scrape, summed over label sets."""
    out: dict[str, float] = {}
    for base in TRAFFIC_COUNTERS:
        value = counter_total(snapshot, base)
        if value is not None:
            out[base] = value
    return out


def finished_requests(snapshot: MetricsSnapshot) -> float | None:
    """Requests the engine has finished so far (any flavor it exports), or None."""
    for base in FINISHED_REQUEST_COUNTERS.values():
        value = counter_total(snapshot, base)
        if value is not None:
            return value
    return None


def idle_window(before: MetricsSnapshot, after: MetricsSnapshot, gap_s: float) -> IdleWindow:
    """What moved between two scrapes taken `gap_s` apart while specselect was idle."""
    start, end = traffic_totals(before), traffic_totals(after)
    moved: dict[str, float] = {}
    for name in TRAFFIC_COUNTERS:
        if name in end and end[name] - start.get(name, 0.0) > 0:
            moved[name] = end[name] - start.get(name, 0.0)
    return IdleWindow(gap_s=gap_s, moved=moved)


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


class EndpointTrafficGuard:
    """Scrapes an endpoint around an idle gap before and after one scenario (the `TrafficGuard` of kind
    "openai"); the verdict comes from `judge_traffic`.

    `settle_s` lets the engine count specselect's own last request before a scrape.
    """

    def __init__(
        self,
        snapshot: Callable[[], MetricsSnapshot],
        *,
        exported: bool,
        gap_s: float,
        settle_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._snapshot = snapshot
        self._exported = exported
        self._gap_s = gap_s
        self._settle_s = settle_s
        self._sleep = sleep
        self._idle_before: IdleWindow | None = None
        self._start: MetricsSnapshot | None = None

    def _idle(self) -> tuple[IdleWindow, MetricsSnapshot]:
        self._sleep(self._settle_s)
        first = self._snapshot()
        self._sleep(self._gap_s)
        second = self._snapshot()
        return idle_window(first, second, self._gap_s), second

    def before(self) -> None:
        """The idle gap before the scenario; its last scrape starts the finished-requests count."""
        self._idle_before, self._start = None, None
        if not self._exported:
            return
        idle, start = self._idle()
        if traffic_totals(start):  # no known request counters: judged not_checked
            self._idle_before, self._start = idle, start

    def after(self, requests_sent: int) -> TrafficCheck:
        """The idle gap after the scenario and the verdict over both gaps and the scenario itself."""
        idle_after: IdleWindow | None = None
        finished: float | None = None
        if self._exported and self._start is not None:
            idle_after, end = self._idle()
            begin, done = finished_requests(self._start), finished_requests(end)
            finished = None if begin is None or done is None else done - begin
        return judge_traffic(
            exported=self._exported,
            idle_before=self._idle_before,
            idle_after=idle_after,
            requests_sent=requests_sent,
            requests_finished=finished,
        )
