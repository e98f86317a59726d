"""The vLLM engine: starts OpenAI-compatible vLLM servers and reads their telemetry."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from specselect.engines.base import LaunchSpec, RunningServer, SanityResult
from specselect.engines.launchargs import launch_api_key, python_or_command, server_process_args
from specselect.engines.server import ServerProcess
from specselect.engines.serving import sanity_check, server_api_key, server_get
from specselect.engines.telemetry import MetricsSnapshot, parse_prometheus
from specselect.engines.vllm.launch import build_vllm_argv
from specselect.errors import ConfigError, ProtocolError

if TYPE_CHECKING:
    from specselect.engines.vllm.envsetup import EngineEnv
    from specselect.engines.vllm.probe import EngineCapabilities

__all__ = ["VllmEngine"]

# Set for every vLLM server: no usage reporting from a measurement run.
_VLLM_ENV = {"VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1"}


class VllmEngine:
    """Engine kind "vllm": `python -m vllm.entrypoints.openai.api_server` (or a user's command prefix)."""

    kind = "vllm"

    def __init__(
        self,
        python: str | Path | None = None,
        *,
        command: Sequence[str] | None = None,
        env: EngineEnv | None = None,
        term_grace_s: float = 30.0,
        poll_interval_s: float = 0.5,
    ) -> None:
        if python is None and env is not None:
            python = env.python
        self._python, self._command = python_or_command(
            python, command, engine="vLLM", fix="run `specselect setup` or give the python of a venv with vllm"
        )
        self._env = env
        self._term_grace_s = term_grace_s
        self._poll_interval_s = poll_interval_s

    def probe(self, cache_dir: Path | None = None) -> EngineCapabilities:
        """What this vLLM installation supports (read from its files; no server is started)."""
        from specselect.engines.vllm.envsetup import engine_env_from_python
        from specselect.engines.vllm.probe import probe_vllm

        env = self._env
        if env is None:
            if self._python is None:
                raise ConfigError(
                    "cannot probe vLLM behind a custom command",
                    location="engine.command",
                    fix="also give the engine python",
                )
            env = engine_env_from_python(self._python)
        return probe_vllm(env, cache_dir=cache_dir)

    def argv(self, spec: LaunchSpec, port: int) -> list[str]:
        """The exact argv a launch of `spec` on `port` runs."""
        return build_vllm_argv(spec, port, python=self._python, command=self._command)

    def launch(self, spec: LaunchSpec) -> ServerProcess:
        """A context manager yielding the ready server; `.release_check` holds the teardown check afterwards."""
        build_vllm_argv(spec, spec.port or 1, python=self._python, command=self._command)  # fail before spawning
        env = {**_VLLM_ENV, **spec.env}
        api_key = launch_api_key(spec)
        if api_key:
            # Through the environment, not argv, so the key never shows in `ps` or in the recorded command.
            env["VLLM_API_KEY"] = api_key
        return ServerProcess(
            lambda port: self.argv(spec, port),
            **server_process_args(spec),
            env=env,
            name=f"vLLM server for {spec.group}",
            term_grace_s=self._term_grace_s,
            poll_interval_s=self._poll_interval_s,
        )

    def scrape_metrics(self, server: RunningServer, timeout_s: float = 30.0) -> str:
        """GET /metrics as text ("" when the server has no metrics endpoint)."""
        status, body = server_get(server.base_url, "/metrics", timeout_s=timeout_s)
        if status == 404:
            return ""
        if status != 200:
            raise ProtocolError(
                f"/metrics answered HTTP {status}", location=f"{server.base_url}/metrics", fix="read the server log"
            )
        return body.decode("utf-8", errors="replace")

    def snapshot(self, server: RunningServer) -> MetricsSnapshot:
        """Scrape and parse /metrics."""
        return parse_prometheus(self.scrape_metrics(server))

    def sanity(self, server: RunningServer, timeout_s: float = 120.0) -> SanityResult:
        """The served model is listed by /v1/models and one short chat completion returns text."""
        return sanity_check(server.base_url, server.served_model, api_key=server_api_key(server), timeout_s=timeout_s)
