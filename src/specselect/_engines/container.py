"""Engines started in a container (`docker run ... vllm/vllm-openai:TAG`): its argv, its probe, its end.

A plan's `[engine] command` whose program is a container runtime (`docker`, `podman`, `nerdctl`) followed by
`run` puts the server in a container, and the container's life is specselect's:
- it runs attached (never `-d`), so its output lands in the group's server log, with `--rm`, a name
  `specselect-<run>-<launch>` and labels (`specselect.run`, `specselect.group`, `specselect.owner`);
- the server listens on all of the container's interfaces and the runtime publishes its port on the plan's host
  only (`-p 127.0.0.1:PORT:PORT`), unless the container shares the host's network (`--network host`);
- the model directories are mounted read-only at the same paths, so the server's arguments name them unchanged;
- its environment is passed by name (`-e NAME`): the runtime copies the value from its own environment, so no
  value (a token, an API key) is ever on a command line;
- it is stopped and removed by name when the group ends, on Ctrl-C and, through the supervisor, when specselect
  is killed (`cleanup_argvs`); a run starts by removing containers whose owning specselect is gone
  (`remove_leftovers`).
The probe runs the same image with its python as the entrypoint (`probe_argv`).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from specselect._engines.base import LaunchSpec
from specselect.errors import ConfigError

__all__ = [
    "CONTAINER_PYTHON",
    "LABEL_OWNER",
    "LABEL_RUN",
    "RUNTIMES",
    "ContainerCommand",
    "container_deploy",
    "container_launch",
    "container_name",
    "mount_roots",
    "owner_label",
    "parse_container_command",
    "remove_leftovers",
]

RUNTIMES = frozenset({"docker", "podman", "nerdctl"})
"""Programs recognised as container runtimes (by the file name of `command[0]`)."""
CONTAINER_PYTHON = "python3"
"""The probe's entrypoint inside the image (vLLM's and SGLang's images both have it on PATH)."""
LABEL_RUN, LABEL_GROUP, LABEL_OWNER = "specselect.run", "specselect.group", "specselect.owner"
CONTAINER_BIND = "0.0.0.0"
FORWARDED_ENV = ("HF_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY", "DO_NOT_TRACK")
"""Passed by name to every container (the runtime passes only those set in its environment)."""
_STOP_TIMEOUT_S = 10
_RUNTIME_TIMEOUT_S = 60.0

# `docker run` options that take no value; every other option takes one (as `--opt value` or `--opt=value`).
_FLAGS = frozenset(
    {
        "--rm",
        "--init",
        "--privileged",
        "--read-only",
        "--interactive",
        "--publish-all",
        "--no-healthcheck",
        "--oom-kill-disable",
        "--disable-content-trust",
        "--quiet",
        "--sig-proxy",
        "--help",
    }
)
_SHORT_FLAGS = frozenset("iPq")
_REFUSED = {
    "-d": "specselect runs the container attached so that it can stop it and keep its log",
    "--detach": "specselect runs the container attached so that it can stop it and keep its log",
    "-t": "a terminal would mix control codes into the server log",
    "--tty": "a terminal would mix control codes into the server log",
    "--name": "specselect names each launch's container itself",
}
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class ContainerCommand:
    """`RUNTIME run [options] IMAGE [image command]` split into its parts."""

    runtime: str
    options: tuple[str, ...]
    image: str
    entry: tuple[str, ...]

    @property
    def host_network(self) -> bool:
        """True when the container shares the host's network (its server binds the plan's host itself)."""
        opts = self.options
        for i, opt in enumerate(opts):
            if opt in ("--network=host", "--net=host"):
                return True
            if opt in ("--network", "--net") and i + 1 < len(opts) and opts[i + 1] == "host":
                return True
        return False

    def run_argv(
        self,
        *,
        name: str,
        labels: Mapping[str, str],
        publish: tuple[str, int] | None,
        env_names: Iterable[str],
        mounts: Iterable[Path],
    ) -> list[str]:
        """`RUNTIME run --rm --name N --label K=V.. [-p HOST:PORT:PORT] -e NAME.. -v P:P:ro.. OPTIONS IMAGE ENTRY`."""
        argv = [self.runtime, "run"]
        if "--rm" not in self.options:
            argv.append("--rm")
        argv += ["--name", name]
        for key, value in labels.items():
            argv += ["--label", f"{key}={value}"]
        if publish is not None and not self.host_network:
            host, port = publish
            argv += ["-p", f"{_bracket(host)}:{port}:{port}"]
        for var in sorted(set(env_names)):
            argv += ["-e", var]  # by name only: the runtime copies the value from its own environment
        for path in sorted(set(mounts)):
            argv += ["-v", f"{path}:{path}:ro"]
        return argv + list(self.options) + [self.image, *self.entry]

    def deploy_argv(self, *, publish: tuple[str, int], env_names: Iterable[str], mounts: Iterable[Path]) -> list[str]:
        """The container part of a hand-off's command: the user's own `run` with the port, environment and models."""
        argv = [self.runtime, "run"]
        if not self.host_network:
            argv += ["-p", f"{_bracket(publish[0])}:{publish[1]}:{publish[1]}"]
        for var in sorted(set(env_names)):
            argv += ["-e", var]
        for path in sorted(set(mounts)):
            argv += ["-v", f"{path}:{path}:ro"]
        return argv + list(self.options) + [self.image, *self.entry]

    def probe_argv(self) -> list[str]:
        """The same image and options with its python as the entrypoint (`-c SCRIPT` goes after it)."""
        kept = _without(self.options, {"-p", "--publish", "--entrypoint", "--label", "-l"})
        return [
            self.runtime,
            "run",
            "--rm",
            *(o for o in kept if o != "--rm"),
            "--entrypoint",
            CONTAINER_PYTHON,
            self.image,
        ]

    def cleanup_argvs(self, name: str) -> tuple[tuple[str, ...], ...]:
        """Stop (gracefully, then by force) and remove container `name`; harmless when it is already gone."""
        return ((self.runtime, "stop", "-t", str(_STOP_TIMEOUT_S), name), (self.runtime, "rm", "-f", name))


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _takes_value(opt: str) -> bool:
    if opt.startswith("--"):
        return "=" not in opt and opt not in _FLAGS
    letters = opt[1:]
    # `-it`, `-P`: flags only; `-e`, `-v`, `-p`: one value; `-eNAME=VALUE`: the value attached.
    return len(letters) == 1 and letters not in _SHORT_FLAGS


def _without(options: Sequence[str], dropped: set[str]) -> list[str]:
    """`options` without the named options and their values (both spellings)."""
    kept: list[str] = []
    skip = False
    for i, opt in enumerate(options):
        if skip:
            skip = False
            continue
        flag = opt.split("=", 1)[0]
        if flag in dropped:
            skip = opt == flag and _takes_value(opt) and i + 1 < len(options)
            continue
        kept.append(opt)
    return kept


def _refused(opt: str) -> str | None:
    flag = opt.split("=", 1)[0]
    if flag in _REFUSED:
        return flag
    if (
        flag.startswith("-")
        and not flag.startswith("--")
        and len(flag) > 2
        and set(flag[1:]) <= (_SHORT_FLAGS | {"d", "t"})
    ):
        return next((f"-{c}" for c in flag[1:] if f"-{c}" in _REFUSED), None)
    return None


def parse_container_command(command: Sequence[str] | None) -> ContainerCommand | None:
    """The container behind `command` (None when it does not start with a runtime's `run`); ConfigError for an
    option specselect must own (`-d`, `-t`, `--name`) or a command without an image."""
    if not command or len(command) < 2 or command[1] != "run" or Path(command[0]).name not in RUNTIMES:
        return None
    rest = list(command[2:])
    options: list[str] = []
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        refused = _refused(opt)
        if refused is not None:
            raise ConfigError(
                f"{refused} is not allowed in a container command ({_REFUSED[refused]})",
                location="engine.command",
                fix=f"remove {refused}",
            )
        options.append(opt)
        if _takes_value(opt) and rest:
            options.append(rest.pop(0))
    if not rest:
        raise ConfigError(
            "engine.command runs a container but names no image",
            location="engine.command",
            fix='end the run options with the image: ["docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.32.0"]',
        )
    return ContainerCommand(command[0], tuple(options), rest[0], tuple(rest[1:]))


def _run_tag(run_dir: Path) -> str:
    return hashlib.sha256(str(run_dir.absolute().parent).encode()).hexdigest()[:8]


def container_name(run_dir: Path) -> str:
    """`specselect-<run>-<launch>`: the run's work directory (hashed) and the launch's own directory name (the
    group, `.l<k>` for its k-th launch)."""
    return f"specselect-{_run_tag(run_dir)}-{_NAME_UNSAFE.sub('_', run_dir.name)}"[:128]


def _local_paths(spec: LaunchSpec) -> list[Path]:
    """The model directory and every absolute path in the speculative config that exists here (a draft, a head)."""
    paths = [spec.model_path]
    for value in (spec.speculative_config or {}).values():
        if isinstance(value, str) and value.startswith("/") and Path(value).exists():
            paths.append(Path(value))
    return paths


def container_launch(
    container: ContainerCommand,
    spec: LaunchSpec,
    port: int,
    env_names: Iterable[str],
    *,
    extra_paths: Iterable[Path] = (),
) -> tuple[list[str], LaunchSpec]:
    """A launch's head (`RUNTIME run ... IMAGE ENTRY`) and the spec as the server inside sees it: all interfaces of
    the container (its port published on the plan's host only), unless it shares the host's network.
    `extra_paths`: more files the server reads (mounted read-only like the models)."""
    head = container.run_argv(
        name=container_name(spec.run_dir),
        labels={LABEL_RUN: _run_tag(spec.run_dir), LABEL_GROUP: spec.group, LABEL_OWNER: owner_label()},
        publish=(spec.host, port),
        env_names=[*env_names, *FORWARDED_ENV],
        mounts=mount_roots([*_local_paths(spec), *extra_paths]),
    )
    inner = spec if container.host_network else spec.model_copy(update={"host": CONTAINER_BIND})
    return head, inner


def container_deploy(
    container: ContainerCommand, spec: LaunchSpec, env_names: Iterable[str]
) -> tuple[list[str], LaunchSpec]:
    """A hand-off's head and spec: the user's own container command with the port published, the environment
    passed by name and the models mounted (no specselect name or labels: those belong to the measurement)."""
    head = container.deploy_argv(
        publish=(spec.host, spec.port), env_names=env_names, mounts=mount_roots(_local_paths(spec))
    )
    inner = spec if container.host_network else spec.model_copy(update={"host": CONTAINER_BIND})
    return head, inner


def owner_label() -> str:
    """This specselect process as `pid.start-time`: a leftover's owner is gone when no such process runs."""
    me = psutil.Process()
    return f"{me.pid}.{int(me.create_time())}"


def _owner_alive(label: str) -> bool:
    pid, _, started = label.partition(".")
    try:
        return int(psutil.Process(int(pid)).create_time()) == int(started)
    except (ValueError, psutil.Error):
        return False


def mount_roots(paths: Iterable[Path]) -> set[Path]:
    """The directories to mount so that `paths` resolve in the container: a Hugging Face cache snapshot's whole
    `models--*` directory (its files link into `blobs/`), else the directory itself (a file's parent)."""
    roots: set[Path] = set()
    for given in paths:
        path = given.absolute()
        cached = next((p for p in (path, *path.parents) if p.name.startswith("models--")), None)
        roots.add(cached if cached is not None else (path.parent if path.is_file() else path))
    return roots


def remove_leftovers(runtime: str, progress: Callable[[str], None]) -> list[str]:
    """Remove the containers labelled by a specselect that is no longer running (killed before it could); the
    names removed. A runtime that does not answer is left to the probe, which says so."""
    try:
        listed = subprocess.run(
            [
                runtime,
                "ps",
                "-a",
                "--filter",
                f"label={LABEL_OWNER}",
                "--format",
                f'{{{{.Names}}}} {{{{.Label "{LABEL_OWNER}"}}}}',
            ],
            capture_output=True,
            text=True,
            timeout=_RUNTIME_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    removed: list[str] = []
    for line in listed.stdout.splitlines() if listed.returncode == 0 else ():
        name, _, owner = line.strip().partition(" ")
        if not name or _owner_alive(owner):
            continue
        progress(f"removing container {name} left by a specselect run that was killed (owner {owner or '?'})")
        try:
            subprocess.run([runtime, "rm", "-f", name], capture_output=True, timeout=_RUNTIME_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        removed.append(name)
    return removed
