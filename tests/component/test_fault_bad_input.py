"""Bad input of every kind: a one-line error naming where (file, line or field) and exit code 2, no traceback.

Plans are checked with `specselect validate`, workload files with `specselect probe` (which reads them),
results directories with `specselect verify` and `specselect run --resume`.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
import tomli_w
from test_fault_harness import FakeRun, fake_run_fixture, fake_vllm_fixture, ngram, plan_text  # noqa: F401


def _error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    """stderr without progress lines (`[   0.1s] ...`)."""
    return [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("[")]


def _assert_bad_input(done: subprocess.CompletedProcess[str], where: str, *, problems: int = 0) -> list[str]:
    """Exit 2; `specselect: error: ...` naming `where`; then exactly `problems` lines, each naming `where`."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    lines = _error_lines(done)
    assert lines[0].startswith("specselect: error: ") and where in lines[0], lines
    assert len(lines) == 1 + problems, lines
    assert all(where in line for line in lines[1:]), lines
    return lines


def _plan_dict(fake_run: FakeRun) -> dict[str, object]:
    return tomllib.loads(plan_text(fake_run.python))


def _write(fake_run: FakeRun, name: str, data: bytes | str) -> Path:
    path = fake_run.dir / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


# -- plans ---------------------------------------------------------------------------------------------------


def test_malformed_toml_names_line_and_column(fake_run: FakeRun) -> None:
    _write(fake_run, "plan.toml", 'schema_version = 1\nlabel = "x"\n[target\nmodel = "m"\n')
    lines = _assert_bad_input(fake_run.call("validate", "plan.toml"), "plan.toml:3:")
    assert "invalid TOML" in lines[0] and "fix:" in lines[0]


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (("engine", "bogus", 1), "engine.bogus", "unknown key 'bogus'"),
        (("", "colour", "red"), "colour", "unknown key 'colour'"),
        (("sampling", "max_tokens", "ten"), "sampling.max_tokens", "must be an integer"),
        (("run", "concurrency", 2), "run.concurrency", ""),
        (("engine", "startup_timeout_s", True), "engine.startup_timeout_s", ""),
        (("sampling", "max_tokens", 10**18), "sampling.max_tokens", ""),
        (("run", "repeats", 2**63 - 1), "run.repeats", ""),
        (("run", "concurrency", list(range(1, 100))), "run.concurrency", ""),
        (("target", "max_model_len", -5), "target.max_model_len", ""),
        (("engine", "host", "0.0.0.0"), "engine.host", "host '0.0.0.0' is not a loopback address"),
    ],
    ids=[
        "unknown-key",
        "unknown-top-level-key",
        "wrong-type",
        "scalar-for-list",
        "bool-for-float",
        "huge-int",
        "huge-repeats",
        "long-list",
        "negative",
        "remote-bind",
    ],
)
def test_plan_field_errors_name_the_field(
    fake_run: FakeRun, edit: tuple[str, str, object], field: str, message: str
) -> None:
    data = _plan_dict(fake_run)
    table, key, value = edit
    target = data if not table else data[table]
    assert isinstance(target, dict)
    target[key] = value
    _write(fake_run, "plan.toml", tomli_w.dumps(data))
    lines = _assert_bad_input(fake_run.call("validate", "plan.toml"), "plan.toml", problems=1)
    assert f"plan.toml: {field}: {message}" in lines[1], lines


def test_unknown_family_names_the_known_ones(fake_run: FakeRun) -> None:
    _write(fake_run, "plan.toml", plan_text(fake_run.python, candidates=[{"name": "g1", "family": "warp-drive"}]))
    lines = _assert_bad_input(fake_run.call("validate", "plan.toml"), "plan.toml", problems=1)
    assert "candidates[0].family: unknown proposer family 'warp-drive'" in lines[1] and "ngram" in lines[1]


def test_unknown_method_is_unsupported_at_admission_not_an_input_error(fake_run: FakeRun) -> None:
    """Methods are the engine's vocabulary (contract section 2, gate 2): an unknown one makes the candidate
    `unsupported` before any server starts; the plan itself is valid."""
    fake_run.plan(candidates=[{**ngram("g1"), "method": "no_such_method"}])
    assert fake_run.call("validate", "plan.toml").returncode == 0
    done = fake_run.call("probe", "plan.toml", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    (result,) = json.loads(done.stdout)["admission"]["results"]
    assert result["run_status"] == "unsupported" and "method" in result["reason"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "plan does not validate"),
        (b'schema_version = 1\nlabel = "caf\xe9"\n', "not UTF-8 text (byte 0xe9 at line 2, column 13)"),
        (b"# " + b"x" * (1 << 20) + b"\n", "plans are at most"),
        (b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
    ],
    ids=["empty", "non-utf8", "huge-file", "deep-nesting"],
)
def test_unreadable_plan_files(fake_run: FakeRun, data: bytes, message: str) -> None:
    _write(fake_run, "plan.toml", data)
    done = fake_run.call("validate", "plan.toml")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = _error_lines(done)
    assert lines[0].startswith("specselect: error: plan.toml") and message in lines[0], lines
    assert all("plan.toml" in line for line in lines)


def test_missing_plan_file(fake_run: FakeRun) -> None:
    _assert_bad_input(fake_run.call("validate", "nope.toml"), "nope.toml")


# -- workload files -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "where", "message"),
    [
        (b"", "wl.jsonl", "the workload file is empty"),
        (b"\n  \n", "wl.jsonl", "the workload file is empty"),
        (b'{"id": "a", "messages": [}\n', "wl.jsonl:1", "malformed JSON"),
        (b'{"id": "a", "prompt": "caf\xe9"}\n', "wl.jsonl:1", "not valid UTF-8"),
        (b'{"id": 7, "prompt": "x"}\n', "wl.jsonl:1", "id"),
        (b'{"id": "a", "prompt": "x", "temperature": 2}\n', "wl.jsonl:1", "temperature"),
        (b'{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', "wl.jsonl:2", "duplicate id"),
        (b"[1, 2]", "wl.jsonl", "item [0]"),
        (b"".join(b'{"id": "r%d", "prompt": "x"}\n' % i for i in range(100_002)), "wl.jsonl", "more than 100000"),
    ],
    ids=["empty", "blank", "malformed", "non-utf8", "wrong-type", "unknown-key", "duplicate", "array", "huge"],
)
def test_bad_workload_files(fake_run: FakeRun, content: bytes, where: str, message: str) -> None:
    _write(fake_run, "wl.jsonl", content)
    fake_run.plan()
    done = fake_run.call("probe", "plan.toml")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    lines = _error_lines(done)
    assert lines[0].startswith("specselect: error: ") and where in lines[0] and message in lines[0], lines
    assert len(lines) <= 1 + 51  # the first problem in the message, at most 50 listed, then a count


def test_missing_workload_file_is_found_by_validate(fake_run: FakeRun) -> None:
    fake_run.plan(workload="missing.jsonl")
    lines = _assert_bad_input(fake_run.call("validate", "plan.toml"), "plan.toml", problems=1)
    assert "workloads.w: workload file not found" in lines[1]


# -- results directories --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "files",
    [
        {},
        {"results.json": b'{"tool": "other-bench", "runs": []}'},
        {"manifest.json": b'{"name": "some other tool", "version": 3}'},
        {"manifest.json": b'{"tool": "specselect", "schema_version": 99}'},
    ],
    ids=["empty", "foreign-files", "foreign-manifest", "future-version"],
)
def test_results_directory_from_another_tool(fake_run: FakeRun, files: dict[str, bytes]) -> None:
    other = fake_run.results / "faults"
    other.mkdir(parents=True)
    for name, data in files.items():
        (other / name).write_bytes(data)
    verify = fake_run.call("verify", "results/faults")
    _assert_bad_input(verify, "results/faults")
    if files:  # an empty directory is simply a new run; anything else is refused by --resume
        fake_run.plan()
        resume = fake_run.call("run", "plan.toml", "--resume")
        _assert_bad_input(resume, "results/faults")


def test_results_path_that_is_not_a_directory(fake_run: FakeRun) -> None:
    _write(fake_run, "file.txt", "hello")
    _assert_bad_input(fake_run.call("verify", "file.txt"), "file.txt")


def test_bad_label_flag(fake_run: FakeRun) -> None:
    fake_run.plan()
    lines = _assert_bad_input(fake_run.call("run", "plan.toml", "--label", "a b/../c"), "--label")
    assert "fix:" in lines[0]
