"""Admitting a 20 GB checkpoint without reading its weights: a timing bound the GPU-readiness issue asks for.

The weight files are sparse (their data sections are holes), so the test needs no disk space; the bound is
wall-clock time of resolving the directory (identity, config, tokenizer, safetensors headers). It carries the
`timing` marker, as do the load client's accuracy tests (`test_measure_timing.py`).
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest

from specselect._assets import identity
from specselect._assets.identity import fast_file_digest, snapshot_identity
from specselect._assets.refs import resolve_model

pytestmark = pytest.mark.timing

_FILES = 4
_FILE_BYTES = 5 * 10**9


def sparse_checkpoint(root: Path, *, files: int = _FILES, file_bytes: int = _FILE_BYTES) -> Path:
    """A llama-shaped directory whose `files` safetensors shards total `files * file_bytes` bytes, all holes."""
    root.mkdir(parents=True)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 80}
    (root / "config.json").write_text(json.dumps({**config, "hidden_size": 8192, "vocab_size": 128256}))
    (root / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": {"a": 0}}}')
    weight_map: dict[str, str] = {}
    for i in range(files):
        name = f"model-{i + 1:05d}-of-{files:05d}.safetensors"
        numel = file_bytes // 4
        header = json.dumps({f"layer{i}.weight": {"dtype": "F32", "shape": [numel], "data_offsets": [0, numel * 4]}})
        raw = header.encode() + b" " * (-len(header) % 8)
        with open(root / name, "wb") as fh:
            fh.write(struct.pack("<Q", len(raw)) + raw)
            fh.truncate(8 + len(raw) + numel * 4)
        weight_map[f"layer{i}.weight"] = name
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return root


def test_a_20_gb_checkpoint_is_admitted_in_under_two_seconds(tmp_path: Path) -> None:
    model = sparse_checkpoint(tmp_path / "big")
    assert sum(p.stat().st_size for p in model.iterdir()) >= 20 * 10**9
    started = time.monotonic()
    resolved = resolve_model(str(model), home=tmp_path / "home")
    seconds = time.monotonic() - started
    assert seconds < 2.0, f"admitting the sparse 20 GB checkpoint took {seconds:.2f} s"
    assert resolved.snapshot_method == "files_and_headers"
    assert resolved.weights_bytes is not None and resolved.weights_bytes > 19 * 10**9
    again = resolve_model(str(model), home=tmp_path / "home")  # from the per-file cache
    assert again.snapshot == resolved.snapshot


def test_the_fast_identity_still_sees_a_changed_weight_and_a_renamed_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = sparse_checkpoint(tmp_path / "m", files=2, file_bytes=64 * 1024**2)
    before, method = snapshot_identity(model, None, verify_weights=False)
    assert method == "content_sha256"  # 128 MiB is small: hashed in full without being asked
    shard = model / "model-00002-of-00002.safetensors"
    digest = fast_file_digest(shard)
    with open(shard, "r+b") as fh:  # a fine-tune of the same shapes: same header, other bytes at the end
        fh.seek(shard.stat().st_size - 100)
        fh.write(b"\x01")
    assert fast_file_digest(shard) != digest
    monkeypatch.setattr(identity, "FULL_HASH_MAX_BYTES", 1024)
    fast, method = snapshot_identity(model, None)
    assert method == "files_and_headers"
    assert fast != before
    shard.rename(model / "renamed.safetensors")
    assert snapshot_identity(model, None)[0] != fast
    assert snapshot_identity(model, None, verify_weights=True)[1] == "content_sha256"
