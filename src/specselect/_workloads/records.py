"""Validation of one workload record (native or ShareGPT) into a `WorkloadItem`, collecting every problem."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Literal

from specselect.records.workloads import ChatMessage, WorkloadItem

__all__ = [
    "MAX_ITEM_BYTES",
    "MAX_MAX_TOKENS",
    "NATIVE_KEYS",
    "SHAREGPT_KEYS",
    "SHAREGPT_ROLES",
    "Problem",
    "validate_record",
]

MAX_ITEM_BYTES = 1_000_000
"""Largest accepted request text (all message contents or the prompt, UTF-8 bytes)."""
MAX_MAX_TOKENS = 1_048_576
MAX_ID_CHARS = 256
MAX_CATEGORY_CHARS = 64

NATIVE_KEYS = ("id", "messages", "prompt", "max_tokens", "category")
SHAREGPT_KEYS = ("id", "conversations", "max_tokens", "category")
_MESSAGE_KEYS = ("role", "content")
_TURN_KEYS = ("from", "value")
_ROLES = ("system", "user", "assistant")
_Role = Literal["system", "user", "assistant"]
SHAREGPT_ROLES: dict[str, _Role] = {
    "human": "user",
    "gpt": "assistant",
    "system": "system",
    "user": "user",
    "assistant": "assistant",
}
"""ShareGPT `from` values and the chat role each becomes (`user`/`assistant` are accepted as aliases)."""


@dataclass(frozen=True)
class Problem:
    """One validation problem: where (file:line or file: item [i]), which field, what, and the fix."""

    where: str
    message: str
    fix: str | None = None
    field: str | None = None

    @property
    def shown_field(self) -> str | None:
        """The field name as printed: control characters (a key like "\\n" in a file) escaped, to stay one line."""
        if self.field is None or self.field.isprintable():
            return self.field
        return self.field.encode("unicode_escape").decode("ascii")

    def line(self) -> str:
        """The problem as one line: `where: field 'f': message (fix: ...)`."""
        text = f"{self.where}: "
        if self.field:
            text += f"field '{self.shown_field}': "
        text += " ".join(self.message.split())
        if self.fix:
            text += f" (fix: {' '.join(self.fix.split())})"
        return text


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class _Checker:
    """Accumulates the problems of one record."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.problems: list[Problem] = []

    def add(self, field: str | None, message: str, fix: str | None = None) -> None:
        self.problems.append(Problem(self.where, message, fix, field))

    def unknown_keys(self, obj: dict[str, Any], allowed: tuple[str, ...], prefix: str = "") -> None:
        for key in obj:
            if key in allowed:
                continue
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(allowed)}"
            self.add(f"{prefix}{key}", "unknown key", f"remove it; {hint}")

    def text(self, obj: dict[str, Any], key: str, field: str, *, required: bool = True) -> str | None:
        if key not in obj:
            if required:
                self.add(field, "missing", f'add "{key}": "..."')
            return None
        value = obj[key]
        if not isinstance(value, str):
            self.add(field, f"must be a string, got {_type_name(value)}", "write it as a JSON string")
            return None
        if not value.strip():
            self.add(field, "must not be empty", "write the text")
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            self.add(
                field,
                f"contains an unpaired UTF-16 surrogate escape at character {exc.start}",
                "escape characters outside the BMP as a surrogate pair, or write them as UTF-8",
            )
            return None
        return value


def _check_messages(chk: _Checker, messages: list[ChatMessage], field: str) -> None:
    """Rules on the whole conversation: system turns first, and it must end with a user turn."""
    seen_other = False
    for index, message in enumerate(messages):
        if message.role == "system" and seen_other:
            chk.add(
                f"{field}[{index}].role",
                "a system message may only come before the first user message",
                "move it to the start or merge it into the first system message",
            )
        seen_other = seen_other or message.role != "system"
    if messages and messages[-1].role != "user":
        last = messages[-1].role
        chk.add(
            field,
            f"the last message has role {last!r}; a request must end with a user message",
            "remove the trailing message(s) after the last user message",
        )


def _native_messages(chk: _Checker, raw: Any) -> list[ChatMessage] | None:
    if not isinstance(raw, list):
        chk.add(
            "messages",
            f'must be an array of {{"role", "content"}} objects, got {_type_name(raw)}',
            'write "messages": [{"role": "user", "content": "..."}]',
        )
        return None
    if not raw:
        chk.add("messages", "must not be empty", 'add at least one {"role": "user", "content": "..."}')
        return None
    out: list[ChatMessage] = []
    ok = True
    for index, entry in enumerate(raw):
        field = f"messages[{index}]"
        if not isinstance(entry, dict):
            chk.add(field, f"must be an object, got {_type_name(entry)}", 'write {"role": "user", "content": "..."}')
            ok = False
            continue
        before = len(chk.problems)
        chk.unknown_keys(entry, _MESSAGE_KEYS, f"{field}.")
        role = entry.get("role")
        if "role" not in entry:
            chk.add(f"{field}.role", "missing", f'add "role": one of {", ".join(_ROLES)}')
        elif role not in _ROLES:
            close = difflib.get_close_matches(str(role), _ROLES, n=1, cutoff=0.5)
            hint = f"did you mean '{close[0]}'?" if close else f"use one of {', '.join(_ROLES)}"
            chk.add(f"{field}.role", f"unknown role {role!r}", hint)
        content = entry.get("content")
        if isinstance(content, list):
            chk.add(f"{field}.content", "content parts (arrays) are not supported", "use a plain string")
        else:
            content = chk.text(entry, "content", f"{field}.content")
        if len(chk.problems) != before:
            ok = False
            continue
        out.append(ChatMessage(role=role, content=content))
    return out if ok else None


def _sharegpt_messages(chk: _Checker, raw: Any) -> list[ChatMessage] | None:
    """The conversation up to and including the last human turn, as chat messages."""
    if not isinstance(raw, list):
        chk.add(
            "conversations",
            f'must be an array of {{"from", "value"}} objects, got {_type_name(raw)}',
            'write "conversations": [{"from": "human", "value": "..."}]',
        )
        return None
    if not raw:
        chk.add("conversations", "must not be empty", 'add at least one {"from": "human", "value": "..."}')
        return None
    before = len(chk.problems)
    turns: list[tuple[int, _Role, Any]] = []
    for index, entry in enumerate(raw):
        field = f"conversations[{index}]"
        if not isinstance(entry, dict):
            chk.add(field, f"must be an object, got {_type_name(entry)}", 'write {"from": "human", "value": "..."}')
            continue
        chk.unknown_keys(entry, _TURN_KEYS, f"{field}.")
        source = entry.get("from")
        if "from" not in entry:
            chk.add(f"{field}.from", "missing", 'add "from": one of human, gpt, system')
        elif not isinstance(source, str) or source not in SHAREGPT_ROLES:
            names = tuple(SHAREGPT_ROLES)
            close = difflib.get_close_matches(str(source), names, n=1, cutoff=0.5)
            hint = f"did you mean '{close[0]}'?" if close else "use one of human, gpt, system"
            chk.add(f"{field}.from", f"unknown speaker {source!r}", hint)
        else:
            turns.append((index, SHAREGPT_ROLES[source], entry.get("value")))
    if len(chk.problems) != before:
        return None
    last_user = max((pos for pos, (_, role, _) in enumerate(turns) if role == "user"), default=None)
    if last_user is None:
        chk.add(
            "conversations",
            "has no human turn, so there is no request to send",
            'add a {"from": "human", "value": "..."} turn',
        )
        return None
    out: list[ChatMessage] = []
    for index, role, value in turns[: last_user + 1]:
        content = chk.text({"value": value}, "value", f"conversations[{index}].value")
        if content is not None:
            out.append(ChatMessage(role=role, content=content))
    return None if len(chk.problems) != before else out


def _check_common(chk: _Checker, obj: dict[str, Any]) -> tuple[str | None, int | None, str | None]:
    item_id: str | None = None
    if "id" not in obj:
        chk.add("id", "missing", 'add a unique string id, e.g. "id": "req-1"')
    elif not isinstance(obj["id"], str):
        shown = obj["id"] if isinstance(obj["id"], int | float) else "..."
        chk.add("id", f"must be a string, got {_type_name(obj['id'])}", f'quote it: "id": "{shown}"')
    elif not obj["id"].strip():
        chk.add("id", "must not be empty", 'give a unique string id, e.g. "id": "req-1"')
    elif len(obj["id"]) > MAX_ID_CHARS:
        chk.add("id", f"is {len(obj['id'])} characters long, over the {MAX_ID_CHARS} limit", "use a shorter id")
    else:
        item_id = obj["id"]
    max_tokens = obj.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        chk.add(
            "max_tokens",
            f"must be a positive integer, got {_type_name(max_tokens)}",
            'write e.g. "max_tokens": 64, or leave it out',
        )
        max_tokens = None
    elif max_tokens is not None and not 0 < max_tokens <= MAX_MAX_TOKENS:
        chk.add(
            "max_tokens",
            f"must be between 1 and {MAX_MAX_TOKENS}, got {max_tokens}",
            'write e.g. "max_tokens": 64, or leave it out',
        )
        max_tokens = None
    category = chk.text(obj, "category", "category", required=False) if "category" in obj else None
    if category is not None and len(category) > MAX_CATEGORY_CHARS:
        chk.add(
            "category",
            f"is {len(category)} characters long, over the {MAX_CATEGORY_CHARS} limit",
            'use a short label such as "code_editing"',
        )
        category = None
    return item_id, max_tokens, category


def _text_bytes(messages: list[ChatMessage] | None, prompt: str | None) -> int:
    if prompt is not None:
        return len(prompt.encode("utf-8"))
    return sum(len(m.content.encode("utf-8")) for m in messages or ())


def validate_record(value: Any, where: str) -> tuple[WorkloadItem | None, list[Problem]]:
    """Validate one decoded JSON value; a record with `conversations` is read as ShareGPT."""
    chk = _Checker(where)
    if not isinstance(value, dict):
        chk.add(
            None,
            f"expected a JSON object (one request), got {_type_name(value)}",
            'write {"id": "...", "messages": [...]} or {"id": "...", "prompt": "..."}',
        )
        return None, chk.problems
    sharegpt = "conversations" in value
    chk.unknown_keys(value, SHAREGPT_KEYS if sharegpt else NATIVE_KEYS)
    item_id, max_tokens, category = _check_common(chk, value)
    messages: list[ChatMessage] | None = None
    prompt: str | None = None
    if sharegpt:
        messages = _sharegpt_messages(chk, value["conversations"])
    elif ("messages" in value) == ("prompt" in value):
        chk.add(
            "messages",
            "give exactly one of 'messages' (chat) or 'prompt' (completion)",
            "keep one of the two keys" if "prompt" in value else 'add "messages": [{"role": "user", ...}]',
        )
    elif "messages" in value:
        messages = _native_messages(chk, value["messages"])
    else:
        prompt = chk.text(value, "prompt", "prompt")
    if messages is not None:
        _check_messages(chk, messages, "conversations" if sharegpt else "messages")
    size = _text_bytes(messages, prompt)
    if size > MAX_ITEM_BYTES:
        field = "prompt" if prompt is not None else ("conversations" if sharegpt else "messages")
        chk.add(
            field,
            f"request text is {size / 1e6:.1f} MB, over the {MAX_ITEM_BYTES / 1e6:.0f} MB limit",
            "shorten it or split it into several requests",
        )
    if chk.problems or item_id is None or (messages is None and prompt is None):
        return None, chk.problems
    item = WorkloadItem(
        id=item_id,
        messages=tuple(messages) if messages is not None else None,
        prompt=prompt,
        max_tokens=max_tokens,
        category=category,
    )
    return item, []
