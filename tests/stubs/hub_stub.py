"""A stand-in model hub on 127.0.0.1, for tests and hand-run demos only: the few endpoints `huggingface_hub` calls.

Not part of the specselect package, and not a hub: it serves models a test builds, so `specselect fetch` and
`[assets] download` can be exercised with the real library and no network. The client is pointed at it through
HF_ENDPOINT. Endpoints:
- `GET /api/models/{org}/{name}/revision/{rev}`: model info (`sha`, `gated`, `siblings` with sizes, and for LFS
  files `lfs.sha256`; the library asks with `blobs=true`);
- `GET /api/models/{org}/{name}/tree/{rev}`: the file listing `snapshot_download` reads;
- `HEAD|GET /{org}/{name}/resolve/{rev}/{file}`: `X-Repo-Commit`, `ETag` (and `X-Linked-Etag`, `X-Linked-Size` for
  LFS files), `Content-Length`, and `Range: bytes=N-` answered with 206. No Xet headers: the library downloads
  over plain HTTP.
Faults a test can set on a `StubRepo`: `gated_token` (file requests without `Authorization: Bearer <it>` get 401
GatedRepo), `corrupt` (served with one byte changed, same size, the listing unchanged), `fail_once` (the first GET
answers 500), `cut_once` (the first GET closes the connection
before the last MiB, or half-way through a smaller file). `StubHub.requests` logs what was asked.

By hand: `python tests/stubs/hub_stub.py org/tiny` builds a tiny two-shard model (branch `main`; branch `dev`, one
layer deeper, at another commit), serves it and prints `HUB_READY <port>`; `--dir org/real=/path/to/model` serves a
real model directory as well; `--gated-token T` gates every repository behind token T, or only those named by
`--gated org/name`.
"""

from __future__ import annotations

import argparse
import array
import hashlib
import json
import socket
import struct
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["StubHub", "StubRepo", "tiny_model_files"]

_POINTER_SIZE = 134


def _safetensors(tensors: dict[str, tuple[int, ...]]) -> bytes:
    """A float32 safetensors file whose tensors hold their own index (deterministic, distinct bytes)."""
    header: dict[str, Any] = {}
    offset = 0
    blobs: list[bytes] = []
    for index, (name, shape) in enumerate(tensors.items()):
        count = 1
        for dim in shape:
            count *= dim
        data = (array.array("f", [float(index + 1)]) * count).tobytes()
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"".join(blobs)


def tiny_model_files(layers: int = 2, hidden: int = 64, vocab: int = 256) -> dict[str, bytes]:
    """A tiny Llama-shaped repository: config, tokenizer files, two shards with their index, and files a fetch
    leaves out (a README, a consolidated copy of the weights the index does not name, a file in a subfolder)."""
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "vocab_size": vocab,
        "torch_dtype": "float32",
    }
    first = {"model.embed_tokens.weight": (vocab, hidden)}
    second = {f"model.layers.{i}.mlp.up_proj.weight": (hidden * 2, hidden) for i in range(layers)}
    second["model.norm.weight"] = (hidden,)
    weight_map = {name: "model-00001-of-00002.safetensors" for name in first}
    weight_map.update({name: "model-00002-of-00002.safetensors" for name in second})
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    vocabulary = {f"t{i}": i for i in range(vocab)}
    return {
        "config.json": json.dumps(config).encode(),
        "generation_config.json": b'{"bos_token_id": 1, "eos_token_id": 2}',
        "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "WordLevel", "vocab": vocabulary}}).encode(),
        "tokenizer_config.json": b'{"bos_token": "t1", "eos_token": "t2"}',
        "special_tokens_map.json": b'{"bos_token": "t1", "eos_token": "t2"}',
        "model.safetensors.index.json": json.dumps(index).encode(),
        "model-00001-of-00002.safetensors": _safetensors(first),
        "model-00002-of-00002.safetensors": _safetensors(second),
        "consolidated.safetensors": _safetensors({**first, **second}),
        "README.md": b"# tiny\n",
        "original/params.json": b"{}",
    }


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _commit_of(files: dict[str, bytes]) -> str:
    digest = hashlib.sha1()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return digest.hexdigest()


@dataclass
class StubRepo:
    """One model repository: its commits (files by path), refs (branch or tag -> commit) and faults."""

    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    gated_token: str | None = None
    corrupt: set[str] = field(default_factory=set)
    fail_once: set[str] = field(default_factory=set)
    cut_once: set[str] = field(default_factory=set)

    def add_commit(self, files: dict[str, bytes], *refs: str) -> str:
        """Add a commit with `files`, point `refs` at it and return its hash."""
        commit = _commit_of(files)
        self.commits[commit] = dict(files)
        for ref in refs:
            self.refs[ref] = commit
        return commit

    def commit_of(self, revision: str) -> str | None:
        """The commit a branch, tag or commit hash names (None: no such revision)."""
        return revision if revision in self.commits else self.refs.get(revision)


def _is_lfs(name: str) -> bool:
    return name.endswith(".safetensors")


def _entry(name: str, data: bytes) -> dict[str, Any]:
    """A file as the model info's `siblings` lists it."""
    info: dict[str, Any] = {"rfilename": name, "size": len(data), "blobId": _git_blob_id(data)}
    if _is_lfs(name):
        info["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": _POINTER_SIZE}
    return info


def _tree_entry(name: str, data: bytes) -> dict[str, Any]:
    """A file as the tree listing gives it."""
    info: dict[str, Any] = {"type": "file", "path": name, "size": len(data), "oid": _git_blob_id(data)}
    if _is_lfs(name):
        info["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": _POINTER_SIZE}
    return info


class StubHub:
    """The stand-in hub in a thread of this process: `with StubHub({"org/tiny": repo}) as hub: hub.endpoint`."""

    def __init__(self, repos: dict[str, StubRepo]) -> None:
        self.repos = repos
        self.requests: list[dict[str, str | None]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:<port>`: the value of HF_ENDPOINT."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def gets(self, name: str) -> list[str | None]:
        """The Range header of every GET of file `name` (None: the whole file), in order."""
        return [r["range"] for r in self.requests if r["method"] == "GET" and r["file"] == name]

    def log(self, method: str, file: str | None, byte_range: str | None) -> None:
        """Record one request."""
        with self._lock:
            self.requests.append({"method": method, "file": file, "range": byte_range})

    def __enter__(self) -> StubHub:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class _Handler(BaseHTTPRequestHandler):
    """The stand-in hub's routes; `hub` is set on a subclass per server (`_handler_for`)."""

    hub: StubHub

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read `hub.requests`
        return

    def do_HEAD(self) -> None:
        self._route(body=False)

    def do_GET(self) -> None:
        self._route(body=True)

    def _route(self, *, body: bool) -> None:
        parts = [unquote(p) for p in urlsplit(self.path).path.split("/") if p]
        if len(parts) >= 5 and parts[0] == "api" and parts[1] == "models":
            repo, kind, rev = f"{parts[2]}/{parts[3]}", parts[4], "/".join(parts[5:])
            self.hub.log(self.command, None, None)
            self._api(repo, kind, rev)
        elif len(parts) >= 5 and parts[2] == "resolve":
            repo, rev, name = f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:])
            self.hub.log(self.command, name, self.headers.get("Range"))
            self._resolve(repo, rev, name, body=body)
        else:
            self._error(404, "RepoNotFound", "no such path")

    def _error(self, status: int, code: str, message: str) -> None:
        payload = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _json(self, obj: Any) -> None:
        payload = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _find(self, repo: str, rev: str) -> tuple[StubRepo, str] | None:
        found = self.hub.repos.get(repo)
        if found is None:
            self._error(404, "RepoNotFound", f"Repository {repo} not found")
            return None
        commit = found.commit_of(rev)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None
        return found, commit

    def _api(self, repo: str, kind: str, rev: str) -> None:
        found = self._find(repo, rev)
        if found is None:
            return
        stub, commit = found
        files = stub.commits[commit]
        if kind == "revision":
            siblings = [_entry(name, data) for name, data in sorted(files.items())]
            gated: Any = "manual" if stub.gated_token else False
            self._json({"id": repo, "sha": commit, "private": False, "gated": gated, "siblings": siblings})
        elif kind == "tree":
            self._json([_tree_entry(name, data) for name, data in sorted(files.items())])
        else:
            self._error(404, "RepoNotFound", f"no endpoint {kind}")

    def _resolve(self, repo: str, rev: str, name: str, *, body: bool) -> None:
        found = self._find(repo, rev)
        if found is None:
            return
        stub, commit = found
        if stub.gated_token and self.headers.get("Authorization") != f"Bearer {stub.gated_token}":
            self._error(401, "GatedRepo", f"Access to model {repo} is restricted. You must have access to it.")
            return
        data = stub.commits[commit].get(name)
        if data is None:
            self._error(404, "EntryNotFound", f"{name} does not exist at {commit}")
            return
        if body and name in stub.fail_once:
            stub.fail_once.discard(name)
            self._error(500, "InternalError", "the stand-in hub fails this download once")
            return
        self._send_file(stub, commit, name, data, body=body)

    def _send_file(self, stub: StubRepo, commit: str, name: str, data: bytes, *, body: bool) -> None:
        etag = hashlib.sha256(data).hexdigest() if _is_lfs(name) else _git_blob_id(data)
        served = bytes([data[0] ^ 0xFF]) + data[1:] if name in stub.corrupt else data
        start = _range_start(self.headers.get("Range")) if body else 0
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{etag}"')
        if _is_lfs(name):
            self.send_header("X-Linked-Etag", f'"{etag}"')
            self.send_header("X-Linked-Size", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if not body:
            return
        if name in stub.cut_once and not start:
            stub.cut_once.discard(name)
            self.wfile.write(served[: len(served) - min(len(served) // 2, 1 << 20)])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.wfile.write(served[start:])


def _handler_for(hub: StubHub) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"hub": hub})


def _range_start(header: str | None) -> int:
    """N of `bytes=N-` (0 when there is no Range header)."""
    if not header or not header.startswith("bytes="):
        return 0
    return int(header[len("bytes=") :].split("-", 1)[0] or 0)


def _directory_files(root: Path) -> dict[str, bytes]:
    """Every non-hidden file under `root`, by its POSIX path relative to it."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


def main(argv: list[str] | None = None) -> int:
    """Serve a tiny two-shard model (`main`, and `dev` one layer deeper) under each id given, and the files of each
    `--dir ORG/NAME=PATH` (a real model directory, branch `main`), until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repos", nargs="*", metavar="ORG/NAME")
    parser.add_argument("--dir", action="append", default=[], metavar="ORG/NAME=PATH", help="serve a directory")
    parser.add_argument("--gated-token", default=None, help="make the repositories gated behind this token")
    parser.add_argument(
        "--gated", action="append", default=[], metavar="ORG/NAME", help="gate only these (default: every one)"
    )
    args = parser.parse_args(argv)

    def token(name: str) -> str | None:
        return args.gated_token if not args.gated or name in args.gated else None

    repos: dict[str, StubRepo] = {}
    for name in args.repos:
        repo = StubRepo(gated_token=token(name))
        repo.add_commit(tiny_model_files(), "main")
        repo.add_commit(tiny_model_files(layers=3), "dev")
        repos[name] = repo
    for spec in args.dir:
        name, _, path = spec.partition("=")
        repo = StubRepo(gated_token=token(name))
        repo.add_commit(_directory_files(Path(path)), "main")
        repos[name] = repo
    with StubHub(repos) as hub:
        print(f"HUB_READY {hub.endpoint.rsplit(':', 1)[1]}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
