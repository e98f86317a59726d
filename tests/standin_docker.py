#!/usr/bin/env python3
"""A stand-in container runtime for tests: `docker run/stop/rm/ps/logs` over the real CPU vLLM, no daemon.

What it keeps of a real runtime (what specselect's container handling depends on):
- a "container" is a process group of its own (a new session), NOT a child that dies with the client: killing
  `docker run` (even with SIGKILL) leaves it running until `docker stop` / `docker rm -f`, as with a daemon;
- `run` stays attached: the container's output is copied to the client's stdout; SIGTERM/SIGINT to the client is
  passed on to the container (unless `--sig-proxy=false`); with `--rm` its state goes when it ends;
- its environment is clean: only `-e NAME` (the client's value) and `-e NAME=VALUE`, plus PATH and its own HOME;
- a path argument that exists on the host but under no `-v` mount is refused (the file would not be there);
- `-p HOST:PORT:PORT` publishes on HOST: the server inside binds `--host 0.0.0.0`, which is rewritten to HOST
  (no network namespace here; host and container port must be equal);
- images: `vllm/vllm-openai:*` runs `vllm serve` (the managed engine env's `python -m vllm.entrypoints.cli.main
  serve`); `--entrypoint python3` runs that env's python.
State lives in $STANDIN_DOCKER_STATE (one JSON file and one log per container); the engine env's python is
$STANDIN_DOCKER_PYTHON.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_VALUE_OPTS = {"--name", "--label", "-l", "-p", "--publish", "-e", "--env", "-v", "--volume", "--entrypoint"}
_FLAG_OPTS = {"--rm", "--init", "--privileged", "-i", "--interactive"}


def _state() -> Path:
    root = Path(os.environ["STANDIN_DOCKER_STATE"])
    (root / "containers").mkdir(parents=True, exist_ok=True)
    return root


def _record(name: str) -> Path:
    return _state() / "containers" / f"{name}.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _parse_run(args: list[str]) -> tuple[dict[str, list[str]], str, list[str]]:
    opts: dict[str, list[str]] = {}
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if "=" in opt and opt.startswith("--"):
            opt, value = opt.split("=", 1)
        elif opt in _FLAG_OPTS:
            value = ""
        else:
            value = args.pop(0)
        opts.setdefault(opt, []).append(value)
    if not args:
        sys.exit("standin-docker: no image")
    return opts, args[0], args[1:]


def _container_env(opts: dict[str, list[str]], home: Path) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    for item in opts.get("-e", []) + opts.get("--env", []):
        name, eq, value = item.partition("=")
        if eq:
            env[name] = value
        elif name in os.environ:
            env[name] = os.environ[name]
    return env


def _check_mounts(opts: dict[str, list[str]], argv: list[str]) -> None:
    mounts = [Path(v.split(":")[1]) for v in opts.get("-v", []) + opts.get("--volume", [])]
    for arg in argv:
        if arg.startswith("/") and Path(arg).exists() and not any(Path(arg).is_relative_to(m) for m in mounts):
            sys.exit(f"standin-docker: {arg} is not mounted into the container (add -v {arg}:{arg})")


def _command(opts: dict[str, list[str]], image: str, rest: list[str]) -> list[str]:
    python = os.environ["STANDIN_DOCKER_PYTHON"]
    entry = opts.get("--entrypoint")
    if entry:
        if Path(entry[-1]).name not in ("python", "python3"):
            sys.exit(f"standin-docker: no {entry[-1]} in image {image}")
        return [python, *rest]
    if not image.startswith("vllm/vllm-openai:"):
        sys.exit(f"standin-docker: Unable to find image '{image}' locally")
    argv = [python, "-m", "vllm.entrypoints.cli.main", "serve", *rest]
    published = (opts.get("-p") or opts.get("--publish") or [""])[-1].rsplit(":", 2)
    if "--host" in argv and len(published) == 3:
        if published[1] != published[2]:
            sys.exit("standin-docker: host and container port must be equal here")
        argv[argv.index("--host") + 1] = published[0].strip("[]")
    return argv


def run(args: list[str]) -> int:
    """`docker run`: start the container detached from this client, then follow it attached."""
    opts, image, rest = _parse_run(args)
    name = (opts.get("--name") or [f"standin-{os.getpid()}"])[-1]
    if _record(name).exists():
        print(f"standin-docker: Conflict. The container name {name!r} is already in use", file=sys.stderr)
        return 125
    _check_mounts(opts, rest)
    argv = _command(opts, image, rest)
    home = _state() / "homes" / name
    home.mkdir(parents=True, exist_ok=True)
    log = _state() / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_container_env(opts, home),
            cwd=home,
            start_new_session=True,
        )
    labels = dict(item.partition("=")[::2] for item in opts.get("--label", []) + opts.get("-l", []))
    record = {"name": name, "pid": proc.pid, "labels": labels, "rm": "--rm" in opts, "argv": argv}
    _record(name).write_text(json.dumps(record))

    def forward(signum: int, frame: object) -> None:
        os.killpg(proc.pid, signum)

    if (opts.get("--sig-proxy") or ["true"])[-1] != "false":
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, forward)
    return _follow(proc, log, name)


def _follow(proc: subprocess.Popen[bytes], log: Path, name: str) -> int:
    with open(log, "rb") as fh:
        while True:
            code = proc.poll()
            chunk = fh.read()
            if chunk:
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
            if code is not None and not chunk:
                break
            time.sleep(0.2)
    record = json.loads(_record(name).read_text()) if _record(name).exists() else {}
    if record.get("rm"):
        _record(name).unlink(missing_ok=True)
    return code if code >= 0 else 128 - code


def _kill(name: str, grace_s: float) -> bool:
    if not _record(name).exists():
        print(f"Error response from daemon: No such container: {name}", file=sys.stderr)
        return False
    pid = json.loads(_record(name).read_text())["pid"]
    if _alive(pid):
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
    return True


def stop(args: list[str]) -> int:
    """`docker stop [-t N] NAME...`."""
    grace = float(args[args.index("-t") + 1]) if "-t" in args else 10.0
    names = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-t")]
    return 0 if all([_kill(name, grace) for name in names]) else 1


def rm(args: list[str]) -> int:
    """`docker rm -f NAME...`: kill and forget."""
    ok = True
    for name in (a for a in args if not a.startswith("-")):
        ok = _kill(name, 0.0) and ok
        _record(name).unlink(missing_ok=True)
    return 0 if ok else 1


def ps(args: list[str]) -> int:
    """`docker ps [-a] [--filter label=KEY] [--format '{{.Names}} {{.Label "KEY"}}']`."""
    wanted = [
        f.split("=", 1)[1] for i, f in enumerate(args) if i and args[i - 1] == "--filter" and f.startswith("label=")
    ]
    fmt = args[args.index("--format") + 1] if "--format" in args else "{{.Names}}"
    for path in sorted((_state() / "containers").glob("*.json")):
        record = json.loads(path.read_text())
        if not _alive(record["pid"]) and "-a" not in args:
            continue
        if all(key.split("=")[0] in record["labels"] for key in wanted):
            line = fmt.replace("{{.Names}}", record["name"])
            for key, value in record["labels"].items():
                line = line.replace(f'{{{{.Label "{key}"}}}}', value)
            print(line)
    return 0


def logs(args: list[str]) -> int:
    """`docker logs NAME`."""
    sys.stdout.write((_state() / f"{args[-1]}.log").read_text(errors="replace"))
    return 0


def main(argv: list[str]) -> int:
    """Dispatch a docker subcommand."""
    commands = {"run": run, "stop": stop, "rm": rm, "ps": ps, "logs": logs}
    if not argv or argv[0] not in commands:
        print(f"standin-docker: unsupported: {' '.join(argv[:1])}", file=sys.stderr)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
