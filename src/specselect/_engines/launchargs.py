"""What the launching engines (vLLM, SGLang) share in a server's command line and launch environment.

Both run `python -m <server module>` (or the user's command prefix), spell the served name, host, port
and dtype flags the same way, read an API key from the environment variable the plan names, and own
some flags that must not be repeated in the user's engine arguments.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specselect._engines.base import LaunchSpec
from specselect._engines.server import ServerOptions
from specselect.errors import ConfigError

__all__ = [
    "command_head",
    "flag_name",
    "launch_api_key",
    "python_or_command",
    "repeated_engine_arg",
    "secret_engine_arg",
    "server_options",
    "serving_args",
]


def python_or_command(
    python: str | Path | None, command: Sequence[str] | None, *, engine: str, fix: str
) -> tuple[Path | None, tuple[str, ...] | None]:
    """An engine's python and command prefix (None when not given); ConfigError (with `fix`) when both are missing."""
    if python is None and not command:
        raise ConfigError(f"the {engine} engine needs a python or a command", location="engine", fix=fix)
    return (Path(python) if python is not None else None), (tuple(command) if command else None)


def command_head(
    python: str | Path | None, command: Sequence[str] | None, module: str, *, engine: str, fix: str
) -> list[str]:
    """`command` when given, else `[python, -m, module]`; ConfigError (naming `engine`, with `fix`) without both."""
    if command:
        return [str(part) for part in command]
    if python is not None:
        return [str(python), "-m", module]
    raise ConfigError(f"no python and no command to start {engine} with", location="engine", fix=fix)


def flag_name(arg: str) -> str:
    """The flag of an argv element (`--flag` or `--flag=value` -> `--flag`); "" for a value."""
    return arg.split("=", 1)[0] if arg.startswith("--") else ""


def serving_args(spec: LaunchSpec, port: int, *, model_flag: str) -> list[str]:
    """The model (under the engine's `model_flag`), served name, host, port and dtype flags."""
    return [
        model_flag,
        str(spec.model_path),
        "--served-model-name",
        spec.served_model_name,
        "--host",
        spec.host,
        "--port",
        str(port),
        "--dtype",
        spec.dtype,
    ]


def secret_engine_arg(spec: LaunchSpec, flag: str) -> ConfigError:
    """The error for a secret-carrying `flag` in the user's engine args (the key belongs in the environment)."""
    return ConfigError(
        f"{flag} must not be written into engine args",
        location=f"groups.{spec.group}.engine_args",
        fix="put the key in an environment variable and name it in api_key_env",
    )


def repeated_engine_arg(spec: LaunchSpec, flag: str) -> ConfigError:
    """The error for a `flag` in the user's engine args that specselect sets from the plan."""
    return ConfigError(
        f"{flag} is set by specselect from the plan and cannot be repeated in engine args",
        location=f"groups.{spec.group}.engine_args",
        fix=f"remove {flag} from engine_args and set the plan field instead",
    )


def launch_api_key(spec: LaunchSpec) -> str | None:
    """The value of `spec.api_key_env` (None when the spec names none); ConfigError when it is unset or empty."""
    if not spec.api_key_env:
        return None
    value = os.environ.get(spec.api_key_env)
    if not value:
        raise ConfigError(
            f"environment variable {spec.api_key_env} is not set",
            location=f"groups.{spec.group}.api_key_env",
            fix=f"export {spec.api_key_env}=... or remove api_key_env",
        )
    return value


def server_options(
    spec: LaunchSpec, *, env: dict[str, str], name: str, term_grace_s: float, poll_interval_s: float, **more: Any
) -> ServerOptions:
    """A launch spec's server options (log, served name, run directory, address, speculative config, key
    variable, start-up time-out) plus the engine's environment, name and timings (`more`: e.g. `health_path`)."""
    return ServerOptions(
        log_path=spec.log_path,
        served_model=spec.served_model_name,
        run_dir=spec.run_dir,
        host=spec.host,
        port=spec.port,
        env=env,
        spec_config=spec.speculative_config,
        proposal_length=spec.proposal_length,
        api_key_env=spec.api_key_env,
        name=name,
        startup_timeout_s=spec.startup_timeout_s,
        term_grace_s=term_grace_s,
        poll_interval_s=poll_interval_s,
        **more,
    )
