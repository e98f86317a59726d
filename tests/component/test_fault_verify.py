"""`specselect verify`: an intact run passes; any damaged, missing or swapped artifact is named (exit 5);
a directory that is not a specselect run is refused (exit 2)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fault_harness import FakeRun, assert_no_orphans, fake_vllm_fixture, ngram  # noqa: F401

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect._artifacts.verify import verify_run
from specselect._cli.main import main
from specselect.records.results import Manifest

LABEL = "faults"


@pytest.fixture(scope="module")
def template(fake_vllm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A finished run of the stand-in engine: two measured groups and one that crashed (read-only template)."""
    base = tmp_path_factory.mktemp("verify")
    (base / "work").mkdir()
    run = FakeRun(base / "work", fake_vllm, base / "home")
    run.plan(candidates=[ngram("g1_ngram"), ngram("g2_crash", "--fake-crash-after", "3")])
    done = run.call("run", "plan.toml", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    yield run.results / LABEL
    assert_no_orphans(fake_vllm.parents[1], run.results)


@pytest.fixture
def copy(template: Path, tmp_path: Path) -> Path:
    """A private copy of the template run."""
    return Path(shutil.copytree(template, tmp_path / LABEL))


def _verify(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["verify", str(root), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_intact_run_verifies(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _verify(copy, capsys)
    assert code == 0, err
    assert out.startswith(f"OK {copy}: run 'faults' (complete): ")
    report = verify_run(copy)
    manifest = load_document(RunLayout(copy).manifest, Manifest)
    assert report.hashed_files >= len([f for f in manifest.files if f != "manifest.json"])
    assert report.record_files >= 2 and report.records > 0  # g0 and g1 measured (plus parity passes)
    code, out, _ = _verify(copy, capsys, "--json")
    assert code == 0 and json.loads(out)["problems"] == []


def _first_records(root: Path) -> Path:
    return sorted((root / "records" / "g1_ngram").glob("*.jsonl"))[0]


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("flip-group", ["groups/g1_ngram.json: sha256"]),
        ("truncate-evidence", ["evidence.json: sha256", "evidence.json: not a readable JSON result file"]),
        ("delete-handoff", ["handoff.json: missing"]),
        ("delete-records", ["records/g1_ngram/", "missing (groups/g1_ngram.json lists it)"]),
        ("append-record", ["records/g1_ngram/", "sha256"]),
        ("swap-groups", ["groups/g1_ngram.json: sha256", "groups/g2_crash.json: sha256"]),
        ("truncate-manifest", ["manifest.json: not readable JSON"]),
        ("invalid-field", ["admission.json: sha256", "admission.json: invalid result file"]),
    ],
)
def test_damage_is_named_with_exit_5(
    copy: Path, capsys: pytest.CaptureFixture[str], damage: str, expected: list[str]
) -> None:
    if damage == "flip-group":
        path = copy / "groups" / "g1_ngram.json"
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    elif damage == "truncate-evidence":
        path = copy / "evidence.json"
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "delete-handoff":
        (copy / "handoff.json").unlink()
    elif damage == "delete-records":
        _first_records(copy).unlink()
    elif damage == "append-record":
        with _first_records(copy).open("a") as fh:
            fh.write('{"not": "a record"}\n')
    elif damage == "swap-groups":
        a, b = copy / "groups" / "g1_ngram.json", copy / "groups" / "g2_crash.json"
        data_a, data_b = a.read_bytes(), b.read_bytes()
        a.write_bytes(data_b)
        b.write_bytes(data_a)
    elif damage == "truncate-manifest":
        path = copy / "manifest.json"
        path.write_bytes(path.read_bytes()[:-40])
    elif damage == "invalid-field":
        path = copy / "admission.json"
        doc = json.loads(path.read_text())
        doc["results"] = "not a list"
        path.write_text(json.dumps(doc))
    code, out, err = _verify(copy, capsys)
    assert code == 5, out + err
    assert out == ""
    lines = err.splitlines()
    assert lines[0].startswith(f"specselect: error: {copy}: ") and "problem" in lines[0]
    for fragment in expected:
        assert any(fragment in line for line in lines[1:]), (fragment, lines)
    assert "Traceback" not in err


def test_unfinished_run_verifies_with_a_note(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["status"] = "interrupted"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    (copy / "groups" / ".g1_ngram.json.x1y2.tmp").write_text("{half")
    code, _, err = _verify(copy, capsys)
    assert code == 0, err
    assert "note: manifest.json: run status is 'interrupted': continue it with --resume" in err
    assert "note: groups/.g1_ngram.json.x1y2.tmp: temporary file of an interrupted write" in err


def test_manifest_pointing_outside_the_run_is_a_problem(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"]["../../etc/passwd"] = "0" * 64
    (copy / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = _verify(copy, capsys)
    assert code == 5
    assert "manifest.json: lists '../../etc/passwd', which is not a path inside the run directory" in err


def test_group_file_the_plan_does_not_have_is_a_problem(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(copy / "groups" / "g1_ngram.json", copy / "groups" / "g9_stray.json")
    code, _, err = _verify(copy, capsys)
    assert code == 5
    assert "groups/g9_stray.json: a group that the plan in manifest.json does not have" in err


def test_manifest_does_not_list_its_own_hash(template: Path) -> None:
    manifest = load_document(RunLayout(template).manifest, Manifest)
    assert "manifest.json" not in manifest.files


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_change_to_a_hashed_file_is_detected(template: Path, data: st.DataObject) -> None:
    """Property: flipping, cutting or extending any file whose hash is recorded is always reported, by name."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(shutil.copytree(template, Path(tmp) / LABEL))
        manifest = load_document(RunLayout(root).manifest, Manifest)
        hashed = sorted({*manifest.files, *(r for g in manifest.groups for r in g.records)} - {"manifest.json"})
        rel = data.draw(st.sampled_from(hashed))
        path = root / rel
        original = path.read_bytes()
        how = data.draw(st.sampled_from(["flip", "cut", "extend"]))
        if how == "flip":
            at = data.draw(st.integers(0, len(original) - 1))
            changed = original[:at] + bytes([original[at] ^ data.draw(st.integers(1, 255))]) + original[at + 1 :]
        elif how == "cut":
            changed = original[: data.draw(st.integers(0, len(original) - 1))]
        else:
            changed = original + data.draw(st.binary(min_size=1, max_size=20))
        path.write_bytes(changed)
        report = verify_run(root)
        assert not report.ok
        assert any(problem.startswith(rel) for problem in report.problems), (rel, report.problems)
