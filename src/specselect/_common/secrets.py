"""Secrets: what counts as one, and keeping them out of recorded commands, log tails and plans.

Values of variables named `*KEY*`, `*TOKEN*`, `*SECRET*` (and `*PASSWORD*`) and of `--api-key VALUE`-style
flags are replaced by `***`; plan keys named like credentials and values shaped like common credentials are
found by `is_secret_key` / `looks_like_secret` (the plan loader refuses them). A secret that an engine can
only read from its arguments is handed over in a file only its owner can read (`write_private_file`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

__all__ = [
    "REDACTED",
    "is_secret_flag",
    "is_secret_key",
    "is_secret_name",
    "looks_like_secret",
    "redact_argv",
    "redact_text",
    "secret_values",
    "write_private_file",
]

REDACTED = "***"
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
_SECRET_FLAGS = frozenset({"api-key", "token", "hf-token", "secret", "password"})
# Key names whose string value is a credential; `*_env` names (which only name a variable) never match.
_SECRET_KEY_RE = re.compile(r"(^|[_-])(api[_-]?key|apikey|token|secret|password|passwd|credentials?)$", re.IGNORECASE)
# Value shapes of common credentials, wherever they appear.
_SECRET_VALUE_RE = re.compile(
    r"(^|\s|=)(sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}|Bearer\s+\S{8,})"
)
_SECRET_FLAG_SUFFIXES = ("-api-key", "-token", "-secret", "-password")
# Upper-case names only: log lines are full of harmless `num_speculative_tokens=4`-style keyword arguments.
_ASSIGNMENT = re.compile(r"\b([A-Z_][A-Z0-9_]*)=(\S+)")
_FLAG_VALUE = re.compile(r"(--[A-Za-z0-9_-]+)([= ])(\S+)")


def is_secret_name(name: str) -> bool:
    """True for environment variable names that hold secrets (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`)."""
    upper = name.upper()
    return any(marker in upper for marker in _SECRET_MARKERS)


def is_secret_key(key: str) -> bool:
    """True for configuration keys whose value is a credential (`api_key`, `hf-token`; not `api_key_env`)."""
    return bool(_SECRET_KEY_RE.search(key))


def looks_like_secret(value: str) -> bool:
    """True for text containing a value shaped like a common credential (`sk-...`, `hf_...`, `Bearer ...`)."""
    return bool(_SECRET_VALUE_RE.search(value))


def is_secret_flag(flag: str) -> bool:
    """True for command-line flags that carry a secret (`--api-key`, `--hf-token`, `--admin-api-key`, ...)."""
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
        if arg.startswith("--") and "=" in arg and is_secret_flag(arg.split("=", 1)[0]):
            out.append(f"{arg.split('=', 1)[0]}={REDACTED}")
            continue
        if arg.startswith("--") and is_secret_flag(arg):
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
        lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}" if is_secret_flag(m.group(1)) else m.group(0), text
    )


def write_private_file(path: Path, text: str) -> None:
    """Write `text` to a new file that only its owner can read or write (mode 0600 from its creation on)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
