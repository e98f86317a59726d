"""Fuzzing the result loaders and `verify_run`: any bytes give a document, a report or a ResultsError."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document, load_records
from specselect._artifacts.verify import VerifyReport, verify_run
from specselect.errors import ResultsError
from specselect.records.document import RESULTS_SCHEMA_VERSION
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff
from specselect.records.results import AdmissionFile, EvidenceFile, Manifest, PreflightFile

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODELS: list[type[BaseModel]] = [Manifest, PreflightFile, AdmissionFile, GroupResult, EvidenceFile, Handoff]

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=20),
)
_KEYS = ["tool", "schema_version", "label", "status", "groups", "files", "name", "run_status", "summary", "scenarios"]
json_any = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=6), inner),
    max_leaves=15,
)
ours = st.fixed_dictionaries(
    {"tool": st.just("specselect"), "schema_version": st.sampled_from([RESULTS_SCHEMA_VERSION, 0, 2, "1", None])},
    optional={k: json_any for k in _KEYS[2:]},
)
document_bytes = st.one_of(
    st.binary(max_size=300),
    json_any.map(lambda v: json.dumps(v).encode()),
    ours.map(lambda v: json.dumps(v).encode()),
)


def _results_error(exc: ResultsError) -> None:
    assert exc.exit_code == 2
    assert "\n" not in exc.one_line()


def _load(data: bytes, model: type[BaseModel]) -> BaseModel | None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "doc.json"
        path.write_bytes(data)
        try:
            return load_document(path, model)
        except ResultsError as exc:
            _results_error(exc)
            return None


@FUZZ
@given(document_bytes, st.sampled_from(MODELS))
@example(b"\xff\xfe", Manifest)
@example(b'{"tool": "other", "schema_version": 1}', Manifest)
@example(b'{"tool": "specselect", "schema_version": 99}', GroupResult)
def test_load_document_on_arbitrary_bytes(data: bytes, model: type[BaseModel]) -> None:
    _load(data, model)


@pytest.mark.parametrize("data", [b"[" * 100_000, b'{"a": ' * 100_000], ids=["array", "object"])
def test_load_document_refuses_deep_nesting(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "manifest.json"
        path.write_bytes(data)
        with pytest.raises(ResultsError):
            load_document(path, Manifest)


@FUZZ
@given(st.lists(st.binary(max_size=80) | json_any.map(lambda v: json.dumps(v).encode()), max_size=5))
@example([b"[" * 5000])
def test_load_records_on_arbitrary_lines(lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        layout = RunLayout(Path(tmp))
        path = layout.records("g0_target_only", "w-c1")
        path.parent.mkdir(parents=True)
        path.write_bytes(b"\n".join(lines))
        try:
            load_records(layout, "g0_target_only", "w-c1")
        except ResultsError as exc:
            _results_error(exc)


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


_NAMES = st.sampled_from(
    [
        "manifest.json",
        "preflight.json",
        "admission.json",
        "evidence.json",
        "handoff.json",
        "groups/g0_target_only.json",
        "groups/g1.json",
        "records/g0_target_only/w-c1.jsonl",
        ".manifest.json.abc.tmp",
    ]
)


@FUZZ
@given(st.dictionaries(_NAMES, document_bytes, max_size=6))
@example({})
@example({"manifest.json": b'{"tool": "specselect", "schema_version": 1}'})
def test_verify_on_arbitrary_directories(files: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write_tree(root, files)
        try:
            report = verify_run(root)
        except ResultsError as exc:
            _results_error(exc)
            return
        assert isinstance(report, VerifyReport)
        assert all("\n" not in line for line in report.problems)
