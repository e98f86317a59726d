"""The SGLang engine: starts `python -m sglang.launch_server` servers and reads their acceptance telemetry.

Same life cycle as vLLM (`engines.server.ServerProcess`: own process group, readiness on `/health`
noticing an early exit, log file, teardown of the whole group). SGLang cannot run on CPU-only machines:
there it can be probed and its command lines built, but `launch` would fail at start-up.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from specselect.artifacts.io import atomic_write_bytes
from specselect.engines.base import LaunchSpec, ReleaseCheck, RunningServer, SanityResult
from specselect.engines.launchargs import launch_api_key, python_or_command, server_process_args
from specselect.engines.redaction import REDACTED
from specselect.engines.server import ServerProcess
from specselect.engines.serving import sanity_check, server_api_key, server_get
from specselect.engines.sglang.launch import build_sglang_argv
from specselect.engines.sglang.probe import SglangCapabilities, probe_sglang
from specselect.engines.sglang.serverinfo import ServerInfoReading, ServerInfoSnapshot, parse_server_info
from specselect.engines.sglang.specargs import build_sglang_speculative_args
from specselect.engines.sglang.telemetry import (
    SglangAcceptance,
    acceptance_from_snapshots,
    acceptance_to_counters,
    to_spec_telemetry,
)
from specselect.engines.telemetry import MetricsSnapshot, SpecDecodeCounters, SpecTelemetry, parse_prometheus
from specselect.errors import ArtifactError, ConfigError, ProtocolError

__all__ = ["SERVER_INFO_PATHS", "SglangEngine"]

SERVER_INFO_PATHS: tuple[str, ...] = ("/server_info", "/get_server_info")
"""Newer SGLang serves `/server_info` (the old path is deprecated); older ones only `/get_server_info`."""

# A secret-looking name, so ServerProcess redacts the key's value from recorded commands and log tails.
_KEY_ENV = "SPECSELECT_SGLANG_API_KEY"


class _HasPython(Protocol):
    @property
    def python(self) -> Path: ...


class _ScrubbingServerProcess(ServerProcess):
    """A ServerProcess that removes a secret from the server's log file whenever the server stops.

    SGLang logs its full `ServerArgs` at start-up, the API key included.
    """

    def __init__(self, argv_for_port: Callable[[int], Sequence[str]], *, secret: str | None, **kwargs: Any) -> None:
        super().__init__(argv_for_port, **kwargs)
        self._secret = secret.encode() if secret else None
        self._log = Path(kwargs["log_path"])

    def _scrub(self) -> None:
        if not self._secret:
            return
        with contextlib.suppress(OSError, ArtifactError):
            data = self._log.read_bytes()
            if self._secret in data:
                atomic_write_bytes(self._log, data.replace(self._secret, REDACTED.encode()))

    def __enter__(self) -> RunningServer:
        try:
            return super().__enter__()
        except BaseException:
            self._scrub()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            self._scrub()

    def stop(self) -> ReleaseCheck | None:
        try:
            return super().stop()
        finally:
            self._scrub()


class SglangEngine:
    """Engine kind "sglang": `python -m sglang.launch_server` (or a user's command prefix)."""

    kind = "sglang"

    def __init__(
        self,
        python: str | Path | None = None,
        *,
        command: Sequence[str] | None = None,
        env: _HasPython | None = None,
        caps: SglangCapabilities | None = None,
        probe_env: Mapping[str, str] | None = None,
        term_grace_s: float = 30.0,
        poll_interval_s: float = 0.5,
        health_path: str = "/health",
    ) -> None:
        if python is None and env is not None:
            python = env.python
        self._python, self._command = python_or_command(
            python,
            command,
            engine="SGLang",
            fix="set engine.python to the python of an environment with sglang installed",
        )
        self._caps = caps
        self._probe_env = dict(probe_env or {})
        self._term_grace_s = term_grace_s
        self._poll_interval_s = poll_interval_s
        self._health_path = health_path

    @property
    def capabilities(self) -> SglangCapabilities | None:
        """The probe result given or found by `probe()`, used to check arguments before launching."""
        return self._caps

    def probe(self, cache_dir: Path | None = None) -> SglangCapabilities:
        """What this SGLang installation supports (read from its files; no server is started)."""
        if self._python is None:
            raise ConfigError(
                "cannot probe SGLang behind a custom command", location="engine.command", fix="also give the python"
            )
        self._caps = probe_sglang(self._python, cache_dir=cache_dir, env=self._probe_env)
        return self._caps

    def speculative_config(
        self,
        family: str,
        method: str | None,
        num_speculative_tokens: int | None,
        proposer_path: str | Path | None,
        options: Mapping[str, Any] | None = None,
        *,
        target_path: str | Path | None = None,
        tensor_parallel_size: int = 1,
        location: str = "speculative",
    ) -> dict[str, Any]:
        """The `LaunchSpec.speculative_config` of a candidate: SGLang's speculative arguments (see `specargs`)."""
        caps = self._caps
        return build_sglang_speculative_args(
            family,
            method,
            num_speculative_tokens,
            proposer_path,
            options,
            target_path=target_path,
            tensor_parallel_size=tensor_parallel_size,
            accepted_algorithms=caps.speculative_algorithms if caps is not None else None,
            accepted_flags=caps.speculative_flags if caps is not None and caps.speculative_flags else None,
            location=location,
        )

    def _enable_metrics(self) -> bool:
        return self._caps is None or self._caps.launch_flags.get("--enable-metrics", True)

    def argv(self, spec: LaunchSpec, port: int, *, api_key: str | None = None) -> list[str]:
        """The exact argv a launch of `spec` on `port` runs (the API key, when given, in clear)."""
        return build_sglang_argv(
            spec,
            port,
            python=self._python,
            command=self._command,
            api_key=api_key,
            enable_metrics=self._enable_metrics(),
        )

    def _check_launch_flags(self, argv: Sequence[str]) -> None:
        if self._caps is None or self._command:
            return
        missing = [f for f, ok in self._caps.launch_flags.items() if not ok and f in argv]
        if missing:
            raise ConfigError(
                f"SGLang {self._caps.engine_version} does not declare {', '.join(missing)}",
                location="engine",
                fix="upgrade SGLang or drop the plan settings that need these flags",
            )

    def launch(self, spec: LaunchSpec) -> ServerProcess:
        """A context manager yielding the ready server; `.release_check` holds the teardown check afterwards."""
        api_key = launch_api_key(spec)
        self._check_launch_flags(self.argv(spec, spec.port or 1, api_key=api_key))  # fail before spawning
        env = dict(spec.env)
        if api_key:
            env[_KEY_ENV] = api_key
        return _ScrubbingServerProcess(
            lambda port: self.argv(spec, port, api_key=api_key),
            secret=api_key,
            **server_process_args(spec),
            env=env,
            name=f"SGLang server for {spec.group}",
            health_path=self._health_path,
            term_grace_s=self._term_grace_s,
            poll_interval_s=self._poll_interval_s,
        )

    @staticmethod
    def _get(server: RunningServer, path: str, timeout_s: float) -> tuple[int, bytes]:
        key = server_api_key(server)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return server_get(server.base_url, path, headers=headers, timeout_s=timeout_s)

    def scrape_metrics(self, server: RunningServer, timeout_s: float = 30.0) -> str:
        """GET /metrics as text ("" when the server exports none, e.g. started without --enable-metrics)."""
        status, body = self._get(server, "/metrics", timeout_s)
        if status == 404:
            return ""
        if status != 200:
            raise ProtocolError(f"/metrics answered HTTP {status}", location=server.base_url, fix="read the server log")
        return body.decode("utf-8", errors="replace")

    def server_info(self, server: RunningServer, timeout_s: float = 30.0) -> ServerInfoReading:
        """The speculative facts of `/server_info` (or `/get_server_info` on older SGLang)."""
        paths = SERVER_INFO_PATHS
        if self._caps is not None and self._caps.server_endpoints:
            paths = tuple(p for p in SERVER_INFO_PATHS if p in self._caps.server_endpoints) or paths
        status = 404
        for path in paths:
            status, body = self._get(server, path, timeout_s)
            if status == 404:
                continue
            if status != 200:
                raise ProtocolError(f"{path} answered HTTP {status}", location=server.base_url, fix="read the log")
            try:
                answer = json.loads(body)
            except ValueError as exc:
                raise ProtocolError(
                    f"{path} did not answer JSON: {exc}", location=server.base_url, fix="read the log"
                ) from exc
            return parse_server_info(answer, location=f"{server.base_url}{path}")
        served = f"neither {' nor '.join(paths)} is" if len(paths) > 1 else f"{paths[0]} is not"
        raise ProtocolError(
            f"{served} served (HTTP {status})",
            location=server.base_url,
            fix="check that this is an SGLang server",
        )

    def snapshot(self, server: RunningServer) -> ServerInfoSnapshot:
        """/metrics and /server_info read together; a failed /server_info is recorded, not raised."""
        metrics = parse_prometheus(self.scrape_metrics(server))
        try:
            return ServerInfoSnapshot(samples=metrics.samples, server_info=self.server_info(server))
        except ProtocolError as exc:
            return ServerInfoSnapshot(samples=metrics.samples, server_info_error=exc.one_line())

    def acceptance(self, before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> SglangAcceptance:
        """The window's acceptance in SGLang's terms and the common definitions (`telemetry` module)."""
        return acceptance_from_snapshots(before, after, model_name)

    def spec_counters(self, before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> SpecDecodeCounters:
        """The window in vLLM's counter shape, for code that combines counters with `build_spec_telemetry`."""
        return acceptance_to_counters(self.acceptance(before, after, model_name), model_name)

    def spec_telemetry(
        self,
        before: MetricsSnapshot,
        after: MetricsSnapshot,
        model_name: str,
        per_request: Sequence[Mapping[str, Any] | None] = (),
    ) -> SpecTelemetry:
        """The common SpecTelemetry of a window (SGLang adds no per-request metrics; `per_request` is unused)."""
        return to_spec_telemetry(self.acceptance(before, after, model_name))

    def sanity(self, server: RunningServer, timeout_s: float = 120.0) -> SanityResult:
        """The served model is listed by /v1/models and one short chat completion returns text."""
        return sanity_check(server.base_url, server.served_model, api_key=server_api_key(server), timeout_s=timeout_s)
