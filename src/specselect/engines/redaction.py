"""Secrets out of recorded commands and log tails.

Values of variables named `*KEY*`, `*TOKEN*`, `*SECRET*` (and `*PASSWORD*`) and of `--api-key VALUE`-style
flags are replaced by `***`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["REDACTED", "is_secret_name", "redact_argv", "redact_text", "secret_values"]

REDACTED = "***"
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
_SECRET_FLAGS = frozenset({"api-key", "token", "hf-token", "secret", "password"})
_SECRET_FLAG_SUFFIXES = ("-api-key", "-token", "-secret", "-password")
# Upper-case names only: log lines are full of harmless `num_speculative_tokens=4`-style keyword arguments.
_ASSIGNMENT = re.compile(r"\b([A-Z_][A-Z0-9_]*)=(\S+)")
_FLAG_VALUE = re.compile(r"(--[A-Za-z0-9_-]+)([= ])(\S+)")


def is_secret_name(name: str) -> bool:
    """True for environment variable names that hold secrets (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`)."""
    upper = name.upper()
    return any(marker in upper for marker in _SECRET_MARKERS)


def _is_secret_flag(flag: str) -> bool:
    name = flag.lstrip("-").lower().replace("_", "-")
    return name in _SECRET_FLAGS or name.endswith(_SECRET_FLAG_SUFFIXES)


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of secret-named variables (long enough that replacing them cannot mangle ordinary text)."""
    return tuple(sorted({v for k, v in env.items() if is_secret_name(k) and len(v) >= 4}, key=len, reverse=True))


def redact_argv(argv: Sequence[str], secrets: Iterable[str] = ()) -> tuple[str, ...]:
    """Replace `--api-key VALUE` (and similar flags), `SECRET_NAME=VALUE` words and known secret values."""
    known = tuple(secrets)
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("--") and "=" in arg and _is_secret_flag(arg.split("=", 1)[0]):
            out.append(f"{arg.split('=', 1)[0]}={REDACTED}")
            continue
        if arg.startswith("--") and _is_secret_flag(arg):
            out.append(arg)
            hide_next = True
            continue
        out.append(redact_text(arg, known))
    return tuple(out)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove secrets from free text such as a log tail."""
    for value in sorted(set(secrets), key=len, reverse=True):
        if value:
            text = text.replace(value, REDACTED)
    text = _ASSIGNMENT.sub(lambda m: f"{m.group(1)}={REDACTED}" if is_secret_name(m.group(1)) else m.group(0), text)
    return _FLAG_VALUE.sub(
        lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}" if _is_secret_flag(m.group(1)) else m.group(0), text
    )
