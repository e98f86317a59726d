"""Records written before the engine-neutral fields read the same: a request record that kept vLLM's per-request
`metrics` object as `spec_metrics` keeps it among the engine's own fields, and reading it back through the engine's
reader (as `--resume` does) gives the counts a new record carries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_records
from specselect._engines.base import recorded_request_spec_metrics
from specselect.errors import ResultsError
from specselect.records.measurement import RequestRecord
from specselect.records.telemetry import RequestSpecMetrics

OLD_METRICS = {
    "speculative_decoding": {
        "num_spec_steps": 5,
        "num_draft_tokens": 20,
        "num_accepted_draft_tokens": 13,
        "num_spec_tokens": 4,
        "acceptance_histogram": [1, 0, 1, 2, 1],
    }
}


def _old_line(metrics: object) -> str:
    """A record line in the layout stop 33 wrote (`spec_metrics`, no `engine_fields`/`speculative`)."""
    return json.dumps(
        {
            "schema_version": 1,
            "request_id": "r1",
            "item_id": "copy-01",
            "scenario": "copy-c1",
            "repeat": 0,
            "warmup": False,
            "output_text": "x",
            "spec_metrics": metrics,
        }
    )


def _write(tmp_path: Path, *lines: str) -> RunLayout:
    layout = RunLayout(tmp_path / "run")
    path = layout.records("g1_ngram", "copy-c1", 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return layout


def test_an_old_record_keeps_the_metrics_object_among_the_engine_fields() -> None:
    record = RequestRecord.model_validate_json(_old_line(OLD_METRICS))
    assert record.engine_fields == {"metrics": OLD_METRICS}
    assert record.speculative is None
    assert RequestRecord.model_validate_json(_old_line(None)).engine_fields is None


def test_reading_old_records_through_the_engine_gives_the_counts_of_a_new_record(tmp_path: Path) -> None:
    layout = _write(tmp_path, _old_line(OLD_METRICS), _old_line(None))
    with_counts, without = load_records(layout, "g1_ngram", "copy-c1", read_spec_metrics=recorded_request_spec_metrics)
    assert with_counts.speculative == RequestSpecMetrics(
        num_spec_steps=5,
        num_draft_tokens=20,
        num_accepted_draft_tokens=13,
        proposal_length=4,
        acceptance_histogram=(1, 0, 1, 2, 1),
    )
    assert without.speculative is None
    assert load_records(layout, "g1_ngram", "copy-c1")[0].speculative is None  # no reader: left unread


def test_an_old_record_with_a_count_that_is_not_one_names_its_line(tmp_path: Path) -> None:
    bad = {"speculative_decoding": {"num_draft_tokens": "many"}}
    layout = _write(tmp_path, _old_line(OLD_METRICS), _old_line(bad))
    with pytest.raises(ResultsError, match=r"copy-c1\.jsonl:2.*num_draft_tokens is 'many', expected a count"):
        load_records(layout, "g1_ngram", "copy-c1", read_spec_metrics=recorded_request_spec_metrics)
