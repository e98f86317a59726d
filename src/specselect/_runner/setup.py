"""`specselect setup`: the default plan's engine environment, prepared and probed once (idempotent)."""

from __future__ import annotations

from pathlib import Path

from specselect._engines import create_engine
from specselect._plan import load_plan
from specselect._runner.progress import Progress
from specselect.errors import EngineSetupError

__all__ = ["DEFAULT_PLAN", "prepare_default_engine"]

DEFAULT_PLAN = "builtin:cpu-smoke"
"""The plan `make run` runs; `specselect setup` installs what it needs."""


def prepare_default_engine(home: Path, progress: Progress) -> Path:
    """Install (once) and probe the default plan's engine; its python, or EngineSetupError when it cannot be
    probed."""
    plan = load_plan(DEFAULT_PLAN).plan
    setup = create_engine(plan.engine).prepare(plan, home=home, progress=progress.info)
    if setup.caps is None or setup.python is None:
        raise EngineSetupError(
            f"the engine environment could not be probed: {setup.probe_error}",
            location=str(home),
            fix="read the install log under envs/ and run `specselect setup` again",
        )
    progress.info(f"{setup.caps.kind} {setup.caps.engine_version} ({setup.python}), device {setup.caps.device_kind}")
    return setup.python
