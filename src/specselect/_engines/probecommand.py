"""How to probe an engine that a plan starts through `[engine] command`: the serving environment's python.

The probe must read the installation that will serve, so it runs where the command runs:
- `[engine] probe_command` when the plan names one (an argv prefix that runs that environment's python);
- a container (`docker run ... IMAGE`): the same image and options with `python3` as its entrypoint;
- a command that is a python itself (`/opt/vllm/bin/python -m ...`) or a script whose first line runs a python
  (`vllm serve`: the console script's shebang names its environment's python);
- anything else (a shell wrapper, `ssh host ...`): no probe, with the fix in the message.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from specselect._engines.container import parse_container_command, remove_leftovers
from specselect._plan import EngineConfig
from specselect.errors import EngineSetupError

__all__ = ["command_probe_runner", "probe_runner"]

_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")
_FIX = 'set [engine] probe_command = ["/path/to/its/env/bin/python"], the python of the environment the command serves'


def _shebang_python(program: Path) -> list[str] | None:
    """The python a script's `#!` line runs (`#!/venv/bin/python`, `#!/usr/bin/env python3`); None otherwise."""
    try:
        with open(program, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", errors="replace").split()
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")][:1]
    if words and _PYTHON_NAME.match(Path(words[0]).name):
        return words[:1] if len(words) == 1 else [words[0]]
    return None


def probe_runner(command: Sequence[str], probe_command: Sequence[str] | None = None) -> list[str]:
    """The argv prefix that runs the python of the environment `command` serves from (the probe appends
    `-c SCRIPT`); EngineSetupError, with the fix, when it cannot be found."""
    if probe_command:
        return list(probe_command)
    container = parse_container_command(command)
    if container is not None:
        return container.probe_argv()
    program = command[0]
    if _PYTHON_NAME.match(Path(program).name):
        return [program]
    found = shutil.which(program)
    if found is None:
        raise EngineSetupError(
            f"engine.command {program!r} is not an executable on PATH: cannot probe the engine it starts",
            location="engine.command",
            fix="give its full path, or " + _FIX,
        )
    python = _shebang_python(Path(found))
    if python is None:
        raise EngineSetupError(
            f"cannot tell which python serves behind engine.command {program!r} (not a python, a container or a "
            "python script)",
            location="engine.command",
            fix=_FIX,
        )
    return python


def command_probe_runner(config: EngineConfig, progress: Callable[[str], None]) -> list[str]:
    """`probe_runner` for a plan's `[engine]`; with a container runtime, first removes the containers a killed
    specselect left (`container.remove_leftovers`). ConfigError for a container command specselect cannot own."""
    if not config.command:
        raise EngineSetupError("engine.command is not set", location="engine.command", fix="give python or command")
    container = parse_container_command(config.command)
    if container is not None:
        remove_leftovers(container.runtime, progress)
    return probe_runner(config.command, config.probe_command)
