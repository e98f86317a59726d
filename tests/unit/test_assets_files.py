"""Content hashing (with its cache), safetensors headers and layer truncation, on tiny files written here."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from specselect._assets import identity
from specselect._assets.identity import FileHashCache, content_hash, directory_files, hash_directory, tokenizer_sha256
from specselect._assets.safetensors_meta import checkpoint_size, read_header, write_subset
from specselect._assets.truncate import keep_first_layers
from specselect.errors import EngineSetupError

_DTYPE_SIZE = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]], fill: int = 0) -> None:
    """A valid safetensors file with the given (dtype, shape) tensors; bytes are `fill + index`."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for index, (name, (dtype, shape)) in enumerate(tensors.items()):
        count = 1
        for dim in shape:
            count *= dim
        size = count * _DTYPE_SIZE[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        blobs.append(bytes([(fill + index) % 256]) * size)
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def tiny_llama(root: Path, layers: int = 3, vocab: int = 32, hidden: int = 8) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "vocab_size": vocab,
        "layer_types": ["full_attention"] * layers,
    }
    (root / "config.json").write_text(json.dumps(config))
    (root / "tokenizer.json").write_text('{"model": "tiny"}')
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {"model.embed_tokens.weight": ("BF16", (vocab, hidden))}
    for i in range(layers):
        tensors[f"model.layers.{i}.mlp.up_proj.weight"] = ("BF16", (hidden * 2, hidden))
        tensors[f"model.layers.{i}.input_layernorm.weight"] = ("F32", (hidden,))
    tensors["model.norm.weight"] = ("F32", (hidden,))
    write_safetensors(root / "model.safetensors", tensors)
    return root


def test_directory_files_skips_hidden_and_sorts(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "w.bin").write_text("x")
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / ".specselect-model.json").write_text("{}")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "lock").write_text("")
    assert directory_files(tmp_path) == ["a.json", "b/w.bin"]


def test_content_hash_depends_on_names_and_content_not_order() -> None:
    one = content_hash({"a": "1", "b": "2"})
    assert one == content_hash({"b": "2", "a": "1"})
    assert one != content_hash({"a": "2", "b": "1"})
    assert one != content_hash({"a": "1", "c": "2"})


def test_hash_directory_changes_with_any_file(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "w.bin").write_bytes(b"abc")
    first, files = hash_directory(model)
    assert set(files) == {"config.json", "w.bin"}
    (model / "w.bin").write_bytes(b"abd")
    assert hash_directory(model)[0] != first
    (model / "extra.txt").write_text("")
    assert len(hash_directory(model)[1]) == 3


def test_hash_cache_skips_unchanged_files_and_rehashes_edited_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "big.bin").write_bytes(b"x" * 1000)
    (model / "small.txt").write_text("s")
    cache_dir = tmp_path / "cache"
    calls: list[str] = []
    real = identity.sha256_file

    def counting(path: Path, chunk: int = 1 << 20) -> str:
        calls.append(Path(path).name)
        return real(path, chunk)

    monkeypatch.setattr(identity, "sha256_file", counting)
    first, _ = hash_directory(model, cache_dir)
    assert sorted(calls) == ["big.bin", "small.txt"]
    calls.clear()
    assert hash_directory(model, cache_dir)[0] == first
    assert calls == []  # everything came from the on-disk cache
    (model / "small.txt").write_text("changed!")
    second, _ = hash_directory(model, cache_dir)
    assert calls == ["small.txt"]
    assert second != first


def test_hash_cache_ignores_a_corrupt_or_foreign_cache_file(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "w").write_text("1")
    cache = FileHashCache.for_directory(model, tmp_path / "c")
    assert cache.cache_file is not None
    cache.cache_file.parent.mkdir(parents=True)
    cache.cache_file.write_text("not json")
    assert FileHashCache.for_directory(model, tmp_path / "c").sha256("w") == hash_directory(model)[1]["w"]
    cache.cache_file.write_text(json.dumps({"schema_version": 1, "root": "/elsewhere", "files": {"w": [1, 1, "x"]}}))
    assert FileHashCache.for_directory(model, tmp_path / "c").sha256("w") != "x"


def test_tokenizer_identity_prefers_tokenizer_json_then_vocab_files(tmp_path: Path) -> None:
    assert tokenizer_sha256(tmp_path) is None
    (tmp_path / "vocab.json").write_text('{"a": 0}')
    (tmp_path / "merges.txt").write_text("a b")
    by_vocab = tokenizer_sha256(tmp_path)
    (tmp_path / "merges.txt").write_text("a c")
    assert tokenizer_sha256(tmp_path) != by_vocab
    (tmp_path / "tokenizer.json").write_text("{}")
    with_json = tokenizer_sha256(tmp_path)
    (tmp_path / "merges.txt").write_text("zzz")
    assert tokenizer_sha256(tmp_path) == with_json


def test_safetensors_header_param_count(tmp_path: Path) -> None:
    model = tiny_llama(tmp_path / "m", layers=3, vocab=32, hidden=8)
    size = checkpoint_size(model)
    assert size is not None
    assert size.num_params == 32 * 8 + 3 * (16 * 8 + 8) + 8
    assert size.tensor_bytes == 32 * 8 * 2 + 3 * (16 * 8 * 2 + 8 * 4) + 8 * 4
    assert size.dtypes == ("BF16", "F32")
    assert checkpoint_size(tmp_path / "nothing-here") is None


def test_unreadable_safetensors_is_a_setup_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 100) + b"{")
    with pytest.raises(EngineSetupError, match="not a readable safetensors"):
        read_header(bad)


def test_write_subset_keeps_bytes_and_offsets(tmp_path: Path) -> None:
    src = tmp_path / "a.safetensors"
    write_safetensors(src, {"x": ("F32", (2, 2)), "y": ("BF16", (3,)), "z": ("I64", (1,))}, fill=7)
    dest = tmp_path / "b.safetensors"
    assert write_subset(src, dest, lambda name: name != "y") == 2
    tensors, metadata, start = read_header(dest)
    assert metadata == {"format": "pt"}
    assert start % 8 == 0
    by_name = {t.name: t for t in tensors}
    assert set(by_name) == {"x", "z"}
    data = dest.read_bytes()
    assert data[start + by_name["x"].begin : start + by_name["x"].end] == bytes([7]) * 16
    assert data[start + by_name["z"].begin : start + by_name["z"].end] == bytes([9]) * 8


def test_keep_first_layers_makes_a_shallow_draft(tmp_path: Path) -> None:
    base = tiny_llama(tmp_path / "base", layers=5)
    (base / "generation_config.json").write_text("{}")
    out = tmp_path / "draft"
    keep_first_layers(base, out, 2)
    config = json.loads((out / "config.json").read_text())
    assert config["num_hidden_layers"] == 2
    assert config["layer_types"] == ["full_attention"] * 2
    names = {t.name for t in read_header(out / "model.safetensors")[0]}
    assert "model.layers.1.mlp.up_proj.weight" in names
    assert not any(name.startswith(("model.layers.2.", "model.layers.4.")) for name in names)
    assert {"model.embed_tokens.weight", "model.norm.weight"} <= names
    assert (out / "tokenizer.json").read_bytes() == (base / "tokenizer.json").read_bytes()
    assert (out / "generation_config.json").exists()


def test_keep_first_layers_refuses_impossible_counts(tmp_path: Path) -> None:
    base = tiny_llama(tmp_path / "base", layers=2)
    with pytest.raises(EngineSetupError, match="cannot keep 3 of 2"):
        keep_first_layers(base, tmp_path / "out", 3)
