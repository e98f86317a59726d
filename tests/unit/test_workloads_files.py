"""User workload files: JSON Lines, JSON arrays, ShareGPT, headers, and every refusal with file, line and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specselect._workloads import load_workload, reader
from specselect._workloads.loader import UNVERSIONED
from specselect.errors import WorkloadError
from specselect.records.workloads import ChatMessage


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _error(path: Path) -> WorkloadError:
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    err = info.value
    assert "\n" not in str(err)
    assert all("\n" not in line for line in err.problems)
    return err


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_jsonl_with_chat_and_prompt_items(tmp_path: Path) -> None:
    path = tmp_path / "my load.jsonl"
    path.write_text(
        json.dumps({"id": "a", "messages": _chat("Hi"), "category": "chat", "max_tokens": 32})
        + "\n\n   \n"
        + json.dumps({"id": "b", "prompt": "Once upon a time"})
        + "\r\n",
        encoding="utf-8",
    )
    wl = load_workload(str(path))
    assert [i.id for i in wl.items] == ["a", "b"]
    assert wl.items[0].messages == (ChatMessage(role="user", content="Hi"),)
    assert wl.items[0].max_tokens == 32
    assert wl.items[1].prompt == "Once upon a time"
    assert wl.identity.name == "my-load"
    assert wl.identity.version == UNVERSIONED
    assert wl.identity.source == str(path)
    assert wl.identity.item_count == 2


def test_header_gives_name_and_version_and_freezes_content(tmp_path: Path) -> None:
    rows = [{"id": "a", "messages": _chat("Hi")}]
    first = load_workload(str(_jsonl(tmp_path / "a.jsonl", rows)))
    header = {"specselect_workload": {"name": "support", "version": "3", "sha256": first.identity.sha256}}
    wl = load_workload(str(_jsonl(tmp_path / "b.jsonl", [header, *rows])))
    assert (wl.identity.name, wl.identity.version) == ("support", "3")
    assert load_workload(str(tmp_path / "b.jsonl"), name="other").identity.name == "other"
    rows[0]["messages"] = _chat("Ho")
    err = _error(_jsonl(tmp_path / "c.jsonl", [header, *rows]))
    assert "does not match the header" in err.message


def test_relative_path_resolves_against_base_dir(tmp_path: Path) -> None:
    _jsonl(tmp_path / "w.jsonl", [{"id": "a", "prompt": "x"}])
    wl = load_workload("w.jsonl", base_dir=tmp_path)
    assert wl.identity.source == str(tmp_path / "w.jsonl")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"no such workload file.*builtin:general"):
        load_workload("nope.jsonl", base_dir=tmp_path)
    with pytest.raises(WorkloadError, match="is a directory"):
        load_workload(str(tmp_path))


def test_sharegpt_jsonl_keeps_the_conversation_up_to_the_last_human_turn(tmp_path: Path) -> None:
    conv = [
        {"from": "system", "value": "Be brief."},
        {"from": "human", "value": "Hi"},
        {"from": "gpt", "value": "Hello!"},
        {"from": "human", "value": "Tell me a joke."},
        {"from": "gpt", "value": "Why did ..."},
    ]
    wl = load_workload(str(_jsonl(tmp_path / "s.jsonl", [{"id": "c1", "conversations": conv}])))
    assert wl.items[0].messages == (
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="Hi"),
        ChatMessage(role="assistant", content="Hello!"),
        ChatMessage(role="user", content="Tell me a joke."),
    )


def test_sharegpt_json_array_and_same_hash_as_native(tmp_path: Path) -> None:
    share = tmp_path / "s.json"
    share.write_text(
        json.dumps(
            [{"id": "c1", "conversations": [{"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"}]}], indent=2
        ),
        encoding="utf-8",
    )
    native = _jsonl(tmp_path / "n.jsonl", [{"id": "c1", "messages": _chat("Q")}])
    assert load_workload(str(share)).identity.sha256 == load_workload(str(native)).identity.sha256


def test_sharegpt_problems(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "conversations": [{"from": "gpt", "value": "only me"}]},
        {"id": "b", "conversations": [{"from": "humna", "value": "x"}]},
        {"id": "c", "conversations": []},
    ]
    err = _error(_jsonl(tmp_path / "s.jsonl", rows))
    text = "\n".join(err.problems)
    assert "s.jsonl:1: field 'conversations': has no human turn" in text
    assert "s.jsonl:2: field 'conversations[0].from': unknown speaker 'humna' (fix: did you mean 'human'?)" in text
    assert "s.jsonl:3: field 'conversations': must not be empty" in text


def test_malformed_json_names_line_and_collects_problems(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"id": "a", "prompt": "ok"}\n\n{"id": "b", "prompt": "x",}\n{"id": 7, "mesages": []}\n', encoding="utf-8"
    )
    err = _error(path)
    assert err.location == f"{path}:3"
    assert str(err).startswith(f"{path}:3: malformed JSON at column")
    assert len(err.problems) == 4
    text = "\n".join(err.problems)
    assert f"{path}:4: field 'mesages': unknown key (fix: remove it; did you mean 'messages'?)" in text
    assert f"{path}:4: field 'id': must be a string, got number" in text
    assert f"{path}:4: field 'messages': give exactly one of" in text


@pytest.mark.parametrize(
    ("row", "field", "words"),
    [
        ({"id": "a", "messages": []}, "messages", "must not be empty"),
        ({"id": "a", "messages": "hi"}, "messages", "must be an array"),
        ({"id": "a", "messages": _chat("  ")}, "messages[0].content", "must not be empty"),
        ({"id": "a", "messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content", "arrays"),
        ({"id": "a", "messages": [{"role": "usr", "content": "x"}]}, "messages[0].role", "did you mean 'user'"),
        ({"id": "a", "messages": [{"role": "user", "content": "x", "name": "n"}]}, "messages[0].name", "unknown key"),
        (
            {"id": "a", "messages": [*_chat("q"), {"role": "assistant", "content": "a"}]},
            "messages",
            "last message has role 'assistant'",
        ),
        (
            {"id": "a", "messages": [*_chat("q"), {"role": "system", "content": "s"}, *_chat("q2")]},
            "messages[1].role",
            "system message may only come",
        ),
        ({"id": "a", "prompt": "p", "messages": _chat("x")}, "messages", "exactly one"),
        ({"id": "a"}, "messages", "exactly one"),
        ({"id": "a", "prompt": ""}, "prompt", "must not be empty"),
        ({"id": "a", "prompt": 3}, "prompt", "must be a string"),
        ({"messages": _chat("x")}, "id", "missing"),
        ({"id": " ", "prompt": "p"}, "id", "must not be empty"),
        ({"id": "a", "prompt": "p", "max_tokens": "64"}, "max_tokens", "positive integer"),
        ({"id": "a", "prompt": "p", "max_tokens": True}, "max_tokens", "positive integer"),
        ({"id": "a", "prompt": "p", "max_tokens": 0}, "max_tokens", "between 1 and"),
        ({"id": "a", "prompt": "p", "category": 5}, "category", "must be a string"),
    ],
)
def test_field_problems_name_line_and_field(tmp_path: Path, row: dict[str, Any], field: str, words: str) -> None:
    path = _jsonl(tmp_path / "w.jsonl", [{"id": "ok", "prompt": "fine"}, row])
    err = _error(path)
    assert any(p.startswith(f"{path}:2: field '{field}': ") and words in p for p in err.problems), err.problems
    assert err.fix


def test_duplicate_ids_name_both_lines(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "d.jsonl", [{"id": "x", "prompt": "a"}, {"id": "y", "prompt": "b"}, {"id": "x", "prompt": "c"}]
    )
    err = _error(path)
    assert str(err).startswith(f"{path}:3: field 'id': duplicate id 'x', also used on line 1")
    # reported even when the repeated record has problems of its own
    path = _jsonl(tmp_path / "d.jsonl", [{"id": "x", "prompt": "a"}, {"id": "x", "prompt": ""}])
    assert any("duplicate id 'x', also used on line 1" in p for p in _error(path).problems)


def test_json_array_problems_use_the_item_index(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps([{"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y"}, "oops"]), encoding="utf-8")
    err = _error(path)
    assert str(err).startswith(f"{path}: item [2]: expected a JSON object")
    path.write_text(json.dumps([{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}]), encoding="utf-8")
    assert "also used on item [0]" in str(_error(path))
    path.write_text('[\n  {"id": "a", "prompt": "x"}\n  {"id": "b"}\n]', encoding="utf-8")
    assert _error(path).location == f"{path}:3"


def test_non_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"id": "a", "prompt": "ok"}\n{"id": "b", "prompt": "caf\xe9"}\n')
    err = _error(path)
    assert str(err).startswith(f"{path}:2: bytes are not valid UTF-8 (byte 0xe9 at column 27)")
    assert "UTF-8" in (err.fix or "")


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "a", "prompt": "ok"}).encode())
    assert load_workload(str(path)).items[0].id == "a"


@pytest.mark.parametrize("content", [b"", b"  \n\n \n"])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "e.jsonl"
    path.write_bytes(content)
    assert "is empty" in _error(path).message


def test_header_only_and_misplaced_header(tmp_path: Path) -> None:
    header = {"specselect_workload": {"name": "n", "version": "1"}}
    assert "no requests" in _error(_jsonl(tmp_path / "h.jsonl", [header])).message
    err = _error(_jsonl(tmp_path / "m.jsonl", [{"id": "a", "prompt": "x"}, header]))
    assert "may only be the first record" in str(err)
    bad = {"specselect_workload": {"name": "n", "verison": "1"}}
    err = _error(_jsonl(tmp_path / "b.jsonl", [bad, {"id": "a", "prompt": "x"}]))
    assert "specselect_workload.verison" in str(err)
    compose = {"specselect_workload": {"compose": ["general-01"]}}
    assert "only for built-in" in str(_error(_jsonl(tmp_path / "c.jsonl", [compose, {"id": "a", "prompt": "x"}])))


def test_nan_and_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "n.jsonl"
    path.write_text('{"id": "a", "prompt": "x", "max_tokens": NaN}\n', encoding="utf-8")
    assert "NaN is not valid JSON" in str(_error(path))
    path.write_text('{"id": "a", "prompt": "x", "id": "b"}\n', encoding="utf-8")
    assert str(_error(path)).startswith(f"{path}:1: field 'id': key given twice")


def test_one_pretty_printed_object_gets_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"id": "a", "prompt": "x"}, indent=2), encoding="utf-8")
    assert "one multi-line JSON object" in _error(path).message


def test_absurd_sizes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = _jsonl(tmp_path / "big.jsonl", [{"id": "a", "prompt": "x" * 1_000_001}])
    assert "over the 1 MB limit" in str(_error(big))
    monkeypatch.setattr(reader, "MAX_ITEMS", 3)
    many = _jsonl(tmp_path / "many.jsonl", [{"id": str(i), "prompt": "x"} for i in range(6)])
    assert "more than 3 requests" in str(_error(many))
    arr = tmp_path / "many.json"
    arr.write_text(json.dumps([{"id": str(i), "prompt": "x"} for i in range(6)]), encoding="utf-8")
    assert "more than 3 requests" in str(_error(arr))


def test_problem_list_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "MAX_PROBLEMS", 2)
    err = _error(_jsonl(tmp_path / "w.jsonl", [{"id": str(i)} for i in range(5)]))
    assert len(err.problems) == 3
    assert err.problems[-1] == "... and 3 more problems not shown"
    assert "4 more problem(s) listed" in err.message
