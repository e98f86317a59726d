"""The exception tree of specselect; the CLI maps each class to one exit code.

Every error carries a one-line message that names *where* (file, field, line) and *how to fix it*.
User errors never surface as tracebacks.
"""

from __future__ import annotations

__all__ = [
    "EXIT_CODES",
    "ArtifactError",
    "ConfigError",
    "EngineError",
    "EngineSetupError",
    "InterruptedRun",
    "MissingDependencyError",
    "PlanError",
    "ProtocolError",
    "RegressionFound",
    "ResultsError",
    "ServerCrashedError",
    "ServerStartError",
    "ServerTimeoutError",
    "SpecselectError",
    "UsageError",
    "WorkloadError",
]


class SpecselectError(Exception):
    """Base of every error specselect raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str, *, location: str | None = None, fix: str | None = None) -> None:
        self.message = message
        self.location = location
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """`location: message (fix: ...)` on a single line."""
        text = " ".join(self.message.split())
        if self.location:
            text = f"{self.location}: {text}"
        if self.fix:
            text = f"{text} (fix: {' '.join(self.fix.split())})"
        return text


class ConfigError(SpecselectError):
    """Bad user input: a plan, a workload file, a flag, a results directory."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        location: str | None = None,
        fix: str | None = None,
        problems: list[str] | None = None,
    ) -> None:
        self.problems = list(problems) if problems else []
        super().__init__(message, location=location, fix=fix)


class PlanError(ConfigError):
    """A plan file that cannot be read or does not validate; `problems` has one line per issue."""


class WorkloadError(ConfigError):
    """A workload file that cannot be read or does not validate."""


class UsageError(ConfigError):
    """A command-line flag or argument that makes no sense."""


class ResultsError(ConfigError):
    """A results directory that is missing, foreign, or from an unsupported schema version."""


class EngineSetupError(SpecselectError):
    """The engine environment or a model asset could not be prepared."""

    exit_code = 3


class MissingDependencyError(EngineSetupError):
    """An optional dependency is missing; the message carries the install command."""


class EngineError(SpecselectError):
    """A serving engine misbehaved: did not start, crashed, hung or answered nonsense."""

    exit_code = 4

    def __init__(
        self,
        message: str,
        *,
        location: str | None = None,
        fix: str | None = None,
        log_path: str | None = None,
        log_tail: str | None = None,
    ) -> None:
        self.log_path = log_path
        self.log_tail = log_tail
        super().__init__(message, location=location, fix=fix)


class ServerStartError(EngineError):
    """The server process exited before it became ready."""


class ServerTimeoutError(EngineError):
    """The server or a request did not answer within its time-out."""


class ServerCrashedError(EngineError):
    """The server process died while it was being measured."""


class ProtocolError(EngineError):
    """The server answered, but not as the OpenAI-compatible protocol says."""


class ArtifactError(SpecselectError):
    """A result file could not be written or verified (disk full, read-only, hash mismatch)."""

    exit_code = 5


class RegressionFound(SpecselectError):
    """`specselect check` measured the recorded configuration again and found it changed (one line per problem)."""

    exit_code = 6


class InterruptedRun(SpecselectError):
    """The user interrupted the run (Ctrl-C or SIGTERM); what was completed is kept."""

    exit_code = 130


EXIT_CODES: dict[type[SpecselectError], int] = {
    SpecselectError: SpecselectError.exit_code,
    ConfigError: ConfigError.exit_code,
    EngineSetupError: EngineSetupError.exit_code,
    EngineError: EngineError.exit_code,
    ArtifactError: ArtifactError.exit_code,
    RegressionFound: RegressionFound.exit_code,
    InterruptedRun: InterruptedRun.exit_code,
}
"""Exit codes of the CLI: 0 success, 1 unexpected, 2 bad input, 3 set-up, 4 engine, 5 artifacts, 6 a check found a
regression, 130 interrupted."""
