"""The exact argv of a vLLM OpenAI server for a launch spec."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specselect._common.secrets import is_secret_flag
from specselect._engines.base import LaunchSpec
from specselect._engines.launchargs import command_head, flag_name, repeated_engine_arg, secret_engine_arg, serving_args
from specselect._engines.vllm.specconfig import speculative_config_json

__all__ = ["VLLM_CLI_MODULE", "VLLM_DEPLOY_PROGRAM", "build_vllm_argv"]

VLLM_CLI_MODULE = "vllm.entrypoints.cli.main"
"""`python -m vllm.entrypoints.cli.main serve` is the `vllm serve` console script run by a known python (vLLM 0.32
marks `python -m vllm.entrypoints.openai.api_server` deprecated on every start)."""
VLLM_DEPLOY_PROGRAM = ("vllm", "serve")
"""How a hand-off tells a user to start the server."""
_LEGACY_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
"""A user's command may still start this module, which takes the model as `--model`, not positionally."""

# Always owned by specselect, even when this launch does not emit them (a target-only group, say).
_RESERVED_FLAGS = frozenset(
    {
        "--model",
        "--served-model-name",
        "--host",
        "--port",
        "--speculative-config",
        "--per-request-spec-decode-metrics",
    }
)


def _model_and_serving_args(spec: LaunchSpec, port: int, head: Sequence[str]) -> list[str]:
    args = serving_args(spec, port, model_flag="--model")
    if any(_LEGACY_SERVER_MODULE in part for part in head):
        return args
    return args[1:]  # `vllm serve MODEL`: `--model` there is accepted, with a warning


def build_vllm_argv(
    spec: LaunchSpec,
    port: int,
    *,
    python: str | Path | None = None,
    command: Sequence[str] | None = None,
) -> list[str]:
    """`[python, -m, vllm.entrypoints.cli.main, serve, MODEL, ...flags, ...engine_args]` (or `command` as the head:
    `vllm serve`, a container's `docker run ... IMAGE`, a wrapper; the model goes positionally as `vllm serve` wants
    it, as `--model` only after the legacy api_server module).

    `--per-request-spec-decode-metrics summary` is added only with speculation and when the spec asks for it
    (the runner asks only when the probe found the flag: vLLM refuses it without speculation).
    """
    head = command_head(
        python,
        command,
        VLLM_CLI_MODULE,
        engine="vLLM",
        fix="give the engine environment's python or a command prefix",
    )
    if not command:
        head.append("serve")
    args = _model_and_serving_args(spec, port, head)
    if spec.max_model_len is not None:
        args += ["--max-model-len", str(spec.max_model_len)]
    args += ["--tensor-parallel-size", str(spec.tensor_parallel_size)]
    if spec.pipeline_parallel_size > 1:
        args += ["--pipeline-parallel-size", str(spec.pipeline_parallel_size)]
    if spec.data_parallel_size > 1:
        args += ["--data-parallel-size", str(spec.data_parallel_size)]
    if spec.distributed_executor_backend:
        args += ["--distributed-executor-backend", spec.distributed_executor_backend]
    if spec.speculative_config is not None:
        args += ["--speculative-config", speculative_config_json(spec.speculative_config)]
        if spec.per_request_spec_metrics:
            args += ["--per-request-spec-decode-metrics", "summary"]
    if spec.disable_prefix_caching:
        args.append("--no-enable-prefix-caching")

    ours = _RESERVED_FLAGS | {a for a in args if a.startswith("--")}
    for extra in spec.engine_args:
        flag = flag_name(extra)
        if flag and is_secret_flag(flag):
            raise secret_engine_arg(spec, flag)
        if flag in ours or (flag == "--enable-prefix-caching" and spec.disable_prefix_caching):
            raise repeated_engine_arg(spec, flag)
    return head + args + list(spec.engine_args)
