"""The CLI's entry point: version, help, exit codes and the single place that maps errors to them."""

from __future__ import annotations

import argparse
import re

import pytest

import specselect
import specselect._cli.validate
from specselect import errors
from specselect._cli.main import COMMAND_MODULES, EXIT_CODES_HELP, main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "--version") == (0, f"specselect {specselect.__version__}\n", "")


def test_help_shows_the_exit_code_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    assert EXIT_CODES_HELP in out
    for command in ("validate", "plan", "schema"):
        assert re.search(rf"^\s+{command}\s", out, re.MULTILINE)


def test_exit_code_table_covers_every_error_class() -> None:
    documented = {int(m) for m in re.findall(r"^\s+(\d+)\s", EXIT_CODES_HELP, re.MULTILINE)}
    assert set(errors.EXIT_CODES.values()) | {0, 1, 2, 130} <= documented
    assert documented == {0, 1, 2, 3, 4, 5, 6, 7, 130, 141}


def test_doctor_fails_with_its_own_exit_code_not_a_bugs() -> None:
    from specselect._cli.doctor import PROBLEMS_FOUND

    assert PROBLEMS_FOUND == 7
    assert re.search(r"^\s+7\s+`specselect doctor`", EXIT_CODES_HELP, re.MULTILINE)


def test_every_command_module_has_register() -> None:
    import importlib

    for name in COMMAND_MODULES:
        assert callable(importlib.import_module(name).register)


@pytest.mark.parametrize(
    "argv",
    [[], ["frobnicate"], ["validate"], ["validate", "a", "b"], ["--nope"], ["plan"], ["plan", "show"]],
)
def test_usage_errors_exit_2_without_traceback(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert "usage: specselect" in err
    assert "Traceback" not in err + out


def _failing_handler(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    def handler(args: argparse.Namespace) -> int:
        raise exc

    monkeypatch.setattr(specselect._cli.validate, "run", handler)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (errors.ConfigError("bad flag", location="--x", fix="drop it"), 2),
        (errors.ResultsError("foreign directory", location="out/"), 2),
        (errors.EngineSetupError("no env", fix="run specselect setup"), 3),
        (errors.MissingDependencyError("aiohttp missing", fix="pip install aiohttp"), 3),
        (errors.ServerStartError("exited with 1", location="g1_ngram"), 4),
        (errors.ServerTimeoutError("not ready after 600 s"), 4),
        (errors.ArtifactError("disk full", location="out/x.json"), 5),
        (errors.InterruptedRun("stopped by SIGTERM"), 130),
    ],
)
def test_specselect_errors_map_to_their_exit_code(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, exc: errors.SpecselectError, code: int
) -> None:
    _failing_handler(monkeypatch, exc)
    assert run_cli(capsys, "validate", "x") == (code, "", f"specselect: error: {exc.one_line()}\n")


def test_problems_are_printed_one_per_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _failing_handler(monkeypatch, errors.PlanError("2 problems", location="p.toml", problems=["p: a", "p: b"]))
    assert run_cli(capsys, "validate", "x") == (2, "", "specselect: error: p.toml: 2 problems\np: a\np: b\n")


def test_keyboard_interrupt_exits_130(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _failing_handler(monkeypatch, KeyboardInterrupt())
    assert run_cli(capsys, "validate", "x") == (130, "", "specselect: interrupted\n")


def test_bug_prints_traceback_and_exits_1(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _failing_handler(monkeypatch, ZeroDivisionError("oops"))
    code, _, err = run_cli(capsys, "validate", "x")
    assert code == 1
    assert "Traceback (most recent call last)" in err
    assert "ZeroDivisionError: oops" in err
    assert err.rstrip().endswith("this is a bug in specselect; please report it with the traceback above")


def test_closed_output_pipe_exits_141_quietly(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_handler(monkeypatch, BrokenPipeError())
    assert run_cli(capsys, "validate", "x") == (141, "", "")
