"""Suffix decoding in the managed engine environment: `arctic-inference`, built from its source distribution.

vLLM's suffix proposer imports `arctic_inference.suffix_decoding`. The registry ships the package as an sdist
whose build requirements pin a CUDA torch; a plain `pip install` would download it into an isolated build
environment. Its suffix-tree extension is plain C++ (nanobind) with no torch link, so it is built here against
the environment's own packages instead: the build tools first, then `--no-build-isolation --no-deps`, with
CMake pointed at the environment's Python.

The step is separate from the engine environment's own build: an environment built before it gets the package
added on the next `specselect setup`, and a failed build costs suffix decoding only (the marker records why, and
admission refuses suffix candidates with that reason) -- never the environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from specselect._common.fileio import atomic_write_json
from specselect._common.pyenv import file_lock, run_logged
from specselect.errors import EngineSetupError

__all__ = [
    "ARCTIC_INFERENCE_REQUIREMENT",
    "ARCTIC_INFERENCE_VERSION",
    "ARCTIC_MARKER",
    "SuffixSetup",
    "ensure_suffix_decoding",
    "install_command",
    "read_suffix_setup",
]

ARCTIC_INFERENCE_VERSION = "0.1.1"
"""The `arctic-inference` release vLLM 0.32's suffix proposer is known to work with on the CPU."""

ARCTIC_MARKER = ".specselect-arctic-inference.json"
"""Written into the environment's root when the step finished, installed or failed."""

ARCTIC_INFERENCE_REQUIREMENT = f"arctic-inference=={ARCTIC_INFERENCE_VERSION}"

_MARKER_SCHEMA = 1
# nanobind's version is the one arctic-inference's own build requirements pin; CMake 3.18 is its minimum.
_BUILD_TOOLS = ("nanobind==2.9.2", "cmake>=3.18")
_IMPORT_CHECK = (
    "import importlib.metadata as md; from arctic_inference.suffix_decoding import SuffixDecodingCache; "
    "print(md.version('arctic-inference'))"
)

Progress = Callable[[str], None]


class SuffixSetup(BaseModel):
    """How the environment's suffix-decoding step ended (the marker's content)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    requirement: str
    status: Literal["installed", "failed"]
    version: str | None = None
    build_seconds: float
    reason: str | None = None
    """A failed step: the one-line cause (the log's tail)."""
    log: str | None = None

    def line(self) -> str:
        """The one line `specselect setup` prints about suffix decoding."""
        if self.status == "installed":
            return f"suffix decoding: arctic-inference {self.version} built in {self.build_seconds:.0f} s"
        return f"suffix decoding unavailable: {self.requirement} did not build ({self.reason}); see {self.log}"


def install_command(python: Path | str) -> str:
    """What a user runs to add suffix decoding to an environment of their own (the managed one's recipe)."""
    return (
        f"{python} -m pip install {' '.join(repr(t) if '>' in t else t for t in _BUILD_TOOLS)} && "
        f"CMAKE_ARGS=-DPython_EXECUTABLE={python} {python} -m pip install --no-build-isolation --no-deps "
        f"{ARCTIC_INFERENCE_REQUIREMENT}"
    )


def read_suffix_setup(env_root: Path) -> SuffixSetup | None:
    """The step's outcome recorded in the environment at `env_root`; None when it has not run for this release."""
    try:
        data = json.loads((env_root / ARCTIC_MARKER).read_text(encoding="utf-8"))
        found = SuffixSetup.model_validate(data)
    except (OSError, ValueError):
        return None
    return found if found.requirement == ARCTIC_INFERENCE_REQUIREMENT else None


def ensure_suffix_decoding(env_root: Path, python: Path, progress: Progress | None = None) -> SuffixSetup:
    """Build `arctic-inference` into the environment once; the recorded outcome when the step already ran.

    A failed build is recorded, not raised (EngineSetupError only when the marker cannot be written): the
    environment stays usable for every other method. To try a failed build again, delete the marker.
    """
    found = read_suffix_setup(env_root)
    if found is not None:
        return found
    with file_lock(env_root.parent / f".{env_root.name}.arctic.lock"):
        found = read_suffix_setup(env_root)
        if found is None:
            found = _build(env_root, python, progress)
            atomic_write_json(
                env_root / ARCTIC_MARKER, {"schema_version": _MARKER_SCHEMA, **found.model_dump(mode="json")}
            )
    return found


def _build_env(env_root: Path, python: Path) -> dict[str, str | None]:
    """The build's environment: the environment's tools first on PATH, CMake finding its Python (and so its
    nanobind), only the suffix-tree extension (arctic's optional CUDA ops stay off)."""
    return {
        "PATH": f"{env_root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "CMAKE_ARGS": f"-DPython_EXECUTABLE={python}",
        "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1),
        "ARCTIC_INFERENCE_PRECOMPILED_OPS": None,
    }


def _build(env_root: Path, python: Path, progress: Progress | None) -> SuffixSetup:
    started = time.monotonic()
    log_path = env_root.parent / f"{env_root.name}.arctic-inference.log"
    log_path.write_text("", encoding="utf-8")
    fix = f"see {log_path}; delete {env_root / ARCTIC_MARKER} and run `specselect setup` again"
    if progress is not None:
        progress(f"building {ARCTIC_INFERENCE_REQUIREMENT} for suffix decoding (C++ extension, about a minute)")
    try:
        tools = [str(python), "-m", "pip", "install", *_BUILD_TOOLS]
        run_logged(tools, log_path, what="pip install (build tools)", fix=fix)
        build = [str(python), "-m", "pip", "install", "--no-build-isolation", "--no-deps", ARCTIC_INFERENCE_REQUIREMENT]
        run_logged(
            build,
            log_path,
            what=f"pip install {ARCTIC_INFERENCE_REQUIREMENT}",
            fix=fix,
            env=_build_env(env_root, python),
        )
        version = _installed_version(python)
    except EngineSetupError as exc:
        return SuffixSetup(
            requirement=ARCTIC_INFERENCE_REQUIREMENT,
            status="failed",
            build_seconds=round(time.monotonic() - started, 1),
            reason=exc.message,
            log=str(log_path),
        )
    return SuffixSetup(
        requirement=ARCTIC_INFERENCE_REQUIREMENT,
        status="installed",
        version=version,
        build_seconds=round(time.monotonic() - started, 1),
        log=str(log_path),
    )


def _installed_version(python: Path) -> str:
    """The built package's version, after importing the module vLLM imports (a broken extension fails here)."""
    proc = subprocess.run([str(python), "-c", _IMPORT_CHECK], capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-2:])
        raise EngineSetupError(f"arctic_inference.suffix_decoding does not import: {tail}", location=str(python))
    return proc.stdout.strip().splitlines()[-1]
