"""Reading workload files: JSON Lines or a JSON array, optional header record, strict validation.

A file is a JSON array when its first non-blank character is `[`, JSON Lines otherwise (one request per
line; blank lines are skipped, nothing else is). Its first record may be a header
`{"specselect_workload": {"schema_version": 1, "name": ..., "version": ..., "description": ..., "sha256": ...}}`;
when the header gives `sha256`, the content must hash to it (a frozen file stays frozen).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specselect._workloads.canonical import content_sha256
from specselect._workloads.records import Problem, validate_record
from specselect.errors import WorkloadError
from specselect.records.workloads import DatasetSource, WorkloadItem

__all__ = [
    "HEADER_KEY",
    "MAX_FILE_BYTES",
    "MAX_ITEMS",
    "MAX_PROBLEMS",
    "ParsedFile",
    "WorkloadHeader",
    "parse_workload_bytes",
    "problems_error",
    "read_workload_file",
]

HEADER_KEY = "specselect_workload"
MAX_ITEMS = 100_000
MAX_FILE_BYTES = 512 * 1024 * 1024
MAX_PROBLEMS = 50
"""At most this many problems are listed; the rest are counted."""

_FORMAT_FIX = 'write one request per line, e.g. {"id": "r1", "messages": [{"role": "user", "content": "Hi"}]}'


class WorkloadHeader(BaseModel):
    """The optional first record of a workload file: name, version and frozen hash."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    name: str | None = Field(default=None, min_length=1, max_length=100)
    version: str | None = Field(default=None, min_length=1, max_length=64)
    description: str | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    compose: tuple[str, ...] | None = None
    """Built-in only: ids of items taken, in this order, from the other built-in workloads."""
    provenance: DatasetSource | None = None
    """Built-ins taken from a public prompt set: where the items come from (see `specselect._workloads.datasets`)."""


@dataclass(frozen=True)
class ParsedFile:
    """A validated workload file before it gets an identity."""

    header: WorkloadHeader | None
    items: tuple[WorkloadItem, ...]
    format: Literal["jsonl", "json_array"]


class _Dict(dict[str, Any]):
    """A decoded JSON object that remembers keys given twice (json keeps only the last)."""

    duplicates: tuple[str, ...] = ()


def _pairs(pairs: list[tuple[str, Any]]) -> _Dict:
    out = _Dict()
    dups: list[str] = []
    for key, value in pairs:
        if key in out:
            dups.append(key)
        out[key] = value
    out.duplicates = tuple(dups)
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class _TooDeep(ValueError):
    """JSON nested deeper than Python's decoder can follow."""


def _loads(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except RecursionError:
        raise _TooDeep("JSON nested too deeply") from None


def _value_fix(exc: ValueError) -> str:
    return "flatten the record" if isinstance(exc, _TooDeep) else "write a number or a string instead"


def _duplicate_keys(value: Any, path: str = "") -> Iterator[str]:
    if isinstance(value, _Dict):
        for key in value.duplicates:
            yield f"{path}{key}"
        for key, sub in value.items():
            yield from _duplicate_keys(sub, f"{path}{key}.")
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            yield from _duplicate_keys(sub, f"{path[:-1]}[{index}]." if path else f"[{index}].")


def problems_error(problems: list[Problem]) -> WorkloadError:
    """One `WorkloadError` for a list of problems: the first in the message, all in `.problems`."""
    first = problems[0]
    message = " ".join(first.message.split())
    if first.field:
        message = f"field '{first.shown_field}': {message}"
    if len(problems) > 1:
        message += f"; {len(problems) - 1} more problem(s) listed"
    lines = [p.line() for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        lines.append(f"... and {len(problems) - MAX_PROBLEMS} more problems not shown")
    return WorkloadError(message, location=first.where, fix=first.fix, problems=lines)


def _header(value: Any, where: str, builtin: bool) -> tuple[WorkloadHeader | None, list[Problem]]:
    if not isinstance(value, dict) or set(value) != {HEADER_KEY} or not isinstance(value[HEADER_KEY], dict):
        fix = f'write the header alone on its line: {{"{HEADER_KEY}": {{"name": "...", "version": "1"}}}}'
        return None, [Problem(where, "malformed header record", fix, HEADER_KEY)]
    try:
        header = WorkloadHeader.model_validate(dict(value[HEADER_KEY]))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(part) for part in (HEADER_KEY, *err["loc"]))
            problems.append(Problem(where, err["msg"], "fix or remove this header field", field))
        return None, problems
    for key in ("compose", "provenance"):
        if getattr(header, key) is not None and not builtin:
            return None, [Problem(where, f"'{key}' is only for built-in workloads", "remove it", f"{HEADER_KEY}.{key}")]
    return header, []


def _undecodable_lines(data: bytes, label: str) -> list[Problem]:
    problems = []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = raw[exc.start]
            problems.append(
                Problem(
                    f"{label}:{lineno}",
                    f"bytes are not valid UTF-8 (byte 0x{bad:02x} at column {exc.start + 1})",
                    "re-save the file as UTF-8",
                )
            )
    return problems


def _records_jsonl(text: str, label: str) -> Iterator[tuple[str, str, Any | Problem]]:
    """(where, short where, decoded value or a Problem) for each non-blank line."""
    count = 0
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        count += 1
        if count > MAX_ITEMS + 1:
            raise WorkloadError(f"more than {MAX_ITEMS} requests", location=label, fix="split the workload")
        where = f"{label}:{lineno}"
        try:
            yield where, f"line {lineno}", _loads(line)
        except json.JSONDecodeError as exc:
            problem = Problem(where, f"malformed JSON at column {exc.colno}: {exc.msg}", _FORMAT_FIX)
            if lineno == 1 and _is_one_object(text):
                problem = Problem(
                    where,
                    "the file holds one multi-line JSON object, not JSON Lines",
                    "put each request on its own line, or wrap the requests in a JSON array",
                )
            yield where, f"line {lineno}", problem
        except ValueError as exc:
            yield where, f"line {lineno}", Problem(where, str(exc), _value_fix(exc))


def _is_one_object(text: str) -> bool:
    try:
        return isinstance(_loads(text), dict)
    except ValueError:
        return False


def _records_array(text: str, label: str) -> Iterator[tuple[str, str, Any | Problem]]:
    try:
        value = _loads(text)
    except json.JSONDecodeError as exc:
        fix = "fix the JSON syntax (a JSON array of request objects)"
        yield (
            f"{label}:{exc.lineno}",
            "",
            Problem(f"{label}:{exc.lineno}", f"malformed JSON at column {exc.colno}: {exc.msg}", fix),
        )
        return
    except ValueError as exc:
        yield label, "", Problem(label, str(exc), _value_fix(exc))
        return
    if len(value) > MAX_ITEMS + 1:
        raise WorkloadError(f"more than {MAX_ITEMS} requests", location=label, fix="split the workload")
    for index, element in enumerate(value):
        yield f"{label}: item [{index}]", f"item [{index}]", element


def _decoded(data: bytes, label: str) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise WorkloadError("the workload file is empty", location=label, fix=_FORMAT_FIX)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise problems_error(_undecodable_lines(data, label)) from None


@dataclass
class _Collected:
    """What the records of one file hold, gathered in file order with every problem found on the way."""

    builtin: bool
    header: WorkloadHeader | None = None
    items: list[WorkloadItem] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    first_use: dict[str, str] = field(default_factory=dict)

    def add(self, position: int, where: str, short: str, value: Any | Problem) -> None:
        if isinstance(value, Problem):
            self.problems.append(value)
            return
        self.problems.extend(
            Problem(where, "key given twice in one object", "keep only one", key) for key in _duplicate_keys(value)
        )
        if isinstance(value, dict) and HEADER_KEY in value:
            self._add_header(position, where, value)
            return
        item, found = validate_record(value, where)
        self.problems.extend(found)
        if self._duplicate_id(where, short, value):
            return
        if item is not None:
            self.items.append(item)

    def _add_header(self, position: int, where: str, value: dict[str, Any]) -> None:
        if position == 0:
            self.header, found = _header(value, where, self.builtin)
            self.problems.extend(found)
        else:
            self.problems.append(
                Problem(where, "the header may only be the first record", "move it to the top", HEADER_KEY)
            )

    def _duplicate_id(self, where: str, short: str, value: Any) -> bool:
        # Checked on the raw id so a duplicate is reported even when the record has other problems.
        raw_id = value.get("id") if isinstance(value, dict) else None
        if not (isinstance(raw_id, str) and raw_id.strip()):
            return False
        if raw_id in self.first_use:
            message = f"duplicate id {raw_id!r}, also used on {self.first_use[raw_id]}"
            self.problems.append(Problem(where, message, "give every request a unique id", "id"))
            return True
        self.first_use[raw_id] = short
        return False


def _check_whole(collected: _Collected, label: str, verify_sha: bool) -> None:
    header, items = collected.header, collected.items
    if collected.problems:
        raise problems_error(collected.problems)
    if len(items) > MAX_ITEMS:
        raise WorkloadError(f"{len(items)} requests, more than {MAX_ITEMS}", location=label, fix="split the workload")
    if not items and not (header is not None and header.compose):
        raise WorkloadError("the workload has no requests", location=label, fix=_FORMAT_FIX)
    if verify_sha and header is not None and header.sha256 is not None and not header.compose:
        actual = content_sha256(items)
        if actual != header.sha256:
            raise WorkloadError(
                f"content sha256 {actual[:16]}... does not match the header's {header.sha256[:16]}...",
                location=label,
                fix="restore the file, or bump the header version and record the new sha256",
            )


def parse_workload_bytes(data: bytes, label: str, *, builtin: bool = False, verify_sha: bool = True) -> ParsedFile:
    """Validate a whole workload file's bytes; every problem found is raised in one `WorkloadError`.

    With `verify_sha`, a header's `sha256` must match the content. Only a `builtin` file's header may give
    `compose` or `provenance`.
    """
    text = _decoded(data, label)
    fmt: Literal["jsonl", "json_array"] = "json_array" if text.lstrip().startswith("[") else "jsonl"
    records = _records_array(text, label) if fmt == "json_array" else _records_jsonl(text, label)
    collected = _Collected(builtin=builtin)
    for position, (where, short, value) in enumerate(records):
        collected.add(position, where, short, value)
    _check_whole(collected, label, verify_sha)
    return ParsedFile(header=collected.header, items=tuple(collected.items), format=fmt)


def read_workload_file(path: Path, label: str | None = None) -> ParsedFile:
    """Read and validate a user workload file at `path` (JSON Lines, or a JSON array)."""
    label = label or str(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise WorkloadError(
                f"file is {size / 2**20:.0f} MiB, over the {MAX_FILE_BYTES // 2**20} MiB limit",
                location=label,
                fix="split the workload into smaller files",
            )
        data = path.read_bytes()
    except OSError as exc:
        raise WorkloadError(
            f"cannot read the workload file: {exc.strerror or exc}",
            location=label,
            fix="check the path and its permissions",
        ) from exc
    return parse_workload_bytes(data, label)
