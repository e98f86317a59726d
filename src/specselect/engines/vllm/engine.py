"""The vLLM engine: starts OpenAI-compatible vLLM servers and reads their telemetry."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from specselect.engines.base import LaunchSpec, RunningServer, SanityResult
from specselect.engines.localnet import local_request
from specselect.engines.server import ServerProcess
from specselect.engines.telemetry import MetricsSnapshot, parse_prometheus
from specselect.engines.vllm.launch import build_vllm_argv, sanity_check
from specselect.errors import ConfigError, ProtocolError, ServerTimeoutError

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
        if python is None and not command:
            raise ConfigError(
                "the vLLM engine needs a python or a command",
                location="engine",
                fix="run `specselect setup` or give the python of a venv with vllm",
            )
        self._python = Path(python) if python is not None else None
        self._command = tuple(command) if command else None
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
        if spec.api_key_env:
            value = os.environ.get(spec.api_key_env)
            if not value:
                raise ConfigError(
                    f"environment variable {spec.api_key_env} is not set",
                    location=f"groups.{spec.group}.api_key_env",
                    fix=f"export {spec.api_key_env}=... or remove api_key_env",
                )
            # Through the environment, not argv, so the key never shows in `ps` or in the recorded command.
            env["VLLM_API_KEY"] = value
        return ServerProcess(
            lambda port: self.argv(spec, port),
            log_path=spec.log_path,
            served_model=spec.served_model_name,
            run_dir=spec.run_dir,
            host=spec.host,
            port=spec.port,
            env=env,
            spec_config=spec.speculative_config,
            api_key_env=spec.api_key_env,
            name=f"vLLM server for {spec.group}",
            startup_timeout_s=spec.startup_timeout_s,
            term_grace_s=self._term_grace_s,
            poll_interval_s=self._poll_interval_s,
        )

    def scrape_metrics(self, server: RunningServer, timeout_s: float = 30.0) -> str:
        """GET /metrics as text ("" when the server has no metrics endpoint)."""
        url = f"{server.base_url}/metrics"
        try:
            status, body = local_request("GET", url, timeout_s=timeout_s)
        except TimeoutError as exc:
            raise ServerTimeoutError(
                f"/metrics did not answer within {timeout_s:.0f} s", location=url, fix="read the log"
            ) from exc
        except OSError as exc:
            raise ProtocolError(f"/metrics failed: {exc}", location=url, fix="check that the server runs") from exc
        if status == 404:
            return ""
        if status != 200:
            raise ProtocolError(f"/metrics answered HTTP {status}", location=url, fix="read the server log")
        return body.decode("utf-8", errors="replace")

    def snapshot(self, server: RunningServer) -> MetricsSnapshot:
        """Scrape and parse /metrics."""
        return parse_prometheus(self.scrape_metrics(server))

    def sanity(self, server: RunningServer, timeout_s: float = 120.0) -> SanityResult:
        """The served model is listed by /v1/models and one short chat completion returns text."""
        api_key = os.environ.get(server.api_key_env) if server.api_key_env else None
        return sanity_check(server.base_url, server.served_model, api_key=api_key, timeout_s=timeout_s)
