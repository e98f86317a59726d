"""Record the files of a released SGLang that specselect's probe reads, for the tests that pin the probe to it.

    python tests/unit/data/sglang_release/refresh.py [--version 0.5.23]

Downloads the release's wheel with pip (no dependencies; sglang is never installed or imported), keeps only
what `_probe_script.py` reads (server arguments, `arg_groups/` and its `fields/`, the speculative registry,
the HTTP server's routes, the dist-info records) in `sglang-<version>.tar.xz`, and writes `release.json`: the
version, the wheel's name and sha256, each kept file's sha256 and the probe's answer on them. Nothing here
runs at test time: the tests read the recorded files offline. After a refresh, the pinning tests fail where
the new release declares algorithms or flags specselect does not map yet.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBE = HERE.parents[3] / "src" / "specselect" / "_engines" / "sglang" / "_probe_script.py"
_KEPT_DIRS = ("sglang/srt/arg_groups/",)
_KEPT_FILES = (
    "sglang/srt/server_args.py",
    "sglang/srt/speculative/spec_info.py",
    "sglang/srt/speculative/spec_registry.py",
    "sglang/srt/entrypoints/http_server.py",
)
_KEPT_RECORDS = ("METADATA", "entry_points.txt")
_VOLATILE = ("prefix", "python_version", "seconds", "sglang_dir")


def _kept(name: str) -> bool:
    if name in _KEPT_FILES:
        return True
    if any(name.startswith(d) and name.endswith(".py") and name.count("/") <= d.count("/") + 1 for d in _KEPT_DIRS):
        return True
    return ".dist-info/" in name and name.rsplit("/", 1)[-1] in _KEPT_RECORDS


def _download(version: str | None, into: Path) -> Path:
    spec = f"sglang=={version}" if version else "sglang"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", spec, "-d", str(into)],
        check=True,
    )
    return next(into.glob("sglang-*.whl"))


def _probe(root: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, str(PROBE), str(root)], check=True, capture_output=True, text=True)
    found: dict[str, object] = json.loads(done.stdout)
    return {k: v for k, v in found.items() if k not in _VOLATILE}


def record(version: str | None) -> dict[str, object]:
    """Download, trim, archive and describe one release; returns what `release.json` now says."""
    with tempfile.TemporaryDirectory() as scratch:
        wheel = _download(version, Path(scratch))
        files: dict[str, str] = {}
        buffer = io.BytesIO()
        with zipfile.ZipFile(wheel) as whl, tarfile.open(fileobj=buffer, mode="w:xz") as tar:
            for name in sorted(n for n in whl.namelist() if _kept(n)):
                data = whl.read(name)
                files[name] = hashlib.sha256(data).hexdigest()
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(data), 0
                tar.addfile(info, io.BytesIO(data))
                whl.extract(name, Path(scratch) / "site")
        found = _probe(Path(scratch) / "site")
        released = str(found["versions"]["sglang"])  # type: ignore[index]
        for old in HERE.glob("sglang-*.tar.xz"):
            old.unlink()
        (HERE / f"sglang-{released}.tar.xz").write_bytes(buffer.getvalue())
        described = {
            "version": released,
            "wheel": wheel.name,
            "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            "files": files,
            "probe": found,
        }
        (HERE / "release.json").write_text(json.dumps(described, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return described


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", help="the release to record (default: the newest)")
    described = record(parser.parse_args().version)
    probe = described["probe"]
    print(f"recorded sglang {described['version']}: {len(described['files'])} files")  # type: ignore[arg-type]
    print(f"algorithms: {', '.join(probe['algorithms'])}")  # type: ignore[index]
    return 0


if __name__ == "__main__":
    sys.exit(main())
