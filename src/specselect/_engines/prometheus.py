"""Prometheus text from a server's `/metrics`: parsing, and the one counter delta every reader uses.

Counters are server-cumulative, so what happened in a window is the difference of two scrapes. Engines
expose a counter as `<base>_total` (current clients) or as the bare `<base>` (older exporters); one
served model may be split over several label sets (data-parallel engines, per-position counters).
"""

from __future__ import annotations

import math
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, ConfigDict

from specselect.errors import ProtocolError

__all__ = [
    "LabelKey",
    "MetricSample",
    "MetricsSnapshot",
    "counter_delta",
    "counter_deltas",
    "counter_total",
    "parse_metrics_named",
    "parse_prometheus",
]

LabelKey = tuple[tuple[str, str], ...]
"""The sorted labels of one counter series besides `engine` and `model_name` (e.g. `(("position", "0"),)`)."""

_IGNORED_LABELS = ("engine", "model_name")


class MetricSample(BaseModel):
    """One Prometheus sample."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    labels: dict[str, str]
    value: float


class MetricsSnapshot(BaseModel):
    """All samples of one /metrics scrape."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    samples: tuple[MetricSample, ...] = ()

    def values(self, name: str, **labels: str) -> list[MetricSample]:
        """Samples called `name` whose labels include `labels`."""
        return [s for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]

    def names(self) -> frozenset[str]:
        """Every sample name present."""
        return frozenset(s.name for s in self.samples)


def parse_metrics_named(text: str, names: tuple[str, ...]) -> MetricsSnapshot:
    """Only the samples of the metrics `names` (their lines alone are parsed: cheap enough to call every second)."""
    prefixes = tuple(f"{n}{{" for n in names) + tuple(f"{n} " for n in names)
    return parse_prometheus("\n".join(line for line in text.splitlines() if line.startswith(prefixes)))


def parse_prometheus(text: str) -> MetricsSnapshot:
    """Parse Prometheus exposition text; ProtocolError when it is not that format."""
    try:
        samples = tuple(
            MetricSample(name=s.name, labels=dict(s.labels), value=float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        )
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise ProtocolError(
            f"/metrics is not Prometheus text: {exc}", location="/metrics", fix="check the server's metrics endpoint"
        ) from exc
    return MetricsSnapshot(samples=samples)


def _series(snap: MetricsSnapshot, base: str, model_name: str | None) -> dict[LabelKey, float] | None:
    """A counter's value per label set (summed over engines); None when absent for `model_name`.

    `model_name` None takes every model; otherwise samples labelled with another model are left out.
    """
    totals: dict[LabelKey, float] = defaultdict(float)
    for name in (f"{base}_total", base):
        found = False
        for sample in snap.samples:
            if sample.name != name:
                continue
            labelled = sample.labels.get("model_name")
            if model_name is not None and labelled is not None and labelled != model_name:
                continue
            key = tuple(sorted((k, v) for k, v in sample.labels.items() if k not in _IGNORED_LABELS))
            totals[key] += sample.value
            found = True
        if found:  # `_total` wins; a bare name is only read from exporters without the suffix
            return dict(totals)
    return None


def counter_total(snap: MetricsSnapshot, base: str, model_name: str | None = None) -> float | None:
    """A counter's value in one scrape, summed over its label sets; None when it is not exported."""
    series = _series(snap, base, model_name)
    return sum(series.values()) if series is not None else None


def counter_deltas(
    before: MetricsSnapshot, after: MetricsSnapshot, base: str, model_name: str | None = None
) -> dict[LabelKey, int] | None:
    """What a counter counted between two scrapes, per label set; None when the later scrape lacks it.

    ProtocolError when a difference is not a finite count or went backwards (the server restarted).
    """
    end = _series(after, base, model_name)
    if end is None:
        return None
    start = _series(before, base, model_name) or {}
    out: dict[LabelKey, int] = {}
    for key, value in end.items():
        diff = value - start.get(key, 0.0)
        if not math.isfinite(diff):
            raise ProtocolError(
                f"counter {base} is not a finite count ({start.get(key)} -> {value})",
                location="/metrics",
                fix="check the server's metrics endpoint",
            )
        if diff < 0:
            raise ProtocolError(
                f"counter {base} went backwards ({start.get(key)} -> {value}): the server restarted between scrapes",
                location="/metrics",
                fix="measure again on one server life",
            )
        out[key] = round(diff)
    return out


def counter_delta(
    before: MetricsSnapshot, after: MetricsSnapshot, base: str, model_name: str | None = None
) -> int | None:
    """`counter_deltas` summed over label sets."""
    deltas = counter_deltas(before, after, base, model_name)
    return sum(deltas.values()) if deltas is not None else None
