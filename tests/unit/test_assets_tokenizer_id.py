"""Tokenizer fingerprints and gate 4 on them, from small extracts of the real tokenizers (no weights)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specselect._assets.identity import tokenizer_sha256
from specselect._assets.refs import describe_model_dir
from specselect._assets.tokenizer_id import tokenizer_fingerprint
from specselect.records.assets import ResolvedModel

FIXTURES = Path(__file__).parent / "data" / "tokenizers"


def fixture_model(name: str) -> ResolvedModel:
    return describe_model_dir(FIXTURES / name, ref=f"fixture:{name}", snapshot="s" * 64, source="local_dir")


def edit_tokenizer(root: Path, edit: str) -> None:
    data = json.loads((root / "tokenizer.json").read_text())
    if edit == "vocab":
        vocab = data["model"]["vocab"]
        first, second = next(iter(vocab)), list(vocab)[1]
        vocab[first], vocab[second] = vocab[second], vocab[first]  # two ids swap meaning
    elif edit == "merges":
        data["model"]["merges"] = data["model"]["merges"][1:]
    elif edit == "special":
        data["added_tokens"][0]["special"] = not data["added_tokens"][0]["special"]
    (root / "tokenizer.json").write_text(json.dumps(data))


def test_the_qwen_pair_has_one_fingerprint_though_the_files_differ() -> None:
    target, draft = FIXTURES / "qwen2.5-coder-1.5b", FIXTURES / "qwen2.5-coder-0.5b"
    assert tokenizer_sha256(target) != tokenizer_sha256(draft)  # re-serialised: other bytes
    assert tokenizer_fingerprint(target) == tokenizer_fingerprint(draft)
    assert tokenizer_fingerprint(FIXTURES / "smollm2-135m") not in (None, tokenizer_fingerprint(target))


@pytest.mark.parametrize("edit", ["vocab", "merges", "special"])
def test_a_change_of_meaning_changes_the_fingerprint(tmp_path: Path, edit: str) -> None:
    root = Path(shutil.copytree(FIXTURES / "qwen2.5-coder-1.5b", tmp_path / "t"))
    before = tokenizer_fingerprint(root)
    edit_tokenizer(root, edit)
    assert tokenizer_fingerprint(root) != before


def test_metadata_outside_the_meaning_is_ignored(tmp_path: Path) -> None:
    root = Path(shutil.copytree(FIXTURES / "qwen2.5-coder-1.5b", tmp_path / "t"))
    before = tokenizer_fingerprint(root)
    data = json.loads((root / "tokenizer.json").read_text())
    data["truncation"] = {"max_length": 16}
    (root / "tokenizer.json").write_text(json.dumps(data))
    config = json.loads((root / "tokenizer_config.json").read_text())
    config.update(eos_token="<|endoftext|>", name_or_path="/somewhere/else")  # a base model's roles
    (root / "tokenizer_config.json").write_text(json.dumps(config))
    assert tokenizer_fingerprint(root) == before


def test_slow_and_binary_tokenizers(tmp_path: Path) -> None:
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "vocab.json").write_text(json.dumps({"a": 0, "b": 1, "ab": 2}))
    (slow / "merges.txt").write_text("#version: 0.2\na b\n")
    first = tokenizer_fingerprint(slow)
    (slow / "vocab.json").write_text(json.dumps({"b": 1, "ab": 2, "a": 0}))  # same map, other order
    assert tokenizer_fingerprint(slow) == first
    binary = tmp_path / "spm"
    binary.mkdir()
    (binary / "tokenizer.model").write_bytes(b"\x00sentencepiece")
    assert tokenizer_fingerprint(binary) not in (None, first)
    assert tokenizer_fingerprint(tmp_path) is None


def test_the_fingerprint_is_recorded_on_the_resolved_model() -> None:
    target = fixture_model("qwen2.5-coder-1.5b")
    assert target.tokenizer_fingerprint == tokenizer_fingerprint(FIXTURES / "qwen2.5-coder-1.5b")
    assert target.vocab_size == 151_936
