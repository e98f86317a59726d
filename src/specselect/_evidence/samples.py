"""Per-request samples and their baseline/candidate pairing by (item_id, repeat).

The evidence layer never imports the measurement client: a measured request record is read through the
read-only `RecordLike` protocol, so any object with those attributes (the client's `RequestRecord`) fits.

A sample knows the server launch it came from (`launch`, 0 when a side was measured once). Requests are
paired by (item_id, repeat) within one launch; across launches there is no request-to-request pairing (see
`evidence.replication`, which pairs at the item level).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from specselect.records.telemetry import RequestSpecMetrics

__all__ = [
    "Pairing",
    "RecordLike",
    "RequestKey",
    "RequestPair",
    "RequestSample",
    "pair_by_launch",
    "pair_launches",
    "pair_requests",
    "sample_from_record",
    "samples_from_records",
]

RequestKey = tuple[str, int]
"""(item_id, repeat): what pairs a candidate request with the baseline request for the same prompt."""


class RecordLike(Protocol):
    """The attributes of a measured request record that evidence reads (read-only)."""

    @property
    def item_id(self) -> str: ...
    @property
    def repeat(self) -> int: ...
    @property
    def launch(self) -> int: ...
    @property
    def warmup(self) -> bool: ...
    @property
    def send_time_s(self) -> float | None: ...
    @property
    def first_token_time_s(self) -> float | None: ...
    @property
    def end_time_s(self) -> float | None: ...
    @property
    def prompt_tokens(self) -> int | None: ...
    @property
    def completion_tokens(self) -> int | None: ...
    @property
    def output_text(self) -> str | None: ...
    @property
    def speculative(self) -> RequestSpecMetrics | None: ...
    @property
    def error(self) -> str | None: ...


class RequestSample(BaseModel):
    """One measured request reduced to what paired statistics need (times in seconds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item_id: str
    repeat: int
    launch: int = Field(default=0, ge=0)
    """Which independent server launch of its side measured this request (0-based)."""
    category: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    decode_s: float | None = None
    """Time from the first to the last token: the decode phase that emitted `completion_tokens - 1` tokens."""
    spec: RequestSpecMetrics | None = None

    @property
    def key(self) -> RequestKey:
        """(item_id, repeat)."""
        return (self.item_id, self.repeat)


class RequestPair(BaseModel):
    """The baseline and the candidate request for the same (item_id, repeat)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item_id: str
    repeat: int
    launch: int = 0
    """The launch index both samples came from (baseline launch j is paired with candidate launch j)."""
    category: str | None = None
    baseline: RequestSample
    candidate: RequestSample


class Pairing(BaseModel):
    """The result of pairing two sides: the pairs (sorted by key) and what could not be paired."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pairs: tuple[RequestPair, ...]
    baseline_only: tuple[RequestKey, ...] = ()
    candidate_only: tuple[RequestKey, ...] = ()
    duplicates: tuple[RequestKey, ...] = ()
    """Keys seen more than once on one side; the first occurrence is kept."""


def _span(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return float(end) - float(start)


def sample_from_record(
    record: RecordLike, category: str | None = None, *, launch: int | None = None
) -> RequestSample | None:
    """Reduce a measured record to a sample; None for warm-up and failed requests.

    The sample's launch is the record's own unless `launch` says otherwise.
    """
    if record.warmup or record.error is not None:
        return None
    return RequestSample(
        item_id=record.item_id,
        repeat=record.repeat,
        launch=record.launch if launch is None else launch,
        category=category,
        prompt_tokens=record.prompt_tokens,
        completion_tokens=record.completion_tokens,
        ttft_s=_span(record.send_time_s, record.first_token_time_s),
        e2e_s=_span(record.send_time_s, record.end_time_s),
        decode_s=_span(record.first_token_time_s, record.end_time_s),
        spec=record.speculative,
    )


def samples_from_records(
    records: Iterable[RecordLike], categories: Mapping[str, str | None] | None = None, *, launch: int | None = None
) -> list[RequestSample]:
    """Samples of every measured (non-warm-up, successful) record; `categories`: item_id -> category; `launch`
    overrides the records' own launch."""
    cats = categories or {}
    out: list[RequestSample] = []
    for record in records:
        sample = sample_from_record(record, cats.get(record.item_id), launch=launch)
        if sample is not None:
            out.append(sample)
    return out


def _index(samples: Iterable[RequestSample]) -> tuple[dict[RequestKey, RequestSample], set[RequestKey]]:
    index: dict[RequestKey, RequestSample] = {}
    duplicates: set[RequestKey] = set()
    for sample in samples:
        if sample.key in index:
            duplicates.add(sample.key)
        else:
            index[sample.key] = sample
    return index, duplicates


def _one_launch(samples: Iterable[RequestSample], side: str) -> list[RequestSample]:
    out = list(samples)
    launches = sorted({s.launch for s in out})
    if len(launches) > 1:
        # Silently keeping one launch (the rest as "duplicates") would drop measurements without a word.
        raise ValueError(
            f"pair_requests got {side} samples from launches {launches}; pair one launch at a time "
            "(pair_by_launch) or use evidence.replication for several launches"
        )
    return out


def pair_requests(baseline: Iterable[RequestSample], candidate: Iterable[RequestSample]) -> Pairing:
    """Pair both sides by (item_id, repeat); the category comes from the baseline, else the candidate.

    Each side must come from one launch (ValueError otherwise); the pairs carry the baseline's launch index.
    """
    base_samples, cand_samples = _one_launch(baseline, "baseline"), _one_launch(candidate, "candidate")
    base, base_dup = _index(base_samples)
    cand, cand_dup = _index(cand_samples)
    launch = base_samples[0].launch if base_samples else 0
    pairs = tuple(
        RequestPair(
            item_id=key[0],
            repeat=key[1],
            launch=launch,
            category=base[key].category if base[key].category is not None else cand[key].category,
            baseline=base[key],
            candidate=cand[key],
        )
        for key in sorted(base.keys() & cand.keys())
    )
    return Pairing(
        pairs=pairs,
        baseline_only=tuple(sorted(base.keys() - cand.keys())),
        candidate_only=tuple(sorted(cand.keys() - base.keys())),
        duplicates=tuple(sorted(base_dup | cand_dup)),
    )


def pair_by_launch(baseline: Iterable[RequestSample], candidate: Iterable[RequestSample]) -> tuple[Pairing, ...]:
    """One `Pairing` per launch index found on either side, in launch order: baseline launch j with candidate j.

    In an ABBA schedule launch j of each side forms one adjacent block, so these are the closest-in-time pairs.
    """
    base, cand = list(baseline), list(candidate)
    launches = sorted({s.launch for s in base} | {s.launch for s in cand})
    return tuple(
        pair_requests([s for s in base if s.launch == j], [s for s in cand if s.launch == j]) for j in launches
    )


def pair_launches(baseline: Iterable[RequestSample], candidate: Iterable[RequestSample]) -> Pairing:
    """Every launch's pairs in one `Pairing` (`pair_by_launch`, joined): the request-level figures pool them.

    A group's launches number their passes on (launch j continues after launch j - 1's), so a key names one
    request of one launch and the joined keys never collide.
    """
    pairings = pair_by_launch(baseline, candidate)
    return Pairing(
        pairs=tuple(sorted((p for pg in pairings for p in pg.pairs), key=lambda p: (p.item_id, p.repeat))),
        baseline_only=tuple(sorted(k for pg in pairings for k in pg.baseline_only)),
        candidate_only=tuple(sorted(k for pg in pairings for k in pg.candidate_only)),
        duplicates=tuple(sorted(k for pg in pairings for k in pg.duplicates)),
    )
